"""Tokenising, sentence splitting and stop words (Unicode-aware; English and Arabic).

No nltk: its data packages cannot be downloaded here. Word tokens are runs of letters,
digits and inner apostrophes/hyphens/dots in numbers; stop words are scikit-learn's
English list plus a short Arabic list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

__all__ = ["STOP_WORDS", "content_words", "non_blank", "sentences", "words"]

_WORD = re.compile(r"\d+(?:[.,:/]\d+)*%?|[^\W_]+(?:['’\-][^\W_]+)*", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?؟。])\s+|\n+")

ARABIC_STOP_WORDS = frozenset(
    "في من على إلى عن مع هذا هذه ذلك تلك التي الذي الذين هو هي هم هن أنا نحن أنت "
    "انت كان كانت يكون لا ما لم لن قد ثم أو و أن إن كل بعض غير بين حتى إذا عند".split()
)
STOP_WORDS: frozenset[str] = frozenset(ENGLISH_STOP_WORDS) | ARABIC_STOP_WORDS


def words(text: str | None) -> list[str]:
    """Lower-cased word tokens in order."""
    return [m.group(0).lower() for m in _WORD.finditer(text or "")]


def content_words(text: str | None) -> list[str]:
    """Word tokens minus stop words and one-character tokens (digits are kept)."""
    return [w for w in words(text) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]


def sentences(text: str | None) -> list[str]:
    """Sentences split on ., !, ?, Arabic question mark and newlines; blanks dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text or "") if s.strip()]


def non_blank(texts: Sequence[str] | None) -> list[str]:
    """The strings of ``texts`` that are not empty or whitespace, in order (None: none)."""
    return [t for t in texts or [] if isinstance(t, str) and t.strip()]
