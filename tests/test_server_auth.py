"""The API's token and ``assay serve``: every write route needs the Bearer token (missing,
wrong or Basic is a 401), deletes too while reads stay open, the token may come from the
environment and no token means open writes; serve refuses a public bind without a token,
binds with one or on loopback, and answers only the hosts it is given."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from assay.server import create_app
from assay.store.db import Store

pytest_plugins = ["browser_conftest", "tests.server_api_helpers"]
pytest.register_assert_rewrite("browser_conftest", "tests.server_api_helpers")

from tests.server_api_helpers import JSON  # noqa: E402

TOKEN = "s3cret-token"


# ---- auth ------------------------------------------------------------------------------
@pytest.fixture()
def token_client(tmp_path: Any) -> TestClient:
    return TestClient(
        create_app(Store(str(tmp_path / "auth.db")), token=TOKEN), base_url="http://localhost"
    )


WRITES = (
    ("put", "/api/field-strategies/a", {"json": {"strategies": {"x": "EXACT"}}}),
    ("post", "/api/field-strategies/a/import", {"content": b'{"x": "EXACT"}', "headers": JSON}),
    ("post", "/api/json-eval", {"json": {"gt": {"x": 1}, "output": {"x": 1}}}),
    ("post", "/api/evaluate", {"json": {"samples": [{"answer": "a"}], "metrics": ["bleu"]}}),
    ("post", "/v1/traces", {"content": b'{"resourceSpans": []}', "headers": JSON}),
)


@pytest.mark.parametrize(("method", "path", "kwargs"), WRITES)
def test_writes_need_the_token(
    token_client: TestClient, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    kwargs = dict(kwargs)
    base = kwargs.pop("headers", {})

    def send(headers: dict[str, str] | None = None) -> Any:
        return getattr(token_client, method)(path, headers={**base, **(headers or {})}, **kwargs)

    missing = send()
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = send({"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    basic = send({"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    ok = send({"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200, ok.text


def test_every_write_route_is_covered_by_the_token_tests(client: TestClient) -> None:
    import re

    from assay.server.app import WRITE_METHODS

    paths = client.get("/openapi.json").json()["paths"]
    routes = {
        (method, path)
        for path, operations in paths.items()
        for method in operations
        if method.upper() in WRITE_METHODS
    }
    covered = {(m, re.sub(r"/a(?=/|$)", "/{name}", p)) for m, p, _ in WRITES}
    # the labels' writes: test_label_queue.py::test_writes_are_guarded_like_every_write
    labels = {
        ("post", "/api/runs/{run_id}/labels"),
        ("delete", "/api/runs/{run_id}/labels/{label_id}"),
    }
    assert routes == covered | labels | {("delete", "/api/field-strategies/{name}")}


def test_delete_needs_the_token_and_reads_stay_open(token_client: TestClient) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    token_client.put("/api/field-strategies/a", json={"strategies": {"x": "EXACT"}}, headers=auth)
    assert token_client.delete("/api/field-strategies/a").status_code == 401
    for path in ("/api/statistics", "/api/runs", "/api/field-strategies/a", "/", "/runs"):
        assert token_client.get(path).status_code == 200, path
    assert token_client.delete("/api/field-strategies/a", headers=auth).status_code == 204


def test_token_from_environment(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_API_TOKEN", "from-env")
    client = TestClient(create_app(Store(str(tmp_path / "env.db"))), base_url="http://localhost")
    body = {"strategies": {"x": "EXACT"}}
    assert client.put("/api/field-strategies/a", json=body).status_code == 401
    ok = client.put(
        "/api/field-strategies/a", json=body, headers={"Authorization": "Bearer from-env"}
    )
    assert ok.status_code == 200


def test_no_token_means_open_writes(fresh_client: TestClient) -> None:
    put = fresh_client.put("/api/field-strategies/a", json={"strategies": {"x": "EXACT"}})
    assert put.status_code == 200


# ---- assay serve ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    from assay.cli.serve import is_loopback

    assert is_loopback(host) is loopback


def test_serve_refuses_public_bind_without_token(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from assay.cli import app

    monkeypatch.delenv("ASSAY_API_TOKEN", raising=False)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    db = str(tmp_path / "serve.db")
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--db", db])
    assert result.exit_code == 2
    assert "ASSAY_API_TOKEN" in result.output
    assert calls == []


def test_serve_binds_with_token_or_on_loopback(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from assay.cli import app

    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    db = str(tmp_path / "serve.db")
    monkeypatch.delenv("ASSAY_API_TOKEN", raising=False)
    local = CliRunner().invoke(app, ["serve", "--db", db, "--port", "8123"])
    assert local.exit_code == 0, local.output
    assert calls[-1][1]["host"] == "127.0.0.1"
    assert calls[-1][1]["port"] == 8123
    assert calls[-1][0].state.api_token is None
    monkeypatch.setenv("ASSAY_API_TOKEN", "t0k")
    public = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--db", db])
    assert public.exit_code == 0, public.output
    assert calls[-1][1]["host"] == "0.0.0.0"
    assert calls[-1][0].state.api_token == "t0k"


def test_serve_answers_the_hosts_given_with_allowed_host(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from assay.cli import app

    calls: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(app))
    monkeypatch.delenv("ASSAY_ALLOWED_HOSTS", raising=False)
    db = str(tmp_path / "serve.db")
    result = CliRunner().invoke(app, ["serve", "--db", db, "--allowed-host", "evals.example.org"])
    assert result.exit_code == 0, result.output
    client = TestClient(calls[-1], base_url="http://127.0.0.1")
    assert client.get("/api/runs", headers={"Host": "evals.example.org"}).status_code == 200
    assert client.get("/api/runs", headers={"Host": "localhost:8000"}).status_code == 200
    assert client.get("/api/runs", headers={"Host": "rebind.attacker.test"}).status_code == 400
