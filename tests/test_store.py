"""The results store on a real SQLite file and on the real PostgreSQL server."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import timedelta

import pytest

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.store.db import Store
from assay.store.models import utcnow
from pg_databases import fresh_postgres
from store_revisions import head_revision, store_at_revision, stored_revisions


def _postgres_store():
    fresh = fresh_postgres("assay_test")
    store = Store(fresh.__enter__())

    def drop():
        store.close()
        fresh.__exit__(None, None, None)

    return store, drop


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = Store(str(tmp_path / "assay.db"))
        yield s
        s.close()
    else:
        s, drop = _postgres_store()
        yield s
        drop()


def r(name, value, **details):
    return MetricResult(name=name, value=value, details=details)


def _seed_four(store, run_id="run1", when=None):
    store.start_run(run_id, metrics=["output_stability", "output_validity", "e2e_latency"])
    rows = [
        ("passed", 1.0, {"output_stability": 0.8, "output_validity": 1.0, "e2e_latency": 1000.0}),
        ("passed", 2.0, {"output_stability": 0.6, "output_validity": 0.5, "e2e_latency": 1400.0}),
        ("failed", 40.0, {"output_stability": None, "schema_compliance": None}),
        ("skipped", None, {}),
    ]
    for i, (status, duration, values) in enumerate(rows):
        store.record(
            run_id,
            i,
            Sample(id=f"s{i}", query="q", response=f"answer {i}"),
            {k: r(k, v) for k, v in values.items()},
            status=status,
            duration=duration,
            timestamp=when,
        )


def test_statistics_follow_the_chatbot_hub_formulas(store):
    _seed_four(store)
    stats = store.statistics()
    assert (stats["total"], stats["passed"], stats["failed"], stats["skipped"]) == (4, 2, 1, 1)
    assert stats["pass_rate"] == pytest.approx(50.0)  # 2 / 4
    assert stats["avg_duration"] == pytest.approx(43.0 / 3)  # AVG skips the NULL duration
    assert stats["timeout_rate"] == pytest.approx(50.0)  # 40 s > 30 s, and one skipped
    metrics = stats["metrics"]
    assert metrics["output_stability"]["avg"] == pytest.approx(0.7)
    assert metrics["output_stability"]["count"] == 2  # the None value is skipped, not 0
    assert metrics["output_stability"]["display"] == pytest.approx(70.0)
    assert metrics["e2e_latency"]["display"] == pytest.approx(1200.0)  # ms kept, not x100
    assert "schema_compliance" not in metrics  # only None values: HAVING count > 0
    # reliability = (0.7 + 0.75) / 2 = 0.725; health = (50 + 72.5) / 2
    assert stats["health"] == pytest.approx(61.25)


def test_trends_compare_the_last_24_hours_with_the_24_before(store):
    now = utcnow()
    store.start_run("r")
    sample = Sample(response="x")
    store.record(
        "r", 0, sample, {}, status="passed", duration=2.0, timestamp=now - timedelta(hours=1)
    )
    store.record(
        "r", 1, sample, {}, status="passed", duration=1.0, timestamp=now - timedelta(hours=30)
    )
    store.record(
        "r", 2, sample, {}, status="failed", duration=1.0, timestamp=now - timedelta(hours=31)
    )
    trends = store.statistics()["trends"]
    assert trends["satisfaction"] == pytest.approx(100.0)  # pass rate 100 % vs 50 %
    assert trends["duration"] == pytest.approx(100.0)  # 2 s vs 1 s
    assert trends["health"] == pytest.approx(100.0)  # health = pass rate without reliability


def test_history_buckets_by_hour(store):
    base = utcnow().replace(minute=10, second=0, microsecond=0) - timedelta(hours=3)
    store.start_run("h")
    s = Sample(response="x")
    store.record(
        "h",
        0,
        s,
        {"output_validity": r("output_validity", 1.0)},
        status="passed",
        duration=1.0,
        timestamp=base,
    )
    store.record(
        "h",
        1,
        s,
        {"output_validity": r("output_validity", 0.5)},
        status="failed",
        duration=3.0,
        timestamp=base + timedelta(minutes=20),
    )
    store.record("h", 2, s, {}, status="passed", duration=5.0, timestamp=base + timedelta(hours=1))
    store.finish_run("h")  # metric history comes from the run's snapshots (chatbot hub)
    hist = store.history(hours=6)
    assert [(b["total"], b["passed"], b["avg_duration"]) for b in hist["tests"]] == [
        (2, 1, 2.0),
        (1, 1, 5.0),
    ]
    assert hist["tests"][0]["bucket"] == base.strftime("%Y-%m-%d %H:00:00")
    (point,) = hist["metrics"]["output_validity"]
    assert point["avg"] == pytest.approx(0.75) and point["display"] == pytest.approx(75.0)
    assert store.history(hours=6, metric_type="agent")["metrics"] == {}


def test_untrusted_text_is_stored_verbatim(store):
    nasty = "'); DROP TABLE runs; -- <script>alert(1)</script>"
    store.start_run("x")
    store.record(
        "x", 0, Sample(id=nasty, response=nasty), {"m": r("m", 0.5, note=nasty)}, status="passed"
    )
    detail = store.run_detail("x")
    (sample,) = detail["samples"]
    assert sample["response"] == nasty and sample["id"] == nasty
    assert sample["scores"]["m"]["details"] == {"note": nasty}
    assert [run["id"] for run in store.runs()] == ["x"]


def test_all_time_averages_combine_finished_totals_and_live_runs(store):
    _seed_four(store, "done")
    store.finish_run("done")
    store.start_run("live")
    store.record(
        "live", 0, Sample(id="x"), {"output_stability": r("output_stability", 0.1)}, status="passed"
    )
    # (0.8 + 0.6 + 0.1) / 3 over the finished run's totals and the live run's rows
    assert store.statistics()["metrics"]["output_stability"]["avg"] == pytest.approx(0.5)
    assert store.statistics()["metrics"]["output_stability"]["count"] == 3
    store.start_run("done")  # resumed: its totals are dropped, its rows are read live
    assert store.statistics()["metrics"]["output_stability"]["avg"] == pytest.approx(0.5)


def test_resume_knows_what_is_stored_and_snapshots_on_finish(store):
    _seed_four(store, "run9")
    assert store.done_indices("run9") == {0, 1, 2, 3}
    store.finish_run("run9")
    (run,) = store.runs()
    assert run["status"] == "finished" and run["samples"] == 4 and run["pass_rate"] == 50.0
    from assay.store.models import MetricSnapshot

    with store.session() as session:
        snaps = {s.metric_name: s.metric_value for s in session.query(MetricSnapshot)}
    assert snaps == {
        "output_stability": pytest.approx(0.7),
        "output_validity": pytest.approx(0.75),
        "e2e_latency": pytest.approx(1200.0),
    }


def test_compare_pairs_samples_by_id(store):
    for run_id, values in (("a", [0.5, 0.6, 0.7, 0.8, 0.9]), ("b", [0.6, 0.7, 0.8, 0.9, 1.0])):
        store.start_run(run_id)
        for i, v in enumerate(values):
            store.record(run_id, i, Sample(id=f"q{i}"), {"m": r("m", v)}, status="passed")
    (row,) = store.compare("a", "b")
    assert row["paired"] and row["n_pairs"] == 5
    assert row["diff"] == pytest.approx(0.1)
    assert row["ci_low"] == pytest.approx(0.1) and row["ci_high"] == pytest.approx(0.1)
    # every paired difference is +0.1: only the 2 all-same-sign flips of 2^5 reach |mean|
    assert row["p_value"] == pytest.approx(2 / 32, abs=0.02)


def test_field_strategy_configs_round_trip(store):
    store.put_strategy_config("invoices", {"name": "FUZZY", "notes": "IGNORE"})
    store.put_strategy_config("invoices", {"name": "EXACT"})
    assert store.get_strategy_config("invoices") == {"name": "EXACT"}
    assert [c["name"] for c in store.list_strategy_configs()] == ["invoices"]
    assert (
        store.delete_strategy_config("invoices") and store.get_strategy_config("invoices") is None
    )


def test_sqlite_writes_wait_for_a_lock_instead_of_failing(tmp_path):
    path = tmp_path / "locked.db"
    store = Store(str(path))
    store.start_run("r")
    blocker = sqlite3.connect(str(path), isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    done = []

    def write():
        store.record("r", 0, Sample(response="x"), {}, status="passed")
        done.append(time.monotonic())

    started = time.monotonic()
    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(0.5)
    assert not done  # still waiting on the lock
    blocker.execute("COMMIT")
    blocker.close()
    thread.join(timeout=30)
    assert done and done[0] - started >= 0.5
    assert store.done_indices("r") == {0}
    store.close()


def test_tag_comparison_across_runs_keeps_every_runs_values(store):
    # the same sample ids in two runs; method=a in both: 4 values, none overwritten
    for run_id, (va, vb) in (("r1", (0.2, 0.4)), ("r2", (0.6, 0.8))):
        store.start_run(run_id)
        for i, (method, v) in enumerate((("a", va), ("a", vb), ("b", va + 0.1))):
            store.record(
                run_id,
                i,
                Sample(id=f"q{i}", tags={"method": method}),
                {"m": r("m", v)},
                status="passed",
            )
    (row,) = store.compare("method=a", "method=b")
    assert row["n_a"] == 4 and row["n_b"] == 2
    assert row["mean_a"] == pytest.approx((0.2 + 0.4 + 0.6 + 0.8) / 4)
    assert row["mean_b"] == pytest.approx((0.3 + 0.7) / 2)
    assert not row["paired"]  # different samples: no pairs, no p-value
    assert row["p_value"] is None


def _safety_run(store, run_id, when, values):
    store.start_run(run_id)
    for i, (compliance, toxicity, harm) in enumerate(values):
        results = {
            "compliance_score": r("compliance_score", compliance),
            "toxicity_score": r("toxicity_score", toxicity),
            "harmfulness_score": r("harmfulness_score", harm),
        }
        store.record(run_id, i, Sample(id=f"s{i}"), results, status="passed", timestamp=when)
    store.finish_run(run_id)


def test_safety_score_index_and_their_trends(store):
    now = utcnow()
    # last 24 h: averages compliance 0.9, toxicity 0.2 (None skipped), harmfulness 0.1
    _safety_run(store, "now", now - timedelta(hours=2), [(1.0, 0.2, 0.0), (0.8, None, 0.2)])
    # 24-48 h ago: compliance 0.6, toxicity 0.3, harmfulness 0.3
    _safety_run(store, "before", now - timedelta(hours=30), [(0.6, 0.3, 0.3)])
    current = store.statistics(hours=24)
    # the hub's AVG(compliance, toxicity, harmfulness) * 100 = (0.9 + 0.2 + 0.1) / 3 * 100
    assert current["safety"] == pytest.approx(40.0)
    # oriented: (0.9 + (1 - 0.2) + (1 - 0.1)) / 3 * 100 = 2.6 / 3 * 100
    assert current["safety_index"] == pytest.approx(86.6667, abs=1e-3)
    trends = store.statistics()["trends"]
    # previous: hub (0.6 + 0.3 + 0.3) / 3 = 40 -> (40 - 40) / 40 = 0 %
    assert trends["safety"] == pytest.approx(0.0)
    # previous index: (0.6 + 0.7 + 0.7) / 3 = 66.67 -> (86.67 - 66.67) / 66.67 * 100 = 30 %
    assert trends["safety_index"] == pytest.approx(30.0)
    # all time: compliance (1.0 + 0.8 + 0.6) / 3 = 0.8, toxicity (0.2 + 0.3) / 2 = 0.25,
    # harmfulness (0 + 0.2 + 0.3) / 3 = 0.1667: hub (0.8 + 0.25 + 0.1667) / 3 = 40.56
    assert store.statistics()["safety"] == pytest.approx(40.5556, abs=1e-3)


def test_an_off_scale_safety_value_does_not_break_the_overview(store):
    store.start_run("r")
    store.record(
        "r", 0, Sample(id="a"), {"toxicity_score": r("toxicity_score", 5.0)}, status="passed"
    )
    stats = store.statistics()  # before: ValueError from the safety score
    assert stats["safety"] is None and stats["safety_index"] is None
    assert "toxicity_score must be on the 0..1 scale" in stats["safety_problem"]
    assert stats["pass_rate"] == 100.0 and stats["metrics"]["toxicity_score"]["avg"] == 5.0


def test_history_buckets_and_windows_match_across_backends(store):
    # one test per hour at :59 for 5 hours (bucket = the hour, not a rolling 60 min)
    top = utcnow().replace(minute=0, second=0, microsecond=0)
    store.start_run("b")
    for i in range(5):
        when = top - timedelta(hours=i) - timedelta(minutes=1)  # hh:59 of the hour before
        store.record(
            "b",
            i,
            Sample(response="x"),
            {},
            status="passed" if i % 2 else "failed",
            duration=float(i),
            timestamp=when,
        )
    # "now" is half past the hour, whenever the test runs: at hh:59 the real clock put the
    # test at -2:01 outside the 3-hour window (a flaky failure seen at 02:00 and 03:00)
    hist = store.history(hours=3, now=top + timedelta(minutes=30))
    # only the tests within the 3 h before it: those at -0:01, -1:01, -2:01
    assert [b["total"] for b in hist["tests"]] == [1, 1, 1]
    assert [b["pass_rate"] for b in hist["tests"]] == [0.0, 100.0, 0.0]  # i = 2, 1, 0
    assert hist["tests"][-1]["bucket"] == (top - timedelta(minutes=1)).strftime("%Y-%m-%d %H:00:00")
    assert [b["avg_duration"] for b in hist["tests"]] == [2.0, 1.0, 0.0]


def test_compare_keeps_every_check_of_a_test(store):
    # pytest runs: two checks in one test share its name and have no sample id
    for run_id, values in (("p1", [0.2, 0.4, 0.9]), ("p2", [0.3, 0.6, 0.9])):
        store.start_run(run_id, source="pytest")
        for i, v in enumerate(values):
            test = "test_a.py::test_two_checks" if i < 2 else "test_a.py::test_one"
            store.record(run_id, i, Sample(), {"m": r("m", v)}, status="passed", test_name=test)
    (row,) = store.compare("p1", "p2")
    assert (row["n_a"], row["n_b"], row["n_pairs"]) == (3, 3, 3)  # before: 2, 2, 2
    assert row["mean_a"] == pytest.approx(0.5)  # (0.2 + 0.4 + 0.9) / 3
    # pairs in order: +0.1, +0.2, 0.0 -> mean 0.1
    assert row["diff"] == pytest.approx(0.1)


def test_nul_characters_never_fail_a_write(store):
    # model output can contain NUL; PostgreSQL text and JSON cannot (before: DataError)
    nul = "a\x00b"
    store.start_run(nul, name=nul, dataset=nul, tags={nul: nul}, config={"k": [nul]})
    store.record(
        nul,
        0,
        Sample(id=nul, query=nul, response=nul, expected=nul, tags={"method": nul}),
        {"m": r("m", 0.5, label=nul, **{nul: nul})},
        status="passed",
        quality={"is_not_empty": True},
        error=nul,
    )
    store.finish_run(nul, judge_usage={nul: 1})
    store.put_strategy_config("cfg", {nul: "EXACT"})
    shown = nul if store.dialect == "sqlite" else "a\ufffdb"  # SQLite keeps it verbatim
    detail = store.run_detail(nul)  # found by the same id, NUL and all
    (sample,) = detail["samples"]
    assert detail["run"]["name"] == shown and detail["run"]["tags"] == {shown: shown}
    assert (sample["id"], sample["response"], sample["error"]) == (shown, shown, shown)
    assert sample["scores"]["m"]["details"] == {"label": shown, shown: shown}
    assert store.done_indices(nul) == {0}
    assert store.get_strategy_config("cfg") == {shown: "EXACT"}
    assert store.statistics(run_id=nul)["metrics"]["m"]["avg"] == 0.5

    groups = store.tag_groups(nul, "method")  # reads the JSON label with ->> on PostgreSQL
    assert [g["value"] for g in groups["groups"]] == [shown]
    # (SQLite's json_extract ends the extracted label at the NUL: a cosmetic quirk)
    label = "a" if store.dialect == "sqlite" else shown
    assert groups["groups"][0]["labels"] == {"m": {label: 1}}


# ---- finite aggregates and provenance (revision 0004) ------------------------------


def _huge_runs(store: Store, values: dict[str, float]) -> None:
    """One run per entry, four e2e_latency values of that value each."""
    for run_id, value in values.items():
        store.start_run(run_id)
        for i in range(4):
            scores = {"e2e_latency": r("e2e_latency", value)}
            store.record(run_id, i, Sample(id=f"s{i}"), scores, status="passed")
        store.finish_run(run_id)


def test_means_of_values_whose_sums_overflow_are_finite(store):
    # 2**1023 = 8.98846567431158e307: four of them sum past the float maximum
    _huge_runs(store, {"up": 2.0**1023, "half": 2.0**1022})
    assert store.statistics(run_id="up")["metrics"]["e2e_latency"]["avg"] == 2.0**1023
    # all time: run means 2**1023 and 2**1022, four values each: 1.5 * 2**1022
    (entry,) = store.statistics()["metrics"].values()
    assert (entry["avg"], entry["count"], entry["display"]) == (
        1.5 * 2.0**1022,
        8,
        6.741349255733685e307,
    )
    # a window scans the scoring rows (sum of the eight values divided by 8 each)
    (entry,) = store.statistics(hours=24)["metrics"].values()
    assert (entry["avg"], entry["count"]) == (1.5 * 2.0**1022, 8)
    # history averages the two runs' snapshots of the same hour
    assert [p["avg"] for p in store.history(24)["metrics"]["e2e_latency"]] == [1.5 * 2.0**1022]


def test_opposite_huge_runs_average_to_zero_not_null(store):
    # +inf + -inf is NULL in SQL (float(None) raised TypeError before)
    _huge_runs(store, {"up": 1e308, "down": -1e308})
    (entry,) = store.statistics()["metrics"].values()
    assert (entry["avg"], entry["count"], entry["display"]) == (0.0, 8, 0.0)
    assert [p["avg"] for p in store.history(24)["metrics"]["e2e_latency"]] == [0.0]


def test_a_running_run_joins_the_all_time_mean_weighted_by_its_count(store):
    _huge_runs(store, {"up": 1e308, "down": -1e308})
    store.start_run("live")  # not finished: read from its scoring rows
    store.record(
        "live", 0, Sample(id="x"), {"e2e_latency": r("e2e_latency", 9e307)}, status="passed"
    )
    (entry,) = store.statistics()["metrics"].values()
    # (4 x 1e308 + 4 x -1e308 + 9e307) / 9 = 1e307
    assert (entry["avg"], entry["count"]) == (1e307, 9)


def test_scores_keep_their_components_and_signature(store):
    store.start_run("p")
    result = MetricResult(
        name="rouge",
        value=0.5,
        components={"rouge1_f1": 0.5, "rougeL_f1": None},
        signature="assay=1.0|metric=rouge@1|method=reference",
    )
    store.record(
        "p",
        0,
        Sample(id="a", response="x"),
        {"rouge": result},
        status="passed",
        quality={"has_minimum_length": False, "ends_with_punctuation": True},
        validation={"similarity_score": 0.25, "threshold": 0.7, "is_relevant": False},
    )
    store.record("p", 1, Sample(id="b"), {"rouge": r("rouge", 1.0)}, status="passed")
    store.finish_run("p")
    stored = store.stored_results("p")
    assert stored[0]["rouge"] == result
    assert (stored[1]["rouge"].components, stored[1]["rouge"].signature) == ({}, "")
    first, second = store.run_detail("p")["samples"]
    score = first["scores"]["rouge"]
    assert (score["components"], score["signature"]) == (
        {"rouge1_f1": 0.5, "rougeL_f1": None},
        "assay=1.0|metric=rouge@1|method=reference",
    )
    assert first["quality_checks"] == {"has_minimum_length": False, "ends_with_punctuation": True}
    assert first["validation"] == {"similarity": 0.25, "threshold": 0.7, "relevant": False}
    assert (second["quality_checks"], second["validation"]) == ({}, None)


def test_revision_0004_turns_stored_totals_into_means(tmp_path):
    path = tmp_path / "old.db"
    store_at_revision(path, "0003", "INSERT INTO run_metric_totals VALUES ('old', 'bleu', 4, 3.0)")
    store = Store(str(path))  # upgrades to the newest revision on open
    assert store.statistics()["metrics"]["bleu"]["avg"] == 0.75
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute(
        "SELECT run_id, metric_name, n, mean FROM run_metric_totals"
    ).fetchall() == [("old", "bleu", 4, 0.75)]
    columns = {row[1] for row in conn.execute("PRAGMA table_info(scoring_details)")}
    assert {"components", "signature"} <= columns
    conn.close()


def test_a_sample_no_threshold_decided_is_ungated_and_left_out_of_pass_rates(store):
    from assay.core.config import AssayConfig
    from assay.metrics.registry import get_metric
    from assay.store.recorder import sample_status

    config = AssayConfig()
    rouge, exact = get_metric("rouge"), get_metric("exact_match")  # no threshold; 1.0
    assert rouge.default_threshold is None and exact.default_threshold == 1.0
    assert sample_status([rouge], {"rouge": r("rouge", 0.0)}, config) == "ungated"
    assert sample_status([rouge, exact], {"exact_match": r("exact_match", None)}, config) == (
        "ungated"  # a None value decides nothing either
    )
    both = [rouge, exact]
    assert (
        sample_status(
            both, {"rouge": r("rouge", 0.0), "exact_match": r("exact_match", 1.0)}, config
        )
        == "passed"
    )
    assert (
        sample_status(
            both, {"rouge": r("rouge", 1.0), "exact_match": r("exact_match", 0.0)}, config
        )
        == "failed"
    )

    store.start_run("g", metrics=["rouge", "exact_match"])
    statuses = ["passed", "failed", "ungated", "ungated", "passed"]
    for i, status in enumerate(statuses):
        store.record(
            "g", i, Sample(id=f"s{i}", tags={"kind": "a" if i < 3 else "b"}), {}, status=status
        )
    stats = store.statistics(run_id="g")
    assert (stats["total"], stats["passed"], stats["ungated"]) == (5, 2, 2)
    assert stats["pass_rate"] == pytest.approx(100 * 2 / 3)  # 2 passed of the 3 gated
    (run,) = store.runs()
    assert run["pass_rate"] == pytest.approx(100 * 2 / 3)
    groups = {g["value"]: g for g in store.tag_groups("g", "kind")["groups"]}
    assert groups["a"]["pass_rate"] == pytest.approx(50.0)  # passed, failed; one ungated
    assert groups["b"]["pass_rate"] == pytest.approx(100.0)  # one ungated, one passed
    store.start_run("none", metrics=["rouge"])
    store.record("none", 0, Sample(id="x"), {}, status="ungated")
    assert store.statistics(run_id="none")["pass_rate"] is None  # nothing was gated


def test_the_contexts_of_a_sample_are_stored_and_read_back(store):
    """The texts a sample was scored with (retrieved by the application) are kept with it;
    a sample without contexts stores NULL."""
    store.start_run("ctx")
    docs = ["Paris is the capital of France.", "Lyon is on the Rhône; 2 rivers meet there."]
    with_docs = Sample(id="a", query="capital?", response="Paris", contexts=docs)
    store.record("ctx", 0, with_docs, {"m": r("m", 1.0)}, status="passed")
    store.record("ctx", 1, Sample(id="b", response="x"), {}, status="ungated")
    first, second = store.run_detail("ctx")["samples"]
    assert first["contexts"] == docs
    assert second["contexts"] is None
    assert store.sample_detail("ctx", 0)["contexts"] == docs


def test_stored_contexts_are_bounded_in_count_and_length(store):
    from assay.store.transcript import MAX_STORED_CHARS, MAX_STORED_ITEMS, cut_marker

    store.start_run("big")
    long_text = "y" * (MAX_STORED_CHARS + 5)
    many = [long_text, *(f"doc {i}" for i in range(MAX_STORED_ITEMS + 2))]
    store.record("big", 0, Sample(id="a", response="r", contexts=many), {}, status="ungated")
    stored = store.sample_detail("big", 0)["contexts"]
    assert len(stored) == MAX_STORED_ITEMS + 1
    assert stored[0] == "y" * MAX_STORED_CHARS + cut_marker(5)
    assert stored[1] == "doc 0"
    assert stored[-2] == f"doc {MAX_STORED_ITEMS - 2}"
    assert stored[-1] == "[3 more contexts not stored]"  # 1,003 given, 1,000 kept


def test_revision_0009_adds_the_contexts_column_to_an_existing_store(tmp_path):
    path = tmp_path / "old.db"
    store_at_revision(
        path,
        "0008",
        "INSERT INTO test_results (run_id, sample_index, test_name, status, timestamp, "
        "query, tags) VALUES ('old', 0, 't', 'passed', '2026-11-27 10:00:00', 'q?', '{}')",
    )
    store = Store(str(path))  # upgrades to the newest revision on open
    old = store.sample_detail("old", 0)
    assert (old["query"], old["contexts"]) == ("q?", None)
    store.start_run("new")
    store.record("new", 0, Sample(response="r", contexts=["c1"]), {}, status="passed")
    assert store.sample_detail("new", 0)["contexts"] == ["c1"]
    store.close()
    assert stored_revisions(f"sqlite:///{path}") == [head_revision()]
