"""Labels as data: what a verdict may be (`assay.core.labels`), the key that carries it
across runs, and reading labelled data files (`read_samples`, `read_labelled_samples`)."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from assay.core.labels import (
    LABEL_COLUMNS,
    LabelError,
    LabelScale,
    is_binary,
    label_value,
    sample_key,
    sample_label,
)
from assay.core.sample import Sample
from assay.inputs.read import read_labelled_samples, read_samples
from assay.inputs.records import InputErrors

ACCEPTED = "true/false, yes/no, 1/0, a score in [0, 1], or a rating on a declared scale"
NEEDS_SCALE = "is outside [0, 1]: a rating needs its scale, e.g. --label-scale 1-5"


# ---- label_value ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (True, 1.0),
        (False, 0.0),
        (1, 1.0),
        (0, 0.0),
        (0.25, 0.25),
        (1.0, 1.0),
        ("true", 1.0),
        ("FALSE", 0.0),
        ("yes", 1.0),
        (" No ", 0.0),
        ("1", 1.0),
        ("0", 0.0),
        ("0.4", 0.4),
    ],
)
def test_label_value_reads_each_accepted_kind(raw, value):
    assert label_value(raw) == value


def test_numpy_numbers_are_numbers():
    numpy = pytest.importorskip("numpy")
    assert label_value(numpy.int64(1)) == 1.0
    assert label_value(numpy.float32(0.5)) == 0.5
    assert label_value(numpy.int64(4), LabelScale.parse("1-5")) == 0.75


def test_a_rating_on_a_scale_maps_to_its_place_between_the_bounds():
    one_to_five = LabelScale.parse("1-5")
    assert label_value(4, one_to_five) == (4 - 1) / (5 - 1) == 0.75
    assert label_value("2", one_to_five) == (2 - 1) / (5 - 1) == 0.25
    assert label_value(1, one_to_five) == 0.0  # with a scale, a number is a rating
    assert label_value(5, one_to_five) == 1.0
    assert label_value(True, one_to_five) == 1.0  # a boolean is not a rating
    assert label_value(7, LabelScale.parse("0-10")) == pytest.approx(0.7)
    assert label_value(0, LabelScale.parse("-2-2")) == 0.5


@pytest.mark.parametrize(
    ("raw", "scale", "message"),
    [
        (None, None, f"label: null is not a label ({ACCEPTED})"),
        (math.nan, None, "label: nan is not a finite number"),
        (math.inf, None, "label: inf is not a finite number"),
        ("nan", None, "label: 'nan' is not a finite number"),
        (10**400, None, f"label: {str(10**400)[:37]}... is not a finite number"),
        (3, None, f"label: 3 {NEEDS_SCALE}"),
        (-0.5, None, f"label: -0.5 {NEEDS_SCALE}"),
        ("maybe", None, f"label: 'maybe' is not a label ({ACCEPTED})"),
        (
            [1],
            None,
            f"label: a list is not a label: give one verdict ({ACCEPTED}); a verdict per "
            'metric goes in "labels": {"metric": value}',
        ),
        (
            {"faithfulness": 1},
            None,
            f"label: an object is not a label: give one verdict ({ACCEPTED}); a verdict per "
            'metric goes in "labels": {"metric": value}',
        ),
        (6, "1-5", "label: 6 is outside the scale 1-5"),
        (0, "1-5", "label: 0 is outside the scale 1-5"),
    ],
)
def test_label_value_rejects_anything_else_naming_field_and_value(raw, scale, message):
    with pytest.raises(LabelError) as caught:
        label_value(raw, None if scale is None else LabelScale.parse(scale))
    assert str(caught.value) == message
    assert caught.value.field == "label"


def test_a_label_error_names_the_field_it_was_read_from():
    with pytest.raises(LabelError, match=r"^rating: 4 is outside") as caught:
        label_value(4, field="rating")
    assert (caught.value.field, caught.value.value) == ("rating", 4)
    assert caught.value.reason == f"4 {NEEDS_SCALE}"


@pytest.mark.parametrize(
    ("text", "low", "high", "shown"),
    [("1-5", 1, 5, "1-5"), ("0-10", 0, 10, "0-10"), ("1..7", 1, 7, "1-7"), ("1 to 5", 1, 5, "1-5")],
)
def test_a_scale_is_parsed_from_its_bounds(text, low, high, shown):
    scale = LabelScale.parse(text)
    assert (scale.low, scale.high, str(scale)) == (low, high, shown)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "five",
            "label scale: 'five' is not a scale: write its lowest and highest rating, "
            "e.g. 1-5 or 0-10",
        ),
        ("5-1", "label scale: a scale needs finite bounds, the lower first (got 5.0-1.0)"),
        ("3-3", "label scale: a scale needs finite bounds, the lower first (got 3.0-3.0)"),
    ],
)
def test_a_scale_that_is_not_one_is_refused(text, message):
    with pytest.raises(LabelError) as caught:
        LabelScale.parse(text)
    assert str(caught.value) == message


def test_is_binary_holds_only_for_zeros_and_ones():
    assert is_binary([0.0, 1.0, 1.0]) is True
    assert is_binary([0.0, 0.75]) is False
    assert is_binary([]) is True


# ---- the sample's fields ---------------------------------------------------------------
@pytest.mark.parametrize("column", LABEL_COLUMNS)
def test_each_label_column_feeds_the_samples_one_verdict(column):
    sample = Sample.model_validate({"query": "q", "response": "r", column: "yes"})
    assert (sample.label, sample.labels, sample.metadata) == (1.0, {}, {})


def test_labels_hold_one_verdict_per_metric_and_sample_label_falls_back_to_label():
    sample = Sample(response="r", label=0.5, labels={"faithfulness": False, "toxicity_score": "1"})
    assert sample.labels == {"faithfulness": 0.0, "toxicity_score": 1.0}
    assert sample_label(sample, "faithfulness") == 0.0
    assert sample_label(sample, "answer_relevancy") == 0.5
    assert sample_label(Sample(response="r"), "faithfulness") is None


def test_two_label_columns_with_different_verdicts_are_an_error():
    with pytest.raises(ValueError, match="'label' and 'rating' are both given"):
        Sample.model_validate({"response": "r", "label": 1, "rating": 0})


# ---- sample_key --------------------------------------------------------------------------
def test_sample_key_is_the_sha256_of_the_id_and_texts_and_nothing_else():
    sample = Sample(id="s1", query="q?", response="a.", contexts=["c1", "c2"], tags={"model": "x"})
    document = {
        "contexts": ["c1", "c2"],
        "expected": None,
        "id": "s1",
        "query": "q?",
        "reasoning_steps": None,
        "response": "a.",
        "trace": None,
        "turns": None,
    }
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert sample_key(sample) == hashlib.sha256(text.encode()).hexdigest()
    # tags, metadata and labels are not texts a person judged: the key stays
    same = Sample(id="s1", query="q?", response="a.", contexts=["c1", "c2"], label=1)
    assert sample_key(same) == sample_key(sample)


def test_a_text_with_a_lone_surrogate_is_keyed_by_the_same_json():
    sample = Sample(id="s\ud800", response="a.")
    document = dict.fromkeys(
        ("contexts", "expected", "query", "reasoning_steps", "trace", "turns")
    ) | {"id": "s\ud800", "response": "a."}
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    expected = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    assert sample_key(sample) == expected


def test_a_changed_text_or_id_gives_another_key():
    base = Sample(id="s1", query="q?", response="a.", contexts=["c1"])
    others = [
        Sample(id="s1", query="q?", response="a.", contexts=["c1", "c2"]),
        Sample(id="s1", query="q?", response="a!", contexts=["c1"]),
        Sample(id="s2", query="q?", response="a.", contexts=["c1"]),
        Sample(id="s1", query="q?", response="a.", contexts=["c1"], expected="a."),
    ]
    assert len({sample_key(base), *map(sample_key, others)}) == 5


def test_a_conversation_is_keyed_by_its_turns():
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    first = Sample(id="c", turns=turns)
    assert sample_key(first) == sample_key(Sample(id="c", turns=turns))
    changed = [turns[0], {"role": "assistant", "content": "hello!"}]
    assert sample_key(first) != sample_key(Sample(id="c", turns=changed))


# ---- reading labelled files ------------------------------------------------------------
def _jsonl(path, *records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_read_samples_takes_labels_and_leaves_unlabelled_samples_without(tmp_path):
    data = _jsonl(
        tmp_path / "d.jsonl",
        {"id": "a", "question": "q", "answer": "r", "label": True},
        {"id": "b", "question": "q", "answer": "r", "labels": {"faithfulness": 0.25}},
        {"id": "c", "question": "q", "answer": "r"},
        {"id": "d", "question": "q", "answer": "r", "human_score": 0.5},
    )
    samples, errors = read_samples(data)
    assert errors == []
    assert [(s.id, s.label, s.labels) for s in samples] == [
        ("a", 1.0, {}),
        ("b", None, {"faithfulness": 0.25}),
        ("c", None, {}),
        ("d", 0.5, {}),
    ]


def test_a_rating_without_its_scale_is_an_error_naming_file_line_and_field(tmp_path):
    data = _jsonl(
        tmp_path / "d.jsonl",
        {"question": "q", "answer": "r", "rating": 1},
        {"question": "q", "answer": "r", "rating": 4},
        {"question": "q", "answer": "r", "labels": {"faithfulness": "maybe"}},
    )
    samples, errors = read_samples(data)
    assert [s.label for s in samples] == [1.0]
    assert [str(e) for e in errors] == [
        f"{data} line 2, field 'rating': 4 {NEEDS_SCALE}",
        f"{data} line 3, field 'labels.faithfulness': 'maybe' is not a label ({ACCEPTED})",
    ]


def test_read_labelled_samples_reads_ratings_on_a_scale_from_a_csv(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text(
        "id,question,answer,rating,labels\n"
        'a,q1,r1,4,"{""faithfulness"": 5}"\n'
        "b,q2,r2,1,\n"
        "c,q3,r3,,\n",
        encoding="utf-8",
    )
    samples = read_labelled_samples(data, scale=LabelScale.parse("1-5"))
    assert [(s.id, s.label, s.labels) for s in samples] == [
        ("a", 0.75, {"faithfulness": 1.0}),  # (4 - 1) / (5 - 1); (5 - 1) / (5 - 1)
        ("b", 0.0, {}),
        ("c", None, {}),
    ]


def test_a_custom_label_field_feeds_label_and_leaves_metadata(tmp_path):
    data = _jsonl(
        tmp_path / "d.jsonl",
        {"question": "q", "answer": "r", "Is Faithful": "no", "source": "x"},
        {"question": "q", "answer": "r", "Is Faithful": 8},
    )
    samples = read_labelled_samples(data, label_field="is_faithful", scale=LabelScale.parse("0-10"))
    assert [(s.label, s.metadata) for s in samples] == [(0.0, {"source": "x"}), (0.8, {})]


def test_read_labelled_samples_raises_every_bad_record_by_file_line_and_field(tmp_path):
    data = _jsonl(
        tmp_path / "d.jsonl",
        {"question": "q", "answer": "r", "verdict": 6},
        {"question": "q", "answer": "r", "verdict": 2},
        {"question": "q", "answer": "r", "verdict": 5, "label": 1},
        {"question": "q", "answer": "r", "verdict": 1, "label": 1},
    )
    with pytest.raises(InputErrors) as caught:
        read_labelled_samples(data, label_field="verdict", scale=LabelScale.parse("1-5"))
    assert [str(e) for e in caught.value.errors] == [
        f"{data} line 1, field 'verdict': 6 is outside the scale 1-5",
        f"{data} line 3, field 'label': 'verdict' (5) and 'label' (1) give different "
        "verdicts: keep one",  # with a scale the label column's 1 is a rating too: 0.0
    ]  # line 4: both 1 on 1-5, one verdict


def test_a_verdict_given_twice_in_one_object_is_named_not_picked(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(
        '{"question": "q", "answer": "r", "grade": 1, "grade": 2}\n'
        '{"question": "q", "answer": "r", "labels": {"faithfulness": 1, "faithfulness": 0}}\n',
        encoding="utf-8",
    )
    with pytest.raises(InputErrors) as caught:
        read_labelled_samples(data, label_field="grade", scale=LabelScale.parse("1-5"))
    twice = "appears twice in one object with different values: keep one"
    assert [str(e) for e in caught.value.errors] == [
        f"{data} line 1, field 'grade': {twice}",
        f"{data} line 2, field 'labels.faithfulness': {twice}",
    ]


def test_a_label_field_no_record_has_is_an_error(tmp_path):
    data = _jsonl(tmp_path / "d.jsonl", {"question": "q", "answer": "r", "verdict": 1})
    with pytest.raises(InputErrors) as caught:
        read_labelled_samples(data, label_field="verdcit")
    assert str(caught.value) == (
        f"{data}, field 'verdcit': no record has a verdict in this column (named by "
        "--label-field): check its spelling"
    )


def test_labelled_samples_read_from_a_url_as_from_a_path(tmp_path):
    pytest.importorskip("pyarrow")
    data = _jsonl(
        tmp_path / "d.jsonl",
        {"id": "a", "question": "q", "answer": "r", "grade": 3},
        {"id": "b", "question": "q", "answer": "r", "grade": 5},
    )
    scale = LabelScale.parse("1-5")
    by_path = read_labelled_samples(data, label_field="grade", scale=scale)
    by_url = read_labelled_samples(data.as_uri(), label_field="grade", scale=scale)
    assert [(s.id, s.label) for s in by_url] == [(s.id, s.label) for s in by_path]
    assert [s.label for s in by_path] == [0.5, 1.0]


def test_a_dataframes_label_column_holds_numpy_values_and_missing_cells():
    pandas = pytest.importorskip("pandas")
    from assay.inputs.records import samples_from_dataframe

    frame = pandas.DataFrame(
        {"question": ["q1", "q2", "q3"], "answer": ["a", "b", "c"], "label": [1, 0, None]}
    )
    samples, errors = samples_from_dataframe(frame)
    assert errors == []
    assert [s.label for s in samples] == [1.0, 0.0, None]  # NaN is a missing cell
