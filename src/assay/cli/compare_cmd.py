"""``assay compare RUN_A RUN_B``: two stored runs side by side, per metric.

Per metric: mean A, mean B, the difference B − A, its bootstrap 95% CI and the sign-flip
p-value where samples pair up by id (`assay.store.compare`, as the dashboard's compare page),
and a WARNING line for each metric whose result signatures differ between the runs
(another model or weights, judge, prompt, method, parameter or Assay version).
``--format markdown`` prints the same as a GitHub-flavoured Markdown table for a pull
request's comment (`markdown_comparison`).
"""

from __future__ import annotations

import re
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


#: what could break out of a Markdown table cell or change its rendering: the
#: backslash, emphasis, code, links, HTML, strike-through, the cell separator
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~!])")
#: line breaks and other control characters, which would end a table row
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def markdown_text(text: object) -> str:
    """``text`` for one line of Markdown (a table cell, a heading): control characters
    and line breaks become a space, Markdown's special characters are backslash-escaped
    (a run name is untrusted: ``a|b`` stays one cell, ``<img>`` stays text)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _CONTROL.sub(" ", str(text)).strip())


def markdown_comparison(label_a: str, label_b: str, rows: list[dict[str, Any]]) -> str:
    """The comparison of run B against run A as Markdown: a heading naming both, one
    table row per metric (A mean, B mean, B − A, its 95% CI, the paired p-value, the pairs
    where B is above, level with or below A, the counts), then a warning line for each
    metric whose signatures differ."""
    a, b = markdown_text(label_a), markdown_text(label_b)
    lines = [
        f"#### Assay: B ({b}) against A ({a})",
        "",
        "| metric | A mean | B mean | B − A | 95% CI | p | B above / level / below A "
        "| n A / n B / pairs |",
        "|---|--:|--:|--:|---|--:|---|---|",
    ]
    for row in rows:
        ci = (
            "N/A"
            if row["ci_low"] is None
            else f"{_number(row['ci_low'])} to {_number(row['ci_high'])}"
        )
        wins = f"{row['above']} / {row['level']} / {row['below']}" if row["n_pairs"] else "-"
        lines.append(
            f"| {markdown_text(row['metric'])} | {_number(row['mean_a'])} "
            f"| {_number(row['mean_b'])} | {_number(row['diff'], signed=True)} | {ci} "
            f"| {_number(row['p_value'])} | {wins} "
            f"| {row['n_a']} / {row['n_b']} / {row['n_pairs']} |"
        )
    warnings = warning_lines(rows)
    if warnings:
        lines.append("")
        lines.extend(f"> {markdown_text(line)}" for line in warnings)
    return "\n".join(lines) + "\n"


@app.command("compare")
def compare_command(
    run_a: Annotated[str, typer.Argument(help="Run A: RUN_ID, key=value or RUN_ID:key=value.")],
    run_b: Annotated[str, typer.Argument(help="Run B, compared against A (B − A).")],
    db: StoreUrlOption = None,
    output_format: Annotated[
        str,
        typer.Option(
            "--format", help="table, json, or markdown (a table for a pull request's comment)."
        ),
    ] = "table",
) -> None:
    """Compare two stored runs per metric, warning where their signatures differ."""
    from rich.markup import escape
    from rich.table import Table

    from assay.core.jsonout import dumps
    from assay.store.db import Store, StoreError, default_url
    from assay.store.selections import Selection

    err = messages()
    if output_format not in {"table", "json", "markdown"}:
        err.print(
            "[bold red]error:[/] --format must be table, json or markdown, got "
            f"{escape(output_format)!r}"
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
    labels = Selection.parse(run_a).label(), Selection.parse(run_b).label()
    if output_format == "markdown":
        typer.echo(markdown_comparison(*labels, rows), nl=False)
        return
    if output_format == "json":
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
