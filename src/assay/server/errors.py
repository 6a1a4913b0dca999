"""The API's error bodies, one shape per status, each declared in the OpenAPI document.

- 422 (invalid input): FastAPI's validation shape ``{"detail": [{"loc", "msg", "type"}]}``
  for every 422, whether pydantic or an endpoint found the problem. The offending input
  is never quoted back (FastAPI's default puts the whole body in ``input``).
- Every other error: ``{"detail": "message"}`` (`ErrorMessage`), a bug's 500 included
  (`INTERNAL_ERROR`, no detail of the exception).

Messages name the field and the problem; what they quote of the request (a key, an
unknown strategy name, a run id) is cut at `MAX_MESSAGE_CHARS` / `MAX_LOC_CHARS`, and at
most `MAX_ITEMS` problems are listed.

`store_read` turns a store aggregation that fails on the stored values into a 503 that
says so (never a 500).

`StrictJSONResponse` is the app's response class: it writes through `assay.core.jsonout`, so
no NaN or Infinity token leaves the server.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from assay.core.jsonout import dumps

__all__ = [
    "ERROR_RESPONSES",
    "ErrorMessage",
    "StrictJSONResponse",
    "install_error_handlers",
    "store_read",
    "well_formed",
]


class ErrorMessage(BaseModel):
    """An error other than invalid input: what went wrong, in one message."""

    detail: str


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate (from a ``"\\ud800"`` escape in posted JSON)
    replaced by U+FFFD and split surrogate pairs joined: text UTF-8 can encode."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class StrictJSONResponse(JSONResponse):
    """JSON through `assay.core.jsonout.dumps`: standard JSON only (non-finite numbers -> null),
    always valid UTF-8 (see `well_formed`)."""

    def render(self, content: Any) -> bytes:
        text = dumps(content)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return well_formed(text).encode("utf-8")


#: the error statuses any API operation may answer, besides 422 (declared by FastAPI)
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorMessage, "description": "Host name not allowed, or a bad request."},
    401: {"model": ErrorMessage, "description": "A write without the server's bearer token."},
    403: {"model": ErrorMessage, "description": "A cross-site write (foreign Origin/Referer)."},
    404: {"model": ErrorMessage, "description": "No such run or configuration."},
    413: {"model": ErrorMessage, "description": "The request body or batch is too large."},
    415: {"model": ErrorMessage, "description": "A write whose body is not JSON."},
    503: {
        "model": ErrorMessage,
        "description": "A model the scoring needs is not installed, or the store holds values "
        "its averages cannot be computed from.",
    },
}


log = logging.getLogger("assay.server")

#: the answer to a request that met a bug (never meant to be seen; the log has the trace)
INTERNAL_ERROR = "internal server error; the server log has the details"

#: the answer when a store aggregation fails on what is stored
STORE_UNREADABLE = (
    "the results store holds values its averages cannot be computed from (e.g. +1e308 and "
    "-1e308 totals, whose sum is no number); the server log has the details"
)


@contextmanager
def store_read() -> Iterator[None]:
    """Around a store query that aggregates: a failure on the stored values (SQL sums of
    +inf and -inf come back NULL, which the store then cannot read as a number) is
    logged and answered 503 with `STORE_UNREADABLE`, never a 500."""
    try:
        yield
    except (TypeError, ArithmeticError):
        log.exception("a store aggregation failed on the stored values")
        raise HTTPException(503, STORE_UNREADABLE) from None


#: bounds of an error body: what it quotes of the request (a key in ``loc``, a value in a
#: message) stays short, and a body with thousands of problems lists the first ones
MAX_MESSAGE_CHARS = 500
MAX_LOC_CHARS = 100
MAX_ITEMS = 50


def cut(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` up to ``limit`` characters, saying how much was left off."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def _validation_items(detail: Any) -> list[dict[str, Any]]:
    items = detail if isinstance(detail, list) else [detail]
    out: list[dict[str, Any]] = []
    for item in items[:MAX_ITEMS]:
        if isinstance(item, dict) and "msg" in item:
            loc = [
                p if isinstance(p, int) else cut(str(p), MAX_LOC_CHARS) for p in item.get("loc", [])
            ]
            out.append(
                {
                    "loc": loc,
                    "msg": cut(str(item["msg"])),
                    "type": str(item.get("type", "value_error")),
                }
            )
        else:
            out.append({"loc": ["body"], "msg": cut(str(item)), "type": "value_error"})
    if len(items) > MAX_ITEMS:
        more = f"{len(items) - MAX_ITEMS} more problems not listed; fix these first"
        out.append({"loc": ["body"], "msg": more, "type": "too_many_errors"})
    return out


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error its declared shape."""

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return StrictJSONResponse({"detail": _validation_items(exc.errors())}, status_code=422)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 422:
            body: dict[str, Any] = {"detail": _validation_items(exc.detail)}
        else:
            body = {"detail": cut(str(exc.detail))}
        return StrictJSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    async def too_deep(request: Request, exc: Exception) -> JSONResponse:
        message = "the input is nested too deeply to evaluate"
        return StrictJSONResponse(
            {"detail": [{"loc": ["body"], "msg": message, "type": "value_error"}]},
            status_code=422,
        )

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # a bug, not the client's fault: logged by the server; the body stays JSON and
        # says nothing of the request or the exception
        return StrictJSONResponse({"detail": INTERNAL_ERROR}, status_code=500)

    app.add_exception_handler(Exception, unexpected)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RecursionError, too_deep)
