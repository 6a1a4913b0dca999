"""``assay compare RUN_A RUN_B``: two stored runs side by side, per metric.

Per metric: mean A, mean B, the difference B − A, its bootstrap 95% CI and the sign-flip
p-value where samples pair up by id (`assay.store.compare`, as the dashboard's compare page),
and a WARNING line for each metric whose result signatures differ between the runs
(another model or weights, judge, prompt, method, parameter or Assay version).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from assay.cli.application import app
from assay.cli.consoles import messages, results
from assay.cli.options import StoreUrlOption

EXIT_USAGE = 2


def _number(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "N/A"
    text = f"{value:.3e}" if abs(value) >= 1e6 else f"{value:.4f}"
    return f"+{text}" if signed and value > 0 else text


def warning_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One ``WARNING:`` line per metric whose signatures differ, naming what differs."""
    return [
        f"WARNING: {row['metric']}: the runs' signatures differ ("
        + "; ".join(row["signature_differences"])
        + "): the difference may not be the system's"
        for row in rows
        if row["signature_differences"]
    ]


@app.command("compare")
def compare_command(
    run_a: Annotated[str, typer.Argument(help="Run A: RUN_ID, key=value or RUN_ID:key=value.")],
    run_b: Annotated[str, typer.Argument(help="Run B, compared against A (B − A).")],
    db: StoreUrlOption = None,
    output_format: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Compare two stored runs per metric, warning where their signatures differ."""
    from rich.markup import escape
    from rich.table import Table

    from assay.core.jsonout import dumps
    from assay.store.db import Store, StoreError, default_url
    from assay.store.selections import Selection

    err = messages()
    if output_format not in {"table", "json"}:
        err.print(
            f"[bold red]error:[/] --format must be table or json, got {escape(output_format)!r}"
        )
        raise typer.Exit(EXIT_USAGE)
    try:
        store = Store(db or default_url())
    except StoreError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    try:
        for text in (run_a, run_b):
            run_id = Selection.parse(text).run_id
            if run_id and not store.run_exists(run_id):
                err.print(f"[bold red]error:[/] no run {escape(run_id)!r} in {store.safe_url}")
                raise typer.Exit(EXIT_USAGE)
        rows = store.compare(run_a, run_b)
    finally:
        store.close()
    warnings = warning_lines(rows)
    if output_format == "json":
        labels = Selection.parse(run_a).label(), Selection.parse(run_b).label()
        typer.echo(dumps({"a": labels[0], "b": labels[1], "rows": rows}, indent=2))
        for line in warnings:
            err.print(escape(line), highlight=False)
        return
    table = Table("metric", "mean A", "mean B", "B − A", "95% CI", "p", "n A / n B / pairs")
    for row in rows:
        ci = (
            "N/A"
            if row["ci_low"] is None
            else f"[{_number(row['ci_low'])}, {_number(row['ci_high'])}]"
        )
        table.add_row(
            escape(row["metric"]),
            _number(row["mean_a"]),
            _number(row["mean_b"]),
            _number(row["diff"], signed=True),
            escape(ci),
            _number(row["p_value"]),
            f"{row['n_a']} / {row['n_b']} / {row['n_pairs']}",
        )
    out = results()
    out.print(table)
    for line in warnings:
        out.print(escape(line), highlight=False)
