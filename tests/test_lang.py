"""Script-based language detection (`assay.text.lang`): the share of Arabic letters,
against a letter-by-letter count written from its definition."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from assay.text.lang import arabic_ratio, is_arabic

ARABIC_RANGES = [(0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF),
                 (0xFE70, 0xFEFF)]  # fmt: skip


def by_definition(text: str) -> float:
    """Letters (word characters that are neither digits nor ``_``) in the Arabic blocks,
    over all letters."""
    letters = [ch for ch in text if re.fullmatch(r"[^\W\d_]", ch)]
    arabic = [ch for ch in letters if any(lo <= ord(ch) <= hi for lo, hi in ARABIC_RANGES)]
    return len(arabic) / len(letters) if letters else 0.0


def test_worked_examples() -> None:
    assert arabic_ratio("") == 0.0 and arabic_ratio("123 !?") == 0.0
    assert arabic_ratio("plain English") == 0.0
    # مرحبا is 5 Arabic letters, abc 3 Latin ones: 5 / 8 (the Arabic digits ١٢ are no letters)
    assert arabic_ratio("مرحبا abc ١٢") == 5 / 8
    assert is_arabic("مرحبا بالعالم") and not is_arabic("hello مر world again")


@given(
    st.text(
        alphabet=st.sampled_from(
            [*"abc XYZ 09_-é", "\u0627", "\u0644", "\u0661", "\u060c", "\ufef5", "\u4e2d"]
        ),
        max_size=40,
    )
)
def test_the_ratio_is_the_letter_by_letter_count(text: str) -> None:
    assert arabic_ratio(text) == by_definition(text)
