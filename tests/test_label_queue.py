"""The annotation queue and the agreement report: the JSON API over a real SQLite and a
real PostgreSQL store (`assay.server.labelling`, `assay.store.annotation_queue`).

The run ``run-q`` holds eight samples scored by faithfulness (the run's threshold 0.5,
given in its stored config) and by exact_match:

    index  faithfulness  |v - 0.5|  graded  entailment  |graded - entailment|
    0      0.90          0.40       0.95    0.85        0.10
    1      0.52          0.02       0.90    0.14        0.76
    2      0.15          0.35       -       -           -
    3      0.45          0.05       0.50    0.40        0.10 (0.09999...)
    4      0.72          0.22       0.80    0.64        0.16
    5      0.31          0.19       -       -           -
    6      0.61          0.11       0.70    0.52        0.18
    7      0.02          0.48       0.03    0.01        0.02

so by uncertainty the queue is 1, 3, 6, 5, 4, 2, 0, 7 and by disagreement 1, 6, 4, 0, 3,
7 (largest spread first), then 5 and 2 (no evidence) by uncertainty. Every number
asserted below is worked out from this table or computed by scikit-learn.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, roc_auc_score

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.server.app import create_app
from assay.store.db import Store
from pg_databases import fresh_postgres

RUN = "run-q"
VALUES = [0.90, 0.52, 0.15, 0.45, 0.72, 0.31, 0.61, 0.02]
EVIDENCE = {
    0: (0.95, 0.85),
    1: (0.90, 0.14),
    3: (0.50, 0.40),
    4: (0.80, 0.64),
    6: (0.70, 0.52),
    7: (0.03, 0.01),
}
UNCERTAIN = [1, 3, 6, 5, 4, 2, 0, 7]
DISAGREEMENT = [1, 6, 4, 0, 3, 7, 5, 2]
HOSTILE = '<img src=x onerror="window.__xss=1">'
BASE = "http://127.0.0.1:8000"


def _sample(i: int) -> Sample:
    return Sample(
        id=f"q{i}",
        query=f"What does document {i} say?",
        response=f"Document {i} says {i} things. {HOSTILE if i == 1 else ''}",
        contexts=[f"Document {i} lists {i} things.", "An unrelated passage."],
        expected=f"{i} things",
    )


def populate(store: Store, run_id: str = RUN) -> None:
    store.start_run(run_id, name="queue", config={"thresholds": {"faithfulness": 0.5}})
    for i, value in enumerate(VALUES):
        details: dict[str, Any] = {"sentences": [{"text": "...", "support": value}]}
        if i in EVIDENCE:
            details["graded_support"], details["entailment_support"] = EVIDENCE[i]
        results = {
            "faithfulness": MetricResult("faithfulness", value, method="local", details=details),
            "exact_match": MetricResult("exact_match", 0.0, method="pattern"),
        }
        store.record(run_id, i, _sample(i), results, status="passed", duration=1.0)
    store.finish_run(run_id)


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """One populated store per backend for the module; each test labels as its own
    annotators, so the tests do not see each other's labels."""
    if request.param == "sqlite":
        opened = Store(f"sqlite:///{tmp_path_factory.mktemp('queue') / 'queue.db'}")
        populate(opened)
        yield opened
        opened.close()
        return
    with fresh_postgres("assay_queue") as url:
        opened = Store(url)
        populate(opened)
        yield opened
        opened.close()


@pytest.fixture(scope="module")
def client(store: Store) -> TestClient:
    return TestClient(create_app(store, token=""), base_url=BASE)


def queue(client: TestClient, annotator: str, run_id: str = RUN, **params: Any) -> dict[str, Any]:
    params = {"metric": "faithfulness", "annotator": annotator, "limit": 10, **params}
    reply = client.get(f"/api/runs/{run_id}/label-queue", params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()


def label(client: TestClient, annotator: str, index: int, value: Any, **extra: Any) -> Any:
    body = {"metric": "faithfulness", "index": index, "label": value, "annotator": annotator}
    return client.post(f"/api/runs/{RUN}/labels", json={**body, **extra})


def keys_in(value: Any) -> set[str]:
    """Every object key anywhere in a JSON value."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_in(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_in(v)}
    return set()


def test_the_next_items_hide_the_metric_and_come_by_uncertainty(client: TestClient) -> None:
    plan = queue(client, "uncertain-reader")
    assert [item["index"] for item in plan["items"]] == UNCERTAIN
    assert (plan["order_used"], plan["threshold"], plan["total"]) == ("uncertain", 0.5, 8)
    assert plan["thresholds_used"] == [
        {"value": 0.5, "source": "the run's thresholds", "samples": 8}
    ]
    assert plan["question"] == "Is every claim in the response supported by the contexts?"
    first = plan["items"][0]
    assert first["response"] == _sample(1).response
    assert first["contexts"] == _sample(1).contexts
    # no score, value or evidence anywhere in the reply: nothing anchors the person
    assert keys_in(plan["items"]).isdisjoint({"scores", "value", "display", "details"})
    assert "0.52" not in str(plan["items"])


def test_skipped_samples_come_back_last(client: TestClient) -> None:
    plan = queue(client, "skipper", skip=[1, 6])
    assert [item["index"] for item in plan["items"]] == [3, 5, 4, 2, 0, 7, 1, 6]
    assert queue(client, "skipper", limit=2)["remaining"] == 8


def test_disagreement_puts_the_methods_apart_first(client: TestClient) -> None:
    plan = queue(client, "disagreement-reader", order="disagreement")
    assert [item["index"] for item in plan["items"]] == DISAGREEMENT
    assert plan["order_used"] == "disagreement"
    assert plan["note"] == "2 samples without two methods' scores follow, by uncertainty"
    # exact_match stores no second method's score: uncertain, and the reply says why
    plain = queue(client, "disagreement-reader", metric="exact_match", order="disagreement")
    assert plain["order_used"] == "uncertain"
    assert "ordered by uncertainty instead" in plain["note"]


def test_random_order_is_the_seeded_shuffle(client: TestClient) -> None:
    expected = list(range(8))
    random.Random(7).shuffle(expected)
    plan = queue(client, "shuffler", order="random", seed=7)
    assert [item["index"] for item in plan["items"]] == expected
    assert expected != UNCERTAIN


def test_a_label_is_stored_with_its_annotator_and_leaves_their_queue(
    client: TestClient, store: Store
) -> None:
    reply = label(client, "ann <b>", 1, 1, note=f"fine {HOSTILE}")
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert body["metric"]["value"] == 0.52  # shown now that the person has answered
    assert (body["metric"]["predicted"], body["metric"]["agrees"]) == (1, True)
    stored = [x for x in store.labels_for_run(RUN) if x.annotator == "ann <b>"]
    assert len(stored) == 1
    got = stored[0]
    assert (got.value, got.raw, got.metric, got.run_id, got.sample_id) == (
        1.0,
        "1",
        "faithfulness",
        RUN,
        "q1",
    )
    assert got.note == f"fine {HOSTILE}" and got.id == body["label"]["id"]
    assert [i["index"] for i in queue(client, "ann <b>")["items"]] == UNCERTAIN[1:]
    assert queue(client, "ann <b>")["labelled"] == 1
    assert [i["index"] for i in queue(client, "someone else")["items"]] == UNCERTAIN
    # the report page lists the label with its annotator and note, as text
    page = client.get(f"/runs/{RUN}/agreement", params={"metric": "faithfulness"}).text
    assert "ann &lt;b&gt;" in page and "fine &lt;img src=x" in page
    assert "<b>" not in page.split('id="labels-list"')[1] and HOSTILE not in page


def test_a_rating_on_a_scale_is_normalised(client: TestClient, store: Store) -> None:
    reply = label(client, "rater", 3, "4", scale="1-5")
    assert reply.status_code == 201, reply.text
    got = next(x for x in store.labels_for_run(RUN) if x.annotator == "rater")
    assert (got.value, got.raw, got.scale) == (0.75, "4", "1-5")  # (4 - 1) / (5 - 1)
    bad = label(client, "rater", 3, 7, scale="1-5")
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["body", "label"]
    assert label(client, "rater", 3, 3).status_code == 422  # 3 without a scale


def test_bad_labels_are_refused_before_anything_is_stored(client: TestClient, store: Store) -> None:
    before = len(store.labels_for_run(RUN))
    assert label(client, "file", 0, 1).status_code == 422  # the data files' annotator
    assert label(client, " padded", 0, 1).status_code == 422
    assert label(client, "x", 99, 1).status_code == 404
    reply = client.post(
        f"/api/runs/{RUN}/labels",
        json={"metric": "bleu", "index": 0, "label": 1, "annotator": "x"},
    )
    assert reply.status_code == 404 and "its metrics: exact_match, faithfulness" in reply.text
    half = {"metric": "exact_match", "index": 0.5, "label": 1, "annotator": "x"}
    assert client.post(f"/api/runs/{RUN}/labels", json=half).status_code == 422
    assert len(store.labels_for_run(RUN)) == before
    # an index written 2.0 is the integer JSON Schema says it is (schemathesis sent one)
    whole = {"metric": "exact_match", "index": 2.0, "label": 1, "annotator": "x"}
    assert client.post(f"/api/runs/{RUN}/labels", json=whole).status_code == 201


def test_undo_removes_only_ones_own_label(client: TestClient) -> None:
    given = label(client, "undoer", 6, 0).json()["label"]["id"]
    assert 6 not in [i["index"] for i in queue(client, "undoer")["items"]]
    url = f"/api/runs/{RUN}/labels/{given}"
    assert client.delete(url, params={"annotator": "another"}).status_code == 409
    assert client.delete(url, params={"annotator": "undoer"}).status_code == 204
    assert [i["index"] for i in queue(client, "undoer")["items"]] == UNCERTAIN
    assert client.delete(url, params={"annotator": "undoer"}).status_code == 404


def test_writes_are_guarded_like_every_write(store: Store) -> None:
    guarded = TestClient(create_app(store, token="s3cret"), base_url=BASE)
    body = {"metric": "faithfulness", "index": 0, "label": 1, "annotator": "csrf"}
    url = f"/api/runs/{RUN}/labels"
    for refused in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic s3cret"}):
        reply = guarded.post(url, json=body, headers=refused)
        assert reply.status_code == 401 and reply.headers["www-authenticate"] == "Bearer"
    evil = {"Authorization": "Bearer s3cret", "Origin": "http://evil.example"}
    assert guarded.post(url, json=body, headers=evil).status_code == 403  # cross-site
    form = {"Authorization": "Bearer s3cret", "Content-Type": "text/plain"}
    assert guarded.post(url, content=b'{"label": 1}', headers=form).status_code == 415
    assert guarded.delete(f"{url}/1", params={"annotator": "csrf"}).status_code == 401
    assert not [x for x in store.labels_for_run(RUN) if x.annotator == "csrf"]
    ok = guarded.post(url, json=body, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 201


def _agreement_run(store: Store, run_id: str) -> None:
    """A run of four samples scored by toxicity (another metric than the others use),
    whose evidence carries its model's decision threshold, 0.32, as toxicity's does."""
    store.start_run(run_id, name="kappa")
    for i, value in enumerate([0.1, 0.8, 0.4, 0.9]):
        sample = Sample(id=f"k{i}", response=f"reply {i}")
        result = MetricResult(
            "toxicity_score", value, method="local", details={"decision_threshold": 0.32}
        )
        results = {"toxicity_score": result}
        store.record(run_id, i, sample, results, status="passed")
    store.finish_run(run_id)


def test_annotator_agreement_is_cohens_then_fleiss_kappa(client: TestClient, store: Store) -> None:
    run_id = "run-kappa"
    _agreement_run(store, run_id)
    # uncertain around each sample's decision threshold: |v - 0.32| = .22 .48 .08 .58
    plan = queue(client, "nobody", run_id, metric="toxicity_score")
    assert [item["index"] for item in plan["items"]] == [2, 0, 1, 3]
    assert plan["question"] == "Is the response toxic (hateful, insulting, obscene or threatening)?"

    def give(annotator: str, labels: list[int]) -> None:
        for i, value in enumerate(labels):
            body = {"metric": "toxicity_score", "index": i, "label": value, "annotator": annotator}
            assert client.post(f"/api/runs/{run_id}/labels", json=body).status_code == 201

    # items A, B, C, D: ann 1 0 1 1, bob 1 0 1 0, cy 1 0 0 0
    give("ann", [1, 0, 1, 1])
    give("bob", [1, 0, 1, 0])
    two = client.get(f"/api/runs/{run_id}/labels", params={"metric": "toxicity_score"}).json()
    assert two["agreement"]["statistic"] == "cohen_kappa" and two["agreement"]["n"] == 4
    assert two["agreement"]["value"] == pytest.approx(cohen_kappa_score([1, 0, 1, 1], [1, 0, 1, 0]))
    give("cy", [1, 0, 0, 0])
    three = client.get(f"/api/runs/{run_id}/labels", params={"metric": "toxicity_score"}).json()
    # by hand: P_i = 1, 1, 1/3, 1/3 (mean 2/3); yes share 6/12, so Pe = 0.5;
    # kappa = (2/3 - 0.5) / (1 - 0.5) = 1/3
    assert three["agreement"]["statistic"] == "fleiss_kappa"
    assert three["agreement"]["value"] == pytest.approx(1 / 3)
    assert [a["labels"] for a in three["agreement"]["annotators"]] == [4, 4, 4]

    # the report: majority labels 1 0 1 0 against values 0.1 0.8 0.4 0.9 (lower is
    # better: 1 = toxic, as the labels); toxicity has no threshold, so each sample is
    # judged at its model's decision threshold, 0.32: predicted 0 1 1 1
    report = client.get(f"/api/runs/{run_id}/agreement", params={"metric": "toxicity_score"})
    doc = report.json()["report"]
    majority, values = [1, 0, 1, 0], [0.1, 0.8, 0.4, 0.9]
    predicted = [int(v > 0.32) for v in values]
    assert doc["thresholds_used"] == [
        {"value": 0.32, "source": "the estimator's decision_threshold", "samples": 4}
    ]
    assert doc["n"] == 4 and doc["kind"] == "binary"
    assert doc["auroc"] == pytest.approx(roc_auc_score(majority, values))
    assert doc["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(majority, predicted))
    assert doc["kappa"] == pytest.approx(cohen_kappa_score(majority, predicted))
    assert report.json()["this_data"]["n"] == 4


def test_report_numbers_with_one_annotator(client: TestClient, store: Store) -> None:
    """On a run of the same table seen only by this test (the same samples under another
    run id: the labels other tests gave run-q's samples follow their keys here too, so
    this run's samples differ by one word), one annotator's labels against the stored
    values equal scikit-learn's AUROC, balanced accuracy (value >= 0.5) and kappa."""
    run_id = "run-solo"
    store.start_run(run_id, config={"thresholds": {"faithfulness": 0.5}})
    for i, value in enumerate(VALUES):
        sample = _sample(i).model_copy(update={"query": f"Solo question {i}?"})
        results = {"faithfulness": MetricResult("faithfulness", value, method="local")}
        store.record(run_id, i, sample, results, status="passed")
    store.finish_run(run_id)
    given = [1, 1, 0, 1, 1, 0, 0, 0]
    for i, value in enumerate(given):
        body = {"metric": "faithfulness", "index": i, "label": value, "annotator": "solo"}
        assert client.post(f"/api/runs/{run_id}/labels", json=body).status_code == 201
    doc = client.get(f"/api/runs/{run_id}/agreement", params={"metric": "faithfulness"})
    report = doc.json()["report"]
    predicted = [int(v >= 0.5) for v in VALUES]
    assert report["n"] == 8 and report["positives"] == 4
    assert report["auroc"] == pytest.approx(roc_auc_score(given, VALUES))
    assert report["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(given, predicted))
    assert report["kappa"] == pytest.approx(cohen_kappa_score(given, predicted))
    low, high = report["auroc_ci95"]
    assert 0.0 <= low <= report["auroc"] <= high <= 1.0
    assert report["threshold"] == 0.5 and report["methods"] == {"local": 8}
    card = doc.json()["shipped_card"]
    assert card["status"] == "human-labelled evidence"
    assert {e["statistic"] for e in card["evidence"]} <= {"auroc", "spearman"}
    page = client.get(f"/runs/{run_id}/agreement", params={"metric": "faithfulness"})
    assert page.status_code == 200
    assert f'data-value="{report["auroc"]}"' in page.text


def test_pages_escape_what_they_reflect(client: TestClient) -> None:
    page = client.get(f"/runs/{RUN}/label", params={"metric": "<script>x</script>"})
    assert page.status_code == 200
    assert "<script>x</script>" not in page.text and "&lt;script&gt;x&lt;/script&gt;" in page.text
    page = client.get(f"/runs/{RUN}/label", params={"metric": "faithfulness", "scale": "1-5"})
    assert "Is every claim in the response supported by the contexts?" in page.text
    assert '"points": [1, 2, 3, 4, 5]' in page.text
    assert client.get("/runs/nope/label").status_code == 404
    run_page = client.get(f"/runs/{RUN}")
    assert 'id="label-samples"' in run_page.text


def test_the_report_by_method_scores_the_labelled_samples_again(
    client: TestClient, store: Store
) -> None:
    """exact_match on six samples, three of which answer their expected text word for
    word; the per-method report rescores them (assay.evaluation.agreement) and its AUROC
    equals scikit-learn's on the labels and the values exact_match gives."""
    run_id = "run-methods"
    store.start_run(run_id)
    values = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    for i, value in enumerate(values):
        sample = Sample(
            id=f"m{i}",
            query=f"Capital {i}?",
            response="Paris" if value else f"Lyon {i}",
            expected="Paris",
        )
        results = {"exact_match": MetricResult("exact_match", value, method="pattern")}
        store.record(run_id, i, sample, results, status="passed")
    store.finish_run(run_id)
    given = [1, 1, 0, 0, 0, 1]
    for i, value in enumerate(given):
        body = {"metric": "exact_match", "index": i, "label": value, "annotator": "methodist"}
        assert client.post(f"/api/runs/{run_id}/labels", json=body).status_code == 201
    plain = client.get(f"/api/runs/{run_id}/agreement", params={"metric": "exact_match"})
    assert plain.json()["by_method"] is None  # only when asked: it runs the models
    reply = client.get(
        f"/api/runs/{run_id}/agreement", params={"metric": "exact_match", "methods": "true"}
    )
    assert reply.status_code == 200, reply.text
    report = reply.json()["by_method"]
    assert report["metric"] == "exact_match" and report["labelled"] == 6
    (method,) = report["methods"]
    assert method["n"] == 6 and report["best_method"] == method["method"]
    assert method["auroc"] == pytest.approx(roc_auc_score(given, values))  # 7/9
    assert reply.json()["report"]["auroc"] == pytest.approx(roc_auc_score(given, values))
    page = client.get(f"/runs/{run_id}/agreement", params={"metric": "exact_match", "methods": 1})
    assert page.status_code == 200 and 'id="by-method"' in page.text


def test_a_conversation_and_an_agent_run_show_without_their_scores(
    client: TestClient, store: Store
) -> None:
    """The queue shows a conversation's turns and an agent's steps as the run page does
    (`assay.server.transcripts`), but without the per-turn scores and tool-call matches,
    which would give the metric's verdict away."""
    run_id = "run-transcripts"
    store.start_run(run_id)
    chat = Sample(
        id="chat",
        turns=[
            {"role": "user", "content": "Book a table for two."},
            {"role": "assistant", "content": "Done: 8 pm.", "tool_calls": [{"name": "book"}]},
        ],
        trace=[{"name": "book", "arguments": {"people": 2}}],
        expected_tool_calls=[{"name": "book", "arguments": {"people": 2}}],
    )
    turn_scores = {"turns": [{"turn": 1, "score": 0.25, "reason": "late"}]}
    matches = {
        "matches": [{"reference": 0, "made": 0, "tool": "book", "argument_agreement": 0.75}],
        "reference_calls": ["book"],
        "made_calls": ["book"],
    }
    results = {
        "turn_relevancy": MetricResult("turn_relevancy", 0.25, details=turn_scores),
        "tool_call_accuracy": MetricResult("tool_call_accuracy", 0.75, details=matches),
    }
    store.record(run_id, 0, chat, results, status="passed")
    store.finish_run(run_id)
    for metric in ("turn_relevancy", "tool_call_accuracy"):
        (item,) = queue(client, "reader", run_id, metric=metric)["items"]
        turns = item["conversation"]["turns"]
        assert [(t["role"], t["content"]) for t in turns] == [
            ("user", "Book a table for two."),
            ("assistant", "Done: 8 pm."),
        ]
        assert turns[1]["tool_calls"][0]["name"] == "book"
        assert [s["name"] for s in item["agent"]["steps"]] == ["book"]
        assert item["agent"]["steps"][0]["arguments"] == {"people": 2}
        assert [c["name"] for c in item["agent"]["expected"]] == ["book"]
        assert keys_in(item).isdisjoint({"scores", "intentions", "matchings", "unplaced"})
        assert "0.25" not in str(item) and "0.75" not in str(item)


def test_ratings_on_a_scale_give_the_graded_report(client: TestClient, store: Store) -> None:
    """Ratings 1-5 (stored as (r - 1) / 4) against the stored values: Spearman's rho and
    Kendall's tau-b equal scipy's; the report calls the labels graded."""
    from scipy.stats import kendalltau, spearmanr

    run_id = "run-graded"
    values = [0.1, 0.4, 0.35, 0.8, 0.9, 0.6]
    ratings = [1, 3, 2, 4, 5, 3]
    store.start_run(run_id, config={"thresholds": {"faithfulness": 0.5}})
    for i, value in enumerate(values):
        sample = _sample(i).model_copy(update={"query": f"Graded question {i}?"})
        results = {"faithfulness": MetricResult("faithfulness", value, method="local")}
        store.record(run_id, i, sample, results, status="passed")
    store.finish_run(run_id)
    for i, rating in enumerate(ratings):
        body = {
            "metric": "faithfulness",
            "index": i,
            "label": str(rating),
            "annotator": "grader",
            "scale": "1-5",
        }
        assert client.post(f"/api/runs/{run_id}/labels", json=body).status_code == 201
    reply = client.get(f"/api/runs/{run_id}/agreement", params={"metric": "faithfulness"})
    report = reply.json()["report"]
    scaled = [(r - 1) / 4 for r in ratings]
    assert report["kind"] == "graded" and report["n"] == 6 and report["positives"] is None
    assert report["spearman"] == pytest.approx(spearmanr(scaled, values).statistic)
    assert report["kendall_tau_b"] == pytest.approx(kendalltau(scaled, values).statistic)
    assert reply.json()["this_data"]["statistic"] == "spearman"
    page = client.get(f"/runs/{run_id}/agreement", params={"metric": "faithfulness"})
    assert 'id="card-spearman"' in page.text


def test_evidence_that_is_not_a_number_is_no_evidence(client: TestClient, store: Store) -> None:
    """Text, booleans and objects under the keys the queue reads (another metric's
    evidence, an older version's) count as absent, in SQL on both stores."""
    run_id = "run-odd"
    store.start_run(run_id)
    odd = [
        {"pass_threshold": "high", "graded_support": "0.3", "entailment_support": 0.1},
        {"decision_threshold": True, "probabilities": "x", "graded_support": [0.2]},
        {"pass_threshold": {"v": 1}, "probabilities": {"a": "p", "b": None}},
    ]
    for i, details in enumerate(odd):
        result = MetricResult("faithfulness", 0.2 + 0.25 * i, method="local", details=details)
        store.record(run_id, i, _sample(i), {"faithfulness": result}, status="passed")
    na = MetricResult("faithfulness", None, reason="no contexts")  # N/A: not in the queue
    store.record(run_id, 3, _sample(3), {"faithfulness": na}, status="passed")
    store.finish_run(run_id)
    body = {"metric": "faithfulness", "index": 3, "label": 1, "annotator": "odd"}
    refused = client.post(f"/api/runs/{run_id}/labels", json=body)
    assert refused.status_code == 409 and "no value of faithfulness" in refused.text
    plan = queue(client, "odd", run_id, order="disagreement")
    assert (plan["total"], plan["no_value"]) == (3, 1)
    # no threshold and no usable evidence: values 0.2, 0.45, 0.7 around 0.5 are 0.3,
    # 0.05 and 0.2 away -> 1, 2, 0
    assert [item["index"] for item in plan["items"]] == [1, 2, 0]
    assert plan["order_used"] == "uncertain"
    assert plan["thresholds_used"] == [
        {"value": 0.5, "source": "the middle of its range", "samples": 3}
    ]
