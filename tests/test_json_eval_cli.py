"""``assay json-eval`` and ``assay json-strategies`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from json_walkthrough import AIO, CONFIG, GT

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "json"


@pytest.fixture
def run(resources):
    """Invoke the CLI with the session's shared models (the `resources` fixture makes them
    the process default) and a wide terminal."""
    runner = CliRunner()

    def invoke(*args: object):
        return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})

    return invoke


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_two_files_reproduce_the_walkthrough(run, tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", GT)
    out = _write(tmp_path / "out.json", AIO)
    cfg = _write(tmp_path / "cfg.json", CONFIG)
    result = run("json-eval", gt, out, "--strategies", cfg, "--out", tmp_path / "r.jsonl")
    assert result.exit_code == 0, result.output
    for text in ("0.7500", "0.3333", "1.0000", "0.7375", "out.json"):
        assert text in result.stdout
    (row,) = _rows(tmp_path / "r.jsonl")
    assert row["name"] == "out.json"
    assert (row["completeness"], row["accuracy"], row["rqs"]) == (0.75, 1.0, 0.7375)
    assert row["hallucination"] == pytest.approx(2 / 6)
    assert row["error"] is None
    breakdown = row["breakdown"]
    assert breakdown["buckets"]["extra_keys"] == ["extra_field"]
    fields = {f["field"]: f for f in breakdown["fields"]}
    assert fields["name"]["scorer"] == "rapidfuzz.token_set_ratio"
    assert fields["name"]["similarity"] == 0.9
    assert fields["bio"]["threshold"] == 0.8


def test_thresholds_from_the_command_line(run, tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", GT)
    out = _write(tmp_path / "out.json", AIO)
    cfg = _write(tmp_path / "cfg.json", CONFIG)
    result = run(
        "json-eval",
        gt,
        out,
        "-s",
        cfg,
        "--fuzzy-threshold",
        "0.95",
        "--semantic-threshold",
        "0.5",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (doc,) = report["documents"]
    assert doc["accuracy"] == pytest.approx(2 / 3)  # name 0.90 < 0.95 fails; email, bio pass
    assert doc["breakdown"]["buckets"]["wrong"] == ["name"]
    assert doc["breakdown"]["thresholds"] == {"fuzzy": 0.95, "semantic": 0.5}
    assert report["summary"]["mean_accuracy"] == pytest.approx(2 / 3)


def test_numeric_tolerances_from_the_command_line(run, tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", {"total": 100.0, "tax": "19.00"})
    out = _write(tmp_path / "out.json", {"total": 100.004, "tax": 19.5})
    cfg = _write(tmp_path / "cfg.json", {"total": "numeric", "tax": "NUMERIC"})
    default = run("json-eval", gt, out, "-s", cfg, "--format", "json")
    assert default.exit_code == 0, default.output
    (doc,) = json.loads(default.stdout)["documents"]
    # defaults rel 1e-6, abs 0: 0.004 > 1e-4 and 0.5 > 1.9e-5, both wrong
    assert doc["accuracy"] == 0.0
    assert doc["breakdown"]["numeric_tolerance"] == {"rel_tol": 1e-6, "abs_tol": 0.0}
    args = ("--numeric-rel-tol", "1e-4", "--numeric-abs-tol", "0.5")
    loose = run("json-eval", gt, out, "-s", cfg, *args, "--format", "json")
    assert loose.exit_code == 0, loose.output
    (doc,) = json.loads(loose.stdout)["documents"]
    # total: 0.004 <= max(0.5, 0.01); tax: 0.5 <= max(0.5, 0.0019): both right
    assert doc["accuracy"] == 1.0
    reasons = [f["reason"] for f in doc["breakdown"]["fields"]]
    assert reasons == [
        "NUMERIC: |100.004 − 100.0| = 0.004 <= 0.5 = max(abs_tol 0.5, rel_tol 0.0001 × 100)",
        "NUMERIC: |19.5 − '19.00'| = 0.5 <= 0.5 = max(abs_tol 0.5, rel_tol 0.0001 × 19)",
    ]
    negative = run("json-eval", gt, out, "--numeric-abs-tol", "-1")
    assert negative.exit_code == 2


def test_directories_are_paired_by_name_and_bad_documents_do_not_stop_the_batch(
    run, tmp_path: Path
) -> None:
    gt_dir, out_dir = tmp_path / "gt", tmp_path / "out"
    _write(gt_dir / "a.json", {"x": 1, "y": "2024-01-02"})
    _write(out_dir / "a.json", {"x": 1, "y": "2024-01-03"})
    _write(gt_dir / "broken.json", {"x": 1})
    _write(out_dir / "broken.json", '{"x": 1,,}')
    _write(gt_dir / "lonely.json", {"x": 1})
    _write(gt_dir / "b.json", {"x": 5})
    _write(out_dir / "b.json", {"x": 5, "z": 0})
    result = run("json-eval", gt_dir, out_dir, "--out", tmp_path / "rows.jsonl")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in _rows(tmp_path / "rows.jsonl")}
    assert list(rows) == ["a.json", "b.json", "broken.json", "lonely.json"]
    assert rows["a.json"]["accuracy"] == 0.5  # y is a date -> EXACT, differs
    assert rows["b.json"]["hallucination"] == 0.5  # z / {x, z}
    broken = rows["broken.json"]
    assert broken["rqs"] is None and broken["breakdown"] is None
    assert broken["error"].startswith(f"{out_dir / 'broken.json'}: malformed JSON at line 1")
    assert rows["lonely.json"]["error"] == (
        f"{gt_dir / 'lonely.json'}: no output {out_dir / 'lonely.json'}"
    )
    assert "malformed JSON" in result.stderr
    assert "2 error(s)" in result.stdout
    # per-field aggregates: y wrong once, z hallucinated once
    assert "Fields most often missing, hallucinated or wrong" in result.stdout


def test_one_jsonl_file_with_both_documents(run, tmp_path: Path) -> None:
    pairs = _write(
        tmp_path / "pairs.jsonl",
        "\n".join(
            [
                json.dumps({"id": "walkthrough", "expected_json": GT, "output_json": AIO}),
                json.dumps({"gt_json": {"a": 1}, "extracted_json": {"a": 2}}),
                '{"expected_json": {"a": 1}, "output_json": ',
            ]
        ),
    )
    cfg = _write(tmp_path / "cfg.json", CONFIG)
    result = run("json-eval", pairs, "--strategies", cfg, "--out", tmp_path / "r.jsonl")
    assert result.exit_code == 0, result.output
    rows = _rows(tmp_path / "r.jsonl")
    assert [r["name"] for r in rows] == ["walkthrough", "line 2", "line 3"]
    assert rows[0]["rqs"] == 0.7375
    assert rows[1]["accuracy"] == 0.0
    assert rows[2]["error"].startswith(f"{pairs}:3: malformed JSON")


def test_field_aggregates_table(run, tmp_path: Path) -> None:
    pairs = _write(
        tmp_path / "pairs.jsonl",
        "\n".join(
            json.dumps({"expected_json": {"sku": 1, "qty": 2}, "output_json": {"sku": 1}})
            for _ in range(3)
        ),
    )
    result = run("json-eval", pairs, "--format", "json")
    fields = {f["field"]: f for f in json.loads(result.stdout)["fields"]}
    assert (fields["qty"]["missing"], fields["qty"]["expected"]) == (3, 3)
    assert fields["sku"]["missing"] == 0
    table = run("json-eval", pairs)
    assert "│ qty " in table.stdout and "3/3" in table.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["missing-gt.json", "missing-out.json"],
        ["nowhere.jsonl"],
    ],
)
def test_nonexistent_paths_exit_2(run, tmp_path: Path, args: list[str]) -> None:
    result = run("json-eval", *[tmp_path / a for a in args])
    assert result.exit_code == 2
    assert "no such file or directory" in result.stderr


def test_file_and_directory_mixed_exit_2(run, tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", GT)
    result = run("json-eval", gt, tmp_path)
    assert result.exit_code == 2
    assert "must both be files or both be directories" in result.stderr


def test_invalid_strategy_config_exits_2_naming_the_field(run, tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt.json", GT)
    out = _write(tmp_path / "out.json", AIO)
    cfg = _write(tmp_path / "cfg.json", {"bio": "MEANING"})
    result = run("json-eval", gt, out, "--strategies", cfg)
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "field 'bio': unknown strategy 'MEANING'" in message
    assert "valid values: EXACT, FUZZY, SEMANTIC, IGNORE" in message


def test_json_strategies_validate(run, tmp_path: Path) -> None:
    good = _write(tmp_path / "good.json", {"a": "exact", "b.c": "IGNORE", "items.*.d": "FUZZY"})
    result = run("json-strategies", "validate", good)
    assert result.exit_code == 0
    assert "valid (1 EXACT, 1 IGNORE, 1 FUZZY)" in result.stdout
    bad = _write(tmp_path / "bad.json", {"a": "EXACTLY"})
    result = run("json-strategies", "validate", bad)
    assert result.exit_code == 2
    assert "did you mean EXACT?" in " ".join(result.stderr.split())


def test_json_strategies_export_from_a_document(run, tmp_path: Path) -> None:
    doc = _write(
        tmp_path / "doc.json",
        {
            "name": "Ann",
            "born": "1990-05-01",
            "address": {"city": "Oslo"},
            "n": None,
            "items": [{"sku": "A", "qty": 1}],
        },
    )
    target = tmp_path / "cfg.json"
    result = run("json-strategies", "export", "--from-doc", doc, "--out", target)
    assert result.exit_code == 0, result.output
    assert json.loads(target.read_text()) == {
        "name": "SEMANTIC",
        "born": "EXACT",
        "address.city": "SEMANTIC",
        "items.*.sku": "SEMANTIC",
        "items.*.qty": "EXACT",
    }
    # the exported file is a valid --strategies input
    assert run("json-strategies", "validate", target).exit_code == 0
    printed = run("json-strategies", "export", "--from-doc", doc, "--flat")
    assert json.loads(printed.stdout)["address"] == "EXACT"


def test_shipped_example_set(run, tmp_path: Path) -> None:
    result = run(
        "json-eval",
        EXAMPLES / "gt",
        EXAMPLES / "out",
        "--strategies",
        EXAMPLES / "strategies.json",
        "--out",
        tmp_path / "rows.jsonl",
    )
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in _rows(tmp_path / "rows.jsonl")}
    assert set(rows) == {"walkthrough.json", "invoice.json", "contact.json", "ticket.json"}
    walk = rows["walkthrough.json"]
    assert (walk["completeness"], walk["accuracy"], walk["rqs"]) == (0.75, 1.0, 0.7375)
    invoice = rows["invoice.json"]["breakdown"]
    assert invoice["buckets"]["aio_missing_or_null"] == ["customer.address.postcode"]
    assert invoice["buckets"]["extra_keys"] == ["tax"]
    assert invoice["buckets"]["wrong"] == ["customer.name", "items.1.sku"]
    assert all(row["error"] is None for row in rows.values())


def test_names_with_markup_characters_are_shown_verbatim(run, tmp_path: Path) -> None:
    gt = _write(tmp_path / "gt" / "[bold]x.json", {"a": 1})
    _write(tmp_path / "out" / "[bold]x.json", {"a": 1, "[red]k": 2})
    result = run("json-eval", gt.parent, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "[bold]x.json" in result.stdout
    assert "[red]k" in result.stdout


def test_documents_json_refuses_are_error_rows_not_a_crash(run, tmp_path: Path) -> None:
    # json.loads raises ValueError (a 5,000-digit number) or RecursionError (deep nesting),
    # not JSONDecodeError: these used to end the whole batch with a traceback
    _write(tmp_path / "gt" / "big.json", '{"a": ' + "1" * 5000 + "}")
    _write(tmp_path / "out" / "big.json", {"a": 1})
    _write(tmp_path / "gt" / "deep.json", "[" * 100_000 + "]" * 100_000)
    _write(tmp_path / "out" / "deep.json", {"a": 1})
    _write(tmp_path / "gt" / "ok.json", {"a": 1})
    _write(tmp_path / "out" / "ok.json", {"a": 1})
    rows_path = tmp_path / "rows.jsonl"
    result = run("json-eval", tmp_path / "gt", tmp_path / "out", "--out", rows_path)
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in _rows(rows_path)}
    assert rows["ok.json"]["accuracy"] == 1.0
    assert "unreadable JSON: Exceeds the limit (4300 digits)" in rows["big.json"]["error"]
    assert rows["deep.json"]["error"].endswith("JSON nested too deeply to parse")


def test_rows_are_strict_json_when_documents_hold_nan(run, tmp_path: Path) -> None:
    # Python's json writes bare NaN/Infinity, which strict parsers (jq, JavaScript,
    # PostgreSQL) reject; the documents' own non-finite numbers are written as strings
    pairs = _write(
        tmp_path / "pairs.jsonl",
        '{"expected_json": {"a": NaN, "b": 1}, "output_json": {"a": NaN, "b": Infinity}}\n',
    )
    rows_path = tmp_path / "rows.jsonl"
    result = run("json-eval", pairs, "--out", rows_path, "--format", "json")
    assert result.exit_code == 0, result.output

    def refuse(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    (row,) = [
        json.loads(line, parse_constant=refuse) for line in rows_path.read_text().splitlines()
    ]
    fields = {f["field"]: f for f in row["breakdown"]["fields"]}
    assert (fields["a"]["expected"], fields["a"]["output"], fields["a"]["score"]) == (
        "NaN",
        "NaN",
        1.0,
    )
    assert (fields["b"]["output"], fields["b"]["score"]) == ("Infinity", 0.0)
    printed = json.loads(result.stdout, parse_constant=refuse)
    assert printed["summary"]["mean_accuracy"] == 0.5


def test_json_strategies_export_refuses_unreadable_documents(run, tmp_path: Path) -> None:
    deep = _write(tmp_path / "deep.json", "[" * 100_000 + "]" * 100_000)
    result = run("json-strategies", "export", "--from-doc", deep)
    assert result.exit_code == 2
    assert "JSON nested too deeply to parse" in result.stderr
    nested = _write(tmp_path / "nested.json", '{"k":' * 600 + "1" + "}" * 600)
    result = run("json-strategies", "export", "--from-doc", nested)
    assert result.exit_code == 2
    assert "nests deeper than 500 levels" in " ".join(result.stderr.split())
