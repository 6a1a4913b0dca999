"""The base suite's gates on the bundled chatbot example, and ``--junit`` files checked
against a published JUnit schema (tests/data/JUnit.xsd, windyroad/JUnit-Schema)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import etree
from typer.testing import CliRunner

from assay.cli import app
from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.metrics.registry import get_metric, resolve_metrics
from assay.outputs.junit import JunitReport, xml_text
from assay.store.db import Store

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
CHATBOT = REPO / "examples" / "chatbot.jsonl"
SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "tests" / "data" / "JUnit.xsd")))


def valid_junit(path: Path) -> etree._Element:
    """The root of a JUnit file, after checking it against the schema."""
    document = etree.parse(str(path))
    assert SCHEMA.validate(document), SCHEMA.error_log
    return document.getroot()


def outcomes(root: etree._Element) -> dict[tuple[str, str], str]:
    """(sample id, metric) -> "pass", "failure", "error" or "skipped"."""
    found = {}
    for case in root.iter("testcase"):
        child = next(iter(case), None)
        key = (case.get("name"), case.get("classname").removeprefix("assay."))
        found[key] = "pass" if child is None else child.tag
    return found


def test_bundled_chatbot_example_fails_exactly_its_two_wrong_answers(env):
    """examples/chatbot.jsonl, read as a person would: c4 is a fallback ("Sorry, I didn't
    understand") and c8 names the wrong capital (Sydney for Canberra); the eight others
    are good paraphrases (c10 is right but shows raw <b> tags). The base suite gates
    fallback_detection (c4 fails: 9 of 10) and answer_classification (c4 and c8 are
    WRONG: 8 of 10); exact_match (0 of 10 exact), bleu, rouge, bertscore,
    semantic_similarity (c6, a good answer, scores 0.688 < 0.7) and response_quality (c1
    fails the hub's HTML rule on "Settings > Account") report without a gate. The store
    gives the dashboard's pass rate: 8 of 10 samples passed every gate."""
    db = env / "assay.db"
    junit = env / "reports" / "assay.xml"
    result = runner.invoke(
        app,
        [
            "evaluate",
            str(CHATBOT),
            "--format",
            "json",
            "--store",
            "--db",
            str(db),
            "--junit",
            str(junit),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rates = {m["name"]: m["pass_rate"] for m in report["metrics"]}
    assert rates == {
        "answer_classification": 0.8,
        "bleu": None,
        "exact_match": None,
        "fallback_detection": 0.9,
        "response_quality": None,
        "rouge": None,
        "bertscore": None,
        "semantic_similarity": None,
    }
    stats = Store(f"sqlite:///{db}").statistics(run_id=report["run_id"])
    assert (stats["passed"], stats["failed"], stats["pass_rate"]) == (8, 2, 80.0)
    root = valid_junit(junit)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("20", "3", "0")
    failed = {key for key, outcome in outcomes(root).items() if outcome != "pass"}
    assert failed == {
        ("c4", "answer_classification"),
        ("c4", "fallback_detection"),
        ("c8", "answer_classification"),
    }
    c8 = root.xpath("testcase[@name='c8']/failure")[0]
    assert c8.get("message") == "answer_classification = 0.0000, needs >= 1"
    assert "response: The capital of Australia is Sydney." in c8.text
    assert '"label": "WRONG"' in c8.text and '[["Sydney", "Canberra"]]' in c8.text


def test_a_metric_the_base_suite_reports_is_gated_when_asked_for():
    """exact_match and semantic_similarity from the base suite have no threshold; asked
    for by name, or given one (``thresholds``, --threshold), they gate; a suite without
    named gates (semantic) gates each metric at its default."""
    config = AssayConfig()
    base = {m.name: m for m in resolve_metrics(suites=["base"])}
    assert {n for n, m in base.items() if config.threshold_for(m) is not None} == {
        "answer_classification",
        "fallback_detection",
    }
    named = {m.name: m for m in resolve_metrics(["exact_match"], ["base"])}
    assert config.threshold_for(named["exact_match"]) == 1.0
    assert config.threshold_for(named["semantic_similarity"]) is None
    asked = AssayConfig(thresholds={"semantic_similarity": 0.6})
    assert asked.threshold_for(base["semantic_similarity"]) == 0.6
    semantic = {m.name: m for m in resolve_metrics(suites=["semantic"])}  # gates every one
    assert config.threshold_for(semantic["semantic_similarity"]) == 0.7


HOSTILE = "ok]]></failure></testcase>\x00\x1b[31m\x7f&<b>\ud800\ufffe"


def test_junit_holds_untrusted_text_and_counts_every_outcome(tmp_path):
    """One case per sample and gated metric: a pass, a failure (value, threshold, the
    response and the evidence), an error and an N/A (skipped), with an answer holding
    control characters, a lone surrogate, ``]]>`` and markup: the file is valid and
    reads back the text, each character XML cannot hold written as \\xNN or \\uNNNN."""
    metric = get_metric("exact_match")
    ungated = get_metric("bleu")  # no threshold: no case
    path = tmp_path / "out.xml"
    report = JunitReport(path, [metric, ungated], AssayConfig(), f"run {HOSTILE}")
    rows = [
        (Sample(id="pass", response="a", expected="a"), MetricResult("exact_match", 1.0)),
        (
            Sample(id=f"bad {HOSTILE}", response=HOSTILE, expected="x"),
            MetricResult("exact_match", 0.0, reason=f"why {HOSTILE}"),
        ),
        (Sample(id="err", response="a"), MetricResult("exact_match", None, error="boom ]]>")),
        (Sample(id="na", response="a"), MetricResult("exact_match", None, reason="no expected")),
    ]
    for index, (sample, result) in enumerate(rows):
        report(index, sample, {"exact_match": result, "bleu": MetricResult("bleu", 0.1)})
    report.close(1.5)
    root = valid_junit(path)
    counts = {k: root.get(k) for k in ("tests", "failures", "errors", "skipped", "time")}
    assert counts == {"tests": "4", "failures": "1", "errors": "1", "skipped": "1", "time": "1.500"}
    shown = "ok]]></failure></testcase>\\x00\\x1b[31m\x7f&<b>\\ud800\\ufffe"
    assert xml_text(HOSTILE) == shown
    assert root.get("name") == f"run {shown}"
    cases = root.findall("testcase")
    assert [c.get("name") for c in cases] == ["pass", f"bad {shown}", "err", "na"]
    assert {c.get("classname") for c in cases} == {"assay.exact_match"}
    failure = cases[1].find("failure")
    assert failure.get("type") == "below threshold"
    assert failure.get("message") == "exact_match = 0.0000, needs >= 1"
    assert failure.text == (f"exact_match = 0.0000, needs >= 1\nresponse: {shown}\nwhy {shown}")
    assert cases[2].find("error").attrib == {"type": "metric error", "message": "boom ]]>"}
    assert cases[3].find("skipped").get("message") == "N/A: no expected"
    assert len(cases[0]) == 0


@pytest.mark.parametrize("command", ["evaluate", "run"])
def test_junit_from_the_cli_is_valid_for_hostile_answers(env, command):
    """assay evaluate and assay run (a Python target echoing the answer) write --junit with
    a case per sample for the metric gated by --threshold, the answers' control characters
    and ``]]>`` kept as text."""
    data = env / "data.jsonl"
    answers = ["fine", "bad \u0001]]>\u0007 <x>", "fine"]
    data.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "query": a, "response": a, "expected": "fine"}) + "\n"
            for i, a in enumerate(answers)
        )
    )
    (env / "echo.py").write_text("def answer(query):\n    return query\n")
    junit = env / "j.xml"
    target = ["--target", f"python:{env / 'echo.py'}:answer"] if command == "run" else []
    result = runner.invoke(
        app,
        [
            command,
            str(data),
            *target,
            "-m",
            "exact_match",
            "-m",
            "rouge",
            "--threshold",
            "exact_match=1",
            "--junit",
            str(junit),
        ],
    )
    assert result.exit_code == 0, result.output
    root = valid_junit(junit)
    assert (root.get("tests"), root.get("failures")) == ("3", "1")
    assert outcomes(root) == {
        ("s0", "exact_match"): "pass",
        ("s1", "exact_match"): "failure",
        ("s2", "exact_match"): "pass",
    }
    assert "response: bad \\x01]]>\\x07 <x>" in root.find("testcase/failure").text


def test_a_junit_file_that_cannot_be_written_fails_the_run_with_exit_2(env):
    """--junit under a path that is a file: the run is scored and reported, then the one
    line names the file and why, and the exit code is 2 (an output not written)."""
    (env / "taken").write_text("a file, not a folder")
    result = runner.invoke(
        app, ["evaluate", str(CHATBOT), "-m", "exact_match", "--junit", "taken/j.xml"]
    )
    assert result.exit_code == 2, result.output
    assert "error: writing taken/j.xml failed: " in " ".join(result.stderr.split())


def test_junit_cuts_known_secrets_out_of_failures_and_errors(tmp_path):
    """The judge's API key quoted by a response, a reason or an error is written as
    [redacted], as in --out's evidence."""
    secret = "sk-test-0123456789abcdef"
    config = AssayConfig(judge_api_key=secret)
    path = tmp_path / "j.xml"
    report = JunitReport(path, [get_metric("exact_match")], config, "run")
    report(
        0,
        Sample(id="a", response=f"key {secret}", expected="x"),
        {"exact_match": MetricResult("exact_match", 0.0, reason=f"saw {secret}")},
    )
    report(
        1,
        Sample(id="b", response="r"),
        {"exact_match": MetricResult("exact_match", None, error=f"call failed with {secret}")},
    )
    report.close(0.0)
    text = path.read_text()
    assert secret not in text
    root = valid_junit(path)
    assert root.find("testcase/failure").text.splitlines()[1:] == [
        "response: key [redacted]",
        "saw [redacted]",
    ]
    assert root.find("testcase/error").get("message") == "call failed with [redacted]"


def test_junit_redacts_a_secret_across_the_response_cut_before_cutting(tmp_path):
    """A known secret straddling the response's cut (its 500th character) is redacted
    before the cut: the failure keeps no first part of it."""
    secret = "sk-test-0123456789abcdef"
    path = tmp_path / "j.xml"
    report = JunitReport(
        path, [get_metric("exact_match")], AssayConfig(judge_api_key=secret), "run"
    )
    response = "x" * 495 + secret + " tail"
    report(
        0,
        Sample(id="a", response=response, expected="y"),
        {"exact_match": MetricResult("exact_match", 0.0)},
    )
    report.close(0.0)
    assert "sk-t" not in path.read_text()
    # "x" * 495 + "[redacted] tail" cut to 499 characters and an ellipsis
    line = valid_junit(path).find("testcase/failure").text.splitlines()[1]
    assert line == "response: " + "x" * 495 + "[red…"
