"""What the API checks in request bodies beyond their pydantic models.

- **Text must be Unicode.** JSON may spell a lone surrogate (``"\\ud800"``); Python reads
  it into a ``str`` that cannot be written as UTF-8, so storing it (SQLite, PostgreSQL)
  would fail deep in the store. `reject_unencodable` answers such a body with a 422
  naming where the text is, before anything is stored.
- **Config files** (`parse_json_file`): the import endpoint's body is a file's bytes; it
  must be UTF-8 JSON of sane depth and size; each failure is a 422 that says which.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException

__all__ = [
    "MAX_HOURS",
    "MAX_IMPORT_BYTES",
    "MAX_OFFSET",
    "parse_json_file",
    "reject_unencodable",
    "unencodable_at",
]

#: longest statistics window (100 years): a longer one is no window, and past ~2000
#: years the start date would fall before year 1 (a 500 instead of an answer)
MAX_HOURS = 24 * 366 * 100
#: largest row offset: beyond it there is nothing to page to, and SQLite integers end
MAX_OFFSET = 1_000_000_000

MAX_IMPORT_BYTES = 1_000_000

Location = list[str | int]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unencodable_at(value: Any) -> Location | None:
    """Where in ``value`` (dicts, lists, strings) a string is not valid Unicode (holds a
    lone surrogate), or None; for such a key, the object holding it. Walks without
    recursion (any depth)."""
    stack: list[tuple[Any, Location]] = [(value, [])]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and not _encodable(key):
                    return where
                stack.append((child, [*where, key]))
        elif isinstance(item, list | tuple):
            stack.extend((child, [*where, i]) for i, child in enumerate(item))
    return None


def reject_unencodable(value: Any, loc: Location) -> None:
    """A 422 when ``value`` holds text that is not valid Unicode (see `unencodable_at`);
    ``loc`` is where ``value`` sits in the request. The text itself is not quoted."""
    where = unencodable_at(value)
    if where is None:
        return
    raise HTTPException(
        422,
        [
            {
                "loc": [*loc, *where],
                "msg": "text is not valid Unicode: a lone surrogate (\\ud800-\\udfff "
                "escape without its pair); send the character itself or its full pair",
                "type": "string_unicode",
            }
        ],
    )


def parse_json_file(raw: bytes) -> Any:
    """The JSON document of an uploaded config file; a 413 or 422 saying what is wrong."""
    if len(raw) > MAX_IMPORT_BYTES:
        raise HTTPException(413, f"config file larger than {MAX_IMPORT_BYTES} bytes")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise HTTPException(422, "config file is not UTF-8 text") from None
    except RecursionError:
        raise HTTPException(422, "config file is nested too deeply to be a config") from None
    except json.JSONDecodeError as exc:
        raise HTTPException(
            422, f"config file is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except ValueError as exc:  # e.g. an integer of over 4,300 digits
        raise HTTPException(422, f"config file is not a usable JSON document: {exc}") from None
