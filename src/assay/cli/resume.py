"""``assay evaluate --store`` / ``--resume``: opening a stored run, and the whole run after
resuming it.

A run started by ``assay evaluate`` records its fingerprint: the SHA-256 of the dataset
file, the sorted metric names, the settings that change values or pass/fail (thresholds,
embedder, models, limits; not cache, chunk and batch sizes or timeouts) and the judge
(model and base URL without credentials; never a key). ``--resume RUN_ID``:

- refuses (exit 2) a run whose fingerprint differs, saying what differs, so a different
  dataset or setting is never mixed into one run;
- scores the samples not stored yet and those whose stored result was an error (their
  rows are replaced, not duplicated);
- reports and gates the whole run: the values of the samples not scored again are read
  back from the store.
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer

from assay.core.config import AssayConfig
from assay.core.redaction import known_secrets, redact, redact_text
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.evaluation.runner import Evaluation
from assay.inputs.locations import location_sha256, shown_location
from assay.metrics.base import Metric
from assay.store.db import Store, StoreError
from assay.store.recorder import RunRecorder

__all__ = [
    "OpenedRun",
    "ResumeRefused",
    "fingerprint",
    "open_run",
    "refusal",
    "resume_command",
    "whole_run",
]

# settings that change how a run is computed or paid for, never its values
_OPERATIONAL = frozenset(
    {
        "cache_dir",
        "use_cache",
        "batch_size",
        "chunk_size",
        "seed",  # the bootstrap CI's seed: the summary is recomputed over the whole run
        "judge_api_key",
        "embedding_api_key",
        "judge_concurrency",
        "judge_rate_limit",
        "judge_timeout",
        "judge_max_retries",
        "max_reply_bytes",  # a reply over it is an error, never a different value
        "judge_cache",
        "judge_price_prompt",
        "judge_price_completion",
        "judge_batch",  # the same requests, by batch: the same replies and values
        "judge_batch_poll",
        "judge_batch_wait",
        "judge_model",  # in the fingerprint's "judge"
        "judge_base_url",
        "judge_models",  # in the fingerprint's "judge" (model and URL; not keys, limits, prices)
    }
)


class ResumeRefused(ValueError):
    """The run cannot be resumed with this dataset or these settings; says what differs."""


def _plain_url(url: str | None) -> str | None:
    """``url`` without user, password, query or fragment (where a credential can hide)."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


def fingerprint(data: str | Path, metrics: Sequence[Metric], config: AssayConfig) -> dict[str, Any]:
    """What a run is scored on: dataset hash, metric names, value-changing settings, judge."""
    settings = config.model_dump(mode="json")
    judge = None
    if config.judge_models:
        judge = {
            "models": [
                {"model": j.model, "base_url": _plain_url(j.base_url or config.judge_base_url)}
                for j in config.judge_models
            ]
        }
    elif config.judge_configured:
        judge = {"model": config.judge_model, "base_url": _plain_url(config.judge_base_url)}
    parameters = {k: v for k, v in sorted(settings.items()) if k not in _OPERATIONAL}
    if parameters.get("embedding_base_url"):
        parameters["embedding_base_url"] = _plain_url(parameters["embedding_base_url"])
    # secret values are cut out; names are not (a threshold of a metric called
    # tokens_per_second is a number to compare, not a credential)
    return redact(
        {
            "dataset_sha256": location_sha256(data),
            "metrics": sorted(m.name for m in metrics),
            "parameters": parameters,
            "judge": judge,
        },
        by_name=False,
    )


def _judge_text(judge: dict[str, Any] | None) -> str:
    if not judge:
        return "no judge"
    if "models" in judge:
        return "a panel of " + ", ".join(_judge_text(j) for j in judge["models"])
    return f"model {judge.get('model')} at {judge.get('base_url') or 'the OpenAI default URL'}"


def refusal(run_id: str, stored: dict[str, Any] | None, current: dict[str, Any]) -> str | None:
    """Why run ``run_id`` (recorded with fingerprint ``stored``) cannot be resumed with the
    ``current`` one, naming each difference; None when they agree."""
    if stored is None:
        return (
            f"run {run_id} has no record of the dataset and settings it was scored on (it "
            "was not stored by `assay evaluate`, or by an older Assay), so resuming it could "
            "mix other data into it; start a new run (leave out --resume)"
        )
    found = []
    old, new = stored.get("dataset_sha256", ""), current["dataset_sha256"]
    if old != new:
        found.append(f"on a different dataset (sha256 {old[:12]}… vs {new[:12]}…)")
    if stored.get("metrics") != current["metrics"]:
        old_m = ", ".join(stored.get("metrics") or []) or "none"
        found.append(f"with other metrics ({old_m} vs {', '.join(current['metrics'])})")
    old_p, new_p = stored.get("parameters") or {}, current["parameters"]
    changed = [
        f"{key} {old_p.get(key)!r} vs {new_p.get(key)!r}"
        for key in sorted(set(old_p) | set(new_p))
        if old_p.get(key) != new_p.get(key)
    ]
    if changed:
        found.append(f"with other settings ({'; '.join(changed)})")
    if stored.get("judge") != current["judge"]:
        found.append(
            f"with another judge ({_judge_text(stored.get('judge'))} vs "
            f"{_judge_text(current['judge'])})"
        )
    if not found:
        return None
    return (
        f"run {run_id} was scored {', '.join(found)}; resuming it would mix two kinds of "
        "results in one run. Resume with the same dataset and options, or start a new run "
        "(leave out --resume)"
    )


@dataclass
class OpenedRun:
    """A stored run ready to record: what to score now (indices into the dataset's
    samples; None for a new run: every sample, in order), the stored results of the
    samples that are done, and the stored samples that errored (scored again)."""

    recorder: RunRecorder
    todo: list[int] | None
    stored: dict[int, dict[str, MetricResult]]
    retried: set[int]


def open_run(
    db: str | None,
    resume: str | None,
    run_name: str | None,
    data: str | Path,
    metrics: Sequence[Metric],
    config: AssayConfig,
    n_samples: int | None,
) -> OpenedRun:
    """Start a new stored run, or reopen run ``resume`` (of ``n_samples`` samples in the
    data; a new run need not know their number) after checking its fingerprint.
    Raises `StoreError` (store unusable, no such run) or `ResumeRefused`."""
    current = fingerprint(data, metrics, config)
    store = Store(db)
    try:
        stored: dict[int, dict[str, MetricResult]] = {}
        retried: set[int] = set()
        if resume:
            if not store.run_exists(resume):
                raise StoreError(f"no run {resume!r} in {store.safe_url} to resume")
            why = refusal(resume, store.fingerprint(resume), current)
            if why is not None:
                raise ResumeRefused(why)
            stored = store.stored_results(resume)
            retried = store.errored_indices(resume)
        run_id = resume or uuid.uuid4().hex[:12]
        store.start_run(
            run_id,
            name=run_name,
            source="cli",
            dataset=shown_location(data),
            metrics=[m.name for m in metrics],
            config=redact(config.model_dump(mode="json")),
            fingerprint=current,
        )
    except BaseException:
        store.close()
        raise
    if not resume:
        return OpenedRun(RunRecorder(store, run_id, metrics, config), None, stored, retried)
    todo = [i for i in range(n_samples or 0) if i not in stored]
    recorder = RunRecorder(store, run_id, metrics, config, index_map=todo, replace=True)
    return OpenedRun(recorder, todo, stored, retried)


def whole_run(
    scored: Evaluation,
    samples: list[Sample],
    todo: Sequence[int],
    stored: dict[int, dict[str, MetricResult]],
) -> Evaluation:
    """The evaluation of every sample of a resumed run: ``scored`` holds the results of
    the samples ``todo`` (in that order), ``stored`` those of the others."""
    results = [stored.get(i, {}) for i in range(len(samples))]
    for position, index in enumerate(todo):
        results[index] = scored.results[position]
    return replace(scored, samples=samples, results=results, tally=None)


def resume_command(ctx: typer.Context, run_id: str) -> str:
    """The command line that resumes ``run_id``: the options given to this command (as
    parsed, long names), with ``--resume RUN_ID`` added or replaced; no secrets."""
    words = ["assay", ctx.info_name or "evaluate"]
    for param in ctx.command.params:
        name = param.name or ""
        source = ctx.get_parameter_source(name)
        if name == "resume" or source is None or source.name != "COMMANDLINE":
            continue
        value = ctx.params[name]
        if param.param_type_name != "option":
            words.append(str(value))
            continue
        flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        for item in value if param.multiple else [value]:
            if not param.is_flag:
                words += [flag, str(item)]
            elif item:
                words.append(flag)
            elif param.secondary_opts:
                words.append(param.secondary_opts[0])
    words += ["--resume", run_id]
    secrets = known_secrets()
    return " ".join(shlex.quote(redact_text(word, secrets)) for word in words)
