"""``assay evaluate``: score a dataset file and print a summary; gate CI with thresholds."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from assay.cli import app, consoles
from assay.config import ConfigError, load_config
from assay.io import InputErrors, read_samples
from assay.models.embedders import ModelUnavailable
from assay.registry import metric_class, resolve_metrics, suite_names
from assay.resources import Resources
from assay.runner import Evaluation, MetricSummary, evaluate, flat_row
from assay.sinks import JsonlSink, write_table
from assay.store.db import Store, StoreError
from assay.store.recorder import RunRecorder

EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2


def _parse_pairs(items: list[str], option: str) -> dict[str, float]:
    pairs: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected METRIC=VALUE, got {item!r}", param_hint=option)
        try:
            pairs[name.strip()] = float(value)
        except ValueError:
            raise typer.BadParameter(
                f"{value!r} is not a number in {item!r}", param_hint=option
            ) from None
    return pairs


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "N/A"
    if unit in {"ms", "ms/token", "tokens/s"}:
        return f"{value:,.1f}"
    if unit == "count":
        return f"{value:.2f}"
    return f"{value:.3f}"


def summary_table(summaries: list[MetricSummary], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("metric", "n", "N/A", "mean", "median", "95% CI", "pass rate", "method", "time"):
        table.add_column(
            column,
            justify="left" if column in {"metric", "method"} else "right",
            no_wrap=column in {"metric", "95% CI", "pass rate", "method"},
        )
    for s in summaries:
        ci = "N/A" if s.ci_low is None else f"{_fmt(s.ci_low, s.unit)}–{_fmt(s.ci_high, s.unit)}"
        sign = "≥" if s.higher_is_better else "≤"
        if s.pass_rate is None:
            pass_text = "-"
        elif s.threshold is None:  # thresholds came with each sample's result
            pass_text = f"{s.pass_rate:.0%} (per sample)"
        else:
            pass_text = f"{s.pass_rate:.0%} ({sign}{s.threshold:g})"
        arrow = "↑" if s.higher_is_better else "↓"
        na = str(s.n_na) + (f" +{s.n_error} err" if s.n_error else "")
        table.add_row(
            f"{s.name} {arrow}",
            str(s.n),
            na,
            _fmt(s.mean, s.unit),
            _fmt(s.median, s.unit),
            ci,
            pass_text,
            ",".join(sorted(s.methods)),
            f"{s.seconds:.2f}s",
        )
    return table


def _gates(evaluation: Evaluation, under: dict[str, float], over: dict[str, float]) -> list[str]:
    by_name = {s.name: s for s in evaluation.summary()}
    failures = []
    for name, bound in under.items():
        s = by_name.get(name)
        if s is None or s.mean is None:
            failures.append(f"{name}: no value to compare with --fail-under {bound:g}")
        elif s.mean < bound:
            failures.append(f"{name}: mean {s.mean:.4f} < {bound:g}")
    for name, bound in over.items():
        s = by_name.get(name)
        if s is None or s.mean is None:
            failures.append(f"{name}: no value to compare with --fail-over {bound:g}")
        elif s.mean > bound:
            failures.append(f"{name}: mean {s.mean:.4f} > {bound:g}")
    return failures


@app.command("evaluate")
def evaluate_command(
    data: Annotated[Path, typer.Argument(help="Samples: a .jsonl, .csv or .json file.")],
    suite: Annotated[
        list[str] | None,
        typer.Option("--suite", "-s", help=f"Suite(s) to run: {', '.join(suite_names())}."),
    ] = None,
    metric: Annotated[
        list[str] | None, typer.Option("--metric", "-m", help="Metric(s) to run, by name.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Write per-sample results: .jsonl (with evidence), .csv, .parquet."
        ),
    ] = None,
    fail_under: Annotated[
        list[str] | None,
        typer.Option("--fail-under", help="METRIC=VALUE: exit 1 when the metric's mean is below."),
    ] = None,
    fail_over: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-over",
            help="METRIC=VALUE: exit 1 when the mean is above (for lower-is-better metrics).",
        ),
    ] = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option("--threshold", "-t", help="METRIC=VALUE: per-sample pass threshold."),
    ] = None,
    group_by: Annotated[
        str | None,
        typer.Option("--group-by", help="Tag keys, comma separated (e.g. method,question_type)."),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Stop at the first malformed record.")
    ] = False,
    output_format: Annotated[
        str, typer.Option("--format", help="table (human) or json (machines).")
    ] = "table",
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            help="use-multilingual (default), minilm, sentence-transformers:PATH, openai:MODEL.",
        ),
    ] = None,
    judge_url: Annotated[
        str | None,
        typer.Option(
            "--judge-url",
            help="OpenAI-compatible judge endpoint (else ASSAY_JUDGE_BASE_URL). The API key "
            "is read from ASSAY_JUDGE_API_KEY or OPENAI_API_KEY only, never from a flag.",
        ),
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option("--judge-model", help="Judge model (else ASSAY_JUDGE_MODEL).")
    ] = None,
    no_judge: Annotated[
        bool,
        typer.Option("--no-judge", help="Ignore any configured judge: local estimators only."),
    ] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Bypass on-disk caches.")] = False,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", min=1, help="Samples per metric batch.")
    ] = None,
    store: Annotated[
        bool,
        typer.Option(
            "--store", help="Write results to the results store, sample by sample, as a run."
        ),
    ] = False,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Store URL or SQLite path (default: ASSAY_DATABASE_URL, else ./assay.db).",
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", help="Continue a stored run: score only samples not yet stored."),
    ] = None,
    run_name: Annotated[
        str | None, typer.Option("--run-name", help="Name of the stored run.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Score a dataset with a suite or chosen metrics and print mean, median, 95% CI and pass rate.

    Exit codes: 0 done, 1 a --fail-under/--fail-over gate failed, 2 unusable input.
    """
    console = consoles.messages()
    err = consoles.messages()
    try:
        overrides: dict[str, Any] = {
            "embedder": embedder,
            "batch_size": batch_size,
            "thresholds": _parse_pairs(threshold or [], "--threshold") or None,
        }
        if no_cache:
            overrides["use_cache"] = False
        if judge_url:
            overrides["judge_base_url"] = judge_url
        if judge_model:
            overrides["judge_model"] = judge_model
        config = load_config(overrides)
        if no_judge:
            config = config.model_copy(update={"judge_model": None})
        under = _parse_pairs(fail_under or [], "--fail-under")
        over = _parse_pairs(fail_over or [], "--fail-over")
        for name in [*under, *over]:
            metric_class(name)
        metrics = resolve_metrics(metric or None, suite or None)
    except (ConfigError, KeyError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc.args[0] if exc.args else exc))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    for name, bound in under.items():
        if not metric_class(name).higher_is_better:
            err.print(
                f"[yellow]note:[/yellow] {name} is lower-is-better; --fail-under {bound:g} "
                "fails when its mean is below the bound. Did you mean --fail-over?"
            )
    try:
        samples, input_errors = read_samples(data, strict=strict)
    except FileNotFoundError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except InputErrors as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    for problem in input_errors:
        err.print(f"[yellow]skipped:[/yellow] {escape(str(problem))}")
    if not samples:
        err.print(f"[red]error:[/red] {escape(str(data))}: no usable samples")
        raise typer.Exit(EXIT_BAD_INPUT)

    recorder = None
    index_map = list(range(len(samples)))
    if store or resume or db:
        try:
            recorder, index_map = _open_run(
                db, resume, run_name, data, metrics, config, len(samples)
            )
        except StoreError as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(EXIT_BAD_INPUT) from None
        if resume:
            skipped = len(samples) - len(index_map)
            err.print(
                f"resuming run {resume}: {skipped} samples already stored, {len(index_map)} to go"
            )
        samples = [samples[i] for i in index_map]

    resources = Resources(config)
    rows: list[dict[str, Any]] = []
    sink = JsonlSink(out) if out is not None and out.suffix.lower() == ".jsonl" else None
    if out is not None and out.suffix.lower() not in {".jsonl", ".csv", ".parquet"}:
        err.print(
            f"[red]error:[/red] {escape(str(out))}: --out must end in .jsonl, .csv or .parquet"
        )
        raise typer.Exit(EXIT_BAD_INPUT)

    def keep(index: int, sample: Any, results: dict[str, Any]) -> None:
        row = flat_row(sample, results)
        rows.append(row)
        if sink is not None:
            sink.write(row, sample, results)
        if recorder is not None:
            recorder(index, sample, results)

    show_progress = not quiet and sys.stderr.isatty()
    interrupted = False
    evaluation: Evaluation | None = None
    try:
        with Progress(
            TextColumn("[bold]scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not show_progress,
            transient=True,
        ) as bar:
            task = bar.add_task("samples", total=len(samples))
            evaluation = evaluate(
                samples,
                metrics=metrics,
                resources=resources,
                on_sample=keep,
                progress=lambda n: bar.advance(task, n),
            )
            if recorder is not None:
                evaluation.run_id = recorder.run_id
    except ModelUnavailable as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if sink is not None:
            sink.close()
        if recorder is not None:
            status = "finished" if evaluation is not None else "interrupted"
            usage = evaluation.judge_usage if evaluation is not None else None
            recorder.store.finish_run(recorder.run_id, status=status, judge_usage=usage)
            recorder.store.close()
        if out is not None and out.suffix.lower() in {".csv", ".parquet"} and rows:
            write_table(rows, out)
        resources.close()
    if interrupted or evaluation is None:
        where = f"; {len(rows)} finished samples are in {out}" if out is not None else ""
        if recorder is not None:
            where += f"; resume with --resume {recorder.run_id}"
        err.print(f"[yellow]interrupted[/yellow]{escape(where)}")
        raise typer.Exit(130)
    evaluation.input_errors = input_errors
    _report(evaluation, group_by, output_format, out)
    failures = _gates(evaluation, under, over)
    for failure in failures:
        err.print(f"[red]gate failed:[/red] {escape(str(failure))}")
    if failures:
        raise typer.Exit(EXIT_GATE_FAILED)


def _open_run(
    db: str | None,
    resume: str | None,
    run_name: str | None,
    data: Path,
    metrics: list[Any],
    config: Any,
    n_samples: int,
) -> tuple[RunRecorder, list[int]]:
    store = Store(db)
    if resume:
        if not store.run_exists(resume):
            store.close()
            raise StoreError(f"no run {resume!r} in {store.safe_url} to resume")
        run_id = resume
        done = store.done_indices(run_id)
    else:
        run_id = uuid.uuid4().hex[:12]
        done = set()
    store.start_run(
        run_id,
        name=run_name,
        source="cli",
        dataset=str(data),
        metrics=[m.name for m in metrics],
        config=config.model_dump(mode="json", exclude={"embedding_api_key"}),
    )
    todo = [i for i in range(n_samples) if i not in done]
    return RunRecorder(store, run_id, metrics, config, index_map=todo), todo


def _report(
    evaluation: Evaluation, group_by: str | None, output_format: str, out: Path | None
) -> None:
    stdout = consoles.results()
    keys = [k.strip() for k in group_by.split(",") if k.strip()] if group_by else []
    summaries = evaluation.summary()
    if output_format == "json":
        payload: dict[str, Any] = {
            "run_id": evaluation.run_id,
            "samples": len(evaluation.samples),
            "skipped_records": len(evaluation.input_errors),
            "wall_seconds": round(evaluation.wall_seconds, 3),
            "metrics": [s.to_dict() for s in summaries],
            "labels": evaluation.label_counts(),
            "judge_usage": evaluation.judge_usage,
        }
        if keys:
            payload["groups"] = [
                {
                    "group": dict(zip(keys, g, strict=True)),
                    "metrics": [s.to_dict() for s in evaluation.summary(ix)],
                    "labels": evaluation.label_counts(ix),
                }
                for g, ix in evaluation.groups(keys).items()
            ]
        typer.echo(json.dumps(payload, indent=2, default=str))
        return
    stdout.print(
        summary_table(
            summaries,
            title=f"{len(evaluation.samples)} samples, {len(summaries)} metrics, "
            f"{evaluation.wall_seconds:.1f}s (run {evaluation.run_id})",
        )
    )
    for group, indices in evaluation.groups(keys).items() if keys else []:
        label = ", ".join(f"{k}={v}" for k, v in zip(keys, group, strict=True))
        for name, counts in evaluation.label_counts(indices).items():
            label += f"; {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        stdout.print(
            summary_table(evaluation.summary(indices), title=f"{label} ({len(indices)} samples)")
        )
    for name, counts in evaluation.label_counts().items():
        stdout.print(f"{name} labels: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    methods = sorted({m for s in summaries for m in s.methods})
    stdout.print(f"methods that ran: {', '.join(methods)}")
    slowest = sorted(summaries, key=lambda s: s.seconds, reverse=True)[:3]
    stdout.print("slowest metrics: " + ", ".join(f"{s.name} {s.seconds:.2f}s" for s in slowest))
    if evaluation.judge_usage:
        u = evaluation.judge_usage
        stdout.print("judge: " + ", ".join(f"{k}={v}" for k, v in u.items()))
    if out is not None:
        stdout.print(f"per-sample results: {out}")
