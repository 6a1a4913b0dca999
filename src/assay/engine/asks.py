"""Asks: what a metric needs from a model or the judge, as data; answers, by ask key."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from assay.judge.client import JudgeReply
from assay.judge.prompts import Prompt

__all__ = ["Answers", "Ask", "judge_ask"]


@dataclass(frozen=True)
class Ask:
    """One thing a metric needs answered for one sample.

    Attributes:
        kind: what executes it: ``judge`` (a judge prompt with block values).
        key: identity of the ask: two asks with the same key are the same question
            (the prompt's signature and the block values), asked once.
        prompt: the judge prompt (its output model is the answer's schema).
        values: the prompt's block values.
    """

    kind: str
    key: str
    prompt: Prompt[Any]
    values: dict[str, Any] = field(hash=False, compare=False)


def judge_ask(prompt: Prompt[Any], **values: Any) -> Ask:
    """The judge ask of ``prompt`` with these block values."""
    payload = json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)
    return Ask("judge", f"judge:{prompt.signature}:{payload}", prompt, values)


class Answers:
    """The answers of a chunk's asks, by key: a judge reply, or the error it failed with.

    Attributes:
        model: the judge model that answered (for result signatures).
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self._by_key: dict[str, JudgeReply[Any] | BaseException] = {}

    def __contains__(self, ask: Ask) -> bool:
        return ask.key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    def put(self, ask: Ask, answer: JudgeReply[Any] | BaseException) -> None:
        self._by_key[ask.key] = answer

    def get(self, ask: Ask) -> JudgeReply[Any] | None:
        """The reply to ``ask``; None when it was not asked yet or failed."""
        answer = self._by_key.get(ask.key)
        return None if answer is None or isinstance(answer, BaseException) else answer

    def reply(self, ask: Ask) -> JudgeReply[Any]:
        """The reply to ``ask``.

        Raises:
            the error the ask failed with (e.g. `JudgeError`); KeyError when it was never
            asked (a plan that does not declare what its reduce reads).
        """
        answer = self._by_key[ask.key]
        if isinstance(answer, BaseException):
            raise answer
        return answer
