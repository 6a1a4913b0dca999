"""The JSON API of the annotation queue and the agreement report (``/api/runs/{run_id}/...``).

- ``GET /api/runs/{run_id}/label-queue?metric=M&annotator=A[&order=uncertain|disagreement|random]
  [&seed=0][&skip=I...][&limit=2]``: the next ``limit`` samples annotator A has
  not labelled for metric M, in the order asked (`assay.store.annotation_queue`; the
  indices in ``skip`` come last), with the question to ask (`label_views.metric_question`),
  the order that ran (``order_used``, and ``note`` when it is not the one asked for), the
  threshold the order used and the counts (``remaining``, ``total``, ``labelled``,
  ``no_value``). Each item holds the sample's texts, contexts, turns and
  steps and NO metric value: the person answers before seeing what the metric said.
- ``POST /api/runs/{run_id}/labels`` with ``{"metric", "index", "label", "annotator",
  "note"?, "scale"?}``: stores a label of the sample at ``index`` (`Store.add_label` with
  the run, the sample's id and key, the raw label as given and its value, `label_value`
  with the scale); 201 with the stored label and, now that the person has answered, the
  metric's value, the threshold and the metric's own verdict (``predicted``, ``agrees``).
- ``GET /api/runs/{run_id}/labels?metric=M``: the labels of the run's samples for M (each
  with the sample's ``index`` in this run) and the agreement between annotators
  (Cohen's kappa for two, Fleiss' for more, with n overlapping items).
- ``DELETE /api/runs/{run_id}/labels/{label_id}?annotator=A``: undo a label (only its own
  annotator's: 409 otherwise); 204.
- ``GET /api/runs/{run_id}/agreement?metric=M[&methods=true]``: the stored labels against
  the run's stored values of M (`label_views.labels_vs_metric`: AUROC with its interval,
  balanced accuracy and Cohen's kappa at the run's threshold, or Spearman and Kendall for
  graded labels, n), the annotators' agreement, a validity card for this data set
  beside the shipped one (``shipped_card``) and the labels themselves (``labels``, each
  with its sample's ``index``, annotator and note). With ``methods=true``, also ``by_method``:
  `assay.evaluation.agreement.agreement_report` on the run's labelled samples (rebuilt
  from the store, each with its combined label), scoring them again with every method
  that can score M (the offline estimators, and the judge when the server has one) under
  the server's configuration and the run's thresholds: one entry of its ``metrics`` (keys
  in that module's docstring), or ``{"error": ...}`` when it cannot be made. This runs
  the models, so it takes the scoring lock of ``/api/evaluate`` and answers 503 when a
  model or the judge it needs is missing.

Writes go through the request guard like every other write (`assay.server.guard`:
same-site Origin, a JSON body, the bearer token when the server has one). Annotator names
and notes are stored as given (bound parameters) and the pages print them as text.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from assay.core.labels import LabelError, LabelScale, label_value
from assay.server.api import MAX_SAMPLE_INDEX
from assay.server.app_state import app_resources
from assay.server.errors import ERROR_RESPONSES, ErrorMessage
from assay.server.inputs import reject_unencodable
from assay.server.label_views import (
    annotator_agreement,
    consensus_labels,
    label_json,
    labels_vs_metric,
    metric_question,
    predicted_label,
    queue_item,
    shipped_card,
)
from assay.store.annotation_queue import (
    QueueOrder,
    annotation_queue,
    annotator_labels,
    queue_rows,
    queue_threshold,
    run_facts,
)
from assay.store.db import Store
from assay.store.labels import FILE_ANNOTATOR, TEXT_LIMITS, StoredLabel
from assay.store.queries import display_value, metric_meta

__all__ = ["ANNOTATOR_PATTERN", "METRIC_PATTERN", "SCALE_PATTERN", "router"]

router = APIRouter(prefix="/api", responses=ERROR_RESPONSES, tags=["labels"])

#: a metric name as stored (letters, digits, '_', '.', '-')
METRIC_PATTERN = r"^[A-Za-z0-9_.\-]{1,128}$"
#: an annotator's name: 1-64 characters, no control characters, not blank at either end
ANNOTATOR_PATTERN = r"^[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]{0,62}[^\s\x00-\x1f\x7f])?$"
#: a rating scale such as 1-5 or 0-10
SCALE_PATTERN = r"^-?\d{1,6}(?:\.\d{1,6})?-\-?\d{1,6}(?:\.\d{1,6})?$"
CONFLICT = {409: {"model": ErrorMessage, "description": "The label cannot be given or undone."}}

MetricName = Annotated[str, Query(pattern=METRIC_PATTERN, description="A metric of the run.")]
Annotator = Annotated[
    str,
    Query(pattern=ANNOTATOR_PATTERN, description="The annotator's name (1-64 characters)."),
]


def _store(request: Request) -> Store:
    return request.app.state.store


def _refuse_file_annotator(annotator: str, loc: list[str | int]) -> None:
    if annotator == FILE_ANNOTATOR:
        raise HTTPException(
            422,
            [
                {
                    "loc": loc,
                    "msg": f"'{FILE_ANNOTATOR}' names the labels read from data files: "
                    "give a person's name",
                    "type": "value_error",
                }
            ],
        )


def _scale(text: str | None, loc: list[str | int]) -> LabelScale | None:
    if text is None:
        return None
    try:
        return LabelScale.parse(text)
    except LabelError as exc:
        raise HTTPException(422, [{"loc": loc, "msg": str(exc), "type": "value_error"}]) from None


def _facts(store: Store, run_id: str) -> dict[str, Any]:
    facts = run_facts(store, run_id)
    if facts is None:
        raise HTTPException(404, f"no run {run_id!r}")
    return facts


def _known_metric(facts: dict[str, Any], metric: str) -> None:
    if metric not in facts["metrics"]:
        shown = ", ".join(facts["metrics"]) or "none"
        raise HTTPException(
            404, f"run {facts['id']!r} has no values of metric {metric!r} (its metrics: {shown})"
        )


@router.get("/runs/{run_id}/label-queue")
def label_queue(
    request: Request,
    run_id: str,
    metric: MetricName,
    annotator: Annotator,
    order: Annotated[QueueOrder, Query(description="Which samples come first.")] = (
        QueueOrder.UNCERTAIN
    ),
    seed: Annotated[int, Query(ge=0, le=2**32 - 1, description="Seed of 'random'.")] = 0,
    skip: Annotated[
        list[Annotated[int, Field(ge=0, le=MAX_SAMPLE_INDEX)]],
        Query(max_length=10_000, description="Sample indices skipped: they come last."),
    ] = [],  # noqa: B006  (FastAPI copies a list default per request)
    limit: Annotated[int, Query(ge=1, le=10, description="Samples to return.")] = 2,
) -> dict[str, Any]:
    """The next samples to label for one metric and annotator, without the metric's
    values; see the module docstring for the orders and the counts."""
    store = _store(request)
    _known_metric(_facts(store, run_id), metric)
    plan = annotation_queue(store, run_id, metric, annotator, order=order, seed=seed, skipped=skip)
    if plan is None:
        raise HTTPException(404, f"no run {run_id!r}")
    items = []
    for index in plan.indices[:limit]:
        sample = store.sample_detail(run_id, index)
        if sample is not None:
            items.append(queue_item(sample))
    return {
        "run_id": run_id,
        "metric": metric,
        "annotator": annotator,
        "question": metric_question(metric),
        "higher_is_better": metric_meta(metric)[1],
        **plan.to_dict(),
        "items": items,
    }


def _whole_number(value: object) -> object:
    """A JSON number with no fraction (``7.0``) as the integer it is: JSON Schema counts it
    an integer, and the strict body would refuse the float."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class LabelBody(BaseModel):
    """A person's verdict on one sample of the run, for one metric."""

    model_config = ConfigDict(extra="forbid", strict=True)

    metric: str = Field(pattern=METRIC_PATTERN, description="The metric the verdict is for.")
    index: Annotated[int, BeforeValidator(_whole_number)] = Field(
        ge=0, le=MAX_SAMPLE_INDEX, description="The sample's index in the run."
    )
    label: bool | int | float | Annotated[str, Field(max_length=32)] = Field(
        description="1/0, true/false, a score in [0, 1], or a rating on `scale`, in the "
        "metric's own direction (1 = faithful for faithfulness, 1 = toxic for toxicity_score)."
    )
    annotator: str = Field(pattern=ANNOTATOR_PATTERN, description="Who gives the verdict.")
    note: str | None = Field(None, max_length=TEXT_LIMITS["note"], description="Optional note.")
    scale: str | None = Field(None, pattern=SCALE_PATTERN, description="e.g. 1-5.")


@router.post("/runs/{run_id}/labels", status_code=201, responses=CONFLICT)
def add_label(request: Request, run_id: str, body: LabelBody) -> dict[str, Any]:
    """Store a label of one sample of the run for one metric; the reply shows the metric's
    value and verdict on that sample (the person has answered)."""
    store = _store(request)
    facts = _facts(store, run_id)
    _known_metric(facts, body.metric)
    reject_unencodable(body.model_dump(include={"annotator", "note", "label"}), ["body"])
    _refuse_file_annotator(body.annotator, ["body", "annotator"])
    scale = _scale(body.scale, ["body", "scale"])
    try:
        value = label_value(body.label, scale)
    except LabelError as exc:
        raise HTTPException(
            422, [{"loc": ["body", "label"], "msg": str(exc), "type": "value_error"}]
        ) from None
    rows, no_value = queue_rows(store, run_id, body.metric, index=body.index)
    if not rows:
        if no_value:
            raise HTTPException(
                409,
                f"sample {body.index} of run {run_id!r} has no value of {body.metric} "
                "(N/A or an error): a label there could not be compared with it",
            )
        raise HTTPException(404, f"no sample {body.index} in run {run_id!r}")
    row = rows[0]
    raw = body.label if isinstance(body.label, str) else str(body.label).lower()
    try:  # the store refuses a text over its column's length (a stored id of 300 chars)
        stored = store.add_label(
            sample_key=row.sample_key,
            value=value,
            raw=raw,
            annotator=body.annotator,
            metric=body.metric,
            sample_id=row.sample_id,
            run_id=run_id,
            scale=body.scale,
            note=body.note or None,
        )
    except LabelError as exc:
        raise HTTPException(
            422, [{"loc": ["body"], "msg": str(exc), "type": "value_error"}]
        ) from None
    higher = metric_meta(body.metric)[1]
    threshold = queue_threshold(facts["config"], body.metric, [row.value])
    predicted = predicted_label(row, threshold, higher)
    return {
        "label": {**label_json(stored), "index": row.index},
        "metric": {
            "name": body.metric,
            "value": row.value,
            "display": display_value(body.metric, row.value),
            "method": row.method,
            "threshold": threshold.of(row),
            "threshold_source": threshold.source,
            "predicted": predicted,
            # a graded label agrees when it falls on the same side of one half
            "agrees": None if predicted is None else predicted == int(value >= 0.5),
        },
    }


@router.get("/runs/{run_id}/labels")
def run_labels(request: Request, run_id: str, metric: MetricName) -> dict[str, Any]:
    """The labels of the run's samples for a metric, and the agreement between annotators
    on them (Cohen's kappa for two annotators, Fleiss' kappa for three or more)."""
    store = _store(request)
    _known_metric(_facts(store, run_id), metric)
    rows, _ = queue_rows(store, run_id, metric)
    index_of = {r.sample_key: r.index for r in rows}
    labels = [x for x in store.labels_for_keys(index_of) if x.metric in (metric, None)]
    return {
        "run_id": run_id,
        "metric": metric,
        "labels": [{**label_json(x), "index": index_of[x.sample_key]} for x in labels],
        "agreement": annotator_agreement(labels, metric),
    }


@router.delete("/runs/{run_id}/labels/{label_id}", status_code=204, responses=CONFLICT)
def delete_label(
    request: Request,
    run_id: str,
    label_id: Annotated[int, Path(ge=1, le=MAX_SAMPLE_INDEX)],
    annotator: Annotator,
) -> Response:
    """Undo a label given on one of the run's samples; only its annotator may."""
    store = _store(request)
    _facts(store, run_id)
    found = next((x for x in store.labels_for_run(run_id) if x.id == label_id), None)
    if found is None:
        raise HTTPException(404, f"no label {label_id} on the samples of run {run_id!r}")
    if found.annotator != annotator:
        raise HTTPException(
            409, f"label {label_id} was given by another annotator: only they can undo it"
        )
    store.delete_label(label_id)
    return Response(status_code=204)


@router.get("/runs/{run_id}/agreement")
def run_agreement(
    request: Request,
    run_id: str,
    metric: MetricName,
    methods: Annotated[
        bool, Query(description="Also score the labelled samples again with every method.")
    ] = False,
) -> dict[str, Any]:
    """The run's stored values of a metric against the labels of its samples: AUROC,
    balanced accuracy and Cohen's kappa at the run's threshold (binary labels) or
    Spearman and Kendall (graded), n, the annotators' agreement, and this data set's
    validity card beside the shipped one; with ``methods``, each method's agreement."""
    return agreement_document(_store(request), run_id, metric, app=request.app if methods else None)


def _finite_thresholds(config: dict[str, Any]) -> dict[str, float]:
    """The numeric thresholds of a run's stored configuration."""
    found = config.get("thresholds")
    if not isinstance(found, dict):
        return {}
    return {
        str(name): float(value)
        for name, value in found.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }


def by_method(
    app: Any, store: Store, facts: dict[str, Any], metric: str, labels: list[StoredLabel]
) -> dict[str, Any]:
    """`agreement_report` of ``metric`` on the run's labelled samples (see the module
    docstring): the samples rebuilt from the store (`Store.run_samples`), each with its
    combined label (`consensus_labels`, as the report's other numbers), scored again per
    method under the server's configuration with the run's thresholds."""
    from assay.core.extras import ModelUnavailable
    from assay.evaluation.agreement import AgreementError, agreement_report
    from assay.judge.client import JudgeUnreachable

    combined, _, _ = consensus_labels(labels, metric)
    keys = store.run_sample_keys(facts["id"])
    try:
        rebuilt = store.run_samples(facts["id"])
    except LabelError as exc:
        return {"error": str(exc)}
    samples = [
        sample.model_copy(update={"label": None, "labels": {metric: combined[key]}})
        for (_, key), sample in zip(sorted(keys.items()), rebuilt, strict=True)
        if key in combined
    ]
    if not samples:
        return {"error": f"no sample of run {facts['id']!r} has a label for {metric}"}
    # the labels' scale, when they all share one (it rounds graded labels for kappa)
    scales = {x.scale for x in labels if x.metric in (metric, None)}
    only = next(iter(scales)) if len(scales) == 1 else None
    scale = LabelScale.parse(only) if only else None
    config = app_resources(app).config
    config = config.model_copy(
        update={"thresholds": {**config.thresholds, **_finite_thresholds(facts["config"])}}
    )
    with app.state.evaluate_lock:
        try:
            report = agreement_report(samples, [metric], config, methods=True, scale=scale)
        except (ModelUnavailable, JudgeUnreachable) as exc:
            raise HTTPException(503, str(exc)) from None
        except AgreementError as exc:
            return {"error": str(exc)}
    return report.to_dict()["metrics"][0]


def agreement_document(
    store: Store, run_id: str, metric: str, *, app: Any = None
) -> dict[str, Any]:
    """The agreement report of ``metric`` on ``run_id`` (the API's and the page's); with
    ``app``, the per-method report too (`by_method`, under that app's models)."""
    facts = _facts(store, run_id)
    _known_metric(facts, metric)
    rows, no_value = queue_rows(store, run_id, metric)
    index_of = {r.sample_key: r.index for r in rows}
    labels = store.labels_for_keys(index_of)
    threshold = queue_threshold(facts["config"], metric, [r.value for r in rows])
    higher = metric_meta(metric)[1]
    report = labels_vs_metric(rows, labels, metric, threshold, higher)
    agreement = annotator_agreement(labels, metric)
    statistic = "auroc" if report["kind"] == "binary" else "spearman"
    annotators = len({who for _, who in annotator_labels(labels, metric)})
    return {
        "run": {k: facts[k] for k in ("id", "name", "dataset")},
        "metric": metric,
        "question": metric_question(metric),
        "higher_is_better": higher,
        "samples": {"with_value": len(rows), "no_value": no_value},
        "report": report,
        "annotators": agreement,
        "this_data": {
            "dataset": facts["dataset"] or facts["name"] or facts["id"],
            "compared": f"labels of {annotators} annotator(s) vs the run's stored values",
            "statistic": statistic,
            "value": report.get(statistic),
            "ci95": report.get(f"{statistic}_ci95"),
            "n": report["n"],
            "estimator": ", ".join(sorted(report["methods"])) or None,
        },
        "shipped_card": shipped_card(metric),
        "labels": [
            {**label_json(x), "index": index_of[x.sample_key]}
            for x in labels
            if x.metric in (metric, None)
        ],
        "by_method": None if app is None else by_method(app, store, facts, metric, labels),
    }
