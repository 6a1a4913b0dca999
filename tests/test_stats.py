"""`assay.core.stats`: percentiles, mean and the bootstrap CI, with hand-worked values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from assay.core.stats import bootstrap_ci, mean, percentile, percentiles, summarize


def test_percentiles_use_linear_interpolation():
    values = [4, 1, 3, 2]  # sorted: 1 2 3 4, n - 1 = 3
    # p50: h = 1.5 -> 2 + 0.5 * (3 - 2) = 2.5
    # p90: h = 2.7 -> 3 + 0.7 * (4 - 3) = 3.7
    # p99: h = 2.97 -> 3 + 0.97 * 1 = 3.97
    assert percentiles(values) == pytest.approx({"p50": 2.5, "p90": 3.7, "p99": 3.97})
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0


def test_latency_tail_shows_in_p99_not_in_the_median():
    # 99 requests of 100 ms and one of 5,000 ms: sorted position of p99 is h = 99 * 0.99
    # = 98.01 -> 100 + 0.01 * (5000 - 100) = 149; the median stays 100
    values = [100.0] * 99 + [5000.0]
    assert percentile(values, 50) == pytest.approx(100.0)
    assert percentile(values, 99) == pytest.approx(149.0)
    assert mean(values) == pytest.approx(149.0)  # (99 * 100 + 5000) / 100


def test_missing_values_are_skipped_not_zero():
    values = [None, 2.0, float("nan"), 4.0, np.float32("nan")]
    assert mean(values) == 3.0
    assert percentile(values, 50) == 3.0
    assert mean([]) is None
    assert percentile([None], 50) is None
    assert percentiles([]) == {"p50": None, "p90": None, "p99": None}
    assert bootstrap_ci([]) == (None, None)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="q must be in"):
        percentile([1.0], 101)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0, 2.0], confidence=95)
    with pytest.raises(ValueError, match="infinite"):
        mean([1.0, math.inf])


def test_bootstrap_ci_of_a_two_point_sample():
    # resample means of [0, 1] are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4; the 2.5th
    # and 97.5th percentiles of 10,000 of them fall inside the 0 and 1 masses
    assert bootstrap_ci([0.0, 1.0], n_resamples=10_000) == (0.0, 1.0)


def test_bootstrap_ci_of_a_skewed_sample():
    # [0, 0, 0, 1]: a resample mean is k/4 with k ~ Binomial(4, 1/4):
    # P(0) = .316, P(.25) = .422, P(.5) = .211, P(.75) = .047, P(1) = .004
    # cumulative: .316 .738 .949 .996 1 -> 2.5th percentile 0, 97.5th percentile 0.75
    low, high = bootstrap_ci([0, 0, 0, 1])
    assert (low, high) == (0.0, 0.75)


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    rng = np.random.default_rng(7)
    values = rng.normal(10.0, 2.0, size=200).tolist()
    first = bootstrap_ci(values, seed=3)
    assert bootstrap_ci(values, seed=3) == first
    assert bootstrap_ci(values, seed=4) != first
    low, high = first
    assert low < float(np.mean(values)) < high
    # standard error 2 / sqrt(200) = 0.141; a 95% interval is about 2 * 1.96 * 0.141 = 0.55
    assert high - low == pytest.approx(0.55, abs=0.1)
    narrower = bootstrap_ci(values, confidence=0.5, seed=3)
    assert narrower[1] - narrower[0] < high - low


def test_a_large_pass_fail_sample_resamples_counts_with_the_index_bootstraps_spread():
    # 20,000 values of 0 and 1, 6,000 ones: few distinct values, so each resample draws
    # how many ones it has, Binomial(20,000, 0.3) (the multinomial of two values)
    values = [1.0] * 6_000 + [0.0] * 14_000
    low, high = bootstrap_ci(values, seed=5)
    rng = np.random.default_rng(5)
    ones = rng.multinomial(20_000, [0.7, 0.3], size=1000)[:, 1]
    assert (low, high) == pytest.approx(tuple(np.percentile(ones / 20_000, [2.5, 97.5])))
    # the index bootstrap's interval of the same values, drawn here, and the normal one:
    # standard error sqrt(0.3 * 0.7 / 20,000) = 0.00324, 1.96 of it = 0.00635
    array = np.array(values)
    draws = np.random.default_rng(5).integers(0, 20_000, size=(1000, 20_000))
    by_index = np.percentile(array[draws].mean(axis=1), [2.5, 97.5])
    assert low == pytest.approx(by_index[0], abs=0.0008)  # a quarter of a standard error
    assert high == pytest.approx(by_index[1], abs=0.0008)
    assert (low, high) == pytest.approx((0.3 - 0.00635, 0.3 + 0.00635), abs=0.0008)
    # one value in 16 distinct or fewer; with more, or under 10,000 values, indices
    spread = [float(i % 1_300) for i in range(20_000)]
    draws = np.random.default_rng(0).integers(0, 20_000, size=(100, 20_000))
    expected = np.percentile(np.array(spread)[draws].mean(axis=1) / 1299, [2.5, 97.5]) * 1299
    assert bootstrap_ci(spread, n_resamples=100) == pytest.approx(tuple(expected), rel=1e-12)


def test_bootstrap_ci_of_constant_or_single_values():
    assert bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    assert bootstrap_ci([5.0]) == (5.0, 5.0)


def test_summarize():
    s = summarize([1, 2, 3, 4, None])
    assert (s.n, s.n_missing, s.mean, s.min, s.max) == (4, 1, 2.5, 1.0, 4.0)
    # sample std: squared deviations 2.25 + .25 + .25 + 2.25 = 5, / 3 -> sqrt(5/3) = 1.2910
    assert s.std == pytest.approx(math.sqrt(5 / 3))
    assert (s.p50, s.p90, s.p99) == pytest.approx((2.5, 3.7, 3.97))
    assert s.ci_low is not None and s.ci_low < 2.5 < s.ci_high
    one = summarize([7.0])
    assert (one.mean, one.std, one.ci_low, one.p99) == (7.0, None, None, 7.0)
    assert summarize([None]).to_dict()["n_missing"] == 1


def test_values_near_the_float_maximum_stay_finite():
    # summing 1e308 + 1e308 overflows to inf, and interpolating between -1.7e308 and 1.7e308
    # gave -inf and a NaN interval; the values are scaled by the largest magnitude first
    assert mean([1e308, 1e308]) == 1e308
    assert percentile([-1.7e308, 1.7e308], 50) == 0.0  # midpoint
    assert percentiles([1e308, 1.5e308]) == {
        "p50": pytest.approx(1.25e308),  # 1e308 + 0.5 * 0.5e308
        "p90": pytest.approx(1.45e308),
        "p99": pytest.approx(1.495e308),
    }
    summary = summarize([1e308, 1.5e308, 1e308])
    assert summary.mean == pytest.approx(3.5 / 3 * 1e308)
    # deviations from 7/6: -1/6, 1/3, -1/6 (x 1e308); sqrt((1/36 + 1/9 + 1/36) / 2) = 1/sqrt(12)
    assert summary.std == pytest.approx(1e308 / math.sqrt(12))
    assert summary.ci_low == pytest.approx(1e308) and summary.ci_high == pytest.approx(1.5e308)
    # a spread that itself exceeds the float range is undefined, not inf
    assert summarize([-1.7e308, 1.7e308]).std is None
