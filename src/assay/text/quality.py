"""Response quality checks of the chatbot hub's test layer (``validate_response_quality``)."""

from __future__ import annotations

__all__ = ["SENTENCE_ENDINGS", "quality_checks"]

#: the chatbot hub: ``response.strip().endswith((".", "!", "?", ":", ";"))``; the Arabic question
#: mark and full stop are added so Arabic answers are not failed for their script.
SENTENCE_ENDINGS = (".", "!", "?", ":", ";", "؟", "۔")


def quality_checks(
    response: str | None, min_length: int = 10, max_length: int | None = None
) -> dict[str, bool]:
    """The specification's boolean checks; ``within_max_length`` only when a maximum is given.

    - has_minimum_length: ``len(response.strip()) >= min_length``
    - is_not_empty: ``len(response.strip()) > 0``
    - has_no_html_tags: no ``<`` and no ``>`` in the response (the specification's rule: it also
      flags "x < y" in maths; kept as specified)
    - ends_properly: stripped response ends with one of `SENTENCE_ENDINGS`
    - within_max_length: ``len(response) <= max_length``
    """
    text = response or ""
    stripped = text.strip()
    checks = {
        "has_minimum_length": len(stripped) >= min_length,
        "is_not_empty": len(stripped) > 0,
        "has_no_html_tags": "<" not in text and ">" not in text,
        "ends_properly": stripped.endswith(SENTENCE_ENDINGS),
    }
    if max_length is not None:
        checks["within_max_length"] = len(text) <= max_length
    return checks
