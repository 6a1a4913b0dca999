"""The per-group tables of one run, read from the store: metric means (None skipped) per
value of one sample tag (e.g. ``method`` or ``question_type``), sample counts and pass
rates, and the counts of categorical labels (e.g. CORRECT / WRONG / DONT_KNOW of an
answer classifier)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.store.models import UNGATED, Run, ScoringDetail, TestResult
from assay.store.queries import display_value, metric_meta, pass_rate

__all__ = ["MISSING_TAG", "tag_groups"]

#: the group of samples without the tag
MISSING_TAG = "-"


def tag_groups(session: Session, run_id: str, tag: str) -> dict[str, Any] | None:
    """Metric means of one run per value of ``tag`` (None if the run does not exist).

    Groups are sorted by value, samples without the tag form the group ``"-"``. Each
    group: ``samples``, ``passed``, ``pass_rate`` (×100), ``metrics`` (name -> avg, count,
    display) and ``labels`` (metric -> label -> count, from ``details['label']``);
    ``label_columns`` lists every (metric, label) pair found, for the table's columns.
    """
    if session.get(Run, run_id) is None:
        return None
    group_of: dict[int, str] = {}
    samples: dict[str, int] = defaultdict(int)
    passed: dict[str, int] = defaultdict(int)
    ungated: dict[str, int] = defaultdict(int)
    for row_id, tags, status in session.execute(
        select(TestResult.id, TestResult.tags, TestResult.status).where(TestResult.run_id == run_id)
    ):
        value = (tags or {}).get(tag)
        key = MISSING_TAG if value is None or value == "" else str(value)
        group_of[row_id] = key
        samples[key] += 1
        passed[key] += status == "passed"
        ungated[key] += status == UNGATED
    label = ScoringDetail.details["label"].as_string()
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    labels: dict[str, dict[str, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    names: set[str] = set()
    for row_id, name, value, lab in session.execute(
        select(
            ScoringDetail.test_result_id,
            ScoringDetail.metric_name,
            ScoringDetail.metric_value,
            label,
        ).where(ScoringDetail.run_id == run_id)
    ):
        key = group_of.get(row_id)
        if key is None:
            continue
        names.add(name)
        if value is not None:
            acc = sums[(key, name)]
            acc[0] += float(value)
            acc[1] += 1
        if lab:
            labels[key][name][str(lab)] += 1
    metrics = sorted(names)
    groups = []
    for key in sorted(samples, key=lambda k: (k == MISSING_TAG, k)):
        per_metric: dict[str, Any] = {}
        for name in metrics:
            total, count = sums.get((key, name), (0.0, 0))
            avg = total / count if count else None
            per_metric[name] = {
                "avg": avg,
                "count": int(count),
                "display": display_value(name, avg),
            }
        groups.append(
            {
                "value": key,
                "samples": samples[key],
                "passed": passed[key],
                "pass_rate": pass_rate(passed[key], samples[key], ungated[key]),
                "metrics": per_metric,
                "labels": {m: dict(c) for m, c in sorted(labels[key].items())},
            }
        )
    label_columns = sorted({(m, lab) for g in labels.values() for m, c in g.items() for lab in c})
    units = {name: metric_meta(name)[0] for name in metrics}
    return {
        "run_id": run_id,
        "tag": tag,
        "metrics": metrics,
        "units": units,
        "label_columns": [{"metric": m, "label": lab} for m, lab in label_columns],
        "groups": groups,
    }
