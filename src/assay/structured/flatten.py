"""Phase 0 of the JSON comparison: both documents flattened jointly into leaf fields, and
every field path classified into buckets (`classify`).

Nested documents are flattened *jointly* into leaf fields named by dotted paths
(`assay.structured.paths`):

- where both sides hold an object, the comparison descends into the union of their keys
  (``address.city``); where both hold a non-empty array whose elements are all objects, it
  descends by index (``items.0.sku``, ``items.1.sku``; element i is compared with element i,
  so order matters and surplus elements are missing or extra fields);
- where one side holds such a container and the other side lacks the key or holds null,
  the container's leaves are compared against missing/null (the output's
  ``"address": null`` makes every ``address.*`` field of the GT missing, not an extra key);
- everything else is one field compared whole: scalars, arrays of scalars (EXACT: JSON,
  order-sensitive), empty ``{}``/``[]`` (values, not nulls, per the specification), and a type
  mismatch (an object in the GT and a string in the output: one field, wrong under EXACT);
- a path named in the strategy config is one field even when it holds a container
  (``"address": "SEMANTIC"`` compares the whole address object as text);
- ``flatten=False`` keeps the specification's flat behaviour: top-level keys only, nested values
  compared whole.

Both documents are checked first (`assay.core.json_documents.check_document`): nesting deeper
than the depth limit (``max_json_depth``, default 500; `depth_limit` raises it for a block),
or object keys JSON cannot hold, is a ValueError naming the place; keys of
a Python ``dict`` are matched by their JSON name (``1`` and ``"1"`` are the same field).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.core.json_documents import check_document, key_name
from assay.structured.paths import ROOT, WILDCARD, join
from assay.structured.strategies import StrategyConfig
from assay.structured.values import is_null

__all__ = ["BUCKETS", "FlatPair", "KeyClassification", "classify", "flatten_pair"]

#: bucket names in the order they are reported (JSON specification's five, then ``skipped``)
BUCKETS = (
    "gt_non_null",
    "both_non_null",
    "aio_missing_or_null",
    "extra_keys",
    "gt_null_aio_has_value",
    "skipped",
)


_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class FlatPair:
    """The leaf fields of both documents (path -> value; a path absent from a side is
    missing there) and, for paths through arrays, the path with indices as ``*``."""

    expected: dict[str, Any]
    output: dict[str, Any]
    generic: dict[str, str]

    def generic_path(self, path: str) -> str:
        return self.generic.get(path, path)


def _container(value: Any) -> str | None:
    if isinstance(value, dict):
        return "object" if value else None
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "objects"
    return None


def _absent(value: Any) -> bool:
    return value is _MISSING or is_null(value)


def _child(value: Any, key: Any) -> Any:
    """The value under index ``key`` of a list, or how an absent/null parent propagates."""
    if isinstance(value, list):
        return value[key] if key < len(value) else _MISSING
    return value  # _MISSING stays missing, null stays null


def _by_name(value: Any) -> dict[str, Any]:
    """An object's entries keyed by JSON name (keys of a parsed document are already names)."""
    if not isinstance(value, dict):
        return {}
    if all(type(k) is str for k in value):
        return value
    return {key_name(k): v for k, v in value.items()}


def flatten_pair(
    expected: Any,
    output: Any,
    strategies: StrategyConfig | None = None,
    *,
    flatten: bool = True,
) -> FlatPair:
    """Flatten GT and output jointly into leaf fields (see the module docstring).

    Raises ValueError when a document nests too deeply or has keys JSON cannot hold.
    """
    check_document(expected, "expected JSON")
    check_document(output, "output JSON")
    config = strategies or StrategyConfig()
    gt: dict[str, Any] = {}
    out: dict[str, Any] = {}
    generic: dict[str, str] = {}

    def walk(path: str, gpath: str, g: Any, a: Any) -> None:
        if (not path or flatten) and (not path or config.lookup(path) is None):
            kind_g, kind_a = _container(g), _container(a)
            kind = None
            if kind_g and (kind_g == kind_a or _absent(a)):
                kind = kind_g
            elif kind_a and _absent(g):
                kind = kind_a
            if kind == "object":
                g_items, a_items = _by_name(g), _by_name(a)
                names = list(g_items)
                names.extend(k for k in a_items if k not in g_items)
                for name in names:
                    walk(
                        join(path, name),
                        join(gpath, name),
                        g_items.get(name, _MISSING) if isinstance(g, dict) else g,
                        a_items.get(name, _MISSING) if isinstance(a, dict) else a,
                    )
                return
            if kind == "objects":
                size = max(
                    len(g) if isinstance(g, list) else 0, len(a) if isinstance(a, list) else 0
                )
                for i in range(size):
                    walk(
                        join(path, i),
                        f"{gpath}.{WILDCARD}" if gpath else WILDCARD,
                        _child(g, i),
                        _child(a, i),
                    )
                return
        leaf = path or ROOT
        if g is not _MISSING:
            gt[leaf] = g
        if a is not _MISSING:
            out[leaf] = a
        if gpath != path:
            generic[leaf] = gpath

    walk("", "", expected, output)
    return FlatPair(gt, out, generic)


@dataclass(frozen=True, slots=True)
class KeyClassification:
    """Phase 0: every field path in exactly one of ``both_non_null``,
    ``aio_missing_or_null``, ``extra_keys``, ``gt_null_aio_has_value`` and ``skipped``;
    ``gt_non_null`` is ``both_non_null`` + ``aio_missing_or_null`` (JSON specification's table).

    ``skipped`` holds the paths that are null in the GT and missing or null in the output
    (no effect on any score). ``all_keys`` is the union, GT order first.
    """

    gt_non_null: tuple[str, ...]
    both_non_null: tuple[str, ...]
    aio_missing_or_null: tuple[str, ...]
    extra_keys: tuple[str, ...]
    gt_null_aio_has_value: tuple[str, ...]
    skipped: tuple[str, ...]
    all_keys: tuple[str, ...]

    @property
    def total_distinct(self) -> int:
        return len(self.all_keys)

    @property
    def hallucination_count(self) -> int:
        return len(self.extra_keys) + len(self.gt_null_aio_has_value)

    def buckets(self) -> dict[str, list[str]]:
        return {name: list(getattr(self, name)) for name in BUCKETS}

    def counts(self) -> dict[str, int]:
        counts = {name: len(getattr(self, name)) for name in BUCKETS}
        counts["total_distinct"] = self.total_distinct
        counts["hallucination_count"] = self.hallucination_count
        return counts


def classify(expected: Mapping[str, Any], output: Mapping[str, Any]) -> KeyClassification:
    """Phase 0 over flattened fields (path -> value)."""
    gt_non_null: list[str] = []
    both: list[str] = []
    missing: list[str] = []
    extra: list[str] = []
    gt_null_has: list[str] = []
    skipped: list[str] = []
    for key, g in expected.items():
        a = output.get(key, _MISSING)
        present = a is not _MISSING and not is_null(a)
        if is_null(g):
            (gt_null_has if present else skipped).append(key)
        else:
            gt_non_null.append(key)
            (both if present else missing).append(key)
    extra = [key for key in output if key not in expected]
    return KeyClassification(
        gt_non_null=tuple(gt_non_null),
        both_non_null=tuple(both),
        aio_missing_or_null=tuple(missing),
        extra_keys=tuple(extra),
        gt_null_aio_has_value=tuple(gt_null_has),
        skipped=tuple(skipped),
        all_keys=(*expected, *extra),
    )
