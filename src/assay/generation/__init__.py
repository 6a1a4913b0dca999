"""Test sets from a team's own documents: ``assay generate`` (being built; see docs/generate.md)."""
