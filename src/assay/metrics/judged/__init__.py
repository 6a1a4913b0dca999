"""Judged metrics: LLM-as-judge scores of the judge and RAG specifications, with offline
estimators.

With a judge configured (`Resources.judge`, see `assay.judge.client`) each metric
declares the judge asks a sample needs (its plan: the specifications' prompts of
`assay.judge.prompts` with the sample's values), the engine (`assay.engine`) asks each
distinct one once, concurrently, and the metric reduces the answers; its result says
``method="llm"``. Without a judge, each falls back to a named local estimator
(`assay.estimators.offline`) and says ``method="local"`` with ``details["estimator"]``; the
estimator's texts are planned as embed asks and executed by the same engine (each
distinct text of a chunk embedded once, whichever metrics compare it), and the reference
agreement that ``factual_accuracy`` and ``answer_classification`` share is computed once
per sample. An ask that finally fails gives that sample ``None`` with the error.

Asks per sample (the runner asks the union over a chunk's metrics once; the judge
client's cache answers a question asked before):

- the judge specification (`rubric`): one for ``judged_relevance``; ``faithfulness``,
  ``hallucination`` and ``contextual_relevance`` declare the same ONE ask (`GROUNDING`:
  the three rubrics in one reply); ``answer_correctness`` declares the first two's.
- the RAG specification (`ragas`): ``ragas_faithfulness``, ``ragas_context_precision`` and
  ``ragas_context_recall`` declare the same ONE ask (`RAG_VERDICTS`);
  ``ragas_answer_relevance`` one (a follow-up only when no question comes back);
  ``ragas_score`` the four's: 2 per sample for the four and their composite.
- the RAG specification (`reference`): ``factual_accuracy`` and ``answer_classification``
declare the
  same ONE ask (`REFERENCE_VERDICTS`; classification none for an answer with an
  uncertainty phrase).

So the whole suite asks 5 questions per sample (relevance, grounding, RAG verdicts,
generated questions, reference verdicts), the four RAGAS metrics 2.

Modules: `formulas` (pure formulas), `base` (the plan/reduce machinery),
`shared_prompts` (the prompts several metrics share), `rubric`, `ragas`, `reference`
(the metrics).
"""

from __future__ import annotations

from assay.metrics.judged.base import JudgedMetric, RubricScore
from assay.metrics.judged.formulas import (
    FACTUAL_ACCURACY_WEIGHTS,
    RAGAS_WEIGHTS,
    average_precision,
    factual_grade,
    ragas_composite,
    unit_score,
    weighted_correctness,
)
from assay.metrics.judged.ragas import (
    RagasAnswerRelevance,
    RagasContextPrecision,
    RagasContextRecall,
    RagasFaithfulness,
    RagasScore,
)
from assay.metrics.judged.reference import (
    AGREEMENT_THRESHOLD,
    AnswerClassification,
    FactualAccuracy,
)
from assay.metrics.judged.rubric import (
    AnswerCorrectness,
    ContextualRelevance,
    Faithfulness,
    Hallucination,
    JudgedRelevance,
)

#: the name the judge client's tests import
_unit_score = unit_score

__all__ = [
    "AGREEMENT_THRESHOLD",
    "FACTUAL_ACCURACY_WEIGHTS",
    "RAGAS_WEIGHTS",
    "AnswerClassification",
    "AnswerCorrectness",
    "ContextualRelevance",
    "FactualAccuracy",
    "Faithfulness",
    "Hallucination",
    "JudgedMetric",
    "JudgedRelevance",
    "RagasAnswerRelevance",
    "RagasContextPrecision",
    "RagasContextRecall",
    "RagasFaithfulness",
    "RagasScore",
    "RubricScore",
    "average_precision",
    "factual_grade",
    "ragas_composite",
    "unit_score",
    "weighted_correctness",
]
