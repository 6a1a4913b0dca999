"""The entailment model's training tools: the LLM-style error pairs
(`scripts/llm_error_pairs.py`), the soup of several trainings
(`scripts/soup_entailment.py`) and the GPU training bundle (`benchmarks/gpu_bundle.py`).
Expected values are worked out by hand in each test."""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "benchmarks")]

from entailment_pairs import (  # noqa: E402
    NAME_TYPES,
    NUMBER_TYPES,
    Claim,
    Pair,
    Sentence,
    claim_indices,
    window_swaps,
)
from llm_error_pairs import (  # noqa: E402
    ErrorPair,
    _causal_link,
    _invent_detail,
    _merge_facts,
    _overstate,
    claim_pairs,
    is_llm_style,
    stated_premise,
)
from soup_entailment import fit_temperature, mean_weights, started_from, unseen_pairs  # noqa: E402
from train_entailment import read_pairs, start_from, write_pairs  # noqa: E402

import gpu_bundle  # noqa: E402
from validity_data import EXPLAINING_ANSWERS, MERGED_ANSWERS, hand_written_answers  # noqa: E402

_CONVERT = ROOT / "scripts" / "data" / "paragraphs_more" / "convert.py"
_SPEC = importlib.util.spec_from_file_location("paragraphs_more_convert", _CONVERT)
dialogue_text = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(dialogue_text)


def sentence(text: str, entities: list[tuple[str, str]] | None = None) -> Sentence:
    return Sentence(text, entities or [], None, 0)


@pytest.mark.parametrize(
    ("claim", "overstated", "reworded"),
    [
        ("The storm may reach the coast.", "The storm will reach the coast.",
         "The storm will certainly reach the coast."),
        ("The fire killed about 40 people.", "The fire killed exactly 40 people.",
         "The fire killed precisely 40 people."),
        ("The study suggests a link.", "The study proves a link.",
         "The study establishes a link."),
        ("The study indicated a link.", "The study proved a link.",
         "The study established a link."),
        ("He wrote some of the songs.", "He wrote all of the songs.",
         "He wrote each of the songs."),
        # "all" before a plural noun has no rewording
        ("He wrote many songs.", "He wrote all songs.", None),
        ("Trains often run late.", "Trains always run late.", "Trains invariably run late."),
        ("It was believed to be the oldest bridge.", "It was the oldest bridge.",
         "It was certainly the oldest bridge."),
        ("The band probably split in 1970.", "The band split in 1970.",
         "The band certainly split in 1970."),
    ],
)  # fmt: skip
def test_an_overstated_hedge(claim: str, overstated: str, reworded: str | None) -> None:
    assert _overstate(claim, random.Random(0)) == (overstated, reworded)


def test_a_claim_without_a_hedge_is_not_overstated() -> None:
    assert _overstate("The bridge opened in 1901.", random.Random(0)) is None


def test_a_causal_link_the_text_does_not_state() -> None:
    first = sentence("The river flooded the valley.")
    second = sentence("The harvest failed.")
    made = {_causal_link(first, second, random.Random(seed))[:2] for seed in range(20)}
    fused = "The river flooded the valley, and the harvest failed."
    assert made == {
        (fused, "The river flooded the valley because the harvest failed."),
        (fused, "The river flooded the valley, so the harvest failed."),
        (fused, "The harvest failed because the river flooded the valley."),
    }
    stated = sentence("The harvest failed because of the flood.")
    assert _causal_link(first, stated, random.Random(0)) is None


#: the flood as the cause of the failed harvest, in each wording of `_reworded_link`
FLOOD_CAUSED_FAILURE = {
    "The river flooded the valley, so the harvest failed.",
    "The harvest failed because the river flooded the valley.",
    "The river flooded the valley; as a result, the harvest failed.",
    "The river flooded the valley. That is why the harvest failed.",
    "The harvest failed, as the river flooded the valley.",
    "The river flooded the valley, which is why the harvest failed.",
}


def test_a_causal_link_reworded_states_the_same_cause_in_other_words() -> None:
    first = sentence("The river flooded the valley.")
    second = sentence("The harvest failed.")
    for seed in range(20):
        _, linked, reworded, _ = _causal_link(first, second, random.Random(seed))
        if linked == "The river flooded the valley because the harvest failed.":
            # the harvest is the cause here
            assert reworded in {
                "The harvest failed, so the river flooded the valley.",
                "The harvest failed; as a result, the river flooded the valley.",
                "The harvest failed. That is why the river flooded the valley.",
                "The river flooded the valley, as the harvest failed.",
                "The harvest failed, which is why the river flooded the valley.",
            }
        else:
            assert reworded in FLOOD_CAUSED_FAILURE - {linked}


def test_a_misattributed_link_gives_the_effect_another_cause_or_reverses_it() -> None:
    flood = sentence("The river flooded the valley.")
    failure = sentence("The harvest failed.")
    fair = sentence("The town held its fair in May.")
    # no other sentence in the window: the reworded link reversed, in some wording
    for seed in range(20):
        _, linked, _, contrast = _causal_link(flood, failure, random.Random(seed))
        if linked == FLOOD_BECAUSE_OF_FAILURE:  # the failed harvest is the cause here
            assert contrast in FLOOD_CAUSED_FAILURE
        else:
            assert contrast in FAILURE_CAUSED_FLOOD
    # with one: the effect given the fair as its cause (two premises in three), or reversed
    by_fair = {
        "The town held its fair in May, so the harvest failed.",
        "The harvest failed because the town held its fair in May.",
        "The town held its fair in May; as a result, the harvest failed.",
        "The town held its fair in May. That is why the harvest failed.",
        "The harvest failed, as the town held its fair in May.",
        "The town held its fair in May, which is why the harvest failed.",
    }
    made = [_causal_link(flood, failure, random.Random(seed), [fair]) for seed in range(60)]
    for _, linked, _, contrast in made:
        if linked != FLOOD_BECAUSE_OF_FAILURE:
            assert contrast in by_fair | FAILURE_CAUSED_FLOOD
    # each choice is fixed by the reworded premise: both occur among these few premises
    assert {"fair" in contrast for *_, contrast in made} == {True, False}
    # a sentence that states a cause of its own is not given as the wrong one
    stated = sentence("The harvest failed because of the drought.")
    assert all("drought" not in _causal_link(flood, failure, random.Random(s), [stated])[3]
               for s in range(20))  # fmt: skip


#: the link of `_causal_link`'s "because" form here: the failed harvest as the flood's cause
FLOOD_BECAUSE_OF_FAILURE = "The river flooded the valley because the harvest failed."
#: the failed harvest as the cause of the flood, in each wording of `_reworded_link`
FAILURE_CAUSED_FLOOD = {
    "The harvest failed, so the river flooded the valley.",
    "The river flooded the valley because the harvest failed.",
    "The harvest failed; as a result, the river flooded the valley.",
    "The harvest failed. That is why the river flooded the valley.",
    "The river flooded the valley, as the harvest failed.",
    "The harvest failed, which is why the river flooded the valley.",
}


def test_a_name_keeps_its_capital_in_a_causal_link() -> None:
    first = sentence("Tickets sold out in a day.")
    second = sentence("Paris hosted the games.", [("Paris", "GPE")])
    made = {_causal_link(first, second, random.Random(seed))[1] for seed in range(20)}
    assert "Tickets sold out in a day because Paris hosted the games." in made
    assert "Paris hosted the games because tickets sold out in a day." in made


def test_facts_merged_from_elsewhere_in_the_paragraph() -> None:
    claim = "Smith won the race in 1990."
    entities = [("Smith", "PERSON"), ("1990", "DATE")]
    nearby = [("Jones", "PERSON"), ("1992", "DATE")]
    rng = random.Random(0)
    merged_name = _merge_facts(claim, entities, nearby, {}, rng, NAME_TYPES)
    assert merged_name == "Jones won the race in 1990."
    merged_date = _merge_facts(claim, entities, nearby, {}, rng, NUMBER_TYPES)
    assert merged_date == "Smith won the race in 1992."
    # nothing of the type nearby: the article's names serve
    pool = {"PERSON": ["Smith", "Brown"]}
    assert _merge_facts(claim, entities, [], pool, rng, NAME_TYPES) == "Brown won the race in 1990."
    assert _merge_facts(claim, entities, [], {}, rng, NAME_TYPES) is None


def test_an_invented_date_or_place() -> None:
    rng = random.Random(0)
    pool = {"DATE": ["last year", "1901"], "GPE": []}
    claim = sentence("The bridge opened.")
    made, reworded = _invent_detail(claim, claim.text, pool, rng)
    assert made == "The bridge opened in 1901."
    # the same detail stated elsewhere in the sentence, or in one of its own
    assert reworded in {"In 1901, the bridge opened.", "The bridge opened. This was in 1901."}
    pool = {"DATE": ["March 3, 1901"]}
    made, reworded = _invent_detail(claim, claim.text, pool, rng)
    assert made == "The bridge opened on March 3, 1901."
    assert reworded in {
        "On March 3, 1901, the bridge opened.",
        "The bridge opened. This was on March 3, 1901.",
    }
    # a date the window already has is no invention; a claim with a date gets none
    assert _invent_detail(claim, "It opened on March 3, 1901.", pool, rng) is None
    dated = sentence("It opened in 1899.", [("1899", "DATE")])
    assert _invent_detail(dated, "", pool, rng) is None


def test_a_stated_premise_says_the_wrong_hypothesis() -> None:
    premise = "The dam was built in 1931. It floods the valley. Farmers left."
    claim = "It floods the valley."
    hedge = ErrorPair(claim, "It always floods the valley.", 1, "hedge", claim)
    assert stated_premise(premise, hedge) == (
        "The dam was built in 1931. It always floods the valley. Farmers left."
    )
    joined = "It floods the valley. Farmers left."
    causal = ErrorPair("", "It floods the valley, so farmers left.", 1, "causal", joined)
    assert stated_premise(premise, causal) == (
        "The dam was built in 1931. It floods the valley, so farmers left."
    )


@pytest.mark.parametrize(
    ("seed", "made"),
    [
        # a name of the paragraph's other sentence merged in: contradiction
        (0, ("Smith won the race in 1990.", "Jones won the race in 1990.", 2, "merged")),
        # the two sentences joined by a cause the text does not state: neutral
        (
            1,
            (
                "Smith won the race in 1990, and jones came second.",
                "Jones came second because Smith won the race in 1990.",
                1,
                "causal",
            ),
        ),
    ],
)
def test_symmetric_claim_pairs_add_the_wrong_hypothesis_entailed(
    seed: int, made: tuple[str, str, int, str]
) -> None:
    para = [
        sentence("Smith won the race in 1990.", [("Smith", "PERSON"), ("1990", "DATE")]),
        sentence("Jones came second.", [("Jones", "PERSON")]),
    ]
    premise = "Smith won the race in 1990. Jones came second."
    claim = Claim(para, 0, 0, 2, premise, {"PERSON": ["Smith", "Jones"]})
    rng_one, rng_both = random.Random(seed), random.Random(seed)
    one_sided = claim_pairs(claim, rng_one)
    both = claim_pairs(claim, rng_both, twin="stated")
    assert rng_one.random() == rng_both.random()  # the same draws either way
    entailed, wrong, label, rule = made
    assert one_sided == [
        Pair(premise, entailed, 0, f"llm_{rule}_source"),
        Pair(premise, wrong, label, rule),
    ]
    # the premise with the claim (or the two sentences joined) replaced by what it says
    says = wrong if rule == "causal" else f"{wrong} Jones came second."
    assert both == [*one_sided, Pair(says, wrong, 0, f"llm_{rule}_stated")]
    assert is_llm_style(f"llm_{rule}_stated")


def test_reworded_claim_pairs_add_the_wrong_hypothesis_entailed_by_other_words() -> None:
    para = [sentence("The river flooded the valley."), sentence("The harvest failed.")]
    premise = "The river flooded the valley. The harvest failed."
    claim = Claim(para, 0, 0, 2, premise, {})
    twins = 0
    for seed in range(30):
        rng_one, rng_twin = random.Random(seed), random.Random(seed)
        one_sided = claim_pairs(claim, rng_one)
        with_twin = claim_pairs(claim, rng_twin, twin="reworded")
        assert rng_one.random() == rng_twin.random()  # the same draws either way
        assert with_twin[:2] == one_sided
        if one_sided[1].kind != "causal" or "because the harvest" in one_sided[1].hypothesis:
            continue
        # the flood caused the failure: the whole premise is that link in other words
        twin = with_twin[2]
        assert twin.hypothesis == one_sided[1].hypothesis
        assert twin.premise in FLOOD_CAUSED_FAILURE - {twin.hypothesis}
        assert (twin.label, twin.kind) == (0, "llm_causal_reworded")
        twins += 1
    assert twins > 0


def test_contrasted_claim_pairs_add_a_link_the_reworded_premise_does_not_state() -> None:
    para = [
        sentence("The river flooded the valley."),
        sentence("The harvest failed."),
        sentence("The town held its fair in May."),
    ]
    premise = "The river flooded the valley. The harvest failed. The town held its fair in May."
    claim = Claim(para, 0, 0, 3, premise, {})
    contrasts = set()
    for seed in range(40):
        rng_one, rng_twin = random.Random(seed), random.Random(seed)
        reworded = claim_pairs(claim, rng_one, twin="reworded")
        contrasted = claim_pairs(claim, rng_twin, twin="contrasted")
        assert rng_one.random() == rng_twin.random()  # the same draws either way
        assert contrasted[:3] == reworded[:3]
        if reworded[1].kind != "causal":
            assert contrasted == reworded  # only a causal link has a contrast
            continue
        twin, contrast = contrasted[2:]
        # against the reworded premise, which still ends with the fair
        assert twin.premise.endswith(" The town held its fair in May.")
        assert (contrast.premise, contrast.label, contrast.kind) == (
            twin.premise,
            1,
            "llm_causal_contrast",
        )
        assert is_llm_style(contrast.kind)
        if "because the harvest" not in reworded[1].hypothesis:  # the flood caused it
            contrasts.add(contrast.hypothesis in FAILURE_CAUSED_FLOOD)
            assert contrast.hypothesis in FAILURE_CAUSED_FLOOD or "fair" in contrast.hypothesis
    assert contrasts == {True, False}  # reversed links and misattributed ones


def test_no_twin_where_the_premise_does_not_hold_the_source() -> None:
    para = [sentence("The river flooded the valley."), sentence("The harvest failed.")]
    # the window has the two sentences on two lines, not as the source's one text
    claim = Claim(para, 0, 0, 2, "The river flooded the valley.\nThe harvest failed.", {})
    made = [claim_pairs(claim, random.Random(seed), twin="reworded") for seed in range(10)]
    assert {len(pairs) for pairs in made} == {2}


#: each hand-written screen, and how many passages of each kind it has
SCREEN_KINDS = {
    EXPLAINING_ANSWERS: {"cause": 14, "purpose": 8, "consequence": 8, "detail": 8, "hedge": 7},
    MERGED_ANSWERS: {"person": 8, "organisation_or_place": 8, "number": 8, "date": 8, "roles": 8},
}


@pytest.mark.parametrize("folder", list(SCREEN_KINDS), ids=lambda folder: folder.name)
def test_a_hand_written_screen_pairs_each_passage_with_both_labels(folder: Path) -> None:
    samples, labels, kinds = hand_written_answers(folder)
    passages = sum(SCREEN_KINDS[folder].values())
    assert (len(samples), int(labels.sum())) == (2 * passages, passages)
    by_passage: dict[str, list[tuple[int, str]]] = {}
    for sample, label, kind in zip(samples, labels, kinds, strict=True):
        by_passage.setdefault(sample.contexts[0], []).append((int(label), kind))
    # one supported and one unsupported answer of the same kind for every passage
    assert all(sorted(label for label, _ in rows) == [0, 1] for rows in by_passage.values())
    assert all(len({k for _, k in rows}) == 1 for rows in by_passage.values())
    per_kind: dict[str, int] = {}
    for rows in by_passage.values():
        per_kind[rows[0][1]] = per_kind.get(rows[0][1], 0) + 1
    assert per_kind == SCREEN_KINDS[folder]


def test_window_swaps_merge_two_facts_of_the_window() -> None:
    para = [
        sentence("Priya chaired the meeting on Monday.", [("Priya", "PERSON"), ("Monday", "DATE")]),
        sentence("Tom took notes on Tuesday.", [("Tom", "PERSON"), ("Tuesday", "DATE")]),
        sentence("Lena sent the agenda.", [("Lena", "PERSON")]),
    ]
    premise = "Priya chaired the meeting on Monday. Tom took notes on Tuesday."
    claim = Claim(para, 0, 0, 2, premise, {})
    made = window_swaps(claim)
    # each name or date of the claim for its like from the window's other sentence (not
    # Lena's: she is outside the window), both found, in an order drawn from the claim
    assert sorted(p.hypothesis for p in made) == [
        "Priya chaired the meeting on Tuesday.",
        "Tom chaired the meeting on Monday.",
    ]
    assert {(p.premise, p.label, p.kind) for p in made} == {(premise, 2, "window_swap")}
    assert window_swaps(claim) == made  # the same every time
    assert len(window_swaps(claim, limit=1)) == 1
    # a claim alone in its window, or with no like in it, has none
    assert window_swaps(Claim(para, 0, 0, 1, para[0].text, {})) == []
    assert window_swaps(Claim(para, 2, 1, 3, "Tom took notes on Tuesday. Lena sent the agenda.",
                              {})) == [Pair("Tom took notes on Tuesday. Lena sent the agenda.",
                                            "Tom sent the agenda.", 2, "window_swap")]  # fmt: skip


def test_claims_are_sentences_of_6_to_45_words_and_questions_only_if_asked() -> None:
    sentences = [
        sentence("Can you book a table at Sino for two?"),  # 9 words, a question
        sentence("I booked a table at Sino."),  # 6 words
        sentence("It is at noon."),  # 4 words: too short
        sentence(" ".join(["word"] * 46) + "."),  # too long
    ]
    assert claim_indices(sentences) == [0, 1]
    assert claim_indices(sentences, questions=False) == [1]


def test_dialogue_turns_four_to_a_paragraph() -> None:
    assert dialogue_text.turn_text("  I want  to fly on the 3rd ") == "I want to fly on the 3rd."
    assert dialogue_text.turn_text("Where to?") == "Where to?"
    turns = [{"speaker": "USER", "utterance": f"Turn {i} has words"} for i in range(6)]
    turns.insert(2, {"speaker": "SYSTEM", "utterance": "  "})  # an empty turn: left out
    assert dialogue_text.dialogue_paragraphs(turns) == [
        "Turn 0 has words. Turn 1 has words. Turn 2 has words. Turn 3 has words.",
        "Turn 4 has words. Turn 5 has words.",
    ]
    long_enough = "A sentence of some length here. " * 5  # 160 characters, 5 ends
    assert dialogue_text.kept(long_enough.strip())
    assert not dialogue_text.kept("Short. Two ends.")  # under 150 characters
    assert not dialogue_text.kept("x" * 200 + ".")  # one sentence end


def test_the_pairs_no_member_of_a_soup_trained_on() -> None:
    # 60 pairs, 20 of them LLM-style (indices 20-39): a plain training holds back the
    # first 3 (60 // 20); one with --no-llm-errors holds back the first 2 of its 40
    kinds = ["snli"] * 20 + ["hedge", "llm_hedge_source"] * 10 + ["snli"] * 20
    pairs = [Pair(f"p{i}", f"h{i}", 0, kind) for i, kind in enumerate(kinds)]
    plain = {"arguments": "--pairs f.jsonl.gz", "pairs": 60, "held_back": 3}
    without = {"arguments": "--pairs f.jsonl.gz --no-llm-errors", "pairs": 40, "held_back": 2}
    assert [p.premise for p in unseen_pairs(pairs, [plain, without])] == ["p0", "p1"]
    assert is_llm_style("merged_number") and is_llm_style("llm_causal_source")
    assert not is_llm_style("entity") and not is_llm_style("fevernli")
    # when the LLM-style pairs come first, the plain training's first 3 are unseen by both
    pairs = pairs[20:40] + pairs[:20] + pairs[40:]
    assert [p.premise for p in unseen_pairs(pairs, [plain, without])] == ["p20", "p21", "p22"]
    # --limit 40 holds back 2 (p20, p21) and trains on the next 38 (p22-p39, p0-p19); a
    # member with --limit 20 --no-llm-errors holds back p0 and trains on p1-p19
    limited = {"arguments": "--pairs f.jsonl.gz --limit 40", "pairs": 40, "held_back": 2}
    few = {
        "arguments": "--pairs f.jsonl.gz --limit 20 --no-llm-errors",
        "pairs": 20,
        "held_back": 1,
    }
    assert [p.premise for p in unseen_pairs(pairs, [limited])] == ["p20", "p21"]
    assert [p.premise for p in unseen_pairs(pairs, [limited, few])] == ["p20", "p21"]
    assert [p.premise for p in unseen_pairs(pairs, [few])] == ["p0"]


def test_a_soup_keeps_the_record_its_members_started_from() -> None:
    start = {"sha256": "ab12", "seed": 13}
    members = [{"init": "ab12", "init_record": start, "seed": s} for s in (13, 14)]
    assert started_from(members) == start
    assert started_from([{"seed": 13}, {"init": None, "seed": 14}]) is None  # from the base
    with pytest.raises(SystemExit, match="start from different weights"):
        started_from([members[0], {"init": "cd34", "init_record": None}])


def test_the_temperature_that_minimises_the_loss() -> None:
    # two rows of logits (a, 0, 0), labelled 0 and 1: the mean loss is
    # -log(x / (x + 2)) - log(1 / (x + 2)) over 2 with x = exp(a / T), least at x = 2,
    # so T = a / log 2; at that T the loss is (log 2 + log 4) / 2
    a = 1.5 * math.log(2)
    logits = torch.tensor([[a, 0.0, 0.0], [a, 0.0, 0.0]])
    temperature, before, after = fit_temperature(logits, torch.tensor([0, 1]))
    assert temperature == pytest.approx(1.5, rel=0.005)
    x = math.exp(a)
    assert before == pytest.approx((-math.log(x / (x + 2)) + math.log(x + 2)) / 2, rel=1e-6)
    assert after == pytest.approx((math.log(2) + math.log(4)) / 2, rel=1e-4)


def test_the_soup_is_the_mean_of_its_members(tmp_path: Path) -> None:
    first, second, odd = tmp_path / "1.safetensors", tmp_path / "2.safetensors", tmp_path / "3"
    save_file({"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([[0.0, 4.0]])}, str(first))
    save_file({"a": torch.tensor([3.0, 4.0]), "b": torch.tensor([[2.0, 0.0]])}, str(second))
    save_file({"a": torch.tensor([3.0, 4.0])}, str(odd))
    soup = mean_weights([first, second])
    assert soup["a"].tolist() == [2.0, 3.0] and soup["b"].tolist() == [[1.0, 2.0]]
    with pytest.raises(SystemExit, match="differ"):
        mean_weights([first, odd])


def test_a_training_starts_from_trained_weights(tmp_path: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    from assay.models.entailment import FROZEN_KEY

    config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16, num_labels=3)  # fmt: skip
    torch.manual_seed(0)
    trained = BertForSequenceClassification(config)
    saved = {k: v.half() for k, v in trained.state_dict().items() if k != FROZEN_KEY}
    save_file(saved, str(tmp_path / "m.safetensors"))
    torch.manual_seed(1)
    fresh = BertForSequenceClassification(config)
    words = fresh.state_dict()[FROZEN_KEY].clone()
    start_from(fresh, tmp_path / "m.safetensors")
    state = fresh.state_dict()
    for key, value in saved.items():  # every trained weight, as stored (float16)
        assert torch.equal(state[key], value.float()), key
    assert torch.equal(state[FROZEN_KEY], words)  # the word embeddings stay the base's
    del saved["classifier.bias"]
    save_file(saved, str(tmp_path / "short.safetensors"))
    with pytest.raises(SystemExit, match=r"classifier\.bias"):
        start_from(fresh, tmp_path / "short.safetensors")


def test_a_pairs_file_round_trip_gives_the_same_bytes_every_time(tmp_path: Path) -> None:
    pairs = [
        Pair("Apple bought Beats in 2014.", "Apple bought Beats.", 0, "copy"),
        Pair("Apple bought Beats in 2014.", "Beats bought Apple.", 2, "roles"),
        Pair("Tom chaired it.", "Tom chaired it because of Ana.", 1, "llm_causal_source"),
    ]
    write_pairs(tmp_path / "a.jsonl.gz", pairs)
    write_pairs(tmp_path / "b.jsonl.gz", pairs)
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    assert read_pairs(tmp_path / "a.jsonl.gz") == (pairs, {"copy:entailment": 1,
        "roles:contradiction": 1, "llm_causal_source:neutral": 1})  # fmt: skip
    # the LLM-style pair left out, as a --no-llm-errors training reads the file
    assert read_pairs(tmp_path / "b.jsonl.gz", without_llm_style=True)[0] == pairs[:2]


def test_a_training_bundle_round_trip(tmp_path: Path) -> None:
    from safetensors.numpy import load_file
    from safetensors.numpy import save_file as save_numpy

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    embeddings = np.array([[0.5, -1.27], [0.0, 0.0], [2.54, 1.0]], dtype=np.float32)
    layer = np.array([[0.1, 0.2], [0.3, 1 / 3]], dtype=np.float32)
    weights = {gpu_bundle.WORD_EMBEDDINGS: embeddings, "encoder.layer": layer}
    save_numpy(weights, str(model / "model.safetensors"))
    gpu_bundle.pack(model, tmp_path / "bundle" / "minilm", training=True)
    gpu_bundle.unpack(tmp_path / "bundle", tmp_path / "out")
    back = load_file(str(tmp_path / "out" / "model.safetensors"))
    # every row of the embeddings kept, in int8 steps of (row's largest |value|) / 127
    steps = np.abs(embeddings).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(back[gpu_bundle.WORD_EMBEDDINGS] - embeddings) <= steps / 2 + 1e-7)
    # every other weight in float16, not int8
    halved = layer.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(back["encoder.layer"], halved)
    assert (tmp_path / "out" / "config.json").read_text() == "{}"
    stand_in: dict[str, object] = {}
    exec(gpu_bundle.TRAINING_STAND_IN.format(frozen="bert.x", max_length=128), stand_in)
    assert stand_in["FROZEN_KEY"] == "bert.x" and stand_in["MAX_LENGTH"] == 128
