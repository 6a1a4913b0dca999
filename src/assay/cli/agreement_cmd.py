"""``assay agreement DATA_OR_RUN -m METRIC ...``: how well each metric, per method that can
score it, agrees with the samples' labels (`assay.evaluation.agreement`).

DATA_OR_RUN is a labelled data file (read as ``assay evaluate`` reads one, the verdicts
as ``--label-field`` and ``--label-scale`` say) or, when no such file exists, the id of
a stored run whose samples' labels are in the store (``--db``). ``--format json`` prints
the report as one JSON document (its keys: the module docstring of
`assay.evaluation.agreement`). A missing label column, a bad verdict, an unknown metric
or a metric no sample is labelled for is one ``error:`` line and exit status 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from assay.cli.application import app
from assay.cli.consoles import messages, results
from assay.cli.options import StoreUrlOption

if TYPE_CHECKING:
    from assay.core.labels import LabelScale
    from assay.core.sample import Sample
    from assay.evaluation.agreement import AgreementReport

__all__ = ["EXIT_USAGE", "agreement_command"]

EXIT_USAGE = 2


def _fail(message: str) -> NoReturn:
    from rich.markup import escape

    first, _, rest = message.strip().partition("\n")
    more = rest.count("\n") + 1 if rest else 0
    suffix = f" (and {more} more problems)" if more else ""
    messages().print(f"[bold red]error:[/] {escape(first)}{suffix}", highlight=False)
    raise typer.Exit(EXIT_USAGE)


def _interval(interval: tuple[float, float] | list[float] | None) -> str:
    return "" if interval is None else f" [{interval[0]:.3f}-{interval[1]:.3f}]"


def _number(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.3f}"


def _print_table(report: AgreementReport) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = results()
    for metric in report.metrics:
        arrow = "↑" if metric.higher_is_better else "↓"
        counts = (
            f"labels 1: {metric.label_counts['1']}, 0: {metric.label_counts['0']}"
            if metric.label_counts
            else f"{metric.labelled} graded labels"
        )
        threshold = "none" if metric.threshold is None else f"{metric.threshold:g}"
        table = Table(
            title=f"{escape(metric.metric)} {arrow}  ({counts}; threshold {threshold})",
            title_justify="left",
        )
        binary = metric.label_kind == "binary"
        headers = ["method", "n", "N/A", "errors"]
        headers += (
            ["AUROC [95% CI]", "BA at threshold", "CV threshold", "out-of-fold BA [95% CI]"]
            if binary
            else ["Spearman [95% CI]", "Kendall tau-b"]
        )
        headers += ["kappa", "judge requests", "time"]
        for header in headers:
            table.add_column(header, justify="left" if header == "method" else "right")
        for method in metric.methods:
            name = escape(method.method) + (" *" if method.method == metric.best_method else "")
            row = [name, str(method.n), str(method.n_not_applicable), str(method.n_errors)]
            if binary:
                cv = method.cross_validated
                row += [
                    _number(method.auroc) + _interval(method.auroc_interval),
                    _number(method.balanced_accuracy_at_threshold),
                    "N/A" if cv is None else f"{cv['threshold']:.3f}",
                    ("N/A" if cv is None else f"{cv['out_of_fold_balanced_accuracy']:.3f}")
                    + _interval(method.out_of_fold_interval),
                ]
            else:
                row += [
                    _number(method.spearman) + _interval(method.spearman_interval),
                    _number(method.kendall_tau_b),
                ]
            row += [
                _number(method.cohen_kappa),
                str(method.judge_requests),
                f"{method.seconds:.2f}s",
            ]
            table.add_row(*row)
        out.print(table)
        for method in metric.methods:
            if method.first_error:
                out.print(
                    f"{escape(method.method)}: {method.n_errors} errors, the first: "
                    f"{escape(method.first_error)}",
                    highlight=False,
                )
        for note in metric.notes:
            out.print(escape(note), highlight=False)


@app.command("agreement")
def agreement_command(
    data_or_run: Annotated[
        str,
        typer.Argument(
            help="A labelled data file (.jsonl, .csv, .json, .parquet) or a stored run's id.",
            metavar="DATA_OR_RUN",
        ),
    ],
    metric: Annotated[
        list[str],
        typer.Option("--metric", "-m", help="Metric(s) to check against the labels."),
    ],
    label_field: Annotated[
        str | None,
        typer.Option(
            "--label-field",
            help="The column holding each sample's verdict (default: label, human_label, "
            "human_score or rating).",
        ),
    ] = None,
    label_scale: Annotated[
        str | None,
        typer.Option("--label-scale", help="The verdicts are ratings on this scale, e.g. 1-5."),
    ] = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option("--threshold", "-t", help="METRIC=VALUE: the threshold to check."),
    ] = None,
    configured_only: Annotated[
        bool,
        typer.Option(
            "--configured-only",
            help="Score each metric as configured only, not with every method that can.",
        ),
    ] = False,
    no_judge: Annotated[
        bool, typer.Option("--no-judge", help="Ignore any configured judge.")
    ] = False,
    output_format: Annotated[
        str, typer.Option("--format", help="table (human) or json (machines).")
    ] = "table",
    db: StoreUrlOption = None,
) -> None:
    """Agreement of each metric, per method, with the samples' labels: AUROC, balanced
    accuracy and an out-of-fold threshold (binary labels), Spearman and Kendall (graded),
    Cohen's kappa, with bootstrap intervals."""
    from assay.cli.gate_options import check_bounds, parse_pairs
    from assay.core.config import ConfigError, load_config
    from assay.core.jsonout import dumps
    from assay.core.labels import LabelError, LabelScale
    from assay.evaluation.agreement import AgreementError, agreement_report, without_judge

    if output_format not in {"table", "json"}:
        _fail(f"--format must be table or json, got {output_format!r}")
    names = [n.strip() for item in metric for n in item.split(",") if n.strip()]
    try:
        thresholds = parse_pairs(threshold or [], "--threshold")
        check_bounds(thresholds, {}, {}, names)
        config = load_config({"thresholds": thresholds or None})
        if no_judge:
            config = without_judge(config)
        scale = LabelScale.parse(label_scale) if label_scale is not None else None
    except (ConfigError, LabelError, KeyError, ValueError, typer.BadParameter) as exc:
        _fail(str(exc.args[0] if exc.args else exc))
    samples = _labelled_samples(data_or_run, label_field, scale, db)
    try:
        report = agreement_report(samples, names, config, methods=not configured_only, scale=scale)
    except AgreementError as exc:
        _fail(str(exc))
    if output_format == "json":
        typer.echo(dumps(report.to_dict()))
    else:
        _print_table(report)


def _labelled_samples(
    source: str, label_field: str | None, scale: LabelScale | None, db: str | None
) -> list[Sample]:
    """The samples of a data file, else of a stored run (with the store's labels)."""
    from assay.core.labels import LabelError
    from assay.inputs.locations import is_url
    from assay.inputs.read import read_labelled_samples
    from assay.inputs.records import InputErrors

    if is_url(source) or Path(source).exists():
        try:
            return read_labelled_samples(source, label_field=label_field, scale=scale)
        except (FileNotFoundError, InputErrors, LabelError, ValueError) as exc:
            _fail(str(exc))
    from assay.store.db import Store, StoreError, default_url

    if label_field is not None:
        _fail(f"{source}: no such file (--label-field names a column of a data file)")
    try:
        store = Store(db or default_url())
    except StoreError as exc:
        _fail(str(exc))
    try:
        if not store.run_exists(source):
            _fail(f"{source}: no such file, and no stored run with this id in {store.safe_url}")
        return store.run_samples(source)
    except LabelError as exc:
        _fail(str(exc))
    finally:
        store.close()
