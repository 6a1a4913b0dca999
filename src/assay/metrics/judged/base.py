"""The judged metrics' base: one judge path (plan, then reduce) or the local estimator.

With a judge, a metric's `JudgedMetric.plan` declares the judge asks a sample needs (prompt and
block values, `assay.engine.Ask`), the engine executes them (`assay.engine.execute`:
deduplicated, concurrent, cached; follow-ups in further rounds) and `JudgedMetric.reduce`
turns the answers into the result. The runner executes the asks of every metric of a
chunk first, so a metric scored there finds its answers and makes no call of its own.
Without a judge the same engine executes `JudgedMetric.estimate_plan` (the embed asks of
the texts the local estimator compares and the parse asks of those whose anchors it
checks, shared with every other metric of the chunk) and `JudgedMetric.estimate`
computes the named estimator from the answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from assay.core.result import MetricResult, format_signature, parse_signature
from assay.core.sample import Sample
from assay.engine import (
    Answers,
    Ask,
    answered,
    embed_ask,
    entail_ask,
    execute,
    judge_ask,
    parse_ask,
)
from assay.engine.resources import Resources
from assay.estimators.entailment import (
    combined_support,
    entailment_pairs,
    entailment_support,
    support_method,
)
from assay.estimators.offline import (
    Support,
    fitting_support_head,
    sentence_support,
    sentence_support_texts,
)
from assay.judge.examples import JudgeExamples, examples_in_files
from assay.judge.prompts import Prompt
from assay.judge.verdicts import ScoreVerdict
from assay.metrics.base import PASS_THRESHOLD, Metric
from assay.metrics.judged.formulas import unit_score
from assay.metrics.judged.panel import panel_results
from assay.text.anchors import anchor_texts

#: ``needs`` of the judged metrics whose local estimator checks claim anchors (spaCy)
ANCHORED_NEEDS = frozenset({"judge", "embedder", "spacy"})
#: ``needs`` of those whose local estimator is sentence support: graded (spaCy's
#: anchors), with the entailment model (`assay.models.entailment`) or scored by the
#: learned support head (`assay.models.support_head`)
SUPPORT_NEEDS = ANCHORED_NEEDS | {"support_head", "entailment"}
#: ``needs`` of those whose local estimator is reference agreement scored by the learned
#: agreement head (`assay.models.agreement_head`)
AGREEMENT_NEEDS = ANCHORED_NEEDS | {"agreement_head"}

__all__ = [
    "AGREEMENT_NEEDS",
    "ANCHORED_NEEDS",
    "SUPPORT_NEEDS",
    "JudgedMetric",
    "RubricScore",
    "embed_asks",
    "embedder_name",
    "parses_or_none",
    "pass_threshold",
    "rag_values",
    "score_details",
    "shared_supports",
    "support_asks",
]


def embed_asks(texts: Iterable[str]) -> list[Ask]:
    """The embed asks of ``texts`` (an estimator's texts, e.g. `sentence_support_texts`)."""
    return [embed_ask(text) for text in texts]


def parses_or_none(answers: Answers, texts: Iterable[str]) -> dict[str, Any] | None:
    """The spaCy parses of ``texts`` from the answers of their parse asks; None when the
    parse failed (spaCy or its pipeline is not installed): the estimator then checks no
    anchors, and its result shows none checked.

    Raises:
        KeyError: a text whose parse ask was never planned (a plan that does not declare
            what its estimate reads).
    """
    try:
        return answers.docs(texts)
    except KeyError:
        raise
    except Exception:
        return None


def _support_method(answers: Answers) -> str:
    """The support estimator `shared_supports` runs (`support_method` of the
    ``support_estimator`` setting; ``graded`` without resources)."""
    res = answers.resources
    return "graded" if res is None else support_method(res.config.support_estimator)


def _reads_sentences(answers: Answers) -> bool:
    """Whether the entailment support reads the source sentences too
    (``entailment_premises = "windows+sentences"``)."""
    res = answers.resources
    return res is not None and res.config.entailment_premises == "windows+sentences"


def _graded_support(answers: Answers) -> bool:
    """Whether `sentence_support` in this run is the graded support (which checks spaCy's
    anchors), not the support head: the head does not fit the run's embedder, or the
    embedder cannot load (its embed asks then answer with the reason)."""
    res = answers.resources
    if res is None:
        return True
    try:
        return fitting_support_head(res) is None
    except Exception:
        return True


def support_asks(
    answers: Answers, texts: Sequence[str], evidence: Sequence[Sequence[str]]
) -> list[Ask]:
    """The asks `shared_supports` reads for ``texts`` against ``evidence``: with the
    entailment model, the entail asks of `entailment_pairs`; unless it runs alone, the
    embed asks of `sentence_support_texts` and, for the graded support only, the parse
    asks of `anchor_texts` (the support head reads no anchor)."""
    method = _support_method(answers)
    asks = []
    if "entailment" in method:
        pairs = entailment_pairs(texts, evidence, _reads_sentences(answers))
        asks += [entail_ask(*pair) for pair in pairs]
    if method == "entailment":
        return asks
    asks += embed_asks(sentence_support_texts(texts, evidence))
    if _graded_support(answers):
        asks += [parse_ask(t) for t in anchor_texts(texts, evidence)]
    return asks


def shared_supports(
    answers: Answers, res: Resources, texts: Sequence[str], evidence: Sequence[Sequence[str]]
) -> list[Support]:
    """`sentence_support` of each ``texts[i]`` by ``evidence[i]``, from the vectors of
    `sentence_support_texts`, computed once per (text, evidence) in a chunk: kept in the
    answers' memo, so faithfulness, hallucination, ragas_faithfulness and the composites
    scored together share it), with the graded support's anchors from the parses that
    `support_asks` planned; with the entailment model (`support_method`),
    `entailment_support` from the entail asks' probabilities alone, or its mean with the
    graded support (`combined_support`)."""

    def compute(todo: list[tuple[str, tuple[str, ...]]]) -> list[Support]:
        todo_texts, todo_evidence = [k[0] for k in todo], [list(k[1]) for k in todo]
        method = _support_method(answers)
        entailed: list[Support] = []
        if "entailment" in method:
            sentences = _reads_sentences(answers)
            pairs = entailment_pairs(todo_texts, todo_evidence, sentences)
            probabilities = answers.entailments(pairs)
            entailed = entailment_support(probabilities, todo_texts, todo_evidence, sentences)
        if method == "entailment":
            return entailed
        vectors = answers.vectors(sentence_support_texts(todo_texts, todo_evidence))
        docs = None
        if fitting_support_head(res) is None:
            docs = parses_or_none(answers, anchor_texts(todo_texts, todo_evidence))
        graded = sentence_support(res, vectors, todo_texts, todo_evidence, docs=docs)
        if not entailed:
            return graded
        return [combined_support(g, e) for g, e in zip(graded, entailed, strict=True)]

    keys = [(t, tuple(e)) for t, e in zip(texts, evidence, strict=True)]
    return answers.computed_once("sentence_support", keys, compute)


def pass_threshold(threshold: float | None) -> dict[str, float]:
    """The per-sample pass threshold details of a local estimate: the learned head's
    decision threshold (chosen on dev data) or nothing (the graded support has none)."""
    return {} if threshold is None else {PASS_THRESHOLD: round(threshold, 4)}


def rag_values(sample: Sample) -> dict[str, Any]:
    """The block values of the RAG prompts (`RAG_VERDICTS`) for ``sample``."""
    return {
        "question": sample.query,
        "answer": sample.response,
        "reference_answer": sample.expected,
        "contexts": sample.contexts,
    }


def embedder_name(res: Resources) -> str | None:
    """The name of the run's embedder when it is loaded (None otherwise: never loads it)."""
    embedder = res.__dict__.get("embedder")
    return getattr(embedder, "name", None) if embedder is not None else None


def score_details(verdict: ScoreVerdict, source: str) -> tuple[float, dict[str, Any]]:
    """A rubric verdict's 0..1 value and the details every rubric result carries."""
    value, rescaled = unit_score(float(verdict.score))
    details: dict[str, Any] = {"judge_reason": verdict.reason, "judge_source": source}
    if rescaled:
        details["judge_score_read_as_percent"] = float(verdict.score)
    return value, details


class JudgedMetric(Metric):
    """Shared machinery: the judge path (plan -> engine -> reduce) or the local estimator."""

    family = "judged"
    suites: ClassVar[tuple[str, ...]] = ("judged",)
    needs = frozenset({"judge", "embedder"})
    #: name of the offline estimator (details["estimator"] of local results)
    estimator: ClassVar[str] = ""

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        answers = execute([self], samples, res)  # nothing the chunk already answered
        with answered(answers):
            if answers.model is None:  # no judge: the local estimator
                return self.estimate(samples, answers, res)
            if answers.judges:  # a judge panel: each judge's value, combined
                return panel_results(self, samples, answers, res)
            return self.reduce_batch(samples, answers, res)

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """The judge plan (`judge_plan`) when the answers have a judge, else the local
        estimator's (`estimate_plan`)."""
        if answers.model is None:
            return self.estimate_plan(sample, answers)
        return self.judge_plan(sample, answers)

    # -- judge path
    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """The judge asks this metric needs for ``sample``, given the answers so far (a
        follow-up is an ask that appears once the first answers are there)."""
        raise NotImplementedError

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        """The result of ``sample`` from the answers of its plan; raises the error of a
        failed ask (`reduced` turns it into the sample's error)."""
        raise NotImplementedError

    def reduce_batch(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        """One result per sample; override when reducing needs a model (batch it here)."""
        return [self.reduced(s, answers) for s in samples]

    def reduced(self, sample: Sample, answers: Answers) -> MetricResult:
        """`reduce`, with a failed ask giving the sample None and the error."""
        try:
            return self.reduce(sample, answers)
        except Exception as exc:
            return self.judge_failed(exc, answers.model)

    def judge_failed(self, error: BaseException, model: str) -> MetricResult:
        return self.failed(error, reason="judge call failed", method="llm", model=model)

    def llm(
        self,
        value: float | None,
        model: str,
        prompts: Iterable[Prompt[Any]],
        *,
        components: dict[str, float | None] | None = None,
        reason: str | None = None,
        **details: Any,
    ) -> MetricResult:
        signatures = [p.signature for p in prompts]
        return self.result(
            value,
            components=components,
            method="llm",
            reason=reason,
            model=f"{model};{','.join(signatures)}",
            prompts=signatures,
            **details,
        )

    # -- local path
    def estimate_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """The model asks of the local estimator for ``sample`` (the embed asks of the
        texts it compares, the parse asks of those whose anchors it checks), given the
        answers so far (``answers.resources``: the run's models); none by default."""
        return []

    def estimate(
        self, samples: Sequence[Sample], answers: Answers, res: Resources
    ) -> list[MetricResult]:
        raise NotImplementedError

    def local(
        self,
        value: float | None,
        res: Resources,
        *,
        components: dict[str, float | None] | None = None,
        reason: str | None = None,
        estimator: str | None = None,
        **details: Any,
    ) -> MetricResult:
        """A result of the local estimator: ``estimator`` names the one that ran (default:
        the class's); one that ran a learned head adds the head's identity to the model."""
        estimator = estimator or self.estimator
        # the embedder only for an estimator that declares it: another metric having
        # loaded it first must not change this one's signature
        model = embedder_name(res) if "embedder" in self.needs else None
        for head in ("support_head", "agreement_head"):
            if head in estimator:
                model = f"{model}+{getattr(res, head).identity}"
        if "entailment" in estimator:  # the reading of the premises names itself
            reading = "/sentences" if estimator.endswith("+sentences") else ""
            entailment = f"{res.entailment.name}{reading}"
            alone = estimator.removeprefix("1 - ").startswith("entailment")
            model = entailment if alone else f"{model}+{entailment}"
        return self.result(
            value,
            components=components,
            method="local",
            reason=reason,
            model=model,
            estimator=estimator,
            **details,
        )


class RubricScore(JudgedMetric):
    """The judge specification's metrics: one ask with the metric's prompt; the judge's
    score is the value.

    ``fields`` are the Sample fields the prompt's data blocks take, by the same names;
    ``key`` is the reply's key holding this metric's verdict when the prompt is shared by
    several metrics (`assay.metrics.judged.shared_prompts`), None when the reply is it."""

    prompt: ClassVar[Prompt[Any]]
    fields: ClassVar[tuple[str, ...]]
    key: ClassVar[str | None] = None
    #: labelled examples the judge is shown before the sample (``assay calibrate`` sets
    #: them on an instance); None: those of the run's ``calibration`` files, if any
    judge_examples: JudgeExamples | None = None

    def examples(self, answers: Answers | None) -> JudgeExamples | None:
        """The judge's labelled examples: the instance's, else those a calibration file
        of the run's ``calibration`` setting keeps for this metric
        (`assay.judge.examples.examples_in_files`)."""
        if self.judge_examples is not None:
            return self.judge_examples if self.judge_examples.items else None
        res = answers.resources if answers is not None else None
        setting = getattr(getattr(res, "config", None), "calibration", None)
        paths = [p.strip() for p in (setting or "").split(",") if p.strip()]
        return examples_in_files(paths, self.name) if paths else None

    def judge_prompt(self, examples: JudgeExamples | None) -> Prompt[Any]:
        """The metric's prompt, carrying ``examples`` when there are any."""
        if examples is None:
            return self.prompt
        return self.prompt.with_examples(examples.items, self.key or self.name)

    def ask(self, sample: Sample, examples: JudgeExamples | None = None) -> Ask:
        values = {f: getattr(sample, f) for f in self.fields}
        return judge_ask(self.judge_prompt(examples), **values)

    def judge_plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        return [self.ask(sample, self.examples(answers))]

    def reduce(self, sample: Sample, answers: Answers) -> MetricResult:
        examples = self.examples(answers)
        reply = answers.reply(self.ask(sample, examples))
        verdict = reply.output if self.key is None else getattr(reply.output, self.key)
        if verdict is None:  # the prompt's check makes the judge give it: a safeguard
            raise ValueError(f"the judge's reply has no {self.key!r} verdict")
        value, details = score_details(verdict, reply.source)
        if examples is None:
            return self.llm(value, answers.model, [self.prompt], **details)
        result = self.llm(
            value,
            answers.model,
            [self.judge_prompt(examples)],
            judge_examples=len(examples.items),
            **details,
        )
        if examples.source is None:
            return result
        parts = parse_signature(result.signature)
        parts["calibration"] = examples.source
        return dataclasses.replace(result, signature=format_signature(parts))
