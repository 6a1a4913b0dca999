"""The engine offline: the vectors of the structured (JSON) comparison, the toxicity head
and the tool-call metrics are embed asks, each distinct text embedded once per chunk and
per embedder (the toxicity head embeds with USE when the run embeds with another), and
an embedder that fails fails only its own asks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.core.extras import ModelUnavailable
from assay.core.sample import Sample
from assay.engine import Answers, embed_ask, planned
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.metrics.registry import get_metric

pytest.register_assert_rewrite("tests.engine_helpers")

from tests.engine_helpers import CountingEmbedder, assert_as_scored_alone, offline  # noqa: E402

# ---- the structured comparison and the toxicity head: their vectors are embed asks --------

#: two JSON samples whose responses are also scored by semantic similarity and toxicity;
#: j1's response is one of its own JSON texts, so the metrics share that ask
JSONS = [
    Sample(
        id="j1",
        expected_json={"title": "A quiet evening by the lake", "n": 3, "code": "X"},
        output_json={"title": "A calm night near the lake", "n": 3, "code": "x"},
        response="A calm night near the lake",
        expected="A quiet evening by the lake",
    ),
    Sample(
        id="j2",
        expected_json={"items": [{"d": "red wooden chair"}, {"d": "blue lamp"}], "note": "a b"},
        output_json={"items": [{"d": "wooden chair, red"}], "note": "A  B"},
        response="RT @bob: you are a #worthless idiot http://t.co/x",
        expected="Shakespeare",
    ),
]
#: by hand: the SEMANTIC pairs (auto: text fields) are title (j1) and items.0.d (j2);
#: "X"/"x" and "a b"/"A  B" are equal texts (1.0, not embedded), n is EXACT, j2's second
#: item is missing from the output (not compared)
JSON_TEXTS = {
    "A quiet evening by the lake",
    "A calm night near the lake",
    "red wooden chair",
    "wooden chair, red",
}
#: the toxicity head reads the normalised responses (j2's without RT, @bob, # and the URL)
TOXICITY_TEXTS = {"A calm night near the lake", "you are a worthless idiot"}
SIMILARITY_TEXTS = {"A calm night near the lake", "A quiet evening by the lake", JSONS[1].response}
SIMILARITY_TEXTS |= {"Shakespeare"}


def test_offline_json_semantic_and_toxicity_metrics_embed_each_distinct_text_once(
    resources: Resources,
) -> None:
    json_metrics = [get_metric(n) for n in ("json_accuracy", "rqs", "rqs_normalized")]
    # the head (the default with the models extra averages it with alt-profanity-check)
    others = [get_metric("semantic_similarity"), get_metric("toxicity_score", method="head")]
    todo = planned(json_metrics, JSONS, Answers())
    assert {a.values["text"] for a in todo.values()} == JSON_TEXTS
    toxicity = planned(others[1:], JSONS, Answers())
    assert {a.values["text"] for a in toxicity.values()} == TOXICITY_TEXTS
    # the run embeds with USE, the head's encoder: its asks are the run embedder's own
    assert all("embedder" not in a.values for a in toxicity.values())
    res, counting = offline(resources)
    run = evaluate(JSONS, metrics=[*json_metrics, *others], resources=res)
    # one call for the chunk, each distinct text of every metric once
    assert counting.calls == 1
    assert sorted(counting.texts) == sorted(JSON_TEXTS | TOXICITY_TEXTS | SIMILARITY_TEXTS)
    assert all(r.error is None for row in run.results for r in row.values())
    # each SEMANTIC similarity is the embedder's pair similarity (the scorer's former
    # call), to the last bit
    pairs = [("A quiet evening by the lake", "A calm night near the lake")]
    pairs.append(("red wooden chair", "wooden chair, red"))
    expected = resources.embedder.pair_similarity([a for a, _ in pairs], [b for _, b in pairs])
    fields = [
        {f["field"]: f for f in row["json_accuracy"].details["fields"]} for row in run.results
    ]
    got = [fields[0]["title"]["similarity"], fields[1]["items.0.d"]["similarity"]]
    assert got == [min(1.0, max(0.0, float(s))) for s in expected]
    assert fields[0]["code"]["scorer"] == fields[1]["note"]["scorer"] == "normalised-equal"
    assert fields[0]["title"]["scorer"] == f"cosine:{resources.embedder.name}"
    # the toxicity is the head's on the vectors it would embed itself
    head = resources.toxicity
    assert run.values("toxicity_score") == head.probabilities([s.response for s in JSONS])
    # and every value is that of the metric scored on its own
    assert_as_scored_alone(run, [*json_metrics, *others], JSONS, resources)


def test_offline_a_json_metric_scored_alone_embeds_its_batch_in_one_call(
    resources: Resources,
) -> None:
    res, counting = offline(resources)
    results = get_metric("json_accuracy").score_batch(JSONS, res)
    assert counting.calls == 1 and sorted(counting.texts) == sorted(JSON_TEXTS)
    # title 0.875 and items.0.d 0.950 (USE multilingual v3), both >= 0.80: every field
    # right, 3/3 and 2/2
    sims = resources.embedder.pair_similarity(
        ["A quiet evening by the lake", "red wooden chair"],
        ["A calm night near the lake", "wooden chair, red"],
    )
    assert all(float(s) >= 0.8 for s in sims)
    assert [r.value for r in results] == [1.0, 1.0]
    fields = [{f["field"]: f["similarity"] for f in r.details["fields"]} for r in results]
    assert [fields[0]["title"], fields[1]["items.0.d"]] == [float(s) for s in sims]


def test_offline_the_toxicity_head_embeds_with_use_when_the_run_embeds_with_another(
    resources: Resources,
) -> None:
    """A run whose embedder is not USE: the toxicity asks name USE (the head's encoder),
    so the same text asked of the run's embedder is another ask; each embedder gets one
    call."""
    res = Resources(AssayConfig(embedder="e5-small", judge_model=None, judge_base_url=None))
    other = CountingEmbedder(resources.embedder)  # USE's vectors under another name
    other.name = "other-model"
    use = CountingEmbedder(resources.embedder)
    res.__dict__["embedder"], res.__dict__["use_embedder"] = other, use
    metrics = [get_metric("semantic_similarity"), get_metric("toxicity_score", method="head")]
    toxicity = planned(metrics[1:], JSONS, Answers(resources=res))
    assert {a.values["embedder"] for a in toxicity.values()} == {"use-multilingual-v3"}
    shared = embed_ask("A calm night near the lake")
    assert shared.key != embed_ask(shared.values["text"], "use-multilingual-v3").key
    run = evaluate(JSONS, metrics=metrics, resources=res)
    assert (other.calls, use.calls) == (1, 1)
    assert sorted(other.texts) == sorted(SIMILARITY_TEXTS)
    assert sorted(use.texts) == sorted(TOXICITY_TEXTS)
    assert run.values("toxicity_score") == resources.toxicity.probabilities(
        [s.response for s in JSONS]
    )
    assert run.results[0]["semantic_similarity"].signature.endswith("model=other-model")
    with pytest.raises(ModelUnavailable, match="no embedder named 'minilm'"):
        res.embedder_named("minilm")


def test_offline_tool_call_metrics_plan_every_candidate_pairs_arguments(
    resources: Resources,
) -> None:
    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"name": name, "arguments": arguments, "kind": "tool"}

    made = [
        call("search", q="hotels near the eiffel tower"),
        call("search", q="cheap hotels in Paris"),
    ]
    sample = Sample(
        trace=made,
        expected_tool_calls=[call("search", q="cheap hotel in Paris"), call("book", n=2)],
    )
    metrics = [get_metric(n) for n in ("tool_call_accuracy", "tool_call_f1")]
    todo = planned(metrics, [sample], Answers())
    # the one reference search against both searches made (the pairing is chosen from
    # both agreements); book has no partner; n is a number (EXACT)
    assert {a.values["text"] for a in todo.values()} == {
        "cheap hotel in Paris",
        "hotels near the eiffel tower",
        "cheap hotels in Paris",
    }
    res, counting = offline(resources)
    run = evaluate([sample], metrics=metrics, resources=res)
    assert counting.calls == 1 and len(counting.texts) == 3
    # q: 0.31 with the first search (agreement 0), 0.98 with the second (agreement 1);
    # the pairing takes the second: 1 / max(2, 2); F1: 1 correct, P = R = 1/2
    sims = resources.embedder.pair_similarity(
        ["cheap hotel in Paris"] * 2, ["hotels near the eiffel tower", "cheap hotels in Paris"]
    )
    assert float(sims[0]) < 0.8 <= float(sims[1])
    assert run.values("tool_call_accuracy") == [0.5]
    assert run.values("tool_call_f1") == [0.5]
    (match,) = run.results[0]["tool_call_accuracy"].details["matches"]
    assert (match["made"], match["arguments"][0]["score"]) == (1, 1.0)


def test_offline_an_embedder_that_fails_fails_only_its_own_asks(resources: Resources) -> None:
    class Broken:
        name = "use-multilingual-v3"

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            raise ModelUnavailable("USE is broken here")

    res = Resources(AssayConfig(embedder="e5-small", judge_model=None, judge_base_url=None))
    other = CountingEmbedder(resources.embedder)
    other.name = "other-model"
    res.__dict__["embedder"], res.__dict__["use_embedder"] = other, Broken()
    metrics = [get_metric("semantic_similarity"), get_metric("toxicity_score", method="head")]
    run = evaluate(JSONS, metrics=metrics, resources=res)
    assert other.calls == 1
    alone = get_metric("semantic_similarity").score_batch(JSONS, resources)
    assert run.values("semantic_similarity") == [r.value for r in alone]
    assert {r["toxicity_score"].error for r in run.results} == {
        "ModelUnavailable: USE is broken here"
    }
