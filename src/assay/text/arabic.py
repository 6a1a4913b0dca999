"""Arabic text normalised one way for every metric: optional marks removed, letter forms
folded.

`strip_marks` removes the optional marks of Arabic script: the short-vowel and other
diacritics (tanwin, harakat, shadda, sukun and the rarer marks, U+064B-U+065F), the
superscript alef (U+0670), the Quranic annotation marks (U+0610-U+061A, U+06D6-U+06ED)
and the tatweel (U+0640), so "مَدِينَةٌ" and "كـتـاب" read "مدينة" and "كتاب".
`fold_letters` maps the letter variants writers use interchangeably to one: the alef
forms with hamza, madda or wasla (أ إ آ ٱ) to ا, alef maqsura ى to ي and ta marbuta ة
to ه. `normalise_arabic` does both. Text in other scripts passes through unchanged.
"""

from __future__ import annotations

import re

__all__ = ["ARABIC_MARKS", "fold_letters", "normalise_arabic", "strip_marks"]

ARABIC_MARKS = re.compile(
    "[\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e8\u06ea-\u06ed\u0640]"
)
_FOLD = str.maketrans({"أ": "ا", "إ": "ا", "آ": "ا", "ٱ": "ا", "ى": "ي", "ة": "ه"})


def strip_marks(text: str) -> str:
    """``text`` without the optional marks of Arabic script and the tatweel."""
    return ARABIC_MARKS.sub("", text)


def fold_letters(text: str) -> str:
    """``text`` with the alef forms, alef maqsura and ta marbuta folded to one letter each."""
    return text.translate(_FOLD)


def normalise_arabic(text: str) -> str:
    """`strip_marks` then `fold_letters`."""
    return fold_letters(strip_marks(text))
