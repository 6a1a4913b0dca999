"""`assay.core.agreement_stats`: hand-worked cases and scikit-learn / scipy as the reference."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, roc_auc_score

from assay.core.agreement_stats import (
    auroc,
    balanced_accuracy,
    best_threshold,
    bootstrap_interval,
    cohen_kappa,
    cross_validated_threshold,
    fleiss_kappa,
    kendall_tau_b,
    krippendorff_alpha,
    rank_average,
    spearman,
)
from assay.core.stats import bootstrap_ci


def _tied_data(seed: int, n: int = 120) -> tuple[list[float], list[float], list[float]]:
    """0/1 labels, scores on 5 levels (many ties) and a graded column on 4 levels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    scores = np.clip(labels * 0.3 + rng.integers(0, 5, n) / 4, 0, 1)
    graded = rng.integers(1, 5, n) + labels
    return labels.astype(float).tolist(), scores.tolist(), graded.astype(float).tolist()


def test_auroc_counts_a_tie_as_one_half():
    # positives 0.9, 0.5, 0.3; negatives 0.5, 0.1: of the 6 (positive, negative) pairs
    # 0.9>0.5, 0.9>0.1, 0.5=0.5 (1/2), 0.5>0.1, 0.3<0.5 (0), 0.3>0.1 -> 4.5 / 6
    assert auroc([1, 1, 0, 0, 1], [0.9, 0.5, 0.5, 0.1, 0.3]) == pytest.approx(0.75)
    assert auroc([True, False], [0.2, 0.8]) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auroc_and_balanced_accuracy_equal_sklearns_on_tied_data(seed):
    labels, scores, _ = _tied_data(seed)
    assert auroc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    predicted = [float(s >= 0.5) for s in scores]
    assert balanced_accuracy(labels, predicted) == pytest.approx(
        balanced_accuracy_score(labels, predicted), abs=1e-12
    )


def test_balanced_accuracy_by_hand():
    # TPR = 2/3 (positives 1, 0, 1 predicted), TNR = 1/2 -> (2/3 + 1/2) / 2 = 7/12
    assert balanced_accuracy([1, 1, 1, 0, 0], [1, 0, 1, 0, 1]) == pytest.approx(7 / 12)


def test_missing_pairs_are_left_out_and_one_class_is_undefined():
    # the None and NaN pairs go: what is left is the 0.75 case above
    labels = [1, 1, None, 0, 0, 1, 0]
    scores = [0.9, 0.5, 0.7, 0.5, 0.1, 0.3, float("nan")]
    assert auroc(labels, scores) == pytest.approx(0.75)
    assert auroc([1, 1, 1], [0.1, 0.2, 0.3]) is None
    assert balanced_accuracy([0, 0], [0, 1]) is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert kendall_tau_b([1, 2, 3], [4, 4, 4]) is None
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None  # pe = 1


def test_labels_that_are_not_binary_are_refused_by_name():
    with pytest.raises(ValueError, match=r"labels must be 0 or 1 \(or true/false\). Got 0.5."):
        auroc([1, 0.5, 0], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="differ in length: 2 and 3"):
        spearman([1, 2], [1, 2, 3])


def test_rank_average_shares_tied_ranks():
    assert rank_average(np.array([10.0, 20.0, 10.0, 30.0, 20.0])).tolist() == [
        1.5,
        3.5,
        1.5,
        5.0,
        3.5,
    ]


def test_spearman_and_kendall_by_hand():
    # ranks equal the values; d = 0, 1, -1, 0 -> 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # one discordant pair of six -> (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    # x = 1 1 2 3, y = 1 2 2 3: P = 4, Q = 0, n0 = 6, one pair tied in x, one in y
    # -> 4 / sqrt((6 - 1) * (6 - 1)) = 0.8
    assert kendall_tau_b([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spearman_and_kendall_equal_scipys_on_tied_data(seed):
    _, scores, graded = _tied_data(seed, n=700)  # 700 > one block of pairs
    assert spearman(graded, scores) == pytest.approx(spearmanr(graded, scores).statistic, abs=1e-12)
    assert kendall_tau_b(graded, scores) == pytest.approx(
        kendalltau(graded, scores).statistic, abs=1e-12
    )


def test_cohen_kappa_by_hand_and_against_sklearn():
    a = list("yynnynyyny")
    b = list("ynnnyyyyny")
    # po = 8/10; each rater says y 6 times and n 4 -> pe = (6*6 + 4*4) / 100 = 0.52;
    # kappa = (0.8 - 0.52) / (1 - 0.52) = 7/12
    assert cohen_kappa(a, b) == pytest.approx(7 / 12)
    rng = np.random.default_rng(5)
    left = rng.choice(["good", "bad", "meh"], 200).tolist()
    right = [x if rng.random() < 0.6 else str(rng.choice(["good", "bad", "meh"])) for x in left]
    assert cohen_kappa(left, right) == pytest.approx(cohen_kappa_score(left, right), abs=1e-12)


def _rows_from_counts(counts: list[list[int]]) -> list[list[int]]:
    return [[category for category, c in enumerate(row, 1) for _ in range(c)] for row in counts]


def test_fleiss_kappa_on_the_worked_example():
    # 10 items, 14 raters, 5 categories (the table of Wikipedia's "Fleiss' kappa" article).
    counts = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    # P_i = (sum_j n_ij^2 - 14) / (14 * 13): numerators 182, 46, 56, 80, 60, 84, 44, 32, 52,
    # 52 (sum 688) -> P = 688 / 1820 = 0.3780. Column totals 20, 28, 39, 21, 32 of 140 ->
    # Pe = (400 + 784 + 1521 + 441 + 1024) / 19600 = 4170 / 19600 = 0.2128.
    p, pe = Fraction(688, 1820), Fraction(4170, 19600)
    expected = (p - pe) / (1 - pe)  # 0.20993
    assert fleiss_kappa(_rows_from_counts(counts)) == pytest.approx(float(expected), abs=1e-12)
    assert float(expected) == pytest.approx(0.20993, abs=1e-5)


def test_fleiss_kappa_skips_items_with_one_rating_and_handles_unequal_raters():
    rows = [["a", "a", None], ["a", "b", "b"], ["b", None, None]]
    # the last item has one rating: skipped. P_1 = 2*1/(2*1) = 1; P_2 = (0 + 2*1)/(3*2) = 1/3;
    # P = 2/3. Ratings kept: a 3, b 2 of 5 -> Pe = 9/25 + 4/25 = 13/25;
    # kappa = (2/3 - 13/25) / (12/25) = (50/75 - 39/75) * 25/12 = 11/36
    assert fleiss_kappa(rows) == pytest.approx(11 / 36)
    assert fleiss_kappa([["a", None], [None, "b"]]) is None


def test_fleiss_kappa_of_two_raters_is_near_cohens():
    # with two raters on every item Fleiss' kappa is Scott's pi, equal to Cohen's kappa
    # when both raters use the categories equally often (here 6 y, 4 n each)
    a, b = list("yynnynyyny"), list("ynnnyyyyny")
    assert fleiss_kappa(list(zip(a, b, strict=True))) == pytest.approx(7 / 12)


def test_krippendorff_alpha_by_hand():
    # nominal, items [1,1], [1,2], [2,2]: disagreeing ordered pairs within items 0, 2, 0,
    # each over (m_u - 1) = 1 -> 2. Pooled 1,1,1,2,2,2: 36 - (9 + 9) = 18 disagreeing
    # ordered pairs. alpha = 1 - (6 - 1) * 2 / 18 = 4/9.
    assert krippendorff_alpha([[1, 1], [1, 2], [2, 2]], "nominal") == pytest.approx(4 / 9)
    # interval, items [1,2], [2,3], [3,3]: within 2*(1)^2, 2*(1)^2, 0 -> 4. Pooled
    # 1,2,2,3,3,3: unordered pairs 1-2 (x2) 1, 1-3 (x3) 4, 2-3 (x6) 1 -> 20, ordered 40.
    # alpha = 1 - 5 * 4 / 40 = 0.5
    assert krippendorff_alpha([[1, 2], [2, 3], [3, 3]], "interval") == pytest.approx(0.5)
    assert krippendorff_alpha([[1, None], [2]]) is None  # nothing pairable
    assert krippendorff_alpha([[3, 3], [3, 3]]) is None  # no expected disagreement


def test_krippendorff_alpha_reproduces_krippendorffs_published_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12
    # units, missing values; he reports nominal 0.743 and interval 0.849.
    n = None
    observers = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    ]
    items = [list(unit) for unit in zip(*observers, strict=True)]  # rows = items
    assert krippendorff_alpha(items, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(items, "interval") == pytest.approx(0.849, abs=5e-4)
    with pytest.raises(ValueError, match="level must be 'nominal' or 'interval'"):
        krippendorff_alpha(items, "ordinal")  # type: ignore[arg-type]


def test_bootstrap_interval_of_the_mean_equals_the_runners_bootstrap():
    values = np.random.default_rng(3).normal(size=57).tolist()
    interval = bootstrap_interval(lambda v: float(np.mean(v)), values, resamples=500, seed=4)
    assert interval == pytest.approx(bootstrap_ci(values, n_resamples=500, seed=4))


def test_bootstrap_interval_keeps_pairs_and_drops_undefined_resamples():
    labels = [0, 0, 0, 1, 1, 1]
    scores = [0.1, 0.2, 0.3, 0.7, 0.8, 0.9]
    # perfectly separated pairs: every resample with both classes has AUROC 1 (resampling
    # the columns apart would not), and the one-class resamples (None) are dropped
    assert bootstrap_interval(auroc, labels, scores, resamples=300) == (1.0, 1.0)
    assert bootstrap_interval(auroc, [1, 1], [0.1, 0.2]) is None
    assert bootstrap_interval(auroc, [], []) is None
    with pytest.raises(ValueError, match="columns differ in length"):
        bootstrap_interval(auroc, [1, 0], [0.1])


def test_best_threshold_by_hand():
    labels = [0, 0, 1, 0, 1, 1]
    scores = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    # cuts 0.15 .. 0.55; at 0.25: TPR 3/3, TNR 2/3 -> 5/6; at 0.45: TPR 2/3, TNR 3/3 -> 5/6;
    # every other cut gives 2/3. Of the two best the lower middle one is taken.
    threshold, accuracy = best_threshold(labels, scores)
    assert threshold == pytest.approx(0.25)
    assert accuracy == pytest.approx(5 / 6)
    with pytest.raises(ValueError, match="both classes"):
        best_threshold([1, 1], [0.1, 0.2])


@pytest.mark.parametrize("seed", [0, 1])
def test_best_threshold_reaches_the_best_accuracy_of_any_threshold(seed):
    labels, scores, _ = _tied_data(seed)
    best_of_all = max(
        balanced_accuracy_score(labels, [float(s >= t) for s in scores]) for t in set(scores)
    )
    assert best_threshold(labels, scores)[1] == pytest.approx(best_of_all, abs=1e-12)


def test_lower_is_better_predicts_label_1_strictly_above_the_threshold():
    # toxicity-like: label 1 = toxic = a high score; a gate passes at or below 0.45,
    # so a score of exactly 0.45 is predicted 0
    cv = cross_validated_threshold(
        [0, 0, 0, 1, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.7, 0.8], folds=3, higher_is_better=False
    )
    assert cv.threshold == pytest.approx(0.45)
    assert cv.out_of_fold_balanced_accuracy == 1.0
    assert all(0.3 <= t <= 0.6 for t in cv.fold_thresholds)


def test_cross_validated_threshold_is_not_the_in_sample_accuracy():
    # scores with no signal, 20 draws of 80 samples: the best of 79 cuts flatters itself
    # in-sample; out of fold the accuracy is chance
    in_sample, out_of_fold = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 2, 80).astype(float).tolist()
        scores = rng.random(80).tolist()
        cv = cross_validated_threshold(labels, scores, folds=5, seed=1)
        threshold, accuracy = best_threshold(labels, scores)
        assert cv.threshold == threshold
        assert len(cv.fold_thresholds) == 5
        # the estimate is the balanced accuracy of the pooled out-of-fold predictions
        assert balanced_accuracy(cv.labels, cv.out_of_fold_predicted) == pytest.approx(
            cv.out_of_fold_balanced_accuracy
        )
        in_sample.append(accuracy)
        out_of_fold.append(cv.out_of_fold_balanced_accuracy)
    assert np.mean(in_sample) > 0.55
    assert abs(np.mean(out_of_fold) - 0.5) < 0.03
    assert set(cv.to_dict()) == {
        "threshold",
        "out_of_fold_balanced_accuracy",
        "folds",
        "fold_thresholds",
    }


def test_cross_validation_lowers_its_folds_to_the_smaller_class_and_refuses_one_label():
    cv = cross_validated_threshold([1, 1, 1, 1, 0, 0, 0], [0.9, 0.8, 0.7, 0.6, 0.1, 0.2, 0.3])
    assert cv.folds == 3
    assert cv.out_of_fold_balanced_accuracy == 1.0
    with pytest.raises(ValueError, match=r"each class\. Got 3 of 1 and 1 of 0"):
        cross_validated_threshold([1, 1, 1, 0], [0.9, 0.8, 0.7, 0.1])
