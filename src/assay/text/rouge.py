"""ROUGE-1, ROUGE-2 and ROUGE-L (Lin 2004) of a prediction against a target, as rouge-score
computes them, without rouge-score or nltk.

Tokens (`rouge_tokens`, rouge-score's default tokenizer with ``use_stemmer=True``): the
text lower-cased (``str.lower``), every run of characters outside ``[a-z0-9]`` made a
space, split on spaces; a token longer than 3 characters is replaced by its Porter stem
(`assay.text.porter.porter_stem`, NLTK's extended Porter stemmer, which rouge-score
uses). Stems of ``[a-z0-9]`` tokens are non-empty ``[a-z0-9]`` strings, so rouge-score's
final filter of invalid tokens drops nothing here.

Scores (`rouge_scores`), the same arithmetic as rouge-score 0.1.2 so values are equal
to the last bit (checked in ``tests/test_rouge.py``):

- ROUGE-N: ``matches = sum over target n-grams g of min(count_target(g),
  count_prediction(g))``; ``P = matches / max(prediction n-grams, 1)``,
  ``R = matches / max(target n-grams, 1)``;
- ROUGE-L: ``L`` = length of the longest common subsequence of the two token lists;
  ``P = L / len(prediction)``, ``R = L / len(target)``, all 0 when either is empty;
- ``F = 2 * P * R / (P + R)``, 0 when ``P + R = 0``.

The LCS length is computed bit-parallel (Allison and Dix 1986; Hyyrö 2004): one
Python integer holds a row of the DP table as bits, so the cost is ``len(a) * len(b) / 64``
machine-word operations instead of rouge-score's ``len(a) * len(b)`` Python steps and
table cells; the result is the exact LCS length.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from assay.text.porter import porter_stem

__all__ = ["ROUGE_TYPES", "RougeScore", "lcs_length", "rouge_scores", "rouge_tokens"]

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")

_NOT_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class RougeScore:
    """Precision, recall and F1 of one ROUGE type (the fields of rouge-score's ``Score``)."""

    precision: float
    recall: float
    fmeasure: float


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's default tokens of ``text`` (``use_stemmer=True``): lower-cased
    ``[a-z0-9]`` runs, those longer than 3 characters Porter-stemmed."""
    tokens = _NOT_ALPHANUMERIC.sub(" ", text.lower()).split()
    return [porter_stem(token) if len(token) > 3 else token for token in tokens]


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _rouge_n(target: Sequence[str], prediction: Sequence[str], n: int) -> RougeScore:
    target_ngrams = Counter(zip(*(target[i:] for i in range(n)), strict=False))
    prediction_ngrams = Counter(zip(*(prediction[i:] for i in range(n)), strict=False))
    matches = sum(min(count, prediction_ngrams[ngram]) for ngram, count in target_ngrams.items())
    precision = matches / max(prediction_ngrams.total(), 1)
    recall = matches / max(target_ngrams.total(), 1)
    return RougeScore(precision, recall, _f1(precision, recall))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences (exact).

    Bit ``i`` of ``row`` is 1 where the DP row has not yet stepped up at position ``i`` of
    ``a``; for each token of ``b`` with match mask ``M``, ``u = row & M`` and
    ``row = (row + u) | (row - u)``; the LCS length is the number of 0 bits at the end.
    """
    if len(a) < len(b):
        a, b = b, a  # loop over the shorter sequence; the longer one is the bit row
    if not b:
        return 0
    masks: dict[str, int] = {}
    for position, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << position)
    full = (1 << len(a)) - 1
    row = full
    for token in b:
        mask = masks.get(token)
        if mask is not None:
            u = row & mask
            row = ((row + u) | (row - u)) & full
    return len(a) - row.bit_count()


def _rouge_l(target: Sequence[str], prediction: Sequence[str]) -> RougeScore:
    if not target or not prediction:
        return RougeScore(0.0, 0.0, 0.0)
    length = lcs_length(target, prediction)
    precision = length / len(prediction)
    recall = length / len(target)
    return RougeScore(precision, recall, _f1(precision, recall))


def rouge_scores(target: Sequence[str], prediction: Sequence[str]) -> dict[str, RougeScore]:
    """ROUGE-1, ROUGE-2 and ROUGE-L of the ``prediction`` tokens against the ``target``
    tokens, keyed as rouge-score keys them (`ROUGE_TYPES`)."""
    return {
        "rouge1": _rouge_n(target, prediction, 1),
        "rouge2": _rouge_n(target, prediction, 2),
        "rougeL": _rouge_l(target, prediction),
    }
