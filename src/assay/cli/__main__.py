"""``python -m assay.cli``: the ``assay`` command."""

from assay.cli import app

app(prog_name="assay")
