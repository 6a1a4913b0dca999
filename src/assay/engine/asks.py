"""Asks: what a metric needs from a model or the judge, as data; answers, by ask key."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from assay.judge.client import JudgeReply
from assay.judge.prompts import Prompt
from assay.models.cache import pair_text
from assay.text.parses import Parses

if TYPE_CHECKING:
    from assay.engine.resources import Resources

__all__ = [
    "Answers",
    "Ask",
    "bertscore_ask",
    "embed_ask",
    "entail_ask",
    "judge_ask",
    "parse_ask",
]

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class Ask:
    """One thing a metric needs answered for one sample.

    Attributes:
        kind: what executes it: ``judge`` (a judge prompt with block values; the answer
            is a `JudgeReply`), ``embed`` (a text for the run's embedder, or for the
            embedder it names; the answer is its normalised vector, zeros for a blank
            text), ``bertscore`` (a candidate and reference pair for the run's BERTScore
            model; the answer is the raw (P, R, F) row), ``parse`` (a text for the run's
            spaCy pipeline; the answer is its ``Doc``) or ``entail`` (a premise and
            hypothesis pair for the run's entailment model; the answer is the row of
            P(entailment), P(neutral), P(contradiction)).
        key: identity of the ask: two asks with the same key are the same question
            (the prompt's signature and the block values; the text, and the embedder
            when one is named), asked once.
        prompt: the judge prompt (its output model is the answer's schema); None for
            other kinds.
        values: the prompt's block values; ``{"text": ...}`` for an embed ask (with
            ``"embedder"`` when it names one) or a parse ask; ``{"candidate": ...,
            "reference": ...}`` for a BERTScore ask; ``{"premise": ..., "hypothesis":
            ...}`` for an entail ask.
        judge: the judge of a panel a judge ask is for (its label; `Answers.member`);
            None for one judge, and for other kinds.
    """

    kind: str
    key: str
    prompt: Prompt[Any] | None
    values: dict[str, Any] = field(hash=False, compare=False)
    judge: str | None = None

    def for_judge(self, label: str) -> Ask:
        """This judge ask put to the panel judge ``label`` (its own key: each judge's
        answer is kept apart)."""
        return Ask(self.kind, f"{self.key}@judge:{label}", self.prompt, self.values, label)


def judge_ask(prompt: Prompt[Any], **values: Any) -> Ask:
    """The judge ask of ``prompt`` with these block values."""
    payload = json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)
    return Ask("judge", f"judge:{prompt.signature}:{payload}", prompt, values)


def embed_ask(text: str, embedder: str | None = None) -> Ask:
    """The ask for the vector of ``text``: by the run's embedder (``embedder`` None), or
    by the embedder of that name (`assay.engine.resources.Resources.embedder_named`; e.g. the
    USE encoder the toxicity head was trained on, when the run embeds with another). The
    key names the embedder, so the same text asked of two embedders is two asks."""
    if embedder is None:
        return Ask("embed", f"embed:{text}", None, {"text": text})
    key = "embed@" + json.dumps([embedder, text], ensure_ascii=False)
    return Ask("embed", key, None, {"text": text, "embedder": embedder})


def _pair_key(kind: str, first: str, second: str) -> str:
    """An unambiguous key of a pair of texts (`assay.models.cache.pair_text`)."""
    return f"{kind}:{pair_text(first, second)}"


def bertscore_ask(candidate: str, reference: str) -> Ask:
    """The ask for the raw BERTScore (P, R, F) of ``candidate`` against ``reference``."""
    key = _pair_key("bertscore", candidate, reference)
    return Ask("bertscore", key, None, {"candidate": candidate, "reference": reference})


def entail_ask(premise: str, hypothesis: str) -> Ask:
    """The ask for the entailment model's probabilities that ``premise`` entails,
    is neutral to, or contradicts ``hypothesis``."""
    key = _pair_key("entail", premise, hypothesis)
    return Ask("entail", key, None, {"premise": premise, "hypothesis": hypothesis})


def parse_ask(text: str) -> Ask:
    """The ask for the run's spaCy parse (``Doc``) of ``text``."""
    return Ask("parse", f"parse:{text}", None, {"text": text})


class Answers:
    """The answers of a chunk's asks, by key: a judge reply, a vector, a BERTScore row or a
    spaCy ``Doc``, or the error the ask failed with.

    With a judge panel (`assay.judge.panel.JudgePanel`) every judge answers each judge
    ask: `member` is the view of one judge's answers (its judge asks keyed apart by
    `Ask.for_judge`; the model asks shared), through which a metric plans and reduces as
    with one judge.

    Attributes:
        model: the judge model that answers the judge asks (for result signatures; a
            panel's ``panel(a,b)``, a member view's judge label); None when the
            execution has no judge (an offline run: the judged metrics plan their local
            estimators' asks instead, see `assay.metrics.judged.base`).
        judges: the panel's judge labels (empty without a panel, and in a member view).
        judge: the panel judge a member view reads the judge answers of (None otherwise).
        embedder: the name of the embedder that answered the embed asks (None: none yet).
        resources: the `Resources` whose judge and models answer (set by
            `assay.engine.execute`; a chunk's answers serve only executions with them).
    """

    def __init__(
        self,
        model: str | None = None,
        resources: Resources | None = None,
        judges: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.resources = resources
        self.judges = tuple(judges)
        self.judge: str | None = None
        self.embedder: str | None = None
        self._by_key: dict[str, Any] = {}
        self._memo: dict[str, Any] = {}
        self._passage_evidence: dict[str, Any] = {}  # every `docs` shares it

    def member(self, label: str) -> Answers:
        """The view of panel judge ``label``'s answers: the same answers (added to and read
        from together), its judge asks read and written under `Ask.for_judge`."""
        if label not in self.judges:
            raise KeyError(f"no judge {label!r} in {self.model}")
        view = copy.copy(self)  # shares the answers and the memo
        view.model, view.judge, view.judges = label, label, ()
        return view

    def tagged(self, ask: Ask) -> Ask:
        """``ask`` as this view's judge asks it (`Ask.for_judge`); unchanged when it is not a
        judge ask, already a judge's, or these answers are no member view."""
        if self.judge is None or ask.kind != "judge" or ask.judge is not None:
            return ask  # the first test alone outside a panel's view
        return ask.for_judge(self.judge)

    def __contains__(self, ask: Ask) -> bool:
        return self.tagged(ask).key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    def put(self, ask: Ask, answer: JudgeReply[Any] | np.ndarray | BaseException) -> None:
        self._by_key[self.tagged(ask).key] = answer

    def get(self, ask: Ask) -> Any:
        """The answer to ``ask``; None when it was not asked yet or failed."""
        answer = self._by_key.get(self.tagged(ask).key)
        return None if answer is None or isinstance(answer, BaseException) else answer

    def reply(self, ask: Ask) -> Any:
        """The answer to ``ask``: a `JudgeReply` (judge), a vector (embed), a raw
        (P, R, F) row (bertscore) or a ``Doc`` (parse).

        Raises:
            the error the ask failed with (e.g. `JudgeError`); KeyError when it was never
            asked (a plan that does not declare what its reduce reads).
        """
        answer = self._by_key[self.tagged(ask).key]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def vectors(self, texts: Iterable[str], embedder: str | None = None) -> dict[str, np.ndarray]:
        """The answered vectors of the embed asks of ``texts`` (of the run's embedder, or
        of the one named, see `embed_ask`), by text.

        Raises:
            as `reply`: the error an embed ask failed with (e.g. the embedder could not
            load); KeyError for a text whose embed ask was never planned.
        """
        return {text: self.reply(embed_ask(text, embedder)) for text in dict.fromkeys(texts)}

    def cosine(self, a: str, b: str) -> float:
        """Cosine of two texts from the run embedder's vectors of their embed asks; 0 when
        either is blank (the embedder gives a blank text the zero vector, so it is not
        asked). Summed as the embedder's `similarities` sums its pairs (``einsum``), to
        the last bit."""
        if not a.strip() or not b.strip():
            return 0.0
        return float(np.einsum("i,i->", self.reply(embed_ask(a)), self.reply(embed_ask(b))))

    def docs(self, texts: Iterable[str]) -> Parses:
        """The spaCy parses of the parse asks of ``texts``, by text (`Parses`: a doc's
        named entities are recognised when it is first read, since the executor's
        parse leaves them out; `assay.text.parses.evidence_doc` reads a context passage
        without them). All of them share one ``passage_evidence``, which lives as long as
        the answers: a passage's evidence is built once per chunk.

        Raises:
            as `reply`: the error a parse ask failed with (e.g. spaCy or its pipeline is
            not installed); KeyError for a text whose parse ask was never planned.
        """
        docs = {text: self.reply(parse_ask(text)) for text in dict.fromkeys(texts)}
        return Parses(docs, self._entity_recogniser(docs.values()), self._passage_evidence)

    def _entity_recogniser(self, docs: Iterable[Any]) -> Callable[[list[Any]], None] | None:
        """The run's spaCy ``ner`` over a list of docs (one ``pipe`` pass, in place) when
        a doc of ``docs`` was parsed without it, each pass counted as model work
        (``entities``, `assay.engine.work`); None when all have their entities (or no
        resources parsed them)."""
        res = self.resources
        if res is None or all(d.has_annotation("ENT_IOB") for d in docs):
            return None
        if "ner" not in res.nlp.pipe_names:
            return None
        ner = res.nlp.get_pipe("ner")
        batch_size = res.config.batch_size

        def recognise(batch: list[Any]) -> None:
            started = time.perf_counter()
            for _ in ner.pipe(batch, batch_size=batch_size):
                pass  # sets each doc's entities in place
            res.model_work.add("entities", len(batch), time.perf_counter() - started)

        return recognise

    def entailments(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
        """The answered probability rows of the entail asks of ``pairs`` (premise,
        hypothesis), by pair.

        Raises:
            as `reply`: the error an entail ask failed with (e.g. the model could not
            load); KeyError for a pair whose entail ask was never planned.
        """
        return {pair: self.reply(entail_ask(*pair)) for pair in dict.fromkeys(pairs)}

    def computed_once(
        self, name: str, keys: Sequence[K], compute: Callable[[list[K]], Sequence[V]]
    ) -> list[V]:
        """The value of each of ``keys`` under ``name``, for a value that several metrics
        reduce from the same answers (e.g. the local reference agreement of a sample,
        read by factual accuracy and answer classification): ``compute`` gets the
        distinct keys not computed yet (in order) and returns their values; the others
        are read from the memo, which lives as long as the answers (one chunk)."""
        memo = self._memo.setdefault(name, {})
        todo = [k for k in dict.fromkeys(keys) if k not in memo]
        if todo:
            memo.update(zip(todo, compute(todo), strict=True))
        return [memo[k] for k in keys]
