"""Monitors of live runs: rules read as hours close, stored states, a real webhook
server receiving the changes, and the dashboard showing them."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fastapi.testclient import TestClient

from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.server.app import create_app
from assay.server.live_scoring import LiveScoring
from assay.store.db import Store
from assay.store.live_monitors import LiveMonitors, Monitor, closed_hour, parse_monitors
from assay.store.live_traces import live_run_id
from assay.store.models import utcnow

KNOWN = {"faithfulness", "e2e_latency"}.__contains__
SECRET_PATH = "hooks/T0001/s3cr3t-hook-path"


def test_rules_read_as_written_and_bad_ones_say_why() -> None:
    rules = parse_monitors("mean(faithfulness) < 0.7; timeout_rate > 5% ;  traces<1", KNOWN)
    assert rules == [
        Monitor("mean(faithfulness) < 0.7", "mean", "faithfulness", "<", 0.7),
        Monitor("timeout_rate > 5%", "timeout_rate", None, ">", 0.05),
        Monitor("traces<1", "traces", None, "<", 1.0),
    ]
    assert rules[0].fires(0.69) and not rules[0].fires(0.7)
    with pytest.raises(ValueError, match="does not read: write STATISTIC OP NUMBER"):
        parse_monitors("faithfulness below 0.7", KNOWN)
    with pytest.raises(ValueError, match="does not read"):
        parse_monitors("latency_rate > 1", KNOWN)
    with pytest.raises(ValueError, match="no metric named 'faithfulnes'"):
        parse_monitors("mean(faithfulnes) < 0.7", KNOWN)


def _live_run(store: Store, service: str, hour: datetime, samples: list[tuple]) -> str:
    """A live run with (latency ms, duration s, status) samples stored inside ``hour``."""
    run_id = live_run_id(service)
    store.start_run(run_id, name=f"live/{service}", source="live", metrics=["e2e_latency"])
    for i, (latency, duration, status) in enumerate(samples):
        result = MetricResult("e2e_latency", latency, method="measurement")
        store.record(
            run_id,
            i,
            Sample(id=f"t{i}", response="a", duration=duration),
            {"e2e_latency": result},
            status=status,
            timestamp=hour + timedelta(minutes=10 + i),
        )
    return run_id


def test_each_rule_is_read_on_each_live_run_for_the_closed_hour(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'm.db'}")
    hour = datetime(2026, 11, 27, 9)
    # latencies 100 and 300 ms (mean 200, p95 290), durations 1 s and 45 s (one timeout)
    _live_run(store, "bot", hour, [(100.0, 1.0, "passed"), (300.0, 45.0, "failed")])
    rules = "mean(e2e_latency) > 150; p95(e2e_latency) >= 290; timeout_rate > 60%; "
    rules += "pass_rate < 0.6; traces < 1"
    monitors = LiveMonitors(store, parse_monitors(rules, KNOWN))
    changes = monitors.evaluate(hour)
    assert [(c.monitor, c.state, c.previous, c.value) for c in changes] == [
        ("mean(e2e_latency) > 150", "firing", None, 200.0),
        ("p95(e2e_latency) >= 290", "firing", None, pytest.approx(290.0)),
        ("timeout_rate > 60%", "ok", None, 0.5),
        ("pass_rate < 0.6", "firing", None, 0.5),
        ("traces < 1", "ok", None, 2.0),
    ]
    assert monitors.evaluate(hour) == []  # an hour is read once
    # the next hour holds nothing: the statistics of values have no data, and no traces
    later = monitors.evaluate(hour + timedelta(hours=1))
    assert [(c.monitor, c.state, c.previous) for c in later] == [
        ("mean(e2e_latency) > 150", "no_data", "firing"),
        ("p95(e2e_latency) >= 290", "no_data", "firing"),
        ("timeout_rate > 60%", "no_data", "ok"),
        ("pass_rate < 0.6", "no_data", "firing"),
        ("traces < 1", "firing", "ok"),
    ]
    store.close()


class _Hooks(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        _Hooks.received.append((self.path, json.loads(body)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_state_change_is_posted_to_the_webhook_and_shown_without_its_secret(
    tmp_path: Path,
) -> None:
    hooks = ThreadingHTTPServer(("127.0.0.1", 0), _Hooks)
    threading.Thread(
        target=hooks.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    url = f"http://127.0.0.1:{hooks.server_port}/{SECRET_PATH}"
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    previous = closed_hour(utcnow())
    run_id = _live_run(store, "bot", previous, [(100.0, 1.0, "passed"), (300.0, 2.0, "passed")])
    config = AssayConfig(
        cache_dir=str(tmp_path), live_monitors="mean(e2e_latency) > 150", live_webhook=url
    )
    resources = Resources(config)
    live = LiveScoring(store, config, [], resources)
    _Hooks.received.clear()
    assert [c.state for c in live.read_monitors()] == ["firing"]
    assert live.read_monitors() == []
    assert live.webhooks is not None and live.webhooks.flush(10)  # sent in the background
    hooks.shutdown()
    hooks.server_close()
    assert _Hooks.received == [
        (
            f"/{SECRET_PATH}",
            {
                "monitor": "mean(e2e_latency) > 150",
                "service": "bot",
                "run_id": run_id,
                "state": "firing",
                "previous": None,
                "value": 200.0,
                "hour": previous.isoformat(),
            },
        )
    ]
    client = TestClient(create_app(store, live=live), base_url="http://127.0.0.1")
    status = client.get("/api/live").json()
    assert status["webhook"] == "http://127.0.0.1/…"
    assert [(m["monitor"], m["state"], m["value"]) for m in status["monitors"]] == [
        ("mean(e2e_latency) > 150", "firing", 200.0)
    ]
    page = client.get("/").text
    assert 'id="live-monitors"' in page and "firing" in page
    assert SECRET_PATH not in page and SECRET_PATH not in json.dumps(status)
    # a webhook that cannot be reached is an error the status says, without its path
    live._hour_read = None
    store.record(
        run_id,
        5,
        Sample(id="t5", response="a"),
        {"e2e_latency": MetricResult("e2e_latency", 10.0, method="measurement")},
        status="passed",
        timestamp=previous + timedelta(hours=1, minutes=1),
    )
    assert [c.state for c in live.read_monitors(now_offset=3600)] == ["ok"]
    assert live.webhooks.flush(10)
    assert live.webhooks.counts == {
        "waiting": 0,
        "sent": 1,
        "failed": 1,
        "dropped": 0,
        "limit": 100,
    }
    assert "the monitor webhook (http://127.0.0.1/…) failed" in (live.last_error or "")
    assert SECRET_PATH not in (live.last_error or "")
    resources.close()
    store.close()


def test_serve_refuses_a_rule_that_does_not_read(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    result = CliRunner().invoke(
        app,
        ["serve", "--db", f"sqlite:///{tmp_path / 's.db'}", "--live-monitor", "faith < x"],
    )
    assert result.exit_code == 2
    assert "monitor 'faith < x' does not read" in " ".join(result.output.split())


def test_the_live_table_of_the_project_file_sets_the_live_settings(tmp_path: Path) -> None:
    from assay.core.config import ConfigError, load_config

    (tmp_path / "pyproject.toml").write_text(
        "[tool.assay.live]\n"
        'metrics = ["faithfulness", "e2e_latency"]\n'
        'monitors = ["mean(faithfulness) < 0.7", "timeout_rate > 5%"]\n'
        "grace_seconds = 5\n"
        "sample_rate = 0.25\n",
        encoding="utf-8",
    )
    config = load_config(project_dir=tmp_path)
    assert (config.live_metrics, config.live_grace_seconds, config.live_sample_rate) == (
        "faithfulness,e2e_latency",
        5.0,
        0.25,
    )
    assert [m.text for m in parse_monitors(config.live_monitors, KNOWN)] == [
        "mean(faithfulness) < 0.7",
        "timeout_rate > 5%",
    ]
    (tmp_path / "pyproject.toml").write_text("[tool.assay]\nlive = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'live' must be a table: \[tool.assay.live\]"):
        load_config(project_dir=tmp_path)


class _Silent:
    """A webhook that accepts connections, reads the requests and never answers."""

    def __init__(self) -> None:
        import socket

        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held: list[Any] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


def test_a_webhook_that_never_answers_does_not_delay_scoring(tmp_path: Path) -> None:
    """Before: each state change was POSTed on the worker thread, 5 s each; with 3 rules,
    2 services and a silent webhook nothing was scored for 30 s."""
    import time

    from test_live import _export, _span

    silent = _Silent()
    store = Store(f"sqlite:///{tmp_path / 'slow.db'}")
    previous = closed_hour(utcnow())
    for service in ("bot", "helper"):
        _live_run(store, service, previous, [(100.0, 1.0, "passed"), (300.0, 2.0, "passed")])
    config = AssayConfig(
        cache_dir=str(tmp_path),
        live_grace_seconds=0,
        live_monitors="mean(e2e_latency) > 150; traces < 5; timeout_rate > 5%",
        live_webhook=f"http://127.0.0.1:{silent.port}/{SECRET_PATH}",
    )
    resources = Resources(config)
    live = LiveScoring(store, config, [], resources)
    client = TestClient(create_app(store, live=live), base_url="http://127.0.0.1")
    trace = "5b8efff798038103d269b633813fc60c"
    body = _export(_span(trace, "eee19b7ec3c1b174"), service="bot")
    assert client.post("/v1/traces", content=body, headers={"content-type": "application/json"})
    started = time.monotonic()
    assert len(live.read_monitors()) == 6  # 3 rules on 2 services, all queued
    assert live.run_once(now_offset=1) == 1
    assert time.monotonic() - started < 1.0
    deadline = time.monotonic() + 5
    while live.webhooks.counts["waiting"] != 6 or not silent.held:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert live.webhooks.counts == {
        "waiting": 6,
        "sent": 0,
        "failed": 0,
        "dropped": 0,
        "limit": 100,
    }
    live.stop(timeout=0.1)
    silent.close()
    resources.close()
    store.close()


def test_a_full_webhook_queue_drops_the_oldest_change_and_counts_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import time

    from assay.server.live_webhook import WebhookQueue

    silent = _Silent()
    queue = WebhookQueue(f"http://127.0.0.1:{silent.port}/hook", "http://127.0.0.1/…", limit=2)
    queue.send({"monitor": "m0", "service": "s"})
    deadline = time.monotonic() + 5
    while not silent.held:  # the first change is in flight, waiting for an answer
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with caplog.at_level("WARNING", logger="assay.live"):
        for i in range(1, 5):
            queue.send({"monitor": f"m{i}", "service": "s"})
    assert queue.counts == {"waiting": 3, "sent": 0, "failed": 0, "dropped": 2, "limit": 2}
    assert [r.getMessage() for r in caplog.records] == [
        "the monitor webhook (http://127.0.0.1/…) is behind: 2 changes waiting; dropped the "
        f"oldest (m{i} on s), {i} dropped in all"
        for i in (1, 2)
    ]
    assert [p["monitor"] for p in queue._waiting] == ["m3", "m4"]
    queue.close(timeout=0.1)
    silent.close()


def test_no_monitor_state_before_a_service_first_traces(tmp_path: Path) -> None:
    """Before: a 'traces < 1' rule fired at start-up for the hour before any service
    existed, and called the webhook."""
    hooks = ThreadingHTTPServer(("127.0.0.1", 0), _Hooks)
    threading.Thread(
        target=hooks.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    store = Store(f"sqlite:///{tmp_path / 'first.db'}")
    now = utcnow()
    this_hour = closed_hour(now) + timedelta(hours=1)
    run_id = _live_run(store, "new", this_hour, [])
    store.record(run_id, 0, Sample(id="t0", response="a"), {}, status="passed", timestamp=now)
    config = AssayConfig(
        cache_dir=str(tmp_path),
        live_monitors="traces < 1",
        live_webhook=f"http://127.0.0.1:{hooks.server_port}/hook",
    )
    resources = Resources(config)
    live = LiveScoring(store, config, [], resources)
    _Hooks.received.clear()
    assert live.read_monitors() == []  # the hour before the first trace: no state at all
    assert live.webhooks.flush(10)
    client = TestClient(create_app(store, live=live), base_url="http://127.0.0.1")
    assert client.get("/api/live").json()["monitors"] == []
    # the hour of the first trace, once closed, is read: one trace, the rule holds
    changes = live.read_monitors(now_offset=3600)
    assert [(c.monitor, c.state, c.previous, c.value) for c in changes] == [
        ("traces < 1", "ok", None, 1.0)
    ]
    assert live.webhooks.flush(10)
    hooks.shutdown()
    hooks.server_close()
    assert [(path, body["state"]) for path, body in _Hooks.received] == [("/hook", "ok")]
    live.stop()
    resources.close()
    store.close()


def test_a_rule_on_a_metric_not_scored_is_warned_at_start_and_shown(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'warn.db'}")
    config = AssayConfig(
        cache_dir=str(tmp_path), live_monitors="mean(faithfulness) < 0.7; traces < 1"
    )
    resources = Resources(config)
    from assay.metrics.registry import resolve_metrics

    live = LiveScoring(store, config, resolve_metrics(["e2e_latency"]), resources)
    warning = (
        "monitor 'mean(faithfulness) < 0.7' reads 'faithfulness', which live scoring does "
        "not score (the live metrics: e2e_latency): it will stay without data; add "
        "faithfulness to --live-metrics"
    )
    assert live.warnings == [warning]
    client = TestClient(create_app(store, live=live), base_url="http://127.0.0.1")
    assert client.get("/api/live").json()["warnings"] == [warning]
    page = client.get("/").text
    assert 'id="live-warnings"' in page
    assert "reads &#39;faithfulness&#39;, which live scoring does not score" in page
    resources.close()
    store.close()


def test_serve_warns_at_start_of_a_rule_on_a_metric_not_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from assay.cli import app

    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)  # start, then stop
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(tmp_path / "cache"))
    rules = ["--live-monitor", "mean(faithfulness) < 0.7", "--live-monitor", "traces < 1"]
    db = f"sqlite:///{tmp_path / 'w.db'}"
    result = CliRunner().invoke(app, ["serve", "--db", db, "--live-metrics", "e2e_latency", *rules])
    assert result.exit_code == 0, result.output
    assert (
        "warning: monitor 'mean(faithfulness) < 0.7' reads 'faithfulness', which live "
        "scoring does not score (the live metrics: e2e_latency): it will stay without data; "
        "add faithfulness to --live-metrics"
    ) in " ".join(result.output.split())
