"""Word tokens, content words and sentences (assay.text.tokenize)."""

from __future__ import annotations

import pytest

from assay.text.tokenize import content_words, non_blank, normalise, sentences, words


def test_english_tokens() -> None:
    text = "It costs $12.50 (1,200 in 2020/01/02), 3.5% isn't well-known; x_y!"
    assert words(text) == [
        "it",
        "costs",
        "12.50",
        "1,200",
        "in",
        "2020/01/02",
        "3.5%",
        "isn't",
        "well-known",
        "x",
        "y",
    ]
    assert words("") == [] and words(None) == [] and words("?!... —") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # harakat, shadda, tanween: one word each, equal to the plain spelling
        ("وهي مَدِينَةٌ جَمِيلَةٌ", ["وهي", "مدينة", "جميلة"]),
        ("مُحَمَّد", ["محمد"]),
        ("كـتـاب", ["كتاب"]),  # tatweel (kashida) is decoration
        ("nai\u0308ve cafe\u0301", ["naïve", "café"]),  # decomposed Latin -> NFC
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # Devanagari vowel signs stay in the word
    ],
)
def test_combining_marks_do_not_split_words(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_normalise_only_touches_optional_marks() -> None:
    assert normalise("عَاصِمَةُ فرنسا") == "عاصمة فرنسا"
    assert normalise("Paris, France.") == "Paris, France."
    assert normalise(None) == ""


def test_content_words_drop_stop_words_in_vocalised_arabic() -> None:
    # "هِيَ" is the stop word "هي" once its vowels are removed
    assert content_words("باريس هِيَ عَاصِمَةُ فرنسا") == ["باريس", "عاصمة", "فرنسا"]
    assert content_words("The cat and a dog, 5 times") == ["cat", "dog", "5", "times"]


def test_sentences_and_non_blank() -> None:
    assert sentences("One. Two!  Three?\nFour؟ خمسة") == ["One.", "Two!", "Three?", "Four؟", "خمسة"]
    assert sentences("   ") == []
    assert non_blank(["a", " ", "", "b"]) == ["a", "b"]
    assert non_blank(None) == []


def test_one_arabic_normaliser_strips_marks_and_folds_letter_forms():
    from assay.text.arabic import fold_letters, normalise_arabic, strip_marks

    # fatha, sukun and tatweel go; hamza alef -> alef; alef maqsura -> ya; tanwin goes and
    # ta marbuta -> ha; wasla alef -> alef
    assert normalise_arabic("أَحْمـــد إلى مدرسةٍ ٱلعلم") == "احمد الي مدرسه العلم"
    assert strip_marks("مَدِينَةٌ") == "مدينة"
    assert fold_letters("مدينة") == "مدينه"
    assert normalise_arabic("Café naïve") == "Café naïve"
