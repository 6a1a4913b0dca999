"""From the rows of ``validity.py`` (and ``conversation_validity.py``) to the validity cards.

Each row that scored a registered metric (``faithfulness``, ``1 - hallucination``,
``turn_relevancy (minilm)``, ``answer_classification.agreement``: the name it starts with,
aliases resolved) becomes an evidence entry of that metric's card, with the data set's
description below, Assay's version and the date. A row named ``baseline: ...`` (a score
that knows nothing about meaning, such as reply length) is attached to the entries of the
same check and statistic instead. `write_cards` merges the new entries with the file's
(an entry is replaced when the same check measures the same thing again), rebuilds the
cards from the registry (`assay.outputs.validity_cards.refresh`) and writes the JSON and
``docs/validity.md``.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import assay
from assay.metrics.registry import metric_class, metric_names
from assay.outputs.validity_cards import load_cards, refresh, render_markdown
from validity_stats import Row

ROOT = Path(__file__).resolve().parent.parent
CARDS_JSON = ROOT / "src" / "assay" / "data" / "validity.json"
CARDS_DOC = ROOT / "docs" / "validity.md"

#: the labelled data sets, by the id rows carry; ``compared``: what the labels separate
#: when a row does not say (``per_check``: followed by the check's name, which names the
#: rated quality); ``trained_on_by``: a resource (a metric's ``needs``) whose
#: model was trained on the data, so that metric's numbers on it are no evidence
#: how an estimator trained on a data set is named in a row's model: a row of another
#: estimator of the same metric (the graded support score) is evidence on that data set
TRAINED_MODEL: dict[str, tuple[str, ...]] = {
    "support_head": ("support_head",),
    "agreement_head": ("agreement_head",),
    "toxicity": ("toxicity head", "alt-profanity-check"),  # the tweets: both; others: the head
}
DATASETS: dict[str, dict[str, str]] = {
    "stsb-dev": {
        "name": "STS Benchmark",
        "split": "dev",
        "labels": "similarity 0-5, mean of annotators (1,500 sentence pairs)",
        "compared": "human similarity 0-5",
        "source": "Cer et al. 2017 (SemEval 2017 Task 1)",
        "licence": "scores CC BY-SA 4.0, sentences under their sources' terms",
    },
    "begin-wow-dev": {
        "name": "BEGIN Wizard of Wikipedia",
        "split": "dev",
        "labels": "response fully attributable to the knowledge snippet or not (430)",
        "compared": "responses fully attributable to the knowledge vs not",
        "source": "Dziri et al. 2022",
        "licence": "CC BY 4.0",
        "trained_on_by": "support_head",
    },
    "truthfulqa-dev": {
        "name": "TruthfulQA",
        "split": "first 400 questions",
        "labels": "correct and incorrect answers per question, and a best answer",
        "compared": "correct vs incorrect answers",
        "source": "Lin et al. 2021",
        "licence": "Apache-2.0",
        "trained_on_by": "agreement_head",
    },
    "qags-cnndm-dev": {
        "name": "QAGS CNN/DailyMail",
        "split": "all (used as dev)",
        "labels": "summary sentence supported by the article: 3 crowd yes/no (714 sentences)",
        "compared": "summary sentences the article supports vs not (majority of 3 workers)",
        "source": "Wang et al. 2020",
        "licence": "research use, cite the paper",
        "trained_on_by": "support_head",
    },
    "qags-cnndm-long": {
        "name": "QAGS CNN/DailyMail, each article in a 10,000-word document",
        "split": "all (used as dev)",
        "labels": "as QAGS CNN/DailyMail; the article put among about 30 others (714 sentences)",
        "compared": "summary sentences the article supports vs not, read against 10,000 words",
        "source": "Wang et al. 2020",
        "licence": "research use, cite the paper",
        "trained_on_by": "support_head",
    },
    "davidson-tweets": {
        "name": "Davidson tweets",
        "split": "all (used as dev)",
        "labels": "hate speech / offensive / neither, annotator majority (24,783 tweets)",
        "compared": "hate speech or offensive language vs neither",
        "source": "Davidson et al. 2017",
        "licence": "MIT",
        "trained_on_by": "toxicity",
    },
    "stormfront": {
        "name": "Stormfront hate speech",
        "split": "all but the dataset's sampled_test (used as dev)",
        "labels": "forum sentence is hate speech or not, one annotator each (10,225)",
        "compared": "hate speech vs not (forum sentences)",
        "source": "de Gibert et al. 2018 (Vicomtech/hate-speech-dataset)",
        "licence": "CC BY-SA 3.0 ES",
        "trained_on_by": "toxicity",
    },
    "toxigen-statements": {
        "name": "ToxiGen statements",
        "split": "all human-written statements (used as training data)",
        "labels": "statement about a group is hateful or neutral, by its authors (946)",
        "compared": "hateful vs neutral statements about 13 groups",
        "source": "Hartvigsen et al. 2022 (microsoft/TOXIGEN)",
        "licence": "MIT / CDLA-Permissive-2.0",
        "trained_on_by": "toxicity",
    },
    "usr-topical-chat": {
        "name": "USR Topical-Chat",
        "split": "all (used as dev)",
        "labels": "per reply, 3 annotators: Maintains Context 1-3, Overall 1-5, ... (360)",
        "compared": "annotators' mean rating of the reply",
        "per_check": "the check names the rated quality",
        "source": "Mehri & Eskenazi 2020 (Topical-Chat, Gopalakrishnan et al. 2019)",
        "licence": "text CDLA-Sharing-1.0; ratings MIT (UniEval copy)",
    },
    "dstc9-interactive": {
        "name": "DSTC9 interactive",
        "split": "550 of 2,200 conversations (used as dev)",
        "labels": "per conversation, ~3 annotators: consistent 0/1, coherent 1-3, ...",
        "compared": "annotators' mean rating of the conversation",
        "per_check": "the check names the rated quality",
        "source": "Gunasekara et al. 2021",
        "licence": "see benchmarks/data/dialogue/README.md",
    },
}

_NAME = re.compile(r"^(?:1 - )?([a-z][a-z0-9_]*)")


def metric_of(row: Row) -> str | None:
    """The registered metric a row scored (its canonical name), or None (a baseline)."""
    found = _NAME.match(row.metric)
    if found is None or found.group(1) not in metric_names():
        return None
    return metric_class(found.group(1)).name


def _entry(row: Row, name: str, measured: str) -> dict[str, Any]:
    data = DATASETS[row.dataset]
    needs = metric_class(name).needs
    entry: dict[str, Any] = {
        "dataset": {"id": row.dataset, **{k: data[k] for k in ("name", "split", "licence")}},
        "check": row.check,
        "compared": row.compared
        or (f"{data['compared']} ({row.check})" if "per_check" in data else data["compared"]),
        "scored": row.metric,
        "estimator": row.model,
        "statistic": row.statistic,
        "value": None if row.value is None else round(float(row.value), 4),
        "ci95": None if row.ci95 is None else [round(float(v), 4) for v in row.ci95],
        "n": row.n,
        "na": row.na,
        "note": row.note,
        "assay_version": assay.__version__,
        "measured": measured,
    }
    if row.cross_validated:
        entry["cross_validated"] = True
    elif row.fitted_on:
        entry["left_out"] = True
        entry["fitted_on"] = row.fitted_on
    elif data.get("trained_on_by") in needs and any(
        name in row.model for name in TRAINED_MODEL[data["trained_on_by"]]
    ):
        entry["trained_on"] = True
    return entry


def evidence_from_rows(rows: Sequence[Row], measured: str) -> dict[str, list[dict[str, Any]]]:
    """Evidence entries per metric; baselines attached to the entries they accompany."""
    by_metric: dict[str, list[dict[str, Any]]] = {}
    baselines = [r for r in rows if r.metric.startswith("baseline:")]
    for row in rows:
        name = metric_of(row)
        if name is None:
            continue
        entry = _entry(row, name, measured)
        for base in baselines:
            if (base.check, base.statistic) == (
                row.check,
                row.statistic,
            ) and base.value is not None:
                entry.setdefault("baselines", {})[base.metric.removeprefix("baseline: ")] = round(
                    float(base.value), 4
                )
        by_metric.setdefault(name, []).append(entry)
    return by_metric


def merge(doc: dict[str, Any], new: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The document with the new entries: a check run again replaces all its old entries
    for the metrics it scored (an estimator it no longer runs leaves no stale entry);
    entries of checks not run this time stay (with their own date and version)."""
    cards = {name: dict(card) for name, card in doc.get("cards", {}).items()}
    for name, entries in new.items():
        fresh = {(e["check"], e["scored"]) for e in entries}
        kept = [
            e
            for e in cards.get(name, {}).get("evidence", [])
            if (e["check"], e["scored"]) not in fresh
        ]
        cards.setdefault(name, {})["evidence"] = kept + entries
    for card in cards.values():
        card["evidence"].sort(key=lambda e: (e["dataset"]["id"], e["check"]))
    return {**doc, "cards": cards}


def write_cards(
    rows: Sequence[Row], json_path: Path = CARDS_JSON, doc_path: Path = CARDS_DOC
) -> dict[str, Any]:
    """Merge the rows' evidence into the cards file, refresh every card and write the
    JSON and the markdown."""
    doc = load_cards(json_path) if json_path.exists() else {}
    measured = datetime.date.today().isoformat()
    datasets = {
        k: {f: v[f] for f in ("name", "split", "labels", "source", "licence")}
        for k, v in DATASETS.items()
    }
    doc = refresh(merge({**doc, "datasets": datasets}, evidence_from_rows(rows, measured)))
    json_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    doc_path.write_text(render_markdown(doc), encoding="utf-8")
    return doc


def rows_from_json(paths: Sequence[Path]) -> list[Row]:
    """Rows saved with ``--json`` by validity.py or conversation_validity.py."""
    rows: list[Row] = []
    for path in paths:
        for item in json.loads(path.read_text(encoding="utf-8")):
            ci = item.get("ci95")
            rows.append(Row(**{**item, "ci95": tuple(ci) if ci else None}))
    return rows
