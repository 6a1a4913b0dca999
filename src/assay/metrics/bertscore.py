"""BERTScore metrics (the chatbot hub's test layer and base model, the RAG specification).

Both read one shared `assay.models.bertscore.BERTScorer` (default: the shipped
all-MiniLM-L6-v2, layer 6, with the baseline computed for it; see that module for the
baseline procedure). Each plans one BERTScore ask per sample (`assay.engine.bertscore_ask`:
the response and the expected answer); the engine scores a chunk's distinct pairs in one
model pass (each text embedded once, longest first), so running ``bertscore`` (alias
``f1``) and ``bert_score_f1`` together costs one pass, and each metric reduces the raw
(P, R, F) row of its sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers, Ask, bertscore_ask
from assay.engine.resources import Resources
from assay.metrics.base import PlannedMetric, Source, clamp01
from assay.metrics.registry import register
from assay.models.bertscore import BERTScorer

__all__ = ["BERTScore", "BERTScoreF1Raw"]

_PARTS = ("precision", "recall", "f1")
_NO_TOKENS = (
    "the BERTScore model finds no token in the response or the expected answer "
    "(only zero-width, format or control characters)"
)


def _triple(row: Sequence[float]) -> dict[str, float]:
    return {"precision": float(row[0]), "recall": float(row[1]), "f1": float(row[2])}


class _BERTScoreMetric(PlannedMetric):
    """Shared body: score response (candidate) against expected (reference)."""

    family = "semantic"
    requires = ("response", "expected")
    needs = frozenset({"bertscore"})
    components = _PARTS
    #: use the rescaling baseline when the scorer has one
    rescaled: ClassVar[bool] = True

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [bertscore_ask(sample.response, sample.expected)]  # type: ignore[arg-type]

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        raw_row = [float(v) for v in answers.reply(self.plan(sample, answers)[0])]
        scorer: BERTScorer = res.bertscorer
        rescale = self.rescaled and scorer.rescale
        model = scorer.signature if rescale else f"{scorer.name}+raw"
        if not any(raw_row):
            # bert-score's mark of a text with no model token (only zero-width or
            # control characters): the score is undefined, not 0
            return self.na(_NO_TOKENS)
        row = raw_row
        if rescale:  # (raw - b) / (1 - b), as `BERTScorer.apply_baseline`, one row
            base = scorer.baseline.tolist()  # type: ignore[union-attr]
            row = [(r - b) / (1.0 - b) for r, b in zip(raw_row, base, strict=True)]
        clamped = {name: clamp01(v) for name, v in zip(_PARTS, row, strict=True)}
        details: dict[str, Any] = {
            "raw": _triple(raw_row),
            "rescaled": rescale,
            "clamped": any(clamped[k] != v for k, v in zip(_PARTS, row, strict=True)),
        }
        if rescale:
            details["unclamped"] = _triple(row)
            details["baseline"] = _triple(base)
        elif self.rescaled and scorer.rescale_note:
            details["rescale_note"] = scorer.rescale_note
        return self.result(clamped["f1"], components=clamped, model=model, **details)


@register
class BERTScore(_BERTScoreMetric):
    """BERTScore F1 of the response against the expected answer, rescaled with a baseline.

    Also reported as ``f1``: the chatbot hub's base-model "F1 Score" is ``f1_score =
    bertscore["f1"]``, this value under another name (not a token-overlap F1 despite the
    name), so ``f1`` is an alias of this metric: asking for it gives this value under that
    name, and a suite computes it once, as ``bertscore``.

    Chatbot hub test layer: ``bert_score.score([response], [expected],
    rescale_with_baseline=True)``; value = F1, components precision, recall and f1.
    Token-level: each token of the response is embedded in context and matched to its most
    similar token of the expected answer (cosine), and vice versa; P = mean best match of
    the response's tokens (how much of the response is supported by the expected answer),
    R = the same for the expected answer's tokens (how much of it the response covers),
    F1 = 2PR/(P+R). Rescaled per component with ``(raw - b) / (1 - b)``, where b is the mean
    score of random unrelated sentence pairs for the model and layer (the shipped
    all-MiniLM-L6-v2 uses a baseline computed from TruthfulQA and BEGIN sentences; see
    ``assay.models.bertscore``).

    Inputs: response, expected. Range 0..1, higher is better. Rescaled scores of unrelated
    text fall slightly below 0 (about -0.1) and those of identical text reach 1; every
    component is clamped to 0..1, and ``details`` keeps the unclamped rescaled values
    (``unclamped``), the raw scores (``raw``), the baseline and whether clamping happened.
    Missing or blank response or expected answer: None with a reason (the hub returned 0
    with an error); also None when the model finds no token in one of them (only zero-width
    or control characters: bert-score would say 0). A user-chosen model without a baseline
    file is scored raw and ``details.rescale_note`` says so (the signature then ends in
    ``+raw``).

    Weaknesses: rewards shared wording and topic more than truth (a negation or a wrong
    number changes few tokens); the hub used bert-score's model for the text's language
    (roberta-large for English, multilingual BERT otherwise), we use MiniLM, so absolute
    values differ from the hub's; MiniLM is an English model, so for Arabic set
    ``bertscore_model`` to a local multilingual model (with its own baseline); texts are
    truncated at the model's 512 tokens.
    """

    name = "bertscore"
    aliases = ("f1",)
    suites = ("base", "base-model", "semantic")
    source = Source.CHATBOT_HUB


@register
class BERTScoreF1Raw(_BERTScoreMetric):
    """Raw BERTScore F1 (no baseline rescaling) of the response against the expected answer.

    RAG specification, section 8: ``P, R, F1 = bert_score.score([answer], [ground_truth])``
    without rescaling, F1 = 2PR/(P+R) over greedy token matches by cosine of contextual
    embeddings. The specification reports it as a percentage (0-100); the canonical value
    here is 0..1 (clamped: float error can put identical texts a hair above 1;
    ``details.raw`` keeps the exact value). Components: raw precision, recall and f1.
    Inputs: response (answer), expected (ground truth). Higher is better. Missing or blank
    input, or a text in which the model finds no token: None with a reason (the
    specification returned 0.0).

    Model: the specification used microsoft/deberta-xlarge-mnli (layer 40); we use the
    shipped all-MiniLM-L6-v2 at layer 6 (or the configured ``bertscore_model``), so absolute
    values differ from the specification's. Raw scores do not start at 0 for unrelated text:
    with MiniLM layer 6 unrelated sentence pairs average F1 = 0.13 (the baseline), with
    deberta-xlarge-mnli about 0.52, so compare raw values only within one model. (The
    specification's examples of 6.62% for two different diary entries are well below that
    model's raw floor, so they were probably rescaled; we follow the specification's code.)
    Use ``bertscore`` for the rescaled score.
    """

    name = "bert_score_f1"
    suites = ("semantic",)
    source = Source.RAG_EVALUATION
    rescaled = False
