"""The ``assay`` command line: a thin layer over the library's public functions.

Each command lives in its own module of this package and registers itself on ``app``.
"""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(
    name="assay",
    help=(
        "Assay measures the quality of what LLM applications say: chatbot answers, RAG "
        "answers with their contexts, agent runs and extracted JSON. Every metric works "
        "offline; an LLM judge is opt-in."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from assay import __version__

        typer.echo(f"assay {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Assay: offline-first quality metrics for LLM applications."""


# the command modules register themselves on `app` when imported
from assay.cli import compare_cmd, evaluate, json_eval, metrics_cmd, serve  # noqa: E402

__all__ = ["app", "compare_cmd", "evaluate", "json_eval", "metrics_cmd", "serve"]
