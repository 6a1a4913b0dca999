"""Reading by URL and in pieces (`assay.inputs.locations`): the same samples and the same messages
as `read_samples` on the same file, whatever the pieces; one clear error for a location
that cannot be read. No Ray here (tests/test_ray_executor.py runs the pieces as tasks)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.inputs.locations import local_path, location_sha256, read_location, shown_location
from assay.inputs.read import read_samples
from assay.inputs.records import InputErrors

pa = pytest.importorskip("pyarrow")
#: what json.loads says of "{broken"
BROKEN = "not valid JSON: Expecting property name enclosed in double quotes at column 2"
pq = pytest.importorskip("pyarrow.parquet")


def messy_jsonl(path: Path) -> Path:
    """60 lines: CRLF for the first 20, a lone CR ending line 40 (a line break too, as
    Python reads text), a UTF-8 byte-order mark, and at known lines: invalid JSON (7, 45),
    blank lines (12, 50), an undecodable byte (33), a key given twice with different
    values (41), a record with no known field (58)."""
    lines = [
        json.dumps({"id": f"s{i}", "response": f"réponse {i}", "expected": "x"})
        for i in range(1, 61)
    ]
    lines[6] = lines[44] = "{broken"
    lines[11] = lines[49] = ""
    lines[32] = '{"id": "s33", "response": "bad \xff byte"}'
    lines[40] = '{"response": "a", "response": "b"}'
    lines[57] = '{"colour": "red"}'
    text = "\r\n".join(lines[:20]) + "\r\n" + "\n".join(lines[20:40]) + "\r" + "\n".join(lines[40:])
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8").replace("\xff".encode(), b"\xff"))
    return path


def same_reading(path: Path, **options: object) -> tuple[int, list[str]]:
    """Read ``path`` with `read_samples` and by its file:// URL in pieces of several sizes:
    equal samples, and equal messages but for the name (the URL instead of the path)."""
    samples, errors = read_samples(path)
    want = [str(e) for e in errors]
    url = path.absolute().as_uri()
    for piece_bytes in (None, 1, 64, 700, 10**6):
        got_samples, got_errors = read_location(url, piece_bytes=piece_bytes, **options)
        assert got_samples == samples, piece_bytes
        assert [str(e).replace(url, str(path)) for e in got_errors] == want, piece_bytes
        # a plain path in pieces: the very same messages
        in_pieces = read_location(path, piece_bytes=piece_bytes, **options)
        assert (in_pieces[0], [str(e) for e in in_pieces[1]]) == (samples, want)
    return len(samples), want


def test_jsonl_in_pieces_keeps_every_sample_and_line_number(tmp_path: Path) -> None:
    path = messy_jsonl(tmp_path / "d.jsonl")
    count, messages = same_reading(path)
    assert count == 60 - 7  # 2 broken, 2 blank, 1 undecodable, 1 duplicate key, 1 nothing
    lines = [int(m.split(" line ")[1].split(":")[0].split(",")[0]) for m in messages]
    assert lines == [7, 33, 41, 45, 58]
    assert messages[0] == f"{path} line 7: {BROKEN}"
    assert messages[2] == (
        f"{path} line 41, field 'response': appears twice in one object with different "
        "values: keep one"
    )


def test_csv_json_parquet_and_utf16_by_url_read_as_from_a_path(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    csv.write_text('response,expected,contexts\n"two\nlines",x,"[1"\nq,w,"[""c""]"\n,,\n')
    count, messages = same_reading(csv)
    assert count == 1  # only "q": the first row's contexts are broken JSON, the last is empty
    assert messages[0] == (
        f"{csv} line 2, field 'contexts': column holds invalid JSON: Expecting ',' delimiter"
    )
    assert messages[1].startswith(f"{csv} line 5: nothing to score: no known field")
    array = tmp_path / "d.json"
    array.write_text(json.dumps([{"response": "a"}, {"colour": 1}, 3]))
    assert same_reading(array)[0] == 1
    utf16 = tmp_path / "u.jsonl"
    utf16.write_bytes(
        "\n".join(['{"response": "ü"}', "{bad", '{"response": "z"}']).encode("utf-16")
    )
    assert same_reading(utf16) == (
        2,
        [f"{utf16} line 2: {BROKEN}"],
    )
    rows = [
        {"id": f"p{i}", "response": f"r{i}" if i % 9 else None, "tags": None} for i in range(300)
    ]
    rows[150]["tags"] = {"k": "v"}
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=37)  # 9 row groups
    count, messages = same_reading(tmp_path / "d.parquet")
    # rows 1, 10, ..., 298 have no response and no other field: 34 errors, numbered from 1
    assert count == 300 - 34 and len(messages) == 34
    assert messages[-1].startswith(f"{tmp_path / 'd.parquet'} row 298: nothing to score")


def test_strict_raises_the_first_error_in_file_order(tmp_path: Path) -> None:
    path = messy_jsonl(tmp_path / "d.jsonl")
    with pytest.raises(InputErrors) as local:
        read_samples(path, strict=True)
    with pytest.raises(InputErrors) as pieces:
        read_location(path, strict=True, piece_bytes=100)
    assert str(pieces.value) == str(local.value) == f"{path} line 7: {BROKEN}"


def test_a_location_that_cannot_be_read_is_one_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InputErrors) as caught:
        read_samples("http://user:secret@example.com/d.jsonl")
    assert str(caught.value) == (
        "http://example.com/d.jsonl: cannot be read: pyarrow has no file system for http:// "
        "URLs (it reads file://, s3://, gs://, abfs:// and hdfs://); copy the file to one of those"
    )
    missing = (tmp_path / "none.jsonl").as_uri()
    with pytest.raises(FileNotFoundError, match=f"^{missing}: no such file$"):
        read_samples(missing)
    with pytest.raises(InputErrors, match="is a directory"):
        read_samples(tmp_path.as_uri())
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(
        InputErrors, match=r"unknown format: use \.jsonl, \.csv, \.json or \.parquet"
    ):
        read_samples((tmp_path / "d.txt").as_uri())


def test_url_helpers_and_the_dataset_hash(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_bytes(b'{"response": "a"}\n')
    assert local_path(data.as_uri()) == data and local_path("s3://b/k.jsonl") is None
    assert shown_location("s3://KEY:SECRET@bucket/d.jsonl?region=x") == "s3://bucket/d.jsonl"
    # the sha256 of the 18 bytes, by hashlib: the same by path and by URL
    digest = hashlib.sha256(b'{"response": "a"}\n').hexdigest()
    assert location_sha256(data) == location_sha256(data.as_uri()) == digest


def test_the_local_executor_reads_a_file_url_through_the_cli(env: Path) -> None:
    data = env / "d.jsonl"
    data.write_text(
        '{"response": "a", "expected": "a"}\n{broken\n{"response": "b", "expected": "a"}\n'
    )
    url = data.as_uri()
    args = [
        "evaluate",
        url,
        "-m",
        "exact_match",
        "--format",
        "json",
        "--store",
        "--db",
        str(env / "r.db"),
    ]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert f"skipped: {url} line 2: not valid JSON" in result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["metrics"][0]["mean"] == 0.5
    bad = CliRunner().invoke(
        app, ["evaluate", "ftp://host/d.jsonl", "-m", "exact_match"], env={"COLUMNS": "300"}
    )
    assert bad.exit_code == 2
    assert (
        "ftp://host/d.jsonl: cannot be read: pyarrow has no file system for ftp:// URLs"
        in bad.output
    )
