"""Questions written by the judge: one call per question, the checks run locally.

`JudgeSource` asks the configured judge (``judge_model``, ``judge_base_url``, as for the
judged metrics) to write each question and its reference answer from one or two chunks,
through the engine (`assay.engine.answer`: the judge client's concurrency, retries,
rate limit, persistent cache and memo). The checks (`assay.generation.filters`) use the
local models, so they cost no call.

Bounds: a run asks at most ceil(`ASKS_PER_QUESTION` × N) + 2 questions of the judge (over
both rounds of `assay.generation.generator`; when the rounds want more, each kind gets its
share of what is left); each ask is one request, plus one "JSON only" request when the
reply cannot be parsed (the client's rule), so at most 3 N + 4 requests, plus the
transport retries of a failed request (429, 5xx, time-outs: ``judge_max_retries``). An
ask that still fails is counted in ``failures`` by reason and makes no row.

The prompts put the chunks, the persona and earlier questions only inside escaped data
blocks (`assay.judge.prompts.Prompt`): text from the documents is data, never
instructions. Chunks are used in a seeded order, each once before any is used again (a
reused chunk's ask names its ``variant``); a multi-chunk question pairs a chunk with its
nearest other chunk by the run embedder's cosine.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from assay.engine import answer, embed_ask, judge_ask
from assay.engine.resources import Resources
from assay.generation.documents import Chunk
from assay.generation.filters import Candidate
from assay.generation.plan import KINDS, quotas
from assay.judge.prompts import Prompt, Section
from assay.text.tokens import count_tokens

__all__ = [
    "ASKS_PER_QUESTION",
    "PROMPTS",
    "UNANSWERED",
    "JudgeSource",
    "WrittenQuestion",
]

#: judge asks per requested question, at most (both rounds together)
ASKS_PER_QUESTION = 1.5
#: candidates asked per missing question in the first round (the generator's OVERSHOOT)
FIRST_ROUND_OVERSHOOT = 1.3
#: the reference answer of an unanswerable question
UNANSWERED = "The documents do not say."
#: asks sent to the engine at once (the progress bar moves between them)
_SLICE = 64
#: tokens a message costs beyond its text (role and separators), for the dry run
_MESSAGE_OVERHEAD = 4


class WrittenQuestion(BaseModel):
    """The judge's reply: a question, its reference answer, and for a conversation the
    follow-up question and its answer."""

    question: str = Field(description="the question, as the persona would ask it")
    answer: str = Field(description="the reference answer, in full sentences from the text")
    follow_up: str | None = Field(description="a conversation's follow-up question, else null")
    follow_up_answer: str | None = Field(description="the follow-up's answer, else null")


_COMMON = (
    "Write ONE test question for a question-answering system over a team's documents, as "
    "the person in <persona> would ask it, and its reference answer.\n"
    "RULES:\n"
    "- The answer must be fully supported by the text in <contexts>: copy or closely "
    "paraphrase its sentences, add nothing.\n"
    "- The question must not contain its answer, and must make sense to someone who has "
    "not seen the text (name the subject; no 'this document', 'the text', 'above').\n"
    "- Write the question in the language of the contexts."
)
_TASKS = {
    "single": "KIND: a single fact stated in the context.",
    "multi": (
        "KIND: a question that needs BOTH contexts: combine a fact from context 1 with a "
        "fact from context 2; the answer states both."
    ),
    "reasoning": (
        "KIND: a comparison or reasoning question: its answer follows from two or more "
        "statements of the contexts taken together (compare, order, explain why, or "
        "work out a consequence); the answer shows the steps in one or two sentences."
    ),
    "conversational": (
        "KIND: a conversation of two user turns: 'question' opens it, 'follow_up' is a "
        "natural follow-up that refers back to it (it may use a pronoun for the subject "
        "of the first question); give both answers."
    ),
    "unanswerable": (
        "KIND: a question close to the contexts' topic, that a user might plausibly ask, "
        "but that the contexts do NOT answer (ask for a detail they never state). Set "
        "'answer' to what the contexts say nearest to it, in one sentence."
    ),
}
_EXAMPLES = {
    "conversational": (
        '{"question": "How do I reset my password?", "answer": "Open Settings > Account '
        'and choose Reset password.", "follow_up": "And how long is the reset link valid?", '
        '"follow_up_answer": "The link is valid for 24 hours."}'
    ),
}
_EXAMPLE = (
    '{"question": "How long is a password reset link valid?", "answer": "A reset link is '
    'valid for 24 hours.", "follow_up": null, "follow_up_answer": null}'
)


def _prompt(kind: str) -> Prompt[WrittenQuestion]:
    return Prompt(
        name=f"generate_{kind}",
        version="1",
        sections=(
            Section(_COMMON),
            Section(_TASKS[kind]),
            Section(
                "These contexts were given before (<variant> says how many times): ask "
                "about another part of them than the questions in <asked>.",
                requires=("variant",),
            ),
        ),
        blocks=("persona", "contexts", "asked", "variant"),
        output=WrittenQuestion,
        example=_EXAMPLES.get(kind, _EXAMPLE),
        check=_check_conversation if kind == "conversational" else _check_written,
    )


def _check_written(reply: WrittenQuestion, values: Mapping[str, Any]) -> str | None:
    if not reply.question.strip() or not reply.answer.strip():
        return "'question' and 'answer' must not be empty"
    return None


def _check_conversation(reply: WrittenQuestion, values: Mapping[str, Any]) -> str | None:
    problem = _check_written(reply, values)
    if problem is None and not (
        (reply.follow_up or "").strip() and (reply.follow_up_answer or "").strip()
    ):
        problem = "a conversation needs 'follow_up' and 'follow_up_answer'"
    return problem


#: the judge prompt of each kind
PROMPTS: dict[str, Prompt[WrittenQuestion]] = {kind: _prompt(kind) for kind in KINDS}


#: one planned ask: kind, chunks, persona, block values
_Plan = tuple[str, list[Chunk], str, dict[str, Any]]


class JudgeSource:
    """Candidates written by the judge (see the module doc)."""

    def __init__(
        self,
        chunks: Sequence[Chunk],
        personas: Sequence[str],
        seed: int,
        res: Resources,
        n_target: int,
        progress: Any = None,
    ) -> None:
        self.method = f"judge:{res.config.judge_model}"
        #: the kinds it cannot make: none
        self.cannot: dict[str, str] = {}
        self._chunks = list(chunks)
        self._personas = list(personas)
        self._rng = random.Random(seed)
        self._res = res
        self._progress = progress
        self.ask_budget = math.ceil(ASKS_PER_QUESTION * n_target) + 2
        self.asked = 0
        self.failures: Counter[str] = Counter()
        self._order = list(range(len(self._chunks)))
        self._rng.shuffle(self._order)
        self._cursor = 0
        self._uses: Counter[str] = Counter()
        self._asked_of: dict[tuple[str, ...], list[str]] = {}
        self._neighbours: list[int] | None = None
        self._usage_before = self._usage()

    # ---- planning -----------------------------------------------------------------------
    def _next_chunk(self) -> int:
        index = self._order[self._cursor % len(self._order)]
        self._cursor += 1
        return index

    def _neighbour(self, index: int) -> int:
        if self._neighbours is None:
            texts = [c.text for c in self._chunks]
            vectors = answer([embed_ask(t) for t in dict.fromkeys(texts)], self._res)
            found = vectors.vectors(texts)
            matrix = np.stack([found[t] for t in texts])
            similar = matrix @ matrix.T
            np.fill_diagonal(similar, -np.inf)
            self._neighbours = [int(i) for i in similar.argmax(axis=1)]
        return self._neighbours[index]

    def _plan(self, kind: str) -> tuple[list[Chunk], str]:
        first = self._next_chunk()
        picked = [first]
        if kind == "multi" and len(self._chunks) > 1:
            picked.append(self._neighbour(first))
        return [self._chunks[i] for i in picked], self._rng.choice(self._personas)

    def _values(self, kind: str, chunks: list[Chunk], persona: str) -> dict[str, Any]:
        ids = tuple(c.id for c in chunks)
        key = "|".join((kind, *ids))
        self._uses[key] += 1
        values: dict[str, Any] = {"persona": persona, "contexts": [c.text for c in chunks]}
        if self._uses[key] > 1:
            values["variant"] = str(self._uses[key])
            values["asked"] = list(self._asked_of.get(ids, []))
        return values

    def _plans(
        self, wants: Mapping[str, int]
    ) -> list[tuple[str, list[Chunk], str, dict[str, Any]]]:
        left = self.ask_budget - self.asked
        total = sum(max(v, 0) for v in wants.values())
        if total > left:  # the budget decides: each kind gets its share of what is left
            share = {k: v / total for k, v in wants.items()}
            wants = {k: c for k, c in quotas(max(left, 0), share).items() if k in wants}
        plans = []
        for kind in KINDS:
            for _ in range(max(wants.get(kind, 0), 0)):
                chunks, persona = self._plan(kind)
                plans.append((kind, chunks, persona, self._values(kind, chunks, persona)))
        return plans

    # ---- asking -------------------------------------------------------------------------
    def exhausted(self, kind: str) -> bool:
        return self.asked >= self.ask_budget

    def why_dry(self, kinds: list[str]) -> str:
        return (
            f"the judge's ask budget is spent ({self.ask_budget} asks: {ASKS_PER_QUESTION} "
            f"per question + 2; {sum(self.failures.values())} failed)"
        )

    def make(self, wants: Mapping[str, int]) -> dict[str, list[Candidate]]:
        plans = self._plans(wants)
        asks = [judge_ask(PROMPTS[kind], **values) for kind, _, _, values in plans]
        self.asked += len(asks)
        out: dict[str, list[Candidate]] = {k: [] for k in KINDS}
        for start in range(0, len(asks), _SLICE):
            part = asks[start : start + _SLICE]
            answers = answer(part, self._res)
            for ask, (kind, chunks, persona, _) in zip(
                part, plans[start : start + _SLICE], strict=True
            ):
                try:
                    reply = answers.reply(ask)
                except Exception as exc:  # the ask's failure: counted, no row
                    self.failures[type(exc).__name__] += 1
                    continue
                candidate = self._candidate(kind, chunks, persona, reply.output)
                self._asked_of.setdefault(tuple(c.id for c in chunks), []).append(candidate.query)
                out[kind].append(candidate)
            if self._progress:
                self._progress("asking the judge", min(start + _SLICE, len(asks)), len(asks))
        return out

    def _candidate(
        self, kind: str, chunks: list[Chunk], persona: str, written: WrittenQuestion
    ) -> Candidate:
        query, expected = written.question.strip(), written.answer.strip()
        turns = None
        extra: dict[str, Any] = {}
        if kind == "conversational":
            follow = (written.follow_up or "").strip()
            turns = [
                {"role": "user", "content": query},
                {"role": "assistant", "content": None},
                {"role": "user", "content": follow},
            ]
            extra["turn_expected"] = [expected, (written.follow_up_answer or "").strip()]
            query, expected = follow, extra["turn_expected"][1]
        if kind == "unanswerable":
            extra["nearest_statement"] = expected
            expected = UNANSWERED
        return Candidate(kind, query, expected, chunks, persona, self.method, None, turns, extra)

    # ---- reporting ----------------------------------------------------------------------
    def _usage(self) -> dict[str, Any]:
        judge = self._res.judge
        return judge.usage.to_dict() if judge is not None else {}

    def report(self) -> dict[str, Any]:
        """The judge's part of the summary: asks (and their bound), requests, JSON
        retries, transport retries, failures by reason, cache hits, tokens and cost of
        this run."""
        now, before = self._usage(), self._usage_before
        keys = (
            "calls",
            "retries",
            "reparse_calls",
            "cache_hits",
            "prompt_tokens",
            "completion_tokens",
        )
        out: dict[str, Any] = {k: now.get(k, 0) - before.get(k, 0) for k in keys}
        cost, cost_before = now.get("cost"), before.get("cost")
        out["cost"] = None if cost is None else round(cost - (cost_before or 0.0), 6)
        out.update(asks=self.asked, ask_budget=self.ask_budget, failures=dict(self.failures))
        return out

    def dry_run(self, need: Mapping[str, int]) -> dict[str, Any]:
        """The first round's plan without a call: asks per kind, the calls it may take,
        its prompt tokens (counted: cl100k_base), its completion tokens (estimated from
        the reply's form) and their cost when ``judge_price_*`` are configured."""
        wants = {k: math.ceil(v * FIRST_ROUND_OVERSHOOT) + 2 for k, v in need.items() if v > 0}
        plans = self._plans(wants)
        prompt_tokens = completion_tokens = 0
        for kind, _, _, values in plans:
            for message in PROMPTS[kind].render(**values):
                prompt_tokens += count_tokens(message["content"]).count + _MESSAGE_OVERHEAD
            completion_tokens += 2 * count_tokens(PROMPTS[kind].example).count
        config = self._res.config
        cost = None
        if config.judge_price_prompt is not None and config.judge_price_completion is not None:
            cost = round(
                (prompt_tokens * config.judge_price_prompt
                 + completion_tokens * config.judge_price_completion) / 1e6,
                6,
            )  # fmt: skip
        self.asked, self._cursor, self._uses = 0, 0, Counter()  # nothing was asked
        return {
            "judge_model": config.judge_model,
            "asks_first_round": len(plans),
            "asks_by_kind": dict(Counter(kind for kind, *_ in plans)),
            "ask_budget": self.ask_budget,
            "calls_at_most": 2 * self.ask_budget,
            "calls_note": "each ask is one request, plus one JSON-only retry when its reply "
            "cannot be parsed, plus transport retries (judge_max_retries) of failed requests",
            "prompt_tokens": prompt_tokens,
            "completion_tokens_estimate": completion_tokens,
            "cost": cost,
            "cost_note": None
            if cost is not None
            else "no price configured (judge_price_prompt, judge_price_completion: per 1M tokens)",
        }
