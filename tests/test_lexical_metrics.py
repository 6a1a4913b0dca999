"""Lexical metrics: hand-worked values and agreement with sacrebleu and rouge-score."""

from __future__ import annotations

import math

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric, suite
from test_rouge import reference_components


def score(name: str, resources: Resources, **fields):
    return get_metric(name).score(Sample(**fields), resources)


# ---- registration ---------------------------------------------------------------------


def test_suites_and_polarity() -> None:
    lexical, base = suite("lexical"), suite("base")
    for name in ("exact_match", "bleu", "rouge", "chrf"):
        assert name in lexical
    for name in ("bleu", "rouge", "response_quality", "fallback_detection"):
        assert name in base
    assert get_metric("fallback_detection").higher_is_better is False
    assert get_metric("citation_accuracy").higher_is_better is True


def test_exact_match_trims_and_lowercases(resources: Resources) -> None:
    assert score("exact_match", resources, response=" Paris ", expected="paris").value == 1.0
    assert score("exact_match", resources, response="Paris.", expected="Paris").value == 0.0


# ---- BLEU ---------------------------------------------------------------------------------


def test_bleu_worked_by_hand(resources: Resources) -> None:
    r = score("bleu", resources, response="the cat sat on the mat", expected="the cat sat on a mat")
    # 1-grams: the(min(2,1)=1) cat sat on mat = 5 of 6
    # 2-grams: "the cat" "cat sat" "sat on" match, "on the" "the mat" do not = 3 of 5
    # 3-grams: "the cat sat" "cat sat on" = 2 of 4;  4-grams: "the cat sat on" = 1 of 3
    # BP = 1 (6 tokens each);  BLEU = (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = (1/12) ** 0.25
    assert r.value == pytest.approx((1 / 12) ** 0.25)  # 0.53728
    assert r.details["precisions"] == pytest.approx([5 / 6, 3 / 5, 2 / 4, 1 / 3])
    assert r.details["matches"] == [5, 3, 2, 1]
    assert r.details["totals"] == [6, 5, 4, 3]
    assert r.details["brevity_penalty"] == 1.0
    assert (r.details["sys_len"], r.details["ref_len"]) == (6, 6)
    assert r.method == "reference"


def test_bleu_brevity_penalty_by_hand(resources: Resources) -> None:
    r = score("bleu", resources, response="the cat sat on", expected="the cat sat on the mat")
    # every n-gram of the 4-token response matches: p1..p4 = 1; c = 4, r = 6
    # BP = exp(1 - 6/4) = exp(-0.5) = 0.60653
    assert r.details["brevity_penalty"] == pytest.approx(math.exp(-0.5))
    assert r.value == pytest.approx(math.exp(-0.5))


def test_bleu_exp_smoothing_by_hand(resources: Resources) -> None:
    r = score(
        "bleu", resources, response="the cat is on the mat", expected="the cat sat on the mat"
    )
    # matches [5, 3, 1, 0] of [6, 5, 4, 3]; the zero 4-gram count is the first zero order,
    # so exp smoothing gives it 1 / (2**1 * 3) = 1/6
    # BLEU = (5/6 * 3/5 * 1/4 * 1/6) ** (1/4) = (1/48) ** 0.25 = 0.37992
    assert r.value == pytest.approx((1 / 48) ** 0.25)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            "The quick brown fox jumps over the lazy dog.",
            "A quick brown fox jumped over a lazy dog.",
        ),
        ("Paris is the capital of France.", "The capital of France is Paris."),
        ("It costs $12.50 per month, billed yearly.", "The price is 12.50 dollars a month."),
        ("Completely unrelated words here", "The capital of France is Paris."),
        ("Yes", "Yes, it is."),
    ],
)
def test_bleu_equals_sacrebleu(resources: Resources, response: str, expected: str) -> None:
    r = score("bleu", resources, response=response, expected=expected)
    assert r.details["tokenize"] == "13a"
    assert r.value == pytest.approx(sacrebleu.sentence_bleu(response, [expected]).score / 100)


def test_bleu_arabic_uses_intl_tokenizer(resources: Resources) -> None:
    response = "عاصمة فرنسا هي باريس، وهي مدينة جميلة."
    expected = "باريس هي عاصمة فرنسا، وهي مدينة جميلة."
    r = score("bleu", resources, response=response, expected=expected)
    assert r.details["tokenize"] == "intl"
    reference = sacrebleu.sentence_bleu(response, [expected], tokenize="intl").score / 100
    assert r.value == pytest.approx(reference)
    # intl splits the Arabic comma, so all 9 unigrams match (13a leaves "باريس،" glued)
    assert r.details["precisions"][0] == pytest.approx(1.0)


def test_bleu_missing_expected_is_none(resources: Resources) -> None:
    r = score("bleu", resources, response="Paris.")
    assert r.value is None and "expected" in (r.reason or "")


# ---- chrF -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            "The quick brown fox jumps over the lazy dog.",
            "A quick brown fox jumped over a lazy dog.",
        ),
        ("عاصمة فرنسا هي باريس", "باريس هي عاصمة فرنسا"),
        ("totally different", "The capital of France is Paris."),
    ],
)
def test_chrf_equals_sacrebleu(resources: Resources, response: str, expected: str) -> None:
    r = score("chrf", resources, response=response, expected=expected)
    assert r.value == pytest.approx(sacrebleu.sentence_chrf(response, [expected]).score / 100)


def test_chrf_credits_arabic_clitics_that_word_metrics_miss(resources: Resources) -> None:
    # "والكتاب" (and the book) vs "الكتاب" (the book): different words for BLEU/ROUGE
    fields = {"response": "والكتاب مفيد", "expected": "الكتاب مفيد"}
    chrf = score("chrf", resources, **fields).value
    rouge1 = score("rouge", resources, **fields).components["rouge1_f1"]
    assert rouge1 == pytest.approx(0.5)  # only "مفيد" matches: P = R = 1/2
    assert chrf > rouge1
    unrelated = score("chrf", resources, response="السماء زرقاء", expected="الكتاب مفيد").value
    assert chrf > unrelated


# ---- ROUGE ----------------------------------------------------------------------------------


def test_rouge1_worked_by_hand(resources: Resources) -> None:
    r = score(
        "rouge", resources, response="the cat lay on the red mat", expected="the cat sat on the mat"
    )
    # response unigrams: the x2, cat, lay, on, red, mat (7); expected: the x2, cat, sat, on, mat (6)
    # clipped overlap: the 2 + cat + on + mat = 5;  P = 5/7, R = 5/6
    # F1 = 2PR / (P + R) = (50/42) / (65/42) = 10/13
    assert r.components["rouge1_precision"] == pytest.approx(5 / 7)
    assert r.components["rouge1_recall"] == pytest.approx(5 / 6)
    assert r.components["rouge1_f1"] == pytest.approx(10 / 13)
    # bigrams: "the cat", "on the", "the mat" of the response (6) and expected (5):
    # "the cat" and "on the" match -> P = 2/6, R = 2/5, F1 = 2*(1/3)(2/5)/(1/3 + 2/5) = 4/11
    assert r.components["rouge2_f1"] == pytest.approx(4 / 11)
    # LCS = the cat on the mat = 5 -> same P, R as rouge1
    assert r.value == pytest.approx(10 / 13)
    assert r.components["rougeL_f1"] == r.value


_SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            "The quick brown fox jumps over the lazy dog.",
            "A quick brown fox jumped over a lazy dog.",
        ),
        ("Cats running fast", "cat runs fast"),  # Porter stemmer: cats->cat, running->run
        ("Paris is the capital of France.", "The capital of France is Paris."),
        ("It costs $12.50 per month.", "The price is 12.50 dollars a month."),
        ("nothing in common", "Paris is the capital."),
    ],
)
def test_rouge_equals_rouge_score(resources: Resources, response: str, expected: str) -> None:
    r = score("rouge", resources, response=response, expected=expected)
    ref = _SCORER.score(expected, response)  # (target=reference, prediction=candidate)
    assert r.details["tokenizer"].startswith("rouge-score default")
    assert r.components == reference_components(ref)  # to the last bit: see test_rouge
    assert r.value == ref["rougeL"].fmeasure


def test_rouge_stemming_matches_inflections(resources: Resources) -> None:
    r = score("rouge", resources, response="Cats running fast", expected="cat runs fast")
    assert r.value == pytest.approx(1.0)


def test_rouge_arabic_uses_unicode_tokenizer(resources: Resources) -> None:
    response, expected = "عاصمة فرنسا هي باريس", "باريس هي عاصمة فرنسا"
    # rouge-score's own tokenizer sees no tokens in Arabic: everything is 0
    assert _SCORER.score(expected, response)["rouge1"].fmeasure == 0.0
    r = score("rouge", resources, response=response, expected=expected)
    assert r.details["tokenizer"] == "unicode-words (no stemming)"
    # same 4 words: rouge1 P = R = F = 1
    assert r.components["rouge1_f1"] == pytest.approx(1.0)
    # bigrams: expected (باريس هي)(هي عاصمة)(عاصمة فرنسا); response (عاصمة فرنسا)(فرنسا هي)
    # (هي باريس): 1 of 3 each way -> 1/3
    assert r.components["rouge2_f1"] == pytest.approx(1 / 3)
    # LCS = "عاصمة فرنسا" = 2 of 4 -> 0.5
    assert r.value == pytest.approx(0.5)


def test_rouge_vocalised_arabic_matches_plain_spelling(resources: Resources) -> None:
    # "عَاصِمَةُ" used to split into the fragments ع / اص / م / ة; its diacritics are now
    # ignored, so both texts are the same 4 words in the same order: every F1 is 1
    r = score("rouge", resources, response="عاصمة فرنسا هي باريس", expected="عَاصِمَةُ فَرَنْسَا هِيَ بَارِيسُ")
    assert r.components["rouge1_f1"] == pytest.approx(1.0)
    assert r.components["rouge2_f1"] == pytest.approx(1.0)
    assert r.value == pytest.approx(1.0)


def test_rouge_without_any_token_is_none(resources: Resources) -> None:
    # rouge-score returns 0 when neither text has a token; nothing was compared: None
    r = score("rouge", resources, response="!!!", expected="???")
    assert r.value is None and "token" in (r.reason or "")
    assert score("rouge", resources, response="😀", expected="😀").value is None
    # one side with tokens is a real comparison: R = 0 / 1 (or P = 0 / 1) -> F1 = 0
    assert score("rouge", resources, response="...", expected="Paris.").value == 0.0
    assert score("rouge", resources, response="Paris.", expected="—").value == 0.0


def test_rouge_non_latin_script_uses_unicode_tokenizer(resources: Resources) -> None:
    r = score(
        "rouge", resources, response="Москва столица России", expected="столица России Москва"
    )
    assert r.details["tokenizer"] == "unicode-words (no stemming)"
    assert r.components["rouge1_f1"] == pytest.approx(1.0)


# ---- citation accuracy -------------------------------------------------------------------


def cite(text: str, resources: Resources):
    return score("citation_accuracy", resources, response=text)


def test_citation_single_kinds(resources: Resources) -> None:
    assert cite("Paris is the capital [1].", resources).value == pytest.approx(1.0)
    assert cite("Paris is the capital [WHO report].", resources).value == pytest.approx(0.8)
    assert cite("Source: the WHO fact sheet", resources).value == pytest.approx(0.7)
    assert cite("Growth slowed (Smith et al., 2020).", resources).value == pytest.approx(0.6)
    assert cite("Reference: Nature 2019", resources).value == pytest.approx(0.6)
    assert cite("According to the CDC masks help.", resources).value == pytest.approx(0.5)


def test_citation_multi_bonus_by_hand(resources: Resources) -> None:
    r = cite("According to the WHO, cases fell (Smith, 2020).", resources)
    # weights 0.5 and 0.6: max 0.6, n = 2 -> 0.6 * (1 + 0.1 * 1) = 0.66
    assert r.value == pytest.approx(0.66)
    assert [c["kind"] for c in r.details["citations"]] == ["according_to", "parenthetical"]
    r = cite("Source: WHO. According to the CDC, according to the NHS, masks help.", resources)
    # 0.7, 0.5, 0.5: max 0.7, n = 3 -> 0.7 * 1.2 = 0.84
    assert r.value == pytest.approx(0.84)
    assert r.details["n_citations"] == 3
    r = cite("Cases fell [1] and rose [2] (Smith et al., 2020).", resources)
    # max 1.0, n = 3 -> min(1, 1.0 * 1.2) = 1.0
    assert r.value == pytest.approx(1.0)


def test_citation_none_is_zero(resources: Resources) -> None:
    r = cite("Paris is the capital of France.", resources)
    assert r.value == 0.0 and r.details["citations"] == []


@pytest.mark.parametrize(
    "text",
    [
        "Take 5 mg (e.g. 5 kg of body weight) daily.",
        "Sales grew (in 2020) and again (see above).",
        "It started (March 2020) and see the chart (see Table 2).",
        "Prices rose (per day) (from 2010 to 2020).",
        "He wrote [sic] and ticked [x] and skipped [...]",
        "References:\nnone yet",
    ],
)
def test_citation_ordinary_brackets_are_not_citations(resources: Resources, text: str) -> None:
    r = cite(text, resources)
    assert r.value == 0.0, r.details["citations"]


def test_citation_overlaps_counted_once(resources: Resources) -> None:
    r = cite("Masks help (source: WHO).", resources)
    # "source: WHO" (0.7) and the parenthetical around it are one citation, no bonus
    assert r.value == pytest.approx(0.7)
    assert r.details["n_citations"] == 1
    r = cite("Read [the WHO guide](https://who.int/guide).", resources)
    # a Markdown link is one named citation, not also a URL parenthetical
    assert r.value == pytest.approx(0.8)
    assert r.details["n_citations"] == 1


def test_citation_narrative_year_and_url(resources: Resources) -> None:
    r = cite("Smith et al. (2021) showed it (via Reuters) and (www.who.int).", resources)
    # three parentheticals at 0.6: 0.6 * 1.2 = 0.72
    assert r.value == pytest.approx(0.72)


def test_citation_arabic_labels(resources: Resources) -> None:
    r = cite("وفقاً لمنظمة الصحة العالمية، انخفضت الحالات. المصدر: وزارة الصحة", resources)
    # according_to 0.5 and source label 0.7: 0.7 * 1.1 = 0.77
    assert r.value == pytest.approx(0.77)
    assert sorted(c["kind"] for c in r.details["citations"]) == ["according_to", "source_label"]


# ---- response quality ----------------------------------------------------------------------


def test_response_quality_all_pass(resources: Resources) -> None:
    r = score("response_quality", resources, response="Paris is the capital of France.")
    assert r.value == 1.0 and r.details["total"] == 4 and r.details["failed"] == []


def test_response_quality_partial_by_hand(resources: Resources) -> None:
    r = score("response_quality", resources, response="<b>Hi</b>")
    # length 9 < 10 fails, not empty passes, has "<" fails, ends with ">" fails: 1 / 4
    assert r.value == pytest.approx(0.25)
    assert sorted(r.details["failed"]) == [
        "ends_properly",
        "has_minimum_length",
        "has_no_html_tags",
    ]
    r = score("response_quality", resources, response="Paris is the capital")
    # only ends_properly fails: 3 / 4
    assert r.value == pytest.approx(0.75)


def test_response_quality_empty_answer_scores_not_none(resources: Resources) -> None:
    r = score("response_quality", resources, response="   ")
    # min length, not empty and ending fail; no HTML passes: 1 / 4
    assert r.value == pytest.approx(0.25)
    assert score("response_quality", resources, query="q").value is None


def test_response_quality_max_length_from_config(tmp_path) -> None:
    res = Resources(
        AssayConfig(cache_dir=str(tmp_path), max_response_length=20, min_response_length=5)
    )
    metric = get_metric("response_quality")
    r = metric.score(Sample(response="This answer is rather long for the limit."), res)
    # 5 checks; within_max_length fails (42 > 20): 4 / 5
    assert r.details["total"] == 5
    assert r.value == pytest.approx(0.8)
    assert r.details["failed"] == ["within_max_length"]
    r = metric.score(Sample(response="Short one."), res)  # 10 chars >= 5: all 5 pass
    assert r.value == 1.0


# ---- fallback detection -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("Sorry, something went wrong. Please try again later.", "try again"),
        ("Sorry, I didn't understand that.", "sorry, i didn't understand"),
        ("Sorry, I did not understand your question.", "sorry, i didn't understand"),
        ("Could you please rephrase the question?", "please rephrase"),
        ("I’m having trouble reaching the server.", "i'm having trouble"),
        ("ERROR: request failed.", "error"),
        ("An error occurred.", "error"),
        ("عذراً، حدث خطأ أثناء المعالجة.", "حدث خطأ"),
        ("يرجى المحاولة. وحاول مرة أخرى لاحقاً", "حاول مرة أخرى"),
        ("حاولي مرة أخرى من فضلك", "حاول مرة أخرى"),
        ("عذراً، لم أفهمك.", "لم أفهم"),
        ("لم أفهم سؤالك", "لم أفهم"),
    ],
)
def test_fallback_positives(resources: Resources, text: str, phrase: str) -> None:
    r = score("fallback_detection", resources, response=text)
    assert r.value == 1.0
    assert phrase in [m["phrase"] for m in r.details["matched"]]


@pytest.mark.parametrize(
    "text",
    [
        "The terror attack was condemned worldwide.",
        "Errors in the data were corrected before publication.",
        "I tried again and it worked.",
        "Please retry again later if the page is slow",  # "retry", not "try"
        "It was an erroneous assumption.",
        "حاولت مرة أخرى ونجحت في الامتحان.",  # I tried again (and passed)
        "وقع حدث خطير في المدينة.",  # a dangerous event
        "فهمت السؤال جيداً.",  # I understood the question well
    ],
)
def test_fallback_near_misses(resources: Resources, text: str) -> None:
    r = score("fallback_detection", resources, response=text)
    assert r.value == 0.0, r.details["matched"]


def test_fallback_lone_error_word_ignored_in_long_answer(resources: Resources) -> None:
    long_answer = (
        "The function returns the sum of the list. The error in your version is on line "
        "three, where the loop starts at one instead of zero, so the first element is "
        "skipped and the total comes out too small."
    )
    r = score("fallback_detection", resources, response=long_answer)
    assert r.value == 0.0 and r.details["ignored"] == ["error"]
    strict = get_metric("fallback_detection", error_word_max_words=100)
    assert strict.score(Sample(response=long_answer), resources).value == 1.0


def test_fallback_rejects_bad_parameter() -> None:
    with pytest.raises(ValueError, match="error_word_max_words"):
        get_metric("fallback_detection", error_word_max_words=-1)
