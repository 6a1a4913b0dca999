"""`Sample`: the one input shape every metric family reads.

Field names are Assay's canonical names; the names used by the specification documents
(chatbot hub `query/response/expected_response/retrieved_docs`, the RAG specification
`question/answer/ground_truth/contexts`, deepeval-style `retrieval_context`, ...) are
accepted as aliases on input. Timings are in **seconds** (chatbot hub stores duration in
seconds); `*_ms` inputs are converted.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from assay.core.config import over_limit
from assay.core.label_values import LABEL_COLUMNS, label_value, metric_labels
from assay.core.steps import ToolCall, Turn, trace_from_turns

if TYPE_CHECKING:
    from assay.core.config import AssayConfig

__all__ = [
    "FIELD_ALIASES",
    "LIMITED_FIELDS",
    "InputTooLarge",
    "LimitedSample",
    "Sample",
    "TargetCall",
    "ToolCall",
    "json_extent",
    "limit_problems",
    "limited",
]


#: zero-width and other format characters that render as nothing (Unicode category Cf
#: ones met in pasted text): text made only of these counts as blank
_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff"
#: one character that shows: neither white space nor one of those (the search stops at the
#: first, so a long text costs nothing)
_VISIBLE = re.compile(f"[^\\s{_INVISIBLE}]")


def _alias(*names: str) -> AliasChoices:
    return AliasChoices(*names)


#: the fields that hold one text (a finite number given for one becomes its text)
TEXT_FIELDS = (
    "id",
    "query",
    "response",
    "expected",
    "gold_context",
    "parallel_response",
    "scenario",
    "expected_outcome",
    "role_description",
)
TEXT_LIST_FIELDS = (
    "contexts",
    "expected_sources",
    "known_facts",
    "candidates",
    "previous_responses",
    "reasoning_steps",
    "reference_steps",
    "tools_used",
    "tools_succeeded",
    "allowed_topics",
)
# fields where one string (or number) stands for a list of one
ONE_IS_A_LIST = frozenset(
    {"contexts", "expected_sources", "known_facts", "candidates", "allowed_topics"}
)
_TIMINGS = ("duration", "first_token_time", "llm_latency", "tool_latency", "api_latency")
_MS_KEYS = {f"{name}_ms": name for name in _TIMINGS} | {"total_latency_ms": "duration"}
_TAG_SHORTHANDS = frozenset({"method", "question_type", "model", "run"})


def _key_form(key: str) -> str:
    """A key as compared when it is not an exact field name: ``Expected Answer`` and
    ``expected-answer`` both become ``expected_answer``."""
    return "_".join(key.strip().lower().replace("-", " ").split())


def _text_of_number(value: Any) -> Any:
    """Finite numbers become text (a numeric answer such as ``42`` is an answer); a
    boolean or anything else is left for validation to reject."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def _input_error(key: str, kind: str, message: str, value: Any) -> ValidationError:
    error = PydanticCustomError(kind, "{message}", {"message": message})
    return ValidationError.from_exception_data(
        "Sample", [InitErrorDetails(type=error, loc=(key,), input=value)]
    )


def _ms_to_seconds(key: str, value: Any) -> float | None:
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number < 0:
        raise _input_error(
            key,
            "milliseconds",
            "should be a non-negative, finite number of milliseconds",
            value,
        )
    return number / 1000.0


_LOOKUP: dict[type, dict[str, str]] = {}


def key_lookup(model: type[BaseModel]) -> dict[str, str]:
    """Every accepted input key (names, aliases and their case-free forms) -> field."""
    if model not in _LOOKUP:
        lookup: dict[str, str] = {}
        for name, field in model.model_fields.items():
            lookup[name] = name
            alias = field.validation_alias
            if isinstance(alias, AliasChoices):
                for choice in alias.choices:
                    if isinstance(choice, str):
                        lookup[choice] = name
        _LOOKUP[model] = lookup
    return _LOOKUP[model]


_OWN_NAMES: dict[type, frozenset[str]] = {}


def _own_names(model: type[BaseModel]) -> frozenset[str]:
    """The input keys that are a field's own name (`key_lookup` maps them to themselves)."""
    if model not in _OWN_NAMES:
        _OWN_NAMES[model] = frozenset(k for k, v in key_lookup(model).items() if k == v)
    return _OWN_NAMES[model]


# canonical name -> accepted aliases (the first alias is the canonical name itself)
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "sample_id", "question_id", "test_id"),
    "query": ("query", "question", "input", "prompt", "user_input"),
    "response": ("response", "answer", "output", "actual_output", "actual_response"),
    "expected": (
        "expected",
        "expected_response",
        "ground_truth",
        "reference",
        "expected_output",
        "expected_answer",
        "best_answer",
    ),
    "contexts": (
        "contexts",
        "retrieved_docs",
        "retrieval_context",
        "retrieved_contexts",
        "context",
    ),
    "expected_sources": ("expected_sources", "relevant_docs", "expected_docs"),
    "gold_context": ("gold_context", "reference_context"),
    "known_facts": ("known_facts", "facts"),
    "candidates": ("candidates", "top_k_candidates"),
    "previous_responses": ("previous_responses", "responses_history", "repeated_responses"),
    "parallel_response": (
        "parallel_response",
        "other_language_response",
        "response_ar",
        "ar_response",
        "translated_response",
    ),
    "language": ("language", "lang"),
    "reasoning_steps": ("reasoning_steps", "steps", "cot_steps", "chain_of_thought"),
    "reference_steps": ("reference_steps", "expected_reasoning_steps", "expected_reasoning"),
    "expected_json": ("expected_json", "ground_truth_json", "gt_json"),
    "output_json": ("output_json", "aio_json", "extracted_json"),
    "json_schema": ("json_schema", "schema", "response_schema"),
    "expected_tool_calls": ("expected_tool_calls", "reference_tool_calls"),
    "turns": ("turns", "messages", "conversation"),
    "scenario": ("scenario",),
    "expected_outcome": ("expected_outcome", "reference_outcome"),
    "role_description": ("role_description", "chatbot_role", "assistant_role"),
    "allowed_topics": ("allowed_topics", "topics"),
    "label": LABEL_COLUMNS,
}


class TargetCall(BaseModel):
    """How the application under test answered this sample when ``assay run`` called it
    (`assay.inputs.targets`): ``ok``, ``timeout`` or ``error``, with the HTTP status and a
    short reason, the attempts made and the token usage the target reported. A sample
    whose call did not end ``ok`` is N/A for every metric, with that reason."""

    model_config = ConfigDict(extra="forbid")

    target: str
    status: Literal["ok", "timeout", "error"]
    http_status: int | None = None
    reason: str | None = None
    attempts: int = Field(default=1, ge=1)
    usage: dict[str, int] | None = None


class Sample(BaseModel):
    """One thing to evaluate: a question, the application's answer and whatever else is known.

    Every field is optional; a metric names the fields it requires and returns
    ``None`` with a reason when one is absent. Unknown input keys are kept in
    ``metadata`` so nothing a user supplied is lost. Keys match field names and aliases
    regardless of case, spaces and hyphens (``Ground Truth``); a field given under two
    names with different values (``answer`` and ``response``) is a validation error, never
    a silent choice. Numbers in text fields become text (``42`` -> ``"42"``). ``label`` and
    ``labels`` hold a person's verdicts, in [0, 1] (`assay.core.labels`). See
    ``docs/input.md``.
    """

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=False)

    id: str | None = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["id"]))
    # conversation
    query: str | None = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["query"]))
    response: str | None = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["response"]))
    expected: str | None = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["expected"]))
    # retrieval
    contexts: list[str] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["contexts"])
    )
    expected_sources: list[str] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["expected_sources"])
    )
    gold_context: str | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["gold_context"])
    )
    known_facts: list[str] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["known_facts"])
    )
    candidates: list[str] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["candidates"])
    )
    # repetition and languages
    previous_responses: list[str] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["previous_responses"])
    )
    parallel_response: str | None = Field(
        default=None,
        validation_alias=_alias(*FIELD_ALIASES["parallel_response"]),
        description="The application's answer to the same query in another language.",
    )
    language: str | None = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["language"]))
    # reasoning
    reasoning_steps: list[str] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["reasoning_steps"])
    )
    reference_steps: list[str] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["reference_steps"])
    )
    # structured output
    expected_json: Any = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["expected_json"])
    )
    output_json: Any = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["output_json"]))
    json_schema: dict[str, Any] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["json_schema"])
    )
    # timings, seconds
    duration: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="End-to-end time, seconds."
    )
    first_token_time: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Time to first token, seconds."
    )
    llm_latency: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Seconds in LLM calls."
    )
    tool_latency: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Seconds in tool calls."
    )
    api_latency: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Seconds in API calls."
    )
    tool_call_count: int | None = Field(default=None, ge=0)
    response_tokens: int | None = Field(default=None, ge=0)
    # agent
    task_completed: bool | None = None
    steps_taken: int | None = Field(default=None, ge=0)
    expected_steps: int | None = Field(default=None, ge=0)
    tools_used: list[str] | None = None
    tools_succeeded: list[str] | None = None
    errors_encountered: int | None = Field(default=None, ge=0)
    trace: list[ToolCall] | None = None
    expected_tool_calls: list[ToolCall] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["expected_tool_calls"])
    )
    # conversation: the turns in order (OpenAI chat messages as logged), what the user
    # came for, what should come of it, the assistant's role, the topics it may discuss
    turns: list[Turn] | None = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["turns"]))
    scenario: str | None = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["scenario"]))
    expected_outcome: str | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["expected_outcome"])
    )
    role_description: str | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["role_description"])
    )
    allowed_topics: list[str] | None = Field(
        default=None, validation_alias=_alias(*FIELD_ALIASES["allowed_topics"])
    )
    # a person's verdicts, in [0, 1] in the metric's direction (`assay.core.labels`)
    label: float | None = Field(default=None, validation_alias=_alias(*FIELD_ALIASES["label"]))
    labels: dict[str, float] = Field(default_factory=dict)
    # the call that produced the response (assay run)
    target_call: TargetCall | None = None
    # grouping and anything else
    tags: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _normalise_input(cls, data: Any) -> Any:
        """Map aliases (and case/spacing variants such as ``Question``) to their field,
        convert ``*_ms`` timings, move tag shorthands into ``tags`` and unknown keys into
        ``metadata``. Two keys naming one field with different values are an error, never
        a silent choice."""
        if not isinstance(data, dict):
            return data
        lookup = key_lookup(cls)
        if data.keys() <= _own_names(cls):
            # every key is a field's own name: nothing to map, merge or move
            out = dict(data)
            for name in ("tags", "metadata"):
                value = out.get(name)
                out[name] = (
                    {} if value is None else dict(value) if isinstance(value, dict) else value
                )
            return out
        entries: dict[str, list[tuple[str, Any]]] = {}
        given_as: dict[str, Any] = {}  # what the user wrote, for messages
        shorthands: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            text_key = str(key)
            field = lookup.get(text_key) or lookup.get(_key_form(text_key))
            if field is not None:
                used = text_key if text_key in lookup else _key_form(text_key)
                entries.setdefault(field, []).append((used, value))
                continue
            form = _key_form(text_key)
            if form in _MS_KEYS:
                target = _MS_KEYS[form]
                entries.setdefault(target, []).append((text_key, _ms_to_seconds(text_key, value)))
                given_as[text_key] = value
            elif form in _TAG_SHORTHANDS:
                shorthands[form] = value
            else:
                extra[text_key] = value
        out: dict[str, Any] = {}
        for field, given in entries.items():
            present = [(k, v) for k, v in given if v is not None]
            if len(present) > 1 and any(not _same(present[0][1], v) for _, v in present[1:]):
                names = " and ".join(repr(k) for k, _ in present)
                raise _input_error(
                    present[1][0],
                    "conflicting_fields",
                    f"{names} are both given, with different values; both name the field "
                    f"{field!r}: keep one",
                    given_as.get(present[1][0], present[1][1]),
                )
            key, value = (present or given)[0]
            # keep the user's own key (or its alias form) so errors name what they wrote
            out[key if lookup.get(key) == field else field] = value
        # tag shorthands used by the RAG specification's reports
        tags = out.get("tags")
        if tags is None:
            tags = {}
        if isinstance(tags, dict):
            tags = dict(tags)
            for key, value in shorthands.items():
                if value is None:
                    continue
                if key in tags and tags[key] is not None and str(tags[key]) != str(value):
                    raise _input_error(
                        key,
                        "conflicting_fields",
                        f"{key!r} is given both as a key ({value!r}) and in tags "
                        f"({tags[key]!r}): keep one",
                        value,
                    )
                tags.setdefault(key, str(value))
            out["tags"] = tags
        # unknown keys are kept, not rejected
        metadata = out.get("metadata")
        if metadata is None:
            metadata = {}
        if isinstance(metadata, dict):
            metadata = dict(metadata)
            for key, value in extra.items():
                if key in metadata and not _same(metadata[key], value):
                    raise _input_error(
                        key,
                        "conflicting_fields",
                        f"{key!r} is given both as a key and in metadata with different "
                        "values: keep one",
                        value,
                    )
                metadata[key] = value
            out["metadata"] = metadata
        return out

    @model_validator(mode="after")
    def _trace_from_turns(self) -> Sample:
        """A conversation's tool calls are its agent trace when no trace is given."""
        if self.trace is None and self.turns:
            self.trace = trace_from_turns(self.turns)
        return self

    @field_validator(*TEXT_FIELDS, mode="before")
    @classmethod
    def _number_as_text(cls, value: Any) -> Any:
        return _text_of_number(value)

    @field_validator(*TEXT_LIST_FIELDS, mode="before")
    @classmethod
    def _list_items_as_text(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name in ONE_IS_A_LIST and (
            isinstance(value, str) or _text_of_number(value) is not value
        ):
            value = [value]
        if isinstance(value, list):
            return [_text_of_number(v) for v in value]
        return value

    @field_validator("label", "labels", mode="before")
    @classmethod
    def _label_values(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name == "labels":
            return metric_labels(value)
        return None if value is None else label_value(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_as_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items() if v is not None}
        return value

    def has(self, field: str) -> bool:
        """True when ``field`` holds a usable value: not None, not empty, and for text not
        only white space or invisible format characters (zero-width spaces, BOM)."""
        value = getattr(self, field)
        if value is None:
            return False
        if isinstance(value, str):
            return _VISIBLE.search(value) is not None
        if isinstance(value, list | dict):
            return len(value) > 0
        return True


# ---- input limits ------------------------------------------------------------------------
class InputTooLarge(ValueError):
    """A metric read a sample field that is past an input limit; the message names the
    field, its size, the limit and the setting that raises it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


#: fields whose value is a parsed JSON document (or its text)
_JSON_FIELDS = ("expected_json", "output_json", "json_schema")
#: every field a limit applies to (tags, metadata and trace are not scored text)
LIMITED_FIELDS = (*TEXT_FIELDS, "language", *TEXT_LIST_FIELDS, *_JSON_FIELDS)


def json_extent(value: Any) -> tuple[int, int]:
    """``(size, depth)`` of a JSON value: size counts the characters of its strings and
    object keys plus one per value; depth the objects/arrays on its deepest path (a scalar
    is 0 deep, ``{"a": [1]}`` 2). Level by level: nesting costs no recursion."""
    size, depth = 0, 0
    level: list[Any] = [value]
    while level:
        size += len(level)
        below: list[Any] = []
        containers = False
        for item in level:
            if isinstance(item, str):
                size += len(item)
            elif isinstance(item, dict):
                containers = True
                size += sum(len(k) for k in item if isinstance(k, str))
                below.extend(item.values())
            elif isinstance(item, list | tuple):
                containers = True
                below.extend(item)
        if containers:
            depth += 1
        level = below
    return size, depth


def limit_problems(sample: Sample, config: AssayConfig) -> dict[str, str]:
    """Field -> why it is past an input limit of ``config``: ``max_contexts`` (items of
    ``contexts``), ``max_json_depth`` (nesting of a JSON field) and ``max_field_chars``
    (the characters of a text, of all items of a list together, or of a JSON field's
    strings and keys plus one per value). Empty when every field is within the limits."""
    values = sample.__dict__
    problems: dict[str, str] = {}
    for field in LIMITED_FIELDS:
        value = values[field]
        if value is None:
            continue
        depth = 0
        if isinstance(value, str):
            size = len(value)
        elif field in _JSON_FIELDS:
            size, depth = json_extent(value)
        else:
            size = sum(map(len, value))
        if field == "contexts" and len(value) > config.max_contexts:
            measured, limit, setting = (
                f"holds {len(value):,} items",
                config.max_contexts,
                "max_contexts",
            )
        elif depth > config.max_json_depth:
            measured, limit, setting = (
                f"nests {depth:,} levels deep",
                config.max_json_depth,
                "max_json_depth",
            )
        elif size > config.max_field_chars:
            measured, limit, setting = (
                f"has {size:,} characters",
                config.max_field_chars,
                "max_field_chars",
            )
        else:
            continue
        problems[field] = f"{field} {over_limit(measured, limit, setting)}"
    return problems


class LimitedSample(Sample):
    """A sample whose fields past an input limit cannot be read: reading one raises
    `InputTooLarge`, so exactly the metrics that use the field fail, with the reason,
    before any work on it. Made by `limited`; the other fields read as usual."""

    _over_limit: dict[str, str] = PrivateAttr(default_factory=dict)

    def __getattribute__(self, name: str) -> Any:
        if name in _LIMITED:
            over = object.__getattribute__(self, "__pydantic_private__")["_over_limit"]
            if name in over:
                raise InputTooLarge(name, over[name])
        return super().__getattribute__(name)


_LIMITED = frozenset(LIMITED_FIELDS)


def limited(sample: Sample, problems: dict[str, str]) -> LimitedSample:
    """A `LimitedSample` holding the same values as ``sample`` (nothing is copied or
    validated again) whose fields in ``problems`` raise `InputTooLarge` when read."""
    view = LimitedSample.model_construct(_fields_set=sample.model_fields_set, **sample.__dict__)
    view._over_limit = dict(problems)
    return view
