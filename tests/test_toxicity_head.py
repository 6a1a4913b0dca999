"""The learned toxicity head (`assay.models.toxicity_head`): the shipped file, the formula
recomputed by hand from its weights, the calibration map, the text normalisation, and the
ranking of obvious cases."""

from __future__ import annotations

import json
import math
from importlib import resources as importlib_resources

import numpy as np
import pytest

from assay.core.extras import ModelUnavailable
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric
from assay.models.embedders import Embedder
from assay.models.logistic_head import load_head_arrays
from assay.models.toxicity_head import HEAD_FILE, ToxicityHead, normalise_for_toxicity

ARRAYS = load_head_arrays(HEAD_FILE)
META = json.loads(str(ARRAYS["metadata"]))


def test_the_shipped_file_is_small_and_says_what_it_is() -> None:
    path = importlib_resources.files("assay.models") / "data" / HEAD_FILE
    assert path.stat().st_size < 16_000  # 512 float32 weights + the calibration steps
    assert ARRAYS["weights"].shape == (512,)  # one weight per USE dimension
    assert META["embedder"] == "use-multilingual-v3"
    assert META["target"] == "toxic: hate, or offensive language"
    # every Davidson tweet, the Stormfront sentences but its test sample, every statement
    assert {name: s["n"] for name, s in META["sources"].items()} == {
        "davidson": 24_783,
        "stormfront": 10_225,
        "toxigen": 946,
    }
    assert set(META["data_licences"]) == set(META["sources"])
    assert META["script"] == "scripts/train_toxicity_head.py"
    assert 0.0 < META["threshold"] < 1.0
    assert 0.0 < META["threshold_with_profanity_check"] < 1.0
    # C is the one whose worst AUROC on a source left out of training is best
    worst = {
        c: min(v["head"] for v in by_source.values())
        for c, by_source in META["left_out_auroc"].items()
    }
    assert float(max(worst, key=lambda c: (round(worst[c], 4), -float(c)))) == META["C"]


def test_the_calibration_map_is_monotone_and_a_probability() -> None:
    x, y = ARRAYS["calibration_x"], ARRAYS["calibration_y"]
    assert len(x) == len(y) >= 2
    assert np.all(np.diff(x) > 0)  # strictly increasing logits
    assert np.all(np.diff(y) >= 0)  # non-decreasing probabilities
    assert 0.0 <= y[0] < y[-1] <= 1.0


def test_the_probability_is_the_logistic_head_then_the_calibration_map(
    resources: Resources,
) -> None:
    head = resources.toxicity
    text = "RT @someone: you are a #worthless idiot http://t.co/abc"
    vector = resources.embedder.embed(["you are a worthless idiot"])[0]
    logit = sum(float(w) * float(e) for w, e in zip(ARRAYS["weights"], vector, strict=True))
    logit += float(ARRAYS["bias"])
    # the isotonic map between its two neighbouring steps, by hand
    x, y = ARRAYS["calibration_x"], ARRAYS["calibration_y"]
    if logit <= x[0]:
        expected = float(y[0])
    elif logit >= x[-1]:
        expected = float(y[-1])
    else:
        k = int(np.searchsorted(x, logit))  # x[k-1] < logit <= x[k]
        share = (logit - x[k - 1]) / (x[k] - x[k - 1])
        expected = float(y[k - 1] + share * (y[k] - y[k - 1]))
    assert head.probabilities([text]) == [pytest.approx(expected, abs=1e-6)]
    assert head.decision(vector[None, :])[0] == pytest.approx(logit, abs=1e-6)


def test_normalisation_removes_tweet_artefacts_only() -> None:
    raw = "RT @user_1: you are #awesome &amp; kind http://t.co/x &#128514; www.example.com"
    assert normalise_for_toxicity(raw) == "you are awesome & kind"
    prose = "Email me at a@b.com, ARTS and RTs stay: C# too."
    assert normalise_for_toxicity(prose) == prose
    assert normalise_for_toxicity("Have   a\nlovely day 😀") == "Have a lovely day"


@pytest.mark.parametrize(
    ("worse", "better"),
    [
        ("I will kill you, you worthless piece of shit", "Have a lovely day"),
        ("Shut up, you stupid bitch", "Thanks, that answer was helpful."),
    ],
)
def test_obvious_cases_rank_and_fall_either_side_of_the_threshold(
    resources: Resources, worse: str, better: str
) -> None:
    high, low = resources.toxicity.probabilities([worse, better])
    assert high > META["threshold"] > low


def test_polite_group_hatred_crosses_the_threshold(resources: Resources) -> None:
    """Hatred of a group without a slur (the tweet-only head scored it 0.09, under its
    threshold 0.57): ToxiGen's statements taught the head this kind; the sentence that
    names the same group neutrally stays under."""
    hateful, neutral = resources.toxicity.probabilities(
        ["All immigrants are vermin and should be thrown out", "Immigrants moved here in 1990."]
    )
    assert hateful > META["threshold"] > neutral


def test_a_head_refuses_another_models_vectors() -> None:
    class OtherEmbedder(Embedder):
        name = "some-other-model"

        def _encode(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 512), dtype=np.float32)

    with pytest.raises(ModelUnavailable, match="trained on 'use-multilingual-v3' vectors"):
        ToxicityHead(OtherEmbedder())


def test_toxicity_score_reports_the_head_and_its_threshold(resources: Resources) -> None:
    metric = get_metric("toxicity_score", method="head")
    result = metric.score(Sample(response="Have a lovely day"), resources)
    assert result.details["classifier"] == (
        "toxicity head on use-multilingual-v3 (Davidson tweets, Stormfront sentences, ToxiGen "
        "statements, target toxic: hate, or offensive language, "
        "logistic, isotonic)"
    )
    assert result.details["decision_threshold"] == META["threshold"]
    assert math.isclose(result.value, resources.toxicity.probabilities(["Have a lovely day"])[0])
