"""Tokenising, sentence splitting and stop words (Unicode-aware; English and Arabic).

No nltk: its data packages cannot be downloaded here. Word tokens are runs of letters,
digits and inner apostrophes/hyphens/dots in numbers; stop words are scikit-learn's
English list (shipped as data in ``english_stop_words.txt``, BSD-3-Clause, so the base
install needs no scikit-learn) plus a short Arabic list.

Before tokenising, text is put in Unicode NFC (a decomposed "nai\u0308ve" is "naïve") and
the optional marks of Arabic script are removed (`normalise`): the short-vowel and other
diacritics (harakat, shadda, sukun, superscript alef, Quranic annotation marks) and the
tatweel, so "مَدِينَةٌ" and "كـتـاب" are the words "مدينة" and "كتاب". Other combining marks
(Devanagari vowel signs, ...) stay inside their word instead of splitting it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from assay.text.arabic import strip_marks

__all__ = ["STOP_WORDS", "content_words", "non_blank", "normalise", "sentences", "words"]


def _combining_mark_ranges() -> str:
    """Character-class ranges of every combining mark (Unicode categories Mn, Mc, Me)."""
    codes = [
        cp
        for cp in [*range(0x20000), *range(0xE0100, 0xE01F0)]  # no marks anywhere else
        if unicodedata.category(chr(cp)).startswith("M")
    ]
    ranges: list[tuple[int, int]] = []
    for cp in codes:
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


@cache
def _word_pattern() -> re.Pattern[str]:
    """The word regex, built on first use (listing the combining marks takes ~10 ms).

    A word is a run of letters or digits, with combining marks allowed after any of them;
    ``\\w`` matches no combining mark, so each mark group starts where the letters stop
    and the pattern cannot backtrack exponentially.
    """
    run = r"[^\W_]+(?:[" + _combining_mark_ranges() + r"]+[^\W_]*)*"
    return re.compile(r"\d+(?:[.,:/]\d+)*%?|" + run + r"(?:['’\-]" + run + r")*")


#: the same words for ASCII text, which has no combining mark (about twice as fast)
_ASCII_WORD = re.compile(r"\d+(?:[.,:/]\d+)*%?|[^\W_]+(?:['\-][^\W_]+)*")


def normalise(text: str | None) -> str:
    """``text`` in Unicode NFC without Arabic diacritics and tatweel (see the module doc)."""
    text = text or ""
    if text.isascii():
        return text
    return strip_marks(unicodedata.normalize("NFC", text))


_SENTENCE_END = re.compile(r"(?<=[.!?؟。])\s+|\n+")

ARABIC_STOP_WORDS = frozenset(
    "في من على إلى عن مع هذا هذه ذلك تلك التي الذي الذين هو هي هم هن أنا نحن أنت "
    "انت كان كانت يكون لا ما لم لن قد ثم أو و أن إن كل بعض غير بين حتى إذا عند".split()
)
#: scikit-learn's ENGLISH_STOP_WORDS (provenance and licence in the file's header)
ENGLISH_STOP_WORDS = frozenset(
    line
    for line in Path(__file__).with_name("english_stop_words.txt").read_text("utf-8").splitlines()
    if line and not line.startswith("#")
)
STOP_WORDS: frozenset[str] = ENGLISH_STOP_WORDS | ARABIC_STOP_WORDS


def words(text: str | None) -> list[str]:
    """Lower-cased word tokens of the `normalise`-d text, in order."""
    text = normalise(text)
    pattern = _ASCII_WORD if text.isascii() else _word_pattern()
    return [m.group(0).lower() for m in pattern.finditer(text)]


def content_words(text: str | None) -> list[str]:
    """Word tokens minus stop words and one-character tokens (digits are kept)."""
    return [w for w in words(text) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]


def sentences(text: str | None) -> list[str]:
    """Sentences split on ., !, ?, Arabic question mark and newlines; blanks dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text or "") if s.strip()]


def non_blank(texts: Sequence[str] | None) -> list[str]:
    """The strings of ``texts`` that are not empty or whitespace, in order (None: none)."""
    return [t for t in texts or [] if isinstance(t, str) and t.strip()]
