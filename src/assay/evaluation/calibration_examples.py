"""A judge's few-shot examples, chosen from the labels and measured out of fold
(``assay calibrate`` with a judge configured; issue 33, item 4).

For a judge metric whose prompt reads sample fields (`RubricScore`: ``faithfulness``,
``hallucination``, ``judged_relevance``...), `fit_judge_examples`:

1. judges every labelled sample with the plain prompt (**before**; n judge calls);
2. for each of the k folds (the calibration's stratified folds), chooses the examples
   from the OTHER folds' samples only (`assay.judge.examples.choose_examples`: balanced
   between the classes or spread over a graded scale, the samples the plain judge got
   most wrong first) and judges the fold's samples with them (**after**; n calls): a
   sample is never judged with itself as an example;
3. compares before and after on the same items (`agreement_before_after`: AUROC or
   Spearman per fold, averaged, with 95 % bootstrap intervals and the paired interval of
   after − before) and keeps the examples only when they `improve` on the plain judge
   (`improves`: better, the paired interval above 0, from 100 labels no lower than
   -0.01), the offline candidates' rule;
4. chooses the kept examples from every labelled sample.

At most 2 n judge calls, times the judges of a panel (each is shown the examples; the
judge's cache answers a prompt it has seen).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from assay.core.config import AssayConfig
from assay.core.labels import sample_label
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.evaluation.calibration import CalibrationRefused, agreement_before_after, improves
from assay.evaluation.calibration_apply import Calibrations
from assay.evaluation.calibration_fit import stratified_folds
from assay.evaluation.runner import evaluate
from assay.judge.examples import (
    JudgeExamples,
    LabelledExample,
    choose_examples,
    examples_payload,
)
from assay.metrics.judged.base import RubricScore

__all__ = ["can_take_examples", "fit_judge_examples", "judge_count", "judge_label"]


def can_take_examples(metric: Any, config: AssayConfig) -> bool:
    """Whether ``metric``'s judge can be shown examples: a judge is configured, the
    metric asks one and its prompt reads the sample's fields (`RubricScore`)."""
    return config.judge_configured and "judge" in metric.needs and isinstance(metric, RubricScore)


def judge_label(config: AssayConfig) -> str:
    """The judge that is shown the examples: its model, or the panel's judges."""
    if config.judge_models:
        return "panel of " + ", ".join(m.label for m in config.judge_members())
    return str(config.judge_model)


def judge_count(config: AssayConfig) -> int:
    """How many judges answer each question (a panel's members, else 1)."""
    return len(config.judge_models) or 1


def _with_examples(metric: RubricScore, items: Sequence[LabelledExample]) -> RubricScore:
    judged = copy.copy(metric)
    judged.judge_examples = JudgeExamples(tuple(items))  # empty: the plain prompt
    return judged


def _values(metric: RubricScore, samples: Sequence[Sample], res: Resources) -> list[float | None]:
    scored = evaluate(samples, metrics=[metric], resources=res, calibrations=Calibrations([]))
    out: list[float | None] = []
    for row in scored.results:
        result = row[metric.name]
        out.append(None if result.error or result.method != "llm" else result.value)
    return out


def _example(metric: RubricScore, sample: Sample, label: float) -> LabelledExample:
    return LabelledExample.of({f: getattr(sample, f) for f in metric.fields}, label)


def fit_judge_examples(
    metric: RubricScore,
    samples: Sequence[Sample],
    config: AssayConfig,
    *,
    k: int,
    folds: int = 5,
    seed: int = 0,
    resamples: int = 1000,
) -> dict[str, Any]:
    """The calibration file's ``judge_examples`` part for ``metric`` on the labelled
    ``samples`` (`sample_label`; unlabelled ones left out), judged with ``config``'s
    judge (its ``calibration`` setting ignored): ``kept``, ``k``, ``fields``, ``for``
    (the verdict the examples label), ``examples`` (when kept), ``out_of_fold`` (the
    before/after agreement), ``judge_calls`` and ``not_judged`` (samples a pass could
    not score, left out of the comparison). Raises `CalibrationRefused` when the samples
    the judge scored both times are not of both classes."""
    labelled = [(s, sample_label(s, metric.name)) for s in samples]
    kept_samples = [s for s, y in labelled if y is not None]
    y = np.array([y for _, y in labelled if y is not None], dtype=np.float64)
    fold_of = stratified_folds(y, folds, seed)
    judge_config = config.model_copy(update={"calibration": None})
    res = Resources(judge_config)
    try:
        before = _values(_with_examples(metric, []), kept_samples, res)
        after: list[float | None] = [None] * len(kept_samples)
        for fold in np.unique(fold_of):
            train = np.flatnonzero(fold_of != fold)
            held = np.flatnonzero(fold_of == fold)
            chosen = choose_examples(y[train], k, seed=seed, first_pass=[before[i] for i in train])
            items = [_example(metric, kept_samples[train[j]], y[train[j]]) for j in chosen]
            values = _values(_with_examples(metric, items), [kept_samples[i] for i in held], res)
            for i, value in zip(held, values, strict=True):
                after[i] = value
        usage = res.judge_usage() or {}
    finally:
        res.close()
    both = np.array([b is not None and a is not None for b, a in zip(before, after, strict=True)])
    if len(set(y[both] >= 0.5)) < 2:
        raise CalibrationRefused(
            f"cannot measure judge examples for {metric.name}: the judge scored "
            f"{int(both.sum())} of {len(y)} labelled samples both times, not both classes"
        )
    binary = bool(np.all((y == 0.0) | (y == 1.0)))
    threshold = config.threshold_for(metric)
    report = agreement_before_after(
        y[both],
        np.array([b for b, ok in zip(before, both, strict=True) if ok], dtype=np.float64),
        np.array([a for a, ok in zip(after, both, strict=True) if ok], dtype=np.float64),
        fold_of[both],
        binary=binary,
        threshold=0.5 if threshold is None else threshold,
        higher_is_better=bool(metric.higher_is_better),
        seed=seed,
        resamples=resamples,
    )
    kept = improves(report["difference"], report["n"])
    final = choose_examples(y, k, seed=seed, first_pass=before)
    fields = list(metric.fields)
    return {
        "kept": kept,
        "rule": "kept when after - before is above 0 and its paired 95 % interval above 0 "
        "(from 100 labels: no lower than -0.01)",
        "k": len(final),
        "fields": fields,
        "for": metric.key or metric.name,
        "model": judge_label(judge_config),
        "examples": examples_payload(
            [_example(metric, kept_samples[i], y[i]) for i in final], fields
        )
        if kept
        else [],
        "out_of_fold": {"folds": int(fold_of.max()) + 1, "seed": seed, **report},
        "judge_calls": int(usage.get("calls", 0)),
        "not_judged": int(len(both) - both.sum()),
    }
