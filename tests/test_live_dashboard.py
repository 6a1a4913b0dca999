"""Live runs in the dashboard, in Debian's Chromium (Playwright): traces received at
``/v1/traces`` whose service name and texts are script payloads, scored and read by a
monitor, shown on the overview, the run's page (newest trace first) and the history as
text that never runs. Skipped only when /usr/bin/chromium is absent."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.metrics.registry import resolve_metrics
from assay.server import create_app
from assay.server.live import running_server
from assay.server.live_scoring import LiveScoring
from assay.store.db import Store
from assay.store.live_traces import live_run_id

pytest_plugins = ["browser_conftest"]
pytest.register_assert_rewrite("browser_conftest")

from browser_conftest import BROWSER_MARKS  # noqa: E402

pytestmark = BROWSER_MARKS

SERVICE_XSS = '<img src=x onerror="window.__xss=1">bot'
QUESTION_XSS = '<b onmouseover="window.__xss=2">Where?</b>'


def _export(trace: str, question: str) -> bytes:
    now = time.time_ns()
    span = {
        "traceId": trace,
        "spanId": "aaaaaaaaaaaaaaa1",
        "name": "rag",
        "startTimeUnixNano": str(now - 2 * 10**9),
        "endTimeUnixNano": str(now),
        "attributes": [
            {"key": "openinference.span.kind", "value": {"stringValue": "CHAIN"}},
            {"key": "input.value", "value": {"stringValue": question}},
            {"key": "output.value", "value": {"stringValue": "Here."}},
        ],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": SERVICE_XSS}}]}
    document = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}
    return json.dumps(document).encode()


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("live-dashboard")
    store = Store(str(folder / "live.db"))
    config = AssayConfig(
        cache_dir=str(folder), live_grace_seconds=0, live_monitors="mean(e2e_latency) > 1000"
    )
    resources = Resources(config)
    live = LiveScoring(store, config, resolve_metrics(["e2e_latency"]), resources)
    with running_server(create_app(store, token="", live=live)) as url:
        for i, question in enumerate(["first", QUESTION_XSS]):
            answer = httpx.post(
                f"{url}/v1/traces",
                content=_export(f"{i + 1:032x}", question),
                headers={"content-type": "application/json"},
            )
            assert answer.status_code == 200
        assert live.run_once(now_offset=1) == 2
        # the hour the traces were scored in, read as if it had closed
        assert [c.state for c in live.read_monitors(now_offset=3600)] == ["firing"]
        yield url
    resources.close()
    store.close()


def no_xss(dash_page: Any) -> None:
    dash_page.wait_for_timeout(200)
    assert dash_page.evaluate("typeof window.__xss") == "undefined"
    assert dash_page.errors == []
    assert dash_page.locator("main img, main b").count() == 0


def test_the_overview_shows_the_monitor_with_the_service_as_text(
    dash_page: Any, live_url: str
) -> None:
    dash_page.goto(live_url + "/")
    row = dash_page.locator("#live-monitors tbody tr")
    assert row.count() == 1
    cells = row.locator("td").all_inner_texts()
    assert cells[:4] == ["mean(e2e_latency) > 1000", SERVICE_XSS, "firing", "2000"]
    no_xss(dash_page)


def test_the_live_run_page_lists_the_newest_trace_first(dash_page: Any, live_url: str) -> None:
    dash_page.goto(f"{live_url}/runs/{live_run_id(SERVICE_XSS)}")
    page_text = dash_page.locator("main").text_content() or ""  # the closed samples too
    assert f"live/{SERVICE_XSS}" in page_text
    assert page_text.index(QUESTION_XSS) < page_text.index("first")
    no_xss(dash_page)


def test_the_history_reads_the_live_run(dash_page: Any, live_url: str) -> None:
    dash_page.goto(live_url + "/history")
    text = dash_page.locator("main").text_content() or ""  # the chart and its table
    assert "e2e_latency" in text
    no_xss(dash_page)
