"""The JSON API (``/api``): statistics, runs, history, comparison, catalogue, scoring,
JSON evaluation and the field-strategy configurations of the JSON comparison specification.

Every response is plain JSON. Metric values are on the canonical scale (``avg``,
``value``); ``display`` is the dashboard's view (ratio ×100, units kept otherwise).
Errors are ``{"detail": message}`` with 400 (host not allowed), 401 (token missing),
403 (cross-site write), 404 (no such run/config), 413 (too large), 415 (a write that is
not JSON) or 503 (a model the scoring needs is not installed); 422 (invalid input) is
``{"detail": [{"loc": [...], "msg": message, "type": kind}]}``, the message naming the
field and the valid values (see `assay.server.errors`).
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import Response
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
)

from assay.core import jsonout
from assay.core.jsonout import to_jsonable
from assay.core.redaction import known_secrets, redact
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.metrics.registry import list_metrics, metric_names, suite_names
from assay.server.app_state import app_resources
from assay.server.errors import ERROR_RESPONSES, StrictJSONResponse, store_read
from assay.server.inputs import MAX_HOURS, MAX_OFFSET, parse_json_file, reject_unencodable
from assay.server.transcripts import sample_view
from assay.server.views import compare_view
from assay.store.db import Store

__all__ = ["CONFIG_NAME_PATTERN", "router"]

router = APIRouter(prefix="/api", responses=ERROR_RESPONSES)

CONFIG_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
#: largest sample index (the store's 32-bit integer column on PostgreSQL)
MAX_SAMPLE_INDEX = 2**31 - 1
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Rows to skip.")]
ConfigName = Annotated[
    str,
    Path(
        pattern=CONFIG_NAME_PATTERN,
        description="Letters, digits, '_', '.', '-'; up to 128 characters.",
    ),
]


#: a strategy name, any letter case (EXACT, fuzzy, Semantic, ignore, Numeric)
STRATEGY_NAME_PATTERN = (
    "^(?:"
    + "|".join(
        "".join(f"[{c}{c.lower()}]" for c in name)
        for name in ("EXACT", "FUZZY", "SEMANTIC", "IGNORE", "NUMERIC")
    )
    + ")$"
)
#: a field path: non-empty segments joined by '.', with '\\' escaping the next character
FIELD_PATH_PATTERN = r"^(?:[^.\\]|\\[\s\S]|\\$)+(?:\.(?:[^.\\]|\\[\s\S]|\\$)+)*$"
STRATEGIES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "propertyNames": {"type": "string", "pattern": FIELD_PATH_PATTERN},
    "additionalProperties": {"type": "string", "pattern": STRATEGY_NAME_PATTERN},
}
#: declared exactly in the schema; validated by `StrategyConfig`, whose errors name the
#: field, the closest strategy and the valid values
Strategies = Annotated[dict[str, str], WithJsonSchema(STRATEGIES_SCHEMA)]
IMPORT_BODY_SCHEMA: dict[str, Any] = {
    "anyOf": [
        STRATEGIES_SCHEMA,
        {
            "type": "object",
            "properties": {"field_strategies": STRATEGIES_SCHEMA},
            "required": ["field_strategies"],
            "additionalProperties": False,
        },
    ]
}
Unit = Annotated[float, Field(ge=0, le=1)]


def _store(request: Request) -> Store:
    return request.app.state.store


# ---- reads of the results store ---------------------------------------------------------
@router.get("/statistics", tags=["results"])
def statistics(
    request: Request,
    hours: Annotated[
        float | None, Query(gt=0, le=MAX_HOURS, description="Only the last N hours.")
    ] = None,
    run_id: Annotated[str | None, Query(description="Only this run.")] = None,
) -> dict[str, Any]:
    """The chatbot hub's overview: pass rate, average duration (s), timeout rate, health,
    safety (the hub's formula) and safety index, metric averages, and the 24 h trends (%)."""
    with store_read():
        return _store(request).statistics(run_id=run_id, hours=hours)


@router.get("/runs", tags=["results"])
def list_runs(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    """Runs, newest first, with sample counts, pass rates and average durations."""
    return _store(request).runs(limit=limit, offset=offset)


@router.get("/runs/{run_id}", tags=["results"])
def get_run(
    request: Request,
    run_id: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    offset: Offset = 0,
) -> dict[str, Any]:
    """One run: its summary, statistics, and per-sample results with evidence (paginated
    by ``limit``/``offset`` over sample indices)."""
    with store_read():
        detail = _store(request).run_detail(run_id, limit=limit, offset=offset)
    if detail is None:
        raise HTTPException(404, f"no run {run_id!r}")
    detail["page"] = {"limit": limit, "offset": offset, "total": detail["run"]["samples"]}
    return detail


@router.get("/runs/{run_id}/samples/{index}", tags=["results"])
def get_sample(
    request: Request,
    run_id: str,
    index: Annotated[int, Path(ge=0, le=MAX_SAMPLE_INDEX, description="The sample index.")],
) -> dict[str, Any]:
    """One stored sample of a run, as the run page shows it: texts, scores with evidence,
    and ``conversation`` (its turns in order, each with its tool calls and the per-turn
    scores and intentions of the conversation metrics) and ``agent`` (its steps, reference
    calls and each tool-call metric's matches); each None when the sample has none."""
    with store_read():
        sample = _store(request).sample_detail(run_id, index)
    if sample is None:
        raise HTTPException(404, f"no sample {index} in run {run_id!r}")
    return sample_view(sample)


@router.get("/runs/{run_id}/groups", tags=["results"])
def run_groups(
    request: Request,
    run_id: str,
    tag: Annotated[
        str, Query(min_length=1, max_length=128, description="Tag to group by.")
    ] = "method",
) -> dict[str, Any]:
    """The RAG specification's tables: metric means of a run per value of a tag (``method``,
    ``question_type``, ...), with sample counts, pass rates and label counts."""
    groups = _store(request).tag_groups(run_id, tag)
    if groups is None:
        raise HTTPException(404, f"no run {run_id!r}")
    return groups


@router.get("/history", tags=["results"])
def history(
    request: Request,
    hours: Annotated[float, Query(gt=0, le=24 * 366)] = 24,
    metric_type: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=32,
            description="Only metrics of this family (the chatbot hub's metric_type), e.g. safety.",
        ),
    ] = None,
) -> dict[str, Any]:
    """Hourly buckets over the last ``hours``: tests (total, passed, pass rate, average
    duration) and each metric's average (of one family with ``metric_type``)."""
    with store_read():
        return _store(request).history(hours, metric_type=metric_type)


@router.get("/compare", tags=["results"])
def compare(
    request: Request,
    a: Annotated[str, Query(min_length=1, description="RUN_ID, key=value or RUN_ID:key=value")],
    b: Annotated[str, Query(min_length=1, description="RUN_ID, key=value or RUN_ID:key=value")],
) -> dict[str, Any]:
    """Selection B against selection A per metric: means, difference (B − A), a 95%
    bootstrap CI, and a sign-flip p-value where samples pair up by id."""
    from assay.store.selections import Selection

    return {
        "a": Selection.parse(a).label(),
        "b": Selection.parse(b).label(),
        "rows": compare_view(_store(request), a, b),
    }


@router.get("/metrics", tags=["catalogue"])
def metrics(
    family: Annotated[str | None, Query(description="Only this family.")] = None,
) -> list[dict[str, Any]]:
    """The metric catalogue: name, family, description, inputs, range, unit, polarity."""

    return [cls.info() for cls in list_metrics(family)]


# ---- scoring -----------------------------------------------------------------------------
def _names_schema(names: list[str]) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", "enum": names}}


class EvaluateRequest(BaseModel):
    """Samples to score and what to score them with."""

    model_config = ConfigDict(extra="forbid", strict=True)

    samples: list[dict[str, Any]] = Field(
        min_length=1,
        description="Sample objects (the specifications' field names too: question/answer/...).",
    )
    metrics: Annotated[list[str], WithJsonSchema(_names_schema(metric_names()))] = Field(
        default_factory=list,
        description="Metric names or aliases (a result is reported under the name asked for).",
    )
    suites: Annotated[list[str], WithJsonSchema(_names_schema(suite_names()))] = Field(
        default_factory=list,
        validation_alias=AliasChoices("suites", "suite"),
        description="Suite names (a single string is accepted too).",
    )
    store: bool = Field(False, description="Also store the results as a run (source 'api').")
    run_name: str | None = Field(None, max_length=256)
    tags: dict[str, str] = Field(default_factory=dict, description="Tags of the stored run.")

    @field_validator("suites", mode="before")
    @classmethod
    def _one_suite(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def _sample_errors(exc: ValidationError, index: int) -> list[dict[str, Any]]:
    """One 422 item per problem, located in the request body (``samples[i].field``)."""
    out = []
    for err in exc.errors():
        loc = list(err.get("loc", ()))
        where = ".".join(str(p) for p in loc)
        out.append(
            {
                "loc": ["body", "samples", index, *loc],
                "msg": f"samples[{index}]{'.' + where if where else ''}: {err.get('msg')}",
                "type": err.get("type", "value_error"),
            }
        )
    return out


def _result_json(result: MetricResult, secrets: list[str]) -> dict[str, Any]:
    """A result as the store keeps it: evidence with known secret values cut out."""
    data = to_jsonable(result.to_dict())
    data["details"] = redact(data.get("details"), secrets, by_name=False)
    return data


@router.post("/evaluate", tags=["scoring"])
def evaluate(request: Request, req: EvaluateRequest) -> dict[str, Any]:
    """Score posted samples: per-sample results (value, method, reason, evidence) and a
    per-metric summary; with ``store: true`` the run is stored (source ``api``).

    Body: ``{"samples": [...], "metrics": [...], "suites": [...] | "suite": "...",
    "store": false, "run_name": null, "tags": {}}``. Default metrics: the ``base`` suite.
    """
    from assay.core.extras import ModelUnavailable
    from assay.evaluation.runner import evaluate as run_evaluate
    from assay.judge.client import JudgeUnreachable
    from assay.metrics.registry import resolve_metrics
    from assay.store.recorder import RunRecorder, sample_status

    limit = request.app.state.max_samples
    if len(req.samples) > limit:
        raise HTTPException(
            422,
            [
                {
                    "loc": ["body", "samples"],
                    "msg": f"{len(req.samples)} samples posted; this server scores at most "
                    f"{limit} per call",
                    "type": "too_long",
                }
            ],
        )
    reject_unencodable(req.samples, ["body", "samples"])
    reject_unencodable(req.tags, ["body", "tags"])
    samples: list[Sample] = []
    errors: list[dict[str, Any]] = []
    for i, raw in enumerate(req.samples):
        try:
            samples.append(Sample.model_validate(raw))
        except ValidationError as exc:
            errors.extend(_sample_errors(exc, i))
    if errors:
        raise HTTPException(422, errors)
    try:
        chosen = resolve_metrics(req.metrics or None, req.suites or None)
    except KeyError as exc:
        raise HTTPException(422, str(exc.args[0]) if exc.args else str(exc)) from None

    resources = app_resources(request.app)
    store: Store = request.app.state.store
    run_id = uuid.uuid4().hex[:12]
    recorder = None
    if req.store:
        store.start_run(
            run_id,
            name=req.run_name,
            source="api",
            metrics=[m.name for m in chosen],
            tags=req.tags,
        )
        recorder = RunRecorder(store, run_id, chosen, resources.config)
    with request.app.state.evaluate_lock:
        try:
            evaluation = run_evaluate(
                samples, metrics=chosen, resources=resources, on_sample=recorder
            )
        except Exception as exc:
            if recorder is not None:
                store.finish_run(run_id, status="error")
            if isinstance(exc, ModelUnavailable | JudgeUnreachable):
                raise HTTPException(503, str(exc)) from None
            raise
    if recorder is not None:
        store.finish_run(run_id, status="finished", judge_usage=evaluation.judge_usage)
    results = []
    secrets = known_secrets(resources.config)
    for i, (sample, row) in enumerate(zip(evaluation.samples, evaluation.results, strict=True)):
        results.append(
            {
                "index": i,
                "id": sample.id,
                "status": sample_status(evaluation.metrics, row, evaluation.config),
                "scores": {name: _result_json(r, secrets) for name, r in row.items()},
            }
        )
    return {
        "run_id": run_id if req.store else None,
        "stored": req.store,
        "metrics": [m.name for m in evaluation.metrics],
        "summary": [to_jsonable(s.to_dict()) for s in evaluation.summary()],
        "results": results,
    }


class RQSWeightsBody(BaseModel):
    """Weights of the RQS composite; omitted ones keep their defaults."""

    model_config = ConfigDict(extra="forbid", strict=True)

    accuracy: Annotated[float, Field(ge=0)] = 0.45
    completeness: Annotated[float, Field(ge=0)] = 0.25
    hallucination: Annotated[float, Field(ge=0)] = 0.15
    safety: Annotated[float, Field(ge=0)] = 0.15


class JsonEvalRequest(BaseModel):
    """A ground-truth JSON and an output JSON, compared field by field (JSON comparison)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    expected: Any = Field(
        validation_alias=AliasChoices("gt", "expected", "ground_truth", "expected_json"),
        description="The ground-truth JSON (alias: gt).",
    )
    output: Any = Field(
        validation_alias=AliasChoices("output", "aio", "output_json", "aio_json"),
        description="The model's JSON output (alias: aio).",
    )
    strategies: Strategies | None = Field(
        None,
        description="Field -> EXACT | FUZZY | SEMANTIC | IGNORE | NUMERIC (wins over `config`).",
    )
    config: str | None = Field(None, description="Name of a stored field-strategy config.")
    fuzzy_threshold: Unit = 0.85
    semantic_threshold: Unit = 0.80
    numeric_rel_tol: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="NUMERIC: |output − GT| <= max(abs tol, this × |GT|); default 1e-6.",
    )
    numeric_abs_tol: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="NUMERIC: absolute tolerance; default 0.",
    )
    safety_score: Unit = 1.0
    weights: RQSWeightsBody | None = Field(None, description="RQS weights (each >= 0).")
    flatten: bool = Field(True, description="Compare nested objects field by field.")


@router.post("/json-eval", tags=["scoring"], response_model=dict[str, Any])
def json_eval(request: Request, body: JsonEvalRequest) -> Response:
    """Completeness, hallucination, accuracy and RQS of one JSON output with the per-field
    breakdown (strategy, source, similarity, threshold, score, reason) and key buckets."""
    from assay.core.extras import ModelUnavailable
    from assay.structured import (
        EvalOptions,
        LocalFieldScorer,
        RQSWeights,
        StrategyConfig,
        StrategyConfigError,
        evaluate_json,
    )

    mapping: dict[str, Any] = {}
    if body.config is not None:
        stored = _store(request).get_strategy_config(body.config)
        if stored is None:
            raise HTTPException(404, f"no field-strategy config {body.config!r}")
        mapping.update(stored)
    mapping.update(body.strategies or {})
    try:
        config = StrategyConfig.from_data(mapping)
        options = EvalOptions(
            fuzzy_threshold=body.fuzzy_threshold,
            semantic_threshold=body.semantic_threshold,
            **body.model_dump(include={"numeric_rel_tol", "numeric_abs_tol"}, exclude_none=True),
            weights=RQSWeights.coerce(body.weights.model_dump() if body.weights else None),
            flatten=body.flatten,
        )
        scorer = LocalFieldScorer(app_resources(request.app))
        result = evaluate_json(
            body.expected,
            body.output,
            config,
            options=options,
            scorer=scorer,
            safety_score=body.safety_score,
        )
    except StrategyConfigError as exc:
        raise HTTPException(422, str(exc)) from None
    except ModelUnavailable as exc:
        raise HTTPException(503, str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise HTTPException(422, str(exc)) from None
    # written directly: the values compared may nest deeper than pydantic serialises
    return StrictJSONResponse(result.to_dict())


# ---- field-strategy configurations (JSON comparison) ----------------------------------------
class StrategiesBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    strategies: Strategies = Field(
        description=(
            "Field path -> EXACT | FUZZY | SEMANTIC | IGNORE | NUMERIC (case-insensitive)."
        )
    )


def _validated(data: Any, source: str | None = None) -> dict[str, str]:
    from assay.structured import StrategyConfig, StrategyConfigError

    try:
        strategies = StrategyConfig.from_data(data, source=source).to_dict()
    except StrategyConfigError as exc:
        raise HTTPException(422, str(exc)) from None
    reject_unencodable(strategies, ["body"])
    return strategies


@router.get("/field-strategies", tags=["field strategies"])
def list_field_strategies(request: Request) -> list[dict[str, Any]]:
    """Stored configurations with their strategies and last update."""
    return _store(request).list_strategy_configs()


@router.get("/field-strategies/{name}", tags=["field strategies"])
def get_field_strategies(request: Request, name: ConfigName) -> dict[str, Any]:
    """One stored configuration."""
    found = _store(request).get_strategy_config(name)
    if found is None:
        raise HTTPException(404, f"no field-strategy config {name!r}")
    return {"name": name, "strategies": found}


@router.put("/field-strategies/{name}", tags=["field strategies"])
def put_field_strategies(
    request: Request, name: ConfigName, body: StrategiesBody
) -> dict[str, Any]:
    """Create or replace a configuration (validated; strategies are stored upper-case)."""
    strategies = _validated(body.strategies)
    _store(request).put_strategy_config(name, strategies)
    return {"name": name, "strategies": strategies}


@router.delete("/field-strategies/{name}", status_code=204, tags=["field strategies"])
def delete_field_strategies(request: Request, name: ConfigName) -> Response:
    """Delete a configuration."""
    if not _store(request).delete_strategy_config(name):
        raise HTTPException(404, f"no field-strategy config {name!r}")
    return Response(status_code=204)


@router.post(
    "/field-strategies/{name}/import",
    tags=["field strategies"],
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": IMPORT_BODY_SCHEMA}},
        }
    },
)
async def import_field_strategies(request: Request, name: ConfigName) -> dict[str, Any]:
    """Import a config file: the request body is the file's JSON (an object field ->
    strategy, or ``{"field_strategies": {...}}``). Validated before it is saved; an
    unknown strategy is a 422 naming the field and the valid values."""
    data = parse_json_file(await request.body())
    strategies = _validated(data)
    _store(request).put_strategy_config(name, strategies)
    return {"name": name, "strategies": strategies, "fields": len(strategies)}


@router.get("/field-strategies/{name}/export", tags=["field strategies"])
def export_field_strategies(request: Request, name: ConfigName) -> Response:
    """Download a configuration as the JSON file ``assay json-eval --strategies`` reads."""
    found = _store(request).get_strategy_config(name)
    if found is None:
        raise HTTPException(404, f"no field-strategy config {name!r}")
    filename = re.sub(r"[^A-Za-z0-9_.\-]", "_", name) + ".json"
    return Response(
        jsonout.dumps(found, indent=2) + "\n",
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
