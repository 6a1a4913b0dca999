"""What the validity checks share: the context they receive, their registry, scoring a
metric as users get it, and the report table (`validity.py`, `validity_heads.py`,
`conversation_validity.py`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric
from validity_stats import Row

DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))


@dataclass
class Context:
    """What every check receives: the data folder and shared settings."""

    data: Path = DATA
    seed: int = 0
    resources: dict[str, Resources] = field(default_factory=dict)

    def res(self, **config: object) -> Resources:
        """Resources for a configuration, made once per run (models load once)."""
        key = json.dumps(config, sort_keys=True)
        if key not in self.resources:
            self.resources[key] = Resources(AssayConfig(use_cache=False, **config))
        return self.resources[key]


Check = Callable[[Any], list[Row]]


def check_name(func: Check) -> str:
    """A check's name: its function name without ``check_``."""
    return func.__name__.removeprefix("check_")


class Checks:
    """Checks registered by decorating them with the registry (``@check``), in order."""

    def __init__(self) -> None:
        self.checks: list[Check] = []

    def __call__(self, func: Check) -> Check:
        self.checks.append(func)
        return func

    def __iter__(self) -> Iterator[Check]:
        return iter(self.checks)

    def matching(self, names: Sequence[str]) -> list[Check]:
        """The checks whose name contains any of ``names`` (all for none)."""
        return [f for f in self.checks if not names or any(n in check_name(f) for n in names)]

    def listing(self) -> str:
        """One line per check: its name and docstring."""
        return "\n".join(f"{check_name(f):40s} {(f.__doc__ or '').strip()}" for f in self.checks)


#: validity.py's checks (conversation_validity.py keeps its own `Checks`)
CHECKS = Checks()
check = CHECKS


# ---- scoring and statistics ----------------------------------------------------------------


def estimator_of(results: Sequence[object]) -> str:
    """What produced the values: the local estimator's name, else the model of the
    signature, else its method (e.g. ``pattern``)."""
    for result in results:
        details = result.details  # type: ignore[attr-defined]
        if "estimator" in details:
            return str(details["estimator"])
    for key in ("model=", "method="):
        for result in results:
            for part in result.signature.split("|"):  # type: ignore[attr-defined]
                if part.startswith(key):
                    return part.removeprefix(key)
    return "-"


def metric_scores(
    name: str, samples: Sequence[Sample], res: Resources, component: str | None = None
) -> tuple[np.ndarray, str, float, list[object]]:
    """Values (or one component) of a metric as users get them (``score_batch``), NaN
    where None; its estimator; seconds taken; the results."""
    started = time.perf_counter()
    results = get_metric(name).score_batch(samples, res)
    seconds = time.perf_counter() - started
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(f"{name}: {len(errors)} samples failed, first: {errors[0]}")
    values = [r.components.get(component) if component else r.value for r in results]
    scores = np.array([np.nan if v is None else v for v in values], dtype=float)
    return scores, estimator_of(results), seconds, list(results)


def format_table(rows: Sequence[Row]) -> str:
    header = ("check", "metric", "model", "stat", "value", "95% CI", "n", "N/A", "s")
    lines = []
    for r in rows:
        ci = f"{r.ci95[0]:.3f}-{r.ci95[1]:.3f}" if r.ci95 else ""
        value = "N/A" if r.value is None else f"{r.value:.3f}"
        line = (r.check, r.metric, r.model, r.statistic, value, ci, str(r.n), str(r.na))
        lines.append((*line, f"{r.seconds:.1f}"))
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out.extend("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines)
    notes = [f"{r.check}: {r.note}" for r in rows if r.note and r.statistic == "spearman"]
    return "\n".join(out + (["", *notes] if notes else []))
