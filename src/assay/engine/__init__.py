"""The execution engine: metrics declare what they need as data (`Ask`), one executor
makes the calls, metrics reduce the answers.

- `asks`: the `Ask` data type and its key (``judge``, ``embed``, ``bertscore``,
  ``parse`` and ``entail`` asks; an embed ask may name its embedder, e.g. the toxicity
  head's USE when the run embeds with another model), `Answers` (what came back, by key; the judge
  model, None offline; a memo for values that several metrics reduce from the same
  answers).
- `executor`: the local executor: collects the asks of many metrics over a chunk of
  samples, removes duplicates, runs judge asks concurrently through the run's
  `JudgeClient` (its memo, persistent cache, retries and format probe in front) while
  the model asks run in a thread (with a judge panel, `assay.judge.panel.JudgePanel`,
  each judge's asks go to that judge: a metric plans through each judge's view,
  `Answers.member`; embed asks: one embedder call for the distinct texts,
  per embedder; BERTScore asks: one scorer call for the distinct pairs; parse asks: one
  spaCy pass over the distinct texts; entail asks: one entailment-model call for the
  distinct pairs; the models load while the judge answers), and goes
  round again for follow-up asks planned from the answers. Without a judge it runs the
  model asks alone. `answer` runs given asks for code outside a metric's plan (reading
  the chunk's answers inside a run).

A metric taking part implements ``plan(sample, answers) -> list[Ask]`` (called with the
answers so far; an ask already answered is not asked again, so a follow-up is simply an
ask that the first answers make appear) and reduces the answers to a `MetricResult`:
the judged metrics (`assay.metrics.judged.base`, the conversation metrics included;
offline, their estimators' asks), the embedding metrics (`assay.metrics.semantic.
EmbeddedMetric`: the semantic, rag, reliability and step-correctness metrics) and
BERTScore (`assay.metrics.bertscore`), the last two through `assay.metrics.base.PlannedMetric`.
The JSON and tool-call metrics plan the embed asks of the fields their comparison scores
SEMANTIC (`assay.structured.scorers.semantic_asks`; the local scorer reads the vectors
from the answers), and the toxicity metrics those of the texts the toxicity head scores
(`assay.metrics.toxicity_plan.toxicity_asks`; the head reads the vectors from the
answers). No metric calls an embedder itself: a run embeds each distinct text of a chunk
once, in one call per embedder.
"""

from __future__ import annotations

from assay.engine.asks import (
    Answers,
    Ask,
    bertscore_ask,
    embed_ask,
    entail_ask,
    judge_ask,
    parse_ask,
)
from assay.engine.executor import Planner, answer, answered, execute, planned

__all__ = [
    "Answers",
    "Ask",
    "Planner",
    "answer",
    "answered",
    "bertscore_ask",
    "embed_ask",
    "entail_ask",
    "execute",
    "judge_ask",
    "parse_ask",
    "planned",
]
