"""``assay calibrate`` and ``--calibration`` (issue 33, part 4): the penalised logistic fit
against scikit-learn and its prior, the refusals, the file's round trip and identity,
applying a file (values by the formula, method, signature, threshold, in_domain), and the
compare warning on a real SQLite and PostgreSQL store."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from typer.testing import CliRunner

import assay.cli.calibrate_cmd  # noqa: F401  # registers `assay calibrate` on the app
from assay.cli import app
from assay.core.config import AssayConfig, AssayNote
from assay.core.result import MetricResult, parse_signature
from assay.evaluation.calibration import (
    CalibrationRefused,
    check_labels,
    fit_calibration,
)
from assay.evaluation.calibration_file import (
    CalibrationFileError,
    load_calibration,
    write_calibration,
)
from assay.evaluation.calibration_fit import (
    fit_logistic,
    pseudo_label_penalty,
    sigmoid,
    stratified_folds,
)
from assay.evaluation.runner import evaluate
from assay.metrics.registry import get_metric
from assay.store.compare import CALIBRATION_DIFFERS
from assay.store.db import Store
from live_stores import sqlite_or_postgres  # noqa: F401  # the store_url fixture


def _synthetic(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three features and labels drawn from sigmoid(-0.5 + x · (1, -2, 0.5))."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    p = sigmoid(-0.5 + x @ np.array([1.0, -2.0, 0.5]))
    return x, (rng.random(n) < p).astype(np.float64)


# ---- the fit ----------------------------------------------------------------------------


def test_the_fit_equals_scikit_learns_l2_logistic_regression_at_a_zero_prior():
    x, y = _synthetic(300)
    fit = fit_logistic(x, y, np.zeros(4), 2.0)
    # sklearn: 0.5 ||θ||² + C Σ loss; ours: Σ loss + (λ/2) ||θ||², so C = 1/λ; the
    # intercept is penalised too, so it is a column of ones in sklearn's features
    reference = LogisticRegression(C=0.5, fit_intercept=False, tol=1e-12, max_iter=10_000)
    reference.fit(np.hstack([np.ones((300, 1)), x]), y)
    assert fit.converged
    np.testing.assert_allclose(
        np.r_[fit.intercept, fit.weights], reference.coef_[0], rtol=0, atol=1e-6
    )


def test_without_labels_the_fit_is_the_prior_exactly():
    x, _ = _synthetic(50)
    prior = np.array([0.3, 1.0, 0.0, 0.0])
    fit = fit_logistic(x[:0], np.zeros(0), prior, pseudo_label_penalty(x))
    assert fit.intercept == 0.3
    assert fit.weights.tolist() == [1.0, 0.0, 0.0]


def test_the_prior_pulls_less_as_labels_grow_and_many_labels_reach_the_datas_own_fit():
    x, y = _synthetic(20_000, seed=1)
    prior = np.array([0.0, 0.0, 0.0, 0.0])  # the data's fit is about (-0.5, 1, -2, 0.5)
    unpenalised = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(x, y)
    own = np.r_[unpenalised.intercept_, unpenalised.coef_[0]]
    moved = []
    for n in (50, 500, 20_000):
        fit = fit_logistic(x[:n], y[:n], prior, pseudo_label_penalty(x[:n]))
        theta = np.r_[fit.intercept, fit.weights]
        # the gradient of the penalised loss vanishes at the fit (the optimum's condition)
        xt = np.hstack([np.ones((n, 1)), x[:n]])
        gradient = xt.T @ (sigmoid(xt @ theta) - y[:n]) + pseudo_label_penalty(x[:n]) @ theta
        assert np.max(np.abs(gradient)) < 1e-6
        moved.append(np.linalg.norm(theta - prior) / np.linalg.norm(own - prior))
    assert 0.1 < moved[0] < moved[1] < moved[2]
    assert moved[0] < 0.6  # 50 labels move it part of the way only
    fit = fit_logistic(x, y, prior, pseudo_label_penalty(x))
    # 100 pseudo-labels against 20,000 labels (whose Fisher information is below the
    # prior's 1/4 each, p being far from 1/2): within 5 % of the data's own fit
    np.testing.assert_allclose(np.r_[fit.intercept, fit.weights], own, rtol=0.05)


def test_the_penalty_is_the_fisher_information_of_n0_labels_plus_a_small_ridge():
    x = np.array([[1.0, 2.0], [3.0, -1.0]])
    xt = np.array([[1.0, 1.0, 2.0], [1.0, 3.0, -1.0]])
    moment = xt.T @ xt / 2
    ridge = 1e-3 * np.mean(np.diag(moment))
    expected = 100 / 4 * moment + ridge * np.eye(3)
    np.testing.assert_allclose(pseudo_label_penalty(x, 100), expected, rtol=1e-12)
    # a shipped model's own L2 penalty adds to the weights' diagonal, not the intercept's
    with_ridge = pseudo_label_penalty(x, 100, weight_ridge=0.5)
    np.testing.assert_allclose(with_ridge, expected + np.diag([0.0, 0.5, 0.5]), rtol=1e-12)


def test_stratified_folds_deal_each_class_evenly():
    y = np.array([1.0] * 10 + [0.0] * 15)
    folds = stratified_folds(y, 5, seed=3)
    for fold in range(5):
        assert int(np.sum((folds == fold) & (y == 1))) == 2
        assert int(np.sum((folds == fold) & (y == 0))) == 3


# ---- refusals -----------------------------------------------------------------------------


def test_too_few_labels_of_a_class_or_one_class_only_is_refused():
    with pytest.raises(CalibrationRefused, match="got 19 of 0 and 30 of 1"):
        check_labels(np.array([0.0] * 19 + [1.0] * 30), "faithfulness")
    with pytest.raises(CalibrationRefused, match="all 40 usable labels are of one class"):
        check_labels(np.ones(40), "faithfulness")
    assert check_labels(np.array([0.0] * 20 + [0.7] * 20), "x") == {"0": 20, "1": 20}


def _rouge_file(path: Path, n_zero: int, n_one: int) -> None:
    rows = [{"response": "a b c", "expected": "a b c", "label": 1}] * n_one
    rows += [{"response": "x y", "expected": "a b c", "label": 0}] * n_zero
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_assay_calibrate_refuses_in_one_line_with_exit_2(tmp_path):
    data = tmp_path / "few.jsonl"
    _rouge_file(data, n_zero=6, n_one=25)
    out = tmp_path / "cal.json"
    result = CliRunner().invoke(app, ["calibrate", str(data), "-m", "rouge", "--out", str(out)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: cannot calibrate rouge: it needs at least 20 labels of each class, got 6 of "
        "0 and 25 of 1"
    ]
    assert not out.exists()


# ---- the file ------------------------------------------------------------------------------


def _calibration(path: Path, **changes) -> Path:
    """A hand-made calibration of rouge: p = sigmoid(0.5 + 2 logit(v)), threshold 0.6,
    labelled logits between -2 and 2."""
    data = {
        "version": 1,
        "kind": "assay-calibration",
        "metric": "rouge",
        "method": "evidence",
        "calibrated_methods": ["reference"],
        "higher_is_better": True,
        "features": ["logit_default_score"],
        "weights": {"intercept": 0.5, "weights": [2.0]},
        "prior": {"intercept": 0.0, "weights": [1.0], "labels_worth": 100},
        "threshold": 0.6,
        "training_ranges": {"logit_default_score": {"min": -2.0, "max": 2.0, "mean": 0.0}},
    }
    data.update(changes)
    write_calibration(data, path)
    return path


def test_the_file_round_trips_and_its_identity_is_the_sha256_of_its_bytes(tmp_path):
    path = _calibration(tmp_path / "cal.json")
    loaded = load_calibration(path)
    assert loaded.hash == hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert (loaded.metric, loaded.method, loaded.threshold) == ("rouge", "evidence", 0.6)
    assert loaded.feature_names == ("logit_default_score",)
    assert loaded.intercept == 0.5 and loaded.weights.tolist() == [2.0]
    assert json.loads(path.read_text()) == loaded.data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"version": 2}, "field 'version' is 2; this Assay reads version 1"),
        ({"weights": {"intercept": 0.5, "weights": [1.0, 2.0]}}, "field 'weights.weights'"),
        ({"weights": {"intercept": "x", "weights": [1.0]}}, "field 'weights.intercept'"),
        ({"threshold": 1.5}, "field 'threshold' must lie in [0, 1]"),
        ({"method": "magic"}, "field 'method' must be score, evidence or toxicity_head_refit"),
        ({"training_ranges": {}}, "field 'training_ranges.logit_default_score' is missing"),
    ],
)
def test_a_malformed_file_is_an_error_naming_the_file_and_the_field(tmp_path, changes, message):
    path = _calibration(tmp_path / "bad.json", **changes)
    with pytest.raises(CalibrationFileError) as caught:
        load_calibration(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


# ---- applying a file ------------------------------------------------------------------------

ROUGE_SAMPLES = [
    {"id": "s1", "response": "the cat sat on the mat", "expected": "the cat sat on a mat"},
    {"id": "s2", "response": "a cat on a mat", "expected": "the cat sat on the mat"},
    {"id": "s3", "response": "dogs bark at night", "expected": "the cat sat on the mat"},
]


def _expected_probability(value: float) -> float:
    v = min(max(value, 1e-4), 1 - 1e-4)
    return 1 / (1 + math.exp(-(0.5 + 2 * math.log(v / (1 - v)))))


def test_a_calibration_changes_value_method_signature_and_threshold_as_the_formula_says(
    tmp_path,
):
    path = _calibration(tmp_path / "cal.json")
    digest = load_calibration(path).hash
    plain = evaluate(ROUGE_SAMPLES, metrics=["rouge"], config=AssayConfig())
    calibrated = evaluate(
        ROUGE_SAMPLES, metrics=["rouge"], config=AssayConfig(calibration=str(path))
    )
    for before_row, after_row in zip(plain.results, calibrated.results, strict=True):
        before, after = before_row["rouge"], after_row["rouge"]
        assert after.value == pytest.approx(_expected_probability(before.value), abs=1e-12)
        assert after.method == "calibrated"
        parts = parse_signature(after.signature)
        assert parts["calibration"] == digest and parts["method"] == "calibrated"
        assert {k: v for k, v in parts.items() if k not in ("calibration", "method")} == {
            k: v for k, v in parse_signature(before.signature).items() if k != "method"
        }
        assert after.details["uncalibrated"]["value"] == before.value
        assert after.details["uncalibrated"]["method"] == "reference"
        assert after.details["pass_threshold"] == 0.6
    summary = calibrated.summary()[0]
    passed = [r["rouge"].value >= 0.6 for r in calibrated.results]
    assert summary.pass_rate == pytest.approx(sum(passed) / 3)


def test_data_far_from_the_labels_is_flagged_out_of_domain(tmp_path):
    path = _calibration(tmp_path / "cal.json")
    results = evaluate(ROUGE_SAMPLES, metrics=["rouge"], config=AssayConfig(calibration=str(path)))
    for row in results.results:
        raw = row["rouge"].details["uncalibrated"]["value"]
        v = min(max(raw, 1e-4), 1 - 1e-4)
        far = abs(math.log(v / (1 - v))) > 2.0 + 0.05 * 4.0  # the range and its 5 % margin
        assert row["rouge"].details["in_domain"] is (not far), raw
    assert any(not row["rouge"].details["in_domain"] for row in results.results)


def test_a_calibration_for_a_metric_not_scored_is_ignored_with_a_note(tmp_path):
    path = _calibration(tmp_path / "cal.json")
    with pytest.warns(AssayNote, match="is for rouge, which this run does not score: ignored"):
        run = evaluate(ROUGE_SAMPLES, metrics=["bleu"], config=AssayConfig(calibration=str(path)))
    assert {row["bleu"].method for row in run.results} == {"reference"}


def test_assay_evaluate_calibration_applies_the_file_and_a_bad_one_exits_2(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in ROUGE_SAMPLES), encoding="utf-8")
    path = _calibration(tmp_path / "cal.json")
    args = ["evaluate", str(data), "-m", "rouge", "--format", "json"]
    result = CliRunner().invoke(app, [*args, "--calibration", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["metrics"][0]["methods"] == {"calibrated": 3}
    bad = _calibration(tmp_path / "bad.json", version=7)
    result = CliRunner().invoke(app, [*args, "--calibration", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}: field 'version' is 7" in result.stderr


# ---- compare --------------------------------------------------------------------------------


def test_comparing_a_calibrated_and_an_uncalibrated_run_warns(store_url, tmp_path):
    path = _calibration(tmp_path / "cal.json")
    store = Store(store_url)
    try:
        for run_id, setting in (("plain", None), ("calibrated", str(path))):
            run = evaluate(
                ROUGE_SAMPLES, metrics=["rouge"], config=AssayConfig(calibration=setting)
            )
            store.start_run(run_id)
            for i, (sample, row) in enumerate(zip(run.samples, run.results, strict=True)):
                store.record(run_id, i, sample, row, status="passed")
            store.finish_run(run_id)
    finally:
        store.close()
    result = CliRunner().invoke(app, ["compare", "plain", "calibrated", "--db", store_url])
    assert result.exit_code == 0, result.output
    warning = " ".join(result.stdout.split())
    digest = load_calibration(path).hash
    assert f"calibration: (none) vs {digest} ({CALIBRATION_DIFFERS})" in warning
    assert "method: reference vs calibrated" in warning


# ---- with the models: assay calibrate on real scores ---------------------------------------


def _fold_mean_auroc(labels: list[float], values: list[float]) -> float:
    """scikit-learn's AUROC on each of the 5 stratified folds (seed 0), averaged."""
    y, v = np.array(labels), np.array(values)
    folds = stratified_folds(y, 5, seed=0)
    return float(np.mean([roc_auc_score(y[folds == k], v[folds == k]) for k in range(5)]))


def test_fit_calibration_reports_out_of_fold_agreement_on_the_same_items():
    metric = get_metric("rouge")
    rng = np.random.default_rng(0)
    labels = [float(v) for v in rng.random(60) < 0.5]
    values = [min(1.0, max(0.0, 0.5 * lab + rng.random() * 0.6)) for lab in labels]
    results = [MetricResult("rouge", v, method="reference") for v in values]
    content = fit_calibration(metric, results, labels, folds=5, seed=0)
    assert content["out_of_fold"]["before"]["value"] == round(_fold_mean_auroc(labels, values), 4)
    assert content["out_of_fold"]["pooled"]["before"] == round(roc_auc_score(labels, values), 4)
    assert content["labels"]["per_class"] == {
        "0": labels.count(0.0),
        "1": labels.count(1.0),
    }
    assert content["prior"]["weights"] == [1.0]
    assert content["prior"]["intercept"] == 0.0  # the default threshold 0.5: logit 0
    low, high = content["out_of_fold"]["after"]["interval"]
    assert low <= content["out_of_fold"]["after"]["value"] <= high


def test_assay_calibrate_writes_the_file_and_prints_before_and_after(tmp_path):
    data = tmp_path / "labelled.jsonl"
    _rouge_file(data, n_zero=20, n_one=20)
    out = tmp_path / "cal.json"
    result = CliRunner().invoke(app, ["calibrate", str(data), "-m", "rouge", "--out", str(out)])
    assert result.exit_code == 0, result.output
    loaded = load_calibration(out)
    assert loaded.metric == "rouge" and loaded.data["labels"]["per_class"] == {"0": 20, "1": 20}
    # rouge is 1 for every label 1 and 0 for every label 0: both rank them perfectly
    assert loaded.data["out_of_fold"]["before"]["value"] == 1.0
    assert loaded.data["out_of_fold"]["after"]["value"] == 1.0
    lines = result.stdout.splitlines()
    assert lines[0] == "rouge: 40 labels (20 of 0, 20 of 1, binary), method score"
    assert lines[-1] == f"  wrote {out} (calibration={loaded.hash})"


TOXIC = [
    f"you are a {word} {who}, shut up"
    for word in ("stupid", "worthless", "disgusting", "pathetic", "filthy")
    for who in ("idiot", "moron", "loser", "pig")
]
NEUTRAL = [
    f"the {thing} {verb} this morning"
    for thing in ("train", "meeting", "bakery", "library", "garden")
    for verb in ("opened early", "was quiet", "closed late", "looked lovely")
]


def test_toxicity_calibrates_with_the_head_refit_on_real_embeddings(tmp_path):
    from assay.engine.resources import Resources
    from assay.evaluation.calibration_apply import Calibrations
    from assay.evaluation.calibration_head import head_embeddings, head_prior

    texts, labels = TOXIC + NEUTRAL, [1.0] * 20 + [0.0] * 20
    res = Resources(AssayConfig(cache_dir=str(tmp_path / "cache")))
    try:
        run = evaluate([{"response": t} for t in texts], ["toxicity_score"], resources=res)
        results = [row["toxicity_score"] for row in run.results]

        def head(indices):
            return head_embeddings([run.samples[i] for i in indices], res), head_prior(res)

        content = fit_calibration(
            get_metric("toxicity_score"), results, labels, head_features=head, method="head"
        )
        values = [r.value for r in results]
        before = content["out_of_fold"]["before"]["value"]
        assert before == round(_fold_mean_auroc(labels, values), 4)
        assert content["method"] == "toxicity_head_refit"
        assert content["prior"]["weights"] == res.toxicity.weights.tolist()
        path = tmp_path / "tox.json"
        write_calibration(content, path)
        calibration = load_calibration(path)
        rows = [dict(run.results[0]), dict(run.results[25])]
        Calibrations([calibration]).apply([run.samples[0], run.samples[25]], rows, res)
        vectors = head_embeddings([run.samples[0], run.samples[25]], res)
        for row, vector in zip(rows, vectors, strict=True):
            z = content["weights"]["intercept"] + vector @ np.array(content["weights"]["weights"])
            assert row["toxicity_score"].value == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-12)
            assert row["toxicity_score"].method == "calibrated"
            assert row["toxicity_score"].details["in_domain"] is True
    finally:
        res.close()


def test_the_features_are_read_from_the_evidence_as_documented():
    from assay.evaluation.calibration_features import MissingEvidence, features_of

    sentences = [
        {"entailment": 0.9, "contradiction": 0.05, "support": 0.8, "supported": True},
        {"entailment": 0.2, "contradiction": 0.6, "support": 0.3, "supported": False},
    ]
    details = {
        "graded_support": 0.5,
        "entailment_support": 0.25,
        "sentences": sentences,
        "anchors": 4,
        "anchors_supported": 3,
    }
    features = features_of(MetricResult("faithfulness", 0.75, details=details))
    assert features == pytest.approx(
        {
            "logit_default_score": math.log(3.0),
            "logit_graded_support": 0.0,
            "logit_entailment_support": math.log(1 / 3),
            "min_entailment": 0.2,
            "mean_contradiction": 0.325,
            "max_contradiction": 0.6,
            "min_support": 0.3,
            "share_supported": 0.5,
            "share_anchors_supported": 0.75,
        }
    )
    toxicity = MetricResult(
        "toxicity_score",
        0.5,
        details={
            "probabilities": {"head": 0.8, "profanity-check": 0.2},
            "keyword_matches": [{"weight": 0.533}, {"weight": 0.8}],
        },
    )
    assert features_of(toxicity) == pytest.approx(
        {
            "logit_default_score": 0.0,
            "logit_head": math.log(4.0),
            "logit_profanity-check": math.log(0.25),
            "max_keyword_weight": 0.8,
        }
    )
    with pytest.raises(MissingEvidence, match="details\\['sentences'\\]"):
        features_of(MetricResult("faithfulness", 0.5, method="llm"))


def test_assay_calibrate_reads_a_stored_runs_samples_and_labels(store_url, tmp_path):
    data = tmp_path / "labelled.jsonl"
    _rouge_file(data, n_zero=20, n_one=21)
    stored = CliRunner().invoke(
        app, ["evaluate", str(data), "-m", "rouge", "--db", store_url, "--format", "json"]
    )
    assert stored.exit_code == 0, stored.output
    run_id = json.loads(stored.stdout)["run_id"]
    out = tmp_path / "cal.json"
    args = ["calibrate", run_id, "-m", "rouge", "--db", store_url, "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert load_calibration(out).data["labels"]["per_class"] == {"0": 20, "1": 21}
    missing = CliRunner().invoke(app, [*args[:1], "feedc0ffee12", *args[2:]])
    assert missing.exit_code == 2
    assert "feedc0ffee12: no such file, nor a stored run of that id" in missing.stderr


def test_a_score_calibration_reads_the_value_alone_and_an_evidence_one_says_what_it_lacks(
    tmp_path,
):
    from assay.core.sample import Sample
    from assay.engine.resources import Resources
    from assay.evaluation.calibration_apply import Calibrations

    score = load_calibration(
        _calibration(tmp_path / "score.json", metric="faithfulness", method="score")
    )
    features = ["logit_default_score", "min_entailment"]
    evidence = load_calibration(
        _calibration(
            tmp_path / "evidence.json",
            metric="faithfulness",
            method="evidence",
            calibrated_methods=["local"],
            features=features,
            weights={"intercept": 0.5, "weights": [2.0, 1.0]},
            training_ranges={n: {"min": -2.0, "max": 2.0, "mean": 0.0} for n in features},
        )
    )
    result = MetricResult("faithfulness", 0.8, method="reference")  # no sentence evidence
    res = Resources(AssayConfig())
    rows = [{"faithfulness": result}]
    Calibrations([score]).apply([Sample(response="x")], rows, res)
    assert rows[0]["faithfulness"].value == pytest.approx(_expected_probability(0.8), abs=1e-12)
    local = MetricResult("faithfulness", 0.8, method="local")
    rows = [{"faithfulness": local}]
    Calibrations([evidence]).apply([Sample(response="x")], rows, res)
    kept = rows[0]["faithfulness"]
    assert (kept.value, kept.method) == (0.8, "local")
    assert kept.details["calibration"]["applied"] is False
    assert "details['sentences']" in kept.details["calibration"]["reason"]


def test_the_score_alone_stays_increasing_when_labels_run_against_it():
    """Labels that fall as the score rises: the score-only fit holds its weight at the
    floor (1e-3) instead of turning negative, its intercept is the constrained optimum
    (scipy's bounded minimiser of the same penalised objective agrees), and out of fold
    the default's ranking, so its AUROC, is kept exactly."""
    from scipy.optimize import minimize

    from assay.evaluation.calibration import out_of_fold_probabilities
    from assay.evaluation.calibration_fit import MIN_SCORE_WEIGHT, fit_increasing

    rng = np.random.default_rng(3)
    scores = rng.normal(size=400)
    labels = (scores + rng.normal(scale=0.5, size=400) < 0).astype(float)  # reversed
    features = scores[:, None]
    prior = np.array([0.0, 1.0])
    penalty = pseudo_label_penalty(features, 100.0)
    assert fit_logistic(features, labels, prior, penalty).weights[0] < 0  # unconstrained
    fit = fit_increasing(features, labels, prior, penalty)
    assert fit.converged and fit.weights.tolist() == [MIN_SCORE_WEIGHT]

    def objective(theta):
        z = theta[0] + theta[1] * scores
        delta = theta - prior
        return np.sum(np.logaddexp(0.0, z) - labels * z) + 0.5 * delta @ penalty @ delta

    bounded = minimize(objective, prior, bounds=[(None, None), (MIN_SCORE_WEIGHT, None)])
    assert bounded.x[1] == pytest.approx(MIN_SCORE_WEIGHT)
    assert fit.intercept == pytest.approx(bounded.x[0], abs=1e-5)

    folds = stratified_folds(labels, 5, 0)
    oof = out_of_fold_probabilities(features, labels, prior, folds, increasing=True)
    for fold in range(5):
        held = folds == fold
        assert roc_auc_score(labels[held], oof[held]) == pytest.approx(
            roc_auc_score(labels[held], scores[held])
        )


@pytest.mark.parametrize(
    ("value", "interval", "labels", "kept"),
    [
        (0.004, [0.001, 0.010], 40, True),  # under 100 labels: the interval above 0
        (0.004, [-0.002, 0.010], 40, False),
        (0.004, [-0.002, 0.010], 100, True),  # from 100: at worst 0.002 below
        (0.004, [-0.010, 0.018], 200, True),  # at worst exactly the 0.01 allowed
        (0.004, [-0.011, 0.018], 200, False),  # could lose more than 0.01
        (0.0, [-0.001, 0.001], 200, False),  # not better
        (-0.002, [-0.004, 0.000], 200, False),
        (0.004, None, 200, False),  # no interval (no resamples): never replaces the default
    ],
)
def test_a_candidate_replaces_the_default_only_when_better_and_never_far_below(
    value, interval, labels, kept
):
    from assay.evaluation.calibration import improves

    assert improves({"value": value, "interval": interval}, labels) is kept
