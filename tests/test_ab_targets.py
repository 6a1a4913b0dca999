"""Several targets on the same samples: ``assay run DATA --target A --target B``.

The paired statistics (`assay.core.paired`) are checked on hand-worked values and their
p-value against scipy's permutation test; the command is run end to end against two real
loopback targets (tests/target_server.py), one answering every sample right and one
answering two samples with a fallback and failing a third, and its printed comparison,
stored runs and the dashboard's compare page (in Chromium) are checked against figures
worked out by hand below (`EXPECTED`).
"""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.cli.run_targets import out_path, target_names
from assay.core.paired import (
    Resampler,
    paired_difference,
    paired_figures,
    sign_flip_p,
    wins_ties_losses,
)
from assay.store.db import Store

pytest_plugins = ["browser_conftest"]
pytest.register_assert_rewrite("browser_conftest")

from browser_conftest import BROWSER_MARKS  # noqa: E402
from target_server import TargetServer  # noqa: E402

# ---- the statistics, by hand --------------------------------------------------------------


def test_paired_figures_pair_only_samples_with_a_value_on_both_sides() -> None:
    a = {"s1": 1.0, "s2": 2.0, "s3": 3.0, "s4": None}
    b = {"s1": 2.0, "s2": 2.0, "s3": 5.0, "s4": 1.0, "s5": 0.0}
    figures = paired_figures(a, b)
    # pairs s1, s2, s3: differences 1, 0, 2 (mean 1); s4 (N/A in A), s5 (absent) left out
    assert (figures.n_pairs, figures.left_out, figures.diff) == (3, 2, 1.0)
    assert (figures.above, figures.level, figures.below) == (2, 1, 0)
    # sign flips of (1, 0, 2): sums ±1 ± 2 -> 3, -1, 1, -3, each twice (the 0's sign);
    # |sum| >= 3 in 4 of the 8 arrangements
    assert figures.p_value == 0.5
    # the samples the caller counts (a sample N/A on both sides is left out too)
    assert paired_figures(a, b, samples=["s1", "s2", "s3", "s4", "s5", "s6"]).left_out == 3


def test_one_pair_has_no_difference_interval_or_p() -> None:
    figures = paired_figures({"x": 1.0, "y": None}, {"x": 0.0, "y": 1.0})
    assert (figures.n_pairs, figures.left_out, figures.below) == (1, 1, 1)
    assert (figures.diff, figures.ci_low, figures.ci_high, figures.p_value) == (None,) * 4


def test_the_exact_sign_flip_p_value_by_hand() -> None:
    # (1, 1, 1): only all + and all - reach |mean| 1: 2 of 8
    assert sign_flip_p([1.0, 1.0, 1.0]) == 0.25
    # (-1, -1, 0, 0, 0): the two -1 decide: sums -2, 0, 0, 2: 2 of 4
    assert sign_flip_p([-1.0, -1.0, 0.0, 0.0, 0.0]) == 0.5
    # all zero: every arrangement reaches 0
    assert sign_flip_p([0.0, 0.0]) == 1.0
    # float noise: 0.1 + 0.2 - 0.3 is not 0, yet the arrangement reaching it counts
    assert sign_flip_p([0.1, 0.2, -0.3 + 1e-17]) == 1.0
    # 12 ones: exact, 2 of 4,096
    assert sign_flip_p([1.0] * 12) == 2 / 4096


def test_the_bootstrap_interval_of_a_constant_difference_is_that_difference() -> None:
    mean, low, high, p = paired_difference([0.5, 0.25, 0.0, 1.0], [0.75, 0.5, 0.25, 1.25])
    assert (mean, low, high) == (0.25, 0.25, 0.25)
    assert p == 2 / 16


def test_past_twelve_pairs_the_p_value_is_a_seeded_monte_carlo_estimate() -> None:
    d = [1.0] * 13
    p = sign_flip_p(d, Resampler(2000, seed=0))
    # exact: 2 / 8192 = 0.000244; the estimate counts the observed arrangement: >= 1/2001
    assert 1 / 2001 <= p <= 5 / 2001
    assert sign_flip_p(d, Resampler(2000, seed=0)) == p  # the same seed, the same p


def test_wins_ties_and_losses_follow_the_polarity_and_the_tie_tolerance() -> None:
    a = {"x": 0.1 + 0.2, "y": 1e12, "z": 0.0, "w": 1.0}
    b = {"x": 0.3, "y": 1e12 + 1.0, "z": 1e-8, "w": 0.0}
    figures = paired_figures(a, b)
    # x: float noise, level; y: 1 in 1e12 is within 1e-9 relative, level; z above; w below
    assert (figures.above, figures.level, figures.below) == (1, 2, 1)
    assert wins_ties_losses(figures, higher_is_better=True) == (1, 2, 1)
    assert wins_ties_losses(figures, higher_is_better=False) == (1, 2, 1)
    lower = paired_figures({"x": 1.0, "y": 1.0, "z": 1.0}, {"x": 0.0, "y": 0.0, "z": 2.0})
    assert wins_ties_losses(lower, higher_is_better=False) == (2, 0, 1)
    assert wins_ties_losses(lower, higher_is_better=True) == (1, 0, 2)


def test_the_exact_p_value_equals_scipys_permutation_test() -> None:
    stats = pytest.importorskip("scipy.stats")  # the models extra
    rng = np.random.default_rng(7)
    for n in range(2, 13):
        a = rng.integers(0, 4, size=n) / 4  # ties and zero differences included
        b = rng.integers(0, 4, size=n) / 4
        reference = stats.permutation_test(
            (b, a),
            lambda x, y: np.mean(x - y),
            permutation_type="samples",
            n_resamples=np.inf,
            alternative="two-sided",
        ).pvalue
        assert paired_difference(a, b)[3] == pytest.approx(reference, rel=1e-12), n


def test_names_are_derived_unique_or_given_once_per_target() -> None:
    specs = ["python:app:v1", "http://127.0.0.1:8080/chat", "http://127.0.0.1:8080/chat"]
    assert target_names(specs, None) == ["v1", "127.0.0.1-8080-chat", "127.0.0.1-8080-chat-2"]
    openai = ["openai:http://h/v1", "openai:http://h/v1"]
    assert target_names(openai, None, ["gpt-4o", "org/small"]) == ["gpt-4o", "org-small"]
    assert target_names(specs[:2], ["old", "new"]) == ["old", "new"]
    with pytest.raises(ValueError, match="given 1 times for 2 targets"):
        target_names(specs[:2], ["old"])
    with pytest.raises(ValueError, match="must name one target"):
        target_names(specs[:2], ["x", "x"])
    # a targets file's entry without a name: derived, around the names given
    assert target_names(specs, [None, "127.0.0.1-8080-chat", None]) == [
        "v1",
        "127.0.0.1-8080-chat",
        "127.0.0.1-8080-chat-2",
    ]
    with pytest.raises(ValueError, match="letters, digits"):
        target_names(specs[:2], ["a/b", "c"])
    assert out_path(Path("out/results.jsonl"), "new") == Path("out/results.new.jsonl")


def test_the_store_counts_a_sample_na_on_both_sides_as_left_out(tmp_path: Path) -> None:
    from assay.core.result import MetricResult
    from assay.core.sample import Sample

    store = Store(str(tmp_path / "runs.db"))
    # s1, s2 paired (0.5 -> 0.75, 0.25 -> 0.25); s3 N/A in B; s4 N/A on both sides
    values = {"A": [0.5, 0.25, 1.0, None], "B": [0.75, 0.25, None, None]}
    try:
        for run, column in values.items():
            store.start_run(run)
            for index, value in enumerate(column):
                result = MetricResult("rouge", value, reason=None if value is not None else "x")
                sample = Sample(id=f"s{index + 1}")
                store.record(run, index, sample, {"rouge": result}, status="passed")
            store.finish_run(run)
        [row] = store.compare("A", "B")
    finally:
        store.close()
    assert (row["n_a"], row["n_b"], row["n_pairs"], row["left_out"]) == (3, 2, 2, 2)
    assert (row["above"], row["level"], row["below"]) == (1, 1, 0)
    assert row["mean_a"] == pytest.approx(1.75 / 3) and row["mean_b"] == 0.5
    # paired: differences 0.25 and 0: mean 0.125; sign flips: |sum| 0.25 in 4 of 4
    assert (row["diff"], row["p_value"]) == (0.125, 1.0)


# ---- the command, end to end ------------------------------------------------------------

FALLBACK = json.dumps({"answer": "Sorry, I didn't understand. Please try again."})

#: Six samples; "good" answers each right ("Answer: qN", exact_match 1, fallback 0).
#: "bad" answers s1 and s2 with a fallback (exact_match 0, fallback_detection 1), refuses
#: s3 (400: its metrics N/A) and answers s4-s6 right. Paired (5 pairs, s3 left out):
#:   exact_match        good 1 1 . 1 1 1, bad 0 0 N/A 1 1 1: differences -1 -1 0 0 0,
#:                      mean -0.4; means 1.0 and 3/5 = 0.6; bad wins 0, ties 3, loses 2
#:   fallback_detection good 0 0 . 0 0 0, bad 1 1 N/A 0 0 0: differences +1 +1 0 0 0,
#:                      mean +0.4, lower is better: bad wins 0, ties 3, loses 2
#: p: the sign flips of the two ±1 (the zeros do not count): sums -2, 0, 0, 2: 2 of 4, 0.5.
#: 95% CI: the bootstrap means are -k/5, k ~ Binomial(5, 2/5) (the -1s drawn); P(k=5) =
#: 1.0%, P(k>=4) = 8.7%, P(k=0) = 7.8%, so the 2.5% point is k=4 (-0.8) and the 97.5%
#: point k=0 (0.0): [-0.8, 0.0] (the 2,000 seeded draws fall well inside those margins).
EXPECTED = {
    "exact_match": "  exact_match: 1.0000 -> 0.6000, difference -0.4000, 95% CI "
    "[-0.8000, +0.0000], p 0.5000; bad wins 0, ties 3, loses 2 (5 pairs, 1 left out)",
    "fallback_detection": "  fallback_detection: 0.0000 -> 0.4000, difference +0.4000, "
    "95% CI [+0.0000, +0.8000], p 0.5000; bad wins 0, ties 3, loses 2 (5 pairs, 1 left out)",
}


@pytest.fixture()
def two_targets() -> Iterator[tuple[TargetServer, TargetServer]]:
    with TargetServer() as good, TargetServer() as bad:
        bad.script = [
            ("status", 200, FALLBACK, {}),
            ("status", 200, FALLBACK, {}),
            ("status", 400, '{"error": "bad request"}', {}),
        ]
        yield good, bad


def _data(folder: Path) -> Path:
    data = folder / "questions.jsonl"
    rows = [{"id": f"s{i}", "query": f"q{i}", "expected": f"Answer: q{i}"} for i in range(1, 7)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def _run(data: Path, good: TargetServer, bad: TargetServer, *extra: str) -> Any:
    args = ["run", str(data), "--target", f"{good.url}/rag", "--target", f"{bad.url}/rag"]
    args += ["--target-name", "good", "--target-name", "bad", "--concurrency", "1"]
    args += ["--request", '{"question": "{query}"}', "--response-path", "answer"]
    args += ["-m", "exact_match", "-m", "fallback_detection", "--retries", "0", *extra]
    return _invoke(args)


def _invoke(args: list[str]) -> Any:
    """The command's result, run in a thread of its own: once the browser tests have
    started, Playwright's sync API holds an event loop in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(CliRunner().invoke, app, args).result()


@pytest.fixture()
def compared(env: Path, two_targets: tuple[TargetServer, TargetServer]) -> dict[str, Any]:
    """The command run once with --store, --out and a gate that only "good" passes."""
    good, bad = two_targets
    db, out = env / "runs.db", env / "results.jsonl"
    result = _run(
        _data(env), good, bad, "--store", "--db", str(db), "--out", str(out),
        "--fail-under", "exact_match=0.9",
    )  # fmt: skip
    return {"result": result, "db": db, "out": out, "good": good, "bad": bad}


def test_two_targets_print_the_paired_comparison_worked_by_hand(compared: dict) -> None:
    result = compared["result"]
    # the gate applies per target: good's mean 1.0 passes, bad's 0.6 fails: exit 1
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert "bad vs good (baseline), paired by sample:" in lines
    for metric, line in EXPECTED.items():
        assert line in lines, metric
    assert "target good: 6 calls (6 ok)" in result.output
    assert "target bad: 6 calls (1 error, 5 ok)" in result.output
    assert "exit 1: from target bad" in lines
    # each target reached with the same six questions
    asked = [[json.loads(r["body"])["question"] for r in s.requests] for s in
             (compared["good"], compared["bad"])]  # fmt: skip
    assert asked == [[f"q{i}" for i in range(1, 7)]] * 2


def test_each_target_gets_its_out_file_and_its_stored_run(compared: dict) -> None:
    out, db = compared["out"], compared["db"]
    assert not out.exists()
    for name, expected in (("good", [1.0] * 6), ("bad", [0.0, 0.0, None, 1.0, 1.0, 1.0])):
        rows = [json.loads(line) for line in out_path(out, name).read_text().splitlines()]
        assert [r["exact_match"] for r in rows] == expected, name
    runs = sqlite3.connect(db).execute("SELECT id, name, tags FROM runs").fetchall()
    tags = {name: json.loads(t) for _, name, t in runs}
    assert sorted(tags) == ["bad", "good"]
    assert tags["good"]["comparison"] == tags["bad"]["comparison"]
    assert (tags["good"]["target"], tags["bad"]["target"]) == ("good", "bad")
    ids = {name: run_id for run_id, name, _ in runs}
    url = f"http://127.0.0.1:8000/compare?a={ids['good']}&b={ids['bad']}"
    assert f"  compare in the dashboard: {url}" in compared["result"].output.splitlines()
    # the stored runs compare to the printed figures (assay compare, the dashboard)
    store = Store(str(db))
    try:
        rows = {r["metric"]: r for r in store.compare(ids["good"], ids["bad"])}
    finally:
        store.close()
    em = rows["exact_match"]
    assert (em["n_pairs"], em["left_out"], em["above"], em["level"], em["below"]) == (5, 1, 0, 3, 2)
    assert (em["diff"], em["ci_low"], em["ci_high"], em["p_value"]) == pytest.approx(
        (-0.4, -0.8, 0.0, 0.5)
    )


def test_json_output_ends_with_the_comparison_document(
    env: Path, two_targets: tuple[TargetServer, TargetServer]
) -> None:
    result = _run(_data(env), *two_targets, "--format", "json")
    assert result.exit_code == 0, result.output
    decoder, text, documents = json.JSONDecoder(), result.stdout, []
    index = 0
    while index < len(text):
        if text[index].isspace():
            index += 1
            continue
        document, index = decoder.raw_decode(text, index)
        documents.append(document)
    assert len(documents) == 3  # good's report, bad's, then the comparison
    assert documents[2]["comparison"] is None  # not stored: no comparison id, no URL
    [pair] = documents[2]["comparisons"]
    assert (pair["baseline"], pair["target"], pair["url"]) == ("good", "bad", None)
    row = {r["metric"]: r for r in pair["rows"]}["fallback_detection"]
    assert (row["diff"], row["p_value"], row["wins"], row["ties"], row["losses"]) == pytest.approx(
        (0.4, 0.5, 0, 3, 2)
    )
    assert (row["higher_is_better"], row["n_pairs"], row["left_out"]) == (False, 5, 1)


def test_one_target_runs_as_before_and_resume_needs_one_target(
    env: Path, two_targets: tuple[TargetServer, TargetServer]
) -> None:
    good, bad = two_targets
    data = _data(env)
    args = ["run", str(data), "--target", f"{good.url}/rag", "--request"]
    args += ['{"question": "{query}"}', "--response-path", "answer", "-m", "exact_match"]
    result = _invoke(args)
    assert result.exit_code == 0, result.output
    assert "paired by sample" not in result.output
    assert "target " + f"{good.url}/rag: 6 calls (6 ok)" in result.output
    again = _run(data, good, bad, "--resume", "abc")
    assert again.exit_code == 2
    assert "--resume continues one stored run" in again.output
    assert len(bad.requests) == 0  # refused before any call
    names = _invoke([*args, "--target", "python:x:y", "--target-name", "a"])
    assert names.exit_code == 2
    assert "--target-name is given 1 times for 2 targets" in names.output


# ---- the dashboard's compare page ----------------------------------------------------------


@BROWSER_MARKS[0]
@BROWSER_MARKS[1]
def test_the_printed_url_opens_the_compare_page_with_the_paired_figures(
    compared: dict, dash_page: Any
) -> None:
    from assay.server import create_app
    from assay.server.live import running_server

    [line] = [x for x in compared["result"].output.splitlines() if "compare in the dashboard" in x]
    query = parse_qs(urlparse(line.split(": ", 1)[1]).query)
    with running_server(create_app(str(compared["db"]), token="")) as url:
        dash_page.goto(f"{url}/compare?a={query['a'][0]}&b={query['b'][0]}")
        for metric in ("exact_match", "fallback_detection"):
            cells = dash_page.locator(f"#compare-table tr[data-metric='{metric}'] td")
            assert cells.nth(6).inner_text() == "6 / 5 / 5", metric  # n A / n B / pairs
            assert cells.nth(7).inner_text() == "0 / 3 / 2", metric  # bad: wins/ties/losses
            assert cells.nth(8).inner_text() == "1", metric  # s3 left out
            assert cells.nth(5).inner_text() == "0.500", metric
        em = dash_page.locator("#compare-table tr[data-metric='exact_match'] td")
        # a bool metric is shown on the 0-100 view: -0.4 is -40, the CI [-0.8, 0.0]
        assert em.nth(3).get_attribute("data-value") == "-40.0"
        shown = [em.nth(i).inner_text() for i in range(1, 5)]
        assert shown == ["100.00%", "60.00%", "-40.00 pts", "[-80.00, 0.00]"]
        assert dash_page.errors == []


def test_a_target_that_cannot_be_reached_does_not_stop_the_others(
    env: Path, two_targets: tuple[TargetServer, TargetServer]
) -> None:
    good, _ = two_targets
    with socket.socket() as probe:  # free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/rag"
    args = ["run", str(_data(env)), "--target", closed, "--target", f"{good.url}/rag"]
    args += ["--target-name", "down", "--target-name", "up", "--retries", "0"]
    args += ["--request", '{"question": "{query}"}', "--response-path", "answer"]
    result = _invoke([*args, "-m", "exact_match"])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert f"error: the target {closed} cannot be reached" in output
    assert "target up: 6 calls (6 ok)" in output  # the second target still ran
    assert "no comparison of up with down: target down has no results" in output
    assert "exit 2: from target down" in output


def test_one_target_with_two_request_templates_compares_the_prompts(
    env: Path, two_targets: tuple[TargetServer, TargetServer]
) -> None:
    good, _ = two_targets
    url = f"{good.url}/rag"
    args = ["run", str(_data(env)), "--target", url, "--target", url, "--response-path"]
    args += ["answer", "--request", '{"question": "{query}"}', "-m", "exact_match"]
    args += ["--request", '{"question": "Please, {query}"}', "--concurrency", "1"]
    result = _invoke(args)
    assert result.exit_code == 0, result.output
    name = url.removeprefix("http://").replace(":", "-").replace("/", "-")
    # the second template's answers ("Answer: Please, q1") miss every expected answer:
    # differences -1 six times; sign flips: only all + and all - reach |mean| 1, 2 of 64
    assert (
        f"  exact_match: 1.0000 -> 0.0000, difference -1.0000, 95% CI [-1.0000, -1.0000], "
        f"p 0.0312; {name}-2 wins 0, ties 0, loses 6 (6 pairs, 0 left out)"
    ) in result.output.splitlines()
    asked = [json.loads(r["body"])["question"] for r in good.requests]
    assert asked == [f"q{i}" for i in range(1, 7)] + [f"Please, q{i}" for i in range(1, 7)]
    wrong = _invoke([*args, "--target-model", "a", "--target-model", "b", "--target-model", "c"])
    assert wrong.exit_code == 2
    assert "--target-model is given 3 times for 2 targets" in wrong.output


# ---- a targets file: listed targets and a grid ---------------------------------------------


def test_a_targets_file_lists_targets_then_its_grid_in_order() -> None:
    from assay.cli.target_grid import TargetEntry, parse_targets

    document = {
        "targets": [{"target": "python:app:v1"}, {"name": "gpt", "target": "openai:http://h/v1",
                                                   "model": "m-big"}],
        "grid": {
            "target": "http://h/ask",
            "model": {"small": 'm "s"', "large": "m-l"},
            "request": {"terse": '{"q": "{query}", "m": "{model}"}', "plain": '{"q": "{query}"}'},
        },
    }  # fmt: skip
    # the second request has no {model}: a grid that varies the model needs it
    with pytest.raises(ValueError, match=r"target small.plain: model 'm \"s\"' goes to"):
        parse_targets(document)
    document["grid"]["request"].pop("plain")
    entries = parse_targets(document)
    assert entries == [
        TargetEntry("python:app:v1"),
        TargetEntry("openai:http://h/v1", "gpt", "m-big"),
        # the model is written into {model}, JSON-escaped
        TargetEntry("http://h/ask", "small.terse", None, '{"q": "{query}", "m": "m \\"s\\""}'),
        TargetEntry("http://h/ask", "large.terse", None, '{"q": "{query}", "m": "m-l"}'),
    ]


@pytest.mark.parametrize(
    ("document", "error"),
    [
        ([], "the targets file must be a mapping, got list"),
        ({"target": "x"}, "the targets file: unknown key target"),
        ({"targets": [{"name": "a"}]}, r"targets\[1\] has no target"),
        ({"targets": [{"target": "x", "prompt": "p"}]}, r"targets\[1\]: unknown key prompt"),
        ({"targets": [{"target": ""}]}, r"targets\[1\].target must be a non-empty string"),
        ({"grid": {"target": "http://h"}}, "grid needs a model or a request mapping"),
        ({"grid": {"target": "http://h", "request": {}}}, "grid.request must be a non-empty"),
        ({"targets": []}, "gives no target"),
        ({"grid": {"target": "openai:http://h", "request": {"a": "{}"}}}, "takes no request"),
        ({"targets": [{"target": "python:m:f"}] * 33}, "gives 33 targets; at most 32"),
        ({"targets": [{"target": "python:m:f", "model": "x"}]}, "model 'x' goes to an openai"),
    ],
)
def test_a_targets_file_that_is_wrong_says_what(document: Any, error: str) -> None:
    from assay.cli.target_grid import parse_targets

    with pytest.raises(ValueError, match=error):
        parse_targets(document)


def test_a_grid_of_models_and_requests_runs_each_against_the_first(
    env: Path, two_targets: tuple[TargetServer, TargetServer]
) -> None:
    good, _ = two_targets
    grid = env / "grid.yaml"
    grid.write_text(
        f"grid:\n  target: {good.url}/rag\n  model: {{m1: x1, m2: x2}}\n  request:\n"
        """    plain: '{"question": "{query}", "model": "{model}"}'\n"""
        """    polite: '{"question": "Please, {query}", "model": "{model}"}'\n"""
    )
    args = ["run", str(_data(env)), "--targets", str(grid), "--response-path", "answer"]
    result = _invoke([*args, "-m", "exact_match", "--concurrency", "1"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # polite asks "Please, qN": every exact_match 1 -> 0, p 2/64; m2.plain answers as m1.plain
    for name in ("m1.polite", "m2.polite"):
        assert f"{name} vs m1.plain (baseline), paired by sample:" in lines
    assert (
        "  exact_match: 1.0000 -> 0.0000, difference -1.0000, 95% CI [-1.0000, -1.0000], "
        "p 0.0312; m2.polite wins 0, ties 0, loses 6 (6 pairs, 0 left out)"
    ) in lines
    assert (
        "  exact_match: 1.0000 -> 1.0000, difference +0.0000, 95% CI [+0.0000, +0.0000], "
        "p 1.0000; m2.plain wins 0, ties 6, loses 0 (6 pairs, 0 left out)"
    ) in lines
    bodies = [json.loads(r["body"]) for r in good.requests]
    assert [b["model"] for b in bodies] == ["x1"] * 12 + ["x2"] * 12
    assert [b["question"] for b in bodies[6:8]] == ["Please, q1", "Please, q2"]
    clash = _invoke([*args, "--target", "python:a:b"])
    assert clash.exit_code == 2
    assert "--targets FILE gives the targets: drop --target" in clash.output
    grid.write_text("grid: [unclosed\n")
    broken = _invoke(args)
    assert broken.exit_code == 2
    assert f"error: --targets {grid}: not YAML" in " ".join(broken.output.split())
    assert len(good.requests) == 24  # no call after the first run
