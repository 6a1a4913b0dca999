"""Asks: what a metric needs from a model or the judge, as data; answers, by ask key."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from assay.judge.client import JudgeReply
from assay.judge.prompts import Prompt

__all__ = ["Answers", "Ask", "embed_ask", "judge_ask"]


@dataclass(frozen=True)
class Ask:
    """One thing a metric needs answered for one sample.

    Attributes:
        kind: what executes it: ``judge`` (a judge prompt with block values; the answer
            is a `JudgeReply`) or ``embed`` (a text for the run's embedder; the answer is
            its normalised vector).
        key: identity of the ask: two asks with the same key are the same question
            (the prompt's signature and the block values; the text), asked once.
        prompt: the judge prompt (its output model is the answer's schema); None for
            other kinds.
        values: the prompt's block values; ``{"text": ...}`` for an embed ask.
    """

    kind: str
    key: str
    prompt: Prompt[Any] | None
    values: dict[str, Any] = field(hash=False, compare=False)


def judge_ask(prompt: Prompt[Any], **values: Any) -> Ask:
    """The judge ask of ``prompt`` with these block values."""
    payload = json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)
    return Ask("judge", f"judge:{prompt.signature}:{payload}", prompt, values)


def embed_ask(text: str) -> Ask:
    """The ask for the run embedder's vector of ``text``."""
    return Ask("embed", f"embed:{text}", None, {"text": text})


class Answers:
    """The answers of a chunk's asks, by key: a judge reply or a vector, or the error the
    ask failed with.

    Attributes:
        model: the judge model that answered (for result signatures).
        embedder: the name of the embedder that answered the embed asks (None: none yet).
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.embedder: str | None = None
        self._by_key: dict[str, Any] = {}

    def __contains__(self, ask: Ask) -> bool:
        return ask.key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    def put(self, ask: Ask, answer: JudgeReply[Any] | np.ndarray | BaseException) -> None:
        self._by_key[ask.key] = answer

    def get(self, ask: Ask) -> Any:
        """The answer to ``ask``; None when it was not asked yet or failed."""
        answer = self._by_key.get(ask.key)
        return None if answer is None or isinstance(answer, BaseException) else answer

    def reply(self, ask: Ask) -> Any:
        """The answer to ``ask``: a `JudgeReply` (judge) or a vector (embed).

        Raises:
            the error the ask failed with (e.g. `JudgeError`); KeyError when it was never
            asked (a plan that does not declare what its reduce reads).
        """
        answer = self._by_key[ask.key]
        if isinstance(answer, BaseException):
            raise answer
        return answer
