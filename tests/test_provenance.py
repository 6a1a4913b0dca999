"""Result signatures (format, model and prompt identity), and comparing runs whose
signatures differ: the store's compare rows, ``assay compare`` and the compare page."""

from __future__ import annotations

import hashlib
import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from assay import __version__
from assay.cli import app
from assay.core.result import MetricResult, format_signature, parse_signature, signature_differences
from assay.core.sample import Sample
from assay.metrics.provenance import build_signature, weights_hash
from assay.metrics.registry import get_metric
from assay.server import create_app
from assay.store.db import Store

MINILM = f"assay={__version__}|metric=rouge@1|method=local|model=all-MiniLM-L6-v2"
SIG_A = f"{MINILM}|model_hash=sha256:aaaaaaaaaaaa"
SIG_B = f"{MINILM}|model_hash=sha256:bbbbbbbbbbbb"
JUDGE_A = f"assay={__version__}|metric=faithfulness@2|method=llm|judge=gpt-4o|prompt=111111111111"
JUDGE_B = f"assay={__version__}|metric=faithfulness@2|method=llm|judge=<b>x</b>|prompt=111111111111"


def test_a_signature_is_its_parts_in_a_fixed_order_and_reads_back():
    parts = {"k": "5", "method": "local", "metric": "rouge@1", "assay": "0.1.0", "x": "a|b%"}
    text = format_signature(parts)
    assert text == "assay=0.1.0|metric=rouge@1|method=local|k=5|x=a%7Cb%25"
    assert parse_signature(text) == parts


def test_the_older_signature_format_reads_as_the_same_parts():
    assert parse_signature("rouge@1|local|model=x|k=5") == {
        "metric": "rouge@1",
        "method": "local",
        "model": "x",
        "k": "5",
    }


def test_signature_differences_name_each_differing_part():
    assert signature_differences({SIG_A}, {SIG_A}) == []
    assert signature_differences({SIG_A}, {SIG_B}) == [
        "model_hash: sha256:aaaaaaaaaaaa vs sha256:bbbbbbbbbbbb"
    ]
    # a side with two signatures shows both values; a missing part is (none)
    assert signature_differences({SIG_A, SIG_B}, {f"{MINILM}|k=3"}) == [
        "model_hash: sha256:aaaaaaaaaaaa, sha256:bbbbbbbbbbbb vs (none)",
        "k: (none) vs 3",
    ]


def test_a_judged_signature_names_the_judge_and_the_prompt_hashes():
    text = build_signature(
        "faithfulness", 2, "llm", "gpt-4o;faith@1#0123456789ab,claims@3#ba9876543210", {"t": 0.5}
    )
    assert text == (
        f"assay={__version__}|metric=faithfulness@2|method=llm|judge=gpt-4o"
        "|prompt=0123456789ab,ba9876543210|t=0.5"
    )
    # a parameter named like a part keeps its own key
    assert build_signature("m", 1, "pattern", None, {"method": "keywords"}) == (
        f"assay={__version__}|metric=m@1|method=pattern|param.method=keywords"
    )


def test_a_metric_result_carries_the_signature():
    result = get_metric("rouge").score(Sample(response="a b", expected="a b"))
    assert result.signature == f"assay={__version__}|metric=rouge@1|method=reference"


def test_weights_hash_reads_name_size_and_the_first_and_last_mib(tmp_path):
    mib = 1 << 20
    blob = b"a" * mib + b"b" * mib + b"c" * mib  # 3 MiB: the middle MiB is not read
    (tmp_path / "model.safetensors").write_bytes(blob)
    (tmp_path / "config.json").write_text("{}")  # not a weights file
    digest = hashlib.sha256(f"model.safetensors:{3 * mib}\n".encode() + b"a" * mib + b"c" * mib)
    assert weights_hash(str(tmp_path)) == f"sha256:{digest.hexdigest()[:12]}"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert weights_hash(str(empty)) == ""


# ---- comparing runs whose signatures differ ------------------------------------------


@pytest.fixture
def db(tmp_path) -> str:
    """Runs a and b: rouge (0.25, 0.5, 0.75 vs 0.375, 0.625, 0.875) by weights aaaa vs bbbb,
    faithfulness by judge gpt-4o vs an HTML-named one, bleu with the same signature."""
    path = str(tmp_path / "provenance.db")
    store = Store(path)
    for run_id, rouge_sig, judge_sig, shift in (
        ("a", SIG_A, JUDGE_A, 0.0),
        ("b", SIG_B, JUDGE_B, 0.125),
    ):
        store.start_run(run_id)
        for i in range(3):
            value = 0.25 * (i + 1) + shift  # exact in binary: exact means
            scores = {
                "rouge": MetricResult("rouge", value, signature=rouge_sig),
                "faithfulness": MetricResult("faithfulness", value, signature=judge_sig),
                "bleu": MetricResult("bleu", value, signature="metric=bleu@1|method=reference"),
            }
            store.record(run_id, i, Sample(id=f"s{i}"), scores, status="passed")
        store.finish_run(run_id)
    store.close()
    return path


def test_compare_rows_say_which_parts_of_the_signatures_differ(db):
    store = Store(db)
    rows = {row["metric"]: row for row in store.compare("a", "b")}
    store.close()
    assert rows["rouge"]["signature_differences"] == [
        "model_hash: sha256:aaaaaaaaaaaa vs sha256:bbbbbbbbbbbb"
    ]
    assert rows["faithfulness"]["signature_differences"] == ["judge: gpt-4o vs <b>x</b>"]
    assert rows["bleu"]["signature_differences"] == []
    assert (rows["rouge"]["mean_a"], rows["rouge"]["mean_b"], rows["rouge"]["diff"]) == (
        0.5,
        0.625,
        0.125,
    )


def test_assay_compare_prints_the_table_and_one_warning_per_differing_metric(db):
    result = CliRunner().invoke(app, ["compare", "a", "b", "--db", db])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stdout.splitlines() if line.startswith("WARNING")]
    assert warnings == [
        "WARNING: faithfulness: the runs' signatures differ (judge: gpt-4o vs <b>x</b>): the "
        "difference may not be the system's",
        "WARNING: rouge: the runs' signatures differ (model_hash: sha256:aaaaaaaaaaaa vs "
        "sha256:bbbbbbbbbbbb): the difference may not be the system's",
    ]
    rouge = next(line for line in result.stdout.splitlines() if "│ rouge" in line)
    cells = [c.strip() for c in rouge.split("│")[1:-1]]
    assert cells[:4] == ["rouge", "0.5000", "0.6250", "+0.1250"]
    assert cells[6] == "3 / 3 / 3"


def test_assay_compare_json_has_the_rows_and_warns_on_stderr(db):
    result = CliRunner().invoke(app, ["compare", "a", "b", "--db", db, "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["a"], out["b"]) == ("a", "b")
    assert [r["metric"] for r in out["rows"]] == ["bleu", "faithfulness", "rouge"]
    assert [r["signature_differences"] for r in out["rows"]] == [
        [],
        ["judge: gpt-4o vs <b>x</b>"],
        ["model_hash: sha256:aaaaaaaaaaaa vs sha256:bbbbbbbbbbbb"],
    ]
    assert result.stderr.count("WARNING: ") == 2


def test_assay_compare_refuses_an_unknown_run(db):
    result = CliRunner().invoke(app, ["compare", "a", "nope", "--db", db])
    assert result.exit_code == 2
    assert "no run 'nope'" in result.stderr


def test_the_compare_page_shows_the_warnings_escaped(db):
    store = Store(db)
    client = TestClient(create_app(store, token=""), base_url="http://localhost")
    page = client.get("/compare?a=a&b=b").text
    store.close()
    assert page.count('class="signature-warning status-skipped"') == 2
    assert (
        '<p class="signature-warning status-skipped" data-metric="faithfulness"><strong>'
        "Warning:</strong> faithfulness: the signatures differ (judge: gpt-4o vs "
        "&lt;b&gt;x&lt;/b&gt;): the difference may not be the system's.</p>"
    ) in page
    assert "<b>x</b>" not in page


def test_the_run_page_shows_components_signature_checks_and_validation(tmp_path):
    store = Store(str(tmp_path / "detail.db"))
    store.start_run("p")
    result = MetricResult(
        "rouge", 0.5, components={"rouge1_f1": 0.5}, signature="metric=rouge@1|judge=<i>j</i>"
    )
    store.record(
        "p",
        0,
        Sample(id="a", response="x"),
        {"rouge": result},
        status="passed",
        quality={"has_minimum_length": False},
        validation={"similarity_score": 0.25, "threshold": 0.7, "is_relevant": False},
    )
    store.finish_run("p")
    page = TestClient(create_app(store, token=""), base_url="http://localhost").get("/runs/p")
    store.close()
    assert page.status_code == 200
    text = page.text
    components = '<span class="ev-key">rouge1_f1:</span> <span class="ev-value">0.5</span>'
    assert f"<li>{components}</li>" in text
    assert '<code class="signature">metric=rouge@1|judge=&lt;i&gt;j&lt;/i&gt;</code>' in text
    assert (
        '<p class="quality-checks">Quality checks: <span class="tag">has_minimum_length '
        "failed</span> </p>"
    ) in text
    assert (
        '<p class="validation">Validation: similarity 0.25, threshold 0.70: not relevant</p>'
    ) in text
