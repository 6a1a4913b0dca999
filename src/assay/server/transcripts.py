"""Read models of one stored sample for the run-detail page and ``/api/runs/{id}/samples``:
a conversation as its turns with their per-turn scores, an agent run as its steps with
the tool-call matches, and evidence as readable nested lists.

Per-turn scores follow the conversation metrics' evidence contract: a metric's
``details["turns"]`` is a list of ``{"turn": i, "score": 0..1 or None, "reason": text,
...}`` where ``i`` indexes the sample's turns (0-based); ``details["intentions"]`` (the
conversation completeness) a list of ``{"turn": i, "intention", "satisfied", "reason"}``
placed at the user turn ``i``. Any metric that writes these is shown; an entry whose turn
was not stored (past the stored turns) is listed apart, never dropped.

Tool-call matches come from the evidence of ``tool_call_accuracy``,
``tool_call_accuracy_unordered`` and ``tool_call_f1`` (`assay.metrics.tool_calls`):
``matches`` pair a reference call index with a made call index (the made calls are the
trace's ``kind == "tool"`` steps, in order), each with its argument agreement and
per-argument evidence; reference and made calls in no pair are unmatched.

Everything here is data: the templates print it through autoescaping.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from assay.core import jsonout
from assay.store.transcript import OMITTED_KEY

__all__ = [
    "MAX_EVIDENCE_DEPTH",
    "MAX_EVIDENCE_ITEMS",
    "agent_view",
    "conversation_view",
    "page_sample",
    "readable",
    "sample_view",
]

#: nesting shown as lists; deeper values are shown as one line of JSON
MAX_EVIDENCE_DEPTH = 5
#: items shown per list or object; the rest are counted
MAX_EVIDENCE_ITEMS = 200
#: the per-turn entry keys shown in their own places (the rest is the entry's evidence)
_TURN_KEYS = ("turn", "score", "reason")


def _text(value: Any) -> str:
    """A scalar as a person reads it: text as is, 4 significant digits, yes/no, none."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def readable(value: Any, depth: int = 0) -> list[dict[str, Any]]:
    """``value`` (JSON) as nested list nodes ``{"key", "text", "children"}`` for the
    ``evidence`` macro: an object gives one node per key, a list one per item, a scalar
    one node with its text. Past `MAX_EVIDENCE_DEPTH` a value is one line of JSON; past
    `MAX_EVIDENCE_ITEMS` items the rest are counted in a last node."""
    if isinstance(value, dict):
        pairs: list[tuple[str | None, Any]] = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        pairs = [(None, v) for v in value]
    else:
        return [{"key": None, "text": _text(value), "children": None}]
    nodes = []
    for key, item in pairs[:MAX_EVIDENCE_ITEMS]:
        if not isinstance(item, dict | list | tuple) or not item:
            text = _text(item) if not isinstance(item, dict | list | tuple) else "(empty)"
            nodes.append({"key": key, "text": text, "children": None})
        elif depth + 1 >= MAX_EVIDENCE_DEPTH:
            nodes.append({"key": key, "text": jsonout.dumps(item), "children": None})
        else:
            nodes.append({"key": key, "text": None, "children": readable(item, depth + 1)})
    if len(pairs) > MAX_EVIDENCE_ITEMS:
        more = len(pairs) - MAX_EVIDENCE_ITEMS
        nodes.append({"key": None, "text": f"… {more:,} more", "children": None})
    return nodes


def _ratio(value: Any) -> float | None:
    """A 0..1 score as its 0–100 display value; None for no finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(float(value) * 100.0, 2) if math.isfinite(value) else None


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _split_omitted(items: list[Any] | None) -> tuple[list[dict[str, Any]], int]:
    """Stored items without the trailing ``{"omitted": n}`` marker, and n."""
    items = [i for i in items or [] if isinstance(i, dict)]
    if items and set(items[-1]) == {OMITTED_KEY}:
        return items[:-1], int(items[-1][OMITTED_KEY])
    return items, 0


#: a stored tool call's own fields; others it carried (call ids, span ids) are ``extra``
_CALL_KEYS = ("name", "arguments", "ok", "error", "latency", "kind", "result")


def _call(call: dict[str, Any], index: int) -> dict[str, Any]:
    """A stored tool call or step with every field present (None when absent)."""
    return {
        "index": index,
        "name": call.get("name"),
        "arguments": call.get("arguments"),
        "ok": call.get("ok", True),
        "error": call.get("error"),
        "latency": call.get("latency"),
        "kind": call.get("kind", "tool"),
        "result": call.get("result"),
        "extra": {k: v for k, v in call.items() if k not in _CALL_KEYS},
    }


def _entries(scores: dict[str, Any], key: str) -> Iterable[tuple[str, dict[str, Any]]]:
    """(metric, entry) for each dict entry of ``details[key]`` carrying a turn index."""
    for metric, score in sorted(scores.items()):
        entries = (score.get("details") or {}).get(key)
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if isinstance(entry, dict) and _index(entry.get("turn")) is not None:
                yield metric, entry


def conversation_view(sample: dict[str, Any]) -> dict[str, Any] | None:
    """The sample's turns in order, each with its tool calls, the per-turn scores of the
    conversation metrics and the intentions judged at it; None without stored turns."""
    stored, omitted = _split_omitted(sample.get("turns"))
    if not stored and not omitted:
        return None
    turns = [
        {
            "index": i,
            "role": str(t.get("role", "")),
            "content": t.get("content"),
            "name": t.get("name"),
            "tool_call_id": t.get("tool_call_id"),
            "tool_calls": [
                _call(c, j) for j, c in enumerate(t.get("tool_calls") or []) if isinstance(c, dict)
            ],
            "scores": [],
            "intentions": [],
        }
        for i, t in enumerate(stored)
    ]
    unplaced: list[dict[str, Any]] = []
    scores = sample.get("scores") or {}
    for metric, entry in _entries(scores, "turns"):
        row = {
            "metric": metric,
            "turn": entry["turn"],
            "score": entry.get("score"),
            "display": _ratio(entry.get("score")),
            "reason": entry.get("reason"),
            "evidence": {k: v for k, v in entry.items() if k not in _TURN_KEYS},
        }
        target = turns[entry["turn"]]["scores"] if 0 <= entry["turn"] < len(turns) else unplaced
        target.append(row)
    for metric, entry in _entries(scores, "intentions"):
        row = {
            "metric": metric,
            "turn": entry["turn"],
            "intention": entry.get("intention"),
            "satisfied": entry.get("satisfied"),
            "reason": entry.get("reason"),
        }
        target = turns[entry["turn"]]["intentions"] if 0 <= entry["turn"] < len(turns) else unplaced
        target.append(row)
    return {"turns": turns, "omitted": omitted, "unplaced": unplaced}


def _is_match_evidence(details: Any) -> bool:
    return (
        isinstance(details, dict)
        and isinstance(details.get("matches"), list)
        and isinstance(details.get("reference_calls"), list)
        and isinstance(details.get("made_calls"), list)
    )


def _matching(metric: str, score: dict[str, Any], tool_steps: list[int]) -> dict[str, Any]:
    """One tool-call metric's pairing: pairs with the trace step of each made call, and
    the reference and made calls left unmatched (by index)."""
    details = score["details"]
    reference, made = details["reference_calls"], details["made_calls"]
    pairs = []
    for m in details["matches"]:
        if not isinstance(m, dict):
            continue
        i, j = _index(m.get("reference")), _index(m.get("made"))
        pairs.append(
            {
                "reference": i,
                "made": j,
                "step": tool_steps[j] if j is not None and 0 <= j < len(tool_steps) else None,
                "tool": m.get("tool"),
                "agreement": m.get("argument_agreement"),
                "display": _ratio(m.get("argument_agreement")),
                "arguments": [
                    {
                        "argument": a.get("argument"),
                        "score": a.get("score"),
                        "display": _ratio(a.get("score")),
                        "reason": a.get("reason"),
                    }
                    for a in m.get("arguments") or []
                    if isinstance(a, dict)
                ],
            }
        )
    paired_reference = {p["reference"] for p in pairs}
    paired_made = {p["made"] for p in pairs}
    return {
        "metric": metric,
        "value": score.get("value"),
        "display": score.get("display"),
        "pairs": pairs,
        "unmatched_reference": [
            {"reference": i, "tool": name}
            for i, name in enumerate(reference)
            if i not in paired_reference
        ],
        "unmatched_made": [
            {"made": j, "tool": name, "step": tool_steps[j] if j < len(tool_steps) else None}
            for j, name in enumerate(made)
            if j not in paired_made
        ],
    }


def agent_view(sample: dict[str, Any]) -> dict[str, Any] | None:
    """The sample's trace steps in order, its reference calls, and each tool-call metric's
    matches; None when the sample has no stored trace, reference calls or matches."""
    steps, omitted = _split_omitted(sample.get("trace"))
    expected, expected_omitted = _split_omitted(sample.get("expected_tool_calls"))
    tool_steps = [i for i, s in enumerate(steps) if s.get("kind", "tool") == "tool"]
    matchings = [
        _matching(metric, score, tool_steps)
        for metric, score in sorted((sample.get("scores") or {}).items())
        if _is_match_evidence(score.get("details"))
    ]
    if not (steps or omitted or expected or matchings):
        return None
    return {
        "steps": [_call(step, i) for i, step in enumerate(steps)],
        "omitted": omitted,
        "expected": [_call(call, i) for i, call in enumerate(expected)],
        "expected_omitted": expected_omitted,
        "matchings": matchings,
    }


def sample_view(sample: dict[str, Any]) -> dict[str, Any]:
    """``sample`` (`assay.store.queries.sample_rows`) with its ``conversation`` and
    ``agent`` views (None when it has neither)."""
    return {**sample, "conversation": conversation_view(sample), "agent": agent_view(sample)}


#: evidence keys the conversation and agent views show, left out of the evidence table
_SHOWN_BY_CONVERSATION = ("turns", "intentions")
_SHOWN_BY_AGENT = (
    "matches",
    "reference_calls",
    "made_calls",
    "unmatched_reference",
    "unmatched_made",
)


def page_sample(sample: dict[str, Any]) -> dict[str, Any]:
    """`sample_view` plus, for each score, ``evidence``: its details without what the
    conversation and agent views already show (``shown_above`` names those keys)."""
    view = sample_view(sample)
    scores = {}
    for name, score in view["scores"].items():
        details = score.get("details") or {}
        shown = [
            k
            for k in details
            if (view["conversation"] and k in _SHOWN_BY_CONVERSATION)
            or (k in _SHOWN_BY_AGENT and _is_match_evidence(details) and view["agent"])
        ]
        evidence = {k: v for k, v in details.items() if k not in shown}
        scores[name] = {**score, "evidence": evidence, "shown_above": shown}
    view["scores"] = scores
    return view
