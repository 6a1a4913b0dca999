"""The `Metric` base class: small stateless objects; the base does the public work.

A metric declares its metadata as class attributes and implements one pure hook,
``compute`` (one sample) or ``compute_batch`` (many, when the cost is a model call); a
metric that asks a judge or embeds texts also declares its asks as data (``plan``, see
`assay.engine`).
``score`` and ``score_batch`` live here once: they check required inputs (a missing input
gives ``None`` with a reason, never 0), apply the input limits (a field past
``max_field_chars``, ``max_contexts`` or ``max_json_depth`` gives an error naming it to the
metrics that read it, for that sample only: see `assay.core.sample.limited`), isolate a failing
sample (its result carries the error; the others are still scored) and never let NaN out.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, Self

from assay.core.config import AssayConfig
from assay.core.json_documents import depth_limit
from assay.core.result import MetricResult
from assay.core.sample import InputTooLarge, Sample, limit_problems, limited

if TYPE_CHECKING:
    from assay.engine import Answers, Ask
    from assay.engine.resources import Resources

__all__ = ["PASS_THRESHOLD", "Metric", "PlannedMetric", "Source", "clamp01", "limits_checked"]

#: key of ``MetricResult.details`` where a metric puts a per-sample pass threshold that
#: replaces the configured one for that sample (e.g. the Arabic similarity threshold)
PASS_THRESHOLD = "pass_threshold"


@cache
def _default_limits() -> AssayConfig:
    return AssayConfig()


# limit checks made once for many metrics: (limits, sample id -> problems); see limits_checked
_CHECKED: ContextVar[tuple[tuple[int, int, int], dict[int, dict[str, str]]] | None] = ContextVar(
    "assay_checked_limits", default=None
)


def _limits_key(config: AssayConfig) -> tuple[int, int, int]:
    return (config.max_field_chars, config.max_contexts, config.max_json_depth)


@contextmanager
def limits_checked(samples: Sequence[Sample], config: AssayConfig) -> Iterator[None]:
    """Check the input limits of ``samples`` once; within the block every metric's
    `Metric.score_batch` reuses the result instead of measuring each sample again (the
    runner wraps each chunk in it). The samples must not change inside the block."""
    checked = {id(s): limit_problems(s, config) for s in samples}
    token = _CHECKED.set((_limits_key(config), checked))
    try:
        yield
    finally:
        _CHECKED.reset(token)


def _problems(sample: Sample, config: AssayConfig) -> dict[str, str]:
    memo = _CHECKED.get()
    if memo is not None and memo[0] == _limits_key(config) and id(sample) in memo[1]:
        return memo[1][id(sample)]
    return limit_problems(sample, config)


class Source(StrEnum):
    """The specification a metric implements, named by its subject (the README's
    "Specifications" section names the document behind each)."""

    CHATBOT_HUB = "chatbot metrics hub"
    LLM_JUDGE = "LLM judge"
    JSON_COMPARISON = "JSON comparison"
    RAG_EVALUATION = "RAG evaluation"
    PIPELINE = "lightweight pipeline"


def clamp01(value: float) -> float:
    """Clamp to [0, 1]; NaN becomes 0 so it can never leave a metric."""
    if value != value:  # NaN
        return 0.0
    return max(0.0, min(1.0, float(value)))


class Metric:
    """Base class of every metric.

    Class attributes (the catalogue reads them):
        name: registry name, the specification's own snake_case name; results are
            reported under it (or under the alias asked for, see `reported_as`).
        aliases: other names of the same computation (a specification's second name for
            one number); asking for one gives this metric reporting under that name.
        family: lexical, semantic, rag, judged, grounding, reasoning, structured,
            conversation, safety, security, reliability, agent or performance.
        requires: Sample fields that must be present; otherwise the result is None.
        higher_is_better: polarity.
        value_range: (low, high); high is None when unbounded (latencies).
        unit: ``ratio`` (0..1, shown as %), ``score``, ``ms``, ``tokens/s``, ``ms/token``,
            ``count``, ``bool``.
        default_threshold: pass threshold used by the runner (None: no pass/fail).
        threshold_env: environment variable that sets the threshold (the specification's).
        threshold_setting: the AssayConfig field holding the threshold, when configurable.
        suites: named suites the metric belongs to.
        source: the specification that defines it (`Source`); None for Assay's own.
        needs: resources it loads: ``embedder``, ``bertscore``, ``spacy``, ``toxicity``
            (the learned toxicity head), ``profanity_check`` (the older toxicity model),
            ``support_head``, ``agreement_head``, ``entailment`` (the entailment model),
            ``judge`` (a test holds every metric to its list).
        components: names of sub-scores it reports.
    """

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    family: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()
    higher_is_better: ClassVar[bool] = True
    value_range: ClassVar[tuple[float, float | None]] = (0.0, 1.0)
    unit: ClassVar[str] = "ratio"
    default_threshold: ClassVar[float | None] = None
    threshold_env: ClassVar[str | None] = None
    threshold_setting: ClassVar[str | None] = None
    #: False for a copy a suite brings in to inform, not to gate (`ungated`)
    gated: ClassVar[bool] = True
    suites: ClassVar[tuple[str, ...]] = ()
    source: ClassVar[Source | None] = None
    needs: ClassVar[frozenset[str]] = frozenset()
    components: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "1"

    # ---- catalogue -----------------------------------------------------------------
    @classmethod
    def description(cls) -> str:
        """First paragraph of the class docstring."""
        doc = (cls.__doc__ or "").strip()
        return " ".join(doc.split("\n\n", 1)[0].split())

    @classmethod
    def info(cls) -> dict[str, Any]:
        return {
            "name": cls.name,
            "aliases": list(cls.aliases),
            "family": cls.family,
            "description": cls.description(),
            "requires": list(cls.requires),
            "higher_is_better": cls.higher_is_better,
            "range": list(cls.value_range),
            "unit": cls.unit,
            "default_threshold": cls.default_threshold,
            "threshold_env": cls.threshold_env,
            "suites": list(cls.suites),
            "source": None if cls.source is None else str(cls.source),
            "needs": sorted(cls.needs),
            "components": list(cls.components),
        }

    def reported_as(self, name: str) -> Self:
        """This metric reporting its results under ``name``, its own name or one of its
        aliases (a copy; the value, version and parameters are the same)."""
        if name != type(self).name and name not in self.aliases:
            raise ValueError(f"{name!r} is not a name of metric {type(self).name!r}")
        twin = copy.copy(self)
        twin.name = name  # type: ignore[misc]  # the instance's name shadows the class's
        return twin

    def ungated(self) -> Self:
        """This metric reporting its values without a default threshold (a copy), for a
        suite that brings it in to inform, not to gate (`assay.metrics.registry.SUITE_GATES`):
        only a threshold asked for (``thresholds`` in a config, ``--threshold``) gates it."""
        twin = copy.copy(self)
        # the instance's attributes shadow the class's
        twin.default_threshold = None  # type: ignore[misc]
        twin.threshold_setting = None  # type: ignore[misc]
        twin.gated = False  # type: ignore[misc]  # nor its per-sample threshold
        return twin

    def params(self) -> dict[str, Any]:
        """Parameters that change the value; part of the signature. Override when any."""
        return {}

    # ---- public API ----------------------------------------------------------------
    def score(self, sample: Sample, resources: Resources | None = None) -> MetricResult:
        """Score one sample."""
        return self.score_batch([sample], resources)[0]

    def score_batch(
        self, samples: Sequence[Sample], resources: Resources | None = None
    ) -> list[MetricResult]:
        """Score many samples; one result per sample, in order."""
        from assay.engine.resources import default_resources

        res = resources or default_resources()
        # a stand-in for Resources without a config (a test double) gets the defaults
        limits = getattr(res, "config", None) or _default_limits()
        results: list[MetricResult | None] = [None] * len(samples)
        todo: list[int] = []
        over: dict[int, Sample] = {}  # samples with a field past an input limit
        for i, sample in enumerate(samples):
            problems = _problems(sample, limits)
            if problems:
                over[i] = limited(sample, problems)
                continue
            results[i] = self._lacking(sample)
            if results[i] is None:
                todo.append(i)
        with depth_limit(limits.max_json_depth):
            if todo:
                batch = [samples[i] for i in todo]
                try:
                    computed = self.compute_batch(batch, res)
                except Exception:  # isolate the failing sample(s): score one by one
                    computed = [self._compute_one_safely(s, res) for s in batch]
                for i, result in zip(todo, computed, strict=True):
                    results[i] = result
            for i, view in over.items():  # alone: a field it reads fails only this sample
                results[i] = self._score_limited(view, res)
        return [r for r in results if r is not None]

    def _score_limited(self, view: Sample, res: Resources) -> MetricResult:
        """Score a sample with a field past a limit: reading that field fails the metric
        for this sample (`InputTooLarge`); a metric that does not read it scores as usual."""
        try:
            lacking = self._lacking(view)
        except InputTooLarge as exc:
            return self.failed(exc)
        return lacking or self._compute_one_safely(view, res)

    def missing_inputs(self, sample: Sample) -> list[str]:
        """Required fields the sample lacks."""
        return [f for f in self.requires if not sample.has(f)]

    def _lacking(self, sample: Sample) -> MetricResult | None:
        """N/A with the reason when the target call that was to produce the response failed
        (``assay run``) or a required input is missing; None when all are there."""
        call = sample.target_call
        if call is not None and call.status != "ok":
            return self.na(f"the target call failed ({call.status}: {call.reason})")
        missing = self.missing_inputs(sample)
        if not missing:
            return None
        return self.na("missing input: " + ", ".join(missing), missing=list(missing))

    # ---- hooks ---------------------------------------------------------------------
    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        """Score one sample whose required inputs are present."""
        raise NotImplementedError(f"{type(self).__name__} implements neither compute hook")

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        """Score samples whose required inputs are present. Override to vectorise."""
        return [self.compute(s, res) for s in samples]

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]:
        """What this metric needs answered for ``sample`` (`assay.engine.Ask`), given the
        answers so far: the runner executes the plans of all metrics of a chunk at once
        (`assay.engine.execute`) before scoring. Metrics with asks (the judged ones, and
        the embedding ones, `assay.metrics.semantic.EmbeddedMetric`) plan them here and
        reduce the answers in ``compute_batch``; pure-formula metrics plan nothing."""
        return []

    # ---- result helpers --------------------------------------------------------------
    def result(
        self,
        value: float | None,
        *,
        components: dict[str, float | None] | None = None,
        method: str = "local",
        reason: str | None = None,
        model: str | None = None,
        **details: Any,
    ) -> MetricResult:
        """Build this metric's result; NaN values become None with a reason."""
        if value is not None and not math.isfinite(value):
            value, reason = None, reason or "undefined (non-finite intermediate value)"
        comps = (
            {
                k: (None if v is None or not math.isfinite(v) else float(v))
                for k, v in components.items()
            }
            if components
            else {}
        )
        return MetricResult(
            name=self.name,
            value=None if value is None else float(value),
            components=comps,
            details=details,
            method=method,
            reason=reason,
            signature=self.signature(method, model),
        )

    def na(self, reason: str, *, method: str = "local", **details: Any) -> MetricResult:
        """A result with no value: the metric is undefined for this sample."""
        return MetricResult(
            name=self.name,
            value=None,
            details=details,
            method=method,
            reason=reason,
            signature=self.signature(method, None),
        )

    def failed(
        self,
        error: BaseException | str,
        *,
        reason: str | None = None,
        method: str = "error",
        model: str | None = None,
    ) -> MetricResult:
        """The result of a sample the metric could not score, with the error (an exception,
        or the message of a part's error): a field past an input limit (reason ``input
        over a limit``, the error saying which and how to raise it), a failed judge call
        (``judge call failed``, method ``llm``), a failed computation (``computation
        failed``), or ``reason`` (e.g. "judge call failed", with the ``method`` and
        ``model`` that failed)."""
        from assay.judge.client import JudgeError

        if isinstance(error, InputTooLarge):
            default, message = "input over a limit", str(error)
        elif isinstance(error, JudgeError):  # e.g. the judge could not be reached
            default, message = "judge call failed", f"{type(error).__name__}: {error}"
            method = "llm" if method == "error" else method
        elif isinstance(error, BaseException):
            default, message = "computation failed", f"{type(error).__name__}: {error}"
        else:
            default, message = "computation failed", error
        return MetricResult(
            name=self.name,
            value=None,
            method=method,
            reason=reason or default,
            error=message,
            signature=self.signature(method, model),
        )

    def signature(self, method: str, model: str | None) -> str:
        """What produced a result (format: `assay.core.result`; built by
        `assay.metrics.provenance`), built once per name, method, model and parameters."""
        params = self.params()
        key = (self.name, method, model, repr(params) if params else "")
        memo = self.__dict__.setdefault("_signatures", {})
        found = memo.get(key)
        if found is None:
            from assay.metrics.provenance import build_signature

            if len(memo) > 1_000:  # e.g. a model name per sample
                memo.clear()
            found = memo[key] = build_signature(self.name, self.version, method, model, params)
        return found

    def _compute_one_safely(self, sample: Sample, res: Resources) -> MetricResult:
        try:
            return self.compute_batch([sample], res)[0]
        except Exception as exc:
            return self.failed(exc)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({params})"


class PlannedMetric(Metric):
    """A metric whose model work is all declared as asks: `plan` names them for a sample,
    `reduce` turns a sample's answers into its result. Scored on its own, it executes its
    plan itself (`assay.engine.execute`); in a run the runner has already executed the
    plans of the chunk, so it finds every answer there."""

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        """The result of ``sample`` from the answers of its plan; raises the error of a
        failed ask (e.g. a model that could not load)."""
        raise NotImplementedError

    def compute_batch(self, samples: Sequence[Sample], res: Resources) -> list[MetricResult]:
        from assay.engine import execute

        answers = execute([self], samples, res)  # nothing the chunk already answered
        out = []
        for sample in samples:
            try:
                out.append(self.reduce(sample, answers, res))
            except Exception as exc:  # a failed ask or a field past a limit
                out.append(self.failed(exc))
        return out
