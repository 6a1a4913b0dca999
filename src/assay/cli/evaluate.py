"""``assay evaluate``: score a dataset file and print a summary; gate CI with thresholds."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape

from assay.cli import consoles
from assay.cli.application import app
from assay.cli.gate_options import check_bounds, parse_pairs
from assay.cli.options import (
    DeviceOption,
    ExecutorOption,
    JudgeBatchOption,
    JudgeConcurrencyOption,
    JudgeRateLimitOption,
    OutFieldsOption,
    RayAddressOption,
    StoreUrlOption,
    WorkersOption,
)
from assay.metrics.registry import metric_class, suite_names

if TYPE_CHECKING:
    from assay.cli.resume import OpenedRun

# ``ctx.meta`` keys by which ``assay run`` (`assay.cli.run`) adds to this command: samples
# scored after the data's (the probes), a function turning the chosen metrics into those
# that run (the canary), and one turning the samples to score (on ``--resume`` those not
# stored yet) into those scored (the target's answers)
EXTRA_SAMPLES = "assay.extra_samples"
CONFIGURE_METRICS = "assay.configure_metrics"
PREPARE_SAMPLES = "assay.prepare_samples"
#: and the line saying that every call to the target failed (`assay.cli.run`)
TARGET_FAILED = "assay.target_failed"
#: where the command leaves the run's `Evaluation` before its exit (for assay run's
#: comparison of several targets)
EVALUATED = "assay.evaluated"


@app.command("evaluate")
def evaluate_command(
    ctx: typer.Context,
    data: Annotated[
        str,
        typer.Argument(
            help="Samples: a .jsonl, .csv, .json or .parquet file, or an OpenTelemetry trace "
            "export (OTLP JSON: one sample per trace). A path, or a URL that pyarrow reads "
            "(file://, s3://, gs://, hdfs://; not for OTLP).",
            metavar="DATA",
        ),
    ],
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
            "--out",
            "-o",
            help="Write per-sample results: .jsonl (with evidence), .csv, .parquet; each row "
            "holds the sample's query, response, expected, contexts, turns and tool calls, "
            "then its values (docs/input.md, Output files).",
        ),
    ] = None,
    out_fields: OutFieldsOption = None,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            help="Write JUnit XML for a CI server: a test case per sample and gated metric, "
            "a failure for each value under its threshold (docs/ci.md).",
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
    calibration: Annotated[
        list[str] | None,
        typer.Option(
            "--calibration",
            help="A calibration file from assay calibrate (repeatable): its metric's values "
            "become calibrated probabilities (method calibrated). Default: the calibration "
            "setting.",
        ),
    ] = None,
    group_by: Annotated[
        str | None,
        typer.Option("--group-by", help="Tag keys, comma separated (e.g. method,question_type)."),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Stop at the first malformed record.")
    ] = False,
    input_format: Annotated[
        str | None,
        typer.Option(
            "--input-format",
            help="jsonl, csv, json, parquet or otlp (OpenTelemetry traces as OTLP JSON, one sample "
            "per trace). Default: from the suffix; an OTLP export is recognised by its content.",
        ),
    ] = None,
    output_format: Annotated[
        str, typer.Option("--format", help="table (human) or json (machines).")
    ] = "table",
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            help="use-multilingual (default), e5-small, minilm, sentence-transformers:PATH, "
            "openai:MODEL.",
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
    judge_concurrency: JudgeConcurrencyOption = None,
    judge_rate_limit: JudgeRateLimitOption = None,
    judge_batch: JudgeBatchOption = False,
    no_judge: Annotated[
        bool,
        typer.Option("--no-judge", help="Ignore any configured judge: local estimators only."),
    ] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Bypass on-disk caches.")] = False,
    chunk_size: Annotated[
        int | None,
        typer.Option(
            "--chunk-size",
            min=1,
            help="Samples scored together (default 256): their model and judge work is done "
            "at once, and results are stored and counted chunk by chunk.",
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size", min=1, help="Texts per forward pass of a local model (default 64)."
        ),
    ] = None,
    store: Annotated[
        bool,
        typer.Option(
            "--store", help="Write results to the results store, sample by sample, as a run."
        ),
    ] = False,
    db: StoreUrlOption = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="Continue a stored run: score the samples not stored and those that errored, "
            "report the whole run. Refused when the dataset, metrics, settings or judge differ.",
        ),
    ] = None,
    run_name: Annotated[
        str | None, typer.Option("--run-name", help="Name of the stored run.")
    ] = None,
    max_errors: Annotated[
        str | None,
        typer.Option(
            "--max-errors",
            help="Errored samples a metric may have before the run exits 3: a count (3) or "
            "a share of the samples (5%). Default 0: any error fails the run.",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
    workers: WorkersOption = None,
    device: DeviceOption = None,
) -> None:
    """Score a dataset with a suite or chosen metrics and print mean, median, 95% CI and pass rate.

    Exit codes: 0 done; 1 a --fail-under/--fail-over gate failed; 2 unusable input, store
    or output, or nothing measured (every target call failed, or the judge failed and no
    judged metric has a value); 3 samples errored on a metric beyond --max-errors (before
    1: a gate over values that could not all be computed does not pass); 130 interrupted
    (2 when the Ray cluster stopped the run, or the judge or target could not be reached:
    its first request, or 3 in a row, failed to connect; finished samples are kept,
    --resume continues it).
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from assay.cli.report import (
        EXIT_BAD_INPUT,
        EXIT_GATE_FAILED,
        EXIT_INTERRUPTED,
        EXIT_METRIC_ERRORS,
        ErrorTolerance,
        error_gate,
        error_notes,
        gate_failures,
        model_work_bar,
        nothing_measured,
        print_report,
    )
    from assay.cli.run_outputs import TABLE_SUFFIXES, RunOutputs, chosen_fields, reason
    from assay.core.config import ConfigError, load_config
    from assay.core.extras import ModelUnavailable
    from assay.core.http import Unreachable
    from assay.engine.resources import Resources
    from assay.evaluation.calibration_apply import Calibrations
    from assay.evaluation.runner import Evaluation, evaluate
    from assay.evaluation.scale.ray_executor import WorkerLost
    from assay.inputs.locations import local_path
    from assay.inputs.read import SampleStream, read_samples, stream_samples
    from assay.inputs.records import InputErrors
    from assay.metrics.registry import resolve_metrics
    from assay.outputs.sinks import JsonlSink

    console = consoles.messages()
    err = consoles.messages()

    scaled: Any = None
    resources: Resources | None = None

    def fail(message: str) -> NoReturn:
        err.print(f"[red]error:[/red] {escape(message)}")
        if hasattr(scaled, "close"):  # a Ray instance started to read the data
            scaled.close()
        if resources is not None:  # its models may be loading
            resources.close()
        raise typer.Exit(EXIT_BAD_INPUT)

    if output_format not in {"table", "json"}:
        fail(f"--format must be table or json, got {output_format!r}")
    scaled = _executor(executor, ray_address, workers)
    if isinstance(scaled, str):
        fail(scaled)
    if out is not None:
        problem = _check_out(out, local_path(data))
        if problem is not None:
            fail(problem)
    try:
        overrides: dict[str, Any] = {
            "embedder": embedder,
            "chunk_size": chunk_size,
            "batch_size": batch_size,
            "device": device,
            "judge_concurrency": judge_concurrency,
            "judge_rate_limit": judge_rate_limit,
            "thresholds": parse_pairs(threshold or [], "--threshold") or None,
            "calibration": ",".join(calibration) if calibration else None,
        }
        if no_cache:
            overrides["use_cache"] = False
        if judge_batch:
            overrides["judge_batch"] = True
        if judge_url:
            overrides["judge_base_url"] = judge_url
        if judge_model:
            overrides["judge_model"] = judge_model
        config = load_config(overrides)
        if no_judge:
            config = config.without_judge()
        tolerance = ErrorTolerance.parse(max_errors)
        under = parse_pairs(fail_under or [], "--fail-under")
        over = parse_pairs(fail_over or [], "--fail-over")
        # "-m bleu,rouge" is read as "-m bleu -m rouge"
        names = [n.strip() for item in metric or [] for n in item.split(",") if n.strip()]
        suites = [n.strip() for item in suite or [] for n in item.split(",") if n.strip()]
        metrics = resolve_metrics(names or None, suites or None)
        fields = chosen_fields(out_fields, out, [m.name for m in metrics])
        configure = ctx.meta.get(CONFIGURE_METRICS)
        if configure is not None:
            metrics = configure(metrics)
        check_bounds(config.thresholds, under, over, [m.name for m in metrics])
        calibrations = Calibrations.for_run(config.calibration, [m.name for m in metrics])
    except (ConfigError, KeyError, ValueError) as exc:
        fail(str(exc.args[0] if exc.args else exc))
    for name, bound in under.items():
        if not metric_class(name).higher_is_better:
            err.print(
                f"[yellow]note:[/yellow] {name} is lower-is-better; --fail-under {bound:g} "
                "fails when its mean is below the bound. Did you mean --fail-over?"
            )
    # a run that needs every sample at once keeps them; the others stream: each chunk
    # is read, scored, written and forgotten
    keep = (
        scaled is not None
        or bool(resume)
        or (out is not None and out.suffix.lower() in TABLE_SUFFIXES)
        or any(key in ctx.meta for key in (EXTRA_SAMPLES, PREPARE_SAMPLES))
    )
    show_progress = not quiet and sys.stderr.isatty()
    resources = Resources(config)
    if scaled is None:  # the models load while the data is read
        resources.load_in_background(m.needs for m in metrics)
    try:
        if keep:  # with Ray, tasks on the cluster parse the data (assay.inputs.locations)
            reader = read_samples if scaled is None else scaled.read_samples
            listed, input_errors = reader(data, strict=strict, input_format=input_format)
            listed = [*listed, *ctx.meta.get(EXTRA_SAMPLES, [])]
            stream, total = SampleStream(iter(listed), []), len(listed)
        else:
            stream = stream_samples(
                data, strict, input_format=input_format, count_lines=show_progress
            )
            input_errors, total = stream.errors, stream.lines
        first = next(stream.samples, None)  # the errors of the records before it are known
    except (FileNotFoundError, InputErrors, ModelUnavailable, ConnectionError) as exc:
        fail(str(exc))  # ModelUnavailable: a missing extra, with its pip command
    skipped = _Skipped(input_errors, err)
    skipped.say()
    if first is None:
        if input_errors:
            fail(f"{data}: no usable samples ({len(input_errors)} records skipped, see above)")
        fail(f"{data}: no samples in the file (it is empty, or holds only a header)")
    samples: Any = skipped.saying(chain([first], stream.samples))
    keys = [k.strip() for k in group_by.split(",") if k.strip()] if group_by else []

    recorder = None
    opened: OpenedRun | None = None
    #: what a failing store raises (the store's packages load only when it is used)
    store_errors: tuple[type[BaseException], ...] = (OSError,)
    if keep:
        samples = all_samples = list(samples)
    if store or resume or db:
        from sqlalchemy.exc import SQLAlchemyError

        from assay.cli.resume import ResumeRefused, open_run
        from assay.store.db import StoreError

        store_errors = (StoreError, SQLAlchemyError, OSError)
        try:
            n_samples = len(all_samples) if keep else None
            opened = open_run(db, resume, run_name, data, metrics, config, n_samples)
        except ResumeRefused as exc:
            fail(str(exc))
        except store_errors as exc:
            fail(f"the results store cannot be used: {exc}")
        recorder = opened.recorder
        if resume and opened.todo is not None:
            retried = f" ({len(opened.retried)} errored before)" if opened.retried else ""
            err.print(
                f"resuming run {resume}: {len(opened.stored)} samples already stored, "
                f"{len(opened.todo)} to go{retried}"
            )
            samples = [all_samples[i] for i in opened.todo]
            total = len(samples)

    sink = None
    if out is not None and out.suffix.lower() == ".jsonl":
        try:
            sink = JsonlSink(out, append=bool(resume), fields=fields)
        except OSError as exc:
            if recorder is not None:
                recorder.store.close()
            fail(f"{out}: cannot write: {reason(exc)}")
    if sink is not None and opened is not None and opened.retried:
        err.print(
            f"[yellow]note:[/yellow] {escape(str(out))} keeps the lines of the "
            f"{len(opened.retried)} samples that errored; their new lines follow"
        )
    if resume and out is not None and sink is None:
        err.print(
            f"[yellow]note:[/yellow] {escape(str(out))} will hold only the samples scored "
            "now; the stored run holds them all"
        )
    report = None
    if junit is not None:
        from assay.outputs.junit import JunitReport

        report = JunitReport(junit, metrics, config, run_name or Path(str(data)).name)
    outputs = RunOutputs(out, sink, recorder, store_errors, err, fields, report)
    interrupted = stopped = False
    evaluation: Evaluation | None = None
    bad_input: InputErrors | None = None
    prepare = ctx.meta.get(PREPARE_SAMPLES)
    try:
        if prepare is not None and samples:  # an interrupt or failure here ends as below
            samples = prepare(samples)
            total = len(samples)
        with (
            Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                disable=not show_progress,
                transient=True,
            ) as bar,
            model_work_bar(bar, resources.model_work),
        ):
            task = bar.add_task("scoring", total=total)
            evaluation = evaluate(
                samples,
                metrics=metrics,
                resources=resources,
                on_sample=outputs,
                progress=lambda n: (outputs.flush(), bar.advance(task, n)),
                executor=scaled,
                keep=keep,
                group_by=keys,
                calibrations=calibrations,
            )
            if recorder is not None:
                evaluation.run_id = recorder.run_id
    except ModelUnavailable as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except InputErrors as exc:  # a streamed record that --strict refuses, an unreadable file
        bad_input = exc
        evaluation = None
    except KeyboardInterrupt:
        interrupted = True
    except (WorkerLost, ConnectionError, Unreachable) as exc:
        # the Ray cluster failed the run, or the judge or the target cannot be reached
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        interrupted = stopped = True
    finally:
        outputs.close(evaluation)
        resources.close()
    skipped.say()
    again = ""
    if recorder is not None:
        from assay.cli.resume import resume_command

        again = f"to resume: {resume_command(ctx, recorder.run_id)}"
    if bad_input is not None:
        err.print(f"[red]error:[/red] {escape(str(bad_input))}")
        err.print(f"[yellow]stopped[/yellow]{escape(outputs.where())}")
        raise typer.Exit(EXIT_BAD_INPUT)
    if interrupted or evaluation is None:
        err.print(
            f"[yellow]{'stopped' if stopped else 'interrupted'}[/yellow]{escape(outputs.where())}"
        )
        if again:
            err.print(escape(again))
        raise typer.Exit(EXIT_BAD_INPUT if stopped else EXIT_INTERRUPTED)
    seen = evaluation.whole().tags_seen
    for key in keys:
        if key not in seen:
            shown = ", ".join(sorted(seen)) or "none"
            err.print(
                f"[yellow]note:[/yellow] no sample has the tag {escape(repr(key))} "
                f"(tags in the data: {escape(shown)}); its group is '-'"
            )
    if opened is not None and resume and opened.todo is not None:
        from assay.cli.resume import whole_run

        # the summary and every gate cover the whole run: stored samples too
        evaluation = whole_run(evaluation, all_samples, opened.todo, opened.stored)
    evaluation.input_errors = input_errors
    ctx.meta[EVALUATED] = evaluation
    failed = outputs.failed
    try:
        shown_out = out if "out" not in failed else None
        print_report(evaluation, group_by, output_format, shown_out, recorder is not None)
    except OSError as exc:
        consoles.silence_stdout()
        outputs.output_failed("stdout", "writing the results to standard output", exc, False)
    for note in error_notes(evaluation):
        err.print(f"[red]metric errors:[/red] {escape(note)}")
    failures = gate_failures(evaluation, under, over)
    for failure in failures:
        err.print(f"[red]gate failed:[/red] {escape(str(failure))}")
    too_many_errors = error_gate(evaluation, tolerance)
    for failure in too_many_errors:
        err.print(f"[red]errors over the limit:[/red] {escape(failure)}")
    if "store" in failed and recorder is not None:
        err.print(
            "[red]error:[/red] some results were not saved; resume with --resume "
            f"{escape(recorder.run_id)}"
        )
        err.print(escape(again))
    elif "out" in failed:
        held = "; the results store holds every sample" if recorder is not None else ""
        err.print(f"[red]error:[/red] some results were not saved to {escape(str(out))}{held}")
    unmeasured = nothing_measured(evaluation, config.judge_model, ctx.meta.get(TARGET_FAILED))
    if unmeasured is not None:
        err.print(f"[red]nothing measured:[/red] {escape(unmeasured)}")
    if failed or unmeasured is not None:
        raise typer.Exit(EXIT_BAD_INPUT)
    if too_many_errors:
        raise typer.Exit(EXIT_METRIC_ERRORS)
    if failures:
        raise typer.Exit(EXIT_GATE_FAILED)


class _Skipped:
    """Says each record the reader skipped (``errors`` grows as a stream is read), once."""

    def __init__(self, errors: list[Any], err: Any) -> None:
        self.errors = errors
        self.err = err
        self.said = 0

    def say(self) -> None:
        while self.said < len(self.errors):
            self.err.print(f"[yellow]skipped:[/yellow] {escape(str(self.errors[self.said]))}")
            self.said += 1

    def saying(self, samples: Iterator[Any]) -> Iterator[Any]:
        """The samples, saying the records skipped before each as it is read."""
        for sample in samples:
            if self.said < len(self.errors):
                self.say()
            yield sample


def _executor(name: str, address: str | None, workers: int | None) -> Any:
    """The executor the options select (None: local), or why they are unusable."""
    if name == "local":
        if address is not None or workers is not None:
            return "--ray-address and --workers go with --executor ray"
        return None
    if name != "ray":
        return f"--executor must be local or ray, got {name!r}"
    from assay.evaluation.scale.ray_executor import RayExecutor

    return RayExecutor(address=address, workers=workers)


def _check_out(out: Path, data: Path | None) -> str | None:
    """Why ``--out`` cannot be written (checked before any scoring), or None."""
    if out.suffix.lower() not in {".jsonl", ".csv", ".parquet"}:
        return f"{out}: --out must end in .jsonl, .csv or .parquet"
    if out.is_dir():
        return f"{out}: --out is a directory; give a file name"
    from assay.core.extras import EXTRA_OF, installed, pip_command

    table = {".csv": ("pandas",), ".parquet": ("pandas", "pyarrow")}.get(out.suffix.lower(), ())
    for package in table:
        if not installed(package):
            extra = EXTRA_OF[package]
            return f"{out}: writing {out.suffix} needs the {extra} extra: {pip_command(extra)}"
    try:
        if out.exists() and data is not None and data.exists() and out.samefile(data):
            return f"{out}: --out is the input file, which it would overwrite; choose another name"
    except OSError:
        pass
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{out}: cannot create the folder {out.parent}: {exc.strerror or exc}"
    existed = out.exists()
    try:
        with out.open("ab"):
            pass
    except OSError as exc:
        return f"{out}: cannot write: {exc.strerror or exc}"
    if not existed:
        out.unlink(missing_ok=True)
    return None
