"""Read models the API and the pages share, built on what `assay.store` reads (the
store's modules are the only ones that query it).

- `metric_families`: the catalogue's families with each metric's stored average, the
  metrics with stored values apart from those without (N/A), so pages lead with data.
- `compare_view`: `Store.compare` rows with their 0–100 display values.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from assay.store.db import Store
from assay.store.queries import display_value, metric_meta

__all__ = ["REPORT_TAGS", "compare_view", "metric_families"]

#: the sample tags a run's per-group tables report by
REPORT_TAGS = ("method", "question_type")


def metric_families(averages: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every registered metric by family with its stored average or None (N/A):
    ``with_data`` holds the families that have stored values, each with only those
    metrics; ``without_data`` the families' metrics with nothing stored.

    Stored metrics the registry does not know are listed under their recorded family
    (``other``). Families are sorted by name, metrics within a family by name.
    """
    from assay.metrics.registry import list_metrics

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
    """`Store.compare` rows plus ``unit``, ``higher_is_better``, B's ``wins`` and ``losses``
    by that polarity and a ``display`` block (means, difference and CI on the 0–100 view
    for ratio metrics)."""
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
        # B's wins and losses against A by the metric's polarity (`assay.core.paired`)
        row["wins"], row["losses"] = (
            (row["above"], row["below"]) if higher else (row["below"], row["above"])
        )
    return rows
