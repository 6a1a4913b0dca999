"""The learned support head: is a text supported by its evidence passages? A logistic
model over sixteen support features, calibrated.

The features (`support_features`) describe one text against its evidence; the first four
come from `assay.estimators.offline.sentence_support`'s per-sentence rows (embedding cosine
and content-word share), the rest from words alone:

============================  ==================================================================
``semantic_mean``, ``_min``   best cosine of each sentence against the evidence units (mean, min)
``lexical_mean``, ``_min``    share of each sentence's content words found in the evidence
``novel_words``               share of the text's distinct content words absent from the evidence
``novel_bigrams``             share of the text's distinct word bigrams absent from the evidence
``sentences``                 number of sentences
``log_words``                 log(1 + number of words)
``copy_mean``, ``copy_min``   per sentence: LCS(sentence, s) / len(sentence) for its best evidence
                              sentence s among the `LOCAL_SENTENCES` sharing the most words with it
``local_bigrams_mean/_max``   per sentence: share of its bigrams absent from those local sentences
``local_words_mean/_max``     per sentence: share of its content words absent from them
``novel_names``               share of capitalised words (not sentence-initial) absent from the
                              evidence
``novel_numbers``             numbers in the text absent from the evidence (count, at most 3)
============================  ==================================================================

Scoring: `assay.models.logistic_head` (standardised features, logistic, sigmoid
calibration); ``p`` is a probability-like number that the text is fully supported, at an
even prior of supported and unsupported texts. The weights, the calibration, the default
threshold and the training record (data, folds, scores) are in
``assay/models/data/support_head.npz``, written by ``scripts/train_support_head.py``.
The semantic features are cosines of the embedder the head was trained with (named in the
file); on another embedder's vectors they mean something else, so `SupportHead.fits`
tells the estimator to fall back to the graded sentence-support score (and say so).
Inference is numpy only.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from assay.models.logistic_head import LogisticHead
from assay.text.tokenize import content_words, sentences, words

__all__ = [
    "FEATURES",
    "HEAD_FILE",
    "LOCAL_SENTENCES",
    "SupportHead",
    "closest_sentences",
    "new_terms",
    "support_features",
]

#: the shipped weights, inside the package
HEAD_FILE = "support_head.npz"
#: evidence sentences (by shared words) a text sentence is compared with for the local features
LOCAL_SENTENCES = 3
#: the feature names, in the order of the weights
FEATURES: tuple[str, ...] = (
    "semantic_mean",
    "semantic_min",
    "lexical_mean",
    "lexical_min",
    "novel_words",
    "novel_bigrams",
    "sentences",
    "log_words",
    "copy_mean",
    "copy_min",
    "local_bigrams_mean",
    "local_bigrams_max",
    "local_words_mean",
    "local_words_max",
    "novel_names",
    "novel_numbers",
)

_NAME = re.compile(r"\b[A-Z][\w'’-]*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _bigrams(tokens: Sequence[str]) -> set[tuple[str, str]]:
    return set(itertools.pairwise(tokens))


def _share_absent(items: set[Any], present: set[Any]) -> float:
    return len(items - present) / len(items) if items else 0.0


def longest_common_subsequence(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (dynamic programming)."""
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def closest_sentences(
    tokens: Sequence[str], evidence_sentences: Sequence[Sequence[str]], k: int = LOCAL_SENTENCES
) -> list[int]:
    """Indices of the ``k`` evidence sentences (word lists) sharing the most distinct words
    with ``tokens``, most first (ties: the earlier sentence first)."""
    own = set(tokens)
    order = sorted(
        range(len(evidence_sentences)), key=lambda j: -len(own & set(evidence_sentences[j]))
    )
    return order[:k]


def _local(sentence_words: list[str], evidence_sentences: list[list[str]]) -> list[float]:
    """copy, local novel bigrams, local novel words of one sentence (see the module doc)."""
    ranked = [evidence_sentences[j] for j in closest_sentences(sentence_words, evidence_sentences)]
    copy = max((longest_common_subsequence(sentence_words, ev) for ev in ranked), default=0)
    local_words = [w for ev in ranked for w in ev]
    content = set(content_words(" ".join(sentence_words)))
    return [
        copy / len(sentence_words),
        _share_absent(_bigrams(sentence_words), _bigrams(local_words)),
        _share_absent(content, set(local_words)),
    ]


@dataclass(frozen=True)
class _Evidence:
    """The evidence passages as the features read them: each sentence's words (sentences
    without a word left out), all their words and bigrams, and the numbers they state."""

    sentences: list[list[str]]
    words: frozenset[str]
    bigrams: frozenset[tuple[str, str]]
    numbers: frozenset[str]


@functools.lru_cache(maxsize=1024)
def _evidence(passages: tuple[str, ...]) -> _Evidence:
    """`_Evidence` of the non-blank ``passages``, remembered: a text's features, its new
    terms and each of its sentences' new terms read the same passages."""
    kept = [p for p in passages if p and p.strip()]
    tokens = [t for p in kept for s in (sentences(p) or [p]) if (t := words(s))]
    return _Evidence(
        sentences=tokens,
        words=frozenset(w for t in tokens for w in t),
        bigrams=frozenset(b for t in tokens for b in _bigrams(t)),
        numbers=frozenset(_NUMBER.findall(" ".join(kept))),
    )


def _names(text: str) -> set[str]:
    """Lower-cased capitalised words of ``text`` that do not start a sentence."""
    return {
        m.group(0).lower()
        for s in sentences(text) or [text]
        for m in _NAME.finditer(s)
        if m.start() > 0
    }


def _new_names_and_numbers(text: str, evidence: _Evidence) -> tuple[set[str], set[str], set[str]]:
    """The names of ``text``, those of them the evidence lacks, and its numbers the
    evidence lacks."""
    names = _names(text)
    return names, names - evidence.words, set(_NUMBER.findall(text)) - evidence.numbers


def new_terms(text: str, evidence: Sequence[str]) -> list[str]:
    """The names (capitalised words not starting a sentence) and numbers of ``text`` that
    the ``evidence`` passages do not contain: the terms behind the ``novel_names`` and
    ``novel_numbers`` features, for a result's evidence."""
    _, names, numbers = _new_names_and_numbers(text, _evidence(tuple(evidence)))
    return sorted(names) + sorted(numbers)


def support_features(
    text: str, evidence: Sequence[str], rows: Sequence[dict[str, Any]]
) -> np.ndarray:
    """The `FEATURES` of ``text`` against the ``evidence`` passages; ``rows`` are the
    per-sentence rows of `sentence_support` for the same text (``semantic``, ``lexical``)."""
    found = _evidence(tuple(evidence))
    evidence_sentences = found.sentences
    text_sentences = [tokens for s in (sentences(text) or [text]) if (tokens := words(s))]
    all_words = [w for tokens in text_sentences for w in tokens]
    local = np.array(
        [_local(tokens, evidence_sentences) for tokens in text_sentences] or [[1.0, 0.0, 0.0]]
    )
    semantic = [float(r["semantic"]) for r in rows] or [1.0]
    lexical = [float(r["lexical"]) for r in rows] or [1.0]
    names, new_names, numbers = _new_names_and_numbers(text, found)
    return np.array(
        [
            np.mean(semantic),
            np.min(semantic),
            np.mean(lexical),
            np.min(lexical),
            _share_absent(set(content_words(text)), found.words),
            _share_absent(
                {b for tokens in text_sentences for b in _bigrams(tokens)}, found.bigrams
            ),
            len(text_sentences),
            math.log1p(len(all_words)),
            local[:, 0].mean(),
            local[:, 0].min(),
            local[:, 1].mean(),
            local[:, 1].max(),
            local[:, 2].mean(),
            local[:, 2].max(),
            len(new_names) / len(names) if names else 0.0,
            min(len(numbers), 3),
        ],
        dtype=np.float64,
    )


class SupportHead(LogisticHead):
    """The shipped support head (or the one at ``path``): ``probability(features)`` of
    `support_features` rows (`assay.models.logistic_head.LogisticHead`)."""

    file = HEAD_FILE
    features = FEATURES
    kind = "support_head"
