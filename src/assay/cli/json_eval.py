"""``assay json-eval``: compare JSON outputs with ground-truth JSON (JSON comparison), and
``assay json-strategies``: check and create field-strategy config files.

A thin layer over `assay.structured`: `load_pairs` reads the input, `evaluate_pairs` scores
it, `field_aggregates` summarises the fields. Exit code 2 when the input as a whole is
unusable (a path that does not exist, an invalid strategy config); 0 otherwise, also when
single documents are malformed (they are reported and written as error rows).
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from assay.cli import consoles
from assay.cli.application import app

if TYPE_CHECKING:
    from assay.structured import DocResult, FieldAggregate, RQSWeights

EXIT_BAD_INPUT = 2
SCORES = ("completeness", "hallucination", "accuracy", "rqs")

strategies_app = typer.Typer(
    help="Check and create field-strategy config files for 'assay json-eval'.",
    no_args_is_help=True,
)
app.add_typer(strategies_app, name="json-strategies")


def _fail(message: str) -> typer.Exit:
    consoles.messages().print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(EXIT_BAD_INPUT)


def _parse_weights(text: str | None) -> RQSWeights:
    from assay.structured import RQSWeights

    if not text:
        return RQSWeights()
    values: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--weights")
        try:
            values[name.strip()] = float(value)
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not a number", param_hint="--weights") from None
    try:
        return RQSWeights.coerce(values)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--weights") from None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def summarise(results: list[DocResult]) -> dict[str, Any]:
    """Means of the four scores over the documents that were evaluated."""
    done = [r.result for r in results if r.result is not None]
    summary: dict[str, Any] = {"documents": len(results), "evaluated": len(done)}
    summary["errors"] = len(results) - len(done)
    for name in SCORES:
        summary[f"mean_{name}"] = fmean(getattr(r, name) for r in done) if done else None
    return summary


def _documents_table(results: list[DocResult], summary: dict[str, Any], limit: int) -> Table:
    table = Table(title="JSON evaluation", title_justify="left")
    table.add_column("document", overflow="fold")
    for name, arrow in zip(SCORES, ("↑", "↓", "↑", "↑"), strict=True):
        table.add_column(f"{name} {arrow}", justify="right")
    table.add_column("fields", justify="right")
    table.add_column("error", overflow="fold")
    for doc in results[:limit]:
        r = doc.result
        if r is None:
            table.add_row(escape(doc.name), "-", "-", "-", "-", "-", escape(doc.error or ""))
            continue
        cls = r.classification
        table.add_row(
            escape(doc.name),
            _fmt(r.completeness),
            _fmt(r.hallucination),
            _fmt(r.accuracy),
            _fmt(r.rqs),
            f"{len(cls.both_non_null)}/{len(cls.gt_non_null)}",
            "",
        )
    if len(results) > limit:
        table.add_row(f"… {len(results) - limit} more (see --out)", "", "", "", "", "", "")
    table.add_section()
    table.add_row(
        f"mean of {summary['evaluated']}",
        *(_fmt(summary[f"mean_{name}"]) for name in SCORES),
        "",
        f"{summary['errors']} error(s)" if summary["errors"] else "",
    )
    return table


def _fields_table(aggregates: list[FieldAggregate], top: int) -> Table | None:
    troubled = [a for a in aggregates if a.missing or a.hallucinated or a.wrong][:top]
    if not troubled:
        return None
    table = Table(title="Fields most often missing, hallucinated or wrong", title_justify="left")
    table.add_column("field", overflow="fold")
    for column in ("docs", "missing", "hallucinated", "wrong", "mean similarity"):
        table.add_column(column, justify="right")
    for a in troubled:
        table.add_row(
            escape(a.field),
            str(a.documents),
            f"{a.missing}/{a.expected}" if a.expected else str(a.missing),
            str(a.hallucinated),
            f"{a.wrong}/{a.scored}" if a.scored else "0",
            _fmt(a.mean_similarity),
        )
    return table


@app.command("json-eval")
def json_eval_command(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help=(
                "GT OUT: two JSON files, or two directories whose *.json files are paired by "
                "name; or PAIRS.jsonl: one line per pair with 'expected_json' and "
                "'output_json' (aliases: gt_json/ground_truth_json, aio_json/extracted_json)."
            ),
            show_default=False,
            metavar="GT OUT | PAIRS.jsonl",
        ),
    ],
    strategies: Annotated[
        Path | None,
        typer.Option(
            "--strategies", "-s", help="Field-strategy config: JSON object field -> strategy."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write one JSON row per document (with breakdown)."),
    ] = None,
    fuzzy_threshold: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="FUZZY passes at this similarity.")
    ] = 0.85,
    semantic_threshold: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="SEMANTIC passes at this similarity.")
    ] = 0.80,
    numeric_rel_tol: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help=("NUMERIC passes when |output − GT| <= max(abs tol, this × |GT|); default 1e-6."),
            show_default=False,
        ),
    ] = None,
    numeric_abs_tol: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="NUMERIC passes when |output − GT| <= this, or the rel tol; default 0.",
            show_default=False,
        ),
    ] = None,
    safety_score: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, help="Safety input of RQS (a JSONL line's safety_score wins)."
        ),
    ] = 1.0,
    weights: Annotated[
        str | None,
        typer.Option(
            help=(
                "RQS weights, e.g. "
                "'accuracy=0.45,completeness=0.25,hallucination=0.15,safety=0.15'."
            )
        ),
    ] = None,
    flat: Annotated[
        bool,
        typer.Option(
            "--flat", help="Compare top-level keys only; nested values are compared whole."
        ),
    ] = False,
    output_format: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    top: Annotated[int, typer.Option(min=0, help="Rows of the per-field table.")] = 10,
    max_rows: Annotated[int, typer.Option(min=0, help="Document rows shown in the table.")] = 50,
) -> None:
    """Score JSON outputs against ground truth: completeness, hallucination, accuracy, RQS.

    Fields not named in --strategies get EXACT (numbers, booleans, dates, e-mails, arrays,
    objects) or SEMANTIC (other text). Nested objects are compared field by field under
    dotted paths (address.city), arrays of objects by index (items.0.sku).
    """
    from assay.core.extras import ModelUnavailable
    from assay.core.json_documents import json_safe
    from assay.engine.resources import default_resources
    from assay.inputs.records import InputErrors
    from assay.structured import (
        EvalOptions,
        StrategyConfig,
        StrategyConfigError,
        default_scorer,
        evaluate_pairs,
        field_aggregates,
        load_pairs,
    )

    if output_format not in {"table", "json"}:
        raise typer.BadParameter("choose table or json", param_hint="--format")
    rqs_weights = _parse_weights(weights)
    try:
        config = StrategyConfig.load(strategies) if strategies else StrategyConfig()
    except StrategyConfigError as exc:
        raise _fail(str(exc)) from None
    try:
        pairs = load_pairs(paths)
    except InputErrors as exc:
        raise _fail(str(exc)) from None
    # the tolerances' defaults live in assay.structured.numeric (not imported by --help)
    tolerances = {"numeric_rel_tol": numeric_rel_tol, "numeric_abs_tol": numeric_abs_tol}
    options = EvalOptions(
        fuzzy_threshold=fuzzy_threshold,
        semantic_threshold=semantic_threshold,
        weights=rqs_weights,
        flatten=not flat,
        **{name: value for name, value in tolerances.items() if value is not None},
    )
    try:
        results = evaluate_pairs(
            pairs,
            config,
            options=options,
            scorer=default_scorer(default_resources()),
            safety_score=safety_score,
        )
    except ModelUnavailable as exc:
        raise _fail(str(exc)) from None

    errors = consoles.messages()
    for doc in results:
        if doc.error:
            errors.print(
                f"[yellow]skipped:[/] {escape(doc.error)}", highlight=False, soft_wrap=True
            )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as handle:
            for doc in results:
                handle.write(
                    json.dumps(json_safe(doc.row()), ensure_ascii=False, default=str) + "\n"
                )

    summary = summarise(results)
    aggregates = field_aggregates(results)
    if output_format == "json":
        typer.echo(
            json.dumps(
                json_safe(
                    {
                        "summary": summary,
                        "documents": [doc.row() for doc in results],
                        "fields": [a.to_dict() for a in aggregates],
                    }
                ),
                ensure_ascii=False,
                indent=2,
                default=str,
            )
        )
        return
    console = consoles.results()
    console.print(_documents_table(results, summary, max_rows))
    fields = _fields_table(aggregates, top)
    if fields is not None:
        console.print(fields)
    if out is not None:
        console.print(f"wrote {len(results)} row(s) to {escape(str(out))}", highlight=False)


@strategies_app.command("validate")
def validate_command(
    file: Annotated[Path, typer.Argument(help="A field-strategy config (JSON).")],
) -> None:
    """Check a field-strategy config: every value must be EXACT, FUZZY, SEMANTIC, IGNORE or
    NUMERIC."""
    from assay.structured import StrategyConfig, StrategyConfigError

    try:
        config = StrategyConfig.load(file)
    except StrategyConfigError as exc:
        raise _fail(str(exc)) from None
    counts: dict[str, int] = {}
    for strategy in config.values():
        counts[strategy.value] = counts.get(strategy.value, 0) + 1
    detail = ", ".join(f"{n} {name}" for name, n in counts.items()) or "no fields"
    typer.echo(f"{file}: valid ({detail})")


@strategies_app.command("export")
def export_command(
    from_doc: Annotated[
        Path, typer.Option("--from-doc", help="A ground-truth JSON document.", show_default=False)
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the config here (default: stdout).")
    ] = None,
    flat: Annotated[
        bool, typer.Option("--flat", help="Top-level keys only (as json-eval --flat).")
    ] = False,
) -> None:
    """Write the auto-detected strategy of every non-null field of a document: a starting
    config to edit (array elements are pooled as items.*.field)."""
    from assay.structured import detect_config
    from assay.structured.batch import unreadable_json

    if not from_doc.is_file():
        raise _fail(f"{from_doc}: no such file")
    try:
        document = json.loads(from_doc.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _fail(f"{from_doc}: malformed JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # a 4,300+ digit number, deep nesting
        raise _fail(f"{from_doc}: {unreadable_json(exc)}") from None
    try:
        config = detect_config(document, flatten=not flat)
    except ValueError as exc:  # nested deeper than MAX_DEPTH
        raise _fail(f"{from_doc}: {exc}") from None
    if out is None:
        typer.echo(json.dumps(config.to_dict(), indent=2))
    else:
        config.save(out)
        typer.echo(f"wrote {len(config)} field strategies to {out}")
