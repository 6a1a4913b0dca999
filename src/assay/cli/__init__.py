"""The ``assay`` command line: a thin layer over the library's public functions.

Each command lives in its own module of this package and registers itself on ``app``.
"""

from __future__ import annotations

import importlib

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

for _module in ("metrics_cmd", "evaluate", "json_eval", "serve"):
    try:
        importlib.import_module(f"{__name__}.{_module}")
    except ModuleNotFoundError as exc:  # a command module not written yet
        if exc.name != f"{__name__}.{_module}":
            raise

__all__ = ["app"]
