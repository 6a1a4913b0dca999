"""Judge prompts that several judged metrics share: one ask answers all of them.

Each is built from the specifications' own task texts (`assay.judge.prompts`, verbatim) as
sections of one prompt, like `RAG_VERDICTS`: each task fills one key of the reply.

- `GROUNDING`: the judge specification's faithfulness, hallucination and contextual
relevance rubrics
  over (query, contexts, response); ``faithfulness``, ``hallucination`` and
  ``contextual_relevance`` each read their key, so scored together they cost one call
  per sample instead of three.
- `REFERENCE_VERDICTS`: the RAG specification's G-Eval factual accuracy and the CORRECT/WRONG
  classification over (question, reference answer, answer); ``factual_accuracy`` and
  ``answer_classification`` share it (one call instead of two).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from assay.judge.prompts import (
    ANSWER_CLASSIFICATION,
    CONTEXTUAL_RELEVANCE,
    FAITHFULNESS,
    GEVAL_FACTUAL_ACCURACY,
    HALLUCINATION,
    Prompt,
    Section,
    unfilled_task,
)
from assay.judge.verdicts import Classification, GEvalVerdict, ScoreVerdict

__all__ = ["GROUNDING", "REFERENCE_VERDICTS", "GroundingScores", "ReferenceVerdicts"]


class GroundingScores(BaseModel):
    """The `GROUNDING` reply: one 0..1 score per task given (null for a task not given)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    faithfulness: ScoreVerdict | None = None
    hallucination: ScoreVerdict | None = None
    contextual_relevance: ScoreVerdict | None = None


class ReferenceVerdicts(BaseModel):
    """The `REFERENCE_VERDICTS` reply: the G-Eval steps and the classification."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    factual_accuracy: GEvalVerdict
    classification: Classification


def _task(key: str, prompt: Prompt[Any], requires: tuple[str, ...]) -> Section:
    """The specification prompt's task text as the section that fills ``key``."""
    text = "\n\n".join(s.text for s in prompt.sections)
    return Section(f'TASK "{key}".\n{text}', requires=requires)


#: (key, blocks its task needs) of `GROUNDING`
_GROUNDING_TASKS: tuple[tuple[str, Prompt[Any], tuple[str, ...]], ...] = (
    ("faithfulness", FAITHFULNESS, ("contexts", "response")),
    ("hallucination", HALLUCINATION, ("contexts", "response")),
    ("contextual_relevance", CONTEXTUAL_RELEVANCE, ("query", "contexts")),
)


def _check_grounding(out: GroundingScores, values: Mapping[str, Any]) -> str | None:
    return unfilled_task(out, values, ((key, requires) for key, _, requires in _GROUNDING_TASKS))


GROUNDING: Prompt[GroundingScores] = Prompt(
    name="grounding_rubrics",
    version="1",
    sections=(
        Section(
            "You are evaluating the response of a retrieval-augmented system and the context "
            "it retrieved for a query. Do every task below; each fills one key of the JSON "
            "reply with a score and a short reason. Use null for a key whose task is not "
            "given below."
        ),
        *(_task(key, prompt, requires) for key, prompt, requires in _GROUNDING_TASKS),
    ),
    blocks=("query", "contexts", "response"),
    output=GroundingScores,
    example=(
        '{"faithfulness": {"score": 0.95, "reason": "one short sentence"}, '
        '"hallucination": {"score": 0.15, "reason": "one short sentence"}, '
        '"contextual_relevance": {"score": 0.90, "reason": "one short sentence"}}'
    ),
    check=_check_grounding,
)

REFERENCE_VERDICTS: Prompt[ReferenceVerdicts] = Prompt(
    name="reference_verdicts",
    version="1",
    sections=(
        Section(
            "You are comparing a candidate answer (in <answer>) with the ground truth answer "
            "(in <reference_answer>). Do both tasks below; each fills one key of the JSON "
            "reply."
        ),
        _task("factual_accuracy", GEVAL_FACTUAL_ACCURACY, ()),
        _task("classification", ANSWER_CLASSIFICATION, ()),
    ),
    blocks=("question", "reference_answer", "answer"),
    output=ReferenceVerdicts,
    example=(
        '{"factual_accuracy": {"step1_correctness": {"score": 90, "reasoning": "..."}, '
        '"step2_completeness": {"score": 80, "reasoning": "..."}, '
        '"step3_consistency": {"score": 100, "reasoning": "..."}, '
        '"final_score": 89, "overall_reasoning": "Summary", "confidence": 90}, '
        '"classification": {"label": "CORRECT", "reason": "brief explanation"}}'
    ),
)
