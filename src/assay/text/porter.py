"""The Porter stemmer as rouge-score runs it: Porter (1980) with NLTK's extensions.

rouge-score's ``use_stemmer=True`` calls ``nltk.stem.porter.PorterStemmer()``, whose
default mode is ``NLTK_EXTENSIONS``. This module implements that stemmer from the
published algorithm and the documented departures, so that ROUGE needs no nltk (whose
package import pulls scikit-learn, SciPy and pandas where they are installed).
`tests/test_porter.py` checks it equal to nltk's stemmer word for word.

The algorithm (M. F. Porter, "An algorithm for suffix stripping", Program 14(3), 1980):
a letter is a consonant unless it is a, e, i, o or u, or a y that follows a consonant
(a y that starts the word is a consonant). A word is ``[C](VC)^m[V]`` and ``m`` is its
*measure*. Five steps remove suffixes; within a step the longest listed suffix that the
word ends with is chosen, and when its condition fails the step leaves the word alone.

Departures from the 1980 paper (Martin Porter's later versions, then NLTK's):

- words that are irregular forms map through a fixed table (``skies`` -> ``sky``,
  ``dying`` -> ``die``, ``news``, ``proceed``, ...); a word of 1 or 2 characters is
  returned lower-cased, unstemmed;
- step 1a: a 4-letter word ending ``ies`` becomes ``...ie`` (``ties`` -> ``tie``);
- step 1b: ``ied`` becomes ``ie`` in a 4-letter word, else ``i``, with no further
  step 1b rule (``died`` -> ``die``, ``spied`` -> ``spi``);
- the ``*o`` condition (ends consonant-vowel-consonant, the last not w, x or y) also
  holds for a 2-letter stem vowel-consonant;
- step 1c: a final y becomes i only when it follows a consonant that is not the word's
  first letter (``happy`` -> ``happi``, ``enjoy`` and ``by`` stay);
- step 2: ``bli`` -> ``ble`` (the paper: ``abli`` -> ``able``), ``fulli`` -> ``ful``,
  ``logi`` -> ``log`` when the stem with its ``l`` has m > 0, and ``alli`` -> ``al``
  runs first and, when it applies, step 2 runs again on the result;
- step 5b: ``ll`` -> ``l`` when the word without its last letter has m > 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

__all__ = ["porter_stem"]

_VOWELS = frozenset("aeiou")

#: irregular forms -> their stem (NLTK's table, applied before the steps)
_IRREGULAR: dict[str, str] = {
    form: stem
    for stem, forms in {
        "sky": ("sky", "skies"),
        "die": ("dying",),
        "lie": ("lying",),
        "tie": ("tying",),
        "news": ("news",),
        "inning": ("innings", "inning"),
        "outing": ("outings", "outing"),
        "canning": ("cannings", "canning"),
        "howe": ("howe",),
        "proceed": ("proceed",),
        "exceed": ("exceed",),
        "succeed": ("succeed",),
    }.items()
    for form in forms
}


def _consonants(word: str) -> list[bool]:
    """For each letter of ``word``, whether it is a consonant (Porter's definition)."""
    flags: list[bool] = []
    for letter in word:
        if letter in _VOWELS:
            flags.append(False)
        elif letter == "y":
            flags.append(not flags[-1] if flags else True)
        else:
            flags.append(True)
    return flags


def _measure(part: str) -> int:
    """m in ``[C](VC)^m[V]``: the number of vowel-to-consonant changes in ``part``."""
    flags = _consonants(part)
    return sum(1 for i in range(1, len(flags)) if flags[i] and not flags[i - 1])


def _has_vowel(part: str) -> bool:
    return not all(_consonants(part))


def _ends_double_consonant(word: str) -> bool:
    """``*d``: the word ends with two equal consonants."""
    return len(word) >= 2 and word[-1] == word[-2] and _consonants(word)[-1]


def _ends_cvc(word: str) -> bool:
    """``*o``: ends consonant-vowel-consonant with the last not w, x or y, or is a
    2-letter vowel-consonant stem (the NLTK extension)."""
    if len(word) == 2:
        flags = _consonants(word)
        return not flags[0] and flags[1]
    if len(word) < 3:
        return False
    flags = _consonants(word)
    return flags[-3] and not flags[-2] and flags[-1] and word[-1] not in "wxy"


def _longest_suffix(word: str, suffixes: tuple[str, ...]) -> str | None:
    """The longest of ``suffixes`` (sorted longest first) that ``word`` ends with."""
    for suffix in suffixes:
        if word.endswith(suffix):
            return suffix
    return None


def _by_length(suffixes: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(suffixes, key=len, reverse=True))


def _step1a(word: str) -> str:
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ies"):
        return word[:-1] if len(word) == 4 else word[:-2]
    if word.endswith("ss"):
        return word
    if word.endswith("s"):
        return word[:-1]
    return word


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-1] if len(word) == 4 else word[:-2]
    if word.endswith("eed"):
        stem = word[:-3]
        return stem + "ee" if _measure(stem) > 0 else word
    if word.endswith("ed"):
        stem = word[:-2]
    elif word.endswith("ing"):
        stem = word[:-3]
    else:
        return word
    if not _has_vowel(stem):
        return word
    # the -ed or -ing came off: restore an e, undouble a final consonant
    if stem.endswith(("at", "bl", "iz")):
        return stem + "e"
    if _ends_double_consonant(stem):
        return stem if stem[-1] in "lsz" else stem[:-1]
    if _measure(stem) == 1 and _ends_cvc(stem):
        return stem + "e"
    return stem


def _step1c(word: str) -> str:
    if word.endswith("y") and len(word) > 2 and _consonants(word)[-2]:
        return word[:-1] + "i"
    return word


_STEP2 = {
    "ational": "ate",
    "tional": "tion",
    "enci": "ence",
    "anci": "ance",
    "izer": "ize",
    "bli": "ble",
    "entli": "ent",
    "eli": "e",
    "ousli": "ous",
    "ization": "ize",
    "ation": "ate",
    "ator": "ate",
    "alism": "al",
    "iveness": "ive",
    "fulness": "ful",
    "ousness": "ous",
    "aliti": "al",
    "iviti": "ive",
    "biliti": "ble",
    "fulli": "ful",
}
_STEP2_SUFFIXES = _by_length([*_STEP2, "alli", "logi"])


def _step2(word: str) -> str:
    suffix = _longest_suffix(word, _STEP2_SUFFIXES)
    if suffix is None:
        return word
    stem = word[: len(word) - len(suffix)]
    if suffix == "alli":
        return _step2(stem + "al") if _measure(stem) > 0 else word
    if suffix == "logi":  # the l stays with the stem: "geologi" -> "geolog"
        return stem + "log" if _measure(stem + "l") > 0 else word
    return stem + _STEP2[suffix] if _measure(stem) > 0 else word


_STEP3 = {
    "icate": "ic",
    "ative": "",
    "alize": "al",
    "iciti": "ic",
    "ical": "ic",
    "ful": "",
    "ness": "",
}
_STEP3_SUFFIXES = _by_length(_STEP3)


def _step3(word: str) -> str:
    suffix = _longest_suffix(word, _STEP3_SUFFIXES)
    if suffix is None:
        return word
    stem = word[: len(word) - len(suffix)]
    return stem + _STEP3[suffix] if _measure(stem) > 0 else word


_STEP4_SUFFIXES = _by_length(
    "al ance ence er ic able ible ant ement ment ent ion ou ism ate iti ous ive ize".split()
)


def _step4(word: str) -> str:
    suffix = _longest_suffix(word, _STEP4_SUFFIXES)
    if suffix is None:
        return word
    stem = word[: len(word) - len(suffix)]
    if _measure(stem) <= 1 or (suffix == "ion" and not stem.endswith(("s", "t"))):
        return word
    return stem


def _step5(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _ends_cvc(stem)):
            word = stem
    if word.endswith("ll") and _measure(word[:-1]) > 1:
        word = word[:-1]
    return word


@lru_cache(maxsize=1 << 16)
def porter_stem(word: str) -> str:
    """The Porter stem of ``word``, lower-cased, equal to NLTK's
    ``PorterStemmer().stem(word)`` (mode ``NLTK_EXTENSIONS``).

    >>> [porter_stem(w) for w in ("running", "caresses", "ponies", "relational")]
    ['run', 'caress', 'poni', 'relat']
    """
    lowered = word.lower()
    if lowered in _IRREGULAR:
        return _IRREGULAR[lowered]
    if len(word) <= 2:
        return lowered
    return _step5(_step4(_step3(_step2(_step1c(_step1b(_step1a(lowered)))))))
