"""RAG metrics of the chatbot hub: retrieval recall/precision at k and the context metrics.

``contexts`` are the retrieved documents in rank order (chatbot hub's ``retrieved_docs``).
The embedding metrics are `EmbeddedMetric`s: they declare the texts they compare as embed
asks, so a chunk embeds each distinct text once across all its metrics (the judged
metrics' local estimators read the same contexts, query and response), and clamp each
cosine to [0, 1] as the specification's ``similarity`` does. A blank document is not
embedded: its cosine is 0. The chatbot hub reports these ×100; Assay keeps 0..1.

Which expected source counts as "found" in a retrieved document (``match_source``):
sources may be ids, titles, URLs or passages, documents are text, so a source matches a
document when, comparing lower-cased word tokens (punctuation ignored), (1) they are
equal, (2) the source's tokens occur as a contiguous run inside the document (an id,
title or URL quoted in the chunk, or the passage whole), (3) the document's tokens occur
as a run inside the source and the document has at least ``MIN_CHUNK_WORDS`` words (the
chunk is part of the expected passage), or else (4) ``cos(source, document) >=
match_threshold`` (0.8; a paraphrased or re-chunked passage).
"""

from __future__ import annotations

from typing import Any

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers
from assay.engine.resources import Resources
from assay.metrics.base import Metric, Source, clamp01
from assay.metrics.registry import register
from assay.text.tokenize import content_words, non_blank, words

from .semantic import EmbeddedMetric, check_k, cosine, with_settings

__all__ = ["MIN_CHUNK_WORDS", "SOURCE_MATCH_THRESHOLD", "intrusion_score", "match_source"]

#: cosine at or above which a document counts as the expected source (rule 4)
SOURCE_MATCH_THRESHOLD = 0.8
#: a document shorter than this is not matched by being contained in a source (rule 3)
MIN_CHUNK_WORDS = 5
#: reason of the ranked metrics when no retrieved document has any text
_ALL_BLANK = "contexts holds only blank documents"


def _token_run_in(needle: list[str], haystack: list[str]) -> bool:
    return bool(needle) and f" {' '.join(needle)} " in f" {' '.join(haystack)} "


def match_source(
    source: str, document: str, similarity: float, threshold: float = SOURCE_MATCH_THRESHOLD
) -> str | None:
    """How ``source`` matches ``document``, or None (the rules are in the module docstring).

    Returns ``"exact"``, ``"source_in_doc"``, ``"doc_in_source"`` or ``"similarity"``;
    ``similarity`` is the cosine of the two texts.
    """
    source_tokens, doc_tokens = words(source), words(document)
    if source_tokens and source_tokens == doc_tokens:
        return "exact"
    if _token_run_in(source_tokens, doc_tokens):
        return "source_in_doc"
    if len(doc_tokens) >= MIN_CHUNK_WORDS and _token_run_in(doc_tokens, source_tokens):
        return "doc_in_source"
    if similarity >= threshold:
        return "similarity"
    return None


def intrusion_score(overlap_ratio: float) -> float:
    """The chatbot hub's piecewise context-intrusion curve, divided by 100 (0..1, lower better).

    ``r <= 0.15``: 0; ``r <= 0.30``: ``(r - 0.15) / 0.15 * 20``; ``r <= 0.50``:
    ``20 + (r - 0.30) / 0.20 * 40``; ``r <= 0.70``: ``60 + (r - 0.50) / 0.20 * 30``; else
    ``90 + min(10, (r - 0.70) / 0.30 * 10)``; all /100. Continuous; 1.0 at r = 1.
    """
    r = overlap_ratio
    if r <= 0.15:
        score = 0.0
    elif r <= 0.30:
        score = (r - 0.15) / 0.15 * 20
    elif r <= 0.50:
        score = 20 + (r - 0.30) / 0.20 * 40
    elif r <= 0.70:
        score = 60 + (r - 0.50) / 0.20 * 30
    else:
        score = 90 + min(10.0, (r - 0.70) / 0.30 * 10)
    return score / 100.0


class _RetrievalAtK(EmbeddedMetric):
    """Shared body of the ranked retrieval metrics: per-document relevance in the top k.

    A document in the top k is relevant when it matches an expected source
    (``match_source``) if the sample has expected_sources, else when
    ``clamp(cos(query, document)) >= retrieval_relevance_threshold`` (0.5). A blank
    document keeps its rank and is never relevant; when every document is blank the
    value is None ("contexts holds only blank documents"), as for the other context
    metrics. Duplicate documents are judged one by one, so a relevant document retrieved
    twice counts twice in precision (the specification's count of relevant documents).
    """

    family = "rag"
    requires: tuple[str, ...] = ("contexts",)
    suites = ("rag",)
    source = Source.CHATBOT_HUB

    def __init__(self, k: int | None = None, match_threshold: float = SOURCE_MATCH_THRESHOLD):
        name = type(self).__name__
        self.k = check_k(name, k)
        if isinstance(match_threshold, bool) or not 0.0 <= match_threshold <= 1.0:
            raise ValueError(
                f"The 'match_threshold' parameter of {name} must be in [0, 1]. "
                f"Got {match_threshold!r}."
            )
        self.match_threshold = float(match_threshold)

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"match_threshold": self.match_threshold}
        if self.k is not None:
            params["k"] = self.k
        return params

    def _k(self, config: AssayConfig) -> int:
        return self.k if self.k is not None else config.retrieval_k

    def _settings(self, res: Resources) -> dict[str, Any]:
        return {
            "k": self._k(res.config),
            "retrieval_relevance_threshold": res.config.retrieval_relevance_threshold,
        }

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        """The top-k documents and what they are compared with: the expected sources when
        given, else the query (none when every document is blank: the value is None)."""
        if not non_blank(sample.contexts):
            return []
        docs = (sample.contexts or [])[: self._k(config)]
        sources = non_blank(sample.expected_sources)
        if sources:
            return [*docs, *sources]
        return [*docs, sample.query] if sample.has("query") else []  # type: ignore[list-item]

    def _source_matches(
        self, docs: list[str], sources: list[str], answers: Answers
    ) -> list[list[dict[str, Any] | None]]:
        """matches[i][j]: how document i matched source j, with the cosine; None if not."""
        table: list[list[dict[str, Any] | None]] = []
        for doc in docs:
            row: list[dict[str, Any] | None] = []
            for source in sources:
                similarity = cosine(answers, source, doc)
                how = match_source(source, doc, similarity, self.match_threshold)
                row.append(None if how is None else {"how": how, "similarity": similarity})
            table.append(row)
        return table

    def _relevance(
        self, sample: Sample, docs: list[str], answers: Answers, threshold: float
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """Per top-k document: relevant or not, and why. None when undefined."""
        sources = non_blank(sample.expected_sources)
        if sources:
            table = self._source_matches(docs, sources, answers)
            per_doc = []
            for rank, (doc, row) in enumerate(zip(docs, table, strict=True), start=1):
                hit = next(((j, m) for j, m in enumerate(row) if m is not None), None)
                per_doc.append(
                    {
                        "rank": rank,
                        "relevant": hit is not None,
                        "matched_source": None if hit is None else sources[hit[0]],
                        "how": None if hit is None else hit[1]["how"],
                        "doc": doc,
                    }
                )
            return "expected_sources", per_doc
        if not sample.has("query"):
            return None
        per_doc = []
        for rank, doc in enumerate(docs, start=1):
            similarity = clamp01(cosine(answers, sample.query, doc))  # type: ignore[arg-type]
            per_doc.append(
                {
                    "rank": rank,
                    "relevant": similarity >= threshold,
                    "similarity": similarity,
                    "doc": doc,
                }
            )
        return "query_similarity", per_doc


@register
class RetrievalRecallAt5(_RetrievalAtK):
    """Share of the expected sources found among the top-k retrieved documents.

    Formula (chatbot hub): ``found / len(expected_sources)`` where a source is found when
    it matches any of ``contexts[:k]`` (rules in ``assay.metrics.rag.match_source``:
    token equality, the source contained in a document, a document of at least 5 words
    contained in the source, else cosine >= 0.8). k = the ``k`` parameter, else
    ``config.retrieval_k`` (5, the specification's); it is in details and the signature. Blank
    expected sources are ignored; duplicates count twice, as in the specification. Requires
    contexts and expected_sources; None when every context is blank. Range 0..1, higher
    is better. ``details["sources"]`` says where (rank) and how each source was found.
    Weakness: rank-blind within the top k; the embedding rule can accept a near-duplicate
    document on the same topic as the expected one; a source given as a bare number or
    common word ("1", "faq") is "found" in any document containing that word, so give
    ids that cannot occur in ordinary text ("doc_1").
    """

    name = "retrieval_recall_5"
    requires = ("contexts", "expected_sources")

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        k = self._k(res.config)
        sources = non_blank(sample.expected_sources)
        if not sources:
            return self.na("expected_sources holds only blank entries")
        if not non_blank(sample.contexts):
            return self.na(_ALL_BLANK)
        docs = (sample.contexts or [])[:k]
        table = self._source_matches(docs, sources, answers)
        per_source = []
        for j, source in enumerate(sources):
            hit = next(((i, row[j]) for i, row in enumerate(table) if row[j] is not None), None)
            per_source.append(
                {
                    "source": source,
                    "found": hit is not None,
                    "rank": None if hit is None else hit[0] + 1,
                    "how": None if hit is None else hit[1]["how"],  # type: ignore[index]
                    "best_similarity": max(
                        (cosine(answers, source, doc) for doc in docs), default=None
                    ),
                }
            )
        found = sum(1 for p in per_source if p["found"])
        result = self.result(
            found / len(sources),
            model=answers.embedder,
            k=k,
            found=found,
            expected=len(sources),
            sources=per_source,
        )
        return with_settings(result, {"k": k})


class _RelevanceAtK(_RetrievalAtK):
    """Shared body of the metrics over per-document relevance in the top k (``_relevance``)."""

    def _value(self, per_doc: list[dict[str, Any]], relevant: int) -> tuple[float, dict[str, Any]]:
        """The value from the top-k relevance judgements, and details to add."""
        raise NotImplementedError

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        settings = self._settings(res)
        k = settings["k"]
        if not non_blank(sample.contexts):
            return self.na(_ALL_BLANK)
        docs = (sample.contexts or [])[:k]
        judged = self._relevance(sample, docs, answers, settings["retrieval_relevance_threshold"])
        if judged is None:
            return self.na("missing input: query (or expected_sources)", missing=["query"])
        how, per_doc = judged
        relevant = sum(1 for d in per_doc if d["relevant"])
        value, details = self._value(per_doc, relevant)
        result = self.result(
            value,
            model=answers.embedder,
            k=k,
            relevant=relevant,
            considered=len(docs),
            relevance=how,
            **details,
            documents=per_doc,
        )
        return with_settings(result, settings)


@register
class RetrievalPrecisionAt5(_RelevanceAtK):
    """Share of the top-k retrieved documents that are relevant.

    Formula (chatbot hub): ``relevant / min(len(contexts), k)``. Relevance (chatbot hub): a
    document is relevant when ``clamp(cos(query, document)) >= retrieval_relevance_threshold``
    (0.5). When the sample has expected_sources Assay uses them instead: a document is
    relevant when it matches an expected source (``match_source``). That is the better
    judgement (ground truth rather than topical closeness to the question) and
    ``details["relevance"]`` says which was used. k = the ``k`` parameter, else
    ``config.retrieval_k`` (5). Requires contexts and query or expected_sources (None
    with a reason otherwise, and when every context is blank). A relevant document
    retrieved twice counts twice (the specification counts relevant documents in the top k).
    Range 0..1, higher is better. Weakness: rank-blind (see
    ``context_precision_at_k``); the query-similarity rule rewards documents that
    restate the question without answering it.
    """

    name = "retrieval_precision_5"

    def _value(self, per_doc: list[dict[str, Any]], relevant: int) -> tuple[float, dict[str, Any]]:
        return relevant / len(per_doc), {}


@register
class ContextPrecisionAtK(_RelevanceAtK):
    """Rank-aware precision of the top-k documents (average precision at k).

    Formula: ``sum(precision@i * rel_i for i in 1..k) / (relevant docs in the top k)``, with
    ``precision@i`` = relevant among the first i / i and the same relevance rule as
    ``retrieval_precision_5`` (expected sources when given, else query similarity >= 0.5).
    0.0 when no top-k document is relevant. A relevant document at rank 1 counts more than
    one at rank 5, which ``retrieval_precision_5`` cannot see. Requires contexts and query
    or expected_sources. Range 0..1, higher is better. Not in the chatbot hub (Assay's
    addition beside the specification's precision; the judged ``ragas_context_precision`` of
    the RAG specification uses the same averaging with an LLM verdict). Weakness: relevant
    documents missing from the top k do not lower it (that is recall's job).
    """

    name = "context_precision_at_k"

    def _value(self, per_doc: list[dict[str, Any]], relevant: int) -> tuple[float, dict[str, Any]]:
        hits, total = 0, 0.0
        for i, doc in enumerate(per_doc, start=1):
            if doc["relevant"]:
                hits += 1
                total += hits / i
        ranks = [d["rank"] for d in per_doc if d["relevant"]]
        return (total / hits if hits else 0.0), {"relevant_ranks": ranks}


class _ContextsVsText(EmbeddedMetric):
    """Shared body: clamped cosine of each non-blank context with the response or query."""

    family = "rag"
    suites = ("rag",)
    source = Source.CHATBOT_HUB
    #: the Sample field each context is compared with
    other: str = "response"

    def _value(self, sims: list[float], res: Resources) -> tuple[float, dict[str, Any]]:
        """The value from the per-document similarities, and details to add; by default
        their mean."""
        return sum(sims) / len(sims), {"n_documents": len(sims)}

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        docs = non_blank(sample.contexts)
        return [*docs, getattr(sample, self.other)] if docs else []

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        docs = non_blank(sample.contexts)
        if not docs:
            return self.na(_ALL_BLANK)
        other = getattr(sample, self.other)
        sims = [clamp01(cosine(answers, doc, other)) for doc in docs]
        value, details = self._value(sims, res)
        return self.result(value, model=answers.embedder, similarities=sims, **details)


@register
class ContextRelevance(_ContextsVsText):
    """Mean similarity of the retrieved documents to the RESPONSE (chatbot hub's definition).

    Formula (chatbot hub): ``mean(clamp(cos(document, response)) for document in contexts)``
    (specification ×100; Assay 0..1). Note: the specification compares each document with
    the response, not with the question, so this measures how close the retrieved material
    is to what was said (closer to "context utilisation"); query-document closeness is
    ``reranker_score``. Blank documents are dropped. Requires contexts and response. Range
    0..1, higher is better. Weakness: topical similarity only; a long document relevant in
    one sentence scores low; see the judged ``contextual_relevance``.
    """

    name = "context_relevance"
    requires = ("contexts", "response")


@register
class ContextCoverage(_ContextsVsText):
    """Share of retrieved documents the response appears to use (similarity >= 0.4).

    Formula (chatbot hub): ``used / len(contexts)`` where a document is used when
    ``clamp(cos(document, response)) >= context_usage_threshold`` (0.4). Blank
    documents are dropped. Requires contexts and response. Range 0..1, higher is better.
    Weakness: similarity is not use: a document on the same topic counts as used even
    when the response took nothing from it.
    """

    name = "context_coverage"
    requires = ("contexts", "response")

    def _value(self, sims: list[float], res: Resources) -> tuple[float, dict[str, Any]]:
        threshold = res.config.context_usage_threshold
        used = sum(1 for s in sims if s >= threshold)
        return used / len(sims), {
            "used": used,
            "n_documents": len(sims),
            "usage_threshold": threshold,
        }

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        settings = {"context_usage_threshold": res.config.context_usage_threshold}
        return with_settings(super().reduce(sample, answers, res), settings)


@register
class RerankerScore(_ContextsVsText):
    """Mean similarity of the query to each retrieved document.

    Formula (chatbot hub): ``mean(clamp(cos(query, document)) for document in contexts)``.
    Blank documents are dropped. Requires contexts and query. Range 0..1, higher is
    better. Weakness: despite the name no reranker runs; it is the bi-encoder
    similarity, which a cross-encoder reranker would improve on; rank-blind.
    """

    name = "reranker_score"
    requires = ("contexts", "query")
    other = "query"


@register
class GoldContextMatch(EmbeddedMetric):
    """Similarity of the response to the gold (reference) context.

    Formula (chatbot hub): ``clamp(cos(embed(gold_context), embed(response)))`` (specification ×100;
    Assay 0..1). Requires gold_context and response. Range 0..1, higher is better.
    Weakness: a long gold context and a short answer have a modest cosine even when the
    answer is fully supported; it measures closeness of topic, not support.
    """

    name = "gold_context_match"
    family = "rag"
    requires = ("gold_context", "response")
    suites = ("rag",)
    source = Source.CHATBOT_HUB

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        return [sample.gold_context, sample.response]  # type: ignore[list-item]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        cos = cosine(answers, sample.gold_context, sample.response)  # type: ignore[arg-type]
        return self.result(clamp01(cos), model=answers.embedder, cosine=cos)


@register
class ContextIntrusion(Metric):
    """How much of the response is copied from the retrieved context (lower is better).

    Formula (chatbot hub): ``overlap_ratio = |R & C| / |R|`` where R is the set of content
    words of the response and C the set of content words of all contexts
    (``assay.text.tokenize.content_words``: lower-cased, stop words and one-letter
    tokens dropped, digits kept); then the specification's piecewise curve (``intrusion_score``):
    0 up to 15% overlap, 20 at 30%, 60 at 50%, 90 at 70%, 100 at 100% (linear between),
    divided by 100. The specification deems 15-30% overlap optimal (grounded without verbatim
    copying). Requires response and contexts; None when the response has no content
    word or the contexts are blank. Range 0..1, LOWER is better. ``details``: the
    overlapping words and counts. No model (method ``pattern``).
    Weakness: lexical: a response that ignores the context entirely (overlap < 15%)
    gets the best score, and an extractive answer that rightly reuses the context's
    terms is penalised; pair it with ``context_coverage`` or the judged
    ``faithfulness``.
    """

    name = "context_intrusion"
    family = "rag"
    requires = ("response", "contexts")
    higher_is_better = False
    suites = ("rag",)
    source = Source.CHATBOT_HUB

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        response_words = set(content_words(sample.response))
        docs = non_blank(sample.contexts)
        if not docs:
            return self.na(_ALL_BLANK)
        if not response_words:
            return self.na("the response has no content words")
        context_words: set[str] = set()
        for doc in docs:
            context_words.update(content_words(doc))
        overlap = response_words & context_words
        ratio = len(overlap) / len(response_words)
        value = intrusion_score(ratio)
        return self.result(
            value,
            method="pattern",
            overlap_ratio=ratio,
            n_overlap=len(overlap),
            n_response_words=len(response_words),
            overlap_words=sorted(overlap),
            intrusion_percent=value * 100.0,
        )
