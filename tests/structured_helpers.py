"""Shared by the JSON specification's tests (tests/test_structured*.py): ``FixedScorer``,
the field scorer that returns the specification's LLM scores (fuzzy 0.92, semantic 0.88)
and records its calls, and `saved_config`, a strategy config's round trip through a file."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assay.structured import StrategyConfig


def saved_config(config: StrategyConfig, path: Path) -> Any:
    """``config`` saved to ``path``: asserts it loads back equal, returns the file's JSON."""
    config.save(path)
    assert StrategyConfig.load(path) == config
    return json.loads(path.read_text())


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
