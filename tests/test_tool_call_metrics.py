"""Tool calls against reference calls: each expected value is worked out by hand from the
formulas in assay.metrics.tool_calls."""

from __future__ import annotations

import pytest

from assay import Sample, get_metric


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments or None, "kind": "tool"}


SEARCH = call("search", q="paris weather")
BOOK_2 = call("book", city="Paris", nights=2)
BOOK_3 = call("book", city="Paris", nights=3)


def sample(made: list[dict], reference: list[dict]) -> Sample:
    return Sample(trace=made, expected_tool_calls=reference)


def score(name: str, made: list[dict], reference: list[dict], **params):
    return get_metric(name, **params).score(sample(made, reference))


def test_one_wrong_argument_halves_that_call():
    # search agrees fully (1); book gets city right, nights wrong (1/2): (1 + 0.5) / 2
    r = score("tool_call_accuracy", [SEARCH, BOOK_3], [SEARCH, BOOK_2])
    assert r.value == pytest.approx(0.75)
    book = r.details["matches"][1]
    assert (book["tool"], book["argument_agreement"]) == ("book", 0.5)
    assert [a["score"] for a in book["arguments"]] == [1.0, 0.0]


def test_order_matters_for_the_ordered_metric_only():
    made, reference = [BOOK_2, SEARCH], [SEARCH, BOOK_2]
    # ordered: only one of the two can be paired keeping both orders: 1 / 2
    assert score("tool_call_accuracy", made, reference).value == pytest.approx(0.5)
    assert score("tool_call_accuracy_unordered", made, reference).value == pytest.approx(1.0)


def test_an_extra_call_counts_in_the_denominator():
    # 2 pairs agree fully, 3 calls made: 2 / max(2, 3)
    r = score("tool_call_accuracy", [SEARCH, SEARCH, BOOK_2], [SEARCH, BOOK_2])
    assert r.value == pytest.approx(2 / 3)
    assert r.details["unmatched_made"] == ["search"]


def test_a_missing_argument_is_wrong_and_an_extra_one_is_listed_not_scored():
    made = [call("book", city="Paris", breakfast=True)]
    r = score("tool_call_accuracy", made, [BOOK_2])
    assert r.value == pytest.approx(0.5)
    reasons = {
        a["argument"]: (a["score"], a["reason"]) for a in r.details["matches"][0]["arguments"]
    }
    assert reasons["nights"] == (0.0, "missing")
    assert reasons["breakfast"] == (None, "not in the reference")


def test_nothing_expected_nothing_made_is_one_and_calls_made_when_none_expected_is_zero():
    assert score("tool_call_accuracy", [], []).value == 1.0
    assert score("tool_call_accuracy", [SEARCH], []).value == 0.0
    assert score("tool_call_accuracy", [], [SEARCH]).value == 0.0


def test_without_reference_calls_the_value_is_missing_not_zero():
    r = get_metric("tool_call_accuracy").score(Sample(trace=[SEARCH], response="x"))
    assert r.value is None and "expected_tool_calls" in r.reason


def test_llm_steps_are_not_tool_calls():
    llm_step = {"name": "gpt-x", "kind": "llm"}
    assert score("tool_call_accuracy", [llm_step, SEARCH], [SEARCH]).value == 1.0


def test_f1_counts_calls_with_every_argument_right():
    made, reference = [BOOK_3, SEARCH, call("weather")], [SEARCH, BOOK_2]
    # correct: search only. P = 1/3, R = 1/2, F1 = 2PR/(P+R) = (1/3)/(5/6) = 0.4
    r = score("tool_call_f1", made, reference)
    assert r.value == pytest.approx(0.4)
    assert r.components == pytest.approx({"precision": 1 / 3, "recall": 0.5})
    # book's agreement 0.5 passes min_agreement 0.5: P = 2/3, R = 1, F1 = 0.8
    r = score("tool_call_f1", made, reference, min_agreement=0.5)
    assert r.value == pytest.approx(0.8)


def test_f1_edge_cases_say_which_side_is_undefined():
    none_made = score("tool_call_f1", [], [SEARCH])
    assert (none_made.value, none_made.components) == (0.0, {"precision": None, "recall": 0.0})
    none_expected = score("tool_call_f1", [SEARCH], [])
    assert (none_expected.value, none_expected.components) == (
        0.0,
        {"precision": 0.0, "recall": None},
    )
    both = score("tool_call_f1", [], [])
    assert (both.value, both.components) == (1.0, {"precision": 1.0, "recall": 1.0})


def test_argument_strategies_can_ignore_an_argument():
    other_query = call("search", q="weather in lyon")
    r = score("tool_call_accuracy", [other_query], [SEARCH], argument_strategies={"q": "IGNORE"})
    assert r.value == 1.0
    assert get_metric("tool_call_accuracy", argument_strategies={"q": "IGNORE"}).params() == {
        "argument_strategies": {"q": "IGNORE"}
    }


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (4, 7), (7, 4), (9, 9)])
def test_the_assignment_equals_scipys_optimum(shape):
    np = pytest.importorskip("numpy")
    optimize = pytest.importorskip("scipy.optimize")
    from assay.metrics.tool_calls import max_weight_assignment

    rng = np.random.default_rng(sum(shape))
    for _ in range(20):
        weights = rng.random(shape).round(2)
        weights[rng.random(shape) < 0.3] = 0.0
        rows, cols = optimize.linear_sum_assignment(weights, maximize=True)
        pairs = max_weight_assignment(weights.tolist())
        assert len(pairs) == min(shape)
        assert len({i for i, _ in pairs}) == len({j for _, j in pairs}) == min(shape)
        assert sum(weights[i, j] for i, j in pairs) == pytest.approx(weights[rows, cols].sum())


PAY_REF = call("pay", amount=100.0, currency="EUR")
PAY_MADE = call("pay", amount=100.004, currency="EUR")


def test_numeric_argument_within_the_relative_tolerance_matches_and_exact_does_not():
    numeric = {"argument_strategies": {"amount": "NUMERIC"}, "numeric_rel_tol": 1e-4}
    # NUMERIC: |100.004 − 100.0| = 0.004 <= max(0, 1e-4 × 100) = 0.01, so amount is right;
    # currency "EUR" = "EUR" (text, SEMANTIC, equal text): agreement 2/2, accuracy 1 / 1
    r = score("tool_call_accuracy", [PAY_MADE], [PAY_REF], **numeric)
    assert r.value == 1.0
    amount = r.details["matches"][0]["arguments"][0]
    assert amount == {
        "argument": "amount",
        "score": 1.0,
        "reason": "NUMERIC: |100.004 − 100.0| = 0.004 <= 0.01 = "
        "max(abs_tol 0, rel_tol 0.0001 × 100)",
    }
    # EXACT (the default for numbers): "100.004" != "100", agreement 1/2, accuracy 0.5
    assert score("tool_call_accuracy", [PAY_MADE], [PAY_REF]).value == 0.5
    exact = {"argument_strategies": {"amount": "EXACT"}}
    assert score("tool_call_accuracy", [PAY_MADE], [PAY_REF], **exact).value == 0.5
    # NUMERIC with the default rel_tol 1e-6: 0.004 > 1e-6 × 100 = 0.0001, agreement 1/2
    default = {"argument_strategies": {"amount": "NUMERIC"}}
    r = score("tool_call_accuracy", [PAY_MADE], [PAY_REF], **default)
    assert r.value == 0.5
    reason = r.details["matches"][0]["arguments"][0]["reason"]
    assert reason.endswith("0.004 > 0.0001 = max(abs_tol 0, rel_tol 1e-06 × 100)")
    # F1 counts a call only with every argument right: NUMERIC P = R = 1; EXACT 0
    assert score("tool_call_f1", [PAY_MADE], [PAY_REF], **numeric).value == 1.0
    assert score("tool_call_f1", [PAY_MADE], [PAY_REF]).value == 0.0


def test_numeric_arguments_over_two_calls_and_the_absolute_tolerance():
    reference = [PAY_REF, call("pay", amount=250, currency="EUR")]
    made = [PAY_MADE, call("pay", amount="251", currency="EUR")]
    numeric = {"argument_strategies": {"amount": "NUMERIC"}, "numeric_rel_tol": 1e-4}
    # call 1: agreement 1 (as above); call 2: |251 − 250| = 1 > 1e-4 × 250 = 0.025, so
    # agreement 1/2 (currency only): (1 + 0.5) / max(2, 2) = 0.75
    assert score("tool_call_accuracy", made, reference, **numeric).value == 0.75
    # abs_tol 1 makes call 2's amount right too: 1 <= max(1, 0.025): (1 + 1) / 2 = 1
    loose = {**numeric, "numeric_abs_tol": 1.0}
    assert score("tool_call_accuracy", made, reference, **loose).value == 1.0
    # EXACT: both amounts wrong, (0.5 + 0.5) / 2 = 0.5
    assert score("tool_call_accuracy", made, reference).value == 0.5


def test_numeric_tolerances_are_parameters_and_validated():
    metric = get_metric("tool_call_accuracy", argument_strategies={"amount": "numeric"})
    assert metric.params() == {
        "argument_strategies": {"amount": "numeric"},
        "numeric_rel_tol": 1e-6,
        "numeric_abs_tol": 0.0,
    }
    assert get_metric("tool_call_f1", numeric_abs_tol=0.5).params() == {
        "min_agreement": 1.0,
        "numeric_rel_tol": 1e-6,
        "numeric_abs_tol": 0.5,
    }
    with pytest.raises(ValueError, match="'numeric_rel_tol' parameter must be a finite number"):
        get_metric("tool_call_accuracy", numeric_rel_tol=-0.1)
