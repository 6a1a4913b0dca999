"""The judge prompts' output models: what a reply must hold to be read as a verdict.

Each prompt in `assay.judge.prompts` names one of these pydantic models; `parse_reply`
validates a reply against it, and its strict JSON schema is what structured output asks
for. They ignore extra keys, accept the aliases judges use (``reasoning`` for
``reason``), and reject what has no single reading (NaN, a score off every scale).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

__all__ = [
    "Binary",
    "ClaimVerdict",
    "Classification",
    "ContextVerdict",
    "CriterionScore",
    "GEvalVerdict",
    "GeneratedQuestions",
    "RagVerdicts",
    "ScoreVerdict",
    "StatementVerdict",
    "as_binary",
    "score_on_scale",
]


def as_binary(value: Any) -> Any:
    """A yes/no verdict as the judge wrote it (bool, "yes", "supported", 1, ...) as 1 or 0;
    anything else unchanged (the model's validation then rejects it)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in {"1", "yes", "true", "supported", "attributed"}:
            return 1
        if text in {"0", "no", "false", "not supported", "unsupported", "not attributed"}:
            return 0
    return value


#: a yes/no verdict: 1 or 0, read from what judges write (`as_binary`)
Binary = Annotated[int, Field(ge=0, le=1), BeforeValidator(as_binary)]


class _Out(BaseModel):
    # NaN and infinity are not scores: a reply holding one is unparsable (never NaN out)
    model_config = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)


def score_on_scale(value: float) -> bool:
    """True for a judge score that has one reading: 0..1 as asked, or (10, 100] (a
    percentage). (1, 10] is ambiguous (a 0-10 scale or a percentage?), a negative score or
    one above 100 is off every scale."""
    return 0.0 <= value <= 1.0 or 10.0 < value <= 100.0


class ScoreVerdict(_Out):
    """A 0..1 score with the judge's reason (the judge specification's prompts; direct relevance).

    A score in (10, 100] is accepted (the metric reads it as a percentage). Any other score
    outside 0..1 is rejected (`score_on_scale`): the judge did not use the scale, so the
    reply is unparsable (one JSON-only retry naming the problem, then None with the error)
    rather than clamped into a confident 0 or 1 (the judge specification clamps).
    """

    score: float
    reason: str = Field(
        default="", validation_alias=AliasChoices("reason", "reasoning", "explanation")
    )

    @field_validator("score")
    @classmethod
    def _on_scale(cls, value: float) -> float:
        if not score_on_scale(value):
            raise ValueError(f"score must be a decimal number from 0.0 to 1.0; got {value:g}")
        return value

    @field_validator("reason", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return "" if value is None else str(value)


class ClaimVerdict(_Out):
    claim: str
    verdict: Binary
    reason: str = ""


class ContextVerdict(_Out):
    context_index: int = Field(ge=1)
    is_relevant: bool
    relevance_score: float | None = None
    reasoning: str = ""


class StatementVerdict(_Out):
    statement: str
    attributed: Binary
    supporting_context: str | None = None


class RagVerdicts(_Out):
    """One call's verdicts for a RAG sample: answer claims, contexts, reference statements."""

    claims: list[ClaimVerdict] = Field(default_factory=list)
    contexts: list[ContextVerdict] = Field(default_factory=list)
    statements: list[StatementVerdict] = Field(default_factory=list)


class GeneratedQuestions(_Out):
    questions: list[str] = Field(default_factory=list)


class CriterionScore(_Out):
    score: float = Field(ge=0, le=100)
    reasoning: str = ""


class GEvalVerdict(_Out):
    step1_correctness: CriterionScore
    step2_completeness: CriterionScore
    step3_consistency: CriterionScore
    final_score: float | None = None
    overall_reasoning: str = ""
    confidence: float | None = None


class Classification(_Out):
    label: Literal["CORRECT", "WRONG"]
    reason: str = ""

    @field_validator("label", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return str(value).strip().upper() if value is not None else value
