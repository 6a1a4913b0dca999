"""The toxicity metrics' plan: which toxicity model a method runs (`model_order`,
`toxicity_model`, `ToxicityMean`) and the embed asks of the texts the toxicity head scores.

The head (`assay.models.toxicity_head`) reads USE multilingual v3 vectors of the
normalised texts (`normalise_for_toxicity`). `toxicity_asks` names them as embed asks of
the execution engine (`assay.engine`), so a run embeds them once per chunk with the other
metrics' texts; `ToxicityPlannedMetric` is the base of the metrics that read toxicity
(``toxicity_score``, ``compliance_score``, ``ethical_violation`` in
`assay.metrics.safety`), whose ``toxicity_batch`` hands the head the answered vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from assay.core.config import AssayConfig
from assay.core.extras import ModelUnavailable, installed
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, answered, embed_ask, execute
from assay.engine.resources import Resources, use_asks_embedder
from assay.metrics.base import Metric
from assay.models.toxicity_head import normalise_for_toxicity
from assay.text.lang import is_arabic

__all__ = [
    "AUTO_ORDER",
    "ToxicityMean",
    "ToxicityPlannedMetric",
    "model_order",
    "model_texts",
    "toxicity_asks",
    "toxicity_model",
]

#: what ``toxicity_method = "auto"`` runs: the first that loads. Their worst AUROC on a
#: source left out of their training (docs/validity.md, toxicity_score): the mean of
#: alt-profanity-check and the head 0.773, the head alone 0.741 (the best the base
#: install has), alt-profanity-check alone 0.679, the keywords 0.512
AUTO_ORDER: tuple[str, ...] = ("profanity-check+head", "head", "keywords")
#: the methods that read the toxicity head, so plan its embed asks
HEAD_METHODS = frozenset({"head", "profanity-check+head"})


def model_order(method: str) -> tuple[str, ...]:
    """The toxicity models ``method`` tries, in order (the keyword fallback is none): for
    ``auto``, those of `AUTO_ORDER`, the mean with alt-profanity-check only where its
    package is installed (the models extra); else the one it names."""
    if method != "auto":
        return () if method == "keywords" else (method,)
    return tuple(
        m
        for m in AUTO_ORDER
        if m != "keywords" and (m != "profanity-check+head" or installed("profanity_check"))
    )


class ToxicityMean:
    """The mean of alt-profanity-check's probability and the toxicity head's: two models
    trained on different data, whose errors differ (the profanity model misses hatred in
    polite words; the head, profanity without a target). ``threshold``: the head file's
    decision threshold for this mean."""

    def __init__(self, profanity: Any, head: Any) -> None:
        self.parts = {"profanity-check": profanity, "head": head}
        self.threshold = float(head.metadata["threshold_with_profanity_check"])
        self.name = f"mean of {profanity.name} and {head.name}"

    def probabilities(self, texts: Sequence[str], vectors: Any = None) -> list[float]:
        """The mean probability per text (``vectors``: the head's, as it takes them)."""
        return [(a + b) / 2 for a, b in zip(*self.part_probabilities(texts, vectors), strict=True)]

    def part_probabilities(
        self, texts: Sequence[str], vectors: Any = None
    ) -> tuple[list[float], list[float]]:
        """Each model's probabilities: alt-profanity-check's, then the head's."""
        return (
            self.parts["profanity-check"].probabilities(texts),
            self.parts["head"].probabilities(texts, vectors),
        )


def toxicity_model(res: Resources, method: str) -> tuple[Any, bool]:
    """The first model of `model_order` that loads, and whether it reads the toxicity
    head's vectors (the vectors of its embed asks). Raises the last model's
    `ModelUnavailable` when none loads."""
    failed: ModelUnavailable | None = None
    for name in model_order(method):
        try:
            if name == "profanity-check+head":
                return ToxicityMean(res.profanity_check, res.toxicity), True
            return (res.toxicity, True) if name == "head" else (res.profanity_check, False)
        except ModelUnavailable as exc:
            failed = exc
    raise failed or ModelUnavailable(f"toxicity method {method!r} runs no model")


def model_texts(texts: Sequence[str]) -> list[int]:
    """The positions of the texts a toxicity model scores: the non-Arabic ones (Arabic
    takes the keyword path: both models were trained on English only)."""
    return [i for i, t in enumerate(texts) if not is_arabic(t)]


def toxicity_asks(
    texts: Sequence[str], config: AssayConfig, method: str | None = None
) -> list[Ask]:
    """The embed asks whose vectors the toxicity head reads for ``texts`` under ``method``
    (default: the ``toxicity_method`` setting; none unless its first model reads the head):
    the non-blank normalised texts (`normalise_for_toxicity`) of those the head scores,
    for the USE multilingual encoder it was trained on (`assay.engine.resources.
    use_asks_embedder`: the run's embedder when that is USE, so the asks are the
    embedding metrics' own; else USE by name, answered by the run's USE instance)."""
    if not set(model_order(method or config.toxicity_method)[:1]) & HEAD_METHODS:
        return []
    embedder = use_asks_embedder(config)
    normalised = (normalise_for_toxicity(texts[i]) for i in model_texts(texts))
    return [embed_ask(text, embedder) for text in dict.fromkeys(normalised) if text.strip()]


class ToxicityPlannedMetric(Metric):
    """A metric reading the toxicity of its responses: it plans the head's embed asks
    (`toxicity_asks` of the response, under its ``method``), and a batch scored on its own
    executes that plan first, so the head's texts are embedded in one call (in a run the
    chunk's answers already hold them). Subclasses implement `reduce_batch`."""

    method: str | None = None

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        config = answers.resources.config if answers.resources is not None else AssayConfig()
        return toxicity_asks([sample.response or ""], config, self.method)

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        with answered(execute([self], samples, res)):
            return self.reduce_batch(samples, res)

    def reduce_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        """The results of the batch, its toxicity asks answered."""
        raise NotImplementedError
