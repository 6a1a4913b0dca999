"""Pure formulas of the judged metrics (judge and RAG specifications): weights, composites,
grades."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from assay.metrics.base import clamp01

__all__ = [
    "FACTUAL_ACCURACY_WEIGHTS",
    "RAGAS_WEIGHTS",
    "average_precision",
    "factual_grade",
    "ragas_composite",
    "unit_score",
    "weighted_correctness",
]

#: the RAG specification's composite weights
RAGAS_WEIGHTS: dict[str, float] = {
    "faithfulness": 0.30,
    "context_precision": 0.20,
    "context_recall": 0.20,
    "answer_relevance": 0.30,
}
#: the RAG specification's G-Eval criteria weights
FACTUAL_ACCURACY_WEIGHTS: dict[str, float] = {
    "correctness": 0.5,
    "completeness": 0.3,
    "consistency": 0.2,
}


def weighted_correctness(
    relevance: float, faithfulness: float, weights: Mapping[str, float]
) -> float:
    """The judge specification: ``w_r * relevance + w_f * faithfulness``, divided by ``w_r + w_f``
    (1 for the default 0.7/0.3), e.g. 0.7 * 0.90 + 0.3 * 1.00 = 0.93."""
    w_r, w_f = weights["relevance"], weights["faithfulness"]
    return (w_r * relevance + w_f * faithfulness) / (w_r + w_f)


def ragas_composite(
    values: Mapping[str, float | None], weights: Mapping[str, float] = RAGAS_WEIGHTS
) -> tuple[float | None, dict[str, float]]:
    """The RAG specification's weighted composite, renormalised over the values that exist.

    Returns (score or None when no value exists, the renormalised weights used). The RAG
    specification's example: faithfulness 1.00, precision missing, recall 1.00, answer
    relevance 0.8327 -> (0.3 * 1 + 0.2 * 1 + 0.3 * 0.8327) / 0.8 = 0.9373.
    """
    present = {k: v for k, v in values.items() if v is not None and k in weights}
    total = sum(weights[k] for k in present)
    if not present or total <= 0:
        return None, {}
    used = {k: weights[k] / total for k in present}
    return sum(present[k] * used[k] for k in present), used


def average_precision(verdicts: Sequence[bool]) -> float:
    """Rank-aware precision@K of the RAG specification: ``sum_k(rel_k * P@k) / (relevant in
    top K)``, 0.0 when no context is relevant. E.g. [1, 0, 1] -> (1/1 + 2/3) / 2 =
    0.8333."""
    hits, total = 0, 0.0
    for k, relevant in enumerate(verdicts, 1):
        if relevant:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def factual_grade(score: float) -> str:
    """The RAG specification's letter grade of a 0..1 factual accuracy: A >= 0.8, B >= 0.6,
    C >= 0.4, D >= 0.2, else E (compared in percent, rounded to 6 decimals)."""
    percent = round(100.0 * score, 6)
    for bound, grade in ((80, "A"), (60, "B"), (40, "C"), (20, "D")):
        if percent >= bound:
            return grade
    return "E"


def unit_score(score: float) -> tuple[float, bool]:
    """A judge's 0..1 score; a score in (10, 100] is read as percent. Other scores outside
    0..1 never get here: `ScoreVerdict` rejects them as unparsable (the specification clamps
    them)."""
    if 1.0 < score <= 100.0:
        return score / 100.0, True
    return clamp01(score), False
