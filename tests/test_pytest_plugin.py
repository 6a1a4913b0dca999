"""The pytest plugin, run in an inner pytest session (pytester) like a user's test suite."""

from __future__ import annotations

import re
import sqlite3

import pytest

from inner_sessions import PLAIN

INNER_TESTS = """
import pytest

def test_exact_pass(assay):
    check = assay.check(response="Paris", expected="paris", metrics=["exact_match"])
    assert check["exact_match"] == 1.0

def test_exact_fail(assay):
    assay.check(response="Lyon", expected="Paris", metrics=["exact_match"])

def test_custom_threshold(assay):
    assay.check(
        response="a b c d", expected="a b c x", metrics=["rouge"], thresholds={"rouge": 0.9}
    )

def test_plain():
    assert 1 + 1 == 2

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""


@pytest.fixture()
def inner(pytester, cache_dir, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE_DIR", cache_dir)
    pytester.makepyfile(test_inner=INNER_TESTS)
    return pytester


def test_check_fails_with_score_threshold_and_evidence(inner):
    result = inner.runpytest_subprocess(*PLAIN)
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    result.stdout.re_match_lines(
        [
            re.escape("assay check failed:"),
            re.escape("  exact_match = 0.0000 (needs >= 1) missed its threshold [method: pattern]"),
        ]
    )
    # rouge of "a b c d" vs "a b c x": 3 of 4 unigrams -> rougeL F1 = 0.75 < 0.9
    result.stdout.re_match_lines(
        [re.escape("  rouge = 0.7500 (needs >= 0.9) missed its threshold")]
    )


def test_nothing_is_written_without_the_option(inner):
    inner.runpytest_subprocess(*PLAIN)
    assert not list(inner.path.glob("*.db"))


def test_store_option_writes_one_run_with_every_test(inner):
    db = inner.path / "results.db"
    inner.runpytest_subprocess(*PLAIN, f"--assay-store={db}", "--assay-run-name=nightly")
    conn = sqlite3.connect(db)
    (name, source, status) = conn.execute("SELECT name, source, status FROM runs").fetchone()
    assert (name, source, status) == ("nightly", "pytest", "finished")
    rows = conn.execute(
        "SELECT test_name, status, response FROM test_results ORDER BY sample_index"
    ).fetchall()
    assert [(t.split("::")[1], s) for t, s, _ in rows] == [
        ("test_exact_pass", "passed"),
        ("test_exact_fail", "failed"),
        ("test_custom_threshold", "failed"),
        ("test_plain", "passed"),
        ("test_skipped", "skipped"),
    ]
    assert rows[0][2] == "Paris"
    scores = conn.execute(
        "SELECT metric_name, metric_value FROM scoring_details ORDER BY id"
    ).fetchall()
    assert scores == [("exact_match", 1.0), ("exact_match", 0.0), ("rouge", pytest.approx(0.75))]
    checks = conn.execute(
        "SELECT check_name, passed FROM quality_checks WHERE test_result_id = "
        "(SELECT id FROM test_results WHERE sample_index = 0) ORDER BY check_name"
    ).fetchall()
    # "Paris": shorter than 10 characters and no sentence ending
    assert checks == [
        ("ends_properly", 0),
        ("has_minimum_length", 0),
        ("has_no_html_tags", 1),
        ("is_not_empty", 1),
    ]
    assert conn.execute("SELECT COUNT(*) FROM metrics_snapshots").fetchone()[0] == 2


CUSTOM_METRIC_TESTS = """
from assay.metrics.base import Metric


class Shout(Metric):
    name = "shout_ratio"  # a user's own metric, never registered
    requires = ("response",)

    def compute(self, sample, res):
        text = sample.response
        return self.result(sum(c.isupper() for c in text) / len(text), method="pattern")


def test_custom_metric(assay):
    check = assay.check(response="ABcd", metrics=[Shout()])
    assert check["shout_ratio"] == 0.5
"""


def test_an_unregistered_metric_is_stored_too(pytester, cache_dir, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE_DIR", cache_dir)
    pytester.makepyfile(test_custom=CUSTOM_METRIC_TESTS)
    db = pytester.path / "custom.db"
    result = pytester.runpytest_subprocess(*PLAIN, f"--assay-store={db}")
    result.assert_outcomes(passed=1)  # before: INTERNALERROR (KeyError: unknown metric)
    assert "INTERNALERROR" not in result.stdout.str()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT metric_name, metric_value FROM scoring_details").fetchall() == [
        ("shout_ratio", 0.5)
    ]


def test_a_store_in_a_missing_folder_is_refused_naming_the_folder(inner):
    """--assay-store=<missing folder>/x.db made the folders; now the store is refused
    (as assay evaluate --db refuses it, exit 2), the warning names the folder, the
    session goes on and its results are spooled, and no folder is made."""
    db = inner.path / "nonexistent" / "dir" / "x.db"
    result = inner.runpytest_subprocess(*PLAIN, f"--assay-store={db}")
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    result.stdout.re_match_lines(
        [
            re.escape(
                f"WARNING: the results store could not be written: sqlite:///{db}: "
                f"FileNotFoundError: the folder {db.parent} does not exist (the results "
                "store creates no folders: create it, or check the path)"
            )
        ]
    )
    assert not (inner.path / "nonexistent").exists()
    assert len(list((inner.path / ".assay-spool").glob("*.jsonl"))) == 1
