"""The test judge's replies to ``assay generate``'s prompts (``generate_<kind>@1``), as a
`judge_server.JudgeServer` script: it writes each question from the first sentence of
the contexts that it has not used yet (so the reference is entailed by the contexts),
deterministically; ``broken`` makes that share of first replies unusable prose (their
JSON-only retry, a request with more than two messages, gets good JSON).

    with JudgeServer(delay=0.2, script=GenerationScript(broken=0.3)) as server: ...
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from assay.text.tokenize import sentences

__all__ = ["GenerationScript"]

_KINDS = ("single", "multi", "reasoning", "conversational", "unanswerable")


def _subject(sentence: str) -> str:
    words = re.findall(r"[A-Za-z][\w-]*", sentence)
    return " ".join(words[:3])


def _question(sentence: str) -> str:
    """The sentence's first half with the rest asked for: ``The Team plan costs $12 per
    user each month.`` -> ``The Team plan costs $12 what?``."""
    words = sentence.rstrip(" .!?").split()
    return " ".join(words[: max(len(words) // 2, 2)]) + " what?"


class GenerationScript:
    """A script for `JudgeServer` (see the module doc); counts its broken replies."""

    def __init__(self, broken: float = 0.0) -> None:
        self.broken = broken
        self.broken_sent = 0

    def _is_broken(self, user: str) -> bool:
        digest = hashlib.sha256(user.encode("utf-8")).digest()
        return digest[0] / 256 < self.broken

    def __call__(self, task: str, blocks: dict[str, Any], body: dict[str, Any]) -> Any:
        if not task.startswith("generate_"):
            return None
        messages = body.get("messages") or []
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        if len(messages) <= 2 and self._is_broken(user):
            self.broken_sent += 1
            return "Here is a lovely question for you, I hope it helps!"
        contexts = blocks.get("contexts") or []
        if isinstance(contexts, str):
            contexts = [contexts]
        found = [s for c in contexts for s in sentences(c) if len(s.split()) >= 5]
        kind = task.split("@", 1)[0].removeprefix("generate_")
        # each kind starts at another sentence; a repeated request takes the next one
        used = int(blocks.get("variant", "1")) - 1 + _KINDS.index(kind)
        first = found[used % len(found)] if found else "The documents describe the product."
        second = found[(used + 1) % len(found)] if found else first
        reply: dict[str, Any] = {
            "question": _question(first),
            "answer": first,
            "follow_up": None,
            "follow_up_answer": None,
        }
        if kind == "multi":
            reply["answer"] = f"{first} {second}"
        if kind == "conversational":
            reply["follow_up"] = "And " + _question(second)
            reply["follow_up_answer"] = second
        if kind == "unanswerable":
            reply["question"] = f"What is the warranty period of {_subject(first)}?"
        return reply
