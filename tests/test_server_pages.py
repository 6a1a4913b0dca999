"""The server-rendered pages: every page renders with the stored text escaped (the store's
responses carry script payloads), on an empty store too; the run page shows payloads as
text, the compare page escapes the reflected selection, an unknown run's page is a 404,
and plotly is served locally."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

pytest_plugins = ["browser_conftest", "tests.server_api_helpers"]
pytest.register_assert_rewrite("browser_conftest", "tests.server_api_helpers")

from browser_conftest import XSS_IMG  # noqa: E402


# ---- pages: rendering and escaping ------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/?hours=24",
        "/history",
        "/runs",
        "/runs/run-a",
        "/compare",
        "/compare?a=run-a&b=run-b",
        "/config/field-strategies",
    ],
)
def test_pages_render_and_escape_stored_text(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    html = response.text
    assert "<script>window.__xss" not in html
    assert 'onerror="window.__xss' not in html
    assert "<img src=x" not in html


@pytest.mark.parametrize(
    "path", ["/", "/history", "/runs", "/compare", "/compare?a=x&b=y", "/config/field-strategies"]
)
def test_pages_on_an_empty_store(fresh_client: TestClient, path: str) -> None:
    response = fresh_client.get(path)
    assert response.status_code == 200
    assert "N/A" in response.text or "No " in response.text or "none yet" in response.text


def test_run_page_shows_payloads_as_text(client: TestClient) -> None:
    html = client.get("/runs/run-a").text
    assert "Paris. &lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&#34;window.__xss=2&#34;&gt;" in html
    # the evidence (a list of key: value) is escaped too
    escaped_note = (
        '<span class="ev-key">note:</span> '
        '<span class="ev-value">&lt;img src=x onerror=&#34;window.__xss=2&#34;&gt;</span>'
    )
    assert escaped_note in html
    assert XSS_IMG not in html


def test_compare_page_escapes_reflected_selection(client: TestClient) -> None:
    attack = "</script><script>window.__xss=4</script>"
    html = client.get("/compare", params={"a": attack, "b": "run-b"}).text
    assert "<script>window.__xss=4" not in html
    # inside the JSON data block, "<" is written as \u003c by |tojson
    assert "\\u003c/script\\u003e\\u003cscript\\u003ewindow.__xss=4" in html


def test_unknown_run_page_is_404(client: TestClient) -> None:
    response = client.get("/runs/%3Cscript%3Ex")
    assert response.status_code == 404
    assert "&lt;script&gt;x" in response.text


def test_plotly_is_served_locally(client: TestClient) -> None:
    response = client.get("/static/vendor/plotly.min.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    assert b"plotly" in response.content[:2000].lower()
    html = client.get("/history").text
    assert '<script src="/static/vendor/plotly.min.js"></script>' in html
    assert "cdn" not in html.lower()
