"""No input gives a 500: hypothesis sends hostile requests to every API operation (taken
from the OpenAPI document, so a new endpoint is fuzzed too) and every answer must be a
4xx or 2xx whose body is standard JSON in the declared shape.

Hostile means: JSON nested 300-1000 levels deep, wrong types, integers of 5,000 digits,
1e309, NaN/Infinity tokens, invalid UTF-8 bytes, NUL characters, lone surrogates, very
long strings, look-alike letters, and path segments such as ``../``, ``%00`` or ``%ff``.
`benchmarks/api_fuzz.py` sends the same requests (and schemathesis' ones) over a real
uvicorn by the ten thousand.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.server import pages
from assay.server.app import create_app
from assay.store.db import Store

#: metrics cheap enough to score by the hundred (lexical, performance, agent, JSON)
CHEAP_METRICS = [
    "exact_match",
    "bleu",
    "rouge",
    "chrf",
    "citation_accuracy",
    "e2e_latency",
    "ttft",
    "throughput",
    "token_latency",
    "tool_call_count",
    "task_completion",
    "step_efficiency",
    "tool_usage_accuracy",
    "output_validity",
    "schema_compliance",
]
#: names that exist in the seeded store (so that some requests get past the 404)
SEEDED_RUN = "run-1"
SEEDED_CONFIG = "invoices"
#: what the request bodies' objects are keyed by: the API's and the samples' field names
FIELD_NAMES = [
    *("samples", "metrics", "suites", "suite", "store", "run_name", "tags"),
    *("gt", "expected", "output", "aio", "strategies", "config", "field_strategies"),
    *("fuzzy_threshold", "semantic_threshold", "safety_score", "weights", "flatten"),
    *("accuracy", "completeness", "hallucination", "safety", "total", "items.*.sku"),
    *sorted(Sample.model_fields),
]
STRATEGY_WORDS = ["EXACT", "fuzzy", "Ignore", "EXACT ", "ＥＸＡＣＴ", "ЕXACT", "SEMANTIC"]


@dataclass(frozen=True)
class Raw:
    """JSON text inserted as it is: tokens that ``json.dumps`` cannot write."""

    text: str


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    has_body: bool


@dataclass(frozen=True)
class HostileRequest:
    method: str
    url: str
    body: bytes | None

    def describe(self) -> str:
        return f"{self.method} {self.url[:200]} body={self.body[:200] if self.body else None!r}"


def deep_text(levels: int, opener: str = "[") -> str:
    """JSON nested ``levels`` deep, written as text (``json.dumps`` would recurse)."""
    if opener == "[":
        return "[" * levels + "1" + "]" * levels
    return '{"a":' * levels + "1" + "}" * levels


RAW_TOKENS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e309",
    "-1e309",
    "1e-400",
    "-0",
    "1" + "0" * 5000,  # 10**5000
    "-" + "9" * 4301,  # one digit past Python's int-from-text limit
    "1" + "0" * 400 + ".5",
    '"\\u0000"',
    '"a\\ud800b"',  # a lone surrogate: valid JSON, not encodable as UTF-8
    '"\\udfff\\ud800"',
    '"\\u202e\\u200bEXACT"',  # right-to-left override and zero-width space
]
HOSTILE_TEXTS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "../../etc/passwd",
    "..",
    "%00",
    "%ff",
    "${jndi:ldap://x}",
    "<script>alert(1)</script>",
    "'; DROP TABLE runs; --",
    "ЕXACT",  # Cyrillic Е
    "ｅｘａｃｔ",  # full-width
    "ﬁeld",  # ligature
    "a\u0301\u0301\u0301",
    "\u202e\u200b",
    "\ufeff",
    "🙂" * 50,
    "\\",
    "a.b\\.c",
    "*",
    "**.*",
    "x" * 100_000,
    "é" * 50_000,
]
hostile_texts = st.sampled_from(HOSTILE_TEXTS) | st.text(max_size=40)
#: a JSON leaf, legal or not
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_texts,
    st.sampled_from(STRATEGY_WORDS + CHEAP_METRICS),
    st.sampled_from(RAW_TOKENS).map(Raw),
    st.integers(min_value=300, max_value=1000).map(lambda n: Raw(deep_text(n))),
    st.integers(min_value=300, max_value=1000).map(lambda n: Raw(deep_text(n, "{"))),
)
keys = st.sampled_from(FIELD_NAMES) | hostile_texts
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=10,
)


def encode(value: Any) -> str:
    """JSON text of ``value``, `Raw` parts written as they are."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    return json.dumps(value)


def _shaped(
    names: list[str], values: st.SearchStrategy[Any] = json_values
) -> st.SearchStrategy[dict[str, Any]]:
    """An object with some of ``names`` as keys: the right shape, hostile values."""
    return st.dictionaries(st.sampled_from(names), values, max_size=len(names))


#: numbers at the edges: huge, tiny, negative, 1e308 (whose sum overflows)
edge_numbers = st.sampled_from([0, -1, 1e308, -1e308, 5e-324, 2**63, 10**30]) | st.floats(
    allow_nan=False, allow_infinity=False
)
#: sample field values by the field's type, hostile within that type (mostly)
BY_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "str | None": hostile_texts,
    "list[str] | None": st.lists(hostile_texts, max_size=3),
    "float | None": edge_numbers,
    "int | None": edge_numbers.map(lambda x: int(x) if abs(x) < 2**200 else x),
    "dict[str, str]": st.dictionaries(st.sampled_from(["method", "question_type"]), hostile_texts),
}
sample_fields = st.sampled_from(sorted(Sample.model_fields)).flatmap(
    lambda name: st.tuples(
        st.just(name),
        BY_TYPE.get(str(Sample.model_fields[name].annotation), json_values) | json_values,
    )
)
samples = st.lists(
    st.lists(sample_fields, max_size=6).map(dict) | json_values, min_size=1, max_size=3
)
#: bodies close enough to each endpoint's shape to get past the first check
evaluate_bodies = st.fixed_dictionaries(
    {"samples": samples},
    optional={
        "metrics": st.lists(st.sampled_from(CHEAP_METRICS), min_size=1, max_size=3) | json_values,
        "store": st.booleans() | json_values,
        "run_name": hostile_texts | json_values,
        "tags": st.dictionaries(hostile_texts, hostile_texts, max_size=3) | json_values,
    },
)
strategies_maps = st.dictionaries(
    st.sampled_from(["total", "items.*.sku", "a\\.b", "*"]) | hostile_texts,
    st.sampled_from(STRATEGY_WORDS[:-1]) | json_values,
    max_size=4,
)
json_eval_bodies = st.fixed_dictionaries(
    {"gt": json_values, "output": json_values},
    optional={
        "strategies": strategies_maps | json_values,
        "config": st.just(SEEDED_CONFIG) | json_values,
        "fuzzy_threshold": json_values,
        "weights": _shaped(["accuracy", "completeness", "hallucination", "safety"]),
        "flatten": json_values,
    },
).map(lambda body: {**body, "strategies": body.get("strategies", {"*": "EXACT"})})
#: OTLP JSON exports: ids and times valid, absent, of the wrong kind or absurd
span_ids = st.sampled_from(["5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "0" * 32])
span_times = st.sampled_from(["1796000000000000000", "5", "-1", "1e309", "9" * 30])
otlp_spans = st.fixed_dictionaries(
    {"traceId": span_ids | hostile_texts | json_values, "spanId": span_ids | json_values},
    optional={
        "parentSpanId": span_ids | json_values,
        "startTimeUnixNano": span_times | json_values,
        "endTimeUnixNano": span_times | json_values,
        "attributes": st.lists(
            st.fixed_dictionaries({"key": hostile_texts, "value": json_values}), max_size=3
        )
        | json_values,
        "status": json_values,
        "events": json_values,
    },
)
otlp_bodies = st.fixed_dictionaries(
    {
        "resourceSpans": st.lists(
            st.fixed_dictionaries(
                {
                    "resource": json_values,
                    "scopeSpans": st.lists(
                        st.fixed_dictionaries({"spans": st.lists(otlp_spans, max_size=3)}),
                        max_size=2,
                    ),
                }
            ),
            max_size=2,
        )
    }
)
BODIES: dict[str, st.SearchStrategy[Any]] = {
    "POST /api/evaluate": evaluate_bodies,
    "POST /api/json-eval": json_eval_bodies,
    "PUT /api/field-strategies/{name}": st.fixed_dictionaries({"strategies": strategies_maps}),
    "POST /api/field-strategies/{name}/import": strategies_maps
    | st.fixed_dictionaries({"field_strategies": strategies_maps}),
    "POST /v1/traces": otlp_bodies,
}


def corrupt(text: str, how: str, at: int) -> bytes:
    """``text`` as UTF-8 with one kind of damage at position ``at``."""
    data = text.encode("utf-8", "surrogatepass")
    at = at % (len(data) + 1)
    damage = {
        "none": b"",
        "invalid utf-8": b"\xff\xfe",
        "overlong nul": b"\xc0\x80",
        "nul byte": b"\x00",
        "bom": b"\xef\xbb\xbf",
    }
    if how == "truncate":
        return data[:at]
    return data[:at] + damage[how] + data[at:]


def bodies_for(operation: Operation) -> st.SearchStrategy[bytes]:
    """Request bodies for ``operation``: shaped or arbitrary JSON, maybe damaged bytes."""
    documents = BODIES.get(f"{operation.method} {operation.template}", json_values)
    texts = (documents | json_values).map(encode)
    how = st.sampled_from(["none"] * 6 + ["invalid utf-8", "overlong nul", "nul byte", "bom"])
    return st.builds(corrupt, texts, how | st.just("truncate"), st.integers(min_value=0))


#: path segments: traversal, NUL, invalid UTF-8, look-alikes, very long
path_segments = st.one_of(
    st.sampled_from([SEEDED_RUN, SEEDED_CONFIG]),
    st.sampled_from(["..", "%2e%2e", "..%2f..%2fetc", "%00", "a%00b", "%ff%fe", "%c0%80"]),
    st.sampled_from(["іnvoices", "invoices%20", "x" * 5000, "%2F", "a;b", "a?b"]).map(
        lambda s: s if "%" in s else quote(s, safe="")
    ),
    hostile_texts.filter(lambda s: len(s) < 2000).map(lambda s: quote(s, safe="")),
)
#: query values: numbers too big, too small, non-finite, of the wrong kind; raw bytes
QUERY_VALUES = [
    *("1" + "0" * 5000, "1e309", "-1e309", "nan", "NaN", "inf", "-inf", "Infinity"),
    *("-1", "0", "1e-400", "0x10", "1_000", "9" * 40, "24", "1", SEEDED_RUN),
    *("a:b=c", "run-1:method=x", "=", ":", "method=", "%ff", "%00", "%c0%80"),
]
query_values = st.sampled_from(QUERY_VALUES) | hostile_texts.filter(lambda s: len(s) < 10_000).map(
    lambda s: quote(s, safe="")
)


@st.composite
def hostile_requests(draw: st.DrawFn, operation: Operation) -> HostileRequest:
    """One hostile request for ``operation`` (its path, query and body all in play)."""
    path = operation.template
    for name in operation.path_params:
        path = path.replace("{" + name + "}", draw(path_segments))
    names = []
    if operation.query_params:
        names = draw(st.lists(st.sampled_from(operation.query_params), max_size=3))
    query = "&".join(f"{name}={draw(query_values)}" for name in names)
    url = f"{path}?{query}" if query else path
    body = draw(bodies_for(operation)) if operation.has_body else None
    return HostileRequest(operation.method, url, body)


def api_operations(app: Any) -> list[Operation]:
    """Every operation of the app's OpenAPI document."""
    out = []
    for template, item in app.openapi()["paths"].items():
        for method, spec in item.items():
            params = spec.get("parameters", [])
            out.append(
                Operation(
                    method=method.upper(),
                    template=template,
                    path_params=tuple(p["name"] for p in params if p["in"] == "path"),
                    query_params=tuple(p["name"] for p in params if p["in"] == "query"),
                    has_body="requestBody" in spec,
                )
            )
    return out


def seed_store(store: Store) -> None:
    """A few runs with tags, missing values and extreme ones, and one field config."""
    store.put_strategy_config(SEEDED_CONFIG, {"total": "EXACT", "items.*.sku": "FUZZY"})
    for run_id, latency in ((SEEDED_RUN, 1e308), ("run-2", 12.5)):
        store.start_run(run_id, name=f"<b>{run_id}</b>", metrics=["exact_match", "e2e_latency"])
        for i in range(3):
            sample = Sample(
                id=f"s{i}",
                query="q\x00",
                response="a" * i,
                tags={"method": ["basic", "local"][i % 2], "question_type": "fact"},
            )
            scores = {
                "exact_match": MetricResult("exact_match", None if i == 0 else i % 2),
                "e2e_latency": MetricResult("e2e_latency", latency, method="measurement"),
            }
            store.record(run_id, i, sample, scores, status="passed" if i else "failed")
        store.finish_run(run_id, status="finished")


def strict_json(text: str) -> Any:
    """Parse as standard JSON: NaN, Infinity and -Infinity tokens are refused."""

    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def check_response(status: int, content_type: str, text: str) -> None:
    """Below 500, standard JSON (but for an empty 204 or redirect), and an error in its
    declared shape: 422 as
    ``{"detail": [{"loc", "msg", "type"}]}``, any other error as ``{"detail": "..."}``."""
    assert status < 500, text[:500]
    if status == 204 or 300 <= status < 400:  # no content; a trailing-slash redirect
        assert text == ""
        return
    assert content_type.startswith("application/json"), content_type
    body = strict_json(text)
    if status == 422:
        assert isinstance(body, dict) and list(body) == ["detail"], text[:500]
        assert body["detail"], text[:500]
        for item in body["detail"]:
            assert sorted(item) == ["loc", "msg", "type"], item
            assert isinstance(item["loc"], list) and isinstance(item["msg"], str)
            assert isinstance(item["type"], str)
    elif status >= 400:
        assert isinstance(body, dict) and list(body) == ["detail"], text[:500]
        assert isinstance(body["detail"], str) and body["detail"]


# ---- the tests ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    store = Store(str(tmp_path_factory.mktemp("fuzz") / "fuzz.db"))
    seed_store(store)
    app = create_app(store, token="", max_samples=5)
    return TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False)


def _send(client: TestClient, request: HostileRequest) -> None:
    headers = {"Content-Type": "application/json"} if request.body is not None else {}
    response = client.request(request.method, request.url, content=request.body, headers=headers)
    try:
        check_response(
            response.status_code, response.headers.get("content-type", ""), response.text
        )
    except AssertionError as exc:
        raise AssertionError(f"{request.describe()}\n-> {response.status_code}: {exc}") from None


OPERATIONS = api_operations(create_app(Store("sqlite://"), token=""))
FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_every_api_operation_is_fuzzed() -> None:
    assert {f"{o.method} {o.template}" for o in OPERATIONS} >= set(BODIES) | {
        "GET /api/statistics",
        "GET /api/runs",
        "GET /api/runs/{run_id}",
        "GET /api/runs/{run_id}/groups",
        "GET /api/runs/{run_id}/samples/{index}",
        "GET /api/history",
        "GET /api/compare",
        "GET /api/metrics",
        "GET /api/field-strategies",
        "GET /api/field-strategies/{name}",
        "DELETE /api/field-strategies/{name}",
        "GET /api/field-strategies/{name}/export",
        "GET /api/runs/{run_id}/label-queue",
        "GET /api/runs/{run_id}/labels",
        "POST /api/runs/{run_id}/labels",
        "DELETE /api/runs/{run_id}/labels/{label_id}",
        "GET /api/runs/{run_id}/agreement",
    }
    assert len(OPERATIONS) == 23


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda o: f"{o.method} {o.template}")
def test_hostile_requests_never_get_a_5xx(client: TestClient, operation: Operation) -> None:
    @FUZZ
    @given(request=hostile_requests(operation))
    def check(request: HostileRequest) -> None:
        _send(client, request)

    check()


def test_check_response_refuses_what_it_should() -> None:
    with pytest.raises(AssertionError):
        check_response(500, "application/json", '{"detail": "boom"}')
    with pytest.raises(ValueError, match="NaN"):
        check_response(200, "application/json", '{"x": NaN}')
    with pytest.raises(AssertionError):
        check_response(404, "application/json", '{"detail": "x", "input": "echo"}')
    with pytest.raises(AssertionError):
        check_response(422, "application/json", '{"detail": [{"loc": [], "msg": "m"}]}')
    check_response(422, "application/json", '{"detail": [{"loc": [], "msg": "m", "type": "t"}]}')


def test_encode_writes_the_tokens_json_dumps_cannot() -> None:
    text = encode({"a": [Raw("NaN"), Raw("1" + "0" * 5000)], "b": Raw(deep_text(300))})
    assert text.startswith('{"a":[NaN,10000') and text.endswith("1" + "]" * 300 + "}")
    assert corrupt("abc", "invalid utf-8", 1) == b"a\xff\xfebc"
    assert corrupt("abc", "truncate", 2) == b"ab"


PAGE_DATA = re.compile(r'<script type="application/json" id="page-data">(.*?)</script>', re.S)
#: a non-finite number where the pages put numbers (reflected query text may say "nan")
NON_FINITE_NUMBER = re.compile(r'(?i)data-(?:value|trend)="-?(?:inf|nan)')


def page_operations() -> list[Operation]:
    """Every dashboard page (not in the OpenAPI document), with its parameters."""
    return [
        Operation(
            method="GET",
            template=route.path,
            path_params=tuple(p.name for p in route.dependant.path_params),
            query_params=tuple(p.name for p in route.dependant.query_params),
            has_body=False,
        )
        for route in pages.router.routes
        if isinstance(route, APIRoute)
    ]


@pytest.mark.parametrize("operation", page_operations(), ids=lambda o: o.template)
def test_hostile_page_requests_never_get_a_5xx(client: TestClient, operation: Operation) -> None:
    @settings(FUZZ, max_examples=25)
    @given(request=hostile_requests(operation))
    def check(request: HostileRequest) -> None:
        response = client.get(request.url)
        assert response.status_code < 500, request.describe()
        if response.headers["content-type"].startswith("text/html"):
            assert NON_FINITE_NUMBER.findall(response.text) == [], request.describe()
            for block in PAGE_DATA.findall(response.text):
                strict_json(block)
        else:
            check_response(response.status_code, response.headers["content-type"], response.text)

    check()


# ---- what the fuzzing found (each was a 500) ----------------------------------------------
SURROGATE = b'"a\\ud800b"'


@pytest.mark.parametrize(
    ("method", "url", "body", "loc"),
    [
        ("PUT", "/api/field-strategies/lone", b'{"strategies": {%s: "EXACT"}}', ["body"]),
        ("POST", "/api/field-strategies/lone/import", b'{"total": "EXACT", %s: "FUZZY"}', ["body"]),
        (
            "POST",
            "/api/evaluate",
            b'{"samples": [{"response": "ok"}, {"response": %s}], "store": true}',
            ["body", "samples", 1, "response"],
        ),
        (
            "POST",
            "/api/evaluate",
            b'{"samples": [{"response": "ok", "tags": {"method": %s}}], "store": true}',
            ["body", "samples", 0, "tags", "method"],
        ),
    ],
)
def test_a_lone_surrogate_is_a_422_before_anything_is_stored(
    client: TestClient, method: str, url: str, body: bytes, loc: list[Any]
) -> None:
    runs_before = client.get("/api/runs").json()
    response = client.request(
        method, url, content=body % SURROGATE, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    (item,) = response.json()["detail"]
    assert item["loc"] == loc and item["type"] == "string_unicode"
    assert "lone surrogate" in item["msg"]
    assert client.get("/api/field-strategies/lone").status_code == 404
    assert client.get("/api/runs").json() == runs_before


def test_json_eval_answers_lone_surrogates_as_valid_utf8(client: TestClient) -> None:
    body = b'{"gt": {"name": %s}, "output": {"name": %s}, "strategies": {"*": "EXACT"}}'
    response = client.post(
        "/api/json-eval",
        content=body % (SURROGATE, SURROGATE),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 200
    assert response.content.decode("utf-8")  # valid UTF-8: no surrogate written
    assert response.json()["accuracy"] == 1.0
    assert "a\ufffdb" in response.text


@pytest.mark.parametrize("levels", [300, 450])
def test_json_eval_answers_deeply_nested_documents(client: TestClient, levels: int) -> None:
    deep = deep_text(levels, "{")
    body = f'{{"gt": {deep}, "output": {deep}, "flatten": false}}'
    response = client.post(
        "/api/json-eval", content=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text[:300]
    assert strict_json(response.text)["accuracy"] == 1.0
