"""Semantic metrics: embedding similarity (seed 000 test layer, seed 003)."""

from __future__ import annotations

from collections.abc import Sequence

from assay.metric import Metric, clamp01
from assay.registry import register
from assay.resources import Resources
from assay.result import MetricResult
from assay.sample import Sample
from assay.text.lang import is_arabic


@register
class SemanticSimilarity(Metric):
    """Cosine similarity of response and expected-answer embeddings, clamped to [0, 1].

    Formula (seed 000 test layer): ``max(0, min(1, cos(embed(response), embed(expected))))``
    with the configured embedder (default USE multilingual v3, which puts Arabic and
    English in one space). Range 0..1, higher is better. Pass threshold
    ``SEMANTIC_SIMILARITY_THRESHOLD`` (0.7), or ``ARABIC_SEMANTIC_SIMILARITY_THRESHOLD``
    (0.5) when either text is Arabic; the applied threshold is in ``details``.
    Weakness: similarity of topic, not of truth: "Paris is the capital" and "Lyon is the
    capital" score high together.
    """

    name = "semantic_similarity"
    family = "semantic"
    requires = ("response", "expected")
    default_threshold = 0.7
    threshold_env = "SEMANTIC_SIMILARITY_THRESHOLD"
    threshold_setting = "semantic_similarity_threshold"
    suites = ("base", "semantic")
    seed = "000"
    needs = frozenset({"embedder"})

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        sims = res.embedder.pair_similarity(
            [s.response for s in samples],  # type: ignore[misc]
            [s.expected for s in samples],  # type: ignore[misc]
        )
        out = []
        for sample, sim in zip(samples, sims, strict=True):
            arabic = is_arabic(sample.response) or is_arabic(sample.expected)
            details = {"cosine": float(sim), "arabic": arabic}
            if arabic:
                details["threshold"] = res.config.arabic_semantic_similarity_threshold
            out.append(self.result(clamp01(float(sim)), model=res.embedder.name, **details))
        return out
