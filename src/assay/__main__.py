"""``python -m assay``: the ``assay`` command (`assay.cli.__main__`)."""

import assay.cli.__main__  # noqa: F401  (importing it runs the command)
