"""The ``assay`` Typer application that every command module registers itself on."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.markup import escape

from assay.cli import consoles
from assay.core.version import __version__

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
        typer.echo(f"assay {__version__}")
        raise typer.Exit()


def _show_warning(fallback: Any) -> Any:
    """``warnings.showwarning`` for a command: Assay's own warnings as one line each
    (``note:`` for an `AssayNote`, ``warning:`` for another `AssayWarning`), with no
    file, line or source; any other warning as Python shows it."""

    def show(message: Any, category: type, *args: Any, **kwargs: Any) -> None:
        from assay.core.config import AssayNote, AssayWarning

        if issubclass(category, AssayWarning):
            label = "note" if issubclass(category, AssayNote) else "warning"
            consoles.messages().print(f"[yellow]{label}:[/yellow] {escape(str(message))}")
        else:
            fallback(message, category, *args, **kwargs)

    return show


#: allocations between two collections of the garbage collector's youngest generation
#: while a command runs (Python's default: 700)
YOUNG_COLLECTION_EVERY = 20_000


@contextmanager
def _fewer_young_collections() -> Iterator[None]:
    """The cyclic garbage collector's youngest generation collected every
    `YOUNG_COLLECTION_EVERY` allocations while a command runs, the older ones as before.
    A run makes and drops a few container objects a sample (the sample, its results,
    their dicts), which reference counting frees; collecting every 700 allocations
    walked them again and again for nothing (about a fifth of a streamed run's time at
    100,000 samples of one cheap metric). Restored when the command ends."""
    before = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@app.callback()
def main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Assay: offline-first quality metrics for LLM applications."""
    ctx.with_resource(warnings.catch_warnings())  # restored when the command ends
    ctx.with_resource(_fewer_young_collections())
    warnings.showwarning = _show_warning(warnings.showwarning)


__all__ = ["app"]
