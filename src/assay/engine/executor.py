"""The local executor: every ask of a chunk, deduplicated, in concurrent rounds.

`execute` asks the metrics for their plans over the samples, drops the asks already
answered (in this chunk, by any metric) and duplicates (the same key from two metrics or
two samples), runs what is left in one concurrent round, and repeats while the answers
make new asks appear (follow-ups), at most `MAX_ROUNDS` times. Judge asks go through
the run's `JudgeClient`, which keeps its own per-run memo, persistent cache, bounded
concurrency, retries and structured-output probe: a cached question costs no call.
Embed asks of a round go to the run's embedder in one batch, in a thread while the
judge asks of the same round are in flight: the first round loads the model (and
embeds what is known up front, e.g. the questions) during the judge's latency.

The runner executes the plans of all metrics of a chunk first, inside `answered`, so
each metric then finds its answers there and reduces them without another call; a
metric scored on its own (``metric.score_batch``) runs the same `execute` for itself.
This module is the only place asks are executed: the Ray executor (`assay.scale`) sends
whole chunks to its workers, and each runs this executor on them, its judge requests
taking their slots from the cluster's one judge budget.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from assay.engine.asks import Answers, Ask
from assay.judge.client import JudgeClient
from assay.sample import Sample

if TYPE_CHECKING:
    from assay.resources import Resources

__all__ = ["MAX_ROUNDS", "Planner", "answered", "execute", "planned"]

#: most rounds of asks per execution (a first round and its follow-ups)
MAX_ROUNDS = 4

_CURRENT: ContextVar[Answers | None] = ContextVar("assay_chunk_answers", default=None)


class Planner(Protocol):
    """What `execute` needs of a metric: its required inputs and its plan."""

    def missing_inputs(self, sample: Sample) -> list[str]: ...

    def plan(self, sample: Sample, answers: Answers) -> list[Ask]: ...


@contextmanager
def answered(answers: Answers | None) -> Iterator[Answers | None]:
    """Within the block, `execute` adds to and reads from ``answers`` (a chunk's; None:
    each execution starts afresh)."""
    token = _CURRENT.set(answers)
    try:
        yield answers
    finally:
        _CURRENT.reset(token)


def planned(
    metrics: Sequence[Planner], samples: Sequence[Sample], answers: Answers
) -> dict[str, Ask]:
    """The distinct asks, by key, that the metrics plan for the samples (those with all
    required inputs) and that ``answers`` lacks. A plan that raises for a sample (e.g. a
    field past an input limit) asks nothing: the metric reports the error when reducing."""
    todo: dict[str, Ask] = {}
    for metric in metrics:
        for sample in samples:
            if metric.missing_inputs(sample):
                continue
            try:
                asks = metric.plan(sample, answers)
            except Exception:
                continue
            for ask in asks:
                if ask not in answers:
                    todo.setdefault(ask.key, ask)
    return todo


def execute(metrics: Sequence[Planner], samples: Sequence[Sample], res: Resources) -> Answers:
    """Answer every ask (and follow-up) the metrics plan for the samples, with the run's
    judge (``res.judge``, which must be configured) and embedder.

    Inside `answered` the chunk's answers are extended (nothing already answered is
    asked again); otherwise a new `Answers` is returned. An ask that fails keeps its
    error as its answer.
    """
    judge = res.judge
    if judge is None:
        raise ValueError("execute needs a judge (Resources.judge is None)")
    current = _CURRENT.get()
    answers = current if current is not None and current.model == judge.model else None
    if answers is None:
        answers = Answers(judge.model)
    for _ in range(MAX_ROUNDS):
        todo = planned(metrics, samples, answers)
        if not todo:
            break
        _run_round(list(todo.values()), answers, res, judge)
    return answers


def _run_round(asks: list[Ask], answers: Answers, res: Resources, judge: JudgeClient) -> None:
    """Run one round of distinct asks: the embed asks in a thread, the judge asks
    concurrently meanwhile; each answer (or error) into ``answers``."""
    unknown = sorted({a.kind for a in asks} - {"judge", "embed"})
    if unknown:
        raise ValueError(f"the local executor runs judge and embed asks; got kinds {unknown}")
    embeds = [a for a in asks if a.kind == "embed"]
    worker = threading.Thread(target=_embed, args=(embeds, answers, res), name="assay-embed")
    if embeds:
        worker.start()
    judged = [a for a in asks if a.kind == "judge"]

    async def one(ask: Ask) -> Any:
        assert ask.prompt is not None
        try:
            return await judge.ask(ask.prompt, **ask.values)
        except Exception as exc:  # the ask's answer: its metric reports it per sample
            return exc

    if judged:
        for ask, answer in zip(judged, judge.gather(one(a) for a in judged), strict=True):
            answers.put(ask, answer)
    if embeds:
        worker.join()


def _embed(asks: list[Ask], answers: Answers, res: Resources) -> None:
    """Embed the texts of ``asks`` in one batch (a model that cannot load: each ask's
    answer is that error)."""
    try:
        embedder = res.embedder
        vectors = embedder.embed([a.values["text"] for a in asks])
    except Exception as exc:
        for ask in asks:
            answers.put(ask, exc)
        return
    answers.embedder = embedder.name
    for ask, vector in zip(asks, vectors, strict=True):
        answers.put(ask, vector)
