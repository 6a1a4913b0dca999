"""The version of Assay, as ``assay --version`` prints it and signatures record it."""

__version__ = "0.1.0"
