"""``assay metrics``: the catalogue of registered metrics and suites."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from assay.cli import consoles
from assay.cli.application import app
from assay.metrics.registry import SUITE_DESCRIPTIONS, list_metrics, metric_class, suite


@app.command("metrics")
def metrics_command(
    name: Annotated[
        str | None, typer.Argument(help="Only this metric (its name or an alias).")
    ] = None,
    family: Annotated[
        str | None, typer.Option("--family", "-f", help="Only this family (e.g. rag, safety).")
    ] = None,
    suite_name: Annotated[
        str | None, typer.Option("--suite", "-s", help="Only the metrics of this suite.")
    ] = None,
    suites: Annotated[bool, typer.Option("--suites", help="List the suites instead.")] = False,
    output_format: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    validity: Annotated[
        bool,
        typer.Option(
            "--validity",
            help="Show the validity cards: agreement with human labels on development data, "
            "findings and known failure modes.",
        ),
    ] = False,
) -> None:
    """List every metric with its aliases, description, inputs, range and polarity."""
    console = consoles.results()
    err = consoles.messages()
    problem = None
    families = sorted({c.family for c in list_metrics()})
    if output_format not in {"table", "json"}:
        problem = f"--format must be table or json, got {output_format!r}"
    elif family is not None and family not in families:
        problem = f"unknown family {family!r}; families: {', '.join(families)}"
    elif suite_name is not None and suite_name not in SUITE_DESCRIPTIONS:
        problem = f"unknown suite {suite_name!r}; suites: {', '.join(SUITE_DESCRIPTIONS)}"
    elif name is not None:
        try:
            name = metric_class(name).name
        except KeyError as exc:
            problem = str(exc.args[0])
    if problem is not None:
        err.print(f"[red]error:[/red] {escape(problem)}")
        raise typer.Exit(2)
    if suites:
        rows = [
            {"suite": s, "description": d, "metrics": suite(s)}
            for s, d in SUITE_DESCRIPTIONS.items()
        ]
        if output_format == "json":
            typer.echo(json.dumps(rows, indent=2))
            return
        table = Table("suite", "metrics", "description", show_lines=False)
        for row in rows:
            table.add_row(row["suite"], str(len(row["metrics"])), row["description"])
        console.print(table)
        return
    classes = list_metrics(family)
    if suite_name:
        members = set(suite(suite_name))
        classes = [c for c in classes if c.name in members]
    if name is not None:
        classes = [c for c in classes if c.name == name]
    if validity:
        _print_cards([c.name for c in classes], output_format)
        return
    if output_format == "json":
        typer.echo(json.dumps([c.info() for c in classes], indent=2))
        return
    table = Table(
        "metric", "aliases", "family", "inputs", "range", "better", "description", show_lines=False
    )
    for cls in classes:
        low, high = cls.value_range
        unit = "" if cls.unit in {"ratio", "bool", "score"} else f" {cls.unit}"
        table.add_row(
            cls.name,
            ", ".join(cls.aliases) or "-",
            cls.family,
            ", ".join(cls.requires) or "-",
            f"{low:g}..{'' if high is None else f'{high:g}'}{unit}",
            "higher" if cls.higher_is_better else "lower",
            cls.description(),
        )
    console.print(table)


def _print_cards(names: list[str], output_format: str) -> None:
    """The validity cards of these metrics, from the shipped cards file."""
    from assay.outputs.validity_cards import card_renderables, load_cards

    cards = load_cards()["cards"]
    if output_format == "json":
        typer.echo(json.dumps({n: cards[n] for n in names}, indent=2, ensure_ascii=False))
        return
    console = consoles.results()
    for card_name in names:
        for renderable in card_renderables(card_name, cards[card_name]):
            console.print(renderable)
        console.print()
