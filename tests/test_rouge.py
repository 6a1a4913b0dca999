"""Assay's ROUGE (`assay.text.rouge`, the ``rouge`` metric) against rouge-score 0.1.2, the
reference: exact equality of precision, recall and F1 of rouge1, rouge2 and rougeL on real
sentence pairs (the repository's docs and examples always; STS-B dev and TruthfulQA where
the development data is present), on long texts, and on the Unicode-words path."""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path

from rouge_score import rouge_scorer

from assay.core.sample import Sample
from assay.metrics.registry import get_metric
from assay.text.rouge import ROUGE_TYPES, lcs_length, rouge_scores, rouge_tokens
from assay.text.tokenize import sentences, words
from dev_data import dev_file

ROOT = Path(__file__).resolve().parent.parent


class UnicodeWords:
    """rouge-score's tokenizer interface over `assay.text.tokenize.words` (no stemming):
    the tokens the ``rouge`` metric takes for Arabic and other non-ASCII text, handed to
    rouge-score to check that path too."""

    def tokenize(self, text: str) -> list[str]:
        return words(text)


STEMMED = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
UNICODE = rouge_scorer.RougeScorer(list(ROUGE_TYPES), tokenizer=UnicodeWords())


def reference_components(scores: dict) -> dict[str, float]:
    """The ``rouge`` metric's components as rouge-score's ``score`` output gives them."""
    return {
        "rouge1_f1": scores["rouge1"].fmeasure,
        "rouge2_f1": scores["rouge2"].fmeasure,
        "rougeL_f1": scores["rougeL"].fmeasure,
        "rouge1_precision": scores["rouge1"].precision,
        "rouge1_recall": scores["rouge1"].recall,
    }


def _differences(
    pairs: Iterable[tuple[str, str]], reference: rouge_scorer.RougeScorer = STEMMED
) -> list[tuple[str, str, str]]:
    """(target, prediction, rouge type) wherever Assay's P, R or F differs from rouge-score's
    in any bit."""
    tokenize = words if reference is UNICODE else rouge_tokens
    found = []
    for target, prediction in pairs:
        expected = reference.score(target, prediction)
        got = rouge_scores(tokenize(target), tokenize(prediction))
        for kind in ROUGE_TYPES:
            ours, theirs = got[kind], expected[kind]
            if (ours.precision, ours.recall, ours.fmeasure) != tuple(theirs):
                found.append((target, prediction, kind))
    return found


def test_worked_by_hand() -> None:
    target = rouge_tokens("The cats sat on the mat.")
    prediction = rouge_tokens("the cat was sitting on a mat")
    assert target == ["the", "cat", "sat", "on", "the", "mat"]  # cats -> cat (stemmed)
    assert prediction == ["the", "cat", "was", "sit", "on", "a", "mat"]  # sitting -> sit
    scores = rouge_scores(target, prediction)
    # unigrams: the, cat, on, mat match (the target's second "the" is unmatched): 4
    assert (scores["rouge1"].precision, scores["rouge1"].recall) == (4 / 7, 4 / 6)
    assert scores["rouge1"].fmeasure == 2 * (4 / 7) * (4 / 6) / (4 / 7 + 4 / 6)
    # bigrams: only "the cat" matches; 5 target, 6 prediction bigrams
    assert (scores["rouge2"].precision, scores["rouge2"].recall) == (1 / 6, 1 / 5)
    # LCS: the cat on mat = 4
    assert (scores["rougeL"].precision, scores["rougeL"].recall) == (4 / 7, 4 / 6)


def test_empty_sides_score_zero_as_rouge_score_does() -> None:
    for target, prediction in [([], ["a"]), (["a"], []), ([], [])]:
        for kind, score in rouge_scores(target, prediction).items():
            assert (score.precision, score.recall, score.fmeasure) == (0.0, 0.0, 0.0), kind


def _textbook_lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        previous_diagonal = 0
        for j, y in enumerate(b, start=1):
            above = row[j]
            row[j] = previous_diagonal + 1 if x == y else max(row[j], row[j - 1])
            previous_diagonal = above
    return row[-1]


def test_bit_parallel_lcs_equals_the_dynamic_programme() -> None:
    rng = random.Random(20261125)
    for _ in range(3_000):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 40))]
        b = [rng.choice("abcdef") for _ in range(rng.randint(0, 90))]
        assert lcs_length(a, b) == _textbook_lcs(a, b) == lcs_length(b, a), (a, b)
    assert lcs_length(list("the cat sat"), list("the mat")) == 6  # "the at" plus the space


def _doc_sentence_pairs() -> list[tuple[str, str]]:
    """Consecutive sentences of the README and docs: real English, markdown included."""
    pairs: list[tuple[str, str]] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found = sentences(path.read_text("utf-8"))
        pairs += list(pairwise(found))
    return pairs


def _example_pairs() -> list[tuple[str, str]]:
    pairs = []
    for path in sorted((ROOT / "examples").glob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            row = json.loads(line)
            expected = row.get("expected") or row.get("expected_response")
            if isinstance(expected, str) and isinstance(row.get("response"), str):
                pairs.append((expected, row["response"]))
    return pairs


def test_equals_rouge_score_on_doc_sentences_and_examples() -> None:
    pairs = _doc_sentence_pairs()[:1500] + _example_pairs()
    assert len(pairs) > 1000
    assert _differences(pairs) == []


def test_equals_rouge_score_on_sts_b_dev_pairs() -> None:
    with dev_file("stsb-dev.tsv").open(encoding="utf-8") as f:
        pairs = [(row[5], row[6]) for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    assert len(pairs) == 1500
    assert _differences(pairs) == []


def test_equals_rouge_score_on_truthfulqa_answers_against_the_best_answer() -> None:
    pairs = []
    with dev_file("truthfulqa-dev.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for field in ("Correct Answers", "Incorrect Answers"):
                pairs += [(row["Best Answer"], answer) for answer in row[field].split("; ")]
    assert len(pairs) > 2500
    assert _differences(pairs) == []


def test_equals_rouge_score_on_long_texts() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    input_doc = (ROOT / "docs" / "input.md").read_text("utf-8")
    target, prediction = readme[:6000], input_doc[:9000]
    assert len(rouge_tokens(target)) > 700 and len(rouge_tokens(prediction)) > 1000
    assert (
        _differences([(target, prediction), (prediction, target), (readme[:6000], readme[:5000])])
        == []
    )


def test_unicode_words_path_equals_rouge_score_with_that_tokenizer() -> None:
    pairs = [
        ("عاصمة فرنسا هي باريس", "باريس هي عاصمة فرنسا"),
        ("عَاصِمَةُ فَرَنْسَا هِيَ بَارِيسُ", "عاصمة فرنسا هي باريس"),
        ("Москва столица России", "столица России Москва"),
        ("東京は日本の首都です", "日本の首都は東京です"),
        *[(p, q) for p, q in _example_pairs() if not p.isascii() or not q.isascii()],
    ]
    assert len(pairs) > 5
    assert _differences(pairs, UNICODE) == []


def test_the_metric_reports_rouge_score_values_and_what_ran() -> None:
    metric = get_metric("rouge")
    for expected, response in _example_pairs():
        result = metric.score(Sample(response=response, expected=expected))
        unicode = result.details["tokenizer"].startswith("unicode")
        reference = (UNICODE if unicode else STEMMED).score(expected, response)
        assert result.components == reference_components(reference)
        assert result.value == reference["rougeL"].fmeasure
        assert result.details["rougeL_recall"] == reference["rougeL"].recall
        assert result.details["library"] == "assay (checked equal to rouge-score 0.1.2)"
