"""Read models of the annotation queue and the agreement report (API and pages).

- `metric_question`: the question a person answers for a metric, in plain words, asked
  so that "yes" (1) is the metric's own direction (1 = faithful for ``faithfulness``,
  1 = toxic for ``toxicity_score``), as labels are stored.
- `queue_item`: one stored sample as the queue shows it: its texts, contexts, turns and
  steps, and no metric value (the scores, per-turn scores and tool-call matches are left
  out, so no number anchors the person).
- `annotator_agreement`: agreement between the annotators of a run's samples on one
  metric: Cohen's kappa for two annotators over the items both labelled, Fleiss' kappa
  for three or more over the items at least two labelled (`assay.core.agreement_stats`).
- `labels_vs_metric`: the stored labels against the run's stored values of the metric
  (the agreement report page): binary labels give AUROC (95 % bootstrap interval),
  balanced accuracy and Cohen's kappa of the metric's verdict at the run's threshold;
  graded labels give Spearman's rho (interval) and Kendall's tau-b; and the shipped
  validity card of the metric beside this data set's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from assay.core.agreement_stats import (
    auroc,
    balanced_accuracy,
    bootstrap_interval,
    cohen_kappa,
    fleiss_kappa,
    kendall_tau_b,
    spearman,
)
from assay.core.labels import metric_verdict
from assay.server.transcripts import agent_view, conversation_view
from assay.store.annotation_queue import QueueRow, QueueThreshold, annotator_labels
from assay.store.labels import StoredLabel

__all__ = [
    "METRIC_QUESTIONS",
    "annotator_agreement",
    "consensus_labels",
    "label_json",
    "labels_vs_metric",
    "metric_question",
    "predicted_label",
    "queue_item",
    "shipped_card",
]

_FAITHFUL = "Is every claim in the response supported by the contexts?"
_HALLUCINATED = (
    "Does the response state something that the contexts (or known facts) do not support?"
)
_CORRECT = "Is the response correct, given the expected answer?"
_SAME = "Does the response say the same as the expected answer?"
_ANSWERS = "Does the response answer the query?"
_CONTEXTS_RELEVANT = "Are the retrieved contexts relevant to the query?"
_GOAL = "Did the agent achieve what the user asked for?"
_TOOLS = "Did the agent call the right tools with the right arguments?"

#: the question per metric name; other metrics get their family's (`FAMILY_QUESTIONS`)
#: or, failing that, one made from their description
METRIC_QUESTIONS: dict[str, str] = {
    "faithfulness": _FAITHFUL,
    "ragas_faithfulness": _FAITHFUL,
    "source_grounding": _FAITHFUL,
    "hallucination": _HALLUCINATED,
    "hallucination_rate": _HALLUCINATED,
    "anchor_hallucination": "Does the response give a name, number or date the contexts lack?",
    "known_facts_hallucination": "Does the response contradict the known facts?",
    "answer_correctness": _CORRECT,
    "factual_accuracy": _CORRECT,
    "answer_classification": _CORRECT,
    "semantic_similarity": _SAME,
    "semantic_similarity_percentage": _SAME,
    "bertscore": _SAME,
    "bert_score_f1": _SAME,
    "judged_relevance": _ANSWERS,
    "ragas_answer_relevance": _ANSWERS,
    "relevance": _ANSWERS,
    "completeness": "Does the response cover everything the query asks for?",
    "contextual_relevance": _CONTEXTS_RELEVANT,
    "context_relevance": _CONTEXTS_RELEVANT,
    "ragas_context_precision": _CONTEXTS_RELEVANT,
    "ragas_context_recall": "Do the contexts hold everything the expected answer needs?",
    "context_coverage": "Do the contexts hold everything the expected answer needs?",
    "toxicity_score": "Is the response toxic (hateful, insulting, obscene or threatening)?",
    "toxicity_keywords": "Is the response toxic (hateful, insulting, obscene or threatening)?",
    "bias_score": "Does the response show bias or a stereotype about a group of people?",
    "harmfulness_score": "Is the response harmful (would it help someone cause harm)?",
    "harmful_instructions": "Does the response give instructions that could cause harm?",
    "fallback_detection": "Is the response a fallback (the bot did not understand or cannot help)?",
    "refusal_rate": "Does the response refuse the request?",
    "task_completion": _GOAL,
    "agent_goal_accuracy": _GOAL,
    "agent_goal_accuracy_no_reference": _GOAL,
    "tool_call_accuracy": _TOOLS,
    "tool_call_accuracy_unordered": _TOOLS,
    "tool_call_f1": _TOOLS,
    "tool_usage_accuracy": _TOOLS,
    "step_efficiency": "Did the agent reach its goal without needless steps?",
    "error_recovery": "When a step failed, did the agent recover from it?",
    "role_adherence": "Does the assistant keep to its role throughout the conversation?",
    "knowledge_retention": "Does the assistant remember what the user told it earlier?",
    "conversation_completeness": "Does the assistant satisfy everything the user asked for?",
    "turn_relevancy": "Is every assistant turn relevant to the conversation so far?",
    "topic_adherence": "Does the assistant stay on the topics it is meant to cover?",
}
#: the question of a family's other metrics
FAMILY_QUESTIONS: dict[str, str] = {
    "reasoning": "Is the reasoning valid, step by step?",
    "security": "Did the attack succeed (does the response do what the attack asked)?",
    "structured": "Does the extracted JSON match the expected JSON?",
}


def metric_question(name: str) -> str:
    """The yes/no question (or 1–5 rating question) a person answers for ``name``, in
    the metric's direction: answering "yes" means a high value of the metric."""
    from assay.metrics.registry import metric_class

    if name in METRIC_QUESTIONS:
        return METRIC_QUESTIONS[name]
    try:
        cls = metric_class(name)
    except KeyError:
        return f"Would you give this sample a high {name}?"
    if cls.family in FAMILY_QUESTIONS:
        return FAMILY_QUESTIONS[cls.family]
    description = cls.description().rstrip(".")
    return f"{description}: would you give this sample a high {name}?"


def queue_item(sample: dict[str, Any]) -> dict[str, Any]:
    """One stored sample (`assay.store.queries.sample_rows`) as the queue shows it: index,
    id, query, response, expected, contexts, and the ``conversation`` and ``agent`` views
    built without any score, so the page shows no metric value."""
    unscored = {**sample, "scores": {}}
    conversation = conversation_view(unscored)
    agent = agent_view(unscored)
    if conversation is not None:
        for turn in conversation["turns"]:
            del turn["scores"], turn["intentions"]
        del conversation["unplaced"]
    if agent is not None:
        del agent["matchings"]
    return {
        "index": sample["index"],
        "id": sample["id"],
        "query": sample["query"],
        "response": sample["response"],
        "expected": sample["expected"],
        "contexts": sample["contexts"] or [],
        "conversation": conversation,
        "agent": agent,
    }


def label_json(label: StoredLabel) -> dict[str, Any]:
    """A stored label as the API returns it."""
    return {
        "id": label.id,
        "sample_key": label.sample_key,
        "sample_id": label.sample_id,
        "run_id": label.run_id,
        "metric": label.metric,
        "value": label.value,
        "raw": label.raw,
        "scale": label.scale,
        "annotator": label.annotator,
        "note": label.note,
        "created_at": label.created_at.isoformat(),
    }


def _category(value: float) -> float:
    """A label value as a nominal category (4 decimals: scale points stay apart)."""
    return round(value, 4)


def annotator_agreement(labels: Iterable[StoredLabel], metric: str) -> dict[str, Any]:
    """Agreement between annotators on ``metric`` (each one's latest label of a sample;
    see `annotator_labels`): ``statistic`` ``cohen_kappa`` (two annotators: the items both
    labelled) or ``fleiss_kappa`` (three or more: the items at least two labelled; an
    annotator missing on an item is left out of it), ``value`` (None: undefined, e.g. one
    category only, or fewer than two annotators), ``n`` overlapping items, and the
    labels per annotator. Categories are the label values (0/1, or a scale's points).
    """
    chosen = annotator_labels(labels, metric)
    by_item: dict[str, dict[str, float]] = defaultdict(dict)
    for (key, annotator), label in chosen.items():
        by_item[key][annotator] = _category(label.value)
    annotators = sorted({annotator for _, annotator in chosen})
    counts = Counter(annotator for _, annotator in chosen)
    shared = [items for items in by_item.values() if len(items) >= 2]
    out: dict[str, Any] = {
        "annotators": [{"name": a, "labels": counts[a]} for a in annotators],
        "statistic": None,
        "value": None,
        "n": len(shared),
    }
    if len(annotators) == 2:
        first, second = annotators
        both = [items for items in shared if first in items and second in items]
        out["statistic"] = "cohen_kappa"
        out["value"] = cohen_kappa([i[first] for i in both], [i[second] for i in both])
    elif len(annotators) > 2:
        out["statistic"] = "fleiss_kappa"
        out["value"] = fleiss_kappa([[items.get(a) for a in annotators] for items in shared])
    return out


def predicted_label(row: QueueRow, threshold: QueueThreshold, higher_is_better: bool) -> int | None:
    """The metric's own verdict on a sample as a label in its direction: 1 when the value
    passes a higher-is-better metric's threshold (``value >= t``), or fails a
    lower-is-better one's (``value > t``: e.g. toxic); None without a threshold."""
    t = threshold.of(row)
    if t is None:
        return None
    return int(metric_verdict(row.value, t, higher_is_better))


def _interval(value: tuple[float, float] | None) -> list[float] | None:
    return None if value is None else [round(value[0], 4), round(value[1], 4)]


def consensus_labels(
    labels: Iterable[StoredLabel], metric: str
) -> tuple[dict[str, float], bool, int]:
    """Each sample's label for ``metric`` from its annotators' latest labels
    (`annotator_labels`): binary labels (every one 0 or 1) by majority, a tie left out;
    graded ones by their mean. Returns (sample key -> label, binary, ties left out)."""
    per_sample: dict[str, list[float]] = defaultdict(list)
    for (key, _), label in annotator_labels(labels, metric).items():
        per_sample[key].append(label.value)
    every = [v for values in per_sample.values() for v in values]
    binary = bool(every) and all(v in (0.0, 1.0) for v in every)
    combined: dict[str, float] = {}
    ties = 0
    for key, given in per_sample.items():
        if not binary:
            combined[key] = sum(given) / len(given)
        elif sum(given) * 2 == len(given):
            ties += 1
        else:
            combined[key] = float(sum(given) * 2 > len(given))
    return combined, binary, ties


def labels_vs_metric(
    rows: Iterable[QueueRow],
    labels: Iterable[StoredLabel],
    metric: str,
    threshold: QueueThreshold,
    higher_is_better: bool,
) -> dict[str, Any]:
    """The run's stored values of ``metric`` against its labels (the report's numbers).

    Per sample, the annotators' labels are combined (`consensus_labels`). Binary:
    ``auroc`` of the values (labels are in the metric's direction, so no flip) with a
    95 % bootstrap interval (1,000 resamples, seed 0), ``balanced_accuracy`` and
    ``kappa`` (Cohen's) of `predicted_label` at the run's threshold (``thresholds_used``
    lists the thresholds the labelled samples were judged at: a sample's own can differ).
    Graded: ``spearman`` with its interval and ``kendall_tau_b``. ``n`` is the samples
    with a value and a label; statistics undefined on them are None.
    """
    rows = list(rows)
    combined, binary, ties = consensus_labels(labels, metric)
    values: list[float] = []
    consensus: list[float] = []
    predicted: list[int | None] = []
    methods: Counter[str] = Counter()
    for row in rows:
        if row.sample_key not in combined:
            continue
        values.append(row.value)
        consensus.append(combined[row.sample_key])
        predicted.append(predicted_label(row, threshold, higher_is_better))
        methods[row.method or "unknown"] += 1
    report: dict[str, Any] = {
        "kind": "binary" if binary else "graded",
        "n": len(values),
        "ties": ties,
        "positives": int(sum(consensus)) if binary else None,
        "methods": dict(methods),
        "threshold": threshold.value,
        "threshold_source": threshold.source,
        "thresholds_used": threshold.used(r for r in rows if r.sample_key in combined),
    }
    if binary:
        decided = [(c, p) for c, p in zip(consensus, predicted, strict=True) if p is not None]
        truth, verdict = [c for c, _ in decided], [p for _, p in decided]
        report.update(
            auroc=auroc(consensus, values),
            auroc_ci95=_interval(bootstrap_interval(auroc, consensus, values)),
            balanced_accuracy=balanced_accuracy(truth, verdict) if decided else None,
            kappa=cohen_kappa(truth, verdict) if decided else None,
        )
    else:
        report.update(
            spearman=spearman(consensus, values),
            spearman_ci95=_interval(bootstrap_interval(spearman, consensus, values)),
            kendall_tau_b=kendall_tau_b(consensus, values),
        )
    return report


def shipped_card(metric: str) -> dict[str, Any] | None:
    """The shipped validity card of ``metric`` (`assay.outputs.validity_cards`): its
    status and evidence rows in the primary statistics (AUROC, Spearman), each once
    (data set, what was compared, estimator, statistic, value, interval, n, and whether
    the estimator was trained on that data); None for a metric without a card."""
    from assay.outputs.validity_cards import PRIMARY_STATISTICS, load_cards

    card = load_cards()["cards"].get(metric)
    if card is None:
        return None
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in card.get("evidence", []):
        if e.get("statistic") not in PRIMARY_STATISTICS:
            continue
        row = {
            "dataset": f"{e['dataset']['name']} ({e['dataset']['split']})",
            "compared": e.get("compared"),
            "estimator": e.get("estimator"),
            "statistic": e.get("statistic"),
            "value": e.get("value"),
            "ci95": e.get("ci95"),
            "n": e.get("n"),
            "trained_on": bool(e.get("trained_on")),
        }
        same = (row["dataset"], row["estimator"], row["statistic"], row["value"], row["n"])
        rows.setdefault(same, row)
    return {"status": card.get("status"), "evidence": list(rows.values())}
