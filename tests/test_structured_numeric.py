"""The NUMERIC strategy, |a − b| <= max(abs_tol, rel_tol·|b|) with b the ground truth:
worked by hand, its reason, values that are not numbers, never auto-detected, validated
tolerances, in the config file, and the json_accuracy metric's tolerance parameters."""

from __future__ import annotations

import pytest
from tests.structured_helpers import FixedScorer, saved_config

from assay.core.sample import Sample
from assay.metrics.registry import get_metric
from assay.structured import (
    EvalOptions,
    Strategy,
    StrategyConfig,
    StrategyConfigError,
    evaluate_json,
)
from json_walkthrough import AIO, CONFIG, GT


# ---- NUMERIC: |a − b| <= max(abs_tol, rel_tol·|b|), b the ground truth -------------------------
@pytest.mark.parametrize(
    ("gt", "out", "rel_tol", "abs_tol", "score"),
    [
        (100.0, 100.004, 1e-4, 0.0, 1.0),  # 0.004 <= max(0, 1e-4·100) = 0.01
        (100, 100.01, 1e-4, 0.0, 1.0),  # 0.01 <= 0.01: the boundary matches (decimal)
        (100, 100.0101, 1e-4, 0.0, 0.0),  # 0.0101 > 0.01
        (100, 111, 0.1, 0.0, 0.0),  # 11 > 0.1·100 = 10 ...
        (111, 100, 0.1, 0.0, 1.0),  # ... but 11 <= 0.1·111 = 11.1: relative to the GT
        ("1,200", 1200, 1e-6, 0.0, 1.0),  # numeric text as values.py parses it: diff 0
        ("3.50", 3.5, 1e-6, 0.0, 1.0),
        (0.3, 0.1 + 0.2, 1e-6, 0.0, 1.0),  # 0.30000000000000004: 4e-17 <= 3e-7
        (1_000_000, 1_000_001, 1e-6, 0.0, 1.0),  # 1 <= 1e-6·1e6 = 1
        (1_000_000, 1_000_002, 1e-6, 0.0, 0.0),  # 2 > 1
        (0, 1e-9, 1e-6, 0.0, 0.0),  # abs_tol 0: only 0 matches a GT of 0
        (0, 1e-9, 1e-6, 1e-8, 1.0),  # 1e-9 <= max(1e-8, 0)
        (-5, "-5.2", 0.0, 0.25, 1.0),  # 0.2 <= max(0.25, 0)
    ],
)
def test_numeric_tolerance_worked_by_hand(gt, out, rel_tol, abs_tol, score) -> None:
    options = EvalOptions(numeric_rel_tol=rel_tol, numeric_abs_tol=abs_tol)
    r = evaluate_json({"x": gt}, {"x": out}, {"x": "NUMERIC"}, options=options)
    (field,) = r.fields
    assert (field.strategy, field.score, field.similarity, field.method) == (
        Strategy.NUMERIC,
        score,
        score,
        "pattern",
    )
    assert r.accuracy == score


def test_numeric_reason_states_both_values_and_the_tolerance() -> None:
    options = EvalOptions(numeric_rel_tol=1e-4)
    r = evaluate_json(
        {"a": 100.0, "b": 250}, {"a": 100.004, "b": "251"}, {"*": "NUMERIC"}, options=options
    )
    a, b = r.fields
    assert a.reason == (
        "NUMERIC: |100.004 − 100.0| = 0.004 <= 0.01 = max(abs_tol 0, rel_tol 0.0001 × 100)"
    )
    assert b.reason == "NUMERIC: |'251' − 250| = 1 > 0.025 = max(abs_tol 0, rel_tol 0.0001 × 250)"
    assert r.accuracy == 0.5  # (1 + 0) / 2
    assert r.to_dict()["numeric_tolerance"] == {"rel_tol": 1e-4, "abs_tol": 0.0}


@pytest.mark.parametrize(
    ("gt", "out", "reason"),
    [
        ("12%", 12, "expected value '12%' is not a number"),
        (True, 1, "expected value True is not a number"),
        (5, "five", "output value 'five' is not a number"),
        (5, [5], "output value [5] is not a number"),
        (float("inf"), float("inf"), "expected value inf is not a number"),
    ],
)
def test_numeric_field_that_is_not_a_number_scores_zero_with_the_reason(gt, out, reason) -> None:
    # no fallback to EXACT: True vs 1 and inf vs inf would be equal there
    r = evaluate_json({"x": gt}, {"x": out}, {"x": "NUMERIC"})
    (field,) = r.fields
    assert field.score == 0.0
    assert field.reason.startswith("NUMERIC: " + reason)


def test_numeric_is_never_auto_detected_and_the_walkthrough_is_unchanged() -> None:
    r = evaluate_json({"n": 100.0}, {"n": 100.004})
    assert (r.fields[0].strategy, r.fields[0].score) == (Strategy.EXACT, 0.0)
    walkthrough = evaluate_json(GT, AIO, CONFIG, scorer=FixedScorer())
    assert (walkthrough.accuracy, walkthrough.rqs) == (1.0, 0.7375)


def test_numeric_tolerances_are_validated() -> None:
    with pytest.raises(ValueError, match="'numeric_rel_tol' parameter must be a finite number"):
        EvalOptions(numeric_rel_tol=-1e-6)
    with pytest.raises(ValueError, match="'numeric_abs_tol' parameter must be a finite number"):
        EvalOptions(numeric_abs_tol=float("nan"))
    assert (EvalOptions().numeric_rel_tol, EvalOptions().numeric_abs_tol) == (1e-6, 0.0)


def test_numeric_in_the_config_round_trip_and_errors(tmp_path) -> None:
    config = StrategyConfig({"total": "numeric", "items.*.price": "NUMERIC", "id": "EXACT"})
    assert saved_config(config, tmp_path / "strategies.json") == {
        "total": "NUMERIC",
        "items.*.price": "NUMERIC",
        "id": "EXACT",
    }
    assert config.lookup("items.3.price") is Strategy.NUMERIC
    with pytest.raises(StrategyConfigError) as err:
        StrategyConfig({"total": "NUMBER"})
    assert "unknown strategy 'NUMBER' (did you mean NUMERIC?)" in str(err.value)
    assert "valid values: EXACT, FUZZY, SEMANTIC, IGNORE, NUMERIC" in str(err.value)


def test_json_accuracy_metric_takes_the_tolerances() -> None:
    sample = Sample(expected_json={"total": 19.99, "n": 3}, output_json={"total": 20, "n": 3})
    strict = get_metric("json_accuracy", strategies={"total": "NUMERIC"}, scorer=FixedScorer())
    # |20 − 19.99| = 0.01 > 1e-6·19.99: total wrong, n right (EXACT): 1/2
    assert strict.score(sample).value == 0.5
    loose = get_metric(
        "json_accuracy",
        strategies={"total": "NUMERIC"},
        numeric_abs_tol=0.01,
        scorer=FixedScorer(),
    )
    assert loose.score(sample).value == 1.0  # 0.01 <= max(0.01, ...)
    assert loose.params()["numeric_abs_tol"] == 0.01
    assert "numeric_rel_tol" not in get_metric("json_accuracy").params()
