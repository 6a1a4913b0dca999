"""Matching strategies and the field-strategy config file (JSON specification).

A config is a JSON object mapping a field path to a strategy::

    {"customer_name": "FUZZY", "address.city": "EXACT", "items.*.description": "SEMANTIC",
     "internal_notes": "IGNORE"}

Valid strategies: ``EXACT``, ``FUZZY``, ``SEMANTIC``, ``IGNORE``, ``NUMERIC``
(case-insensitive on input, written upper-case; NUMERIC is listed last so messages that
list the valid values keep their older prefix). Fields the config does not name get the
strategy of their ground-truth value's type (`auto_strategy`). A config entry that names
an object or an array of objects makes that whole value one field compared with the named
strategy (no descent into it). An object ``{"field_strategies": {...}}`` is accepted too.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from assay.structured.paths import PathPattern

__all__ = [
    "AUTO_STRATEGY",
    "Strategy",
    "StrategyConfig",
    "StrategyConfigError",
    "auto_strategy",
]


class Strategy(StrEnum):
    """How one field's ground-truth and output values are compared."""

    EXACT = "EXACT"
    """Case-insensitive equality of the canonical form (JSON with sorted keys for objects and
    arrays); score 1 or 0."""
    FUZZY = "FUZZY"
    """String similarity (local: rapidfuzz token-set ratio; judge: LLM) >= fuzzy threshold."""
    SEMANTIC = "SEMANTIC"
    """Meaning similarity (local: embedding cosine; judge: LLM) >= semantic threshold."""
    IGNORE = "IGNORE"
    """Left out of accuracy (still counted for completeness and hallucination)."""
    NUMERIC = "NUMERIC"
    """Numbers within a tolerance: ``|a − b| <= max(abs_tol, rel_tol·|b|)``, b the ground
    truth; score 1 or 0; a side that is not a number scores 0
    (`assay.structured.numeric`). Never auto-detected: numbers stay EXACT unless named."""


#: strategy auto-detected for each value type (JSON specification)
AUTO_STRATEGY: dict[str, Strategy] = {
    "numeric": Strategy.EXACT,
    "boolean": Strategy.EXACT,
    "date": Strategy.EXACT,
    "email": Strategy.EXACT,
    "array": Strategy.EXACT,
    "object": Strategy.EXACT,
    "text": Strategy.SEMANTIC,
}

VALID = ", ".join(s.value for s in Strategy)
_MEMO_LIMIT = 100_000


def auto_strategy(value_type: str) -> Strategy:
    """The specification's auto-detection: text -> SEMANTIC, every other value type -> EXACT."""
    return AUTO_STRATEGY.get(value_type, Strategy.SEMANTIC)


class StrategyConfigError(ValueError):
    """A field-strategy config is unusable; the message names each bad field and why."""


def _strategy(field: str, value: Any) -> Strategy:
    if isinstance(value, Strategy):
        return value
    if not isinstance(value, str):
        raise StrategyConfigError(
            f"field {field!r}: strategy must be a string, got {type(value).__name__} "
            f"{value!r}; valid values: {VALID}"
        )
    try:
        return Strategy(value.strip().upper())
    except ValueError:
        close = difflib.get_close_matches(value.strip().upper(), [s.value for s in Strategy], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise StrategyConfigError(
            f"field {field!r}: unknown strategy {value!r}{hint}; valid values: {VALID}"
        ) from None


class StrategyConfig(Mapping[str, Strategy]):
    """Field path -> `Strategy`, validated; looks up the strategy a field path gets.

    Exact paths win over ``*`` patterns; among patterns the one with the fewest ``*``
    wins, then the one listed first.
    """

    def __init__(self, mapping: Mapping[str, Strategy | str] | None = None) -> None:
        errors: list[str] = []
        self._items: dict[str, Strategy] = {}
        self._exact: dict[str, Strategy] = {}
        self._patterns: list[tuple[PathPattern, Strategy]] = []
        self._memo: dict[str, Strategy | None] = {}  # pattern lookups, per path
        for field, value in (mapping or {}).items():
            try:
                pattern = PathPattern(field)
            except ValueError as exc:
                errors.append(f"field {field!r}: {exc}")
                continue
            try:
                strategy = _strategy(field, value)
            except StrategyConfigError as exc:
                errors.append(str(exc))
                continue
            self._items[pattern.text] = strategy
            if pattern.wildcards:
                self._patterns.append((pattern, strategy))
            else:
                self._exact[pattern.text] = strategy
        if errors:
            raise StrategyConfigError("invalid field-strategy config: " + "; ".join(errors))
        self._patterns.sort(key=lambda p: p[0].wildcards)

    # ---- Mapping -------------------------------------------------------------------
    def __getitem__(self, key: str) -> Strategy:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"StrategyConfig({self.to_dict()!r})"

    # ---- lookup --------------------------------------------------------------------
    def lookup(self, path: str) -> Strategy | None:
        """The configured strategy of a field path, or None (auto-detect)."""
        found = self._exact.get(path)
        if found is not None or not self._patterns:
            return found
        if path in self._memo:
            return self._memo[path]
        for pattern, strategy in self._patterns:
            if pattern.matches(path):
                found = strategy
                break
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[path] = found
        return found

    # ---- import / export -------------------------------------------------------------
    def to_dict(self) -> dict[str, str]:
        return {field: strategy.value for field, strategy in self._items.items()}

    @classmethod
    def from_data(cls, data: Any, source: str | None = None) -> StrategyConfig:
        """Validate parsed JSON (an object of field -> strategy)."""
        where = f"{source}: " if source else ""
        if (
            isinstance(data, dict)
            and set(data) == {"field_strategies"}
            and isinstance(data["field_strategies"], dict)
        ):
            data = data["field_strategies"]
        if not isinstance(data, dict):
            raise StrategyConfigError(
                f"{where}a field-strategy config must be a JSON object mapping field -> "
                f"strategy ({VALID}), got {type(data).__name__}"
            )
        try:
            return cls(data)
        except StrategyConfigError as exc:
            raise StrategyConfigError(f"{where}{exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> StrategyConfig:
        """Read and validate a config file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise StrategyConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StrategyConfigError(
                f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from None
        return cls.from_data(data, source=str(path))

    def save(self, path: str | Path) -> None:
        """Write the config as a JSON object (the format `load` reads)."""
        # imported here: assay.core.jsonout imports assay.structured.values, whose package
        # imports this module, so a top-level import is a cycle when jsonout comes first
        from assay.core.jsonout import dumps

        Path(path).write_text(dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def coerce(
        cls, value: StrategyConfig | Mapping[str, Any] | str | Path | None
    ) -> StrategyConfig:
        """A config from a config, a mapping, a file path, or None (empty)."""
        if isinstance(value, StrategyConfig):
            return value
        if value is None:
            return cls()
        if isinstance(value, str | Path):
            return cls.load(value)
        return cls.from_data(dict(value))
