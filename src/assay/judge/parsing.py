"""Turning a judge's reply text into the prompt's output model, as leniently as is safe.

Order: strict JSON (code fences and surrounding prose stripped) -> json-repair (trailing
commas, single quotes, a missing brace) -> shape fixes (a bare JSON array becomes the
model's one list field; a bare number becomes ``{"score": n}``) -> the prompt's
last-resort prose fallback (`assay.judge.prose`: the score the judge gave, a CORRECT/WRONG
word) -> `ParseError`.

Where a reply holds several JSON objects (a judge quoting the answer's ``{"score": 1.0}``
before giving its own verdict), the LAST one that fits the output model is taken: the
verdict comes after what it quotes. The same holds for several code fences. And where a
reply's JSON sits amid prose that gives a different verdict in words (a judge quoting the
answer's ``{"score": 1.0}``, then "My score: 0.1"), the reply is ambiguous (`ParseError`)
rather than read at the quoted JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import json_repair
from pydantic import AliasChoices, BaseModel, ValidationError

__all__ = ["ParseError", "extract_json", "parse_reply"]

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


class ParseError(ValueError):
    """The reply could not be read as the prompt's output."""


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: strict first, then the fenced or bracketed part, then
    json-repair. Raises `ParseError` when nothing usable is found."""
    text = (text or "").strip()
    if not text:
        raise ParseError("empty reply")
    candidates = [text]
    # the last fenced block first: a judge may quote the answer in a fence, then reply
    candidates.extend(block.strip() for block in reversed(_FENCE.findall(text)))
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        end = max(text.rfind("}"), text.rfind("]"))
        if end > start:
            candidates.append(text[start : end + 1])
        candidates.append(text[start:])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    for candidate in candidates[1:] or candidates:
        try:
            repaired = json_repair.loads(candidate)
        except Exception:  # json-repair gives up on some inputs
            continue
        if isinstance(repaired, dict | list) and repaired:
            return repaired
    raise ParseError(f"no JSON found in reply: {text[:120]!r}")


def _field_keys(model: type[BaseModel]) -> set[str]:
    """The keys an object of ``model`` may carry: field names and their aliases."""
    keys = set(model.model_fields)
    for field in model.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, str):
            keys.add(alias)
        elif isinstance(alias, AliasChoices):
            keys.update(c for c in alias.choices if isinstance(c, str))
    return keys


def _reshape(value: Any, model: type[BaseModel]) -> Any:
    fields = model.model_fields
    if isinstance(value, list) and len(value) > 1 and all(isinstance(v, dict) for v in value):
        # several top-level objects (json-repair returns them as a list): the last that
        # fits the model is the verdict; what came before is quoted or drafted text
        keys = _field_keys(model)
        for item in reversed(value):
            if not keys & set(item):
                continue  # not this model's object (e.g. one claim of a bare claim list)
            try:
                model.model_validate(item)
            except ValidationError:
                continue
            return item
    if isinstance(value, list):
        list_fields = [
            name for name, f in fields.items() if getattr(f.annotation, "__origin__", None) is list
        ]
        if len(list_fields) == 1:
            return {list_fields[0]: value}
        if len(value) == 1 and isinstance(value[0], dict):
            return value[0]
    if isinstance(value, int | float) and not isinstance(value, bool) and "score" in fields:
        return {"score": value}
    if isinstance(value, str) and "label" in fields:
        return {"label": value}
    return value


def _unit(value: float) -> float:
    """A score on 0..1; one in (1, 100] read as percent (85 in JSON is 85% in prose)."""
    return value / 100.0 if 1.0 < value <= 100.0 else value


def _prose_agrees(
    text: str, parsed: BaseModel, fallback: Callable[[str], dict[str, Any] | None]
) -> None:
    """Raise `ParseError` when a reply's JSON sits amid prose that gives another verdict.

    A judge may quote the answer's own ``{"score": 1.0}`` and then give its verdict in
    words ("My score: 0.1"); the JSON found is then not the judge's. The prose reader
    ignores quoted text (JSON keys are quoted, so the JSON's own numbers are not read
    as prose), so a clear prose verdict that differs from the JSON means the reply
    contradicts itself: ambiguous, never silently one of the two.
    """
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return  # the whole reply is JSON: it says nothing else
    try:
        said = fallback(text)
    except ParseError:
        return  # prose with no clear verdict does not outweigh the JSON
    for key, value in (said or {}).items():
        got = getattr(parsed, key, value)
        if key == "reason" or got == value:
            continue
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (got, value))
        if numbers and math.isclose(_unit(got), _unit(value), abs_tol=0.005):
            continue
        raise ParseError(f"ambiguous reply: its JSON gives {key} {got} but its text gives {value}")


def parse_reply(
    text: str,
    model: type[T],
    fallback: Callable[[str], dict[str, Any] | None] | None = None,
    check: Callable[[Any, Mapping[str, Any]], str | None] | None = None,
    values: Mapping[str, Any] | None = None,
) -> T:
    """Parse ``text`` into ``model``; raise `ParseError` with the reason when impossible.

    ``check`` (with the prompt's block ``values``) validates the parsed reply against the
    inputs, e.g. one verdict per context.
    """
    problem = ""
    try:
        value = _reshape(extract_json(text), model)
        parsed = model.model_validate(value)
    except (ParseError, ValidationError) as exc:
        problem = str(exc).splitlines()[0] if isinstance(exc, ValidationError) else str(exc)
        if isinstance(exc, ValidationError):
            problem = f"reply does not match {model.__name__}: {exc.errors()[0]['msg']}"
        fields = fallback(text) if fallback is not None else None
        if fields is None:
            raise ParseError(problem) from None
        try:
            parsed = model.model_validate(fields)
        except ValidationError:
            raise ParseError(problem) from None
    else:
        if fallback is not None:
            _prose_agrees(text, parsed, fallback)
    if check is not None:
        issue = check(parsed, values or {})
        if issue:
            raise ParseError(issue)
    return parsed
