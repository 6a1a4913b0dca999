"""`assay agreement` and `assay.evaluation.agreement.agreement_report`: each method's numbers
equal scikit-learn's / scipy's on the values the same method gives in `evaluate`; the
judge (the test judge server) is a method; JSON and table output; errors."""

from __future__ import annotations

import json

import pytest
from scipy.stats import kendalltau, spearmanr
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, roc_auc_score
from typer.testing import CliRunner

import assay.cli.agreement_cmd  # noqa: F401  (registers the command on the app)
from assay.cli import app
from assay.core.agreement_stats import auroc, bootstrap_interval, cross_validated_threshold
from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.evaluation.agreement import (
    METHOD_SETTINGS,
    AgreementError,
    agreement_report,
    methods_for,
)
from assay.evaluation.runner import evaluate
from assay.metrics.registry import list_metrics
from judge_server import JudgeServer
from live_stores import sqlite_or_postgres  # noqa: F401  (the store_url fixture)

runner = CliRunner()

#: per topic: a question, the expected answer, a paraphrase of it, a near copy with a
#: wrong fact, and an unrelated reply. Labels: the copy and the paraphrase are right (1,
#: rated 5 and 4 of 5), the wrong fact and the unrelated reply wrong (0, rated 2 and 1).
TOPICS = [
    (
        "What is the capital of France?",
        "The capital of France is Paris.",
        "Paris is the capital city of France.",
        "The capital of France is Lyon.",
        "I do not know.",
    ),
    (
        "When does the store open?",
        "The store opens at nine in the morning.",
        "We open every morning at nine.",
        "The store opens at ten in the morning.",
        "Bananas are yellow.",
    ),
    (
        "How do I reset my password?",
        "Reset your password from the account settings page.",
        "Open the account settings page and choose reset password.",
        "Reset your password by calling the bank.",
        "The weather is sunny.",
    ),
    (
        "At what temperature does water boil?",
        "Water boils at one hundred degrees Celsius.",
        "At one hundred degrees Celsius, water boils.",
        "Water boils at fifty degrees Celsius.",
        "Cats like milk.",
    ),
    (
        "How often does the Earth orbit the Sun?",
        "The Earth orbits the Sun once a year.",
        "Once every year the Earth goes around the Sun.",
        "The Sun orbits the Earth once a year.",
        "Sorry, I cannot help with that.",
    ),
    (
        "How long does shipping take?",
        "Shipping takes three to five business days.",
        "Delivery needs three to five working days.",
        "Shipping takes three to five weeks.",
        "Please contact support.",
    ),
    (
        "When is the meeting?",
        "The meeting is on Tuesday at noon.",
        "We meet on Tuesday at noon.",
        "The meeting is on Friday at noon.",
        "Let me check the calendar.",
    ),
    (
        "How fast are refunds processed?",
        "Refunds are processed within ten days.",
        "You get your refund within ten days.",
        "Refunds are processed within ten months.",
        "Okay.",
    ),
]
RATINGS = (5, 4, 2, 1)


def _records() -> list[dict]:
    rows = []
    for t, (query, expected, *responses) in enumerate(TOPICS):
        for v, (response, rating) in enumerate(zip([expected, *responses], RATINGS, strict=True)):
            rows.append(
                {
                    "id": f"t{t}v{v}",
                    "query": query,
                    "response": response,
                    "expected": expected,
                    "rating": rating,
                }
            )
    return rows


def _binary_samples() -> list[Sample]:
    return [
        Sample(**{k: v for k, v in r.items() if k != "rating"}, label=float(r["rating"] >= 4))
        for r in _records()
    ]


def _values(samples: list[Sample], metric: str, config: AssayConfig) -> list[float]:
    run = evaluate(samples, metrics=[metric], config=config)
    values = run.values(metric)
    assert None not in values
    return values  # type: ignore[return-value]


def test_binary_report_equals_sklearn_on_the_same_values():
    samples = _binary_samples()
    labels = [s.label for s in samples]
    config = AssayConfig(thresholds={"rouge": 0.6})
    report = agreement_report(samples, ["exact_match", "rouge"], config)
    assert report.samples == 32
    exact, rouge = report.metrics
    for agreement, threshold in ((exact, 1.0), (rouge, 0.6)):
        assert agreement.label_kind == "binary"
        assert agreement.label_counts == {"0": 16, "1": 16}
        assert agreement.threshold == threshold
        (method,) = agreement.methods  # neither metric has another estimator, nor a judge
        assert method.method == "offline"
        assert (method.n, method.n_not_applicable, method.n_errors) == (32, 0, 0)
        values = _values(samples, agreement.metric, config)
        predicted = [float(v >= threshold) for v in values]
        assert method.auroc == pytest.approx(roc_auc_score(labels, values), abs=1e-12)
        assert method.balanced_accuracy_at_threshold == pytest.approx(
            balanced_accuracy_score(labels, predicted), abs=1e-12
        )
        assert method.cohen_kappa == pytest.approx(cohen_kappa_score(labels, predicted), abs=1e-12)
        assert method.kappa_basis == "threshold"
        assert method.auroc_interval == bootstrap_interval(auroc, labels, values, seed=0)
        cv = cross_validated_threshold(labels, values, folds=5, seed=0)
        assert method.cross_validated == cv.to_dict()
        assert agreement.best_method == "offline"
        # 16 labels a class: the report says the intervals are wide
        assert (
            "only 16 labels of class 0 (fewer than 20): the intervals are wide" in agreement.notes
        )
    # exact_match: the 8 copies are 1, the 8 paraphrases 0 like the 16 wrong answers ->
    # AUROC = (8 * 16 * 1 + 8 * 16 * 0.5) / 256 = 0.75
    assert exact.methods[0].auroc == pytest.approx(0.75)


def test_graded_labels_give_spearman_kendall_and_kappa_on_the_scale_points(env):
    data = env / "rated.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in _records()) + "\n")
    result = runner.invoke(
        app, ["agreement", str(data), "-m", "rouge", "--label-scale", "1-5", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    (rouge,) = json.loads(result.stdout)["metrics"]
    assert rouge["label_kind"] == "graded" and rouge["main_statistic"] == "spearman"
    assert rouge["scale_points"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    labels = [(r["rating"] - 1) / 4 for r in _records()]
    samples = [Sample(**{k: v for k, v in r.items() if k != "rating"}) for r in _records()]
    values = _values(samples, "rouge", AssayConfig())
    (method,) = rouge["methods"]
    assert method["spearman"] == pytest.approx(spearmanr(labels, values).statistic, abs=1e-12)
    assert method["kendall_tau_b"] == pytest.approx(kendalltau(labels, values).statistic, abs=1e-12)
    # kappa of label and value each rounded to the nearest of the 5 points
    rounded = [round(v * 4) / 4 for v in values]
    assert method["cohen_kappa"] == pytest.approx(
        cohen_kappa_score([str(x) for x in labels], [str(x) for x in rounded]), abs=1e-12
    )
    assert method["kappa_basis"] == "scale points"
    assert method["auroc"] is None and method["cross_validated"] is None
    assert rouge["best_method"] == "offline"


def test_the_judge_is_a_method_and_ties_go_to_fewer_judge_requests(cache_dir):
    samples = _binary_samples()
    labels = [s.label for s in samples]
    with JudgeServer() as server:
        judged = AssayConfig(
            judge_model="test-judge",
            judge_base_url=server.url,
            cache_dir=cache_dir,  # the session's embeddings; no judge cache
            judge_cache=False,
        )
        report = agreement_report(samples, ["judged_relevance"], judged)
        calls = server.calls
        judge_values = _values(samples, "judged_relevance", judged)
    (agreement,) = report.metrics
    offline, llm = agreement.methods
    assert (offline.method, llm.method) == ("offline", "llm")
    assert offline.ran == {"local (question_answer_cosine)": 32}
    assert llm.ran == {"llm": 32}
    assert offline.judge_requests == 0
    assert llm.judge_requests == calls > 0
    offline_values = _values(
        samples, "judged_relevance", AssayConfig(judge_model=None, cache_dir=cache_dir)
    )
    assert offline.auroc == pytest.approx(roc_auc_score(labels, offline_values), abs=1e-12)
    assert llm.auroc == pytest.approx(roc_auc_score(labels, judge_values), abs=1e-12)
    best = max((offline, llm), key=lambda m: (m.auroc, -m.judge_requests))
    assert agreement.best_method == best.method
    # no threshold: kappa is of the out-of-fold predictions
    assert llm.kappa_basis == "out_of_fold"
    assert "balanced_accuracy_at_threshold" in llm.reasons


def test_every_metric_with_an_offline_estimator_choice_is_in_the_methods_table():
    choosers = {"support_head", "toxicity"}
    assert {m.name for m in list_metrics() if m.needs & choosers} <= set(METHOD_SETTINGS)
    labels = [m.label for m in methods_for("faithfulness", AssayConfig())]
    assert labels == [
        "graded",
        "entailment",
        "graded+entailment",
        "head",
        "entailment+sentences",
        "graded+entailment+sentences",
    ]
    judged = AssayConfig(judge_model="m", judge_base_url="http://127.0.0.1:9/v1")
    labels = [m.label for m in methods_for("toxicity_score", judged)]
    assert labels == [
        "profanity-check+head",
        "head+keywords",
        "head",
        "profanity-check",
        "keywords",
    ]
    assert [m.label for m in methods_for("faithfulness", judged)][-1] == "llm"
    assert [m.label for m in methods_for("faithfulness", judged, every=False)] == ["configured"]


def test_cli_json_and_table_output(env):
    data = env / "labelled.jsonl"
    rows = [
        {**{k: v for k, v in r.items() if k != "rating"}, "verdict": r["rating"] >= 4}
        for r in _records()
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = ["agreement", str(data), "-m", "exact_match", "--label-field", "verdict"]
    as_json = runner.invoke(app, [*args, "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    expected = agreement_report(_binary_samples(), ["exact_match"], AssayConfig()).to_dict()
    for method in (*document["metrics"][0]["methods"], *expected["metrics"][0]["methods"]):
        method.pop("seconds")
    assert document == json.loads(json.dumps(expected))
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "exact_match ↑  (labels 1: 16, 0: 16; threshold 1)" in table.stdout
    assert "offline *" in table.stdout  # the best method is starred
    assert "0.750 [" in table.stdout
    assert "best method: offline, auroc 0.750 (95% CI" in table.stdout


@pytest.mark.parametrize(
    ("rows", "extra", "message"),
    [
        ([{"response": "a", "expected": "a"}], [], "no sample has a label for exact_match"),
        ([{"response": "a", "expected": "a", "label": 1}], ["-m", "exact_mach"], "exact_mach"),
        ([{"response": "a", "expected": "a"}], ["--label-field", "grade"], "grade"),
        ([{"response": "a", "expected": "a", "label": 3}], [], "--label-scale"),
        ([{"response": "a", "expected": "a", "label": 1}], ["--label-scale", "5-1"], "scale"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(env, rows, extra, message):
    data = env / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    metric = [] if "-m" in extra else ["-m", "exact_match"]
    result = runner.invoke(app, ["agreement", str(data), *metric, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.strip().startswith("error:")
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_metric_and_unlabelled_metric_raise_agreement_error():
    with pytest.raises(AgreementError, match="no sample has a label for rouge"):
        agreement_report([Sample(response="a", expected="a")], ["rouge"], AssayConfig())
    with pytest.raises(AgreementError, match="exact_mach"):
        agreement_report([Sample(response="a", label=1.0)], ["exact_mach"], AssayConfig())


def test_a_stored_run_is_read_with_the_stores_labels(env, store_url):
    data = env / "d.jsonl"
    rows = [{k: v for k, v in r.items() if k != "rating"} for r in _records()]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    stored = runner.invoke(
        app,
        [
            "evaluate",
            str(data),
            "-m",
            "exact_match",
            "--store",
            "--db",
            store_url,
            "--format",
            "json",
        ],
    )
    assert stored.exit_code == 0, stored.output
    from assay.core.labels import sample_key
    from assay.store.db import Store

    store = Store(store_url)
    try:
        (run,) = store.runs()
        run_id = run["run_id"] if "run_id" in run else run["id"]
        for record in _records():
            sample = Sample(**{k: v for k, v in record.items() if k != "rating"})
            store.add_label(
                sample_key=sample_key(sample),
                value=float(record["rating"] >= 4),
                raw=str(int(record["rating"] >= 4)),
                annotator="alice",
                metric="exact_match",
                run_id=run_id,
            )
    finally:
        store.close()
    result = runner.invoke(
        app, ["agreement", run_id, "-m", "exact_match", "--db", store_url, "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    (agreement,) = json.loads(result.stdout)["metrics"]
    assert agreement["label_counts"] == {"0": 16, "1": 16}
    assert agreement["methods"][0]["auroc"] == pytest.approx(0.75)
    missing = runner.invoke(app, ["agreement", "nosuchrun", "-m", "exact_match", "--db", store_url])
    assert missing.exit_code == 2
    assert "nosuchrun: no such file, and no stored run with this id" in missing.stderr


def test_labels_of_one_class_are_said_plainly():
    samples = [Sample(response=r, expected="a", label=1.0) for r in ("a", "b", "a b")]
    (agreement,) = agreement_report(samples, ["exact_match"], AssayConfig()).metrics
    assert agreement.notes == [
        "every label is 1: AUROC, balanced accuracy and a threshold need labels of both classes"
    ]
    (method,) = agreement.methods
    assert (
        method.auroc is None and method.reasons["auroc"] == "the scored labels hold one class only"
    )
    assert agreement.best_method is None


def test_labels_averaged_from_disagreeing_annotators_are_named():
    labels = [1.0, 0.0, 0.5, 1.0, 0.0]
    samples = [
        Sample(response=r, expected="a", label=v) for r, v in zip("abcde", labels, strict=True)
    ]
    (agreement,) = agreement_report(samples, ["exact_match"], AssayConfig()).metrics
    assert agreement.label_kind == "graded"
    assert (
        "1 labels are 0.5 and the others 0 or 1 (two annotators who disagree average to "
        "0.5): the labels are read as graded; settle or drop those samples for AUROC and "
        "a threshold"
    ) in agreement.notes


def test_a_metric_off_the_label_scale_gets_no_kappa_on_graded_labels():
    # e2e_latency is the duration in ms: Spearman compares ranks, kappa would need the
    # values on the labels' [0, 1] scale
    samples = [
        Sample(response="r", duration=seconds, label=label)
        for seconds, label in ((0.5, 1.0), (1.0, 0.75), (2.0, 0.5), (4.0, 0.25), (3.0, 0.0))
    ]
    (agreement,) = agreement_report(samples, ["e2e_latency"], AssayConfig()).metrics
    (method,) = agreement.methods
    assert agreement.label_kind == "graded" and agreement.scale_points is None
    # ranks: labels 5 4 3 2 1, latencies 1 2 3 5 4 -> d^2 = 16+4+0+9+9 = 38;
    # 1 - 6 * 38 / (5 * 24) = -0.9
    assert method.spearman == pytest.approx(-0.9)
    assert method.cohen_kappa is None
    assert (
        method.reasons["cohen_kappa"] == "the metric's values are not on the labels' [0, 1] scale"
    )


#: two judges of a panel (the test server tells them apart by model) on the first 8
#: samples (labels 1 1 0 0 1 1 0 0): alpha orders the labels perfectly, beta barely
PANEL_SCORES = {
    "alpha": [0.9, 0.8, 0.4, 0.3, 0.7, 0.6, 0.2, 0.1],
    "beta": [0.9, 0.2, 0.8, 0.1, 0.7, 0.3, 0.6, 0.4],
}


def test_a_panel_and_each_of_its_judges_are_methods(cache_dir):
    samples = _binary_samples()[:8]
    index = {(s.query, s.response): i for i, s in enumerate(samples)}

    def judge(model: str):
        def script(task, blocks, body):
            score = PANEL_SCORES[model][index[(blocks["query"], blocks["response"])]]
            return {"score": score, "reason": model}

        return script

    with JudgeServer() as server:
        server.by_model = {model: judge(model) for model in PANEL_SCORES}
        config = AssayConfig(
            cache_dir=cache_dir,  # the session's embeddings; no judge cache
            judge_cache=False,
            judge_base_url=server.url,
            judge_models=[{"model": "alpha"}, {"model": "beta"}],
            panel="mean",
        )
        (agreement,) = agreement_report(samples, ["judged_relevance"], config).metrics
        calls = server.calls_by_model()
    by_method = {m.method: m for m in agreement.methods}
    assert list(by_method) == ["offline", "llm panel (mean)", "llm:alpha", "llm:beta"]
    assert by_method["llm:alpha"].settings == {"judge": "alpha"}
    # alpha: every positive above every negative -> 1.0. beta: positives 0.9, 0.2, 0.7,
    # 0.3 against negatives 0.8, 0.1, 0.6, 0.4 -> 4 + 1 + 3 + 1 = 9 of 16 pairs. The
    # panel's mean (0.9, 0.5, 0.7, 0.45 against 0.6, 0.2, 0.4, 0.25) -> 4+3+4+3 = 14 of 16
    assert by_method["llm:alpha"].auroc == 1.0
    assert by_method["llm:beta"].auroc == pytest.approx(9 / 16)
    assert by_method["llm panel (mean)"].auroc == pytest.approx(14 / 16)
    assert agreement.best_method == "llm:alpha"
    # each judge alone asks 8 questions; the panel asks both judges: 16
    assert by_method["llm:alpha"].judge_requests == 8
    assert by_method["llm:beta"].judge_requests == 8
    assert by_method["llm panel (mean)"].judge_requests == 16
    assert calls == {"alpha": 16, "beta": 16}


def test_not_applicable_values_are_counted_and_left_out():
    samples = _binary_samples()
    # no expected answer: exact_match is N/A (None) on these two, never 0
    samples[2] = samples[2].model_copy(update={"expected": None})
    samples[9] = samples[9].model_copy(update={"expected": None})
    (agreement,) = agreement_report(samples, ["exact_match"], AssayConfig()).metrics
    (method,) = agreement.methods
    assert (method.n, method.n_not_applicable, method.n_errors) == (30, 2, 0)
    kept = [i for i in range(32) if i not in (2, 9)]
    labels = [samples[i].label for i in kept]
    values = [1.0 if samples[i].response == samples[i].expected else 0.0 for i in kept]
    assert method.auroc == pytest.approx(roc_auc_score(labels, values), abs=1e-12)
