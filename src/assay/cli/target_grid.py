"""``assay run DATA --targets FILE``: the targets to compare, from a YAML file.

The file lists targets, each with its own model and request template, and may add a grid:
one target asked with every model and every request template (prompt × model)::

    targets:                       # each: target (required), name, model, request
      - name: v1
        target: https://bot.internal/v1/ask
        request: '{"question": "{query}"}'
    grid:                          # every model with every request, named MODEL.REQUEST
      target: https://bot.internal/v2/ask
      model: {small: my-small, large: my-large}
      request:
        terse: '{"question": "{query}", "model": "{model}", "style": "terse"}'
        detailed: '{"question": "{query}", "model": "{model}", "style": "detailed"}'

A grid's ``model`` and ``request`` map a name to a value (either may be left out); its
targets are named ``MODEL.REQUEST`` (``MODEL`` or ``REQUEST`` when only one is given).
An ``openai:`` target asks its model and takes no request; an http target's model is
written into ``{model}`` of its request, JSON-escaped, before the sample's fields (a
sample field named ``model`` is not seen there). The first target is the baseline. At
most `MAX_TARGETS` targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

#: the most targets a file may give (each answers every sample)
MAX_TARGETS = 32
_ENTRY_KEYS = {"target", "name", "model", "request"}
_FILE_KEYS = {"targets", "grid"}


@dataclass(frozen=True)
class TargetEntry:
    """One target of the file: its spec, name (None: derived), model and request."""

    target: str
    name: str | None = None
    model: str | None = None
    request: str | None = None


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _keys(mapping: Any, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(mapping, dict):
        raise ValueError(f"{where} must be a mapping, got {type(mapping).__name__}")
    unknown = sorted(str(k) for k in set(mapping) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key {', '.join(unknown)} (known: {sorted(allowed)})")
    return mapping


def _axis(grid: dict[str, Any], key: str) -> list[tuple[str, str]] | None:
    """A grid axis: (name, value) pairs, or None when the grid leaves it out."""
    if key not in grid:
        return None
    axis = grid[key]
    if not isinstance(axis, dict) or not axis:
        raise ValueError(f"grid.{key} must be a non-empty mapping of a name to a value")
    return [
        (_text(n, f"a name in grid.{key}"), _text(v, f"grid.{key}.{n}")) for n, v in axis.items()
    ]


def _with_model(entry: TargetEntry) -> TargetEntry:
    """An http target's entry with its model written into ``{model}`` of its request
    (JSON-escaped); ValueError for a model or a request the target would not use."""
    import json

    where = f"target {entry.name or entry.target}"
    if entry.target.startswith("openai:"):
        if entry.request is not None:
            raise ValueError(
                f"{where}: an openai: target sends the sample's conversation; it takes no "
                "request template"
            )
        return entry
    if entry.model is None:
        return entry
    if entry.request is None or "{model}" not in entry.request:
        raise ValueError(
            f"{where}: model {entry.model!r} goes to an openai: target, or into {{model}} "
            "of an http target's request"
        )
    request = entry.request.replace("{model}", json.dumps(entry.model)[1:-1])
    return TargetEntry(entry.target, entry.name, None, request)


def parse_targets(document: Any) -> list[TargetEntry]:
    """The targets of a parsed targets file, in order (listed, then the grid's); raises
    ValueError naming what is wrong."""
    top = _keys(document, _FILE_KEYS, "the targets file")
    entries: list[TargetEntry] = []
    listed = top.get("targets", [])
    if not isinstance(listed, list):
        raise ValueError(f"targets must be a list, got {type(listed).__name__}")
    for i, item in enumerate(listed, 1):
        entry = _keys(item, _ENTRY_KEYS, f"targets[{i}]")
        if "target" not in entry:
            raise ValueError(f"targets[{i}] has no target")
        entries.append(
            TargetEntry(
                _text(entry["target"], f"targets[{i}].target"),
                *(
                    None if entry.get(k) is None else _text(entry[k], f"targets[{i}].{k}")
                    for k in ("name", "model", "request")
                ),
            )
        )
    if "grid" in top:
        grid = _keys(top["grid"], {"target", "model", "request"}, "grid")
        spec = _text(grid.get("target"), "grid.target")
        models, requests = _axis(grid, "model"), _axis(grid, "request")
        if models is None and requests is None:
            raise ValueError("grid needs a model or a request mapping to vary")
        for (model_name, model), (request_name, request) in product(
            models or [(None, None)], requests or [(None, None)]
        ):
            name = ".".join(n for n in (model_name, request_name) if n)
            entries.append(TargetEntry(spec, name, model, request))
    if not entries:
        raise ValueError("the targets file gives no target (targets: or grid:)")
    entries = [_with_model(entry) for entry in entries]
    if len(entries) > MAX_TARGETS:
        raise ValueError(f"the targets file gives {len(entries)} targets; at most {MAX_TARGETS}")
    return entries


def read_targets(path: Path) -> list[TargetEntry]:
    """The targets of the YAML file at ``path``; ValueError naming the file and the
    problem (unreadable, not YAML, a wrong key or value)."""
    import yaml

    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--targets {path}: cannot read it: {exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--targets {path}: not YAML: {exc}") from None
    try:
        return parse_targets(document)
    except ValueError as exc:
        raise ValueError(f"--targets {path}: {exc}") from None
