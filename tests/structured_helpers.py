"""Shared by the JSON specification's tests (tests/test_structured*.py): ``FixedScorer``,
the field scorer that returns the specification's LLM scores (fuzzy 0.92, semantic 0.88)
and records its calls."""

from __future__ import annotations

from collections.abc import Sequence


class FixedScorer:
    """Returns the specification's LLM scores: fuzzy 0.92, semantic 0.88; records the calls."""

    method = "llm"
    name = "specification-llm"

    def __init__(self, fuzzy: float = 0.92, semantic: float = 0.88) -> None:
        self._fuzzy, self._semantic = fuzzy, semantic
        self.calls: list[tuple[str, list[tuple[str, str]]]] = []

    def fuzzy(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        self.calls.append(("fuzzy", list(pairs)))
        return [self._fuzzy] * len(pairs)

    def semantic(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        self.calls.append(("semantic", list(pairs)))
        return [self._semantic] * len(pairs)
