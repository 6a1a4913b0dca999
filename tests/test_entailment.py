"""The entailment model (`assay.models.entailment`), its ask kind in the engine and the
support estimator that reads it (`assay.estimators.entailment`): windows and pairs worked
out by hand, the score from given probabilities, the shipped weights, a user's own model
folder (the shipped model saved with ``save_pretrained``), and the metrics through the
engine with ``support_estimator = "entailment"``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.engine import answer, entail_ask
from assay.engine.resources import Resources
from assay.estimators.entailment import (
    WHOLE_PASSAGE_WORDS,
    entailment_pairs,
    entailment_support,
    evidence_windows,
)
from assay.models.cache import EmbeddingCache
from assay.models.entailment import (
    DEFAULT_WEIGHTS,
    FROZEN_KEY,
    LABELS,
    EntailmentModel,
    base_model_path,
    training_facts,
)
from assay.models.precision import resolve_precision


@pytest.fixture(scope="module")
def model() -> EntailmentModel:
    return EntailmentModel(precision="float32")  # bfloat16: test_model_speed_paths


SENTENCES = [
    "Marie Curie was born in Warsaw in 1867 to a family of teachers.",
    "She moved to Paris in 1891 to study physics and mathematics at the Sorbonne.",
    "She won the Nobel Prize in Physics in 1903 with Pierre Curie and Henri Becquerel.",
    "She won a second Nobel Prize, in Chemistry, in 1911 for her work on radium.",
    "Her notebooks are still kept in lead-lined boxes in a library in France today.",
]


def test_windows_of_short_and_long_passages() -> None:
    short = "Canberra is the capital. It was chosen in 1908."
    assert evidence_windows([short]) == [short]
    four = " ".join(SENTENCES[:4])  # 57 words: at most WHOLE_PASSAGE_WORDS, one window
    assert len(four.split()) == 57 <= WHOLE_PASSAGE_WORDS
    assert evidence_windows([four]) == [four]
    five = " ".join(SENTENCES)  # 71 words: runs of two sentences
    assert evidence_windows([five]) == [f"{SENTENCES[i]} {SENTENCES[i + 1]}" for i in range(4)]
    repeated = " ".join([SENTENCES[4]] * 6)  # 84 words, one sentence six times
    assert evidence_windows([repeated]) == [f"{SENTENCES[4]} {SENTENCES[4]}"]
    assert evidence_windows(["", "  "]) == []


def test_pairs_take_the_windows_and_sentences_sharing_most_content_words() -> None:
    windows = evidence_windows([" ".join(SENTENCES)])
    first, second = "Curie won a Nobel Prize in 1911.", "She was born in Warsaw."
    pairs = entailment_pairs([f"{first} {second}"], [[" ".join(SENTENCES)]], sentences=True)
    # "Curie won a Nobel Prize in 1911": content words {curie, won, nobel, prize, 1911};
    # window 2 (sentences 3-4) has all 5, windows 1 and 3 have 4 (tie: the earlier, 1);
    # sentences 3 and 4 have 4 each ({won, nobel, prize} and curie, or 1911)
    # "She was born in Warsaw": {born, warsaw}; window 0 has both, the others none
    # (tie: the earlier, window 1); sentence 1 has both, the others none (sentence 2)
    assert pairs == [
        (windows[2], first),
        (windows[1], first),
        (SENTENCES[2], first),
        (SENTENCES[3], first),
        (windows[0], second),
        (windows[1], second),
        (SENTENCES[0], second),
        (SENTENCES[1], second),
    ]
    # the windows alone (the default): the same windows, no sentence
    windows_only = entailment_pairs([f"{first} {second}"], [[" ".join(SENTENCES)]])
    assert windows_only == [p for p in pairs if p[0] in windows]
    # a source sentence that is its passage's one window is read once
    one = entailment_pairs([first], [["Curie won in 1911."]], sentences=True)
    assert one == [("Curie won in 1911.", first)]


def test_support_is_the_mean_of_the_best_window_and_the_best_sentence() -> None:
    text = "A is true. B is true."
    evidence = [["A is true and so is C. Nothing else."]]
    pairs = entailment_pairs([text], evidence, sentences=True)
    window, (source, other) = evidence[0][0], ["A is true and so is C.", "Nothing else."]
    assert pairs == [(p, h) for h in ("A is true.", "B is true.") for p in (window, source, other)]
    entailed = {  # P(entailment) of the window, the first sentence, the second
        "A is true.": (0.9, 0.7, 0.1),
        "B is true.": (0.2, 0.3, 0.1),
    }
    probabilities = {
        (p, h): np.array([e, (1 - e) / 2, (1 - e) / 2])
        for h, row in entailed.items()
        for p, e in zip((window, source, other), row, strict=True)
    }
    probabilities[(window, "B is true.")] = np.array([0.2, 0.3, 0.5])
    [support] = entailment_support(probabilities, [text], evidence, sentences=True)
    # per sentence: (best window + best sentence) / 2 = (0.9 + 0.7) / 2, (0.2 + 0.3) / 2
    assert support.score == pytest.approx((0.8 + 0.25) / 2)
    assert support.estimator == "entailment+sentences"
    assert support.supported_sentences == 1
    first, second = support.sentences
    assert first == {
        "text": "A is true.",
        "window": window,
        "entailment": 0.9,
        "neutral": 0.05,
        "contradiction": 0.05,
        "source_sentence": source,
        "sentence_entailment": 0.7,
        "entailment_support": 0.8,
        "supported": True,
    }
    assert (second["contradiction"], second["entailment_support"]) == (0.5, 0.25)
    assert (second["source_sentence"], second["supported"]) == (source, False)
    # the windows alone: each sentence's best window, as the default reads it
    [windows] = entailment_support(probabilities, [text], evidence)
    assert windows.score == pytest.approx((0.9 + 0.2) / 2)
    assert windows.estimator == "entailment"
    assert windows.sentences[0] == {
        "text": "A is true.",
        "window": window,
        "entailment": 0.9,
        "neutral": 0.05,
        "contradiction": 0.05,
        "supported": True,
    }


def test_a_sentence_without_evidence_is_not_supported() -> None:
    [support] = entailment_support({}, ["Something is claimed."], [[]])
    assert support.score == 0.0
    assert support.sentences[0]["window"] is None


def test_the_shipped_weights_and_their_record() -> None:
    facts = training_facts()
    assert facts["labels"] == list(LABELS)
    assert facts["sha256"] == hashlib.sha256(DEFAULT_WEIGHTS.read_bytes()).hexdigest()
    assert DEFAULT_WEIGHTS.stat().st_size < 60_000_000
    assert facts["pairs"] == sum(facts["pairs_by_rule"].values())


def test_probabilities_rank_entailed_over_contradicted(model: EntailmentModel) -> None:
    premise = "Marie Curie was born in Warsaw in 1867 and moved to Paris in 1891."
    rows = model.probabilities(
        [
            (premise, "Marie Curie was born in Warsaw."),
            (premise, "Marie Curie was born in Berlin."),
            (premise, "Marie Curie was born in 1890."),
        ]
    )
    assert rows.shape == (3, 3)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=1e-5)
    entailed, wrong_city, wrong_year = rows[:, 0]
    assert entailed > 0.5 > max(wrong_city, wrong_year)
    assert rows[1, 2] > rows[0, 2]  # the wrong city is more contradicted


def test_supported_answers_that_give_a_cause_or_purpose_are_entailed(
    model: EntailmentModel,
) -> None:
    # three supported answers of examples/rag.jsonl against their passages. Weights trained
    # on LLM-style error pairs once gained on every dev set and gave these 0.65, 0.55 and
    # 0.83: they had learnt "because", "caused" and "for" as signs of an unstated link
    # (scripts/llm_error_pairs.py). The shipped weights give 0.82, 0.91 and 0.85 (those
    # before them 0.93, 0.98 and 0.93).
    pairs = [
        (
            "Earth's axis is tilted about 23.4 degrees relative to its orbital plane, so each "
            "hemisphere receives more direct sunlight for part of the year.",
            "Seasons are caused by the tilt of Earth's axis, about 23.4 degrees, which changes "
            "how directly sunlight hits each hemisphere during the year.",
        ),
        (
            "Mars is often called the Red Planet; iron oxide prevalent on its surface gives it "
            "a reddish appearance.",
            "Mars is called the Red Planet because iron oxide on its surface gives it a "
            "reddish colour.",
        ),
        (
            "The Eiffel Tower was completed in March 1889 as the entrance arch to the 1889 "
            "World's Fair.",
            "The Eiffel Tower was completed in 1889 for the World's Fair.",
        ),
    ]
    assert model.probabilities(pairs)[:, 0].min() > 0.8


def test_pairs_are_memoised_and_deduplicated(model: EntailmentModel) -> None:
    before = model.calls
    pair = ("The sky is blue.", "The sky has a colour.")
    first = model.probabilities([pair, pair])
    assert model.calls == before + 1
    again = model.probabilities([pair])
    assert model.calls == before + 1
    np.testing.assert_array_equal(first[0], again[0])


@pytest.fixture(scope="module")
def saved_folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shipped classifier built by transformers (all-MiniLM-L6-v2's configuration and
    word embeddings, the shipped weights) and saved with ``save_pretrained``: a user's
    own BertForSequenceClassification folder."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    base = base_model_path()
    config = AutoConfig.from_pretrained(
        base, num_labels=3, id2label=dict(enumerate(LABELS)),
        label2id={v: k for k, v in enumerate(LABELS)},
    )  # fmt: skip
    hf_model = AutoModelForSequenceClassification.from_config(config)
    weights = {k: v.float() for k, v in load_file(str(DEFAULT_WEIGHTS)).items()}
    base_weights = load_file(f"{base}/model.safetensors")
    weights[FROZEN_KEY] = base_weights["embeddings.word_embeddings.weight"]
    missing, unexpected = hf_model.load_state_dict(weights, strict=False)
    assert not unexpected and all(k.endswith("position_ids") for k in missing)
    folder = tmp_path_factory.mktemp("models") / "my-nli"
    with torch.no_grad():
        hf_model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return str(folder)


PAIRS = [
    ("A dog runs in a park.", "An animal is outside."),
    ("A dog runs.", "A cat sleeps."),
    (" ".join(SENTENCES * 4), "Marie Curie won two Nobel Prizes."),  # cut at 128 pieces
]


def test_the_shipped_model_runs_in_plain_torch_as_transformers_runs_it(
    model: EntailmentModel, saved_folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped classifier (plain torch) against the same weights run by transformers
    (the folder forced through transformers' path): the same probabilities."""
    import assay.models.entailment as entailment

    assert model.engine == "assay"
    monkeypatch.setattr(entailment, "read_bert_folder", lambda path: None)
    by_transformers = EntailmentModel(saved_folder)
    assert by_transformers.engine == "transformers"
    np.testing.assert_allclose(
        model.probabilities(PAIRS), by_transformers.probabilities(PAIRS), atol=1e-5
    )


def test_a_users_model_folder_runs_the_same_way(model: EntailmentModel, saved_folder: str) -> None:
    """The shipped model saved as an ordinary transformers folder and loaded through
    ``entailment_model`` gives the same probabilities, in plain torch."""
    own = EntailmentModel(saved_folder, precision="float32")
    assert own.name == "my-nli" and own.engine == "assay"
    # its cache key names the folder's full path: another "my-nli" folder is another model
    digest = hashlib.sha1(os.path.realpath(saved_folder).encode()).hexdigest()[:8]
    assert own.cache_name == f"entailment:my-nli@{digest}"
    np.testing.assert_allclose(own.probabilities(PAIRS), model.probabilities(PAIRS), atol=1e-5)


def test_a_two_way_models_not_entailed_is_neutral(saved_folder: str, tmp_path) -> None:
    folder = tmp_path / "two-way"
    shutil.copytree(saved_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = {"0": "ENTAILMENT", "1": "not_entailment", "2": "contradiction"}
    (folder / "config.json").write_text(json.dumps(config))
    own = EntailmentModel(str(folder))
    assert own._columns == [0, 1, 2]


def test_a_missing_folder_says_so() -> None:
    from assay.core.extras import ModelUnavailable

    with pytest.raises(ModelUnavailable, match="does not exist"):
        EntailmentModel("/nonexistent/nli-model")


def test_entail_asks_through_the_engine(tmp_path) -> None:
    res = Resources(AssayConfig(cache_dir=str(tmp_path), use_cache=False))
    asks = [
        entail_ask("Paris is the capital of France.", "France's capital is Paris."),
        entail_ask("Paris is the capital of France.", "France's capital is Paris."),
    ]
    assert asks[0] == asks[1]
    answers = answer(asks, res)
    row = answers.reply(asks[0])
    assert row.shape == (3,)
    assert res.entailment.calls == 1
    assert answers.entailments([("Paris is the capital of France.", "France's capital is Paris.")])


def test_faithfulness_with_the_entailment_estimator(tmp_path) -> None:
    from assay.evaluation.runner import evaluate

    contexts = ["Canberra is the capital city of Australia. It was selected in 1908."]
    samples = [
        {"response": "Australia's capital is Canberra.", "contexts": contexts},
        {"response": "Canberra is the capital of New Zealand.", "contexts": contexts},
    ]
    config = AssayConfig(cache_dir=str(tmp_path), judge_model=None, support_estimator="entailment")
    res = Resources(config)
    run = evaluate(samples, metrics=["faithfulness", "hallucination"], resources=res)
    faithful, invented = run.results
    for results in (faithful, invented):
        result = results["faithfulness"]
        assert result.details["estimator"] == "entailment"
        # the shipped model, with "/bf16" where the CPU runs it in bfloat16
        suffix = "/bf16" if resolve_precision("auto", "cpu") == "bfloat16" else ""
        assert result.signature.endswith(f"model=assay-entailment-minilm-l6{suffix}")
        [sentence] = result.details["sentences"]
        assert sentence["window"] == contexts[0]
        assert results["hallucination"].value == pytest.approx(1 - result.value)
        assert results["hallucination"].details["estimator"] == "1 - entailment"
    assert faithful["faithfulness"].value > 0.5 > invented["faithfulness"].value


def test_out_of_domain_inputs_are_flagged() -> None:
    """Not English (under 70 % a-z letters) or over 90 words with the window: the result
    says the model read something outside its training, and why."""
    english = ["Canberra is the capital of Australia."]
    arabic = "كانبرا هي عاصمة أستراليا."
    # one sentence of 88 words: its own window (a passage is cut between sentences only)
    long_window = "The committee met " + "and talked " * 42 + "about the plan."
    cases = [
        ("Canberra is the capital.", english, []),
        (arabic, english, ["not English"]),
        ("The committee met in the hall.", [long_window], ["over 90 words with its window"]),
    ]
    for text, evidence, expected in cases:
        pairs = entailment_pairs([text], [evidence])
        probabilities = {pair: np.array([0.6, 0.3, 0.1]) for pair in pairs}
        [support] = entailment_support(probabilities, [text], [evidence])
        details = support.details()
        assert details["in_domain"] == (not expected)
        assert [r.split(":")[0] for r in details["out_of_domain"]] == expected


def test_the_default_averages_the_graded_support_and_the_model(tmp_path) -> None:
    """``auto`` with the models extra: the mean of the graded support and the entailment
    support, each reported; a new subject the model lets pass ("Sydney" for "Canberra")
    is caught by the graded half's anchors."""
    from assay.evaluation.runner import evaluate

    contexts = ["Canberra is the capital city of Australia. It was selected in 1908."]
    samples = [
        {"response": "Australia's capital is Canberra.", "contexts": contexts},
        {"response": "Sydney is the capital of Australia.", "contexts": contexts},
    ]
    res = Resources(AssayConfig(cache_dir=str(tmp_path), judge_model=None))
    assert res.config.support_estimator == "auto"
    run = evaluate(samples, metrics=["faithfulness"], resources=res)
    values = []
    for row in run.results:
        result = row["faithfulness"]
        assert result.details["estimator"] == "sentence_support+entailment"
        [sentence] = result.details["sentences"]
        mean = (sentence["support"] + sentence["entailment"]) / 2
        assert sentence["combined"] == pytest.approx(mean, abs=1e-4)
        # one sentence: the text's graded score is its sentence's times the anchor factor
        assert result.value == pytest.approx(
            (result.details["graded_support"] + sentence["entailment"]) / 2, abs=1e-4
        )
        values.append(result.value)
    new_subject = run.results[1]
    assert new_subject["faithfulness"].details["sentences"][0]["entailment"] > 0.5
    assert new_subject["faithfulness"].details["unsupported_anchors"]
    assert values[0] > values[1]


def test_the_sentences_reading_catches_a_name_put_on_the_wrong_thing(tmp_path) -> None:
    """``entailment_premises = "windows+sentences"``: the window holds both facts and the
    model passes the near-copy; against its closest sentence it does not, and the
    support is the mean of the two readings."""
    from assay.evaluation.runner import evaluate

    contexts = [
        "Priya Nair chaired the planning meeting and walked through the roadmap. "
        "Tom Okafor took the minutes and agreed to circulate them by Friday."
    ]
    wrong = {"response": "Tom Okafor chaired the planning meeting.", "contexts": contexts}
    values = {}
    for premises in ("windows", "windows+sentences"):
        config = AssayConfig(
            cache_dir=str(tmp_path),
            judge_model=None,
            support_estimator="entailment",
            entailment_premises=premises,
        )
        [row] = evaluate([wrong], metrics=["faithfulness"], resources=Resources(config)).results
        result = row["faithfulness"]
        [sentence] = result.details["sentences"]
        assert sentence["window"] == contexts[0]  # 30 words: the passage is one window
        values[premises] = result.value
        if premises == "windows":
            assert result.details["estimator"] == "entailment"
            assert "source_sentence" not in sentence
            assert result.value == sentence["entailment"] > 0.5  # the model passes it
            continue
        assert result.details["estimator"] == "entailment+sentences"
        assert "/sentences" in result.signature
        # neither sentence alone entails it: the best of the two is below 0.5
        assert sentence["source_sentence"] in contexts[0]
        assert sentence["sentence_entailment"] < 0.5
        mean = (sentence["entailment"] + sentence["sentence_entailment"]) / 2
        assert result.value == pytest.approx(mean, abs=1e-4)
        assert sentence["entailment_support"] == pytest.approx(mean, abs=1e-4)
    assert values["windows+sentences"] < values["windows"]
    # with the graded support: per sentence the mean of it and the model's support
    config = AssayConfig(
        cache_dir=str(tmp_path), judge_model=None, entailment_premises="windows+sentences"
    )
    [row] = evaluate([wrong], metrics=["faithfulness"], resources=Resources(config)).results
    result = row["faithfulness"]
    assert result.details["estimator"] == "sentence_support+entailment+sentences"
    [sentence] = result.details["sentences"]
    assert sentence["entailment_support"] == pytest.approx(values["windows+sentences"], abs=1e-4)
    mean = (sentence["support"] + sentence["entailment_support"]) / 2
    assert sentence["combined"] == pytest.approx(mean, abs=1e-4)


def test_a_pair_is_scored_once_ever_with_the_disk_cache(tmp_path: Path) -> None:
    pairs = [(SENTENCES[0], "Curie was born in Warsaw."), (SENTENCES[2], "She won in 1911.")]
    first = EntailmentModel(precision="float32", cache=EmbeddingCache(tmp_path / "c.sqlite"))
    scored = first.probabilities(pairs)
    assert first.calls == 2
    # a later run with the same cache file: the same rows, no pair reaches the model
    again = EntailmentModel(precision="float32", cache=EmbeddingCache(tmp_path / "c.sqlite"))
    assert np.array_equal(again.probabilities(pairs), scored)
    assert again.calls == 0
    new = (SENTENCES[1], "She studied in Paris.")
    assert np.array_equal(again.probabilities([new, *pairs])[1:], scored)
    assert again.calls == 1
    # another number format is another model: its own rows
    other = EntailmentModel(precision="bfloat16", cache=EmbeddingCache(tmp_path / "c.sqlite"))
    other.probabilities(pairs)
    assert other.calls == 2
    # the key names the weights: a release with new weights never reads the old rows
    weights = hashlib.sha256(DEFAULT_WEIGHTS.read_bytes()).hexdigest()[:16]
    assert other.cache_name == f"entailment:assay-entailment-minilm-l6/bf16@{weights}"
