"""Lexical metrics: string overlap and surface patterns of the response (no model).

The chatbot hub's base-model metrics ``exact_match`` and ``bleu`` (its ``citation_accuracy`` is in
`assay.metrics.citations`), its
test-layer ``rouge``, response quality checks and fallback detection, plus ``chrf``
(character n-gram F-score) beside ``bleu`` for morphologically rich languages.
Reference library: sacrebleu (BLEU, chrF). ROUGE is Assay's own (`assay.text.rouge`),
checked equal to rouge-score in the tests.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.base import Metric, Source, clamp01
from assay.metrics.registry import register
from assay.text.arabic import normalise_arabic
from assay.text.lang import is_arabic
from assay.text.quality import quality_checks
from assay.text.rouge import rouge_scores, rouge_tokens
from assay.text.tokenize import words

__all__ = [
    "FALLBACK_PHRASES",
    "find_fallback_phrases",
    "needs_unicode_tokenizer",
]


@register
class ExactMatch(Metric):
    """1 when the response equals the expected answer after trimming and lower-casing, else 0.

    Formula (chatbot hub): ``1.0 if response.strip().lower() == expected.strip().lower() else 0.0``.
    Range {0, 1}, higher is better. Requires response and expected; a missing or blank
    one gives None with a reason (the specification would call two blank strings a match).
    Weakness: any difference in punctuation, wording or Unicode form (a composed "é" and
    "e" + combining accent) scores 0; use ``rouge`` or ``semantic_similarity`` for graded
    overlap.
    """

    name = "exact_match"
    family = "lexical"
    requires = ("response", "expected")
    unit = "bool"
    default_threshold = 1.0
    suites = ("base", "lexical", "base-model")
    source = Source.CHATBOT_HUB

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        response = sample.response.strip().lower()  # type: ignore[union-attr]
        expected = sample.expected.strip().lower()  # type: ignore[union-attr]
        return self.result(1.0 if response == expected else 0.0, method="pattern")


# ---- script detection shared by BLEU and ROUGE ---------------------------------------

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_ASCII_LETTER = re.compile(r"[A-Za-z]")


def needs_unicode_tokenizer(*texts: str | None) -> bool:
    """True when an ASCII-only tokenizer would lose the words of one of ``texts``.

    That is: a text is Arabic (`assay.text.lang.is_arabic`), or it has letters and none
    of them is an ASCII letter (Cyrillic, Greek, CJK, ...).
    """
    for text in texts:
        if not text:
            continue
        if is_arabic(text):
            return True
        if _LETTER.search(text) and not _ASCII_LETTER.search(text):
            return True
    return False


# ---- BLEU and chrF (sacrebleu) -----------------------------------------------------


@lru_cache(maxsize=4)
def _bleu(tokenize: str) -> Any:
    from sacrebleu.metrics import BLEU

    # exactly what sacrebleu.sentence_bleu builds: exp smoothing, effective order
    return BLEU(tokenize=tokenize, smooth_method="exp", effective_order=True)


@lru_cache(maxsize=1)
def _chrf() -> Any:
    from sacrebleu.metrics import CHRF

    return CHRF()  # chrF2: char_order=6, word_order=0, beta=2 (sacrebleu defaults)


@register
class Bleu(Metric):
    """Sentence BLEU of the response against the expected answer (sacrebleu, exp smoothing).

    Formula: ``BLEU = BP * exp(mean_{n=1..4} log p_n)`` where ``p_n`` is the clipped
    n-gram precision of the response against the expected answer and the brevity
    penalty ``BP = 1 if c > r else exp(1 - r / c)`` (c: response length, r: reference
    length, in tokens). Computed by ``sacrebleu.sentence_bleu`` semantics: 13a
    tokenisation, case-sensitive, ``exp`` smoothing (the k-th n-gram order with zero
    matches gets precision ``1 / (2**k * total_n)``) and effective order (orders longer
    than the response are dropped). When either text is Arabic (or has no ASCII
    letters) sacrebleu's ``intl`` tokeniser runs instead, which splits Unicode
    punctuation such as the Arabic comma; ``details.tokenize`` says which ran. The
    value is sacrebleu's score / 100.

    Inputs: response, expected. Range 0..1, higher is better. Empty response or
    expected: None (missing input).

    The chatbot hub calls NLTK ``sentence_bleu`` with an unnamed smoothing function; NLTK's
    data cannot be installed offline, so the reference implementation sacrebleu is used
    and values differ from NLTK's for short texts (different smoothing). Weaknesses:
    BLEU is a corpus metric and is noisy per sentence; it rewards surface n-gram overlap
    only (a correct paraphrase scores low, a fluent wrong answer sharing words scores
    high); word n-grams punish morphologically rich languages such as Arabic, where
    ``chrf`` is the better lexical measure; sacrebleu tokenises the raw text, so a
    vocalised Arabic word (with diacritics) and its plain spelling are different tokens.
    """

    name = "bleu"
    family = "lexical"
    requires = ("response", "expected")
    suites = ("base", "lexical", "base-model")
    source = Source.CHATBOT_HUB

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        response, expected = sample.response or "", sample.expected or ""
        tokenize = "intl" if needs_unicode_tokenizer(response, expected) else "13a"
        score = _bleu(tokenize).sentence_score(response, [expected])
        return self.result(
            clamp01(score.score / 100.0),
            method="reference",
            precisions=[p / 100.0 for p in score.precisions],
            matches=list(score.counts),
            totals=list(score.totals),
            brevity_penalty=float(score.bp),
            sys_len=int(score.sys_len),
            ref_len=int(score.ref_len),
            tokenize=tokenize,
            smoothing="exp",
            library="sacrebleu",
        )


@register
class Chrf(Metric):
    """chrF2: character n-gram F-score of the response against the expected answer (sacrebleu).

    Formula (Popović 2015, sacrebleu ``CHRF()`` defaults): for character n-grams of
    orders 1..6 (whitespace removed), average precision P and recall R over the orders,
    then ``chrF = (1 + b^2) P R / (b^2 P + R)`` with b = 2 (recall weighted twice).
    Value = sacrebleu's score / 100.

    Inputs: response, expected. Range 0..1, higher is better. Empty input: None.
    Registered beside ``bleu`` (not a metric of the specifications) because character n-grams match
    inflected and clitic-attached forms (Arabic "والكتاب" vs "الكتاب") that word-level
    BLEU and ROUGE count as different words. Weakness: still surface overlap, no meaning;
    shared character sequences of unrelated words give small non-zero scores; Arabic
    diacritics are characters to it, so vocalised and plain spellings only partly match.
    """

    name = "chrf"
    family = "lexical"
    requires = ("response", "expected")
    suites = ("lexical",)

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        score = _chrf().sentence_score(sample.response or "", [sample.expected or ""])
        return self.result(
            clamp01(score.score / 100.0),
            method="reference",
            char_order=6,
            word_order=0,
            beta=2,
            library="sacrebleu",
        )


# ---- ROUGE (Assay's implementation, equal to rouge-score) --------------------------------


@register
class Rouge(Metric):
    """ROUGE-L F1 of the response against the expected answer, with ROUGE-1/2 as components.

    Formula (chatbot hub test layer: rouge-score's ``RougeScorer(["rouge1", "rouge2",
    "rougeL"], use_stemmer=True).score(target=expected, prediction=response)``), computed
    by Assay's own implementation (`assay.text.rouge`, `assay.text.porter`), which the
    tests check equal to rouge-score and nltk's Porter stemmer to the last bit. Tokens:
    the text lower-cased, runs of characters outside ``[a-z0-9]`` split it, tokens longer
    than 3 characters Porter-stemmed. For ROUGE-N, P = matching n-grams / response
    n-grams, R = matching n-grams / expected n-grams (counts clipped), F1 = 2PR / (P + R);
    ROUGE-L uses the longest common subsequence length L: P = L / response tokens,
    R = L / expected tokens. Value = ``rougeL_f1``; components ``rouge1_f1, rouge2_f1,
    rougeL_f1, rouge1_precision, rouge1_recall`` (the specification's names).

    rouge-score's default tokenizer keeps only ``[a-z0-9]``, so Arabic text would score 0
    whatever it says. When either text is Arabic or has letters but no ASCII letter, the
    tokens are Unicode words instead (`assay.text.tokenize.words`, lower-cased, no
    stemming; what rouge-score gives with that tokenizer passed to it);
    ``details.tokenizer`` says which ran.

    Inputs: response, expected. Range 0..1, higher is better. Empty input: None; None
    also when neither text has a word token (punctuation or emoji only: rouge-score
    returns 0 there, but nothing was compared); one side without tokens scores 0.
    Weaknesses: surface overlap only (paraphrases score low); no Arabic stemming, so
    clitic-attached forms ("والكتاب" / "الكتاب") do not match (see ``chrf``); Arabic
    diacritics and tatweel are ignored (`assay.text.tokenize.normalise`); in English text
    with a few Arabic words (under 30% of the letters) the default tokenizer drops those
    words.
    """

    name = "rouge"
    family = "lexical"
    requires = ("response", "expected")
    suites = ("base", "lexical")
    source = Source.CHATBOT_HUB
    components = ("rouge1_f1", "rouge2_f1", "rougeL_f1", "rouge1_precision", "rouge1_recall")

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        response, expected = sample.response or "", sample.expected or ""
        unicode = needs_unicode_tokenizer(response, expected)
        tokenize = words if unicode else rouge_tokens
        expected_tokens, response_tokens = tokenize(expected), tokenize(response)
        if not (response_tokens or expected_tokens):
            # rouge-score says 0 here, but nothing was compared: 0/0 is undefined, not 0
            return self.na("neither text has a word token to compare", method="reference")
        scores = rouge_scores(expected_tokens, response_tokens)
        components = {
            "rouge1_f1": scores["rouge1"].fmeasure,
            "rouge2_f1": scores["rouge2"].fmeasure,
            "rougeL_f1": scores["rougeL"].fmeasure,
            "rouge1_precision": scores["rouge1"].precision,
            "rouge1_recall": scores["rouge1"].recall,
        }
        return self.result(
            components["rougeL_f1"],
            components=components,
            method="reference",
            tokenizer="unicode-words (no stemming)"
            if unicode
            else "rouge-score default (Porter stemmer)",
            rouge2_precision=scores["rouge2"].precision,
            rouge2_recall=scores["rouge2"].recall,
            rougeL_precision=scores["rougeL"].precision,
            rougeL_recall=scores["rougeL"].recall,
            library="assay (checked equal to rouge-score 0.1.2)",
        )


# ---- response quality (chatbot hub test layer) -------------------------------------------


@register
class ResponseQuality(Metric):
    """Share of the chatbot hub's response quality checks the response passes.

    Formula: ``passed / total`` over `assay.text.quality.quality_checks`:
    has_minimum_length (``len(strip) >= MIN_RESPONSE_LENGTH``, default 10),
    is_not_empty, has_no_html_tags (no ``<`` or ``>``), ends_properly (ends with
    . ! ? : ; or the Arabic question mark / full stop) and, when ``MAX_RESPONSE_LENGTH``
    is configured, within_max_length. So total is 4, or 5 with a maximum.

    Inputs: response. A response that is absent (None) gives None; an empty or blank
    response is a real answer that fails the checks (is_not_empty, minimum length,
    ending) and scores 1/4 = 0.25 (it has no HTML). Range 0..1, higher is better; pass
    threshold 1.0 (all checks). Evidence: ``details.checks`` and the lengths used.
    Weaknesses: form only, not content; "x < y" in maths fails the HTML check (the specification's
    rule); a list or code block that does not end in punctuation fails ends_properly.
    """

    name = "response_quality"
    family = "lexical"
    requires = ("response",)
    default_threshold = 1.0
    suites = ("base",)
    source = Source.CHATBOT_HUB

    def missing_inputs(self, sample: Sample) -> list[str]:
        # an empty answer is what these checks exist to catch: only None is missing
        return [] if sample.response is not None else ["response"]

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        min_length = res.config.min_response_length
        max_length = res.config.max_response_length
        checks = quality_checks(sample.response, min_length=min_length, max_length=max_length)
        passed = sum(checks.values())
        return self.result(
            passed / len(checks),
            method="pattern",
            checks=checks,
            passed=passed,
            total=len(checks),
            failed=[name for name, ok in checks.items() if not ok],
            min_response_length=min_length,
            max_response_length=max_length,
        )


# ---- fallback detection (chatbot hub test layer) ------------------------------------------

_AR_PREFIX = r"(?<!\w)(?:[وف])?"  # attached conjunction: "وحاول مرة أخرى"
_AR_SUFFIX = r"(?:ك|كم|كي|ه|ها|هم|ني)?(?!\w)"  # attached pronoun: "لم أفهمك"

#: canonical phrase (the specification's) -> regular expression over normalised text
FALLBACK_PHRASES: dict[str, re.Pattern[str]] = {
    "try again": re.compile(r"(?<!\w)try\s+again(?!\w)"),
    "sorry, i didn't understand": re.compile(
        r"(?<!\w)sorry\W+i\s+(?:didn't|did\s+not|didnt)\s+understand(?!\w)"
    ),
    "please rephrase": re.compile(r"(?<!\w)please\s+rephrase(?!\w)"),
    "i'm having trouble": re.compile(r"(?<!\w)(?:i'm|i\s+am|im)\s+having\s+trouble(?!\w)"),
    "error": re.compile(r"(?<!\w)error(?!\w)"),
    # Arabic, after normalisation (alef forms -> ا, ى -> ي, ة -> ه, no diacritics)
    "حدث خطأ": re.compile(_AR_PREFIX + r"حدث(?:ت)?\s+خطا" + r"(?!\w)"),
    "حاول مرة أخرى": re.compile(_AR_PREFIX + r"حاول(?:ي|وا)?\s+مره\s+اخري(?!\w)"),
    "لم أفهم": re.compile(_AR_PREFIX + r"لم\s+افهم" + _AR_SUFFIX),
}

#: the lone word "error" only counts in a response this short (a fallback message is
#: short; a long answer that mentions an error is explaining something)
ERROR_WORD_MAX_WORDS = 25


def _normalise_for_fallback(text: str) -> str:
    text = text.lower().replace("’", "'").replace("‘", "'")
    text = normalise_arabic(text)
    return re.sub(r"\s+", " ", text)


def find_fallback_phrases(
    text: str, error_word_max_words: int = ERROR_WORD_MAX_WORDS
) -> tuple[list[dict[str, str]], list[str]]:
    """(matched phrases with the matched text, phrases ignored by the short-response rule)."""
    normalised = _normalise_for_fallback(text)
    n_words = len(words(text))
    matched: list[dict[str, str]] = []
    ignored: list[str] = []
    for phrase, regex in FALLBACK_PHRASES.items():
        match = regex.search(normalised)
        if not match:
            continue
        if phrase == "error" and n_words > error_word_max_words:
            ignored.append(phrase)
            continue
        matched.append({"phrase": phrase, "text": match.group(0).strip()})
    return matched, ignored


@register
class FallbackDetection(Metric):
    """1 when the response is a fallback message ("please try again", "لم أفهم"), else 0.

    Formula (chatbot hub test layer): ``1.0 if any(indicator in response.lower())`` over the
    hub's indicators: English "try again", "sorry, i didn't understand", "please
    rephrase", "i'm having trouble", "error"; Arabic "حدث خطأ", "حاول مرة أخرى",
    "لم أفهم".

    Matching differs from the specification's substring test on purpose:
      - case-insensitive, curly apostrophes folded, and whole words only: "error" does
        not match inside "terror" or "errors", "try again" not inside "retry again";
        "did not"/"didnt" and "i am" are accepted for "didn't" and "i'm".
      - the lone word "error" is weak evidence, so it counts only in a response of at
        most 25 words ("An error occurred." is a fallback; a 60-word explanation of
        "the error in your code" is not). "errors in the data were corrected" never
        matches (plural).
      - Arabic text is normalised (diacritics and tatweel removed, أ/إ/آ -> ا,
        ى -> ي, ة -> ه) and the phrases accept an attached conjunction (و/ف: "وحاول
        مرة أخرى"), feminine/plural imperatives ("حاولي"، "حاولوا"), "حدثت خطأ" and an
        attached pronoun on "لم أفهم" ("لم أفهمك"). "حاولت مرة أخرى" (I tried again) does
        not match.

    Inputs: response. Range {0, 1}; lower is better (a fallback is a failed answer);
    pass threshold 0. Empty response: None. Evidence: ``details.matched`` (phrase and
    matched text, in normalised form), ``details.ignored``. Weaknesses: a fixed phrase
    list: other fallback wordings ("I can't help with that") are missed, and a real answer
    containing "try again" ("if the upload fails, try again") is flagged, as is a short
    answer about an error ("A 404 error means the page was not found.").
    """

    name = "fallback_detection"
    family = "lexical"
    requires = ("response",)
    higher_is_better = False
    unit = "bool"
    default_threshold = 0.0
    suites = ("base",)
    source = Source.CHATBOT_HUB

    def __init__(self, error_word_max_words: int = ERROR_WORD_MAX_WORDS) -> None:
        if error_word_max_words < 0:
            raise ValueError(
                "The 'error_word_max_words' parameter of FallbackDetection must be >= 0. "
                f"Got {error_word_max_words}."
            )
        self.error_word_max_words = error_word_max_words

    def params(self) -> dict[str, Any]:
        return {"error_word_max_words": self.error_word_max_words}

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        matched, ignored = find_fallback_phrases(sample.response or "", self.error_word_max_words)
        return self.result(
            1.0 if matched else 0.0,
            method="pattern",
            matched=matched,
            ignored=ignored,
            is_fallback=bool(matched),
        )
