"""The local executor: every ask of a chunk, deduplicated, in concurrent rounds.

`execute` asks the metrics for their plans over the samples, drops the asks already
answered (in this chunk, by any metric) and duplicates (the same key from two metrics or
two samples), runs what is left in one round, and repeats while the answers make new
asks appear (follow-ups), at most `MAX_ROUNDS` times. Judge asks go through the run's
`JudgeClient`, which keeps its own per-run memo, persistent cache, bounded concurrency,
retries and structured-output probe: a cached question costs no call. The model asks
(`MODEL_KINDS`, one kind after the other; ``embed``: one call to the run's embedder for
all distinct texts of the round, its cache in front, the rest sent to the model sorted
by length, and one call to any other embedder an ask names, e.g. the toxicity head's
USE when the run embeds with another model; ``bertscore``: one call of the BERTScore
model for all distinct pairs, each text embedded once, longest first; ``parse``: one
``nlp.pipe`` pass of the run's spaCy pipeline over the distinct texts; ``entail``: one
call of the entailment model for all distinct pairs, sorted by length) run in a thread
while the judge asks of the same round are in flight: the first round loads the models
(and embeds what is known up front, e.g. the questions) during the judge's latency. A
round without judge asks runs its model asks in the calling thread. Each model call is
counted in the resources' `assay.engine.work.ModelWork` (kind, items, seconds): where a
run's model time goes.

The judge is looked up only for metrics that declare it (``needs``); without one the
answers' ``model`` is None and the metrics plan model asks only (the judged metrics,
their local estimators'), so offline runs take the same path. The runner executes the
plans of all metrics of a chunk first, inside `answered`, so each metric then finds its
answers there and reduces them without another call; a metric scored on its own
(``metric.score_batch``) runs the same `execute` for itself. Code that needs vectors
outside a metric's plan (the structured comparison's local scorer called by
``assay json-eval`` or the library, the toxicity batch) calls `answer` with its asks:
inside a chunk it reads the chunk's answers, elsewhere it runs one round of its own.
This module is the only place asks are executed: the Ray executor (`assay.evaluation.scale`) sends
whole chunks to its workers, and each runs this executor on them, its judge requests
taking their slots from the cluster's one judge budget.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from assay.core.sample import Sample
from assay.engine.asks import Answers, Ask

if TYPE_CHECKING:
    from assay.engine.resources import Resources

__all__ = ["MAX_ROUNDS", "Planner", "answer", "answered", "execute", "planned"]

#: most rounds of asks per execution (a first round and its follow-ups)
MAX_ROUNDS = 4

_CURRENT: ContextVar[Answers | None] = ContextVar("assay_chunk_answers", default=None)


class Planner(Protocol):
    """What `execute` needs of a metric: the resources it declares, its required inputs
    and its plan."""

    needs: frozenset[str]

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
    field past an input limit) asks nothing: the metric reports the error when reducing.
    With a judge panel, a metric that needs the judge plans through each judge's view
    (`Answers.member`: a follow-up depends on that judge's answers) and its judge asks
    are that judge's (`Ask.for_judge`)."""
    views = [answers.member(label) for label in answers.judges] or [answers]
    todo: dict[str, Ask] = {}
    for metric in metrics:
        planners = views if "judge" in metric.needs else [answers]
        for sample in samples:
            if metric.missing_inputs(sample):
                continue
            for view in planners:
                try:
                    asks = metric.plan(sample, view)
                except Exception:
                    continue
                for ask in map(view.tagged, asks):
                    if ask not in answers:
                        todo.setdefault(ask.key, ask)
    return todo


def execute(metrics: Sequence[Planner], samples: Sequence[Sample], res: Resources) -> Answers:
    """Answer every ask (and follow-up) the metrics plan for the samples, with the run's
    judge and models.

    The judge (``res.judge``) is looked up only when a metric declares it in ``needs``;
    without one (none configured, or no metric needing it) the answers' ``model`` is
    None and the metrics plan only model asks (the judged ones, their local estimators'),
    so an offline run goes through the same executor. Inside `answered` the chunk's
    answers are extended when they were made with the same ``res`` (nothing already
    answered is asked again); otherwise a new `Answers` is returned. An ask that fails
    keeps its error as its answer.
    """
    answers = _answers_for(res, lambda: any("judge" in m.needs for m in metrics))
    for _ in range(MAX_ROUNDS):
        todo = planned(metrics, samples, answers)
        if not todo:
            break
        _run_round(list(todo.values()), answers, res)
    return answers


def answer(asks: Sequence[Ask], res: Resources) -> Answers:
    """The answers to ``asks`` as they are (no plan, no follow-up round): for code that
    compares texts outside a metric's plan, e.g. the structured comparison's local scorer
    (`assay.structured.scorers`) called from ``assay json-eval`` or the library, and the
    toxicity head's batch. Inside `answered` with the same ``res`` the chunk's answers are
    read and extended, so what the metrics planned for the chunk is not asked again;
    otherwise a new `Answers`. What is not answered yet runs in one round."""
    answers = _answers_for(res, lambda: any(a.kind == "judge" for a in asks))
    todo = {a.key: a for a in map(answers.tagged, asks) if a not in answers}
    if todo:
        _run_round(list(todo.values()), answers, res)
    return answers


def _answers_for(res: Resources, judged: Callable[[], bool]) -> Answers:
    """The chunk's answers when they were made with ``res`` (inside `answered`), else new
    ones, with the judge's model when ``judged()`` says a judge is needed."""
    current = _CURRENT.get()
    if current is not None and current.resources is res:
        return current
    judge = res.judge if judged() else None
    if judge is None:
        return Answers(None, res)
    return Answers(judge.model, res, getattr(judge, "labels", ()))


def _run_round(asks: list[Ask], answers: Answers, res: Resources) -> None:
    """Run one round of distinct asks: the model asks (`MODEL_KINDS`, kind after kind) in
    a thread while the judge asks run concurrently (without judge asks: in this thread);
    each answer (or error) into ``answers``."""
    unknown = sorted({a.kind for a in asks} - {"judge", *MODEL_KINDS})
    if unknown:
        raise ValueError(
            f"the local executor runs judge and {sorted(MODEL_KINDS)} asks; got kinds {unknown}"
        )
    by_kind = {kind: [a for a in asks if a.kind == kind] for kind in MODEL_KINDS}
    judged = [a for a in asks if a.kind == "judge"]
    if not judged:  # nothing to overlap with: the models run here
        _run_models(by_kind, answers, res)
        return
    worker = threading.Thread(target=_run_models, args=(by_kind, answers, res), name="assay-models")
    modelled = any(by_kind.values())
    if modelled:
        worker.start()
    _run_judge(judged, answers, res)
    if modelled:
        worker.join()


def _run_judge(asks: list[Ask], answers: Answers, res: Resources) -> None:
    """The judge asks, concurrently through the run's `JudgeClient` (`JudgeClient.ask_all`:
    direct calls, or the Batch API's batches with ``judge_batch``), or, with a panel, each
    to its judge (`JudgePanel.ask_each`, every judge at once under one budget); without
    a judge (``answers.model`` None) each ask's answer is an error saying so. A judge
    that cannot be reached (its circuit opened, `JudgeUnreachable`) stops the run: the
    error is raised, not given to each ask; in a panel only when no judge can be reached
    (the others decide without it)."""
    judge = res.judge if answers.model is not None else None
    if judge is None:
        for ask in asks:
            answers.put(ask, ValueError("a judge ask without a judge (no judge configured)"))
        return

    # each failure is its ask's answer (its metric reports it per sample); with
    # judge_batch the client sends the round's uncached questions as batches
    questions = [(a.prompt, a.values) for a in asks if a.prompt is not None]
    if len(questions) != len(asks):
        raise ValueError("a judge ask without a prompt")
    if answers.judges or answers.judge is not None:  # a panel: each ask to its judge
        routed = [(a.judge or "", a.prompt, a.values) for a in asks]
        replies = judge.run(judge.ask_each(routed))
    else:
        replies = judge.run(judge.ask_all(questions))
    if judge.unreachable is not None:
        from assay.judge.client import JudgeUnreachable

        raise JudgeUnreachable(judge.unreachable)
    for ask, answer in zip(asks, replies, strict=True):
        answers.put(ask, answer)


def _run_models(by_kind: dict[str, list[Ask]], answers: Answers, res: Resources) -> None:
    """Each kind's asks in one call of its model (`MODEL_KINDS`); a model that cannot load
    or fails: each ask of that kind gets the error as its answer."""
    for kind, asks in by_kind.items():
        if not asks:
            continue
        started = time.perf_counter()
        try:
            found = MODEL_KINDS[kind](asks, answers, res)
        except Exception as exc:
            found = [exc] * len(asks)
        if kind != "embed":  # `_embed` counts each embedder's call itself
            res.model_work.add(kind, len(asks), time.perf_counter() - started)
        for ask, answer in zip(asks, found, strict=True):
            answers.put(ask, answer)


def _embed(asks: list[Ask], answers: Answers, res: Resources) -> Sequence[Any]:
    """The vectors of the texts of ``asks``, one call per embedder: the run's for the asks
    that name none, the named one (`Resources.embedder_named`) for the others (each
    embedder looks the texts up in its cache and sends the rest to the model sorted by
    length, in batches of similar length). An embedder that cannot load or fails gives
    its asks the error; the other embedder's asks keep their vectors."""
    by_embedder: dict[str | None, list[int]] = {}
    for i, ask in enumerate(asks):
        by_embedder.setdefault(ask.values.get("embedder"), []).append(i)
    found: list[Any] = [None] * len(asks)
    for name, rows in by_embedder.items():
        started = time.perf_counter()
        try:
            embedder = res.embedder if name is None else res.embedder_named(name)
            vectors: Sequence[Any] = list(embedder.embed([asks[i].values["text"] for i in rows]))
        except Exception as exc:  # the answer of each of this embedder's asks
            vectors = [exc] * len(rows)
        else:
            if name is None:
                answers.embedder = embedder.name
        kind = "embed" if name is None else f"embed {name}"
        res.model_work.add(kind, len(rows), time.perf_counter() - started)
        for i, vector in zip(rows, vectors, strict=True):
            found[i] = vector
    return found


def _bertscore(asks: list[Ask], answers: Answers, res: Resources) -> Sequence[Any]:
    """The raw (P, R, F) rows of the pairs of ``asks``, from one call of the run's
    BERTScore model (each distinct text tokenised and embedded once, longest first; the
    scorer's pair memo in front)."""
    return list(
        res.bertscorer.raw_scores(
            [a.values["candidate"] for a in asks], [a.values["reference"] for a in asks]
        )
    )


def _entail(asks: list[Ask], answers: Answers, res: Resources) -> Sequence[Any]:
    """The probability rows of the pairs of ``asks``, from one call of the run's
    entailment model (distinct pairs, sorted by length, batched; its memo in front)."""
    pairs = [(a.values["premise"], a.values["hypothesis"]) for a in asks]
    return list(res.entailment.probabilities(pairs))


def _parse(asks: list[Ask], answers: Answers, res: Resources) -> Sequence[Any]:
    """The spaCy ``Doc`` of each text of ``asks``: read from the run's model cache where a
    run parsed it before (`assay.text.parses.doc_from_bytes`), the others from one
    ``nlp.pipe`` pass of the run's pipeline (`assay.text.parses.parse_texts`) and then
    stored; the entity recogniser deferred to the docs whose entities are read
    (`Answers.docs`)."""
    from assay.text.parses import doc_from_bytes, doc_to_bytes, parse_texts

    texts = [a.values["text"] for a in asks]
    nlp, name = res.nlp, res.parse_cache_name
    docs = {}
    for text, data in res.cache.get_blobs(name, dict.fromkeys(texts)).items():
        doc = doc_from_bytes(nlp, data)
        if doc is not None and doc.text == text:
            docs[text] = doc
    todo = [t for t in dict.fromkeys(texts) if t not in docs]
    if todo:
        parsed = parse_texts(nlp, todo, batch_size=res.config.batch_size, defer_entities=True)
        res.cache.put_blobs(name, {t: doc_to_bytes(d) for t, d in parsed.items()})
        docs.update(parsed)
    return [docs[t] for t in texts]


#: the executors of the model ask kinds, by kind: each answers one round's asks of its
#: kind in one batch, an answer per ask in order (`_run_models` stores them)
MODEL_KINDS: dict[str, Callable[[list[Ask], Answers, Resources], Sequence[Any]]] = {
    "embed": _embed,
    "bertscore": _bertscore,
    "parse": _parse,
    "entail": _entail,
}
