"""Bad input gets a clear error naming file, line and field, and loses nothing.

Each test feeds one kind of malformed input (to the readers, the config, the
embedding cache) that once ended in a traceback, a silent wrong result or lost records;
the CLI's are in tests/test_robustness_cli.py.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from tests.robustness_helpers import _lines, runner

from assay.cli import app
from assay.core.config import AssayWarning, ConfigError, load_config
from assay.core.sample import Sample
from assay.evaluation.runner import evaluate
from assay.inputs.read import read_samples
from assay.inputs.records import InputErrors
from assay.models.cache import EmbeddingCache
from assay.outputs.sinks import JsonlSink


def _texts(errors) -> list[str]:
    return [str(e) for e in errors]


# ---- JSONL -----------------------------------------------------------------------------


def test_invalid_utf8_bytes_make_one_line_an_error_not_the_file(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"id": "a", "answer": "ok"}\n{"id": "b", "answer": "caf\xe9"}\n{"id": "c"')
    path.write_bytes(path.read_bytes() + b', "answer": "fine"}\n')
    samples, errors = read_samples(path)
    assert [s.id for s in samples] == ["a", "c"]
    (error,) = _texts(errors)
    assert error.startswith(f"{path} line 2, field 'answer': is not valid UTF-8 text")


def test_bom_crlf_utf16_and_non_object_lines(tmp_path):
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b'\xef\xbb\xbf{"id": 1, "answer": "a"}\r\n{"id": 2, "answer": "b"}\r\n')
    assert [(s.id, s.response) for s in read_samples(bom)[0]] == [("1", "a"), ("2", "b")]
    utf16 = tmp_path / "u16.jsonl"
    utf16.write_text('{"id": 1, "answer": "été"}\n', encoding="utf-16")  # with a BOM
    assert [s.response for s in read_samples(utf16)[0]] == ["été"]
    odd = _lines(tmp_path / "odd.jsonl", ["[1, 2]", "7", "null", '"text"', {"answer": "x"}])
    samples, errors = read_samples(odd)
    assert [s.response for s in samples] == ["x"]
    assert [e.message for e in errors] == [
        "expected a JSON object, got list",
        "expected a JSON object, got int",
        "expected a JSON object, got null",
        "expected a JSON object, got str",
    ]


def test_a_5_mb_line_and_a_too_deeply_nested_line(tmp_path):
    big = "word " * 1_000_000  # 5,000,000 characters
    path = _lines(tmp_path / "d.jsonl", ["[" * 100_000 + "]" * 100_000, {"answer": big}])
    samples, errors = read_samples(path)
    assert len(samples[0].response) == 5_000_000
    assert _texts(errors) == [f"{path} line 1: not usable JSON: nested too deeply"]


def test_duplicate_keys_with_different_values_are_an_error(tmp_path):
    path = _lines(
        tmp_path / "d.jsonl",
        ['{"id": "a", "answer": "x", "answer": "y"}', '{"id": "b", "answer": "x", "answer": "x"}'],
    )
    samples, errors = read_samples(path)
    assert [s.id for s in samples] == ["b"]  # an equal repeat is harmless
    assert _texts(errors) == [
        f"{path} line 1, field 'answer': appears twice in one object with different values: "
        "keep one"
    ]


def test_an_alias_and_its_canonical_name_together(tmp_path):
    path = _lines(
        tmp_path / "d.jsonl",
        [
            {"id": "same", "answer": "Paris", "response": "Paris"},
            {"id": "differ", "answer": "Paris", "response": "Lyon"},
            {"id": "one-empty", "answer": None, "response": "Lyon"},
        ],
    )
    samples, errors = read_samples(path)
    assert [(s.id, s.response) for s in samples] == [("same", "Paris"), ("one-empty", "Lyon")]
    assert _texts(errors) == [
        f"{path} line 2, field 'response': 'answer' and 'response' are both given, with "
        "different values; both name the field 'response': keep one"
    ]


def test_numbers_where_text_is_expected_are_text_and_booleans_are_not(tmp_path):
    path = _lines(
        tmp_path / "d.jsonl",
        [
            {"id": 7, "question": "6 x 7?", "answer": 42, "expected": 42.5},
            {"id": 8, "answer": "x", "expected_sources": [3, 7], "contexts": "one context"},
            {"id": 9, "answer": True},
            {"id": 10, "answer": "x", "contexts": ["a", None]},
        ],
    )
    samples, errors = read_samples(path)
    assert [(s.id, s.response, s.expected) for s in samples] == [
        ("7", "42", "42.5"),
        ("8", "x", None),
    ]
    assert samples[1].expected_sources == ["3", "7"]
    assert samples[1].contexts == ["one context"]
    messages = _texts(errors)
    assert messages[0].startswith(f"{path} line 3, field 'answer': Input should be a valid string")
    assert messages[1].startswith(
        f"{path} line 4, field 'contexts.1': Input should be a valid string (got null)"
    )


def test_bad_timings_tags_and_metadata_are_field_errors_not_crashes(tmp_path):
    path = _lines(
        tmp_path / "d.jsonl",
        [
            {"id": "a", "answer": "x", "total_latency_ms": [1]},  # was a TypeError
            {"id": "b", "answer": "x", "duration_ms": "slow"},
            {"id": "c", "answer": "x", "tags": "prod"},  # was a TypeError
            {"id": "d", "answer": "x", "duration": float("inf")},
            {"id": "e", "answer": "x", "tags": None, "metadata": None},
            {"id": "f", "answer": "x", "method": "local", "tags": {"method": "global"}},
            {"id": "g", "answer": "x", "duration": 1.0, "duration_ms": 250},
            {"id": "h", "answer": "x", "duration_ms": 250, "method": "local"},
        ],
    )
    samples, errors = read_samples(path)
    assert [(s.id, s.duration, s.tags) for s in samples] == [
        ("e", None, {}),
        ("h", 0.25, {"method": "local"}),
    ]
    assert _texts(errors) == [
        f"{path} line 1, field 'total_latency_ms': should be a non-negative, finite number "
        "of milliseconds (got [1])",
        f"{path} line 2, field 'duration_ms': should be a non-negative, finite number of "
        "milliseconds (got 'slow')",
        f"{path} line 3, field 'tags': Input should be a valid dictionary (got 'prod')",
        f"{path} line 4, field 'duration': Input should be a finite number (got inf)",
        f"{path} line 6, field 'method': 'method' is given both as a key ('local') and in "
        "tags ('global'): keep one",
        f"{path} line 7, field 'duration_ms': 'duration' and 'duration_ms' are both given, "
        "with different values; both name the field 'duration': keep one",
    ]


def test_a_record_with_nothing_to_score_is_an_error(tmp_path):
    path = _lines(
        tmp_path / "d.jsonl", [{"Antwort": "x"}, {}, {"id": "only-id"}, {"answer": "kept"}]
    )
    samples, errors = read_samples(path)
    assert [s.response for s in samples] == ["kept"]
    assert [e.line for e in errors] == [1, 2, 3]
    assert "nothing to score: no known field with a value (got keys 'Antwort')" in str(errors[0])


def test_capitalised_and_spaced_column_names_find_their_field(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("ID,Question,Answer,Ground Truth,Notes\n1,q,a,g,n\n", encoding="utf-8")
    (sample,), errors = read_samples(path)
    assert errors == []
    assert (sample.id, sample.query, sample.response, sample.expected) == ("1", "q", "a", "g")
    assert sample.metadata == {"Notes": "n"}


# ---- CSV -------------------------------------------------------------------------------


def test_csv_semicolon_and_tab_delimiters(tmp_path):
    semi = tmp_path / "d.csv"
    semi.write_text('id;question;answer\n1;q;"a; b"\n', encoding="utf-8")
    assert [(s.query, s.response) for s in read_samples(semi)[0]] == [("q", "a; b")]
    tsv = tmp_path / "d.tsv"
    tsv.write_text("id\tanswer\n1\ta, b\n", encoding="utf-8")
    assert [s.response for s in read_samples(tsv)[0]] == ["a, b"]


def test_csv_rows_missing_extra_blank_and_multiline(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(
        "id,question,answer,contexts,extra\n"
        '1,"two\nlines",a,  ,x\n'  # a quoted newline; a blank list cell is absent
        "2,q\n"  # a short row: the missing cells are absent
        "\n"
        "3,q,a,c,x,surplus\n"  # one cell too many
        ",,,,\n",  # an empty row
        encoding="utf-8",
    )
    samples, errors = read_samples(path)
    assert [(s.id, s.query, s.response, s.contexts) for s in samples] == [
        ("1", "two\nlines", "a", None),
        ("2", "q", None, None),
    ]
    assert samples[0].metadata == {"extra": "x"}
    # rows are numbered by the line they start on: the first record spans lines 2-3
    assert [(e.line, e.message[:40]) for e in errors] == [
        (6, "more cells than header columns (6 cells,"),
        (7, "nothing to score: no known field with a "),
    ]


def test_csv_duplicate_columns_and_broken_quotes(tmp_path):
    dup = tmp_path / "dup.csv"
    dup.write_text("id,answer,answer\n1,a,a\n2,a,b\n", encoding="utf-8")
    samples, errors = read_samples(dup)
    assert [s.id for s in samples] == ["1"]
    assert _texts(errors) == [
        f"{dup} line 3, field 'answer': the column appears twice in the header, with "
        "different values in this row: keep one"
    ]
    quotes = tmp_path / "quotes.csv"
    quotes.write_text('id,answer\n1,"a"b\n2,ok\n3,"never closed\n4,lost?\n', encoding="utf-8")
    samples, errors = read_samples(quotes)
    assert [s.id for s in samples] == ["2"]
    assert [(e.line, e.message) for e in errors] == [
        (2, "not valid CSV: ',' expected after '\"'"),
        (4, "not valid CSV: unexpected end of data"),
    ]


def test_csv_cells_longer_than_the_csv_module_default(tmp_path):
    path = tmp_path / "d.csv"
    context = "x" * 200_000  # the csv module stops at 131,072 characters by default
    path.write_text(f'id,answer,contexts\n1,a,"{context}"\n', encoding="utf-8")
    (sample,), errors = read_samples(path)
    assert errors == [] and sample.contexts == [context]


def test_csv_with_bad_bytes_empty_and_header_only(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b"id,answer\n1,a\n2,\xff\n3,c\n")
    samples, errors = read_samples(path)
    assert [s.id for s in samples] == ["1", "3"]
    assert [(e.line, e.field) for e in errors] == [(3, "answer")]
    for text in ("", "id,question,answer\n"):
        path.write_text(text, encoding="utf-8")
        assert read_samples(path) == ([], [])


# ---- JSON, paths -----------------------------------------------------------------------


def test_json_file_shapes(tmp_path):
    path = tmp_path / "d.json"
    path.write_text('{"id": 1, "answer": "a"}', encoding="utf-8")
    with pytest.raises(InputErrors, match=r"got an object; for one sample, wrap it in \[ \]"):
        read_samples(path)
    path.write_text("  \n", encoding="utf-8")
    with pytest.raises(InputErrors, match="the file is empty"):
        read_samples(path)
    # JSONL saved under a .json name is read as the JSONL it is
    path.write_text('{"id": 1, "answer": "a"}\n{"id": 2, "answer": false}\n', encoding="utf-8")
    samples, errors = read_samples(path)
    assert [s.id for s in samples] == ["1"]
    assert str(errors[0]).startswith(f"{path} line 2, field 'answer': Input should be")


def test_a_directory_or_an_unreadable_file_is_a_clear_error(tmp_path, monkeypatch):
    folder = tmp_path / "data.jsonl"
    folder.mkdir()
    with pytest.raises(InputErrors, match=r"data\.jsonl: is a directory"):
        read_samples(folder)
    locked = _lines(tmp_path / "locked.jsonl", [{"answer": "a"}])
    real_open = Path.open

    def no_permission(self, *args, **kwargs):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", no_permission)
    with pytest.raises(InputErrors, match=r"locked\.jsonl: cannot read: Permission denied"):
        read_samples(locked)


def test_python_api_names_the_bad_item():
    with pytest.raises(InputErrors, match=r"<data> item 2, field 'answer': Input should be"):
        evaluate([{"answer": "a"}, {"answer": ["not", "text"]}], metrics=["exact_match"])
    with pytest.raises(InputErrors, match="item 1: expected a Sample or a dict, got str"):
        evaluate(["just text"], metrics=["exact_match"])


# ---- configuration ---------------------------------------------------------------------


def test_config_file_problems_are_config_errors(tmp_path, monkeypatch):
    toml = tmp_path / "assay.toml"
    toml.write_bytes(b"batch_size = 4\n\xff\n")
    with pytest.raises(ConfigError, match=r"assay.toml: not valid UTF-8 \(byte 0xff at offset 15"):
        load_config(project_dir=tmp_path)
    toml.write_text('embedder = "use-multilingul"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown embedder 'use-multilingul'"):
        load_config(project_dir=tmp_path)
    toml.write_text("thresholds = 5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"assay.toml: 'thresholds' must be a table"):
        load_config({"thresholds": {"bleu": 0.3}}, project_dir=tmp_path)
    toml.write_text("batch_size = 4\n", encoding="utf-8")
    monkeypatch.setenv("SEMANTIC_SIMILARITY_THRESHOLD", "2")
    with pytest.raises(ConfigError) as caught:
        load_config(project_dir=tmp_path)
    assert str(caught.value) == (
        "invalid configuration: environment variable 'SEMANTIC_SIMILARITY_THRESHOLD': "
        "Input should be less than or equal to 1"
    )


# ---- the embedding cache -----------------------------------------------------------------


def _cache_warning(path) -> tuple[EmbeddingCache, str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = EmbeddingCache(path, timeout=0.2)
        cache.put_many("m", {"hello": np.ones(3, dtype=np.float32)})
    messages = [str(w.message) for w in caught if issubclass(w.category, AssayWarning)]
    assert len(messages) == 1, messages
    return cache, messages[0]


def test_the_cache_memory_starts_over_when_full(tmp_path, monkeypatch):
    """A streamed run embeds any number of texts: the vectors held in memory stay under
    the limit, in memory only and on disk (which keeps them all)."""
    import assay.models.cache as cache_module

    monkeypatch.setattr(cache_module, "MEMORY_LIMIT", 10)
    for cache in (EmbeddingCache(None), EmbeddingCache(tmp_path / "embeddings.sqlite")):
        for start in range(0, 35, 7):
            cache.put_many(
                "m", {f"t{i}": np.full(3, i, np.float32) for i in range(start, start + 7)}
            )
            assert len(cache._memory) <= 10
        held = cache.get_many("m", [f"t{i}" for i in range(35)])
        assert len(cache._memory) <= 10  # read back from disk: still under the limit
        assert sorted(held, key=lambda t: int(t[1:])) == (
            [f"t{i}" for i in range(35)] if cache.on_disk else [f"t{i}" for i in range(28, 35)]
        )
        assert all(float(held[t][0]) == float(t[1:]) for t in held)
        cache.close()


def test_a_corrupt_cache_file_falls_back_to_memory_with_a_warning(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    path.write_bytes(b"not a database " * 100)
    cache, message = _cache_warning(path)
    assert message == (
        f"the embedding cache {path} cannot be opened: file is not a database (the file is "
        "corrupt: delete it and it is rebuilt); continuing with an in-memory cache for this run"
    )
    assert not cache.on_disk
    assert cache.get_many("m", ["hello"])["hello"].tolist() == [1.0, 1.0, 1.0]


def test_an_unwritable_cache_dir_falls_back_to_memory(tmp_path):
    (tmp_path / "file").write_text("x")
    cache, message = _cache_warning(tmp_path / "file" / "embeddings.sqlite")
    assert "cannot be opened" in message and "set ASSAY_CACHE_DIR to a writable folder" in message
    assert cache.get_many("m", ["hello"])["hello"].tolist() == [1.0, 1.0, 1.0]


def test_a_cache_locked_by_another_process_does_not_stop_the_run(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    EmbeddingCache(path).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        cache, message = _cache_warning(path)
    finally:
        holder.kill()
        holder.wait()
    assert message.startswith(f"the embedding cache {path} cannot be written: database is locked")
    assert cache.get_many("m", ["hello"])["hello"].tolist() == [1.0, 1.0, 1.0]


def test_a_damaged_cache_row_is_computed_again(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    cache = EmbeddingCache(path)
    cache.put_many("m", {"hello": np.ones(3, dtype=np.float32)})
    cache.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE embeddings SET vec = x'0102'")  # 2 bytes for a 3-d vector
    assert EmbeddingCache(path).get_many("m", ["hello"]) == {}


def test_an_unwritable_cache_dir_does_not_stop_a_judged_run(env, monkeypatch):
    from judge_server import JudgeServer

    (env / "file").write_text("x")
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(env / "file" / "cache"))
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", "test-key")
    data = _lines(env / "d.jsonl", [{"response": "Paris.", "expected": "Paris"}])
    with JudgeServer() as server:
        result = runner.invoke(
            app,
            [
                *("evaluate", str(data), "-m", "answer_classification", "--format", "json"),
                *("--judge-url", server.url, "--judge-model", "scripted"),
            ],
        )
        assert server.calls == 1
    assert result.exit_code == 0, result.output
    assert (
        f"warning: the judge cache {env / 'file' / 'cache' / 'judge.sqlite'} cannot be opened: "
        "Not a directory; judging without a cache"
    ) in " ".join(result.output.split())
    payload = json.loads(result.stdout[result.stdout.index("{") :])
    assert payload["metrics"][0]["methods"] == {"llm": 1}


def test_jsonl_sink_append_ends_a_cut_line_first(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_text('{"id": "s0"}\n{"id": "s1", "cut', encoding="utf-8")
    sink = JsonlSink(path, append=True)
    sink.write({"id": "s2"}, Sample(id="s2"), {})
    sink.close()
    assert path.read_text(encoding="utf-8").splitlines() == [
        '{"id": "s0"}',
        '{"id": "s1", "cut',
        '{"id":"s2","evidence":{}}',
    ]
