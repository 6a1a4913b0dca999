"""The pipeline specification's lightweight no-LLM pipeline: relevance, completeness, anchor
hallucination.

The three metrics need no judge and no embedder: ``relevance`` and ``completeness`` are
lexical, ``anchor_hallucination`` uses the spaCy pipeline for entities and the dependency
parse (`assay.text.anchors`). Where two specifications give one name different meanings, the plain
names ``relevance`` and ``completeness`` carry the pipeline specification's meaning.
"""

from __future__ import annotations

from assay.core.extras import require
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, parse_ask
from assay.engine.resources import Resources
from assay.metrics.base import Metric, PlannedMetric, Source, clamp01
from assay.metrics.registry import register
from assay.text.anchors import ALL_KINDS, PIPELINE_KINDS, analyse, anchor_texts
from assay.text.tokenize import STOP_WORDS, content_words, non_blank, normalise, words

__all__ = [
    "AnchorHallucination",
    "Completeness",
    "Relevance",
    "jaccard",
    "keywords",
    "tfidf_cosine",
    "topic_overlap",
]


def topic_overlap(response: str, context: str) -> float | None:
    """Share of the response's distinct content words that occur in the context.

    ``|content_types(response) ∩ word_types(context)| / |content_types(response)|``, with
    `assay.text.tokenize` words (lower-cased; stop words and one-letter words removed from
    the response side). Unigrams, not bigrams: a faithful paraphrase shares words but few
    word pairs. ``None`` when the response has no content words.
    """
    resp = set(content_words(response))
    if not resp:
        return None
    ctx = set(words(context))
    return len(resp & ctx) / len(resp)


def tfidf_cosine(a: str, b: str) -> float | None:
    """Cosine of the TF-IDF vectors of ``a`` and ``b`` with the vectoriser fit on the pair.

    scikit-learn ``TfidfVectorizer(stop_words="english")`` with its defaults (lower-case,
    tokens of 2+ word characters, smooth idf ``ln((1 + n) / (1 + df)) + 1`` with n = 2,
    l2-normalised rows), so the cosine is the dot product of the two rows. A term in both
    texts gets idf 1, a term in one gets ``ln(3/2) + 1``. ``None`` when neither text has a
    term outside the stop list (an empty vocabulary: the cosine is undefined); 0 when only
    one of them has none. Both texts are `assay.text.tokenize.normalise`-d first (NFC,
    Arabic diacritics and tatweel removed), as for the Jaccard half, so a vocalised Arabic
    word is one term equal to its plain spelling; English text is unchanged by it.
    """
    sklearn_text = require("sklearn.feature_extraction.text", "relevance (TF-IDF)")
    vectoriser = sklearn_text.TfidfVectorizer(stop_words="english")
    try:
        matrix = vectoriser.fit_transform([normalise(a), normalise(b)])
    except ValueError:  # empty vocabulary: both texts are stop words only
        return None
    return float(matrix[0].multiply(matrix[1]).sum())


def jaccard(a: str, b: str) -> float | None:
    """``|W(a) ∩ W(b)| / |W(a) ∪ W(b)|`` over sets of lower-cased words
    (`assay.text.tokenize.words`, stop words kept); ``None`` when both sets are empty."""
    wa, wb = set(words(a)), set(words(b))
    union = wa | wb
    if not union:
        return None
    return len(wa & wb) / len(union)


def keywords(text: str) -> set[str]:
    """Distinct lower-cased words of ``text`` that are not stop words (pipeline
    specification's keywords; `assay.text.tokenize.words` instead of nltk, so punctuation is
    never a token)."""
    return {w for w in words(text) if w not in STOP_WORDS}


@register
class Relevance(Metric):
    """How well the response answers the query: mean of TF-IDF cosine and word Jaccard
    (pipeline specification).

    Formula: ``relevance = (tfidf_cosine(query, response) + jaccard(query, response)) / 2``.
    TF-IDF: scikit-learn ``TfidfVectorizer(stop_words="english")`` fit on the pair alone (n
    = 2 documents, smooth idf ``ln(3 / (1 + df)) + 1``, l2 norm), so a word shared by both
    texts weighs less than one in only one of them; Arabic diacritics and tatweel are
    removed first (see `tfidf_cosine`). Jaccard: intersection over union of the sets of
    lower-cased words (`assay.text.tokenize.words`; stop words kept, as the specification
    splits on words without filtering). Inputs: query, response. Range 0..1, higher is
    better. When both texts are stop words only, the TF-IDF vocabulary is empty and the
    specification's fallback applies: the value is the Jaccard alone (``details.tfidf_cosine`` is
    None); None when neither text has a word.

    Known weaknesses (a weak proxy, kept as the specification specifies): lexical overlap, not
    answering: a response that repeats the question scores 1.0, and a correct answer in
    other words ("When was it built?" / "In 1889.") scores near 0. The specifications' better
    methods are the embedding answer relevance of the RAG specification and the judged relevance of
    the judge specification, registered under their own names.
    """

    name = "relevance"
    family = "grounding"
    requires = ("query", "response")
    suites = ("pipeline",)
    source = Source.PIPELINE
    components = ("tfidf_cosine", "jaccard")

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        query, response = sample.query or "", sample.response or ""
        cosine = tfidf_cosine(query, response)
        jac = jaccard(query, response)
        if jac is None:
            return self.na("neither the query nor the response has a word", method="local")
        value = jac if cosine is None else (cosine + jac) / 2
        return self.result(
            clamp01(value),
            components={"tfidf_cosine": cosine, "jaccard": jac},
            method="local",
            tfidf_cosine=cosine,
            jaccard=jac,
            fallback="jaccard only: no TF-IDF vocabulary" if cosine is None else None,
        )


@register
class Completeness(Metric):
    """Share of the query's keywords that the response repeats (pipeline specification's
    completeness).

    Formula: ``|K(query) ∩ K(response)| / |K(query)|`` where ``K`` is the set of lower-cased
    words minus stop words (pipeline specification tokenises with nltk and drops stop words and
    non-alphanumeric tokens; Assay uses `assay.text.tokenize.words`, which yields no
    punctuation tokens, and scikit-learn's English stop list plus a short Arabic one).
    Inputs: query, response. Range 0..1, higher is better. When the query has no keyword
    ("Is it?") the value is 1.0, as the specification specifies (nothing was asked that could be
    missed). ``details.missing`` lists the query keywords the response lacks.

    This is coverage of the *query's* words, not of the expected answer: the JSON
    completeness of the JSON specification (keys of the ground truth present in the output) is a
    different metric under its own name. Weaknesses: exact word match (no stemming:
    "car" does not cover "cars"), and a response that echoes the question without
    answering it scores 1.0.
    """

    name = "completeness"
    family = "grounding"
    requires = ("query", "response")
    suites = ("pipeline",)
    source = Source.PIPELINE

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        query_kw = keywords(sample.query or "")
        response_kw = keywords(sample.response or "")
        if not query_kw:
            return self.result(
                1.0,
                method="pattern",
                reason="the query has no keywords (pipeline specification: 1.0)",
                query_keywords=[],
                matched=[],
                missing=[],
            )
        matched = query_kw & response_kw
        return self.result(
            len(matched) / len(query_kw),
            method="pattern",
            query_keywords=sorted(query_kw),
            matched=sorted(matched),
            missing=sorted(query_kw - response_kw),
        )


@register
class AnchorHallucination(PlannedMetric):
    """Share of response numbers, dates and claims the context lacks, drift-floored
    (pipeline specification).

    Formula (pipeline specification's "Hallucination"; named ``anchor_hallucination``
    because the judge specification's judged ``hallucination`` is another metric)::

        claim_error = unsupported anchors / anchors          (0 when there are no anchors)
        overlap     = |content words of response ∩ words of context| / |content words of response|
        P_drift     = 0.2 if overlap < 0.2 else 0
        anchor_hallucination = max(claim_error, P_drift)

    Anchors come from spaCy ``en_core_web_sm`` (`assay.text.anchors`, which states every
    matching rule): numbers (MONEY, CARDINAL, PERCENT, QUANTITY; "1,200" = "1200",
    "$5 million" = "5 million dollars"), dates and times (DATE, TIME; relative ones such
    as "today" are skipped), and subject-verb-object claims whose verb is asserted (no
    hedging modal, hedging verb or adverb, condition or question above it; negation is
    kept and must match). A number is supported when its value occurs in the context, a
    date when its tokens occur in one context sentence, a claim when one context sentence
    holds the lemmas of its subject, verb and object heads with the same polarity.
    Overlap uses distinct unigrams (`topic_overlap`); no content word in the response
    gives no drift penalty. Inputs: response and contexts (all passages together are the
    evidence; each is parsed on its own). Range 0..1, lower is better (0 = every anchor
    found in the context). ``details.anchors`` lists every anchor with kind, label, text
    and supported flag; the counts and the overlap are in ``details``. With
    ``include_entities=True`` named entities (PERSON, ORG, GPE, ...) are anchors too.

    Known weaknesses: literal evidence matching; a faithful paraphrase with a different
    verb is an unsupported claim, and a wrong claim built from context words can pass.
    The drift gate can only lift the score to 0.2. A response with no anchors scores 0
    however unfaithful it is. English only (the spaCy pipeline is English). For judged
    faithfulness and hallucination see the judge and RAG specifications' metrics.
    """

    name = "anchor_hallucination"
    family = "grounding"
    requires = ("response", "contexts")
    higher_is_better = False
    suites = ("pipeline",)
    source = Source.PIPELINE
    needs = frozenset({"spacy"})
    components = ("claim_error", "drift_penalty", "topic_overlap")

    #: the pipeline specification's topic-drift gate
    drift_threshold = 0.2
    drift_penalty = 0.2

    def __init__(self, include_entities: bool = False) -> None:
        if not isinstance(include_entities, bool):
            raise TypeError(
                "The 'include_entities' parameter of AnchorHallucination must be a bool. "
                f"Got {include_entities!r}."
            )
        self.include_entities = include_entities

    def params(self) -> dict[str, bool]:
        return {"include_entities": self.include_entities} if self.include_entities else {}

    @property
    def kinds(self) -> tuple[str, ...]:
        return ALL_KINDS if self.include_entities else PIPELINE_KINDS

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """The spaCy parses of the response and of each non-blank passage."""
        return [
            parse_ask(t) for t in anchor_texts([sample.response or ""], [sample.contexts or []])
        ]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        passages = non_blank(sample.contexts)
        if not passages:
            return self.na("missing input: contexts (all passages are blank)")
        response = sample.response or ""
        docs = answers.docs(anchor_texts([response], [passages]))
        [(anchors, evidence)] = analyse(docs, [response], [passages], kinds=self.kinds)
        supported = [evidence.supports(a) for a in anchors]
        n_unsupported = supported.count(False)
        claim_error = n_unsupported / len(anchors) if anchors else 0.0
        overlap = topic_overlap(response, "\n".join(passages))
        drift = (
            self.drift_penalty if overlap is not None and overlap < self.drift_threshold else 0.0
        )
        return self.result(
            max(claim_error, drift),
            components={
                "claim_error": claim_error,
                "drift_penalty": drift,
                "topic_overlap": overlap,
            },
            method="local",
            model=f"spacy:{res.config.spacy_model}",
            anchors=[
                {**a.to_dict(), "supported": ok} for a, ok in zip(anchors, supported, strict=True)
            ],
            n_anchors=len(anchors),
            n_unsupported=n_unsupported,
            claim_error=claim_error,
            topic_overlap=overlap,
            drift_penalty=drift,
            unsupported=[a.text for a, ok in zip(anchors, supported, strict=True) if not ok],
        )
