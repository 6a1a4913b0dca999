"""The FastAPI application: JSON API under ``/api``, the dashboard pages, static assets.

``create_app(store, token)`` builds one app over one results store. Reads are open; when a
token is configured (``token=`` or the ``ASSAY_API_TOKEN`` environment variable) every
write request (POST, PUT, PATCH, DELETE) must carry ``Authorization: Bearer <token>``,
compared in constant time, or it is answered 401. `assay.server.guard.RequestGuard`
refuses foreign Host names, cross-site and non-JSON writes and oversized bodies first.
plotly.js is served from the installed ``plotly`` package at
``/static/vendor/plotly.min.js``: no CDN, no build step.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from assay.core.version import __version__
from assay.server import api, labelling, otlp_receiver, pages
from assay.server.errors import StrictJSONResponse, install_error_handlers
from assay.server.guard import ALLOWED_HOSTS_ENV, WRITE_METHODS, RequestGuard
from assay.server.otlp_receiver import RECEIVER_MEDIA_TYPES
from assay.store.db import Store

if TYPE_CHECKING:
    from starlette.middleware.base import RequestResponseEndpoint

    from assay.engine.resources import Resources
    from assay.server.live_scoring import LiveScoring

__all__ = ["MAX_BODY_ENV", "TOKEN_ENV", "WRITE_METHODS", "create_app", "plotly_js_path"]

TOKEN_ENV = "ASSAY_API_TOKEN"
MAX_BODY_ENV = "ASSAY_MAX_BODY_BYTES"
DEFAULT_MAX_BODY_BYTES = 20 * 1024 * 1024
HERE = Path(__file__).parent

#: Content-Security-Policy of the dashboard pages: scripts only from this server (no inline
#: script runs, even if some text escaped escaping); Plotly writes inline styles.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)


def plotly_js_path() -> Path:
    """The minified plotly.js bundled inside the installed ``plotly`` Python package."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def swagger_ui_path() -> Path:
    """Swagger UI 5's files (OpenAPI 3.1), shipped by the ``fastapi-offline`` package."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


#: the interactive API docs page: Swagger UI from local files, started by a local script
#: (no inline script, so the pages' Content-Security-Policy holds here too)
API_DOCS_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Assay API</title>
<link rel="stylesheet" href="/static/swagger/swagger-ui.css">
<link rel="icon" href="/static/swagger/favicon.png"></head>
<body><div id="swagger-ui"></div>
<script src="/static/swagger/swagger-ui-bundle.js"></script>
<script src="/static/api_docs.js"></script></body></html>
"""


def create_app(
    store: Store | str | os.PathLike[str] | None = None,
    token: str | None = None,
    *,
    resources: Resources | None = None,
    max_samples: int = 1000,
    max_body_bytes: int | None = None,
    allowed_hosts: Iterable[str] | None = None,
    live: LiveScoring | None = None,
) -> FastAPI:
    """The Assay API and dashboard over ``store`` (default: `assay.store.db.default_url`).

    Args:
        store: the results store, or its path or database URL (opened here: a URL the
            store does not support raises `assay.store.db.StoreError` now, not a 500 on
            every request); opened from ``ASSAY_DATABASE_URL`` / ``./assay.db`` when not
            given. Anything else raises TypeError.
        token: bearer token required on every write request; default ``ASSAY_API_TOKEN``.
            Empty means no token (writes open: bind to loopback only).
        resources: shared models for ``/api/evaluate`` and ``/api/json-eval``
            (default: the process-wide `assay.engine.resources.default_resources`).
        max_samples: most samples one ``POST /api/evaluate`` may carry.
        max_body_bytes: largest request body accepted, counted on the bytes received
            (chunked bodies too); larger ones get 413 before anything is scored. Default
            ``ASSAY_MAX_BODY_BYTES``, else 20 MiB.
        allowed_hosts: Host names the server answers to besides the loopback names
            (behind a proxy: its public name); default ``ASSAY_ALLOWED_HOSTS``, comma
            separated.
        live: the worker scoring the traces ``POST /v1/traces`` receives (its backlog
            turns exports away with 503 when full); without one, spans are stored and
            scored by the next server started with one.
    """
    if store is None or isinstance(store, (str, os.PathLike)):
        store = Store(None if store is None else os.fspath(store))
    elif not isinstance(store, Store):
        raise TypeError(
            "create_app: store must be a Store, a path or a database URL, not "
            f"{type(store).__name__}"
        )
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    if max_body_bytes is None:
        max_body_bytes = _body_limit_from_env()
    app = FastAPI(
        title="Assay",
        summary="Quality metrics of LLM answers: results store, comparisons and scoring.",
        description=(
            "Read endpoints are open. When the server has a token (`ASSAY_API_TOKEN`), "
            "every POST, PUT and DELETE needs `Authorization: Bearer <token>`. Ratio "
            "metrics are stored 0..1; `display` values are the 0–100 view; performance "
            "metrics keep their unit (ms, tokens/s)."
        ),
        version=__version__,
        docs_url=None,  # served below from the local swagger-ui-bundle package
        redoc_url=None,
        openapi_url="/openapi.json",
        default_response_class=StrictJSONResponse,
    )
    install_error_handlers(app)
    app.state.store = store
    app.state.api_token = token or None
    app.state.resources = resources
    app.state.max_samples = max_samples
    app.state.evaluate_lock = live.evaluate_lock if live is not None else threading.Lock()
    app.state.live = live
    app.state.max_body = max_body_bytes

    generate_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """The OpenAPI document, with this server's batch limit stated."""
        if app.openapi_schema is None:
            document = generate_openapi()
            samples = document["components"]["schemas"]["EvaluateRequest"]["properties"]
            samples["samples"]["maxItems"] = max_samples
        return app.openapi_schema or generate_openapi()

    app.openapi = openapi  # type: ignore[method-assign]
    if allowed_hosts is None:
        allowed_hosts = os.environ.get(ALLOWED_HOSTS_ENV, "").split(",")
    app.add_middleware(
        RequestGuard,
        allowed_hosts=list(allowed_hosts),
        max_body_bytes=max_body_bytes,
        token=lambda: app.state.api_token,
        operations=lambda: app.openapi()["paths"],
        media_types={"/v1/traces": RECEIVER_MEDIA_TYPES},
    )

    @app.middleware("http")
    async def _headers(request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        if response.headers.get("content-type", "").startswith("text/html"):
            response.headers.setdefault("Content-Security-Policy", PAGE_CSP)
            response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    plotly_file = plotly_js_path()

    @app.get("/static/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        return FileResponse(
            plotly_file,
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> HTMLResponse:
        return HTMLResponse(API_DOCS_HTML)

    app.mount("/static/swagger", StaticFiles(directory=swagger_ui_path()), name="swagger")
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.include_router(api.router)
    app.include_router(labelling.router)
    app.include_router(otlp_receiver.router)
    app.include_router(pages.router)
    return app


def _body_limit_from_env() -> int:
    """``ASSAY_MAX_BODY_BYTES`` as a positive whole number of bytes, else the default."""
    text = os.environ.get(MAX_BODY_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BODY_BYTES
    if not (text.isascii() and text.isdigit()) or int(text) == 0:
        raise ValueError(f"{MAX_BODY_ENV}={text!r}: give a positive whole number of bytes")
    return int(text)
