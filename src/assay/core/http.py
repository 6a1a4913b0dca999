"""HTTP details shared by Assay's clients (the judge, a remote embedding endpoint)."""

from __future__ import annotations

import datetime
import email.utils
import math
import time
from collections.abc import Mapping

__all__ = ["retry_after_seconds"]


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (0 for a time passed): a
    number of seconds or an HTTP date; None when absent or unreadable."""
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:  # an HTTP date, or something unreadable (then ignored)
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.UTC)
        seconds = parsed.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None
