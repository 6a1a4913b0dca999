"""Reliability metrics (chatbot hub "Reliability Metrics"): output stability across repeated
runs, output validity, JSON Schema compliance and determinism. Values are 0..1 (the
specification's 0-100 is presentation), higher is better. The two similarity metrics
(``output_stability``, ``determinism_score``) are `EmbeddedMetric`s: they declare the
response and the previous responses as embed asks, embedded once per chunk with every
other metric's texts.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine import Answers
from assay.engine.resources import Resources
from assay.metrics.base import Metric, Source, clamp01
from assay.metrics.registry import register
from assay.metrics.semantic import EmbeddedMetric, cosine
from assay.text.quality import quality_checks

__all__ = ["STABILITY_WINDOW", "normalise_whitespace", "validate_json"]

#: the chatbot hub compares with the last 5 previous responses
STABILITY_WINDOW = 5
#: validation errors kept as evidence (the count is always complete)
MAX_ERRORS_SHOWN = 20
#: longest validation or parse message kept as evidence
MAX_MESSAGE_CHARS = 500
#: schemas whose checked validator is kept (the oldest is dropped beyond this)
MAX_CACHED_VALIDATORS = 64

_WS = re.compile(r"\s+")
# the info string is followed by spaces/tabs only ([^\S\n]*, not \s*): otherwise a fence
# followed by many blank lines is re-split at every newline (quadratic)
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[^\S\n]*\n(.*?)\n?```\s*$", re.DOTALL)


def normalise_whitespace(text: str | None) -> str:
    """Runs of whitespace collapsed to one space, ends trimmed (case is kept)."""
    return _WS.sub(" ", text or "").strip()


def _quality(sample: Sample, res: Resources) -> tuple[float, dict[str, bool]]:
    checks = quality_checks(
        sample.response,
        min_length=res.config.min_response_length,
        max_length=res.config.max_response_length,
    )
    return sum(checks.values()) / len(checks), checks


def _json_path(path: Sequence[Any]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


# checked validators by the repr of their schema (keys in order: the order of the
# keywords is the order of the errors of one path); built from a copy of the schema, so a
# caller that changes its schema afterwards never changes a cached validator
_validators: dict[str, Any] = {}
_validators_lock = threading.Lock()


def _validator(schema: dict[str, Any]) -> Any:
    """The jsonschema validator of ``schema``, its schema checked; kept per schema (about
    1.4 ms to build and check). Raises ``jsonschema.SchemaError`` for an invalid schema."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    key = repr(schema)
    with _validators_lock:
        found = _validators.get(key)
    if found is not None:
        return found
    schema = copy.deepcopy(schema)
    cls = validator_for(schema, default=Draft202012Validator)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    with _validators_lock:
        if len(_validators) >= MAX_CACHED_VALIDATORS:
            del _validators[next(iter(_validators))]
        _validators[key] = validator
    return validator


def validate_json(instance: Any, schema: dict[str, Any]) -> list[dict[str, str]]:
    """JSON Schema validation errors of ``instance``, as ``{path, message, keyword}``.

    The validator class is chosen by the schema's ``$schema`` (Draft 4 to 2020-12), Draft
    2020-12 when it names none; ``format`` is asserted (e.g. ``"format": "email"``) where
    jsonschema has a checker for it. Errors are sorted by path. Raises
    ``jsonschema.SchemaError`` when the schema itself is invalid.
    """
    errors = sorted(
        _validator(schema).iter_errors(instance),
        key=lambda e: [str(p) for p in e.absolute_path],
    )
    return [
        {
            "path": _json_path(e.absolute_path),
            "message": _shorten(e.message),
            "keyword": str(e.validator),
        }
        for e in errors
    ]


def _shorten(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A validation message cut to ``limit`` characters (jsonschema quotes the whole failing
    value: a 1 MB string would make a 1 MB message)."""
    if len(message) <= limit:
        return message
    return f"{message[: limit - 40]}… ({len(message) - limit + 40} more characters)"


def _compared(sample: Sample, window: int | None) -> list[str]:
    """The previous responses compared with the response (the last ``window``; all when
    None); none without a response."""
    previous = sample.previous_responses or []
    if window is not None:
        previous = previous[-window:]
    return previous if sample.has("response") else []


def _similarities(sample: Sample, answers: Answers, window: int | None) -> list[float] | None:
    """Cosine of the response with each compared previous response (`_compared`), from
    the vectors of their embed asks; None without previous responses."""
    previous = _compared(sample, window)
    if not previous:
        return None
    return [cosine(answers, sample.response, p) for p in previous]  # type: ignore[arg-type]


def _texts(sample: Sample, window: int | None) -> list[str]:
    previous = _compared(sample, window)
    return [sample.response, *previous] if previous else []  # type: ignore[list-item]


@register
class OutputStability(EmbeddedMetric):
    """Mean embedding similarity of the response to the last 5 previous responses to the same query.

    Formula (chatbot hub): ``mean(clamp01(cos(embed(response), embed(prev))) for prev in
    previous_responses[-5:])`` with the configured embedder. Fallback when there are no
    previous responses (chatbot hub): the share of passed quality checks (minimum length,
    not empty, no HTML tags, proper ending, maximum length when configured), which
    measures **well-formedness of one answer, not stability**: the result's
    ``details.measure`` says which ran (``similarity`` or ``quality_checks``) and ``method``
    is ``local`` or ``pattern``. Range 0..1, higher is better; None without a response.
    Weakness: embedding similarity is topical, so two answers with different numbers can
    score as stable; use ``determinism_score`` for exact repeatability.
    """

    name = "output_stability"
    family = "reliability"
    requires = ("response",)
    suites = ("reliability",)
    source = Source.CHATBOT_HUB
    default_threshold = 0.7

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        return _texts(sample, STABILITY_WINDOW)

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        sims = _similarities(sample, answers, STABILITY_WINDOW)
        if sims is None:
            ratio, checks = _quality(sample, res)
            return self.result(
                ratio,
                method="pattern",
                measure="quality_checks",
                reason=(
                    "no previous responses: quality-check pass ratio (the chatbot hub's fallback)"
                ),
                checks=checks,
                passed=sum(checks.values()),
                total=len(checks),
            )
        scores = [clamp01(s) for s in sims]
        return self.result(
            float(np.mean(scores)),
            model=answers.embedder,
            measure="similarity",
            compared=len(scores),
            similarities=[round(s, 6) for s in scores],
        )


@register
class OutputValidity(Metric):
    """Share of the specification's response quality checks the response passes.

    Formula (chatbot hub): ``passed_checks / total_checks`` over `assay.text.quality.
    quality_checks`: has_minimum_length (``MIN_RESPONSE_LENGTH``, default 10 characters),
    is_not_empty, has_no_html_tags, ends_properly, and within_max_length when
    ``MAX_RESPONSE_LENGTH`` is set. Range 0..1, higher is better; None without a response
    (a blank response is missing input). Weaknesses: ``has_no_html_tags`` fails any "<" or
    ">" (maths, arrows); ``ends_properly`` fails answers that end in a list, code or an
    emoji; it says nothing about correctness.
    """

    name = "output_validity"
    family = "reliability"
    requires = ("response",)
    suites = ("reliability",)
    source = Source.CHATBOT_HUB
    default_threshold = 0.75

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        ratio, checks = _quality(sample, res)
        failed = [name for name, ok in checks.items() if not ok]
        return self.result(
            ratio,
            method="pattern",
            checks=checks,
            passed=len(checks) - len(failed),
            total=len(checks),
            failed=failed,
        )


@register
class SchemaCompliance(Metric):
    """1 when the output is JSON that validates against the given JSON Schema, else 0.

    With ``json_schema``: the instance is ``output_json`` when given, else the response
    parsed with ``json.loads``; it is validated with ``jsonschema`` (validator chosen by the
    schema's ``$schema``, Draft 2020-12 by default, ``format`` asserted). Value 1 when it
    parses and has no validation error, 0 otherwise; ``details.errors`` lists each error
    with its JSON path (``$.items[0].price``), message and keyword, or the parse error. A
    response wrapped in a Markdown code fence is not JSON and scores 0, with a hint in
    details. The chatbot hub's rule ("parses as JSON when schema.type is object") is the
    degenerate case of a schema with no constraints. A response that ``json.loads`` refuses
    for other reasons (a number over Python's 4,300-digit limit, nesting deeper than the
    parser's stack) is not JSON either: 0 with the reason. Messages in ``details.errors``
    are cut to 500 characters (jsonschema quotes the failing value). None when the schema
    itself is invalid (the reason gives the schema error), or when a recursive schema meets
    an instance too deep to validate.

    Without a schema, the specification's proxy runs: the quality-check pass ratio (as
    ``output_validity``), labelled ``details.measure = "quality_checks"`` and method
    ``pattern``; it does not measure structure at all. Range 0..1, higher is better; None
    without any output. Weaknesses: binary, so one wrong field fails like an empty answer (the
    error list says how far off it is); a schema checks shape and types, not whether the
    values are right; ``format`` values without a jsonschema checker pass unchecked.
    """

    name = "schema_compliance"
    family = "reliability"
    suites = ("reliability",)
    source = Source.CHATBOT_HUB
    default_threshold = 1.0

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        if sample.json_schema is None:
            if not sample.has("response"):
                return self.na("missing input: response (and no json_schema)", missing=["response"])
            ratio, checks = _quality(sample, res)
            return self.result(
                ratio,
                method="pattern",
                measure="quality_checks",
                reason="no json_schema: quality-check pass ratio (the chatbot hub's proxy)",
                checks=checks,
            )
        if sample.output_json is not None:
            instance, source = sample.output_json, "output_json"
        elif sample.has("response"):
            text = sample.response or ""
            try:
                instance, source = json.loads(text), "response"
            # ValueError beyond JSONDecodeError: a number over Python's 4,300-digit limit;
            # RecursionError: nesting deeper than the parser's stack
            except (ValueError, RecursionError) as exc:
                details: dict[str, Any] = {
                    "measure": "json_schema",
                    "source": "response",
                    "errors": [
                        {
                            "path": "$",
                            "message": _shorten(f"not valid JSON: {exc}"),
                            "keyword": "json",
                        }
                    ],
                }
                fenced = _FENCE.match(text)
                if fenced:
                    try:
                        json.loads(fenced.group(1))
                        details["hint"] = "the response is JSON wrapped in a Markdown code fence"
                    except (ValueError, RecursionError):
                        pass
                return self.result(0.0, method="reference", **details)
        else:
            return self.na(
                "missing input: response or output_json", missing=["response", "output_json"]
            )
        from jsonschema import SchemaError

        try:
            errors = validate_json(instance, sample.json_schema)
        except SchemaError as exc:
            return self.na(f"invalid json_schema: {_shorten(exc.message)}", measure="json_schema")
        except RecursionError:  # a recursive schema ($ref to itself) over a very deep instance
            return self.na(
                "the output nests too deeply to validate against this (recursive) json_schema",
                measure="json_schema",
            )
        return self.result(
            0.0 if errors else 1.0,
            method="reference",
            measure="json_schema",
            source=source,
            error_count=len(errors),
            errors=errors[:MAX_ERRORS_SHOWN],
        )


@register
class DeterminismScore(EmbeddedMetric):
    """Share of repeated runs whose response is identical to this one (whitespace-normalised).

    With ``previous_responses`` (earlier answers to the same input, all of them, not only
    the last 5): value = ``identical / len(previous_responses)``, where identical means
    equal after collapsing whitespace and trimming (case and punctuation count).
    Components: ``exact_share`` (the value) and ``mean_similarity`` (mean clamped cosine
    similarity to the previous responses, the embedding view of near-repeats); details give
    the counts and the number of distinct outputs among all runs. Exact identity is the
    value because determinism means the same output, and one changed number is a different
    answer however similar its embedding.

    Without previous responses, the specification's proxy runs (``determinism_score =
    output_stability``, itself the quality-check fallback then), labelled
    ``details.measure = "proxy:output_stability"``; it does not measure determinism. Range
    0..1, higher is better; None without a response. Weakness: needs the repeats to share
    input and settings (temperature, seed); a sampled model scores low by design.
    """

    name = "determinism_score"
    family = "reliability"
    requires = ("response",)
    suites = ("reliability",)
    source = Source.CHATBOT_HUB
    components = ("exact_share", "mean_similarity")

    def texts(self, sample: Sample, config: AssayConfig) -> list[str]:
        return _texts(sample, None)

    def reduce(self, sample: Sample, answers: Answers, res: Resources) -> MetricResult:
        sims = _similarities(sample, answers, None)
        if sims is None:  # output_stability's fallback: it reads no vector
            proxy = _STABILITY.reduce(sample, answers, res)
            return self.result(
                proxy.value,
                method=proxy.method,
                measure="proxy:output_stability",
                reason="no previous responses: the chatbot hub's proxy (output_stability fallback)",
                proxy_details=proxy.details,
            )
        current = normalise_whitespace(sample.response)
        previous = [normalise_whitespace(p) for p in sample.previous_responses or []]
        identical = sum(1 for p in previous if p == current)
        exact = identical / len(previous)
        mean_sim = float(np.mean([clamp01(s) for s in sims]))
        return self.result(
            exact,
            components={"exact_share": exact, "mean_similarity": mean_sim},
            method="pattern",
            model=answers.embedder,
            measure="exact_repeats",
            identical=identical,
            compared=len(previous),
            distinct_outputs=len({current, *previous}),
        )


#: the output_stability whose fallback determinism_score reports (one instance: it keeps
#: its signatures, built once)
_STABILITY = OutputStability()
