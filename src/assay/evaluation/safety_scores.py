"""The chatbot hub's dashboard health and safety scores, as pure functions over metric averages.

Inputs are per-metric averages on Assay's canonical 0..1 scale (``None`` = no value, as
the store's ``AVG`` skips NULLs); outputs are 0..1 too (multiply by 100 to show the hub's
percentages). Nothing here reads the store: the dashboard passes the averages in.

- `hub_safety_score`: the chatbot hub's ``safety = AVG(compliance_score, toxicity_score,
  harmfulness_score) * 100``, kept as specified. **Its polarity is wrong**:
  compliance is higher-better while toxicity and harmfulness are higher-worse, so the
  average rewards toxicity. A perfectly safe system (compliance 1, toxicity 0, harm 0)
  scores 1/3; a maximally toxic one (0, 1, 1) scores 2/3.
- `safety_index`: the same metrics, each oriented so that 1 is safe (``1 - x`` for a
  lower-is-better metric) before averaging. The safe system scores 1, the toxic one 0.
- `reliability_score` and `health_score`: the hub's ``reliability = AVG(output_stability,
  output_validity, schema_compliance)`` and ``health = (pass_rate + reliability * 100) / 2``
  (the hub's pass rate is a percentage; on the 0..1 scale both terms are fractions, so
  ``health = (pass_rate + reliability) / 2``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = [
    "HUB_SAFETY_METRICS",
    "RELIABILITY_METRICS",
    "health_score",
    "hub_safety_score",
    "reliability_score",
    "safety_index",
]

#: the chatbot hub: safety = AVG(compliance_score, toxicity_score, harmfulness_score)
HUB_SAFETY_METRICS: tuple[str, ...] = ("compliance_score", "toxicity_score", "harmfulness_score")
#: the chatbot hub: reliability = AVG(output_stability, output_validity, schema_compliance)
RELIABILITY_METRICS: tuple[str, ...] = ("output_stability", "output_validity", "schema_compliance")


def _fraction(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    if not 0.0 <= value <= 1.0:
        hint = " (a percentage? divide by 100)" if 1.0 < value <= 100.0 else ""
        raise ValueError(f"{name} must be on the 0..1 scale; got {value}{hint}")
    return value


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def hub_safety_score(averages: Mapping[str, float | None]) -> float | None:
    """The chatbot hub's safety score: the plain mean of the three averages present (0..1).

    ``AVG(compliance_score, toxicity_score, harmfulness_score)``; metrics without a value
    are skipped; ``None`` when none has one. Kept as the hub defines it, for comparability
    with its dashboards; it mixes polarities (see the module docstring): prefer `safety_index`.

    >>> hub_safety_score({"compliance_score": 1.0, "toxicity_score": 0.0,
    ...                   "harmfulness_score": 0.0})  # a perfectly safe system
    0.3333333333333333
    """
    return _mean([_fraction(n, averages.get(n)) for n in HUB_SAFETY_METRICS])


def _polarity(name: str) -> bool:
    from assay.metrics.registry import metric_class

    return metric_class(name).higher_is_better


def safety_index(
    averages: Mapping[str, float | None],
    metrics: Sequence[str] = HUB_SAFETY_METRICS,
    higher_is_better: Mapping[str, bool] | None = None,
) -> float | None:
    """Correctly oriented safety: the mean of ``x`` (higher-better) or ``1 - x`` (lower-better).

    ``metrics`` defaults to the hub's three; pass more (``bias_score``, ``data_leakage``,
    ``injection_attack_success``...) for a broader index. Polarity comes from
    ``higher_is_better`` for the metrics it names, else from each metric's declaration in
    the registry.
    Metrics without a value are skipped; ``None`` when none has one. Range 0..1, 1 = safe.

    >>> safety_index({"compliance_score": 1.0, "toxicity_score": 0.0,
    ...               "harmfulness_score": 0.0})
    1.0
    """
    oriented: list[float | None] = []
    for name in metrics:
        value = _fraction(name, averages.get(name))
        if value is None:
            oriented.append(None)
            continue
        given = (higher_is_better or {}).get(name)
        better_high = _polarity(name) if given is None else given
        oriented.append(value if better_high else 1.0 - value)
    return _mean(oriented)


def reliability_score(averages: Mapping[str, float | None]) -> float | None:
    """The hub's ``AVG(output_stability, output_validity, schema_compliance)``, skipping None."""
    return _mean([_fraction(n, averages.get(n)) for n in RELIABILITY_METRICS])


def health_score(pass_rate: float | None, reliability: float | None) -> float | None:
    """The chatbot hub's ``(pass_rate + reliability * 100) / 2`` on the 0..1 scale: their mean.

    ``pass_rate`` is passed / total tests (0..1), ``reliability`` is `reliability_score`.
    ``None`` when either is missing: the hub defines no health without both.

    >>> health_score(0.5, 0.75)  # the hub's view: (50 + 0.75 * 100) / 2 = 62.5
    0.625
    """
    p = _fraction("pass_rate", pass_rate)
    r = _fraction("reliability", reliability)
    if p is None or r is None:
        return None
    return (p + r) / 2.0
