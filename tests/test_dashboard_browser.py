"""The dashboard as a person uses it: Debian's Chromium driven by Playwright.

Each page is loaded from a live server (uvicorn in a thread on 127.0.0.1, free port) over
the store of `browser_conftest.populate`; the numbers on the page are checked against the
API's, stored script payloads must not run (``window.__xss`` stays undefined) and must
show as text, the field-strategy page imports a file that the API then returns, and every
page is screenshotted into a temp dir. Skipped only when /usr/bin/chromium is absent
(scripts/setup installs it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest

from assay.server import create_app
from assay.server.live import running_server
from assay.server.pages import fmt_metric, fmt_p, fmt_percent, fmt_seconds, fmt_signed
from assay.store.db import Store

pytest_plugins = ["browser_conftest"]
pytest.register_assert_rewrite("browser_conftest")

from browser_conftest import BROWSER_MARKS, XSS_IMG, XSS_RUN_NAME, XSS_SCRIPT  # noqa: E402

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def live_url(stocked_store: Store) -> Iterator[str]:
    with running_server(create_app(stocked_store, token="")) as url:
        yield url


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def api(live_url: str, path: str, **params: Any) -> Any:
    response = httpx.get(live_url + path, params=params, timeout=10)
    response.raise_for_status()
    return response.json()


def no_xss(page: Any) -> None:
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.errors == []


def test_overview_numbers_equal_the_api(dash_page: Any, live_url: str, shots: Path) -> None:
    stats = api(live_url, "/api/statistics")
    dash_page.goto(live_url + "/")
    cards = {
        "pass_rate": fmt_percent(stats["pass_rate"]),
        "health": fmt_percent(stats["health"]),
        "safety": fmt_percent(stats["safety"]),
        "safety_index": fmt_percent(stats["safety_index"]),
        "avg_duration": fmt_seconds(stats["avg_duration"]),
        "timeout_rate": fmt_percent(stats["timeout_rate"]),
    }
    for card, text in cards.items():
        assert dash_page.inner_text(f"#card-{card} .card-value") == text, card
    # hand-worked in browser_conftest: 87.5% / 6.75 s / 12.5%; no safety metrics -> N/A
    assert cards["pass_rate"] == "87.5%"
    assert cards["avg_duration"] == "6.75 s"
    assert cards["timeout_rate"] == "12.5%"
    assert dash_page.inner_text("#card-safety .card-value") == "N/A"
    # trend arrows: pass rate fell 25% (bad), duration rose 475% (bad, lower is better)
    assert dash_page.inner_text("#card-pass_rate .trend") == "↓ -25.0%"
    assert "bad" in dash_page.get_attribute("#card-pass_rate .trend", "class")
    assert dash_page.inner_text("#card-avg_duration .trend") == "↑ +475.0%"
    assert "bad" in dash_page.get_attribute("#card-avg_duration .trend", "class")
    for name, entry in stats["metrics"].items():
        cell = dash_page.inner_text(f"#metric-{name} td.num >> nth=0")
        assert cell == fmt_metric(entry["display"], entry["unit"]), name
    assert dash_page.inner_text("#metric-semantic_similarity td.num >> nth=0") == "72.50%"
    assert dash_page.inner_text("#metric-e2e_latency td.num >> nth=0") == "6750.00 ms"
    # registered, nothing stored: not in the averages, listed (collapsed) below them
    assert dash_page.locator("#metrics-with-data #metric-bleu").count() == 0
    assert dash_page.text_content("#metrics-no-data #metric-bleu") == "bleu"
    assert "N/A" not in dash_page.inner_text("#metrics-with-data")
    # the safety card says what it averages; no "seed" labels anywhere on the page
    assert dash_page.text_content("#card-safety .card-label") == "Safety score"
    assert "compliance_score, toxicity_score and harmfulness_score" in (
        dash_page.get_attribute("#card-safety", "title")
    )
    assert "seed" not in dash_page.inner_text("main").lower()
    dash_page.screenshot(path=str(shots / "overview.png"), full_page=True)
    no_xss(dash_page)


def test_history_charts_render(dash_page: Any, live_url: str, shots: Path) -> None:
    history = api(live_url, "/api/history", hours=72)
    dash_page.goto(live_url + "/history?hours=72")
    dash_page.wait_for_selector("body[data-charts=ready]")
    for chart in ("#chart-pass-rate", "#chart-duration", "#chart-metrics", "#chart-performance"):
        assert dash_page.locator(f"{chart} .main-svg").count() > 0, chart
    rows = dash_page.locator("#history-table tbody tr")
    assert rows.count() == len(history["tests"]) == 2
    dash_page.click("details.raw > summary")
    for i, bucket in enumerate(history["tests"]):
        cells = rows.nth(i).locator("td")
        assert cells.nth(0).inner_text() == bucket["bucket"]
        assert cells.nth(3).inner_text() == fmt_percent(bucket["pass_rate"])
    # the lines carry the API's values
    plotted = dash_page.evaluate("document.getElementById('chart-pass-rate').data[0].y.map(Number)")
    assert plotted == [b["pass_rate"] for b in history["tests"]] == [100.0, 75.0]
    dash_page.screenshot(path=str(shots / "history.png"), full_page=True)
    no_xss(dash_page)


def test_runs_list(dash_page: Any, live_url: str, shots: Path) -> None:
    runs = api(live_url, "/api/runs")
    dash_page.goto(live_url + "/runs")
    rows = dash_page.locator("#runs-table tbody tr")
    assert rows.count() == len(runs)
    for run in runs:
        row = dash_page.locator(f"#runs-table tr[data-run='{run['id']}']")
        assert row.locator("td").nth(6).inner_text() == fmt_percent(run["pass_rate"])
        assert row.locator("td").nth(5).inner_text() == str(run["samples"])
    # the run name is shown as text, the <img> in it is not an element
    assert (
        dash_page.locator("#runs-table tr[data-run='run-a'] td").nth(1).inner_text() == XSS_RUN_NAME
    )
    assert dash_page.locator("#runs-table img").count() == 0
    dash_page.screenshot(path=str(shots / "runs.png"), full_page=True)
    no_xss(dash_page)


def test_run_detail_evidence_and_escaping(dash_page: Any, live_url: str, shots: Path) -> None:
    detail = api(live_url, "/api/runs/run-a")
    dash_page.goto(live_url + "/runs/run-a")
    for name, entry in detail["statistics"]["metrics"].items():
        cell = dash_page.locator(f"#run-metrics tr[data-metric='{name}'] td.num").first
        assert cell.inner_text() == fmt_metric(entry["display"], entry["unit"])
    assert dash_page.inner_text("#card-pass_rate .card-value") == "75.0%"
    assert dash_page.inner_text("#run-name") == XSS_RUN_NAME
    # the per-method table: local_search semantic similarity (0.9 + 0.7) / 2 = 80.00%
    cell = dash_page.locator(
        "#groups-method tr[data-metric='semantic_similarity'] td[data-group='local_search']"
    )
    assert cell.inner_text() == "80.00%"
    sample = dash_page.locator("#sample-0")
    assert sample.get_attribute("open") is None
    dash_page.click("#sample-0 > summary")
    assert sample.get_attribute("open") == ""
    assert dash_page.inner_text("#sample-0 .response-full") == f"Paris. {XSS_SCRIPT}"
    assert dash_page.text_content("#sample-1 .response-full") == f"Lyon {XSS_IMG}"  # closed
    # evidence as a readable list: "key: value" lines, the payload as text
    evidence = dash_page.locator("#sample-0 .details .evidence-list > li")
    assert evidence.all_inner_texts() == ["threshold: 0.7", "label: CORRECT", f"note: {XSS_IMG}"]
    assert dash_page.locator("#sample-0 pre").count() == 0  # no raw JSON
    assert dash_page.locator("#samples img, #samples script").count() == 0
    dash_page.screenshot(path=str(shots / "run_detail.png"), full_page=True)
    no_xss(dash_page)


def test_compare_page(dash_page: Any, live_url: str, shots: Path) -> None:
    data = api(live_url, "/api/compare", a="run-a", b="run-b")
    dash_page.goto(live_url + "/compare?a=run-a&b=run-b")
    dash_page.wait_for_selector("body[data-charts=ready]")
    for row in data["rows"]:
        cells = dash_page.locator(f"#compare-table tr[data-metric='{row['metric']}'] td")
        assert cells.nth(1).inner_text() == fmt_metric(row["display"]["mean_a"], row["unit"])
        assert cells.nth(2).inner_text() == fmt_metric(row["display"]["mean_b"], row["unit"])
        assert cells.nth(3).inner_text() == fmt_signed(row["display"]["diff"], row["unit"])
        assert cells.nth(5).inner_text() == fmt_p(row["p_value"])
    sim = dash_page.locator("#compare-table tr[data-metric='semantic_similarity'] td")
    assert sim.nth(3).inner_text() == "+10.00 pts"  # every pair +0.1
    assert sim.nth(4).inner_text() == "[10.00, 10.00]"
    assert dash_page.locator("#chart-compare .main-svg").count() > 0
    # the per-tag tables default to run B; pick run A and read its question types
    dash_page.select_option("#table-run", "run-a")
    dash_page.click("form.inline button[type=submit]")
    dash_page.wait_for_selector("body[data-charts=ready]")
    fact = dash_page.locator(
        "#groups-question_type tr[data-metric='semantic_similarity'] td[data-group='fact']"
    )
    assert fact.inner_text() == "70.00%"  # (0.9 + 0.5) / 2
    labels = dash_page.locator("#groups-method tr.label-row[data-label='CORRECT'] td")
    assert [labels.nth(i).inner_text() for i in (1, 2)] == ["0", "2"]  # basic, local
    dash_page.screenshot(path=str(shots / "compare.png"), full_page=True)
    no_xss(dash_page)


def test_compare_page_reflects_selection_as_text(dash_page: Any, live_url: str) -> None:
    attack = "</script><script>window.__xss=4</script>"
    dash_page.goto(live_url + "/compare?" + str(httpx.QueryParams({"a": attack, "b": "run-b"})))
    assert dash_page.input_value("#sel-a") == attack
    no_xss(dash_page)


def test_field_strategy_page_import_edit_export(
    dash_page: Any, live_url: str, shots: Path, tmp_path: Path
) -> None:
    # the JSON specification's example configuration, cut to three fields
    example_config = {
        "customer_name": "FUZZY",
        "address_line_1": "SEMANTIC",
        "internal_notes": "IGNORE",
    }
    config_file = tmp_path / "customers.json"
    config_file.write_text(json.dumps(example_config), encoding="utf-8")
    dash_page.goto(live_url + "/config/field-strategies")
    dash_page.wait_for_selector("body[data-ready=true]")
    dash_page.set_input_files("#import-file", str(config_file))
    dash_page.wait_for_selector("#config-status.ok")
    assert dash_page.inner_text("#config-status") == "Imported 3 field(s) into 'customers'."
    assert dash_page.input_value("#config-name") == "customers"
    assert api(live_url, "/api/field-strategies/customers")["strategies"] == example_config
    # the status is written once the saved list is refreshed
    assert dash_page.locator("#config-list a[data-config='customers']").count() == 1

    # add a field, remove one, save: the API returns the edited config
    dash_page.click("#add-field")
    dash_page.locator("tr.field-row .field-name").last.fill("phone_number")
    dash_page.locator("tr.field-row .field-strategy").last.select_option("EXACT")
    rows = dash_page.locator("tr.field-row")
    for i in range(rows.count()):
        if rows.nth(i).locator(".field-name").input_value() == "internal_notes":
            rows.nth(i).locator(".remove-field").click()
            break
    dash_page.click("#save-config")
    dash_page.wait_for_selector("#config-status.ok >> text=Saved")
    assert api(live_url, "/api/field-strategies/customers")["strategies"] == {
        "customer_name": "FUZZY",
        "address_line_1": "SEMANTIC",
        "phone_number": "EXACT",
    }

    with dash_page.expect_download() as info:
        dash_page.click("#export-config")
    download = info.value
    assert download.suggested_filename == "customers.json"
    assert json.loads(Path(download.path()).read_text(encoding="utf-8")) == {
        "customer_name": "FUZZY",
        "address_line_1": "SEMANTIC",
        "phone_number": "EXACT",
    }
    dash_page.screenshot(path=str(shots / "field_strategies.png"), full_page=True)

    # load it again from the list, then delete it (after the confirm dialog)
    dash_page.click("#new-config")
    assert dash_page.input_value("#config-name") == ""
    dash_page.click("#config-list a[data-config='customers']")
    dash_page.wait_for_selector("#config-status.ok >> text=Loaded")
    assert dash_page.locator("tr.field-row").count() == 3
    dash_page.once("dialog", lambda dialog: dialog.accept())
    dash_page.click("#delete-config")
    dash_page.wait_for_selector("#config-status.ok >> text=Deleted")
    response = httpx.get(live_url + "/api/field-strategies/customers", timeout=10)
    assert response.status_code == 404
    assert dash_page.locator("#config-list a[data-config='customers']").count() == 0
    no_xss(dash_page)


def test_field_strategy_page_offers_numeric(dash_page: Any, live_url: str) -> None:
    dash_page.goto(live_url + "/config/field-strategies")
    dash_page.wait_for_selector("body[data-ready=true]")
    dash_page.click("#new-config")
    dash_page.fill("#config-name", "amounts")
    dash_page.click("#add-field")
    dash_page.locator("tr.field-row .field-name").last.fill("total")
    select = dash_page.locator("tr.field-row .field-strategy").last
    options = select.locator("option")
    assert [options.nth(i).get_attribute("value") for i in range(options.count())] == [
        "EXACT",
        "FUZZY",
        "SEMANTIC",
        "IGNORE",
        "NUMERIC",
    ]
    select.select_option("NUMERIC")
    dash_page.click("#save-config")
    dash_page.wait_for_selector("#config-status.ok >> text=Saved")
    assert api(live_url, "/api/field-strategies/amounts")["strategies"] == {"total": "NUMERIC"}
    assert "NUMERIC" in dash_page.inner_text(".muted >> nth=0")
    no_xss(dash_page)


def test_field_strategy_page_shows_validation_errors(
    dash_page: Any, live_url: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"<b>total</b>": "CLOSE_ENOUGH"}', encoding="utf-8")
    dash_page.goto(live_url + "/config/field-strategies")
    dash_page.wait_for_selector("body[data-ready=true]")
    dash_page.fill("#config-name", "bad-one")
    dash_page.set_input_files("#import-file", str(bad))
    dash_page.wait_for_selector("#config-status.error")
    message = dash_page.inner_text("#config-status")
    assert message.startswith("Not imported: ")
    assert "'<b>total</b>'" in message  # the field, shown as text
    assert "valid values: EXACT, FUZZY, SEMANTIC, IGNORE" in message
    assert dash_page.locator("#config-status b").count() == 0
    response = httpx.get(live_url + "/api/field-strategies/bad-one", timeout=10)
    assert response.status_code == 404  # nothing saved
    # the console shows the failed request (422); nothing else went wrong
    dash_page.errors[:] = [e for e in dash_page.errors if "422" not in e]
    no_xss(dash_page)


def test_api_docs_render_from_local_files_only(dash_page: Any, live_url: str, shots: Path) -> None:
    requested: list[str] = []
    dash_page.on("request", lambda request: requested.append(request.url))
    errors: list[str] = []
    dash_page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    dash_page.goto(f"{live_url}/docs")
    dash_page.wait_for_selector(".opblock-summary-path", timeout=15_000)
    paths = dash_page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/statistics" in paths and "/api/evaluate" in paths
    assert requested and all(url.startswith(live_url) for url in requested), requested
    assert not [e for e in errors if "Content Security Policy" in e]
    dash_page.screenshot(path=str(shots / "api_docs.png"))


# ---- a stored payload in every untrusted field -------------------------------------------
#: each payload would set window.__xss if it ran (inline scripts are also blocked by the
#: page's CSP, whose violation would show in the console errors no_xss checks)
EVIL = {
    "id": '"><script>window.__xss="id"</script>',
    "test": "<svg onload=\"window.__xss='test'\">",
    "tag_key": "<img src=x onerror=\"window.__xss='tag key'\">",
    "tag_value": "<script>window.__xss='tag value'</script>",
    "metric": "m<img src=x onerror=\"window.__xss='metric'\">",
    "label": "<script>window.__xss='label'</script>",
    "reason": "<iframe srcdoc=\"<script>parent.__xss='reason'</script>\"></iframe>",
    "error": "</pre><script>window.__xss='error'</script>",
    "detail_key": "<b onmouseover=\"window.__xss='detail key'\">k</b>",
    "run_name": "</title><script>window.__xss='run name'</script>",
    "dataset": "javascript:window.__xss='dataset'",
    "run_tag": "<img src=x onerror=\"window.__xss='run tag'\">",
    "usage": "<script>window.__xss='usage'</script>",
    "field": "<img src=x onerror=\"window.__xss='field'\">",
}
EVIL_RUN = 'evil"><img src=x onerror=window.__xss=7>'  # no "/" so it stays one path segment


@pytest.fixture(scope="module")
def evil_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from assay.core.result import MetricResult
    from assay.core.sample import Sample

    store = Store(str(tmp_path_factory.mktemp("evil") / "evil.db"))
    store.start_run(
        EVIL_RUN,
        name=EVIL["run_name"],
        dataset=EVIL["dataset"],
        tags={EVIL["run_tag"]: EVIL["run_tag"]},
    )
    for i in range(3):
        sample = Sample(
            id=f"{EVIL['id']}{i}",
            query=EVIL["id"],
            response=EVIL["tag_value"],
            tags={
                "method": EVIL["tag_value"] if i else "plain",
                "question_type": EVIL["tag_key"],
                EVIL["tag_key"]: EVIL["tag_value"],
            },
        )
        results = {
            EVIL["metric"]: MetricResult(
                EVIL["metric"],
                0.5 + 0.1 * i,
                details={"label": EVIL["label"], EVIL["detail_key"]: [EVIL["reason"]]},
                reason=EVIL["reason"],
                error=EVIL["error"] if i == 2 else None,
            ),
            "exact_match": MetricResult("exact_match", 1.0, method="pattern"),
        }
        store.record(
            EVIL_RUN,
            i,
            sample,
            results,
            status="passed",
            duration=1.0,
            test_name=EVIL["test"],
            error=EVIL["error"],
        )
    store.finish_run(EVIL_RUN, judge_usage={EVIL["usage"]: EVIL["usage"]})
    store.put_strategy_config("evil", {EVIL["field"]: "EXACT"})
    with running_server(create_app(store, token="")) as url:
        yield url
    store.close()


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/history?hours=72",
        "/runs",
        "/runs/" + quote(EVIL_RUN, safe=""),
        "/runs/" + quote(EVIL_RUN, safe="") + "?page=1",
        "/compare?" + urlencode({"a": EVIL_RUN, "b": f"method={EVIL['tag_value']}"}),
        "/compare?" + urlencode({"a": "method=plain", "b": EVIL_RUN, "run": EVIL_RUN}),
        "/config/field-strategies",
        "/runs/" + quote(EVIL["id"], safe=""),  # the 404 page names the unknown run
    ],
)
def test_stored_payloads_in_every_field_never_run(dash_page: Any, evil_url: str, path: str) -> None:
    dash_page.goto(evil_url + path)
    dash_page.wait_for_load_state("load")
    if "/config/" not in path and dash_page.locator(".chart").count():
        dash_page.wait_for_selector("body[data-charts=ready]")
    for details in dash_page.locator("details").all():
        details.evaluate("d => d.open = true")  # render the evidence of every sample
    dash_page.wait_for_timeout(200)  # let any <img onerror>/<svg onload> fire
    if path.startswith("/runs/" + quote(EVIL["id"], safe="")):  # the page's own 404 status
        dash_page.errors[:] = [e for e in dash_page.errors if "status of 404" not in e]
    no_xss(dash_page)
    # nothing untrusted became an element: the pages make no img/svg/iframe of their own
    assert dash_page.locator("main img, main iframe, main > svg, main b[onmouseover]").count() == 0
    assert dash_page.locator("main script:not([type='application/json'])").count() == 0


def test_payloads_show_as_their_text(dash_page: Any, evil_url: str) -> None:
    dash_page.goto(evil_url + "/runs/" + quote(EVIL_RUN, safe=""))
    text = dash_page.inner_text("main")
    for key in ("run_name", "dataset", "run_tag", "tag_key", "tag_value", "label", "metric"):
        assert EVIL[key] in text, key
    dash_page.click("#sample-2 > summary")
    body = dash_page.inner_text("#sample-2")
    for key in ("id", "reason", "error"):
        assert EVIL[key] in body, key
    assert f"{EVIL['detail_key']}:" in body  # the evidence's key, as text
    no_xss(dash_page)


def test_config_field_names_are_text_in_the_editor(dash_page: Any, evil_url: str) -> None:
    dash_page.goto(evil_url + "/config/field-strategies")
    dash_page.wait_for_selector("body[data-ready=true]")
    dash_page.click("#config-list a[data-config='evil']")
    dash_page.wait_for_selector("#config-status.ok >> text=Loaded")
    assert dash_page.locator("tr.field-row .field-name").input_value() == EVIL["field"]
    dash_page.wait_for_timeout(200)
    no_xss(dash_page)
