"""Reasoning metrics: chain-of-thought form, step correctness and logical consistency.

The chatbot hub's ``cot_validity``, ``step_correctness`` and ``logic_consistency``. They read
``Sample.reasoning_steps``; when that is absent and the response has at least two
sentences, the response is split into steps with `assay.text.tokenize.sentences` and
``details.steps_source`` says so ("reasoning_steps" or "response_sentences"). A sample
with neither gives None.

English and Arabic word lists are used; Arabic text is normalised first (diacritics and
tatweel removed, أ/إ/آ -> ا, ى -> ي, ة -> ه) and Arabic words may carry an attached
conjunction (و/ف).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import combinations, pairwise
from typing import Any

import numpy as np

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers
from assay.engine.resources import Resources
from assay.metrics.base import Metric, Source, clamp01
from assay.metrics.registry import register
from assay.metrics.semantic import EmbeddedMetric
from assay.text.arabic import normalise_arabic
from assay.text.tokenize import STOP_WORDS, sentences, words

__all__ = [
    "CONCLUSION_MARKERS",
    "CONTRADICTION_MARKERS",
    "LOGICAL_CONNECTORS",
    "NEGATIONS",
    "reasoning_steps",
]

# ---- shared helpers ----------------------------------------------------------------------


def _normalise(text: str) -> str:
    text = text.lower().replace("’", "'").replace("‘", "'")
    return normalise_arabic(text)


def _phrase_regex(phrases: Sequence[str]) -> re.Pattern[str]:
    """Whole-word alternation over normalised text; Arabic phrases may take و/ف in front."""
    english = sorted((p for p in phrases if p.isascii()), key=len, reverse=True)
    arabic = sorted((_normalise(p) for p in phrases if not p.isascii()), key=len, reverse=True)
    parts = []
    if english:
        parts.append(
            "(?:" + "|".join(r"\s+".join(map(re.escape, p.split())) for p in english) + ")"
        )
    if arabic:
        alternation = "|".join(r"\s+".join(map(re.escape, p.split())) for p in arabic)
        parts.append("(?:[وف]?(?:" + alternation + "))")
    return re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)")


def reasoning_steps(sample: Sample) -> tuple[list[str], str] | None:
    """The steps to assess and where they came from, or None when there are none.

    ``reasoning_steps`` (blank steps dropped) when given; otherwise the response's
    sentences when there are at least two; otherwise None.
    """
    given = [s.strip() for s in sample.reasoning_steps or [] if s and s.strip()]
    if given:
        return given, "reasoning_steps"
    split = sentences(sample.response)
    if len(split) >= 2:
        return split, "response_sentences"
    return None


_NO_STEPS = "no reasoning steps: give reasoning_steps, or a response of at least two sentences"


# ---- cot_validity ------------------------------------------------------------------------

#: causal, inferential, conditional and contrastive connectors (whole words)
LOGICAL_CONNECTORS: tuple[str, ...] = (
    "because", "since", "therefore", "thus", "hence", "so", "consequently", "accordingly",
    "as a result", "which means", "this means", "that means", "it follows", "implies",
    "given that", "if", "then", "however", "but", "although", "whereas", "otherwise",
    "for this reason", "due to",
    "لأن", "بما أن", "لذلك", "لذا", "إذن", "إذا", "بالتالي", "نتيجة لذلك", "هذا يعني",
    "ثم", "لكن", "بسبب", "إذا كان",
)  # fmt: skip

#: markers of a conclusion, looked for in the last step (plus a literal "=")
CONCLUSION_MARKERS: tuple[str, ...] = (
    "therefore", "thus", "hence", "so", "consequently", "in conclusion", "to conclude",
    "in summary", "overall", "finally", "the answer is", "the final answer",
    "the result is", "this gives", "we get", "which gives",
    "إذن", "لذلك", "بالتالي", "الإجابة", "الجواب", "النتيجة", "في الختام", "أخيرا",
)  # fmt: skip

_CONNECTOR_RE = _phrase_regex(LOGICAL_CONNECTORS)
_CONCLUSION_RE = _phrase_regex(CONCLUSION_MARKERS)

STEP_MIN_WORDS, STEP_MAX_WORDS = 5, 200
STEP_POINTS, CONNECTOR_WEIGHT, CONCLUSION_POINTS = 0.3, 0.4, 0.3


@register
class CotValidity(Metric):
    """Surface form of a chain of thought: steps of sensible length, connectors, a conclusion.

    Formula (chatbot hub, with its ``max_score`` made explicit), for n steps:
      - step_length_score = 0.3 * (steps with 5..200 words, `assay.text.tokenize.words`)
      - connector_ratio = (steps containing a logical connector) / n, so 0..1
      - conclusion_bonus = 0.3 when the last step has a conclusion marker
        ("therefore", "so", "the answer is", "إذن", ... or "="), else 0
      - ``cot_validity = (step_length_score + 0.4 * connector_ratio + conclusion_bonus)
        / max_score`` with ``max_score = 0.3 * n + 0.4 + 0.3``, the total when every
        step has a valid length, every step has a connector and there is a conclusion.
    Counting steps that contain a connector (not connector occurrences) keeps the ratio,
    and so the score, within 0..1.

    Inputs: reasoning_steps, or a response of at least two sentences (split into
    steps). Range 0..1, higher is better. No steps: None. Evidence: per-step word
    counts and connectors, the conclusion found, the three parts and max_score.

    Weaknesses: form only; a wrong argument in well-sized, connected steps scores 1.
    Because step length earns 0.3 per step while the other parts are fixed, the length
    part dominates long chains (10 valid steps with no connector and no conclusion score
    3 / 3.7 = 0.81); the components ``length_ratio``, ``connector_ratio`` and
    ``conclusion`` are reported so a balanced view can be taken. The connector list is
    English and Arabic only.
    """

    name = "cot_validity"
    family = "reasoning"
    suites = ("reasoning", "base-model")
    source = Source.CHATBOT_HUB
    components = ("length_ratio", "connector_ratio", "conclusion")

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        found = reasoning_steps(sample)
        if found is None:
            return self.na(_NO_STEPS)
        steps, source = found
        n = len(steps)
        per_step = []
        valid_length = with_connector = 0
        for step in steps:
            n_words = len(words(step))
            connectors = [m.group(0) for m in _CONNECTOR_RE.finditer(_normalise(step))]
            ok = STEP_MIN_WORDS <= n_words <= STEP_MAX_WORDS
            valid_length += ok
            with_connector += bool(connectors)
            per_step.append({"words": n_words, "valid_length": ok, "connectors": connectors})
        last = _normalise(steps[-1])
        conclusion_match = _CONCLUSION_RE.search(last)
        conclusion = (
            conclusion_match.group(0) if conclusion_match else ("=" if "=" in last else None)
        )
        step_length_score = STEP_POINTS * valid_length
        connector_ratio = with_connector / n
        conclusion_bonus = CONCLUSION_POINTS if conclusion else 0.0
        max_score = STEP_POINTS * n + CONNECTOR_WEIGHT + CONCLUSION_POINTS
        total = step_length_score + CONNECTOR_WEIGHT * connector_ratio + conclusion_bonus
        return self.result(
            clamp01(total / max_score),
            components={
                "length_ratio": valid_length / n,
                "connector_ratio": connector_ratio,
                "conclusion": 1.0 if conclusion else 0.0,
            },
            method="pattern",
            steps_source=source,
            n_steps=n,
            steps=per_step,
            conclusion_marker=conclusion,
            step_length_score=step_length_score,
            conclusion_bonus=conclusion_bonus,
            max_score=max_score,
        )


# ---- step_correctness --------------------------------------------------------------------


def _reference_steps(sample: Sample) -> tuple[list[str], str, str] | None:
    """(reference steps, the reference text for overall similarity, source) or None."""
    given = [s.strip() for s in sample.reference_steps or [] if s and s.strip()]
    if given:
        return given, " ".join(given), "reference_steps"
    if sample.has("expected"):
        expected = sample.expected.strip()  # type: ignore[union-attr]
        return sentences(expected) or [expected], expected, "expected_sentences"
    return None


@register
class StepCorrectness(EmbeddedMetric):
    """How well the reasoning steps cover the reference steps, by embedding similarity.

    Formula (chatbot hub): ``0.7 * avg_step_similarity + 0.3 * overall_similarity``.
      - Pairing: each reference step is matched to its most similar response step
        (cosine of the configured embedder, negatives clamped to 0), and
        avg_step_similarity is the mean of those best matches over the reference steps.
        It is recall-like: it asks whether every reference step appears somewhere, in
        any order.
      - overall_similarity: cosine of all response steps joined with spaces against the
        reference joined (or the expected answer itself), clamped to 0..1.
    Reference: ``reference_steps`` when given, else the expected answer split into
    sentences (``details.reference_source``). Steps: ``reasoning_steps``, else the
    response's sentences (at least two).

    Range 0..1, higher is better. No steps, or no reference: None. Evidence: the best
    match (index, similarity) of each reference step and ``step_precision`` (the mean best
    match of each response step, for the opposite direction).

    Weaknesses: similarity of topic, not of correctness ("3 * 60 = 180" and "3 * 60 = 120"
    embed close together); extra or wrong steps are not penalised by the value (see
    step_precision); step order is ignored.
    """

    name = "step_correctness"
    family = "reasoning"
    suites = ("reasoning", "base-model")
    source = Source.CHATBOT_HUB
    components = ("avg_step_similarity", "overall_similarity")

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        """The steps, the reference steps, and the two joined texts (none without steps or
        a reference)."""
        found, reference = reasoning_steps(sample), _reference_steps(sample)
        if found is None or reference is None:
            return []
        steps, (ref_steps, ref_text, _) = found[0], reference
        return [*steps, *ref_steps, " ".join(steps), ref_text]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        found = reasoning_steps(sample)
        reference = _reference_steps(sample)
        if found is None:
            return self.na(_NO_STEPS)
        if reference is None:
            return self.na("no reference: give reference_steps or expected", missing=["expected"])
        steps, source = found
        ref_steps, ref_text, ref_source = reference
        vectors = answers.vectors(self.texts(sample, res.config))
        cand = np.stack([vectors[s] for s in steps])
        ref = np.stack([vectors[s] for s in ref_steps])
        sims = np.clip(ref @ cand.T, 0.0, 1.0)  # rows: reference steps
        best = sims.argmax(axis=1)
        best_sims = sims.max(axis=1)
        avg_step = float(best_sims.mean())
        overall = clamp01(float(vectors[" ".join(steps)] @ vectors[ref_text]))
        return self.result(
            clamp01(0.7 * avg_step + 0.3 * overall),
            components={"avg_step_similarity": avg_step, "overall_similarity": overall},
            model=answers.embedder,
            steps_source=source,
            reference_source=ref_source,
            n_steps=len(steps),
            n_reference_steps=len(ref_steps),
            matches=[
                {"reference_step": j, "step": int(i), "similarity": float(s)}
                for j, (i, s) in enumerate(zip(best, best_sims, strict=True))
            ],
            step_precision=float(sims.max(axis=0).mean()),
        )


# ---- logic_consistency -------------------------------------------------------------------

#: negation words (plus any English "n't" contraction)
NEGATIONS = frozenset(
    ("not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "without",
     "لا", "لم", "لن", "ليس", "ليست", "غير")
)  # fmt: skip
_QUANTIFIERS = frozenset(("all", "every", "each", "always", "some", "any"))
#: the stop words in the form ``_normalise`` gives the steps ("إلى" -> "الي", "على" -> "علي")
_STOP_WORDS = frozenset(_normalise(w) for w in STOP_WORDS)

#: explicit statements of contradiction or retraction inside the reasoning (0.2 each)
CONTRADICTION_MARKERS: tuple[str, ...] = (
    "contradicts", "contradiction", "contradictory", "inconsistent with",
    "that's wrong", "that is wrong", "that's incorrect", "that is incorrect",
    "i was wrong", "wait, no", "actually, no",
    "تناقض", "يتناقض", "متناقض", "هذا خطأ", "هذا غير صحيح",
)  # fmt: skip
_MARKER_RE = re.compile(
    r"(?<!\w)(?:"
    # words joined by \W* (any punctuation and spacing); not \W*\s*, which matches the same
    # text but backtracks quadratically on a long run of spaces
    + "|".join(r"\W*".join(map(re.escape, _normalise(m).split())) for m in CONTRADICTION_MARKERS)
    + r")(?!\w)"
)
_A_AND_NOT_A = re.compile(r"(?<!\w)(\w+)\s+and\s+not\s+\1(?!\w)")

NEGATION_FLIP_PENALTY = 0.3
A_AND_NOT_A_PENALTY = 0.3
MARKER_PENALTY = 0.2
POOR_OVERLAP_PENALTY = 0.2
POOR_OVERLAP_THRESHOLD = 0.1
TERM_PENALTY = 0.1
FLIP_MIN_JACCARD = 0.8

_SPELLING = (
    ("isation", "ization"), ("ising", "izing"), ("ised", "ized"), ("ise", "ize"),
    ("yse", "yze"), ("our", "or"), ("tre", "ter"),
)  # fmt: skip


def _polarity_and_content(step: str) -> tuple[int, set[str]]:
    """(number of negations, content words minus negations and quantifiers)."""
    negations = 0
    content = set()
    for token in words(_normalise(step)):
        if token in NEGATIONS or token.endswith("n't"):
            negations += 1
        elif (
            token not in _STOP_WORDS
            and token not in _QUANTIFIERS
            and (len(token) > 1 or token.isdigit())
        ):
            content.add(token)
    return negations, content


def _stem(token: str) -> str:
    """A light English plural strip ("hours" -> "hour"); other tokens unchanged."""
    if token.isascii() and len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def _spelling_key(token: str) -> str:
    if len(token) >= 5:
        for british, american in _SPELLING:
            if token.endswith(british):
                return token[: -len(british)] + american
    return token


def _term_variants(steps: Sequence[str]) -> list[list[str]]:
    """Groups of different spellings of one term used across the steps."""
    tokens = [t for step in steps for t in words(_normalise(step))]
    vocabulary = set(tokens)
    groups: dict[str, set[str]] = {}
    for token in vocabulary:
        if not token.isascii():
            continue
        groups.setdefault(_spelling_key(token.replace("-", "")), set()).add(token)
    for step in steps:
        step_tokens = words(_normalise(step))
        for first, second in pairwise(step_tokens):
            joined = first + second
            if (
                first.isalpha()
                and second.isalpha()
                and first.isascii()
                and first not in STOP_WORDS
                and second not in STOP_WORDS
                and joined in vocabulary
            ):
                groups.setdefault(_spelling_key(joined), set()).update(
                    {f"{first} {second}", joined}
                )
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


@register
class LogicConsistency(Metric):
    """Whether the reasoning steps contradict themselves, by pattern rules (1 = no problem found).

    Formula (chatbot hub): ``clamp(1.0 - penalty, 0, 1)``, penalties summed:
      - negation flip, 0.3 per pair of steps: two steps say the same thing with opposite
        polarity ("Birds can fly." / "Birds cannot fly."): their content words (stop
        words, negations and the quantifiers all/every/each/always/some/any removed)
        have Jaccard >= 0.8 with at least 2 words in common, and the parity of their
        negation counts differs. Negations: not, no, never, none, nobody, nothing,
        neither, nor, cannot, without, any "n't", Arabic لا لم لن ليس ليست غير.
      - "A and not A" inside a step ("true and not true"), 0.3 per match.
      - an explicit contradiction or retraction, 0.2 per match: "contradicts",
        "contradiction", "contradictory", "inconsistent with", "that's wrong/incorrect",
        "I was wrong", "wait, no", "actually, no", Arabic تناقض، يتناقض، متناقض،
        هذا خطأ، هذا غير صحيح.
      - poor concept overlap, 0.2 once: the mean overlap coefficient
        ``|A ∩ B| / min(|A|, |B|)`` of content words (plural "s" stripped) of consecutive
        steps is below 0.1, i.e. the steps do not talk about the same things (needs two
        steps with content words).
      - inconsistent term usage, 0.1 once: one term written two ways across the steps:
        hyphenated or split compounds ("e-mail"/"email", "data set"/"dataset") or
        British/American spellings (-our/-or, -ise/-ize, -yse/-yze, -tre/-ter).
    The specification gives only the penalty sizes; these patterns are Assay's.

    Inputs: reasoning_steps, or a response of at least two sentences. Range 0..1,
    higher is better. No steps: None. Evidence: ``details.penalties`` (type, steps,
    text, penalty) and the consecutive overlaps.

    Weaknesses: rules see wording, not logic: a contradiction in other words ("x is 3" /
    "x equals 4") is missed, a proof by contradiction or a self-correction that ends
    well is penalised, and chains that legitimately change topic may get the overlap
    penalty. Arabic coverage is the word lists only (no stemming of clitics).
    """

    name = "logic_consistency"
    family = "reasoning"
    suites = ("reasoning", "base-model")
    source = Source.CHATBOT_HUB

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        found = reasoning_steps(sample)
        if found is None:
            return self.na(_NO_STEPS)
        steps, source = found
        penalties: list[dict[str, Any]] = []
        analysed = [_polarity_and_content(step) for step in steps]

        for (i, (neg_a, words_a)), (j, (neg_b, words_b)) in combinations(enumerate(analysed), 2):
            common = words_a & words_b
            union = words_a | words_b
            if (
                len(common) >= 2
                and len(common) / len(union) >= FLIP_MIN_JACCARD
                and neg_a % 2 != neg_b % 2
            ):
                penalties.append(
                    {
                        "type": "negation_flip",
                        "steps": [i, j],
                        "text": [steps[i], steps[j]],
                        "penalty": NEGATION_FLIP_PENALTY,
                    }
                )
        for i, step in enumerate(steps):
            normalised = _normalise(step)
            for match in _A_AND_NOT_A.finditer(normalised):
                penalties.append(
                    {
                        "type": "a_and_not_a",
                        "steps": [i],
                        "text": match.group(0),
                        "penalty": A_AND_NOT_A_PENALTY,
                    }
                )
            for match in _MARKER_RE.finditer(normalised):
                penalties.append(
                    {
                        "type": "contradiction_marker",
                        "steps": [i],
                        "text": match.group(0),
                        "penalty": MARKER_PENALTY,
                    }
                )

        stems = [{_stem(w) for w in content} for _, content in analysed]
        overlaps = [len(a & b) / min(len(a), len(b)) for a, b in pairwise(stems) if a and b]
        mean_overlap = float(np.mean(overlaps)) if overlaps else None
        if mean_overlap is not None and mean_overlap < POOR_OVERLAP_THRESHOLD:
            penalties.append(
                {
                    "type": "poor_concept_overlap",
                    "steps": list(range(len(steps))),
                    "text": f"mean consecutive overlap {mean_overlap:.3f} "
                    f"< {POOR_OVERLAP_THRESHOLD}",
                    "penalty": POOR_OVERLAP_PENALTY,
                }
            )

        variants = _term_variants(steps)
        if variants:
            penalties.append(
                {
                    "type": "inconsistent_terms",
                    "steps": [],
                    "text": variants,
                    "penalty": TERM_PENALTY,
                }
            )

        total = sum(p["penalty"] for p in penalties)
        return self.result(
            clamp01(1.0 - total),
            method="pattern",
            steps_source=source,
            n_steps=len(steps),
            penalties=penalties,
            total_penalty=total,
            consecutive_overlaps=overlaps,
            mean_overlap=mean_overlap,
        )
