"""The server refuses what it should: cross-site and non-JSON writes, foreign Host names
(DNS rebinding), bodies over the limit however they are sent, and no input gives a 500
or is echoed back. Byte-level cases run against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from assay.server.app import create_app
from assay.server.errors import INTERNAL_ERROR
from assay.server.live import running_server
from assay.store.db import Store
from assay.structured.strategies import StrategyConfig, StrategyConfigError
from test_api_fuzz import PAGE_DATA, deep_text, strict_json

JSON = {"Content-Type": "application/json"}
STRATEGIES = "/api/field-strategies/invoices"


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "guard.db"))
    yield s
    s.close()


@pytest.fixture
def client(store) -> TestClient:
    c = TestClient(create_app(store, token=""), base_url="http://localhost:8000")
    assert c.put(STRATEGIES, json={"strategies": {"total": "EXACT"}}).status_code == 200
    return c


def _saved(client: TestClient) -> dict[str, Any]:
    return client.get(STRATEGIES).json()["strategies"]


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_a_cross_site_simple_request_cannot_overwrite_a_config(client, content_type):
    # what a foreign page can send without a CORS preflight: no JSON content type
    headers = {"Origin": "http://evil.example"}
    if content_type:
        headers["Content-Type"] = content_type
    body = b'{"total": "IGNORE"}'
    response = client.post(f"{STRATEGIES}/import", content=body, headers=headers)
    assert response.status_code in {403, 415}
    same_origin_text = client.post(
        f"{STRATEGIES}/import", content=body, headers={"Content-Type": "text/plain"}
    )
    assert same_origin_text.status_code == 415
    assert "Content-Type: application/json" in same_origin_text.json()["detail"]
    assert _saved(client) == {"total": "EXACT"}  # nothing was overwritten


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [
        ("Origin", "http://evil.example", 403),
        ("Origin", "null", 403),
        ("Origin", "http://localhost:9999", 403),  # another port is another origin
        ("Referer", "http://evil.example/page", 403),
        ("Origin", "http://localhost:8000", 200),
        ("Referer", "http://localhost:8000/config/field-strategies", 200),
    ],
)
def test_writes_check_origin_and_referer_when_present(client, header, value, status):
    response = client.put(
        STRATEGIES, json={"strategies": {"total": "FUZZY"}}, headers={header: value}
    )
    assert response.status_code == status, response.text
    assert _saved(client) == {"total": "FUZZY" if status == 200 else "EXACT"}
    deleted = client.delete(STRATEGIES, headers={header: value})
    assert deleted.status_code == (204 if status == 200 else 403)


@pytest.mark.parametrize(
    ("host", "extra", "status"),
    [
        ("localhost:8000", [], 200),
        ("127.0.0.1", [], 200),
        ("[::1]:8000", [], 200),
        ("attacker.example", [], 400),
        ("127.0.0.1.attacker.example", [], 400),
        ("", [], 400),
        ("assay.internal:443", ["assay.internal"], 200),
    ],
)
def test_only_allowed_host_names_are_answered(store, host, extra, status):
    client = TestClient(create_app(store, token="", allowed_hosts=extra))
    response = client.get("/api/runs", headers={"Host": host})
    assert response.status_code == status
    if status == 400:
        assert "ASSAY_ALLOWED_HOSTS" in response.json()["detail"]
    assert client.get("/", headers={"Host": host}).status_code == status  # pages too


def test_allowed_hosts_from_the_environment(store, monkeypatch):
    monkeypatch.setenv("ASSAY_ALLOWED_HOSTS", "a.example, b.example")
    client = TestClient(create_app(store, token=""))
    assert client.get("/api/runs", headers={"Host": "b.example"}).status_code == 200
    assert client.get("/api/runs", headers={"Host": "c.example"}).status_code == 400


def _raw(url: str, method: str, path: str, headers: dict[str, str], chunks: list[bytes]):
    """Send a request byte by byte over a real socket: chunked when there are several
    chunks (no Content-Length), else with a Content-Length. Returns (status, body)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", f"127.0.0.1:{parts.port}")
        for key, value in headers.items():
            conn.putheader(key, value)
        if len(chunks) == 1:
            conn.putheader("Content-Length", str(len(chunks[0])))
            conn.endheaders(chunks[0])
        else:
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            try:
                for chunk in chunks:
                    conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                conn.send(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server answered 413 and closed before the rest arrived
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_the_size_limit_holds_on_chunked_bodies_and_no_error_echoes_the_body(store):
    app = create_app(store, token="", max_body_bytes=1_000_000)
    marker = b"ECHO-MARKER-7731"
    with running_server(app) as url:
        # 3 MB chunked, no Content-Length: before, only Content-Length was checked
        chunk = b'{"samples": [' + b" " * 65_000
        status, body = _raw(url, "POST", "/api/evaluate", JSON, [chunk] * 46)
        assert status == 413 and b"over 1000000 bytes" in body
        # an invalid body under the limit: the 422 names the problem, not the input
        payload = json.dumps({"samples": [{"response": marker.decode() * 20_000}], "x": 1})
        status, body = _raw(url, "POST", "/api/evaluate", JSON, [payload.encode()])
        assert status == 422 and marker not in body
        assert json.loads(body)["detail"][0] == {
            "loc": ["body", "x"],
            "msg": "Extra inputs are not permitted",
            "type": "extra_forbidden",
        }
        # Content-Length over the limit is refused before the body is read
        status, body = _raw(url, "POST", "/api/evaluate", JSON, [b"x" * 1_000_001])
        assert status == 413


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize("levels", [50, 300, 900, 5_000])
def test_deeply_nested_json_is_a_4xx_on_every_write(client, levels):
    deep = _deep(levels)
    bodies = {
        "/api/json-eval": {"gt": deep, "output": deep},
        "/api/evaluate": {"samples": [{"response": "a", "metadata": deep}], "metrics": ["bleu"]},
        f"{STRATEGIES}/import": deep,
    }
    for path, body in bodies.items():
        # json.dumps recurses: deeper documents are written as text
        deep_body = '{"gt": ' + deep_text(levels, "{") + ', "output": {}}'
        text = json.dumps(body) if levels < 900 else deep_body
        response = client.post(path, content=text.encode(), headers=JSON)
        assert response.status_code < 500, (path, levels, response.text[:300])


@pytest.mark.parametrize(
    "raw",
    [
        b'{"samples": [{"response": 1e400}], "metrics": ["bleu"]}',
        b'{"samples": [{"response": "a", "duration": 1e400}], "metrics": ["bleu"]}',
        b'{"samples": [{"response": "a", "duration": ' + b"9" * 5000 + b"}]}",
        b'{"gt": {"x": ' + b"9" * 5000 + b'}, "output": {"x": 1}}',
        b'{"samples": "not a list"}',
        b'{"samples": [{"response": "\xff\xfe"}]}',
        b"\xff\xfe\xfd",
        b"[]",
        b"null",
        b'{"samples": [{"response": "a"}], "metrics": [1, 2]}',
        b'{"gt": NaN, "output": Infinity}',
    ],
    ids=lambda raw: raw[:40].decode("latin-1"),
)
def test_hostile_bodies_get_4xx_never_500(client, raw):
    for path in ("/api/evaluate", "/api/json-eval", f"{STRATEGIES}/import"):
        response = client.post(path, content=raw, headers=JSON)
        assert response.status_code < 500, (path, raw[:60], response.text[:300])
        body = strict_json(response.text)  # standard JSON, whatever was posted
        if response.status_code >= 400:
            assert body["detail"]
        else:  # json-eval reads NaN/Infinity as the texts "NaN"/"Infinity"
            assert path == "/api/json-eval" and raw.startswith(b'{"gt": NaN')


#: a number token the pages must never show, as text or in an attribute
NON_FINITE = re.compile(r"\b(?:-?inf|nan|infinity)\b", re.IGNORECASE)


def _record_runs(store, values: dict[str, float]) -> None:
    """One run per entry: three samples with that latency and throughput (which also
    sets their duration, in seconds, made positive) and no bleu value."""
    from assay.core.result import MetricResult
    from assay.core.sample import Sample

    for run_id, value in values.items():
        store.start_run(run_id, metrics=["e2e_latency", "throughput", "bleu"])
        for i in range(3):
            scores = {
                "e2e_latency": MetricResult("e2e_latency", value, method="measurement"),
                "throughput": MetricResult("throughput", value, method="measurement"),
                "bleu": MetricResult("bleu", None, method="skipped"),
            }
            sample = Sample(id=f"s{i}", response="x", duration=abs(value), tags={"method": "m"})
            store.record(run_id, i, sample, scores, status="passed")
        store.finish_run(run_id, status="finished")


@pytest.fixture
def extreme_client(store) -> TestClient:
    """Runs whose values overflow every sum (1e308 ms, 1e308 s, 1e308 tokens/s), one of
    ordinary values, and a metric (bleu) with only missing values."""
    _record_runs(store, {"big": 1e308, "other": 12.5})
    return TestClient(create_app(store, token=""), base_url="http://localhost")


def test_json_responses_never_carry_nan_or_infinity(extreme_client):
    for path in (
        "/api/statistics",
        "/api/runs",
        "/api/runs/big",
        "/api/runs/big/groups",
        "/api/history",
        "/api/compare?a=big&b=other",
    ):
        response = extreme_client.get(path)
        assert response.status_code == 200, (path, response.text)
        strict_json(response.text)


@pytest.mark.parametrize(
    "path",
    ["/", "/?hours=24", "/runs", "/runs/big", "/history", "/compare?a=big&b=other"],
)
def test_pages_never_show_inf_or_nan(extreme_client, path):
    page = extreme_client.get(path)
    assert page.status_code == 200
    assert NON_FINITE.findall(page.text) == []
    for block in PAGE_DATA.findall(page.text):
        strict_json(block)  # the charts' data is standard JSON too


def _cell(page: str, metric: str) -> str:
    """The value cell of ``metric``'s row in a page's metric table."""
    row = re.search(rf'id="metric-{metric}".*?<td class="num"[^>]*>([^<]*)</td>', page, re.S)
    assert row is not None, metric
    return row.group(1)


def test_pages_show_huge_values_formatted_and_missing_ones_as_na(extreme_client):
    from assay.server.pages import fmt_metric

    run = extreme_client.get("/runs/big").text
    assert '<span class="chip " data-metric="e2e_latency">e2e_latency 1.00e+308 ms</span>' in run
    assert '<span class="chip na" data-metric="bleu">bleu N/A</span>' in run
    assert run.count('<span class="dur">1.00e+308 s</span>') == 3  # each sample's duration
    # their average overflows (SQL's AVG sums first): N/A, as in the API
    assert re.search(
        r'id="card-avg_duration" data-value="">\s*<div[^>]*>Avg duration</div>'
        r'\s*<div class="card-value">N/A</div>',
        run,
    )
    # the overview shows what the API says, formatted: the all-time mean of three 1e308
    # and three 12.5 is 5e307 (their sum overflows; the store weights the run means)
    overview = extreme_client.get("/").text
    averages = extreme_client.get("/api/statistics").json()["metrics"]
    assert (averages["e2e_latency"]["avg"], averages["e2e_latency"]["display"]) == (5e307, 5e307)
    assert _cell(overview, "e2e_latency") == fmt_metric(5e307, "ms") == "5.00e+307 ms"
    assert _cell(overview, "throughput") == "5.00e+307 tok/s"
    # bleu is stored as None only: listed with the metrics that have no value, no N/A cell
    with_data, no_data = overview.split('id="metrics-no-data"')
    assert 'id="metric-bleu"' not in with_data and 'id="metric-bleu"' in no_data
    assert "N/A" not in with_data.split('id="metrics-with-data"')[1]


def test_runs_of_opposite_huge_values_average_to_their_finite_mean(store):
    # run means of +1e308 and -1e308 (3 values each): their sums overflow to +inf and
    # -inf (SQL sums those to NULL); the store keeps run means and weights them instead
    _record_runs(store, {"up": 1e308, "down": -1e308})
    client = TestClient(create_app(store, token=""), base_url="http://localhost")
    averages = client.get("/api/statistics").json()["metrics"]
    assert {name: (a["avg"], a["count"], a["display"]) for name, a in averages.items()} == {
        "e2e_latency": (0.0, 6, 0.0),
        "throughput": (0.0, 6, 0.0),
    }
    series = client.get("/api/history").json()["metrics"]
    assert [(p["avg"], p["display"]) for p in series["e2e_latency"]] == [(0.0, 0.0)]
    assert [(p["avg"], p["display"]) for p in series["throughput"]] == [(0.0, 0.0)]
    overview = client.get("/").text
    assert _cell(overview, "e2e_latency") == "0.00 ms"
    assert _cell(overview, "throughput") == "0.00 tok/s"
    assert client.get("/history").status_code == 200


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "N/A"),
        (float("nan"), "N/A"),
        (float("inf"), "N/A"),
        (float("-inf"), "N/A"),
        (10**400, "N/A"),  # past the float range
        ("12", "N/A"),
        (True, "N/A"),
        (1e308, "1.00e+308"),
        (-1.7e308, "-1.70e+308"),
        (1e12, "1.00e+12"),
        (999_999_999_999.0, "999999999999.00"),
        (2, "2.00"),
        (-0.005, "-0.01"),
    ],
)
def test_one_number_formatter_handles_every_value(value, text):
    from assay.server.pages import data_value, fmt_number

    assert fmt_number(value) == text
    assert data_value(value) == ("" if text == "N/A" else str(value))


def test_every_number_filter_goes_through_the_one_formatter():
    from assay.server.pages import (
        fmt_metric,
        fmt_p,
        fmt_percent,
        fmt_seconds,
        fmt_signed,
        trend_info,
    )

    inf, nan = float("inf"), float("nan")
    assert [fmt_percent(inf), fmt_seconds(nan), fmt_metric(-inf, "ms"), fmt_p(nan)] == ["N/A"] * 4
    assert fmt_signed(inf, "ratio") == "N/A"
    assert fmt_metric(1e308, "ms") == "1.00e+308 ms"
    assert fmt_metric(0.5, "ratio") == "0.50%"
    assert fmt_signed(1.234, "ratio") == "+1.23 pts"
    assert fmt_signed(-2.0, "tokens/s") == "-2.00 tok/s"
    assert fmt_p(0.0001) == "< 0.001" and fmt_p(0.25) == "0.250"
    assert trend_info(inf)["text"] == trend_info(None)["text"] == "no trend"
    assert trend_info(12.345)["text"] == "+12.3%" and trend_info(-1e20)["text"] == "-1.0e+20%"


def test_error_bodies_quote_little_of_the_request(client):
    long_value = "X" * 100_000
    response = client.put(STRATEGIES, json={"strategies": {"total": long_value}})
    assert response.status_code == 422
    (item,) = response.json()["detail"]
    # the message is the config error cut to its first 500 characters, saying how many
    # more there were: the error names the field, the 100,000-character value and the
    # valid strategies
    with pytest.raises(StrategyConfigError) as error:
        StrategyConfig.coerce({"total": long_value})
    full = str(error.value)
    assert len(full) > 100_000
    assert item["msg"] == f"{full[:500]}… ({len(full) - 500} more characters)"
    # a key is quoted in "loc": cut too
    response = client.post(
        "/api/evaluate", json={"samples": [{"response": "a"}], "tags": {"K" * 5000: 1}}
    )
    assert response.json()["detail"][0]["loc"] == [
        "body",
        "tags",
        "K" * 100 + "… (4900 more characters)",
    ]
    # thousands of problems: the first 50 and a count of the rest
    response = client.post("/api/evaluate", json={"samples": [{"duration": -1}] * 900})
    detail = response.json()["detail"]
    assert len(detail) == 51 and detail[0]["loc"] == ["body", "samples", 0, "duration"]
    assert detail[-1] == {
        "loc": ["body"],
        "msg": "850 more problems not listed; fix these first",
        "type": "too_many_errors",
    }
    assert len(client.get("/api/runs/" + "R" * 5000).json()["detail"]) < 600


def test_the_body_limit_comes_from_the_environment(store, monkeypatch):
    monkeypatch.setenv("ASSAY_MAX_BODY_BYTES", "2000")
    client = TestClient(create_app(store, token=""), base_url="http://localhost")
    body = {"samples": [{"response": "x" * 3000}], "metrics": ["exact_match"]}
    response = client.post("/api/evaluate", json=body)
    assert response.status_code == 413
    assert response.json() == {"detail": "request body over 2000 bytes: send less"}
    monkeypatch.setenv("ASSAY_MAX_BODY_BYTES", "20MB")
    with pytest.raises(ValueError, match="ASSAY_MAX_BODY_BYTES='20MB': give a positive"):
        create_app(store, token="")


def test_evaluate_answers_cut_known_secret_values_out_of_evidence(store, monkeypatch):
    secret = "leak.Zz99secret@example.com"  # an e-mail value: compared EXACT, no model
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    client = TestClient(create_app(store, token=""), base_url="http://localhost")
    sample = {"response": "x", "output_json": {"k": secret}, "expected_json": {"k": secret}}
    response = client.post(
        "/api/evaluate", json={"samples": [sample], "metrics": ["json_accuracy"]}
    )
    assert response.status_code == 200 and secret not in response.text
    (field,) = response.json()["results"][0]["scores"]["json_accuracy"]["details"]["fields"]
    assert (field["expected"], field["output"], field["score"]) == ("[redacted]", "[redacted]", 1.0)


def test_a_bug_is_a_json_500_that_says_nothing_of_it(store, monkeypatch):
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("secret internals /etc/assay")

    monkeypatch.setattr(store, "runs", broken)
    client = TestClient(
        create_app(store, token=""), base_url="http://localhost", raise_server_exceptions=False
    )
    response = client.get("/api/runs")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"detail": INTERNAL_ERROR}
