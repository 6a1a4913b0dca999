"""Fixtures shared by the dashboard API tests (tests/test_server_*.py) and the browser tests
(tests/test_dashboard_browser.py, tests/test_dashboard_transcripts.py).

Loaded by those modules with ``pytest_plugins = ["browser_conftest"]``. The browser
tests take `BROWSER_MARKS`, the ``chromium`` browser and a fresh ``dash_page`` per test
(its ``errors`` list collects console errors and uncaught exceptions). `populate`
writes a small results store whose aggregates are worked out by hand (see EXPECTED):

run-a (the last 24 h, 1 h ago), 4 samples, tags method / question_type:

    sample status duration semantic_similarity exact_match e2e_latency method       question_type
    s1     passed   1.0 s  0.9 (CORRECT)       1.0          1000 ms    local_search fact
    s2     passed   2.0 s  0.5 (WRONG)         0.0          2000 ms    basic_search fact
    s3     failed  40.0 s  0.7 (CORRECT)       None        40000 ms    local_search reasoning
    s4     passed   3.0 s  0.6 (WRONG)         1.0          3000 ms    basic_search reasoning

run-b (30 h ago: the 24 h before), the same sample ids, all passed in 2.0 s, semantic
similarity 1.0 / 0.6 / 0.8 / 0.7 (each +0.1), exact_match 1.0 everywhere, e2e 2000 ms.

Stored responses of run-a carry script payloads (untrusted text).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.server.live import HEADLESS_CHROMIUM_ARGS
from assay.store.db import Store
from assay.store.models import utcnow

CHROMIUM = Path("/usr/bin/chromium")

#: the marks of a test module that drives the dashboard in Chromium
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="Chromium is not installed at /usr/bin/chromium (scripts/setup installs it: "
        "apt-get install chromium)",
    ),
]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright: one per test module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=HEADLESS_CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture()
def dash_page(chromium: Any) -> Iterator[Any]:
    """A page in a new browser context; ``page.errors`` lists its console errors and
    uncaught exceptions."""
    context = chromium.new_context(viewport={"width": 1360, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors
    yield pg
    context.close()


XSS_SCRIPT = "<script>window.__xss=1</script>"
XSS_IMG = '<img src=x onerror="window.__xss=2">'
XSS_RUN_NAME = 'nightly <img src=x onerror="window.__xss=3">'

RUN_A = (
    # id, status, duration, similarity, exact, method, question_type, response
    ("s1", "passed", 1.0, 0.9, 1.0, "local_search", "fact", f"Paris. {XSS_SCRIPT}"),
    ("s2", "passed", 2.0, 0.5, 0.0, "basic_search", "fact", f"Lyon {XSS_IMG}"),
    ("s3", "failed", 40.0, 0.7, None, "local_search", "reasoning", "Because of the river."),
    ("s4", "passed", 3.0, 0.6, 1.0, "basic_search", "reasoning", "It is cheaper."),
)
RUN_B_SIMILARITY = {"s1": 1.0, "s2": 0.6, "s3": 0.8, "s4": 0.7}

# Aggregates worked out by hand from the tables above.
EXPECTED: dict[str, Any] = {
    # all time: 8 tests, 7 passed (3 of run-a + 4 of run-b)
    "total": 8,
    "pass_rate": 87.5,  # 7 / 8 * 100
    "avg_duration": 6.75,  # (1 + 2 + 40 + 3 + 4 * 2) / 8 = 54 / 8
    "timeout_rate": 12.5,  # one test > 30 s (s3) of 8
    "semantic_similarity": 72.5,  # (0.9+0.5+0.7+0.6 + 1.0+0.6+0.8+0.7) / 8 = 5.8 / 8 = 0.725
    "exact_match": 85.71,  # 6 values of 1.0 out of 7 non-null (s3 of run-a is None): 6/7
    "e2e_latency": 6750.0,  # (1000 + 2000 + 40000 + 3000 + 4 * 2000) / 8 ms, unit kept
    # run-a alone (also the last 24 h)
    "a_pass_rate": 75.0,  # 3 / 4
    "a_avg_duration": 11.5,  # 46 / 4
    "a_timeout_rate": 25.0,  # 1 / 4
    "a_semantic_similarity": 67.5,  # 2.7 / 4 = 0.675
    "a_exact_match": 66.67,  # 2 / 3 (None skipped, not counted as 0)
    # trends: last 24 h (run-a) vs 24-48 h ago (run-b)
    "satisfaction_trend": -25.0,  # (75 - 100) / 100 * 100
    "duration_trend": 475.0,  # (11.5 - 2.0) / 2.0 * 100
}


def populate(store: Store, now: datetime | None = None) -> None:
    """Write run-a and run-b (see the module docstring)."""
    now = now or utcnow()
    store.start_run("run-a", name=XSS_RUN_NAME, source="cli", tags={"model": "demo"})
    for index, (sid, status, duration, sim, exact, method, qtype, response) in enumerate(RUN_A):
        sample = Sample(
            id=sid,
            query=f"Question {sid} <b>bold?</b>",
            response=response,
            expected="Paris",
            duration=duration,
            tags={"method": method, "question_type": qtype},
        )
        results = {
            "semantic_similarity": MetricResult(
                "semantic_similarity",
                sim,
                details={
                    "threshold": 0.7,
                    "label": "CORRECT" if sim >= 0.7 else "WRONG",
                    "note": XSS_IMG,
                },
            ),
            "exact_match": MetricResult(
                "exact_match",
                exact,
                method="pattern",
                reason=None if exact is not None else f"no expected answer {XSS_SCRIPT}",
            ),
            "e2e_latency": MetricResult("e2e_latency", duration * 1000.0, method="measurement"),
        }
        store.record(
            "run-a",
            index,
            sample,
            results,
            status=status,
            duration=duration,
            timestamp=now - timedelta(hours=1),
        )
    store.finish_run("run-a")
    store.start_run("run-b", name="baseline", source="pytest")
    for index, (sid, _status, _duration, _sim, _exact, method, qtype, _r) in enumerate(RUN_A):
        sample = Sample(
            id=sid,
            query=f"Question {sid}",
            response="Paris",
            expected="Paris",
            duration=2.0,
            tags={"method": method, "question_type": qtype},
        )
        results = {
            "semantic_similarity": MetricResult("semantic_similarity", RUN_B_SIMILARITY[sid]),
            "exact_match": MetricResult("exact_match", 1.0, method="pattern"),
            "e2e_latency": MetricResult("e2e_latency", 2000.0, method="measurement"),
        }
        store.record(
            "run-b",
            index,
            sample,
            results,
            status="passed",
            duration=2.0,
            timestamp=now - timedelta(hours=30),
        )
    store.finish_run("run-b")


@pytest.fixture(scope="module")
def stocked_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A SQLite store in a temp dir holding run-a and run-b."""
    path: Path = tmp_path_factory.mktemp("assay-server") / "results.db"
    store = Store(str(path))
    populate(store)
    yield store
    store.close()
