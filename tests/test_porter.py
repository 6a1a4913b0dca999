"""Assay's Porter stemmer (`assay.text.porter`) against nltk's ``PorterStemmer()`` (the
NLTK_EXTENSIONS mode rouge-score uses): hand-worked stems, then every distinct word of the
repository's docs, examples and sources, of the STS-B dev and TruthfulQA files where
present, and random words built from the suffixes the rules test."""

from __future__ import annotations

import csv
import random
import re
from pathlib import Path

import pytest
from nltk.stem.porter import PorterStemmer

from assay.text.porter import porter_stem
from dev_data import dev_file

ROOT = Path(__file__).resolve().parent.parent

NLTK = PorterStemmer()


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("caresses", "caress"),  # step 1a SSES -> SS
        ("ponies", "poni"),  # IES -> I
        ("ties", "tie"),  # NLTK: a 4-letter word keeps "ie"
        ("died", "die"),  # NLTK: IED -> IE in a 4-letter word
        ("spied", "spi"),  # ... else -> I
        ("hopping", "hop"),  # step 1b: undouble the final consonant
        ("falling", "fall"),  # ... but not l, s or z
        ("filing", "file"),  # m = 1 and *o: put the e back
        ("failing", "fail"),  # ... not after a vowel pair
        ("happy", "happi"),  # step 1c: y after a consonant -> i
        ("enjoy", "enjoy"),  # ... not after a vowel
        ("by", "by"),  # 2 letters: unstemmed
        ("skies", "sky"),  # the table of irregular forms
        ("dying", "die"),
        ("news", "news"),
        ("relational", "relat"),  # ATIONAL -> ATE, then step 5a drops the e (m = 2)
        ("rational", "ration"),  # ATIONAL needs m > 0 on "r": no; step 4 drops AL
        ("geology", "geolog"),  # y -> i, then NLTK's LOGI -> LOG with the l in the stem
        ("controlling", "control"),  # step 1b keeps "controll", step 5b undoubles the l
        ("Running", "run"),  # lower-cased first
        ("1990s", "1990"),  # digits are consonants
    ],
)
def test_hand_worked_stems(word: str, stem: str) -> None:
    assert porter_stem(word) == stem
    assert NLTK.stem(word) == stem


TRICKY = (
    # irregular forms and short words
    "sky skies dying lying tying news innings inning outings outing cannings canning howe "
    "proceed exceed succeed a i is as us yy y ab abc "
    # y as consonant or vowel
    "toy toys syzygy yyyy yyyyyyy say sayings obeying spy fly try flies flying cry cried "
    "yearly ying yes eye eyes "
    # step 1
    "feed agreed bleed plastered bled motoring sing conflated troubled sized hopping tanned "
    "hissing fizzed oping ating bling sizing hoped hoping hopped caress cats sses ies ied eed "
    # step 2
    "valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli "
    "vietnamization predication operator feudalism decisiveness hopefulness callousness "
    "formaliti sensitiviti sensibiliti hopefulli carefully archaeology theology logi alli "
    "operationalli generically additionally "
    # steps 3 to 5
    "triplicate formative formalize electriciti electrical hopeful goodness revival allowance "
    "inference airliner gyroscopic adjustable defensible irritant replacement adjustment "
    "dependent adoption homologou communism activate angulariti homologous effective "
    "bowdlerize probate rate cease controll roll ion tion sion ement ment "
    # mixed case, digits, other characters
    "CATS Hopping MP3s 100th 3d naïve café İstanbul don't e-mail"
).split()


def _words_of(text: str) -> set[str]:
    """The whitespace-separated words of ``text`` (any case, with punctuation) and its
    lower-cased ``[a-z0-9]`` runs (the tokens rouge-score stems)."""
    return set(text.split()) | set(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _mismatches(words: set[str]) -> list[tuple[str, str, str]]:
    return sorted(
        (w, NLTK.stem(w), porter_stem(w)) for w in words if NLTK.stem(w) != porter_stem(w)
    )


def test_equals_nltk_on_tricky_words() -> None:
    assert _mismatches(set(TRICKY)) == []


def test_equals_nltk_on_every_word_of_the_docs_examples_and_sources() -> None:
    files = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "examples").glob("*.jsonl"),
        *(ROOT / "src" / "assay").rglob("*.py"),
    ]
    words = set().union(*(_words_of(f.read_text("utf-8")) for f in files))
    assert len(words) > 30_000
    assert _mismatches(words) == []


def test_equals_nltk_on_every_word_of_sts_b_dev_and_truthfulqa() -> None:
    words: set[str] = set()
    with dev_file("stsb-dev.tsv").open(encoding="utf-8") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            words |= _words_of(row[5]) | _words_of(row[6])
    with dev_file("truthfulqa-dev.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for field in ("Question", "Best Answer", "Correct Answers", "Incorrect Answers"):
                words |= _words_of(row[field])
    assert len(words) > 8_000
    assert _mismatches(words) == []


SUFFIXES = (
    "ational tional enci anci izer bli abli alli entli eli ousli ization ation ator alism "
    "iveness fulness ousness aliti iviti biliti fulli logi icate ative alize iciti ical ful ness "
    "al ance ence er ic able ible ant ement ment ent ion sion tion ou ism ate iti ous ive ize "
    "e ll y ies ied eed ed ing sses ss s at bl iz"
).split()


def test_equals_nltk_on_random_words_built_from_the_rules_suffixes() -> None:
    rng = random.Random(20261125)
    words = set()
    for _ in range(30_000):
        stem = "".join(rng.choice("aeiouybcdlstzwxrng") for _ in range(rng.randint(0, 6)))
        word = stem + "".join(rng.choice(SUFFIXES) for _ in range(rng.randint(0, 3)))
        if word:
            words.add(word)
    assert _mismatches(words) == []
