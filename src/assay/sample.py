"""`Sample`: the one input shape every metric family reads.

Field names are Assay's canonical names; the names used by the specification documents
(seed 000 `query/response/expected_response/retrieved_docs`, seed 003
`question/answer/ground_truth/contexts`, deepeval-style `retrieval_context`, ...) are
accepted as aliases on input. Timings are in **seconds** (seed 000 stores duration in
seconds); `*_ms` inputs are converted.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["FIELD_ALIASES", "Sample", "ToolCall"]


def _alias(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class ToolCall(BaseModel):
    """One step of an agent trace: a tool call with its outcome and latency (seconds)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    arguments: dict[str, Any] | None = None
    ok: bool = True
    error: str | None = None
    latency: float | None = Field(default=None, ge=0)
    kind: str = Field(default="tool", description="tool, llm or api")


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
}


class Sample(BaseModel):
    """One thing to evaluate: a question, the application's answer and whatever else is known.

    Every field is optional; a metric names the fields it requires and returns
    ``None`` with a reason when one is absent. Unknown input keys are kept in
    ``metadata`` so nothing a user supplied is lost.
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
    duration: float | None = Field(default=None, ge=0, description="End-to-end time, seconds.")
    first_token_time: float | None = Field(
        default=None, ge=0, description="Time to first token, seconds."
    )
    llm_latency: float | None = Field(default=None, ge=0, description="Seconds in LLM calls.")
    tool_latency: float | None = Field(default=None, ge=0, description="Seconds in tool calls.")
    api_latency: float | None = Field(default=None, ge=0, description="Seconds in API calls.")
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
    # grouping and anything else
    tags: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _normalise_input(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in ("duration", "first_token_time", "llm_latency", "tool_latency", "api_latency"):
            ms_key = f"{name}_ms"
            if ms_key in data and data.get(name) is None:
                value = data.pop(ms_key)
                data[name] = None if value is None else float(value) / 1000.0
        if "total_latency_ms" in data and data.get("duration") is None:
            value = data.pop("total_latency_ms")
            data["duration"] = None if value is None else float(value) / 1000.0
        # tag shorthands used by seed 003's reports
        tags = dict(data.get("tags") or {})
        for key in ("method", "question_type", "model", "run"):
            if key in data and key not in cls.model_fields:
                value = data.pop(key)
                if value is not None:
                    tags.setdefault(key, str(value))
        if tags:
            data["tags"] = tags
        # unknown keys are kept, not rejected
        known = set()
        for name, field in cls.model_fields.items():
            known.add(name)
            alias = field.validation_alias
            if isinstance(alias, AliasChoices):
                known.update(a for a in alias.choices if isinstance(a, str))
        extra = {k: data.pop(k) for k in list(data) if k not in known}
        if extra:
            metadata = dict(data.get("metadata") or {})
            metadata.update(extra)
            data["metadata"] = metadata
        return data

    @field_validator("contexts", "expected_sources", "known_facts", "candidates", mode="before")
    @classmethod
    def _one_string_is_a_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        return value

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_as_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items() if v is not None}
        return value

    def has(self, field: str) -> bool:
        """True when ``field`` holds a usable value (not None, not blank, not empty)."""
        value = getattr(self, field)
        if value is None:
            return False
        if isinstance(value, str):
            return bool(value.strip())
        if isinstance(value, list | dict):
            return len(value) > 0
        return True
