"""``assay calibrate DATA_OR_RUN -m METRIC --out calibration.json``: fit a metric to your labels.

Scores the labelled samples offline (no judge: the calibration fits the offline
evidence), fits each metric (`assay.evaluation.calibration`), prints the out-of-fold
agreement before (the default) and after (the calibration) on the same items, and writes
the calibration file (`assay.evaluation.calibration_file`) that ``assay evaluate
--calibration FILE`` and the ``calibration`` setting apply. With several metrics each
gets its own file, ``<out stem>.<metric><out suffix>``.

With a judge configured (``judge_model`` and its URL or key), a judge metric whose
prompt reads the sample's fields (``faithfulness``, ``judged_relevance``...) also gets
``--examples K`` (default 4) few-shot examples chosen from the labels and measured out of
fold (`assay.evaluation.calibration_examples`; at most 2 judge calls per label, said
before they are spent), kept in the file's ``judge_examples`` when they beat the plain
judge.

Exit codes: 0 written; 2 unusable input, or labels that cannot support a calibration
(fewer than 20 of a class, or one class only: refused in one line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape

from assay.cli import consoles
from assay.cli.application import app
from assay.cli.options import StoreUrlOption

EXIT_BAD_INPUT = 2


def labelled_samples(data: str, db: str | None, label_field: str | None, scale: Any) -> list[Any]:
    """The labelled samples of ``data``: a file when one exists at that path, else the
    stored run of that id (its samples with the labels given on any run of the same
    data, `assay.store.labels`). Raises ValueError when neither
    exists, or when the file's labels are unusable (`InputErrors`, `LabelError`)."""
    from assay.inputs.locations import local_path
    from assay.inputs.read import read_labelled_samples

    path = local_path(data)
    if path is None or path.exists() or path.suffix:  # a run id has no suffix
        return read_labelled_samples(data, label_field=label_field, scale=scale)
    from assay.store.db import Store, default_url

    store = Store(db or default_url())
    try:
        samples = store.run_samples(data)
    finally:
        store.close()
    if not samples:
        raise ValueError(f"{data}: no such file, nor a stored run of that id")
    return samples


def output_paths(out: Path, metrics: list[str]) -> dict[str, Path]:
    """The file each metric's calibration is written to: ``out`` for one metric, else
    ``<stem>.<metric><suffix>`` beside it."""
    if len(metrics) == 1:
        return {metrics[0]: out}
    return {m: out.with_name(f"{out.stem}.{m}{out.suffix or '.json'}") for m in metrics}


def _agreement(part: dict[str, Any], signed: bool = False) -> str:
    value, interval = part.get("value"), part.get("interval")
    if value is None:
        return "N/A"
    shown = f"{value:+.3f}" if signed else f"{value:.3f}"
    return shown + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def summary_lines(data: dict[str, Any], path: Path, digest: str) -> list[str]:
    """What a written calibration says, in a few lines: the labels, the out-of-fold
    agreement before and after with intervals, the threshold and the file."""
    oof = data["out_of_fold"]
    labels = data["labels"]
    statistic = oof["statistic"].upper() if oof["statistic"] == "auroc" else "Spearman"
    lines = [
        f"{data['metric']}: {labels['n']} labels ({labels['per_class']['0']} of 0, "
        f"{labels['per_class']['1']} of 1, {labels['kind']}), method {data['method']}",
        f"  {oof['folds']}-fold out-of-fold {statistic} (mean over folds) on the same items: "
        f"default "
        f"{_agreement(oof['before'])}, calibrated {_agreement(oof['after'])}, "
        f"difference {_agreement(oof['difference'], signed=True)}",
        f"  balanced accuracy: default {oof['balanced_accuracy']['before']} at "
        f"{oof['balanced_accuracy']['before_threshold']:g}, calibrated "
        f"{oof['balanced_accuracy']['after']} (threshold chosen out of fold); "
        f"threshold {data['threshold']:g}",
    ]
    if len(data["candidates"]) > 1:
        lines.append(
            "  candidates (out of fold): "
            + ", ".join(f"{k} {_agreement(v)}" for k, v in data["candidates"].items())
        )
    if "judge_examples" in data:
        lines.append(judge_examples_line(data["judge_examples"]))
    for reason, count in labels["skipped"].items():
        lines.append(f"  skipped {count}: {reason}")
    lines.append(f"  wrote {path} (calibration={digest})")
    return lines


def judge_examples_line(part: dict[str, Any]) -> str:
    """The judge examples' out-of-fold agreement before and after, and whether kept."""
    oof = part["out_of_fold"]
    statistic = "AUROC" if oof["statistic"] == "auroc" else "Spearman"
    verdict = (
        f"kept {part['k']} examples"
        if part["kept"]
        else "not kept (not clearly better: see the paired interval)"
    )
    return (
        f"  judge with {part['k']} examples, out of fold {statistic}: plain "
        f"{_agreement(oof['before'])}, with examples {_agreement(oof['after'])}, difference "
        f"{_agreement(oof['difference'], signed=True)}; {verdict}; "
        f"{part['judge_calls']} judge calls"
    )


@app.command("calibrate")
def calibrate_command(
    data: Annotated[
        str,
        typer.Argument(
            help="Labelled samples: a .jsonl, .csv, .json or .parquet file whose records carry "
            "label / labels (or the column --label-field names), or a stored run's id (its "
            "samples with the labels given in the dashboard or files, --db).",
            metavar="DATA_OR_RUN",
        ),
    ],
    metric: Annotated[
        list[str], typer.Option("--metric", "-m", help="Metric(s) to calibrate, by name.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The calibration file to write (JSON).")],
    label_field: Annotated[
        str | None,
        typer.Option("--label-field", help="The column holding each sample's verdict."),
    ] = None,
    label_scale: Annotated[
        str | None,
        typer.Option("--label-scale", help="Verdicts are ratings on this scale, e.g. 1-5."),
    ] = None,
    folds: Annotated[int, typer.Option("--folds", help="Cross-validation folds.")] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the folds.")] = 0,
    db: StoreUrlOption = None,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="score (the default's score alone), evidence (the metric's offline "
            "evidence), head (refit the toxicity head; toxicity_score only) or auto (each "
            "that applies; the best out of fold, a tie going to the simplest).",
        ),
    ] = "auto",
    examples: Annotated[
        int,
        typer.Option(
            "--examples",
            help="With a judge configured: show the judge this many labelled examples "
            "(chosen from the labels, measured out of fold; at most 2 calls per judge and "
            "label); 0 = none.",
        ),
    ] = 4,  # assay.judge.examples.DEFAULT_EXAMPLES, not imported at the CLI's start
) -> None:
    """Fit metrics to your labels; print out-of-fold agreement before and after; write the file."""
    from assay.core.config import ConfigError, load_config
    from assay.core.extras import ModelUnavailable
    from assay.core.labels import LabelError, LabelScale, sample_label
    from assay.engine.resources import Resources
    from assay.evaluation.calibration import CalibrationRefused, fit_calibration
    from assay.evaluation.calibration_apply import Calibrations
    from assay.evaluation.calibration_examples import (
        can_take_examples,
        fit_judge_examples,
        judge_count,
        judge_label,
    )
    from assay.evaluation.calibration_file import write_calibration
    from assay.evaluation.calibration_head import head_embeddings, head_prior
    from assay.evaluation.runner import evaluate
    from assay.inputs.records import InputErrors
    from assay.metrics.registry import resolve_metrics
    from assay.store.db import StoreError

    err = consoles.messages()

    def fail(message: str) -> NoReturn:
        err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT)

    if method not in {"auto", "score", "evidence", "head"}:
        fail(f"--method must be auto, score, evidence or head, got {method!r}")
    if examples < 0:
        fail(f"--examples must be 0 or more, got {examples}")
    if folds < 2:
        fail(f"--folds must be at least 2, got {folds}")
    names = [n.strip() for item in metric for n in item.split(",") if n.strip()]
    try:
        scale = LabelScale.parse(label_scale) if label_scale else None
        # the offline evidence is what is fitted: no judge, nor a panel of judges
        configured = load_config({})
        config = configured.without_judge()
        metrics = resolve_metrics(names, None)
        samples = labelled_samples(data, db, label_field, scale)
    except (ConfigError, KeyError, LabelError, ValueError, OSError, StoreError) as exc:
        fail(str(exc.args[0] if exc.args else exc))
    except InputErrors as exc:
        fail(str(exc))
    if not samples:
        fail(f"{data}: no samples in the file")
    resources = Resources(config)
    try:
        scored = evaluate(
            samples, metrics=metrics, resources=resources, calibrations=Calibrations([])
        )
    except ModelUnavailable as exc:
        resources.close()
        fail(str(exc))
    written: list[tuple[dict[str, Any], Path]] = []
    paths = output_paths(out, [m.name for m in metrics])
    try:
        for chosen in metrics:
            results = [row[chosen.name] for row in scored.results]
            labels = [sample_label(s, chosen.name) for s in samples]

            def head(indices: Any) -> tuple[Any, Any]:
                embeddings = head_embeddings([samples[i] for i in indices], resources)
                return embeddings, head_prior(resources)

            use_head = chosen.name == "toxicity_score" and method in ("auto", "head")
            content = fit_calibration(
                chosen,
                results,
                labels,
                configured_threshold=config.threshold_for(chosen),
                folds=folds,
                seed=seed,
                method=method,
                head_features=head if use_head else None,
                label_source={"data": str(data), "label_field": label_field, "scale": label_scale},
            )
            if (
                examples > 0
                and configured.judge_configured
                and not can_take_examples(chosen, configured)
            ):
                err.print(
                    f"note: {chosen.name}: no judge examples (only a judge rubric over the "
                    "sample's fields takes them)",
                    highlight=False,
                )
            elif examples > 0 and can_take_examples(chosen, configured):
                n = sum(label is not None for label in labels)
                judges = judge_count(configured)
                per = f"2 × {n}" + (f" × {judges} judges" if judges > 1 else "")
                err.print(
                    f"{chosen.name}: judge examples: at most {per} = {2 * n * judges} judge "
                    f"calls ({judge_label(configured)}): a plain pass, then each label with "
                    "examples from the other folds",
                    highlight=False,
                )
                content["judge_examples"] = fit_judge_examples(
                    chosen, samples, configured, k=examples, folds=folds, seed=seed
                )
            written.append((content, paths[chosen.name]))
    except CalibrationRefused as exc:
        fail(str(exc))
    finally:
        resources.close()
    for content, path in written:
        try:
            digest = write_calibration(content, path)
        except OSError as exc:
            fail(f"{path}: cannot write: {exc.strerror}")
        for line in summary_lines(content, path, digest):
            typer.echo(line)
