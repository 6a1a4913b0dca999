"""BERTScore: the scorer on the shipped all-MiniLM-L6-v2 (layer 6) checked against the
reference implementation (``bert_score.BERTScorer``), its baseline rescaling checked by
hand against the shipped baseline file, and the metrics bertscore, f1 and bert_score_f1."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from assay.core.config import AssayConfig, ConfigError
from assay.core.extras import ModelUnavailable
from assay.core.result import parse_signature
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric, metric_class
from assay.models.bertscore import DEFAULT_BASELINE, BERTScorer
from assay.models.embedders import minilm_path

EXPECTED = "A cat was sitting on the mat."
PARAPHRASE = "The cat sat on the mat."
UNRELATED = "The stock market fell sharply today."


def baseline_row(path: Path, layer: int) -> tuple[float, float, float]:
    """The (P, R, F) baseline of one layer, read by hand from the LAYER,P,R,F file."""
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if int(row["LAYER"]) == layer:
                return float(row["P"]), float(row["R"]), float(row["F"])
    raise AssertionError(f"no layer {layer} in {path}")


def run(name: str, res: Resources, response: str, expected: str):
    return get_metric(name).score(Sample(response=response, expected=expected), res)


@pytest.fixture(scope="module")
def scorer(resources: Resources) -> BERTScorer:
    return resources.bertscorer


@pytest.fixture(scope="module")
def user_model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A folder that is not the shipped one but holds the same files (symlinked)."""
    folder = tmp_path_factory.mktemp("my-bert")
    for item in Path(minilm_path()).iterdir():
        os.symlink(item, folder / item.name)
    return str(folder)


# ---- the scorer -----------------------------------------------------------------------

#: hand-picked pairs: paraphrase, subset, unrelated, identical, word order, case and
#: punctuation, numbers, repeated words, a one-word text, non-English text, an emoji,
#: a zero-width space next to a word, and a text longer than the model's 512 tokens
REFERENCE_PAIRS = [
    (PARAPHRASE, EXPECTED),
    ("The cat sat.", PARAPHRASE),
    (UNRELATED, EXPECTED),
    ("Cornish heath", "Cornish heath"),
    ("the mat sat on the cat", PARAPHRASE),
    ("THE CAT SAT ON THE MAT!!!", PARAPHRASE),
    ("The refund takes 3 business days.", "Refunds are processed within 30 days."),
    ("no no no no no no", "no"),
    ("Paris", "The capital of France is Paris."),
    ("Le chat est assis sur le tapis.", "القط يجلس على السجادة"),
    ("Great job \U0001f44d", "Well done!"),
    ("\u200bParis is big.", "Paris is a large city."),
    ("river " * 600, "A long text about rivers and lakes."),
]


def test_scores_equal_the_reference_implementation(scorer: BERTScorer) -> None:
    """Raw P, R, F of our implementation against bert-score's own on the same model and
    layer (no idf, no rescaling), within 1e-4."""
    import bert_score

    library = bert_score.BERTScorer(model_type=minilm_path(), num_layers=6, batch_size=4)
    cands, refs = zip(*REFERENCE_PAIRS, strict=True)
    expected = np.stack([t.numpy() for t in library.score(list(cands), list(refs))], axis=1)
    mine = np.stack(scorer.score(cands, refs, rescale=False), axis=1)
    np.testing.assert_allclose(mine, expected, atol=1e-4)


def test_cut_model_equals_reference_at_a_lower_layer() -> None:
    """Layer 3 of 6: the encoder is cut after three layers, as bert-score cuts it."""
    import bert_score

    pairs = REFERENCE_PAIRS[:7]
    cands, refs = [c for c, _ in pairs], [r for _, r in pairs]
    library = bert_score.BERTScorer(model_type=minilm_path(), num_layers=3)
    expected = np.stack([t.numpy() for t in library.score(cands, refs)], axis=1)
    mine = np.stack(BERTScorer(minilm_path(), 3, rescale=False).score(cands, refs), axis=1)
    np.testing.assert_allclose(mine, expected, atol=1e-4)


def test_batch_order_and_padding_do_not_change_scores(scorer: BERTScorer) -> None:
    # scored together (sorted by length, padded) or each alone: the same numbers
    together = scorer._encoder.score_pairs(REFERENCE_PAIRS, batch_size=64)
    alone = np.concatenate(
        [scorer._encoder.score_pairs([p], batch_size=1) for p in REFERENCE_PAIRS]
    )
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_shipped_folder_given_as_a_path_is_the_default_scorer(scorer: BERTScorer) -> None:
    res = Resources(AssayConfig(bertscore_model=minilm_path(), use_cache=False))
    mine = res.bertscorer
    assert mine.name == "all-MiniLM-L6-v2@L6"
    assert mine.baseline_path == str(DEFAULT_BASELINE)
    cands, refs = [PARAPHRASE, UNRELATED], [EXPECTED, EXPECTED]
    for a, b in zip(mine.score(cands, refs), scorer.score(cands, refs), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_default_scorer_is_minilm_layer6_with_shipped_baseline(scorer: BERTScorer) -> None:
    assert scorer.name == "all-MiniLM-L6-v2@L6"
    assert scorer.num_layers == 6
    assert scorer.rescale is True and scorer.rescale_note is None
    assert scorer.baseline_path == str(DEFAULT_BASELINE)
    assert scorer.baseline == pytest.approx(baseline_row(DEFAULT_BASELINE, 6))


def test_baseline_file_has_bert_score_format() -> None:
    lines = DEFAULT_BASELINE.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "LAYER,P,R,F"
    # one row per layer, 0 (embeddings) to 6; every mean strictly between 0 and 1
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(range(7))
    values = np.array([[float(v) for v in line.split(",")[1:]] for line in lines[1:]])
    assert np.all((values > 0) & (values < 1))


def test_identical_strings_score_one_raw(scorer: BERTScorer) -> None:
    p, r, f = scorer.score([PARAPHRASE, "Cornish heath"], [PARAPHRASE, "Cornish heath"], False)
    # every token's best match is itself: cosine 1, so P = R = F = 1
    assert p == pytest.approx([1.0, 1.0], abs=1e-5)
    assert r == pytest.approx([1.0, 1.0], abs=1e-5)
    assert f == pytest.approx([1.0, 1.0], abs=1e-5)


def test_rescaling_formula_by_hand_against_baseline_file(scorer: BERTScorer) -> None:
    b_p, b_r, b_f = baseline_row(DEFAULT_BASELINE, 6)  # 0.12883538, 0.12898003, 0.12609048
    raw_p, raw_r, raw_f = (v[0] for v in scorer.score([PARAPHRASE], [EXPECTED], rescale=False))
    # golden raw F1 of this pair on MiniLM layer 6 (measured): 0.90713
    assert raw_f == pytest.approx(0.90713, abs=2e-3)
    # (raw - b) / (1 - b): F = (0.90713 - 0.12609) / (1 - 0.12609) = 0.78104 / 0.87391 = 0.89373
    p, r, f = (v[0] for v in scorer.score([PARAPHRASE], [EXPECTED]))
    assert p == pytest.approx((raw_p - b_p) / (1 - b_p), abs=1e-9)
    assert r == pytest.approx((raw_r - b_r) / (1 - b_r), abs=1e-9)
    assert f == pytest.approx((raw_f - b_f) / (1 - b_f), abs=1e-9)
    assert f == pytest.approx(0.89373, abs=2.5e-3)


def test_precision_above_recall_when_candidate_is_a_subset(scorer: BERTScorer) -> None:
    # every candidate token has an exact counterpart in the reference (P near 1), while
    # "on the mat" in the reference has none in the candidate (R lower)
    p, r, _ = scorer.score(["The cat sat."], [PARAPHRASE], rescale=False)
    assert p[0] > 0.85
    assert r[0] < p[0] - 0.1


def test_memo_scores_each_pair_once(scorer: BERTScorer) -> None:
    cands = ["memo test one is here", "memo test two is there"]
    refs = ["a reference sentence", "another reference sentence"]
    before = scorer.calls
    first = scorer.score(cands, refs)
    assert scorer.calls == before + 2
    second = scorer.score(list(reversed(cands)), list(reversed(refs)))
    assert scorer.calls == before + 2  # no new model work
    assert second[2] == pytest.approx(first[2][::-1])


def test_mismatched_lengths_are_refused(scorer: BERTScorer) -> None:
    with pytest.raises(ValueError, match="as many candidates as references"):
        scorer.score(["a", "b"], ["a"])


def test_missing_model_folder_raises_model_unavailable(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ModelUnavailable, match="bertscore_model"):
        BERTScorer(missing, 6)
    res = Resources(AssayConfig(bertscore_model=missing, use_cache=False))
    with pytest.raises(ModelUnavailable, match="does not exist"):
        _ = res.bertscorer
    # the metric reports the failure per sample instead of raising
    result = run("bertscore", res, PARAPHRASE, EXPECTED)
    assert result.value is None
    assert result.error is not None and "ModelUnavailable" in result.error


def test_bad_layer_and_missing_baseline_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has 6 layers"):
        BERTScorer(minilm_path(), 7)
    with pytest.raises(ConfigError, match="baseline file"):
        BERTScorer(minilm_path(), 6, baseline_path=tmp_path / "none.tsv")


def test_user_model_path_with_layers_and_explicit_baseline(
    user_model_dir: str, scorer: BERTScorer, cache_dir: str
) -> None:
    res = Resources(
        AssayConfig(
            bertscore_model=user_model_dir,
            bertscore_num_layers=6,
            bertscore_baseline=str(DEFAULT_BASELINE),
            cache_dir=cache_dir,
        )
    )
    mine = res.bertscorer
    assert mine.name == f"{os.path.basename(user_model_dir)}@L6"
    assert mine.rescale is True
    cands, refs = [PARAPHRASE, UNRELATED], [EXPECTED, EXPECTED]
    # same weights, same layer, same baseline: same scores as the default scorer
    for a, b in zip(mine.score(cands, refs), scorer.score(cands, refs), strict=True):
        assert a == pytest.approx(b, abs=1e-6)
    result = run("bertscore", res, PARAPHRASE, EXPECTED)
    assert "bertscore_baseline_minilm_l6.tsv" in result.signature
    assert result.value == pytest.approx(
        float(scorer.score([PARAPHRASE], [EXPECTED])[2][0]), abs=1e-6
    )


def test_user_model_without_baseline_is_raw_and_says_so(
    user_model_dir: str, scorer: BERTScorer
) -> None:
    # no num_layers given: the model's last layer (6, from config.json)
    res = Resources(AssayConfig(bertscore_model=user_model_dir, use_cache=False))
    mine = res.bertscorer
    assert mine.num_layers == 6
    assert mine.rescale is False and mine.baseline is None
    assert "no rescaling baseline" in (mine.rescale_note or "")
    with pytest.raises(ValueError, match="no rescaling baseline"):
        mine.score([PARAPHRASE], [EXPECTED], rescale=True)
    result = run("bertscore", res, PARAPHRASE, EXPECTED)
    raw_f = float(scorer.score([PARAPHRASE], [EXPECTED], rescale=False)[2][0])
    assert result.value == pytest.approx(raw_f, abs=1e-6)
    assert result.details["rescaled"] is False
    assert "no rescaling baseline" in result.details["rescale_note"]
    assert parse_signature(result.signature)["model"].endswith("+raw")


# ---- the metrics ----------------------------------------------------------------------


def test_metrics_are_registered_with_their_suites() -> None:
    # f1 (the chatbot hub's base-model "F1 Score") is bertscore under another name
    assert metric_class("f1") is metric_class("bertscore")
    assert metric_class("bertscore").aliases == ("f1",)
    assert metric_class("bertscore").suites == ("base", "base-model", "semantic")
    assert metric_class("bert_score_f1").suites == ("semantic",)
    for name in ("bertscore", "bert_score_f1"):
        cls = metric_class(name)
        assert cls.family == "semantic"
        assert cls.needs == frozenset({"bertscore"})
        assert cls.higher_is_better is True
        assert cls.components == ("precision", "recall", "f1")


@pytest.mark.parametrize("name", ["bertscore", "f1", "bert_score_f1"])
def test_paraphrase_scores_above_unrelated(name: str, resources: Resources) -> None:
    paraphrase = run(name, resources, PARAPHRASE, EXPECTED)
    unrelated = run(name, resources, UNRELATED, EXPECTED)
    assert paraphrase.value > unrelated.value + 0.3
    assert paraphrase.method == "local"
    assert "model=all-MiniLM-L6-v2@L6" in paraphrase.signature


def test_bertscore_identical_is_one_and_matches_the_worked_example(resources: Resources) -> None:
    # the RAG specification's worked example: "Cornish heath" twice -> 99.99% (0..1 here)
    for name in ("bertscore", "f1", "bert_score_f1"):
        result = run(name, resources, "Cornish heath", "Cornish heath")
        assert result.value == pytest.approx(1.0, abs=1e-4)


def test_bertscore_components_and_evidence(resources: Resources, scorer: BERTScorer) -> None:
    result = run("bertscore", resources, "The cat sat.", PARAPHRASE)
    p, r, f = (float(v[0]) for v in scorer.score(["The cat sat."], [PARAPHRASE]))
    assert result.components == pytest.approx({"precision": p, "recall": r, "f1": f})
    assert result.value == pytest.approx(f)
    assert result.components["precision"] > result.components["recall"]
    assert result.details["rescaled"] is True
    assert result.details["baseline"]["f1"] == pytest.approx(baseline_row(DEFAULT_BASELINE, 6)[2])
    raw = scorer.score(["The cat sat."], [PARAPHRASE], rescale=False)
    assert result.details["raw"]["f1"] == pytest.approx(float(raw[2][0]))


def test_rescaled_below_zero_is_clamped_and_kept_in_details(resources: Resources) -> None:
    # two unrelated sentences: raw F1 near the baseline; rescaled slightly below 0
    result = run("bertscore", resources, "Bananas are yellow.", "The train leaves at noon.")
    unclamped = result.details["unclamped"]["f1"]
    assert unclamped < 0
    assert result.value == 0.0
    assert result.details["clamped"] is True
    assert result.details["raw"]["f1"] > 0
    raw = run("bert_score_f1", resources, "Bananas are yellow.", "The train leaves at noon.")
    # bert_score_f1 is the raw F1, unrescaled and positive
    assert raw.value == pytest.approx(result.details["raw"]["f1"])
    assert raw.details["rescaled"] is False
    assert "+raw" in raw.signature


def test_f1_is_bertscore_under_the_name_asked_for(resources: Resources) -> None:
    a = run("bertscore", resources, PARAPHRASE, EXPECTED)
    b = run("f1", resources, PARAPHRASE, EXPECTED)
    assert (a.name, b.name) == ("bertscore", "f1")
    assert b.value == a.value
    assert b.components == a.components


def test_missing_or_blank_input_is_none_with_reason(resources: Resources) -> None:
    for name in ("bertscore", "f1", "bert_score_f1"):
        metric = get_metric(name)
        no_expected = metric.score(Sample(response="an answer"), resources)
        assert no_expected.value is None and "expected" in (no_expected.reason or "")
        blank = metric.score(Sample(response="   ", expected="x"), resources)
        assert blank.value is None and "response" in (blank.reason or "")


def test_text_without_model_tokens_is_none_not_zero(resources: Resources) -> None:
    # a zero-width space or byte-order mark is not blank to str.strip(), but the tokenizer
    # drops it: bert-score marks the pair with P = R = F = 0 (and used to give value 0.0
    # even for two identical such texts). Undefined: None with a reason.
    for name in ("bertscore", "f1", "bert_score_f1"):
        for response, expected in (("\u200b", "\u200b"), ("\ufeff", "Paris is big.")):
            result = get_metric(name).score(Sample(response=response, expected=expected), resources)
            # invisible-only text is missing input for every metric (Sample.has), before the
            # model's own "no token" guard is reached; either way None with a reason, not 0
            reason = result.reason or ""
            assert result.value is None and ("no token" in reason or "missing input" in reason)
    # a real word next to the zero-width space is scored as usual (identical: 1)
    result = get_metric("bertscore").score(
        Sample(response="\u200bParis", expected="Paris"), resources
    )
    assert result.value == pytest.approx(1.0, abs=1e-4)


def test_batch_is_scored_in_one_model_pass(resources: Resources, scorer: BERTScorer) -> None:
    samples = [
        Sample(response=f"batch answer number {i} about rivers", expected=f"rivers fact {i}")
        for i in range(5)
    ]
    before = scorer.calls
    values = {}
    for name in ("bertscore", "f1", "bert_score_f1"):
        results = get_metric(name).score_batch(samples, resources)
        values[name] = [r.value for r in results]
    # 5 new pairs reach the model once; the other two metrics reuse the memo
    assert scorer.calls == before + 5
    assert values["f1"] == values["bertscore"]
    assert all(v is not None for v in values["bert_score_f1"])
