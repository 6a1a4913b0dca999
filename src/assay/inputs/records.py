"""Readers: JSONL, CSV, JSON array, Parquet and pandas DataFrame into `Sample` objects.

A malformed record never stops the others: each problem becomes an `InputError` naming
the file, the line (or item) and the field; ``strict=True`` raises the first instead.

What the readers accept, and what they reject (every rejection names file, line, field):

* UTF-8 with or without a byte-order mark, UTF-16 with a byte-order mark; LF or CRLF.
  Bytes that are not valid UTF-8 make *that* record an error, not the whole file.
* JSONL: one JSON object per line; blank lines are skipped; a line holding an array,
  number, string or null is an error. A ``.json`` file holds an array of objects (or
  ``{"samples": [...]}``); a ``.json`` file that is really JSONL is read as JSONL.
* A key given twice in one object with different values, or a field given under two of
  its names (``answer`` and ``response``) with different values, is an error: the
  reader never picks one silently. Equal duplicates are harmless.
* CSV (``,``, or ``;``/tab/``|`` when the header holds no comma) and TSV: list columns
  hold JSON (``["a", "b"]``) or one plain string (a list of one); quoted newlines are
  fine; missing cells are absent; more cells than header columns is an error.
* Parquet: one row per sample; list and struct columns arrive as lists and dicts, a null
  cell is absent (`assay.inputs.parquet`).
* A record with no known field (only unknown keys, or all empty) is an error: nothing in
  it could be scored, and it usually means misspelt column names.
* A record without an id gets one from where it is (`position_id`): ``line-N`` (JSONL
  and CSV: the line it starts on, 1-based, a CSV header being line 1), ``item-N`` (the
  N-th object of a JSON array, or of a list given to `assay.evaluate`) or ``row-N``
  (Parquet, a DataFrame). The same file gives the same ids on every run, so ``--resume``,
  ``assay compare`` and the dashboard match its samples; an id given is kept as it is.
* A field nesting objects/arrays deeper than ``max_json_depth`` (500 by default) is an
  error of its record; the other limits (``max_field_chars``, ``max_contexts``) are
  applied per metric when scoring (``docs/input.md``, "Limits").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from assay.core.config import load_config, over_limit
from assay.core.label_values import (
    LABEL_COLUMNS,
    LabelError,
    LabelScale,
    label_value,
    metric_labels,
)
from assay.core.sample import (
    FIELD_ALIASES,
    ONE_IS_A_LIST,
    TEXT_FIELDS,
    TEXT_LIST_FIELDS,
    Sample,
    _key_form,
    json_extent,
    key_lookup,
)

__all__ = [
    "InputError",
    "InputErrors",
    "LabelReading",
    "depth_setting",
    "in_file_order",
    "iter_samples",
    "json_object",
    "loads_json",
    "position_id",
    "samples_from_dataframe",
    "samples_from_records",
]

_SELF_EXPLAINED = {"conflicting_fields", "milliseconds"}
# a lone surrogate: what undecodable bytes become under errors="surrogateescape"
NOT_TEXT = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class InputError:
    """One unusable input record: where it is and what is wrong."""

    source: str
    line: int | None
    field: str | None
    message: str
    unit: str = "line"

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f" {self.unit} {self.line}"
        if self.field:
            where += f", field '{self.field}'"
        return f"{where}: {self.message}"


class InputErrors(ValueError):
    """Raised in strict mode, or when an input has no usable record at all."""

    def __init__(self, errors: list[InputError]) -> None:
        self.errors = errors
        shown = "\n".join(str(e) for e in errors[:20])
        more = f"\n... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(shown + more)


_LABEL_FORMS = frozenset(LABEL_COLUMNS)


@dataclass(frozen=True)
class LabelReading:
    """How `assay.inputs.read.read_labelled_samples` reads a record's verdicts before it
    becomes a sample: ``label_field`` names one more column holding the sample's one
    verdict (besides `LABEL_COLUMNS`), ``scale`` the scale its ratings are on (every
    number in a verdict column and in ``labels`` is then a rating on it)."""

    label_field: str | None = None
    scale: LabelScale | None = None

    def apply(self, record: Any) -> Any:
        """``record`` with its verdict columns replaced by ``label`` (the one verdict, in
        [0, 1]) and ``labels`` (read by `metric_labels`); `LabelError` naming the column
        for a value that is not a verdict, or for two columns that give different ones."""
        if not isinstance(record, dict) or _any_problem(record):
            return record  # `_to_sample` names what is wrong with it
        wanted = None if self.label_field is None else _key_form(self.label_field)
        out: dict[str, Any] = {}
        verdicts: list[tuple[str, float]] = []
        given: dict[str, Any] = {}
        for key, value in record.items():
            text_key = str(key)
            form = _key_form(text_key)
            if text_key == self.label_field or form == wanted or form in _LABEL_FORMS:
                if value is not None:
                    verdicts.append((text_key, label_value(value, self.scale, field=text_key)))
                    given[text_key] = value
            elif form == "labels":
                out["labels"] = metric_labels(value, self.scale, field=text_key)
            else:
                out[key] = value
        for key, value in verdicts[1:]:
            first, first_value = verdicts[0]
            if value != first_value:
                raise LabelError(
                    f"{first!r} ({_shown(given[first])}) and {key!r} ({_shown(given[key])}) "
                    "give different verdicts: keep one",
                    field=key,
                    value=given[key],
                )
        if verdicts:
            out["label"] = verdicts[0][1]
        return out


class JsonObject(dict):  # type: ignore[type-arg]
    """A parsed JSON object that remembers a key it saw twice with different values."""

    duplicate: str | None = None


def json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of ``pairs``: a plain dict, or a `JsonObject` naming the first key given
    twice with a different value (the last value wins, as in ``json.loads``)."""
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    marked = JsonObject(out)
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen and seen[key] != value:
            marked.duplicate = key
            break
        seen[key] = value
    return marked


_DECODER = json.JSONDecoder(object_pairs_hook=json_object)


def loads_json(text: str) -> Any:
    """``text`` parsed as ``json.loads`` parses it, an object with a key given twice
    marked (`json_object`). A flat object of texts, integers, booleans and nulls without
    a backslash (most JSONL records) is parsed by orjson, 0.3 µs where the standard
    decoder with its hook takes 2 (`_orjson_record`); anything else, and anything orjson
    refuses, by the standard decoder."""
    if "\\" not in text:
        record = _orjson_record(text)
        if record is not None:
            return record
    return _DECODER.decode(text)


def _orjson_record(text: str) -> dict[str, Any] | None:
    """``text``, which has no backslash, parsed by orjson when it is a flat object of
    texts, integers, booleans and nulls that kept every member; else None.

    Every member has one colon outside the strings; the other colons are inside its keys
    and texts, where no escape can write one (there is no backslash), so a key given
    twice leaves more colons than members. A float is left to the standard decoder:
    orjson reads an integer past 64 bits as one."""
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if type(record) is not dict:
        return None
    for value in record.values():
        kind = type(value)
        if kind is not str and kind is not int and kind is not bool and value is not None:
            return None
    colons = text.count(":")
    if colons == len(record):  # none inside the strings
        return record
    texts = [value for value in record.values() if type(value) is str]
    inside = "".join(record).count(":") + "".join(texts).count(":")
    return record if colons - inside == len(record) else None


def _field_hint(field: str) -> str:
    for canonical, aliases in FIELD_ALIASES.items():
        if field in aliases:
            others = [a for a in aliases if a != field][:3]
            return f" (field {canonical!r}; also accepted as {', '.join(map(repr, others))})"
    return ""


def _shown(value: Any) -> str:
    text = "null" if value is None else repr(value)
    return f"{text[:60]}{'...' if len(text) > 60 else ''}"


def _validation_errors(
    exc: ValidationError, source: str, line: int | None, unit: str
) -> list[InputError]:
    errors = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or None
        field_name = loc.split(".")[0] if loc else None
        label_error = err.get("ctx", {}).get("error")
        if isinstance(label_error, LabelError):  # its reason shows the value
            at = label_error.field if label_error.field.startswith("labels.") else loc
            errors.append(InputError(source, line, at, label_error.reason, unit))
            continue
        if err["type"] in _SELF_EXPLAINED:
            message = err["msg"]
            if err["type"] == "milliseconds":
                message += f" (got {_shown(err.get('input'))})"
            errors.append(InputError(source, line, loc, message, unit))
            continue
        got = err.get("input")
        got_text = "" if isinstance(got, dict) or loc is None else f" (got {_shown(got)})"
        hint = _field_hint(field_name) if field_name else ""
        errors.append(InputError(source, line, loc, f"{err['msg']}{got_text}{hint}", unit))
    return errors


def _any_problem(value: Any) -> bool:
    """Whether a text or key of ``value`` is not text, or an object gave a key twice
    (`_first_problem` then says where; this check builds no paths)."""
    if isinstance(value, str):
        return NOT_TEXT.search(value) is not None
    if not isinstance(value, dict | list):
        return False
    stack = [value]
    while stack:
        item = stack.pop()
        texts: list[str] = []  # searched at once: a character class matches within one
        if isinstance(item, dict):
            if getattr(item, "duplicate", None) is not None:
                return True
            texts.extend(k for k in item if isinstance(k, str))
            entries: Any = item.values()
        else:
            entries = item
        for entry in entries:
            if isinstance(entry, str):
                texts.append(entry)
            elif isinstance(entry, dict | list):
                stack.append(entry)
        if NOT_TEXT.search("".join(texts)):
            return True
    return False


def _first_problem(value: Any) -> tuple[str | None, str] | None:
    """(field path, message) of the first text that is not text or key given twice.
    Iterative (depth-first, in order): nesting costs no recursion."""
    if not _any_problem(value):
        return None
    stack: list[tuple[Any, str, Any]] = [(value, "", None)]
    while stack:
        item, where, key = stack.pop()
        if isinstance(key, str) and NOT_TEXT.search(key):
            return where, "the key is not valid UTF-8 text; save the file as UTF-8"
        if isinstance(item, str):
            if NOT_TEXT.search(item):
                return where or None, (
                    "is not valid UTF-8 text (an undecodable byte or a lone surrogate escape); "
                    "save the file as UTF-8"
                )
        elif isinstance(item, dict):
            duplicate = getattr(item, "duplicate", None)
            if duplicate is not None:
                at = f"{where}.{duplicate}" if where else duplicate
                return at, "appears twice in one object with different values: keep one"
            entries = [(v, f"{where}.{k}" if where else str(k), k) for k, v in item.items()]
            stack.extend(reversed(entries))
        elif isinstance(item, list):
            entries = [(v, f"{where}.{i}" if where else str(i), None) for i, v in enumerate(item)]
            stack.extend(reversed(entries))
    return None


def _too_deep(record: dict[str, Any], max_json_depth: int) -> tuple[str, str] | None:
    """(key, message) of the first field nesting deeper than ``max_json_depth``."""
    for key, value in record.items():
        if isinstance(value, dict | list):
            depth = json_extent(value)[1]
            if depth > max_json_depth:
                measured = f"nests {depth:,} levels deep"
                return str(key), over_limit(measured, max_json_depth, "max_json_depth")
    return None


#: fields that hold nothing to score
_NOT_CONTENT = frozenset({"id", "metadata", "tags", "label", "labels"})


def _has_content(sample: Sample) -> bool:
    """Whether a field other than id, metadata, tags and labels has a value (the fields
    not given are None: only those given are looked at)."""
    return any(
        getattr(sample, name) is not None
        for name in sample.model_fields_set
        if name not in _NOT_CONTENT
    )


#: how a field holds texts: one; a list; a list, of which one text given stands for one
_TEXT, _LIST, _ONE_OR_LIST = 0, 1, 2
_HOLDS = {field: _TEXT for field in TEXT_FIELDS} | {
    field: _ONE_OR_LIST if field in ONE_IS_A_LIST else _LIST for field in TEXT_LIST_FIELDS
}
#: each exact input key of a field of one text or of a list of texts (its name or an
#: alias: ``question``, ``answer``, ``contexts``, ``ground_truth``, ...) -> the field
#: and how it holds texts
_PLAIN_KEYS = {
    key: (field, _HOLDS[field]) for key, field in key_lookup(Sample).items() if field in _HOLDS
}
#: a `Sample` of no given field: every field's default, in the model's order
_DEFAULTS = {name: None for name in Sample.model_fields}
_new_sample = Sample.__new__
_set = object.__setattr__


def _plain_sample(record: dict[str, Any]) -> Sample | None:
    """The sample of a record whose keys are text or text-list fields (by name or alias,
    each field once) and whose values are text, or lists of text, of valid UTF-8, with
    a field besides its id (most records: ``question``, ``answer``, ``contexts``,
    ``ground_truth``); None for any other record.

    Validation makes of such a record what this builds (`Sample._normalise_input` maps
    each key to its field and adds empty ``tags`` and ``metadata``; each text validator
    returns text as it is, a list of texts as a copy, one text of a field where one
    stands for a list as a list of it), so the sample is built directly: what pydantic
    would build, without running its validators (2 µs where validation takes 20). A
    test checks the two agree field by field, with the fields set.
    """
    if type(record) is not dict or not record.keys() <= _PLAIN_KEYS.keys():
        return None  # a JsonObject (a key given twice), another field
    values: dict[str, Any] = {}
    texts: list[str] = []
    for key, value in record.items():
        field, holds = _PLAIN_KEYS[key]
        if type(value) is str:
            if holds == _LIST:
                return None
            texts.append(value)
            values[field] = value if holds == _TEXT else [value]
        elif type(value) is list and holds != _TEXT:
            for item in value:
                if type(item) is not str:
                    return None
            texts.extend(value)
            values[field] = list(value)
        else:
            return None
    if len(values) < len(record):
        return None  # two names of one field: validation compares them
    joined = "".join(texts)
    if not joined.isascii() and NOT_TEXT.search(joined):
        return None
    if not values.keys() - {"id"}:
        return None  # nothing to score: `_to_sample` says so
    sample = _new_sample(Sample)
    _set(sample, "__dict__", {**_DEFAULTS, **values, "labels": {}, "tags": {}, "metadata": {}})
    _set(sample, "__pydantic_fields_set__", {*values, "tags", "metadata"})
    _set(sample, "__pydantic_extra__", None)
    _set(sample, "__pydantic_private__", None)
    return sample


def _to_sample(
    record: Any, source: str, line: int | None, unit: str, max_json_depth: int
) -> tuple[Sample | None, list[InputError]]:
    plain = _plain_sample(record)
    if plain is not None:
        return plain, []
    if not isinstance(record, dict):
        kind = "null" if record is None else type(record).__name__
        return None, [InputError(source, line, None, f"expected a JSON object, got {kind}", unit)]
    problem = _too_deep(record, max_json_depth) or _first_problem(record)
    if problem is not None:
        return None, [InputError(source, line, problem[0], problem[1], unit)]
    try:
        sample = Sample.model_validate(record)
    except ValidationError as exc:
        return None, _validation_errors(exc, source, line, unit)
    if not _has_content(sample):
        keys = [str(k) for k in record][:8]
        got = f"keys {', '.join(map(repr, keys))}" if keys else "no keys"
        return None, [
            InputError(
                source,
                line,
                None,
                f"nothing to score: no known field with a value (got {got}); a sample "
                "needs fields such as 'response' (or 'answer'), 'query' (or 'question'), "
                "'expected' (or 'ground_truth') or 'contexts'",
                unit,
            )
        ]
    return sample, []


def position_id(unit: str, position: int) -> str:
    """The id of a sample given without one: its unit and 1-based position in its input,
    ``line-3``, ``item-3`` or ``row-3``."""
    return f"{unit}-{position}"


def samples_from_records(
    records: Iterable[tuple[int | None, Any]],
    source: str = "<records>",
    strict: bool = False,
    unit: str = "line",
    *,
    max_json_depth: int | None = None,
    positioned: list[tuple[int, int]] | None = None,
    labels: LabelReading | None = None,
) -> tuple[list[Sample], list[InputError]]:
    """Validate (position, record) pairs into samples, collecting errors.

    ``unit`` names the position in messages, and in the id of a record without one
    (`position_id`): line, item or row. A field nesting deeper than ``max_json_depth``
    levels (default: the configured ``max_json_depth``) makes its record an error.
    ``positioned``: where to add (index in the samples returned, position) for each
    sample whose id is its position (a piece of a file renumbers them). ``labels``: how
    the records' verdicts are read (`LabelReading`; default: the sample's own fields).
    """
    errors: list[InputError] = []
    samples = list(
        iter_samples(
            records,
            source,
            strict,
            unit,
            errors=errors,
            max_json_depth=max_json_depth,
            positioned=positioned,
            labels=labels,
        )
    )
    return samples, errors


def iter_samples(
    records: Iterable[tuple[int | None, Any]],
    source: str,
    strict: bool,
    unit: str,
    *,
    errors: list[InputError],
    max_json_depth: int | None = None,
    positioned: list[tuple[int, int]] | None = None,
    labels: LabelReading | None = None,
) -> Iterator[Sample]:
    """`samples_from_records` one sample at a time, as the records are read: the errors
    of the invalid records are appended to ``errors`` as they are met, and a sample
    without an id gets `position_id` (noted in ``positioned`` when given)."""
    depth = depth_setting(max_json_depth)
    index = 0
    for line, record in records:
        try:
            read = record if labels is None else labels.apply(record)
        except LabelError as exc:
            sample, problems = None, [InputError(source, line, exc.field, exc.reason, unit)]
        else:
            sample, problems = _to_sample(read, source, line, unit, depth)
        if problems:
            if strict:
                raise InputErrors(problems)
            errors.extend(problems)
        elif sample is not None:
            if sample.id is None and line is not None:
                sample.id = position_id(unit, line)
                if positioned is not None:
                    positioned.append((index, line))
            index += 1
            yield sample


def depth_setting(max_json_depth: int | None) -> int:
    return load_config().max_json_depth if max_json_depth is None else max_json_depth


def in_file_order(errors: list[InputError]) -> list[InputError]:
    """The errors by line (those of no line last), in their order within a line."""
    return sorted(errors, key=lambda e: (e.line is None, e.line or 0))


def samples_from_dataframe(
    df: Any, strict: bool = False, *, max_json_depth: int | None = None
) -> tuple[list[Sample], list[InputError]]:
    """Samples from a pandas DataFrame (one row each; NaN cells are treated as absent;
    ``max_json_depth`` as in `samples_from_records`)."""
    import math

    def clean(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        if hasattr(value, "tolist"):
            return value.tolist()
        return value

    records = (
        (int(i) + 1 if isinstance(i, int) else None, {k: clean(v) for k, v in row.items()})
        for i, row in zip(range(len(df)), df.to_dict(orient="records"), strict=True)
    )
    return samples_from_records(
        records, "<DataFrame>", strict, unit="row", max_json_depth=max_json_depth
    )
