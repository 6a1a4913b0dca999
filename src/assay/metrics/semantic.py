"""Semantic metrics: embedding similarity (the chatbot hub's base model and test layer, the
RAG specification).

Every metric here is an `EmbeddedMetric`: it declares the texts it compares as embed asks
(`assay.engine.embed_ask`) and reduces their vectors (rows are L2-normalised, so a dot
product is the cosine). The engine embeds each distinct text of a chunk once, across all
metrics, in one call to the run's embedder (its cache in front, the rest sent to the model
sorted by length). Three of the chatbot hub's "base model" metrics (accuracy, factual consistency,
truthfulness) are this same similarity under other names: they are aliases of
``semantic_similarity``, documented there as proxies with pointers to better methods.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, embed_ask
from assay.engine.resources import Resources
from assay.metrics.base import PASS_THRESHOLD, PlannedMetric, Source, clamp01
from assay.metrics.registry import register
from assay.text.lang import is_arabic
from assay.text.tokenize import non_blank, words

__all__ = [
    "EmbeddedMetric",
    "check_k",
    "cosine",
    "normalised_answer",
    "with_settings",
]


class EmbeddedMetric(PlannedMetric):
    """A metric reduced from embeddings: `texts` names the texts a sample compares, `plan`
    asks for their vectors (`embed_ask`), and ``reduce`` reads them from the answers, so
    the texts that several metrics (or samples) share are embedded once per chunk."""

    needs = frozenset({"embedder"})

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        """The texts whose vectors ``reduce`` reads for ``sample`` under ``config``."""
        raise NotImplementedError

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """The embed asks of the non-blank `texts` (under the configuration of the answers'
        resources; the defaults for answers made by hand). A blank text is not asked: it
        would embed as zeros, and `cosine` gives 0 for it without a vector."""
        config = answers.resources.config if answers.resources is not None else AssayConfig()
        return [embed_ask(text) for text in self.texts(sample, config) if text.strip()]


def cosine(answers: Answers, a: str, b: str) -> float:
    """Cosine of two texts from the vectors of their embed asks; 0 when either is blank
    (`Answers.cosine`: the embedder gives a blank text the zero vector, so it is not
    asked; summed as the embedder's `similarities` sums its pairs, to the last bit)."""
    return answers.cosine(a, b)


def with_settings(result: MetricResult, settings: dict[str, Any], **details: Any) -> MetricResult:
    """``result`` with the configuration values that produced it added to its signature.

    Thresholds and ``k`` read from ``res.config`` change the value, so they belong in
    the signature next to ``params()``. ``details`` are added to the result's details
    (used for keys that ``Metric.result`` reserves, such as ``method``).
    """
    extra = [f"{k}={v}" for k, v in sorted(settings.items()) if f"|{k}=" not in result.signature]
    signature = "|".join([result.signature, *extra])
    return dataclasses.replace(result, signature=signature, details={**result.details, **details})


def normalised_answer(text: str | None) -> str:
    """Lower-cased word tokens joined by one space: punctuation and spacing do not count."""
    return " ".join(words(text))


def check_k(metric: str, k: int | None) -> int | None:
    """``k`` unchanged when it is None or an integer >= 1; else a ValueError naming ``metric``."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"The 'k' parameter of {metric} must be an integer >= 1. Got {k!r}.")
    return k


@register
class SemanticSimilarity(EmbeddedMetric):
    """Cosine similarity of response and expected-answer embeddings, clamped to [0, 1].

    Also reported as ``accuracy``, ``factual_consistency`` and ``truthfulness``: the
    chatbot hub's base model defines all three as this similarity (``accuracy =
    factual_consistency = truthfulness = similarity_score``, stored ×100 there; Assay
    keeps 0..1), so they are aliases of this metric: asking for one gives this value
    under that name, with the same pass threshold, and a suite computes it once, as
    ``semantic_similarity``.

    Formula (chatbot hub test layer): ``max(0, min(1, cos(embed(response),
    embed(expected))))`` with the configured embedder (default USE multilingual v3, which
    puts Arabic and English in one space). Range 0..1, higher is better. Pass threshold
    ``SEMANTIC_SIMILARITY_THRESHOLD`` (0.7), or ``ARABIC_SEMANTIC_SIMILARITY_THRESHOLD``
    (0.5) when either text is Arabic; the applied threshold is ``details["pass_threshold"]``.
    Requires response and expected; a missing or blank one gives None with a reason.
    The hub's validator names its first text ``query`` but is called with the expected
    answer as well (see its source grounding); Assay compares the response with the
    expected answer here, and with the query in ``source_grounding``. The hub picks an
    Arabic model for Arabic text; Assay uses one multilingual embedder for both.
    Weakness: similarity of topic, not of truth: "Paris is the capital" and "Lyon is the
    capital" score high together, and "the bridge opened in 1932" and "... in 1923" are
    nearly identical to it. Under its alias names it is a PROXY, as the hub itself notes:
    it checks no fact, so a fluent answer on the right topic with a wrong fact passes as
    accurate, and a confident falsehood phrased like the reference as truthful (real
    truthfulness needs a benchmark such as TruthfulQA or verified claims). Better
    methods: ``exact_match`` for short answers, the judged ``answer_correctness`` and
    ``factual_accuracy`` for a graded correctness verdict, the judged ``faithfulness`` /
    ``ragas_faithfulness`` (claims verified by an LLM) and ``anchor_hallucination``
    (numbers, dates and subject-verb-object claims checked against the context).
    """

    name = "semantic_similarity"
    aliases = ("accuracy", "factual_consistency", "truthfulness")
    family = "semantic"
    requires = ("response", "expected")
    default_threshold = 0.7
    threshold_env = "SEMANTIC_SIMILARITY_THRESHOLD"
    threshold_setting = "semantic_similarity_threshold"
    suites = ("base", "base-model", "semantic")
    source = Source.CHATBOT_HUB

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        return [sample.response, sample.expected]  # type: ignore[list-item]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        cos = cosine(answers, sample.response, sample.expected)  # type: ignore[arg-type]
        arabic = is_arabic(sample.response) or is_arabic(sample.expected)
        details: dict[str, Any] = {"cosine": cos, "arabic": arabic}
        if arabic:
            details[PASS_THRESHOLD] = res.config.arabic_semantic_similarity_threshold
        return self.result(clamp01(cos), model=answers.embedder, **details)


@register
class SemanticSimilarityPercentage(EmbeddedMetric):
    """The RAG specification's semantic similarity: max(0, cosine) of answer and ground truth,
    rounded.

    Formula (RAG specification section 7): ``round(max(0, cos(embed(answer), embed(ground_truth)))
    * 100, 2)`` percent; Assay stores the ratio, ``percentage / 100`` (so 4 decimals), and
    puts the percentage in ``details``. Inputs: response (answer) and expected
    (ground_truth). Range 0..1, higher is better; 1 = same meaning.
    Empty input: the specification returns 0.0 for an empty or blank answer or ground truth;
    Assay returns None with a reason instead (missing is not zero), so an unanswered
    question does not look like a maximally wrong answer in averages.
    Weakness: like ``semantic_similarity`` it measures closeness of topic, not
    correctness; short answers naming different entities can still score above 0.5.
    """

    name = "semantic_similarity_percentage"
    family = "semantic"
    requires = ("response", "expected")
    suites = ("semantic",)
    source = Source.RAG_EVALUATION

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        return [sample.response, sample.expected]  # type: ignore[list-item]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        cos = cosine(answers, sample.response, sample.expected)  # type: ignore[arg-type]
        percentage = round(min(1.0, max(0.0, cos)) * 100.0, 2)
        return self.result(
            round(percentage / 100.0, 4),
            model=answers.embedder,
            cosine=cos,
            percentage=percentage,
        )


@register
class SourceGrounding(EmbeddedMetric):
    """The chatbot hub's source grounding proxy: similarity of the response to the query.

    Formula (chatbot hub base model): ``source_grounding = validate_relevance(query,
    response)``, or ``validate_relevance(expected, response)`` when there is no query;
    i.e. ``max(0, min(1, cos(embed(query or expected), embed(response))))``. The specification ×100,
    Assay 0..1. ``details["against"]`` says which text was used. Requires response and
    one of query / expected (None with a reason when both are missing). Range 0..1,
    higher is better. Weakness: a PROXY, as the specification notes: it never looks at a source,
    so an on-topic answer with no citation scores high. Better methods:
    ``citation_accuracy`` (citations present), ``anchor_hallucination`` (pipeline specification,
    claims checked against the contexts) and the judged ``faithfulness`` /
    ``ragas_faithfulness``.
    """

    name = "source_grounding"
    family = "semantic"
    requires = ("response",)
    suites = ("semantic", "base-model")
    source = Source.CHATBOT_HUB

    @staticmethod
    def _against(sample: Sample) -> tuple[str, str] | None:
        """The field compared with the response, and its text (query, else expected)."""
        for field in ("query", "expected"):
            if sample.has(field):
                return field, getattr(sample, field)
        return None

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        against = self._against(sample)
        return [] if against is None else [against[1], sample.response]  # type: ignore[list-item]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        against = self._against(sample)
        if against is None:
            return self.na("missing input: query (or expected)", missing=["query"])
        cos = cosine(answers, against[1], sample.response)  # type: ignore[arg-type]
        return self.result(clamp01(cos), model=answers.embedder, cosine=cos, against=against[0])


@register
class TopKAccuracy(EmbeddedMetric):
    """Top-k accuracy: true top-k over ``candidates``, else the chatbot hub's single-answer proxy.

    True top-k (when the sample has ``candidates``, the application's ranked answers):
    1.0 when any of the first k candidates matches the expected answer, else 0.0. A
    candidate matches when it equals the expected answer after lower-casing and dropping
    punctuation, or when ``cos(candidate, expected) >= top_k_similarity_threshold``
    (0.8). k = the ``k`` parameter, else ``config.retrieval_k`` (5).
    Proxy (chatbot hub, no candidates): ``s = clamp(cos(response, expected))``;
    ``1.0 if s >= 0.8 else s / 0.8`` (0.8 = ``top_k_similarity_threshold``).
    ``details["method"]`` is ``"true_top_k"`` or ``"proxy"``. Requires expected, plus
    candidates or a response (None with a reason otherwise). Range 0..1, higher better.
    Weakness: the proxy is weak, as the specification says: with one candidate there is no
    "top k"; it is a rescaled similarity that gives full marks to anything 80% similar.
    Give ``candidates`` for a real top-k.
    """

    name = "top_k_accuracy"
    family = "semantic"
    requires = ("expected",)
    suites = ("semantic", "base-model")
    source = Source.CHATBOT_HUB

    def __init__(self, k: int | None = None) -> None:
        self.k = check_k("TopKAccuracy", k)

    def params(self) -> dict[str, Any]:
        return {} if self.k is None else {"k": self.k}

    def _k(self, config: AssayConfig) -> int:
        return self.k if self.k is not None else config.retrieval_k

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        if sample.candidates is not None:
            return [*non_blank(sample.candidates)[: self._k(config)], sample.expected]  # type: ignore[list-item]
        return [sample.response, sample.expected] if sample.has("response") else []  # type: ignore[list-item]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        k = self._k(res.config)
        threshold = res.config.top_k_similarity_threshold
        settings = {"k": k, "top_k_similarity_threshold": threshold}
        expected: str = sample.expected  # type: ignore[assignment]
        if sample.candidates is not None:
            if not non_blank(sample.candidates):
                return self.na("candidates holds no non-blank answer")
            return self._true_top_k(sample, expected, k, threshold, answers, settings)
        if not sample.has("response"):
            return self.na("missing input: candidates (or response)", missing=["candidates"])
        sim = clamp01(cosine(answers, sample.response, expected))  # type: ignore[arg-type]
        value = 1.0 if sim >= threshold else sim / threshold
        result = self.result(value, model=answers.embedder, similarity=sim, k_threshold=threshold)
        return with_settings(result, settings, method="proxy")

    def _true_top_k(
        self,
        sample: Sample,
        expected: str,
        k: int,
        threshold: float,
        answers: Answers,
        settings: dict[str, Any],
    ) -> MetricResult:
        target = normalised_answer(expected)
        ranked = []
        matched_rank = None
        for rank, candidate in enumerate(non_blank(sample.candidates)[:k], start=1):
            exact = normalised_answer(candidate) == target
            similarity = cosine(answers, candidate, expected)
            match = exact or similarity >= threshold
            ranked.append(
                {
                    "rank": rank,
                    "candidate": candidate,
                    "exact": exact,
                    "similarity": similarity,
                    "match": match,
                }
            )
            if match and matched_rank is None:
                matched_rank = rank
        result = self.result(
            1.0 if matched_rank is not None else 0.0,
            model=answers.embedder,
            k=k,
            matched_rank=matched_rank,
            candidates=ranked,
            k_threshold=threshold,
        )
        return with_settings(result, settings, method="true_top_k")


class _KnownFactsCheck(EmbeddedMetric):
    """Shared body: cosine of the response with each known fact (chatbot hub test layer)."""

    family = "semantic"
    requires = ("response", "known_facts")
    higher_is_better = False
    suites = ("semantic",)
    source = Source.CHATBOT_HUB

    def _value(self, conflicting: int, total: int) -> float:
        raise NotImplementedError

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        facts = non_blank(sample.known_facts)
        return [sample.response, *facts] if facts else []  # type: ignore[list-item]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        threshold = res.config.hallucination_detection_threshold
        facts = non_blank(sample.known_facts)
        if not facts:
            return self.na("known_facts holds only blank entries", missing=["known_facts"])
        per_fact = [
            {"fact": f, "similarity": cosine(answers, sample.response, f)}  # type: ignore[arg-type]
            for f in facts
        ]
        conflicting = [p for p in per_fact if p["similarity"] < threshold]
        result = self.result(
            self._value(len(conflicting), len(facts)),
            model=answers.embedder,
            conflicting_facts=conflicting,
            n_conflicting=len(conflicting),
            n_facts=len(facts),
            facts=per_fact,
            detection_threshold=threshold,
        )
        return with_settings(result, {"hallucination_detection_threshold": threshold})


@register
class HallucinationRate(_KnownFactsCheck):
    """The chatbot hub's hallucination rate: share of known facts the response conflicts with.

    Formula (chatbot hub base model: ``hallucination_rate = detection_confidence * 100``
    from the semantic hallucination detector; Assay keeps 0..1). Assay defines the
    detector's confidence concretely as ``conflicting / len(known_facts)``, where a fact
    conflicts when ``cos(embed(response), embed(fact)) < HALLUCINATION_DETECTION_THRESHOLD``
    (0.3). Blank facts are ignored. Requires response and known_facts. Range 0..1, LOWER
    is better; pass threshold 0.5 (the specification's). ``details`` lists the conflicting facts
    with their similarities. Weakness: low similarity means "not talked about", not
    "contradicted": a correct answer that simply does not mention a fact counts it as
    conflicting, and a contradiction of a fact ("opened in 1923" vs "1932") is similar
    and passes. Better methods: ``anchor_hallucination`` (pipeline specification) and the judged
    ``hallucination`` / ``faithfulness``.
    """

    name = "hallucination_rate"
    default_threshold = 0.5
    suites = ("semantic", "base-model")

    def _value(self, conflicting: int, total: int) -> float:
        return conflicting / total


@register
class KnownFactsHallucination(_KnownFactsCheck):
    """The chatbot hub's test-layer hallucination check: 1 when any known fact conflicts, else 0.

    Formula (chatbot hub test layer): for each known fact ``s = cos(embed(response),
    embed(fact))``; the fact conflicts when ``s < HALLUCINATION_DETECTION_THRESHOLD``
    (0.3); ``has_hallucination = any conflicting`` -> value 1.0 or 0.0. Blank facts are
    ignored. Requires response and known_facts. Range {0, 1}, LOWER is better; passes
    when 0. ``details``: the conflicting facts with their similarities, and all facts.
    Weakness: as ``hallucination_rate``: it detects facts the response does not talk
    about rather than contradictions. Better: ``anchor_hallucination`` (pipeline specification) or
    the judged ``hallucination``.
    """

    name = "known_facts_hallucination"
    unit = "bool"
    default_threshold = 0.5

    def _value(self, conflicting: int, total: int) -> float:
        return 1.0 if conflicting else 0.0


@register
class Consistency(EmbeddedMetric):
    """Mean pairwise similarity of several responses to the same query, clamped to [0, 1].

    Formula (chatbot hub test layer): responses = [response] + previous_responses (blank
    ones dropped); ``max(0, min(1, mean(cos(e_i, e_j) for i < j)))``. Requires response
    and previous_responses; needs at least 2 responses, else None with a reason.
    Range 0..1, higher is better; pass threshold ``consistency_threshold`` (0.7).
    ``details``: every pair's similarity and the lowest. Weakness: consistent is not
    correct (the same wrong answer every time scores 1); the mean hides one outlier
    among many responses (see ``details["min_similarity"]``).
    """

    name = "consistency"
    family = "semantic"
    requires = ("response", "previous_responses")
    default_threshold = 0.7
    threshold_env = "CONSISTENCY_THRESHOLD"
    threshold_setting = "consistency_threshold"
    suites = ("semantic",)
    source = Source.CHATBOT_HUB

    @staticmethod
    def _group(sample: Sample) -> list[str]:
        return non_blank([sample.response or "", *(sample.previous_responses or [])])

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        group = self._group(sample)
        return group if len(group) >= 2 else []

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        group = self._group(sample)
        if len(group) < 2:
            return self.na("consistency needs at least 2 non-blank responses")
        pairs = [
            {"i": i, "j": j, "similarity": cosine(answers, group[i], group[j])}
            for i in range(len(group))
            for j in range(i + 1, len(group))
        ]
        sims = [p["similarity"] for p in pairs]
        mean = sum(sims) / len(sims)
        return self.result(
            clamp01(mean),
            model=answers.embedder,
            n_responses=len(group),
            mean_similarity=mean,
            min_similarity=min(sims),
            pairs=pairs,
        )


@register
class CrossLanguageConsistency(EmbeddedMetric):
    """Similarity of the answers given to one query in two languages (multilingual space).

    Formula (chatbot hub test layer, "direct semantic comparison" method): ``max(0, min(1,
    cos(embed(response), embed(parallel_response))))`` with the multilingual embedder
    (USE multilingual v3 puts Arabic and English in one space). The specification's preferred
    method translates first; Assay uses no translation service (offline), so this is the
    specification's fallback method. Requires response and parallel_response. Range 0..1, higher
    is better; pass threshold ``CROSS_LANGUAGE_CONSISTENCY_THRESHOLD`` (0.7).
    Weakness: cross-language cosines run lower than same-language ones for the same
    meaning, and it is meaningless with an English-only embedder (``minilm``); like all
    similarities it compares topic, not facts.
    """

    name = "cross_language_consistency"
    family = "semantic"
    requires = ("response", "parallel_response")
    default_threshold = 0.7
    threshold_env = "CROSS_LANGUAGE_CONSISTENCY_THRESHOLD"
    threshold_setting = "cross_language_consistency_threshold"
    suites = ("semantic",)
    source = Source.CHATBOT_HUB

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        return [sample.response, sample.parallel_response]  # type: ignore[list-item]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        cos = cosine(answers, sample.response, sample.parallel_response)  # type: ignore[arg-type]
        return self.result(
            clamp01(cos),
            model=answers.embedder,
            cosine=cos,
            response_arabic=is_arabic(sample.response),
            parallel_arabic=is_arabic(sample.parallel_response),
        )
