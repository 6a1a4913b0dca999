"""What ``assay evaluate`` reports: the summary table, the JSON summary, the gates.

Exit codes of ``assay evaluate`` (one rule, used by the command and documented in its
``--help`` and the README):

- 0: done, every gate passed;
- 1: a ``--fail-under`` / ``--fail-over`` gate failed;
- 2: unusable input, an unusable store, or output that could not be written;
- 2 also when the run measured nothing: every call to ``assay run``'s target failed, or
  the judge failed and no metric that asked it has a value (`nothing_measured`: one
  line says which and the first error). It takes precedence over 3 and 1;
- 3: metric errors: some samples errored on a metric, beyond what ``--max-errors``
  tolerates (default: none). It takes precedence over 1: a gate over values that could
  not all be computed does not pass.
- 130: interrupted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.progress import Progress
from rich.table import Table

from assay.cli import consoles
from assay.core.jsonout import dumps
from assay.engine.work import ModelWork, work_line
from assay.evaluation.runner import Evaluation, MetricSummary
from assay.evaluation.tally import ErrorCause

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_GATE_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_METRIC_ERRORS",
    "MAX_CAUSES",
    "ErrorCause",
    "ErrorTolerance",
    "batch_line",
    "error_causes",
    "error_gate",
    "error_notes",
    "gate_failures",
    "nothing_measured",
    "panel_lines",
    "print_report",
    "summary_table",
]

EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_METRIC_ERRORS = 3
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class ErrorTolerance:
    """How many errored samples a metric may have before the run exits 3: a count
    (``--max-errors 2``) or a share of the run's samples (``--max-errors 5%``)."""

    count: int | None = 0
    percent: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> ErrorTolerance:
        """``N`` or ``P%``; ValueError with the accepted forms otherwise."""
        if text is None:
            return cls()
        raw = text.strip()
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%", raw)
        if match:
            percent = float(match.group(1))
            if percent <= 100:
                return cls(count=None, percent=percent)
        elif raw.isdigit():
            return cls(count=int(raw))
        raise ValueError(
            f"--max-errors takes a count (e.g. 3) or a percentage from 0% to 100% "
            f"(e.g. 5%), got {text!r}"
        )

    def allowed(self, n_samples: int) -> int:
        """The number of errored samples tolerated in a run of ``n_samples``."""
        if self.percent is not None:
            return math.floor(n_samples * self.percent / 100 + 1e-9)
        return self.count or 0

    def describe(self) -> str:
        return f"{self.percent:g}%" if self.percent is not None else str(self.count or 0)


def error_gate(evaluation: Evaluation, tolerance: ErrorTolerance) -> list[str]:
    """One message naming every metric whose errored samples exceed ``tolerance``, with
    its count (their causes are `error_notes`). Empty when every metric is within it."""
    tally = evaluation.whole()
    allowed = tolerance.allowed(tally.samples)
    over = {}
    for metric in evaluation.metrics:
        errored = tally.errored(metric.name)
        if errored > allowed:
            over[metric.name] = errored
    if not over:
        return []
    counts = ", ".join(f"{name} {n}" for name, n in over.items())
    which = f"{len(over)} metrics" if len(over) > 1 else "1 metric"
    return [
        f"{which} errored on more of the {tally.samples} samples than --max-errors "
        f"{tolerance.describe()} allows ({allowed}): {counts}"
    ]


def _fmt(value: float | None, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "N/A"
    if unit in {"ms", "ms/token", "tokens/s"}:
        return f"{value:,.1f}"
    if unit == "count":
        return f"{value:.2f}"
    return f"{value:.3f}"


def summary_table(summaries: list[MetricSummary], title: str | None = None) -> Table:
    """Per metric: n, N/A (missing input), errors, mean, median, CI, pass rate, method, time;
    where any value came from an estimator outside its training domain
    (``details["in_domain"]`` false), how many, after the errors; and where any value is
    a composite built from some of its parts (``details["unavailable"]``), how many and
    from how many parts ("2 (1 of 4)")."""
    table = Table(title=title, title_justify="left")
    out_of_domain = any(s.n_out_of_domain for s in summaries)
    partial = any(s.n_partial for s in summaries)
    columns = ("metric", "n", "N/A", "errors")
    columns += ("out of domain",) if out_of_domain else ()
    columns += ("partial",) if partial else ()
    columns += ("mean", "median", "95% CI", "pass rate")
    for column in (*columns, "method", "time"):
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
        counts = [str(s.n), str(s.n_na), f"[red]{s.n_error}[/red]" if s.n_error else "0"]
        if out_of_domain:
            counts.append(f"[yellow]{s.n_out_of_domain}[/yellow]" if s.n_out_of_domain else "0")
        if partial:
            counts.append(f"[yellow]{_partial(s)}[/yellow]" if s.n_partial else "0")
        table.add_row(
            f"{s.name} {arrow}",
            *counts,
            _fmt(s.mean, s.unit),
            _fmt(s.median, s.unit),
            ci,
            pass_text,
            ",".join(sorted(s.methods)),
            f"{s.seconds:.2f}s",
        )
    return table


def _partial(summary: MetricSummary) -> str:
    """How many values were built from some of the parts, and from how many: "2 (1 of
    4)", or "3 (1 of 4: 2, 3 of 4: 1)"."""
    parts = summary.partial_parts
    if len(parts) == 1:
        return f"{summary.n_partial} ({next(iter(parts))})"
    return f"{summary.n_partial} (" + ", ".join(f"{k}: {n}" for k, n in parts.items()) + ")"


def gate_failures(
    evaluation: Evaluation, under: dict[str, float], over: dict[str, float]
) -> list[str]:
    """One message per ``--fail-under`` / ``--fail-over`` gate that fails (a metric with
    no value at all fails its gate and says why)."""
    by_name = {s.name: s for s in evaluation.summary()}
    failures = []
    for option, pairs in (("--fail-under", under), ("--fail-over", over)):
        for name, bound in pairs.items():
            s = by_name.get(name)
            if s is None or s.mean is None:
                why = _why_none(evaluation, name)
                failures.append(f"{name}: no value to compare with {option} {bound:g}{why}")
            elif option == "--fail-under" and s.mean < bound:
                failures.append(f"{name}: mean {s.mean:.4f} < {bound:g}")
            elif option == "--fail-over" and s.mean > bound:
                failures.append(f"{name}: mean {s.mean:.4f} > {bound:g}")
    return failures


def _why_none(evaluation: Evaluation, name: str) -> str:
    """Why a metric has no value on any sample: the most common reason or error."""
    tally = evaluation.whole().metrics.get(name)
    return tally.why_none() if tally is not None else f" ({name} did not run)"


#: `error_notes` names this many causes; the rest are counted in one more line
MAX_CAUSES = 5


def error_causes(evaluation: Evaluation) -> list[ErrorCause]:
    """The run's metric errors grouped by cause, most samples first. Two errors share a
    cause when their messages differ only in numbers ("response has 150,000 characters"
    and "response has 1,200,000 characters"), so one over-long field that fails every
    metric of a sample, or of many samples, is one cause."""
    return evaluation.whole().error_causes()


def error_notes(evaluation: Evaluation) -> list[str]:
    """One line per cause of metric errors (`error_causes`): the metrics it failed, on how
    many samples, and its message; past `MAX_CAUSES` causes, one line counts the rest."""
    total = evaluation.n_samples
    causes = error_causes(evaluation)
    notes = []
    for cause in causes[:MAX_CAUSES]:
        if all(n == cause.samples for n in cause.metrics.values()):
            names = ", ".join(cause.metrics)
        else:
            names = ", ".join(f"{name} ({n})" for name, n in cause.metrics.items())
        if len(cause.metrics) > 1:
            names += f" ({len(cause.metrics)} metrics)"
        notes.append(f"{names} failed on {cause.samples} of {total} samples: {cause.message}")
    rest = causes[MAX_CAUSES:]
    if rest:
        notes.append(
            f"{len(rest)} more causes, on {len({m for c in rest for m in c.metrics})} metrics: "
            "each result's error is in --out and the results store"
        )
    return notes


#: the characters of an error message that `nothing_measured` quotes
_QUOTED_CHARS = 300


def _one_line(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= _QUOTED_CHARS else text[: _QUOTED_CHARS - 1] + "…"


def nothing_measured(
    evaluation: Evaluation, judge: str | None, target_failure: str | None = None
) -> str | None:
    """Why the run measured nothing, in one line, or None when it measured something.

    ``target_failure``: ``assay run``'s line when every call to its target failed
    (`assay.cli.run.all_calls_failed`). Else the judge's: the judge failed questions
    (``judge_usage["failures"]``) and no metric that asked it (a result of method
    ``llm``) has a value on any sample; the line names those metrics and the first
    cause of their errors. ``judge``: the judge model, for the line."""
    if target_failure is not None:
        return target_failure
    failures = (evaluation.judge_usage or {}).get("failures") or 0
    if not failures:
        return None
    judged = {n: t for n, t in evaluation.whole().metrics.items() if t.methods.get("llm")}
    if not judged or any(len(t.values) for t in judged.values()):
        return None
    causes = error_causes(evaluation)
    first = f"; first error: {_one_line(causes[0].message)}" if causes else ""
    panel = (evaluation.judge_usage or {}).get("judges")
    if panel and not judge:  # a judge panel: the judges' labels
        judge = f"panel({','.join(panel)})"
    questions = f"{failures} question{'s' if failures != 1 else ''}"
    return (
        f"judge {judge or '?'}: {questions} failed and no judged metric has a value "
        f"({', '.join(judged)}){first}"
    )


def print_report(
    evaluation: Evaluation,
    group_by: str | None,
    output_format: str,
    out: Path | None,
    stored: bool = True,
) -> None:
    """The summary table (or JSON) of the run. ``stored``: whether the run is in the
    results store; its id is shown only then (``run_id`` null and ``stored`` false in
    JSON), since ``assay compare`` and ``--resume`` know no other."""
    stdout = consoles.results()
    keys = [k.strip() for k in group_by.split(",") if k.strip()] if group_by else []
    summaries = evaluation.summary()
    seconds = evaluation.seconds_by_metric
    if output_format == "json":
        payload: dict[str, Any] = {
            "run_id": evaluation.run_id if stored else None,
            "stored": stored,
            "samples": evaluation.n_samples,
            "skipped_records": len(evaluation.input_errors),
            "wall_seconds": round(evaluation.wall_seconds, 3),
            "metrics": [s.to_dict() for s in summaries],
            "labels": evaluation.label_counts(),
            "judge_usage": evaluation.judge_usage,
            "metric_errors": error_notes(evaluation),
            "model_work": {k: w.to_dict() for k, w in evaluation.model_work.items()},
        }
        if keys:
            payload["groups"] = [
                {
                    "group": dict(zip(keys, g, strict=True)),
                    "metrics": [s.to_dict() for s in group.summaries(seconds)],
                    "labels": group.label_counts(),
                }
                for g, group in evaluation.group_tallies(keys).items()
            ]
        typer.echo(dumps(payload, indent=2))
        return
    stdout.print(
        summary_table(
            summaries,
            title=f"{evaluation.n_samples} samples, {len(summaries)} metrics, "
            f"{evaluation.wall_seconds:.1f}s "
            + (f"(run {evaluation.run_id})" if stored else "(not stored: --store keeps it)"),
        )
    )
    for values, group in evaluation.group_tallies(keys).items() if keys else []:
        label = ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))
        for name, counts in group.label_counts().items():
            label += f"; {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        stdout.print(
            summary_table(group.summaries(seconds), title=f"{label} ({group.samples} samples)")
        )
    for name, counts in evaluation.label_counts().items():
        stdout.print(f"{name} labels: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    methods = sorted({m for s in summaries for m in s.methods})
    stdout.print(f"methods that ran: {', '.join(methods)}")
    unlike = [f"{s.name} {s.n_out_of_domain}" for s in summaries if s.n_out_of_domain]
    if unlike:
        stdout.print(
            "values from an estimator outside its training domain (details.in_domain "
            "false, reasons in details.out_of_domain; a judge reads such text better): "
            + ", ".join(unlike)
        )
    partial = [
        f"{s.name} {s.n_partial} of {s.n} values ("
        + ", ".join(f"{n} from {k} parts" for k, n in s.partial_parts.items())
        + ")"
        for s in summaries
        if s.n_partial
    ]
    if partial:
        stdout.print(
            "composites built from some of their parts (details.unavailable names the "
            "others and why): " + "; ".join(partial)
        )
    shared = evaluation.seconds_by_metric.get("asks")
    if shared is not None:  # the metrics' time column is their own work after these calls
        stdout.print(f"model and judge calls, made once for all metrics: {shared:.2f}s")
    slowest = sorted(summaries, key=lambda s: s.seconds, reverse=True)[:3]
    stdout.print("slowest metrics: " + ", ".join(f"{s.name} {s.seconds:.2f}s" for s in slowest))
    if evaluation.model_work:  # where the model time went (items by kind, seconds)
        stdout.print(f"model work: {work_line(evaluation.model_work)}", highlight=False)
    if evaluation.judge_usage:
        u = evaluation.judge_usage
        flat = {k: v for k, v in u.items() if k not in _PANEL_KEYS}
        stdout.print("judge: " + ", ".join(f"{k}={v}" for k, v in flat.items()))
        if "batch_calls" in u:
            stdout.print(batch_line(u))
        for line in panel_lines(u):
            stdout.print(line, markup=False, highlight=False)
    if out is not None:
        stdout.print(f"per-sample results: {out}")


#: a judge panel's parts of the judge usage (`assay.judge.panel.PanelUsage`): `panel_lines`
_PANEL_KEYS = ("judges", "panel", "agreement")


def panel_lines(usage: dict[str, Any]) -> list[str]:
    """A judge panel's lines from a run's judge usage: each judge's calls, cache hits,
    failures and tokens, then the judges' agreement on each metric (Krippendorff's alpha,
    interval; 1 = they agree, 0 = chance); none without a panel."""
    judges: dict[str, dict[str, Any]] = usage.get("judges") or {}
    if not judges:
        return []
    lines = [
        f"judge {label}: calls={u.get('calls', 0)}, "
        + (f"batch_calls={u['batch_calls']}, " if "batch_calls" in u else "")
        + f"cache_hits={u.get('cache_hits', 0)}, failures={u.get('failures', 0)}, "
        f"prompt_tokens={u.get('prompt_tokens', 0)}, "
        f"completion_tokens={u.get('completion_tokens', 0)}"
        for label, u in judges.items()
    ]
    agreement = usage.get("agreement") or {}
    if agreement:
        parts = [
            f"{metric} {'-' if a['alpha'] is None else format(a['alpha'], '.3f')} "
            f"({a['samples']} samples)"
            for metric, a in agreement.items()
        ]
        lines.append(
            f"judge panel ({usage.get('panel')} of {len(judges)}): agreement between the "
            "judges, Krippendorff's alpha (interval): " + ", ".join(parts)
        )
    return lines


def batch_line(usage: dict[str, Any]) -> str:
    """What went through the Batch API (``judge_batch``), from a run's judge usage: the
    requests by batch and directly, the batches, and the cost when prices are set."""
    line = (
        f"judge batch: {usage['batch_calls']} requests by batch in {usage['batches']} "
        f"batches ({usage.get('batches_resumed', 0)} collected from a stopped run), "
        f"{usage['calls']} directly ({usage.get('batch_failed', 0)} failed in a batch)"
    )
    if usage.get("batch_pending"):
        line += f", {usage['batch_pending']} still in a batch (run again to collect them)"
    if usage.get("cost") is not None:
        line += f"; cost {usage['cost']:.6g}, the batch lines at half price"
    return line


@contextmanager
def model_work_bar(bar: Progress, work: ModelWork) -> Iterator[None]:
    """Within the block, a line of ``bar`` (the run's progress) that follows the model
    work as it is done: items and seconds by kind so far (`work_line`), shown from the
    first model call on. The bar's own ``disable`` (not a terminal, ``--quiet``, JSON
    output) keeps it off with the rest."""
    task = None
    before = work.totals()

    def follow(kind: str, items: int, seconds: float) -> None:
        nonlocal task
        done = work.since(before)
        line = f"model work: {work_line(done)}"
        if task is None:
            task = bar.add_task(line, total=None)
        bar.update(task, description=line, completed=sum(w.items for w in done.values()))

    work.add_listener(follow)
    try:
        yield
    finally:
        work.remove_listener(follow)
