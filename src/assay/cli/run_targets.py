"""``assay run DATA --target A --target B [...]``: several targets on the same samples,
one run each, then a paired comparison of each against the first (the baseline).

Each target is run as ``assay run`` runs one (`assay.cli.run`): its calls, its report,
its gates, its ``--out`` and ``--junit`` files (``results.jsonl`` becomes
``results.NAME.jsonl``) and, with ``--store``, its stored run, named ``NAME``
(``RUN_NAME: NAME`` with ``--run-name``) and tagged ``comparison`` (one id shared by the
runs) and ``target`` (its name). Then, per target after the first, one line per
metric: the paired figures of `assay.core.paired` (mean difference, bootstrap 95 %
interval, sign-flip p-value, wins, ties and losses by the metric's polarity, samples left
out), the figures the dashboard's compare page shows for the two stored runs, whose
address is printed.

The exit code is the worst of the targets' (2, then 3, then 1, then 0, as ``assay
evaluate`` ranks them); an interrupt stops every target (130).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from assay.cli import consoles

#: the dashboard's address in the printed links (``assay serve``'s default)
DASHBOARD_URL = "http://127.0.0.1:8000"
#: the environment variable that gives another dashboard address
DASHBOARD_URL_ENV = "ASSAY_DASHBOARD_URL"
#: exit codes of a target's run in the order the whole command reports them
_EXIT_RANK = (2, 3, 1)
_INTERRUPTED = 130


def target_names(
    specs: Sequence[str],
    given: Sequence[str | None] | None,
    models: Sequence[str | None] = (),
) -> list[str]:
    """The targets' names: ``given`` (one per target, in order, unique, each letters,
    digits, ``.``, ``_`` or ``-``), or, for a target without one (``given`` None, or its
    entry None: a targets file), derived from its spec: a python target's function, an
    openai target's model (``models``, one per spec), else the spec without its scheme,
    its other characters made ``-``; a name derived twice gets ``-2``, ``-3``... Raises
    ValueError saying what is wrong with ``given``.

    >>> target_names(["python:app:v1", "http://127.0.0.1:8080/chat"], None)
    ['v1', '127.0.0.1-8080-chat']
    """
    if given and len(given) != len(specs):
        raise ValueError(
            f"--target-name is given {len(given)} times for {len(specs)} targets; "
            "give one per --target, in order"
        )
    chosen = list(given) if given else [None] * len(specs)
    named = [name for name in chosen if name is not None]
    for name in named:
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name):
            raise ValueError(
                f"target name {name!r}: use 1 to 64 letters, digits, '.', '_' or '-' "
                "(it names the --out file and the stored run)"
            )
    if len(set(named)) != len(named):
        raise ValueError(f"a target name must name one target, got {named}")
    names: list[str] = []
    padded = [*models, *[None] * (len(specs) - len(models))]
    for spec, model, name in zip(specs, padded, chosen, strict=True):
        if name is None:
            base = _derived(model if spec.startswith("openai:") and model else spec)
            name, n = base, 2
            while name in names or name in named:
                name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def per_target(values: Sequence[str] | None, n: int, flag: str) -> list[str | None]:
    """An option given once for every one of ``n`` targets, or once per target in order:
    its value for each target (None for each when it is not given). Raises ValueError
    for another count.

    >>> per_target(["m"], 2, "--target-model"), per_target(None, 2, "--request")
    (['m', 'm'], [None, None])
    """
    if not values:
        return [None] * n
    if len(values) == 1:
        return [values[0]] * n
    if len(values) != n:
        raise ValueError(
            f"{flag} is given {len(values)} times for {n} targets; give it once, or once "
            "per --target, in order"
        )
    return list(values)


def _derived(spec: str) -> str:
    if spec.startswith("python:"):
        body = spec.rsplit(":", 1)[-1]
    else:
        body = re.sub(r"^(openai:)?(https?://)?", "", spec)
    return re.sub(r"[^A-Za-z0-9._]+", "-", body).strip("-")[:64] or "target"


def out_path(out: Path, name: str) -> Path:
    """A target's ``--out`` (or ``--junit``) file: ``results.jsonl`` ->
    ``results.NAME.jsonl``."""
    return out.with_name(f"{out.stem}.{name}{out.suffix}")


def sample_values(evaluation: Any) -> tuple[list[str], dict[str, dict[str, float | None]]]:
    """The samples' pairing keys, in order, and metric -> {key -> value} (None: N/A).

    A key is the sample's id (its line number when the data gave none), ``id#2`` for its
    second occurrence: the keys by which the store pairs two runs' samples."""
    import math

    keys: list[str] = []
    seen: dict[str, int] = {}
    for index, sample in enumerate(evaluation.samples):
        key = str(sample.id) if sample.id is not None else str(index)
        seen[key] = seen.get(key, 0) + 1
        keys.append(key if seen[key] == 1 else f"{key}#{seen[key]}")
    values: dict[str, dict[str, float | None]] = {}
    for metric in evaluation.metrics:
        column: dict[str, float | None] = {}
        for key, results in zip(keys, evaluation.results, strict=True):
            result = results.get(metric.name)
            value = None if result is None else result.value
            column[key] = None if value is None or math.isnan(value) else float(value)
        values[metric.name] = column
    return keys, values


@dataclass
class TargetRun:
    """One target's part of the command: its name, exit code, evaluation (None when it
    ended before its report) and stored run's id."""

    name: str
    exit_code: int = 0
    evaluation: Any = None
    run_id: str | None = None


def comparison_rows(baseline: TargetRun, other: TargetRun) -> list[dict[str, Any]]:
    """Per metric of both runs: the paired figures of ``other`` against ``baseline``
    (`assay.core.paired`), with its polarity and wins / ties / losses."""
    from assay.core.paired import Resampler, paired_figures, wins_ties_losses
    from assay.core.stats import mean

    keys_a, values_a = sample_values(baseline.evaluation)
    keys_b, values_b = sample_values(other.evaluation)
    samples = set(keys_a) | set(keys_b)
    polarity = {m.name: m.higher_is_better for m in baseline.evaluation.metrics}
    resampler = Resampler()
    rows = []
    for metric in [m for m in values_a if m in values_b]:
        a, b = values_a[metric], values_b[metric]
        figures = paired_figures(a, b, samples=samples, resampler=resampler)
        wins, ties, losses = wins_ties_losses(figures, polarity[metric])
        rows.append(
            {
                "metric": metric,
                "higher_is_better": polarity[metric],
                "mean_a": mean(a.values()),
                "mean_b": mean(b.values()),
                **figures.to_dict(),
                "wins": wins,
                "ties": ties,
                "losses": losses,
            }
        )
    return rows


def _number(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "N/A"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def comparison_lines(baseline: str, other: str, rows: list[dict[str, Any]]) -> list[str]:
    """The printed comparison of ``other`` against ``baseline``: a heading, then a line
    per metric."""
    lines = [f"{other} vs {baseline} (baseline), paired by sample:"]
    for row in rows:
        ci = (
            "N/A"
            if row["ci_low"] is None
            else f"[{_number(row['ci_low'], True)}, {_number(row['ci_high'], True)}]"
        )
        lines.append(
            f"  {row['metric']}: {_number(row['mean_a'])} -> {_number(row['mean_b'])}, "
            f"difference {_number(row['diff'], True)}, 95% CI {ci}, "
            f"p {_number(row['p_value'])}; {other} wins {row['wins']}, ties {row['ties']}, "
            f"loses {row['losses']} ({row['n_pairs']} pairs, {row['left_out']} left out)"
        )
    return lines


def compare_url(run_a: str, run_b: str) -> str:
    """The dashboard's compare page of two stored runs."""
    from urllib.parse import urlencode

    base = (os.environ.get(DASHBOARD_URL_ENV) or DASHBOARD_URL).rstrip("/")
    return f"{base}/compare?{urlencode({'a': run_a, 'b': run_b})}"


def run_several(
    ctx: typer.Context,
    options: dict[str, Any],
    targets: Sequence[Any],
    names: Sequence[str],
    answering: Callable[[Any, str], Callable[[list[Any]], list[Any]]],
    evaluate: Callable[..., None],
) -> None:
    """Run ``evaluate`` once per target (its samples answered by ``answering(target,
    name)``), then print the paired comparisons and exit with the worst exit code."""
    from assay.cli.evaluate import EVALUATED, PREPARE_SAMPLES, TARGET_FAILED

    err = consoles.messages()
    if options.get("resume"):
        err.print(
            "[red]error:[/red] --resume continues one stored run: give the --target of that "
            "run alone"
        )
        raise typer.Exit(2)
    stored = bool(options.get("store") or options.get("db"))
    comparison = uuid.uuid4().hex[:12]
    runs: list[TargetRun] = []
    for target, name in zip(targets, names, strict=True):
        chosen = dict(options)
        for key in ("out", "junit"):  # a file per target
            if options.get(key) is not None:
                chosen[key] = out_path(options[key], name)
        chosen["run_name"] = f"{options['run_name']}: {name}" if options.get("run_name") else name
        for key in (EVALUATED, TARGET_FAILED):
            ctx.meta.pop(key, None)
        ctx.meta[PREPARE_SAMPLES] = answering(target, name)
        run = TargetRun(name)
        try:
            evaluate(ctx, **chosen)
        except typer.Exit as exc:
            run.exit_code = exc.exit_code
        run.evaluation = ctx.meta.get(EVALUATED)
        runs.append(run)
        if run.exit_code == _INTERRUPTED:
            err.print("[yellow]interrupted[/yellow]: the other targets are not run")
            raise typer.Exit(_INTERRUPTED)
        if stored and run.evaluation is not None:
            run.run_id = run.evaluation.run_id
            _tag(options.get("db"), run.run_id, comparison, name)
    _print_comparisons(runs, options.get("output_format") == "json", comparison if stored else None)
    for code in _EXIT_RANK:
        if any(r.exit_code == code for r in runs):
            failing = ", ".join(r.name for r in runs if r.exit_code == code)
            err.print(f"exit {code}: from target {escape(failing)}")
            raise typer.Exit(code)


def _tag(db: str | None, run_id: str, comparison: str, name: str) -> None:
    """Tag a stored run with its comparison and target (a failing store: a warning)."""
    from assay.store.db import Store, StoreError, default_url

    try:
        store = Store(db or default_url())
        try:
            store.tag_run(run_id, {"comparison": comparison, "target": name})
        finally:
            store.close()
    except (StoreError, OSError) as exc:
        consoles.messages().print(
            f"[yellow]warning:[/yellow] run {escape(run_id)} is not tagged with its "
            f"comparison: {escape(str(exc))}"
        )


def _print_comparisons(runs: list[TargetRun], as_json: bool, comparison: str | None) -> None:
    """Each target against the first: lines (or one JSON document) on standard output."""
    out = consoles.results()
    err = consoles.messages()
    baseline = runs[0]
    documents = []
    for other in runs[1:]:
        if baseline.evaluation is None or other.evaluation is None:
            missing = baseline.name if baseline.evaluation is None else other.name
            err.print(
                f"[yellow]no comparison[/yellow] of {escape(other.name)} with "
                f"{escape(baseline.name)}: target {escape(missing)} has no results"
            )
            continue
        rows = comparison_rows(baseline, other)
        url = (
            compare_url(baseline.run_id, other.run_id) if baseline.run_id and other.run_id else None
        )
        if as_json:
            documents.append(
                {"baseline": baseline.name, "target": other.name, "url": url, "rows": rows}
            )
            continue
        for line in comparison_lines(baseline.name, other.name, rows):
            out.print(escape(line), highlight=False, soft_wrap=True)
        if url:
            out.print(f"  compare in the dashboard: {escape(url)}", highlight=False, soft_wrap=True)
    if as_json:
        from assay.core.jsonout import dumps

        typer.echo(dumps({"comparison": comparison, "comparisons": documents}, indent=2))
