"""Script-based language detection (enough to pick thresholds; no model)."""

from __future__ import annotations

import re

__all__ = ["arabic_ratio", "is_arabic"]

_ARABIC = re.compile(r"[\u0600-\u06FF\u0750-\u077F\u08A0-\u08FF\uFB50-\uFDFF\uFE70-\uFEFF]")
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)


def arabic_ratio(text: str) -> float:
    """Share of letters in ``text`` that are Arabic script (0 when there are no letters)."""
    if not text or text.isascii():  # no Arabic letter (the common case, at C speed)
        return 0.0
    letters = "".join(_LETTER.findall(text))
    if not letters:
        return 0.0
    return len(_ARABIC.findall(letters)) / len(letters)


def is_arabic(text: str | None, min_ratio: float = 0.3) -> bool:
    """True when at least ``min_ratio`` of the letters are Arabic script."""
    return bool(text) and arabic_ratio(text or "") >= min_ratio
