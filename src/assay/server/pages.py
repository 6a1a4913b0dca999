"""The dashboard pages, rendered on the server with Jinja2 (autoescape on).

Stored text (queries, responses, evidence, tag values, run names) is untrusted: the
templates only ever print it through autoescaping, and data handed to the charts goes
through a ``<script type="application/json">`` block written with ``|tojson``, which the
page's scripts parse; nothing is concatenated into HTML or JavaScript.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from assay.core import jsonout
from assay.server.errors import store_read
from assay.server.inputs import MAX_HOURS
from assay.server.label_views import metric_question
from assay.server.labelling import SCALE_PATTERN, agreement_document
from assay.server.transcripts import page_sample, readable
from assay.server.views import REPORT_TAGS, compare_view, metric_families
from assay.store.annotation_queue import QueueOrder, run_facts
from assay.store.db import Store
from assay.store.live_monitors import monitor_states
from assay.store.live_traces import LiveTraces
from assay.store.queries import metric_meta

__all__ = ["environment", "router"]

router = APIRouter(include_in_schema=False)

RUNS_PER_PAGE = 50
SAMPLES_PER_PAGE = 50
#: highest page number: (page - 1) * 50 rows stay a small SQL integer
MAX_PAGE = 10_000_000
Page = Annotated[int, Query(ge=1, le=MAX_PAGE)]
HISTORY_WINDOWS = (("24 h", 24), ("3 days", 72), ("7 days", 168), ("30 days", 720))
NA = "N/A"


# ---- formatting (Jinja filters) -----------------------------------------------------------
#: from this magnitude on a number is written as 1.70e+308, not as hundreds of digits
LARGE = 1e12
UNIT_SUFFIX = {"ms": " ms", "tokens/s": " tok/s", "ms/token": " ms/tok", "count": "", "score": ""}


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number; None for None, NaN, ±infinity,
    numbers beyond the float range and anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int past 1.8e308
        return None
    return number if math.isfinite(number) else None


def fmt_number(value: Any, digits: int = 2, suffix: str = "", signed: bool = False) -> str:
    """The one number formatter of the pages: ``N/A`` for no value or a non-finite one,
    fixed decimals, scientific notation from `LARGE` on; ``signed`` adds a ``+``."""
    number = finite(value)
    if number is None:
        return NA
    text = f"{number:.{digits}e}" if abs(number) >= LARGE else f"{number:.{digits}f}"
    return f"{'+' if signed and number > 0 else ''}{text}{suffix}"


def data_value(value: Any) -> str:
    """A number for a ``data-value`` attribute (machine-readable): empty for N/A."""
    return "" if finite(value) is None else str(value)


def fmt_percent(value: float | None, digits: int = 1) -> str:
    """A value already on the 0–100 scale, with a % sign."""
    return fmt_number(value, digits, "%")


def fmt_seconds(value: float | None) -> str:
    return fmt_number(value, 2, " s")


def _unit_suffix(unit: str, ratio_suffix: str) -> str:
    if unit in {"ratio", "bool"}:
        return ratio_suffix
    return UNIT_SUFFIX.get(unit, " " + unit)


def fmt_metric(display: float | None, unit: str) -> str:
    """A metric's display value: ratio/bool as a percentage, other units with their unit."""
    return fmt_number(display, 2, _unit_suffix(unit, "%"))


def fmt_signed(display: float | None, unit: str) -> str:
    """A difference: signed, in points for ratio/bool metrics, else in the metric's unit."""
    return fmt_number(display, 2, _unit_suffix(unit, " pts"), signed=True)


def fmt_p(value: float | None) -> str:
    number = finite(value)
    if number is not None and number < 0.001:
        return "< 0.001"
    return fmt_number(number, 3)


def breakable(text: Any) -> Markup:
    """Escaped text with a line-break opportunity after each ``_`` (long metric names)."""
    return Markup("_<wbr>").join(escape(part) for part in str(text).split("_"))


def pretty_json(value: Any) -> str:
    """Indented JSON as plain text (autoescaped when printed, unlike ``tojson``)."""
    return jsonout.dumps(value, indent=2, sort_keys=True)


def trend_info(value: float | None, higher_is_better: bool = True) -> dict[str, str]:
    """Arrow, text and good/bad class of a 24 h trend (percent change)."""
    value = finite(value)
    if value is None:
        return {
            "arrow": "–",
            "text": "no trend",
            "cls": "flat",
            "title": "no data in one of the two 24 h periods (or the earlier value was 0)",
        }
    if abs(value) < 0.05:
        return {"arrow": "→", "text": "0.0%", "cls": "flat", "title": "unchanged vs 24–48 h ago"}
    up = value > 0
    good = up == higher_is_better
    return {
        "arrow": "↑" if up else "↓",
        "text": fmt_number(value, 1, "%", signed=True),
        "cls": "good" if good else "bad",
        "title": "change of the last 24 h vs the 24 h before",
    }


def environment() -> Environment:
    """The template environment: autoescape on for every template, strict undefined."""
    env = Environment(
        loader=FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        number=fmt_number,
        percent=fmt_percent,
        seconds=fmt_seconds,
        metric=fmt_metric,
        signed=fmt_signed,
        pvalue=fmt_p,
        data=data_value,
        pretty=pretty_json,
        breakable=breakable,
        readable=readable,
    )
    env.tests["finite"] = lambda value: finite(value) is not None
    env.globals.update(trend=trend_info, NA=NA, urlencode=urlencode)
    # page data (``tojson``) is standard JSON too: a non-finite number becomes null
    env.policies["json.dumps_function"] = jsonout.dumps
    return env


_ENV = environment()


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("active", "")
    page = _ENV.get_template(template).render(
        request_path=request.url.path,
        auth_required=bool(request.app.state.api_token),
        **context,
    )
    return HTMLResponse(page, status_code=status_code)


def _store(request: Request) -> Store:
    return request.app.state.store


# ---- pages ----------------------------------------------------------------------------------
@router.get("/", response_class=HTMLResponse)
def overview(
    request: Request,
    hours: Annotated[float | None, Query(gt=0, le=MAX_HOURS)] = None,
) -> HTMLResponse:
    live = request.app.state.live
    with store_read():
        stats = _store(request).statistics(hours=hours)
        monitors = monitor_states(_store(request))
        quarantined, quarantine = LiveTraces(_store(request)).quarantined()
    return render(
        request,
        "overview.html",
        active="overview",
        stats=stats,
        monitors=monitors,
        quarantined=quarantined,
        quarantine=quarantine,
        live_warnings=live.warnings if live is not None else [],
        families=metric_families(stats["metrics"]),
        hours=hours,
        windows=HISTORY_WINDOWS,
    )


@router.get("/history", response_class=HTMLResponse)
def history_page(
    request: Request,
    hours: Annotated[float, Query(gt=0, le=24 * 366)] = 24,
) -> HTMLResponse:
    with store_read():
        data = _store(request).history(hours)
    units = {name: metric_meta(name)[0] for name in data["metrics"]}
    return render(
        request,
        "history.html",
        active="history",
        history=data,
        chart={"history": data, "units": units},
        hours=hours,
        windows=HISTORY_WINDOWS,
    )


@router.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, page: Page = 1) -> HTMLResponse:
    rows = _store(request).runs(limit=RUNS_PER_PAGE + 1, offset=(page - 1) * RUNS_PER_PAGE)
    return render(
        request,
        "runs.html",
        active="runs",
        runs=rows[:RUNS_PER_PAGE],
        page=page,
        has_next=len(rows) > RUNS_PER_PAGE,
    )


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str, page: Page = 1) -> HTMLResponse:
    store = _store(request)
    with store_read():
        detail = store.run_detail(
            run_id, limit=SAMPLES_PER_PAGE, offset=(page - 1) * SAMPLES_PER_PAGE
        )
    if detail is None:
        return render(
            request, "not_found.html", status_code=404, what="run", name=run_id, active="runs"
        )
    detail["samples"] = [page_sample(s) for s in detail["samples"]]
    total = detail["run"]["samples"]
    pages = max(1, math.ceil(total / SAMPLES_PER_PAGE))
    metric_rows = sorted(detail["statistics"]["metrics"].items())
    names = {n for s in detail["samples"] for n in s["scores"]} | {n for n, _ in metric_rows}
    metric_units = {n: metric_meta(n)[0] for n in names}
    return render(
        request,
        "run_detail.html",
        active="runs",
        detail=detail,
        run=detail["run"],
        stats=detail["statistics"],
        metric_rows=metric_rows,
        metric_units=metric_units,
        page=page,
        pages=pages,
        tables=[store.tag_groups(run_id, tag) for tag in REPORT_TAGS],
    )


@router.get("/compare", response_class=HTMLResponse)
def compare_page(
    request: Request,
    a: Annotated[str | None, Query()] = None,
    b: Annotated[str | None, Query()] = None,
    run: Annotated[str | None, Query(description="Run of the method/question tables.")] = None,
) -> HTMLResponse:
    from assay.store.selections import Selection

    store = _store(request)
    recent = store.runs(limit=50)
    rows: list[dict[str, Any]] | None = None
    labels = None
    a = (a or "").strip() or None
    b = (b or "").strip() or None
    if a and b:
        rows = compare_view(store, a, b)
        labels = (Selection.parse(a).label(), Selection.parse(b).label())
    table_run = run
    if table_run is None:
        for text in (b, a):
            if text and Selection.parse(text).run_id:
                table_run = Selection.parse(text).run_id
                break
    if table_run is None and recent:
        table_run = recent[0]["id"]
    tables = []
    if table_run is not None:
        tables = [t for t in (store.tag_groups(table_run, tag) for tag in REPORT_TAGS) if t]
    chart_rows = [
        {
            "metric": r["metric"],
            "a": r["display"]["mean_a"],
            "b": r["display"]["mean_b"],
            "unit": r["unit"],
        }
        for r in rows or []
        if r["unit"] in {"ratio", "bool"}
    ]
    return render(
        request,
        "compare.html",
        active="compare",
        a=a or "",
        b=b or "",
        rows=rows,
        labels=labels,
        recent=recent,
        table_run=table_run,
        tables=tables,
        chart={"rows": chart_rows, "labels": list(labels) if labels else ["A", "B"]},
    )


@router.get("/config/field-strategies", response_class=HTMLResponse)
def field_strategies_page(request: Request) -> HTMLResponse:
    from assay.structured import Strategy

    configs = _store(request).list_strategy_configs()
    return render(
        request,
        "field_strategies.html",
        active="config",
        configs=configs,
        page_data={
            "configs": configs,
            "strategies": [s.value for s in Strategy],
            "auth_required": bool(request.app.state.api_token),
        },
    )


# ---- the annotation queue and the agreement report (API: assay.server.labelling) ---------
#: rating keys the queue page offers: the digits of a whole-number scale within 0-9
MAX_KEY_POINT = 9
PageMetric = Annotated[str | None, Query(max_length=128)]


def _scale_points(scale: str | None) -> tuple[list[int] | None, str | None]:
    """The keys of a ``low-high`` scale (its whole points), or a reason it has none."""
    from assay.core.labels import LabelError, LabelScale

    if not scale:
        return None, None
    if not re.fullmatch(SCALE_PATTERN, scale):
        return None, "a scale is two numbers with a dash between them, e.g. 1-5"
    try:
        parsed = LabelScale.parse(scale)
    except LabelError as exc:
        return None, str(exc)
    low, high = parsed.low, parsed.high
    if low != int(low) or high != int(high) or low < 0 or high > MAX_KEY_POINT:
        return None, f"the queue's keys are the digits 0-9: scale {scale} has points beyond them"
    return list(range(int(low), int(high) + 1)), None


@router.get("/runs/{run_id}/label", response_class=HTMLResponse)
def label_queue_page(
    request: Request,
    run_id: str,
    metric: PageMetric = None,
    order: Annotated[QueueOrder, Query()] = QueueOrder.UNCERTAIN,
    scale: Annotated[str | None, Query(max_length=32)] = None,
    seed: Annotated[int, Query(ge=0, le=2**32 - 1)] = 0,
) -> HTMLResponse:
    """The annotation queue of a run for one metric (the page's script talks to
    ``/api/runs/{run_id}/label-queue`` and ``/labels``); without a valid metric, a form
    to choose one of the run's metrics."""
    facts = run_facts(_store(request), run_id)
    if facts is None:
        return render(
            request, "not_found.html", status_code=404, what="run", name=run_id, active="runs"
        )
    points, scale_problem = _scale_points(scale)
    chosen = metric if metric in facts["metrics"] else None
    page_data = {
        "run_id": run_id,
        "metric": chosen,
        "order": order.value,
        "seed": seed,
        "scale": scale if points else None,
        "points": points,
        "question": metric_question(chosen) if chosen else None,
        "auth_required": bool(request.app.state.api_token),
    }
    return render(
        request,
        "label_queue.html",
        active="runs",
        run=facts,
        metric=chosen,
        asked=metric,
        order=order.value,
        orders=[o.value for o in QueueOrder],
        scale=scale,
        scale_problem=scale_problem,
        page_data=page_data,
    )


@router.get("/runs/{run_id}/agreement", response_class=HTMLResponse)
def agreement_page(
    request: Request,
    run_id: str,
    metric: PageMetric = None,
    methods: Annotated[bool, Query()] = False,
) -> HTMLResponse:
    """The stored labels of a run's samples against its stored values of a metric, the
    annotators' agreement, and this data set's validity card beside the shipped one;
    with ``methods``, each method's agreement on the labelled samples scored again."""
    facts = run_facts(_store(request), run_id)
    if facts is None:
        return render(
            request, "not_found.html", status_code=404, what="run", name=run_id, active="runs"
        )
    if metric not in facts["metrics"]:
        return render(request, "agreement.html", active="runs", run=facts, doc=None, asked=metric)
    try:
        doc = agreement_document(
            _store(request), run_id, metric, app=request.app if methods else None
        )
    except HTTPException as exc:
        if exc.status_code != 503:  # the run went away between the two reads
            return render(
                request, "not_found.html", status_code=404, what="run", name=run_id, active="runs"
            )
        doc = agreement_document(_store(request), run_id, metric)
        doc["by_method"] = {"error": str(exc.detail)}
    return render(request, "agreement.html", active="runs", run=facts, doc=doc, asked=metric)
