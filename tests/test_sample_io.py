import json

import pandas as pd
import pytest

from assay.core.sample import Sample
from assay.inputs.read import read_samples
from assay.inputs.records import InputErrors, samples_from_dataframe


def test_specification_field_names_map_to_canonical_fields():
    chatbot_hub = Sample.model_validate(
        {"query": "q", "response": "r", "expected_response": "e", "retrieved_docs": ["d1"]}
    )
    rag_evaluation = Sample.model_validate(
        {"question": "q", "answer": "r", "ground_truth": "e", "contexts": ["d1"]}
    )
    deepeval = Sample.model_validate(
        {"input": "q", "actual_output": "r", "expected_output": "e", "retrieval_context": ["d1"]}
    )
    for s in (chatbot_hub, rag_evaluation, deepeval):
        assert (s.query, s.response, s.expected, s.contexts) == ("q", "r", "e", ["d1"])


def test_unknown_keys_are_kept_in_metadata_and_tag_shorthands_become_tags():
    s = Sample.model_validate(
        {"id": 7, "answer": "a", "source_file": "x.pdf", "method": "local_search"}
    )
    assert s.id == "7"
    assert s.metadata == {"source_file": "x.pdf"}
    assert s.tags == {"method": "local_search"}


def test_millisecond_timings_are_converted_to_seconds():
    s = Sample.model_validate({"llm_latency_ms": 1200, "total_latency_ms": 4230})
    assert s.llm_latency == pytest.approx(1.2)
    assert s.duration == pytest.approx(4.23)


def test_jsonl_bad_lines_are_reported_with_line_and_field_and_others_kept(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"id": "a", "response": "fine", "expected": "fine"}),
                "{not json",
                json.dumps({"id": "c", "response": True}),
                json.dumps(["a", "list"]),
                "",
                json.dumps({"id": "e", "answer": "ok"}),
            ]
        ),
        encoding="utf-8",
    )
    samples, errors = read_samples(path)
    assert [s.id for s in samples] == ["a", "e"]
    messages = [str(e) for e in errors]
    assert messages[0].startswith(f"{path} line 2: not valid JSON")
    assert messages[1].startswith(
        f"{path} line 3, field 'response': Input should be a valid string"
    )
    assert "also accepted as 'answer'" in messages[1]
    assert messages[2] == f"{path} line 4: expected a JSON object, got list"


def test_strict_mode_raises_at_the_first_bad_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"response": "a"}\n{"response": []}\n{oops\n', encoding="utf-8")
    with pytest.raises(InputErrors, match="line 2, field 'response'"):
        read_samples(path, strict=True)


def test_csv_list_columns_are_json(tmp_path):
    path = tmp_path / "data.csv"
    pd.DataFrame(
        [
            {"id": "1", "question": "q", "answer": "a", "contexts": json.dumps(["c1", "c2"])},
            {"id": "2", "question": "q2", "answer": "a2", "contexts": "only one context"},
            {"id": "3", "question": "q3", "answer": "a3", "contexts": "[broken"},
        ]
    ).to_csv(path, index=False)
    samples, errors = read_samples(path)
    assert [s.contexts for s in samples] == [["c1", "c2"], ["only one context"]]
    assert len(errors) == 1
    assert str(errors[0]).startswith(f"{path} line 4, field 'contexts': column holds invalid JSON")


def test_json_array_and_dataframe_inputs(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"answer": "a"}, {"answer": False}]), encoding="utf-8")
    samples, errors = read_samples(path)
    assert len(samples) == 1
    assert str(errors[0]).startswith(f"{path} item 2, field 'answer': Input should be")
    frame = pd.DataFrame({"question": ["q1", "q2"], "answer": ["a1", None]})
    samples, errors = samples_from_dataframe(frame)
    assert [(s.query, s.response) for s in samples] == [("q1", "a1"), ("q2", None)]
    assert errors == []


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_samples(tmp_path / "nope.jsonl")
    odd = tmp_path / "data.txt"
    odd.write_text("x", encoding="utf-8")
    with pytest.raises(InputErrors, match="unknown format"):
        read_samples(odd)


def test_has_treats_blank_and_empty_as_missing():
    s = Sample(response="  ", contexts=[], expected="x")
    assert not s.has("response")
    assert not s.has("contexts")
    assert s.has("expected")


def test_text_of_only_invisible_characters_is_missing():
    s = Sample(response="\u200b\ufeff \u200d", expected="x\u200b")
    assert not s.has("response")
    assert s.has("expected")


def _same_sample(a: Sample, b: Sample) -> bool:
    return (
        type(a) is type(b)
        and list(a.__dict__.items()) == list(b.__dict__.items())
        and a.model_fields_set == b.model_fields_set
        and a.model_dump_json() == b.model_dump_json()
    )


def test_a_record_of_text_fields_is_built_as_validation_would_build_it(tmp_path):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from assay.inputs.records import _PLAIN_KEYS, _plain_sample

    texts = st.text(st.characters(codec="utf-8"), max_size=20)
    values = texts | st.lists(texts, max_size=3)

    @settings(max_examples=500, deadline=None)
    @given(st.dictionaries(st.sampled_from(sorted(_PLAIN_KEYS)), values, max_size=5))
    def check(record: dict) -> None:
        built = _plain_sample(record)
        fields = [_PLAIN_KEYS[k] for k in record]
        usable = all(
            isinstance(v, str) if holds == 0 else holds == 2 or isinstance(v, list)
            for v, (_, holds) in zip(record.values(), fields, strict=True)
        )
        names = {field for field, _ in fields}
        if not usable or len(names) < len(record) or not names - {"id"}:
            assert built is None  # validation decides: an error, or two names compared
            return
        assert built is not None and _same_sample(built, Sample.model_validate(record))

    check()
    # any other record is validated: numbers, lists of numbers, other fields, a key
    # given twice, a lone surrogate, text where only a list will do
    for record in (
        {"id": 7, "response": "r"},
        {"response": "r", "contexts": [1]},
        {"response": "r", "language": "en"},
        {"response": "\udc80"},
        {"response": "r", "contexts": ["\udc80"]},
        {"response": "r", "tools_used": "search"},
    ):
        assert _plain_sample(record) is None
    path = tmp_path / "d.jsonl"
    lines = [
        '{"id": "a", "question": "q", "answer": "r", "contexts": ["c"], "ground_truth": "e"}',
        '{"id": "b", "response": "r", "response": "s"}',
        '{"id": "c"}',
        '{"id": 4, "answer": "r"}',
        "{}",
        '{"query": "q", "question": "other"}',
    ]
    path.write_text("\n".join(lines) + "\n")
    samples, errors = read_samples(path)
    assert [s.id for s in samples] == ["a", "4"]
    assert _same_sample(samples[0], Sample.model_validate(json.loads(lines[0])))
    assert [(e.line, e.field) for e in errors] == [
        (2, "response"),
        (3, None),
        (5, None),
        (6, "question"),
    ]
    assert all("nothing to score" in e.message for e in errors[1:3])


def test_a_record_parses_as_the_standard_decoder_parses_it() -> None:
    # loads_json reads flat objects without backslashes through orjson; every text must
    # parse to what the standard decoder (with the hook marking a key given twice) gives
    import json as std_json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from assay.inputs.records import _DECODER, loads_json

    keys = st.text(st.sampled_from('ab:é\\"'), max_size=3)
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(st.sampled_from('x: é\\"\ud800'), max_size=6)
    )
    values = scalars | st.lists(scalars, max_size=2) | st.dictionaries(keys, scalars, max_size=2)

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.tuples(keys, values), max_size=5), st.booleans())
    def check(pairs: list, ascii_only: bool) -> None:
        members = ", ".join(
            f"{std_json.dumps(k, ensure_ascii=ascii_only)}: "
            f"{std_json.dumps(v, ensure_ascii=ascii_only)}"
            for k, v in pairs
        )
        text = "{" + members + "}"
        expected = _DECODER.decode(text)
        got = loads_json(text)
        assert type(got) is type(expected)
        assert got == expected and list(got) == list(expected)
        assert getattr(got, "duplicate", None) == getattr(expected, "duplicate", None)
        assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]

    check()


def test_samples_without_an_id_get_their_position_in_every_reader(tmp_path):
    """An id-less record's id is where it is: the line (JSONL, CSV: the header is line 1),
    the item of a JSON array, the row of a Parquet file or DataFrame; a given id is kept,
    and reading the file again gives the same ids."""
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text(
        '{"response": "a"}\n\n{"id": "mine", "response": "b"}\nnot json\n{"response": "c"}\n',
        encoding="utf-8",
    )
    samples, errors = read_samples(jsonl)
    assert [e.line for e in errors] == [4]
    assert [s.id for s in samples] == ["line-1", "mine", "line-5"]
    assert [s.id for s in read_samples(jsonl)[0]] == ["line-1", "mine", "line-5"]

    csv = tmp_path / "d.csv"
    csv.write_text('response,id\na,\n"two\nlines",x\nc,\n', encoding="utf-8")
    assert [s.id for s in read_samples(csv)[0]] == ["line-2", "x", "line-5"]

    array = tmp_path / "d.json"
    array.write_text('[{"response": "a"}, {"response": "b", "id": 9}, {"response": "c"}]')
    assert [s.id for s in read_samples(array)[0]] == ["item-1", "9", "item-3"]

    parquet = tmp_path / "d.parquet"
    pd.DataFrame({"response": ["a", "b"]}).to_parquet(parquet, index=False)
    assert [s.id for s in read_samples(parquet)[0]] == ["row-1", "row-2"]
    frame, _ = samples_from_dataframe(pd.DataFrame({"response": ["a", "b"]}))
    assert [s.id for s in frame] == ["row-1", "row-2"]


def test_a_conversation_file_without_ids_gets_line_ids(tmp_path):
    chats = tmp_path / "chats.jsonl"
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    chats.write_text(
        "\n".join(json.dumps({"messages": turns, "scenario": f"s{i}"}) for i in range(3)) + "\n",
        encoding="utf-8",
    )
    samples, errors = read_samples(chats)
    assert errors == []
    assert [s.id for s in samples] == ["line-1", "line-2", "line-3"]
    assert samples[2].turns[1].content == "hello"


def test_line_ids_count_from_the_file_start_when_it_is_read_in_pieces(tmp_path):
    """A file read in byte-range pieces (a URL, the Ray executor) numbers the id-less
    lines of each piece from the file's first line, as a whole read does."""
    from assay.inputs.locations import read_location

    path = tmp_path / "d.jsonl"
    rows = [
        {"response": "x" * 40} if i % 3 else {"id": f"k{i}", "response": "y"} for i in range(41)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    whole = [s.id for s in read_samples(path)[0]]
    assert whole[:4] == ["k0", "line-2", "line-3", "k3"]
    assert whole[-1] == "line-41"
    for piece_bytes in (1, 64, 300):
        pieced, errors = read_location(path.as_uri(), piece_bytes=piece_bytes)
        assert errors == []
        assert [s.id for s in pieced] == whole
