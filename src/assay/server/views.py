"""Read models the API and the pages share, built on `assay.store` queries.

- `tag_groups`: the per-method / per-question-type tables of one run: metric
  means (None skipped) per value of one tag, sample counts and pass rates, and the counts
  of categorical labels (e.g. CORRECT / WRONG / DONT_KNOW of an answer classifier).
- `metric_families`: the catalogue's families with each metric's stored average, the
  metrics with stored values apart from those without (N/A), so pages lead with data.
- `compare_view`: `Store.compare` rows with their 0–100 display values.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from sqlalchemy import select

from assay.store.db import Store
from assay.store.models import Run, ScoringDetail, TestResult
from assay.store.queries import display_value

__all__ = [
    "MISSING_TAG",
    "REPORT_TAGS",
    "compare_view",
    "metric_families",
    "metric_meta",
    "tag_groups",
]

#: the sample tags a run's per-group tables report by
REPORT_TAGS = ("method", "question_type")
#: the group of samples without the tag
MISSING_TAG = "-"


def metric_meta(name: str) -> tuple[str, bool, str, str]:
    """(unit, higher_is_better, family, description) of a metric; ratio for unknown names."""
    from assay.registry import metric_class

    try:
        cls = metric_class(name)
    except KeyError:
        return "ratio", True, "other", ""
    return cls.unit, cls.higher_is_better, cls.family, cls.description()


def tag_groups(store: Store, run_id: str, tag: str) -> dict[str, Any] | None:
    """Metric means of one run per value of ``tag`` (None if the run does not exist).

    Groups are sorted by value, samples without the tag form the group ``"-"``. Each
    group: ``samples``, ``passed``, ``pass_rate`` (×100), ``metrics`` (name -> avg, count,
    display) and ``labels`` (metric -> label -> count, from ``details['label']``);
    ``label_columns`` lists every (metric, label) pair found, for the table's columns.
    """
    with store.session() as session:
        if session.get(Run, run_id) is None:
            return None
        group_of: dict[int, str] = {}
        samples: dict[str, int] = defaultdict(int)
        passed: dict[str, int] = defaultdict(int)
        for row_id, tags, status in session.execute(
            select(TestResult.id, TestResult.tags, TestResult.status).where(
                TestResult.run_id == run_id
            )
        ):
            value = (tags or {}).get(tag)
            key = MISSING_TAG if value is None or value == "" else str(value)
            group_of[row_id] = key
            samples[key] += 1
            passed[key] += status == "passed"
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
                "pass_rate": 100.0 * passed[key] / samples[key] if samples[key] else None,
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


def metric_families(averages: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every registered metric by family with its stored average or None (N/A):
    ``with_data`` holds the families that have stored values, each with only those
    metrics; ``without_data`` the families' metrics with nothing stored.

    Stored metrics the registry does not know are listed under their recorded family
    (``other``). Families are sorted by name, metrics within a family by name.
    """
    from assay.registry import list_metrics

    families: dict[str, list[dict[str, Any]]] = defaultdict(list)
    known: set[str] = set()
    for cls in list_metrics():
        known.add(cls.name)
        avg = averages.get(cls.name)
        families[cls.family].append(
            {
                "name": cls.name,
                "avg": avg["avg"] if avg else None,
                "display": avg["display"] if avg else None,
                "count": avg["count"] if avg else 0,
                "unit": cls.unit,
                "higher_is_better": cls.higher_is_better,
                "description": cls.description(),
            }
        )
    for name, avg in averages.items():
        if name in known:
            continue
        families[avg.get("family") or "other"].append(
            {
                "name": name,
                "avg": avg["avg"],
                "display": avg["display"],
                "count": avg["count"],
                "unit": avg.get("unit", "ratio"),
                "higher_is_better": avg.get("higher_is_better", True),
                "description": "",
            }
        )
    out: dict[str, list[dict[str, Any]]] = {"with_data": [], "without_data": []}
    for family in sorted(families):
        rows = sorted(families[family], key=lambda r: r["name"])
        stored = [r for r in rows if r["count"]]
        empty = [r for r in rows if not r["count"]]
        if stored:
            out["with_data"].append({"family": family, "metrics": stored, "total": len(rows)})
        if empty:
            out["without_data"].append({"family": family, "metrics": empty})
    return out


def compare_view(store: Store, a: str, b: str) -> list[dict[str, Any]]:
    """`Store.compare` rows plus ``unit``, ``higher_is_better`` and a ``display`` block
    (means, difference and CI on the 0–100 view for ratio metrics)."""
    rows = store.compare(a, b)
    for row in rows:
        unit, higher, family, _ = metric_meta(row["metric"])
        name = row["metric"]
        row["unit"] = unit
        row["higher_is_better"] = higher
        row["family"] = family
        row["display"] = {
            key: display_value(name, row[key])
            for key in ("mean_a", "mean_b", "diff", "ci_low", "ci_high")
        }
        diff = row["diff"]
        row["better"] = None if not diff or not math.isfinite(diff) else (diff > 0) == higher
    return rows
