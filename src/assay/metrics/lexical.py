"""Lexical metrics: string overlap and surface patterns of the response (no model).

Seed 000's base-model metrics ``exact_match``, ``bleu`` and ``citation_accuracy``, its
test-layer ``rouge``, response quality checks and fallback detection, plus ``chrf``
(character n-gram F-score) beside ``bleu`` for morphologically rich languages.
Reference libraries: sacrebleu (BLEU, chrF) and rouge-score (ROUGE).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from assay.metric import Metric, clamp01
from assay.registry import register
from assay.resources import Resources
from assay.result import MetricResult
from assay.sample import Sample
from assay.text.lang import is_arabic
from assay.text.quality import quality_checks
from assay.text.tokenize import words

__all__ = [
    "CITATION_PATTERNS",
    "FALLBACK_PHRASES",
    "UnicodeRougeTokenizer",
    "find_citations",
    "find_fallback_phrases",
    "needs_unicode_tokenizer",
]


@register
class ExactMatch(Metric):
    """1 when the response equals the expected answer after trimming and lower-casing, else 0.

    Formula (seed 000): ``1.0 if response.strip().lower() == expected.strip().lower() else 0.0``.
    Range {0, 1}, higher is better. Requires response and expected; a missing or blank
    one gives None with a reason (the seed would call two blank strings a match).
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
    seed = "000"

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

    Seed 000 calls NLTK ``sentence_bleu`` with an unnamed smoothing function; NLTK's
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
    seed = "000"

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
    Registered beside ``bleu`` (not a seed metric) because character n-grams match
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


# ---- ROUGE (rouge-score) -------------------------------------------------------------


class UnicodeRougeTokenizer:
    """rouge-score tokenizer for non-ASCII text: `assay.text.tokenize.words`, no stemming.

    rouge-score's default tokenizer replaces everything outside ``[a-z0-9]`` with spaces,
    so Arabic (or any non-Latin) text becomes no tokens and scores 0.
    """

    def tokenize(self, text: str) -> list[str]:
        return words(text)


_ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def _has_rouge_token(text: str, unicode: bool) -> bool:
    """True when the tokenizer ROUGE runs with gives ``text`` at least one token."""
    if unicode:
        return bool(words(text))
    from rouge_score import tokenize

    return bool(tokenize.tokenize(text, None))


@lru_cache(maxsize=2)
def _rouge_scorer(unicode: bool) -> Any:
    from rouge_score import rouge_scorer

    if unicode:
        return rouge_scorer.RougeScorer(list(_ROUGE_TYPES), tokenizer=UnicodeRougeTokenizer())
    return rouge_scorer.RougeScorer(list(_ROUGE_TYPES), use_stemmer=True)


@register
class Rouge(Metric):
    """ROUGE-L F1 of the response against the expected answer, with ROUGE-1/2 as components.

    Formula (seed 000 test layer, rouge-score): ``RougeScorer(["rouge1", "rouge2",
    "rougeL"], use_stemmer=True).score(reference=expected, candidate=response)``. For
    ROUGE-N, P = matching n-grams / response n-grams, R = matching n-grams / expected
    n-grams (counts clipped), F1 = 2PR / (P + R); ROUGE-L uses the longest common
    subsequence length as the match count. Value = ``rougeL_f1``; components
    ``rouge1_f1, rouge2_f1, rougeL_f1, rouge1_precision, rouge1_recall`` (the seed's
    names). Matches rouge-score exactly on text with ASCII letters.

    rouge-score's default tokenizer keeps only ``[a-z0-9]``, so Arabic text scores 0
    whatever it says. When either text is Arabic or has letters but no ASCII letter, a
    Unicode word tokenizer (`assay.text.tokenize.words`, lower-cased, no stemming) is
    passed to rouge-score instead; ``details.tokenizer`` says which ran.

    Inputs: response, expected. Range 0..1, higher is better. Empty input: None; None
    also when neither text has a word token (punctuation or emoji only: rouge-score
    returns 0 there, but nothing was compared); one side without tokens scores 0.
    Weaknesses: surface overlap only (paraphrases score low); no Arabic stemming, so
    clitic-attached forms ("والكتاب" / "الكتاب") do not match (see ``chrf``); Arabic
    diacritics and tatweel are ignored (`assay.text.tokenize.normalise`); in English text
    with a few Arabic words (under 30% of the letters) the default tokenizer drops those
    words; the LCS of rouge-score is pure Python and quadratic, so two texts of several
    thousand words take seconds.
    """

    name = "rouge"
    family = "lexical"
    requires = ("response", "expected")
    suites = ("base", "lexical")
    seed = "000"
    components = ("rouge1_f1", "rouge2_f1", "rougeL_f1", "rouge1_precision", "rouge1_recall")

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        response, expected = sample.response or "", sample.expected or ""
        unicode = needs_unicode_tokenizer(response, expected)
        if not (_has_rouge_token(response, unicode) or _has_rouge_token(expected, unicode)):
            # rouge-score says 0 here, but nothing was compared: 0/0 is undefined, not 0
            return self.na("neither text has a word token to compare", method="reference")
        scores = _rouge_scorer(unicode).score(expected, response)
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
            library="rouge-score",
        )


# ---- citation accuracy (pattern) -------------------------------------------------------


@dataclass(frozen=True)
class CitationPattern:
    """One kind of citation: its seed name, weight and regular expression."""

    kind: str
    weight: float
    regex: re.Pattern[str]
    check: str | None = None  # name of an extra test on the match, see _accept


_DIACRITICS = "\u064b-\u0652"
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_NOT_A_SOURCE_NAME = frozenset(
    {"sic", "citation needed", "edit", "todo", "note", "clarification needed"}
)

# text after "source:" / "reference:" on the same line (at least one character, so a bare
# "References:" heading is not a citation): up to a bracket, ";", a clause mark or a full stop
# that ends a sentence (dots inside "www.who.int" are kept)
_LABEL_TEXT = r"(?=[^\s\[\]();.،؛؟])(?:[^\n\[\]();.،؛؟]|\.(?=\S)){1,80}"

#: The seed's citation kinds, strongest first (this is also the order overlaps are
#: resolved in). Arabic label forms are added to the seed's English ones.
CITATION_PATTERNS: tuple[CitationPattern, ...] = (
    CitationPattern("numbered", 1.0, re.compile(r"\[\s*\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\s*\]")),
    CitationPattern("named", 0.8, re.compile(r"\[([^\[\]\n]{2,100})\]"), check="named"),
    CitationPattern(
        "source_label",
        0.7,
        re.compile(r"(?<!\w)(?:sources?|المصدر|مصدر)[ \t]*:[ \t]*" + _LABEL_TEXT, re.IGNORECASE),
    ),
    CitationPattern(
        "parenthetical", 0.6, re.compile(r"(?<!\])\(([^()\n]{2,120})\)"), check="parenthetical"
    ),
    CitationPattern(
        "reference_label",
        0.6,
        re.compile(
            r"(?<!\w)(?:references?|ref\.|المرجع|مرجع)[ \t]*:[ \t]*" + _LABEL_TEXT, re.IGNORECASE
        ),
    ),
    CitationPattern(
        "according_to",
        0.5,
        re.compile(
            rf"(?<!\w)(?:according\s+to|وفق[{_DIACRITICS}ا]{{0,3}}\s*ل[{_DIACRITICS}]?|نقلا\s+عن)"
            r"\s*[^\s\[\]();,.،؛؟][^\n\[\]();,.،؛؟]{0,79}",
            re.IGNORECASE,
        ),
    ),
)

# parenthetical: what makes "( ... )" a source and not an aside such as "(e.g. 5 kg)"
_PAREN_STRONG_CUE = re.compile(
    r"^\s*(?:sources?|ref\.?|references?|citing|cited in|retrieved from|adapted from"
    r"|المصدر|مصدر|المرجع|مرجع)\b",
    re.IGNORECASE,
)
_PAREN_WEAK_CUE = re.compile(
    r"^\s*(?:see|cf\.?|via|from|per)\s+(?!(?:figure|fig\.?|table|section|chapter|appendix"
    r"|step|above|below|note|page|p\.)\b)[A-Z]",
    re.IGNORECASE,
)
_AUTHOR_YEAR = re.compile(
    rf"(?<!\w)(?!(?i:{_MONTHS})\b)[A-Z][\w'’-]+"
    r"(?:\s+(?:et\s+al\.?|and|&)(?:\s+[A-Z][\w'’-]+)?)?,?\s+(?:1[89]|20)\d{2}[a-z]?\b"
)
_URL = re.compile(r"https?://|www\.|\b[\w-]+\.(?:com|org|gov|edu|net|int|io|info)\b", re.IGNORECASE)
_YEAR_ONLY = re.compile(r"^\s*(?:1[89]|20)\d{2}[a-z]?\s*$")
_NAME_BEFORE = re.compile(rf"(?:(?<!\w)(?!(?i:{_MONTHS})\b)[A-Z][\w'’-]+|et\s+al\.?)\s*$")


def _is_source_parenthetical(content: str, before: str) -> bool:
    if _PAREN_STRONG_CUE.search(content) or _URL.search(content):
        return True
    # weak cues need a capitalised name after them: "(see Smith 2020)", not "(see above)"
    weak = _PAREN_WEAK_CUE.match(content)
    if weak and weak.group(0)[-1].isupper():
        return True
    if _AUTHOR_YEAR.search(content):
        return True
    # "Smith et al. (2020)": a bare year right after a name
    return bool(_YEAR_ONLY.match(content) and _NAME_BEFORE.search(before))


def _accept(pattern: CitationPattern, match: re.Match[str], text: str) -> bool:
    if pattern.check == "named":
        content = match.group(1).strip()
        letters = _LETTER.findall(content)
        return len(letters) >= 2 and content.lower() not in _NOT_A_SOURCE_NAME
    if pattern.check == "parenthetical":
        before = text[max(0, match.start() - 40) : match.start()]
        return _is_source_parenthetical(match.group(1), before)
    return True


def find_citations(text: str) -> list[dict[str, Any]]:
    """Citations in ``text``: kind, weight, matched text and offsets, in text order.

    Patterns are tried strongest first; a match overlapping an already accepted one is
    not counted again (so "(source: WHO)" is one citation, not a label plus a
    parenthetical).
    """
    taken: list[tuple[int, int]] = []
    found: list[dict[str, Any]] = []
    for pattern in CITATION_PATTERNS:
        for match in pattern.regex.finditer(text):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            if not _accept(pattern, match, text):
                continue
            taken.append((start, end))
            found.append(
                {
                    "kind": pattern.kind,
                    "weight": pattern.weight,
                    "text": match.group(0).strip(),
                    "start": start,
                    "end": end,
                }
            )
    return sorted(found, key=lambda c: c["start"])


def citation_score(weights: Sequence[float]) -> float:
    """Seed 000: ``max(weights) * (1 + 0.1 * (n - 1))`` capped at 1; 0 with no citation."""
    if not weights:
        return 0.0
    best = max(weights)
    n = len(weights)
    return min(1.0, best * (1.0 + 0.1 * (n - 1))) if n > 1 else best


@register
class CitationAccuracy(Metric):
    """Presence and form of citations in the response, by seed 000's weighted patterns.

    Formula (seed 000, on the 0..1 scale): find the citations, each with the weight of
    its kind: numbered ``[1]``, ``[2, 3]`` 1.0; named ``[WHO report]`` 0.8;
    ``source: ...`` 0.7; parenthetical ``(Smith et al., 2020)`` 0.6; ``reference: ...``
    0.6; ``according to ...`` 0.5. ``score = max(weight)``; with n > 1 citations,
    ``score = min(1, score * (1 + 0.1 * (n - 1)))``. No citation: 0.0.

    Rules beyond the seed's list (so that ordinary brackets are not citations):
      - named: bracket text with at least two letters, not a number list, not an
        editorial mark ("[sic]", "[citation needed]"). A Markdown link ``[text](url)``
        counts once, as named.
      - parenthetical: the parentheses must look like a source: they start with a
        source cue ("source", "ref", "cited in", "retrieved from", Arabic "المصدر",
        "المرجع"), or start with "see/cf./via/from/per" followed by a capitalised name
        (not "see Table 2", "see above"), or hold a URL or a domain, or an author-year
        ("Smith, 2020", "Smith and Lee 2019"; not a month such as "March 2020"), or are a
        bare year right after a name ("Smith et al. (2020)"). So "(e.g. 5 kg)",
        "(in 2020)", "(see above)" are not citations.
      - labels ``source:``, ``reference:`` and ``according to`` are case-insensitive,
        also match their Arabic forms (المصدر:، المرجع:، وفقًا لـ، نقلا عن) and need
        text after them on the same line (a bare "References:" heading is not a
        citation); the citation text runs to the end of the sentence or clause.
      - n counts citation occurrences; a match that overlaps a stronger one already
        found is not counted twice ("(source: WHO)" is one source label).

    Inputs: response. Range 0..1, higher is better. Empty response: None. Evidence:
    ``details.citations`` (kind, weight, text, offsets). Weakness: this checks that
    citations are present and well-formed, not that they are accurate: "[7]" scores 1.0
    even when there is no 7th source and the claim is not in any source. Checking each
    cited source against ``contexts``/``expected_sources`` would be the better method; it
    is not implemented yet. "according to the plan" counts as a (weak) citation.
    """

    name = "citation_accuracy"
    family = "lexical"
    requires = ("response",)
    suites = ("rag", "base-model")
    seed = "000"

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        citations = find_citations(sample.response or "")
        score = citation_score([c["weight"] for c in citations])
        return self.result(
            score,
            method="pattern",
            citations=citations,
            n_citations=len(citations),
            max_weight=max((c["weight"] for c in citations), default=0.0),
        )


# ---- response quality (seed 000 test layer) -------------------------------------------


@register
class ResponseQuality(Metric):
    """Share of seed 000's response quality checks the response passes.

    Formula: ``passed / total`` over `assay.text.quality.quality_checks`:
    has_minimum_length (``len(strip) >= MIN_RESPONSE_LENGTH``, default 10),
    is_not_empty, has_no_html_tags (no ``<`` or ``>``), ends_properly (ends with
    . ! ? : ; or the Arabic question mark / full stop) and, when ``MAX_RESPONSE_LENGTH``
    is configured, within_max_length. So total is 4, or 5 with a maximum.

    Inputs: response. A response that is absent (None) gives None; an empty or blank
    response is a real answer that fails the checks (is_not_empty, minimum length,
    ending) and scores 1/4 = 0.25 (it has no HTML). Range 0..1, higher is better; pass
    threshold 1.0 (all checks). Evidence: ``details.checks`` and the lengths used.
    Weaknesses: form only, not content; "x < y" in maths fails the HTML check (the seed's
    rule); a list or code block that does not end in punctuation fails ends_properly.
    """

    name = "response_quality"
    family = "lexical"
    requires = ("response",)
    default_threshold = 1.0
    suites = ("base",)
    seed = "000"

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


# ---- fallback detection (seed 000 test layer) ------------------------------------------

_AR_NORMALISE = str.maketrans({"أ": "ا", "إ": "ا", "آ": "ا", "ى": "ي", "ة": "ه", "ـ": None})
_AR_DIACRITICS = re.compile(f"[{_DIACRITICS}\u0670]")
_AR_PREFIX = r"(?<!\w)(?:[وف])?"  # attached conjunction: "وحاول مرة أخرى"
_AR_SUFFIX = r"(?:ك|كم|كي|ه|ها|هم|ني)?(?!\w)"  # attached pronoun: "لم أفهمك"

#: canonical phrase (the seed's) -> regular expression over normalised text
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
    text = _AR_DIACRITICS.sub("", text).translate(_AR_NORMALISE)
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

    Formula (seed 000 test layer): ``1.0 if any(indicator in response.lower())`` over the
    seed's indicators: English "try again", "sorry, i didn't understand", "please
    rephrase", "i'm having trouble", "error"; Arabic "حدث خطأ", "حاول مرة أخرى",
    "لم أفهم".

    Matching differs from the seed's substring test on purpose:
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
    seed = "000"

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
