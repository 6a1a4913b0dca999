"""Validity checks of the learned local judges on the data they were trained on, by
nested grouped cross-validation (each item scored by a head fitted without its group):
the support head on BEGIN and QAGS, the agreement head on TruthfulQA; and across
sources (leave one source out): the support head fitted on one data set and scored on
the other, beside the graded score that is fitted on nothing. Registered into
`validity_checks.CHECKS` when ``validity.py`` imports this module."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from assay.core.sample import Sample
from validity_checks import Context, check, metric_scores
from validity_data import truthfulqa_items
from validity_stats import Row, auroc_rows, scored_left_out

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))


#: the metrics that report the support head's probability (hallucination as 1 - it)
SUPPORT_METRICS = ("faithfulness", "ragas_faithfulness", "1 - hallucination")


def cross_validated(rows: list[Row]) -> list[Row]:
    """``rows`` marked as scored by models fitted without the item's group (their numbers
    are evidence although the head was trained on the data set)."""
    for row in rows:
        row.cross_validated = True
    return rows


@check
def check_agreement_head_cv(ctx: Context) -> list[Row]:
    """The agreement head's metrics on TruthfulQA, the data it was trained on, by nested
    grouped 5-fold CV: each answer scored by a head fitted without its question
    (scripts/train_agreement_head.py)."""
    from head_training import nested_cv_probabilities
    from train_agreement_head import features_and_rule

    from assay.estimators.offline import uncertainty_phrase

    samples, labels, groups = truthfulqa_items(ctx.data)
    res = ctx.res(judge_model=None)
    started = time.perf_counter()
    x, _ = features_and_rule(samples, res)
    probs, _ = nested_cv_probabilities(x, labels, groups)
    seconds = time.perf_counter() - started
    # as the metrics do: two non-answers agree (1); a DON'T KNOW answer's value is 0
    declined = np.array([bool(uncertainty_phrase(s.response or "")) for s in samples])
    both = declined & np.array([bool(uncertainty_phrase(s.expected or "")) for s in samples])
    reported = np.where(both, 1.0, probs)
    coverage, _, _, results = metric_scores("factual_accuracy", samples, res, "completeness")
    weights = results[0].details["weights"]  # type: ignore[attr-defined]
    factual = weights["correctness"] * reported + weights["completeness"] * coverage
    model = "agreement_head (nested grouped 5-fold CV)"
    note = "cross-validated: each answer scored by a head fitted on other questions only"
    rows: list[Row] = []
    for metric, scores, y, g in (
        ("answer_classification.agreement", np.where(declined, 0.0, reported), labels, groups),
        ("answer_classification.agreement (DON'T KNOW as reported)", reported, labels, groups),
        (
            "answer_classification.agreement (without DON'T KNOW)",
            reported[~declined],
            labels[~declined],
            groups[~declined],
        ),
        ("factual_accuracy", factual, labels, groups),
    ):
        rows += cross_validated(
            auroc_rows(
                "agreement_head_cv",
                "truthfulqa-dev",
                metric,
                model,
                scores,
                y,
                seconds,
                ctx.seed,
                g,
                note=note,
            )
        )
    return rows


@check
def check_support_head_cv(ctx: Context) -> list[Row]:
    """The support head's metrics on BEGIN and QAGS, the data it was trained on, by nested
    grouped 5-fold CV: each item scored by a head fitted without its group
    (scripts/train_support_head.py)."""
    from head_training import nested_cv_probabilities
    from train_support_head import pooled_items

    started = time.perf_counter()
    x, labels, groups, datasets, _ = pooled_items(ctx.data, ctx.res(judge_model=None))
    probs, _ = nested_cv_probabilities(x, labels, groups)
    seconds = time.perf_counter() - started
    rows: list[Row] = []
    for dataset in dict.fromkeys(datasets.tolist()):
        m = datasets == dataset
        p, y, g = probs[m], labels[m], groups[m]
        for metric in SUPPORT_METRICS:
            rows += cross_validated(
                auroc_rows(
                    "support_head_cv",
                    dataset,
                    metric,
                    "support_head (nested grouped 5-fold CV)",
                    p,
                    y,
                    seconds,
                    ctx.seed,
                    groups=g if dataset == "qags-cnndm-dev" else None,
                    note="cross-validated: each item scored by a head fitted on other groups only",
                )
            )
    return rows


@check
def check_support_head_left_out(ctx: Context) -> list[Row]:
    """The support head on each data set left out of its training: fitted (C by grouped
    CV) on the other data set only and scored on the one left out, beside the graded
    sentence-support score, which is fitted on nothing, on the same items. The rule for
    the default (docs/validity.md): the estimator whose worst left-out number is best."""
    from head_training import C_GRID, FOLD_SEED, FOLDS, choose_c, fit_head
    from train_support_head import pooled_items

    started = time.perf_counter()
    x, labels, groups, datasets, graded = pooled_items(ctx.data, ctx.res(judge_model=None))
    rows: list[Row] = []
    for left_out in dict.fromkeys(datasets.tolist()):
        test, train = datasets == left_out, datasets != left_out
        fitted_on = ", ".join(dict.fromkeys(datasets[train].tolist()))
        c, _ = choose_c(
            x[train], labels[train], groups[train], FOLDS, C_GRID, FOLD_SEED, standardise=True
        )
        head = fit_head(x[train], labels[train], c, standardise=True)
        logits = head.decision_function(x[test])  # a monotone map away from its probability
        seconds = time.perf_counter() - started
        y, g = labels[test], groups[test] if left_out == "qags-cnndm-dev" else None
        for metric in SUPPORT_METRICS:
            rows += scored_left_out(
                auroc_rows(
                    "support_head_left_out",
                    left_out,
                    metric,
                    f"support_head (fitted on {fitted_on} only)",
                    logits,
                    y,
                    seconds,
                    ctx.seed,
                    groups=g,
                    note=f"left out: the head was fitted on {fitted_on} only, not on this data set",
                ),
                fitted_on,
            )
            rows += scored_left_out(
                auroc_rows(
                    "support_head_left_out",
                    left_out,
                    f"{metric} (graded)",
                    "sentence_support (graded, fitted on nothing)",
                    graded[test],
                    y,
                    seconds,
                    ctx.seed,
                    groups=g,
                ),
                "nothing",
            )
    return rows


#: the toxicity data sets, by the trainer's source name (scripts/train_toxicity_head.py)
TOXICITY_DATASETS = {
    "davidson": "davidson-tweets",
    "stormfront": "stormfront",
    "toxigen": "toxigen-statements",
}


@check
def check_toxicity_left_out(ctx: Context) -> list[Row]:
    """toxicity_score's estimators on each toxicity source left out of the head's
    training: the head fitted (at the shipped C, its isotonic map on its own out-of-fold
    logits) on the other two sources only; alt-profanity-check (trained on its authors'
    data, Davidson's tweets among them, so its Davidson rows are in-sample); their mean
    (the default where alt-profanity-check is installed); the keywords, fitted on
    nothing; the mean of the head and the keywords (the base install's default).
    Also each source's out-of-fold AUROC of the head in grouped 5-fold CV over all three."""
    from train_toxicity_head import OUT, SOURCES, calibrated_head, load_parts

    from assay.models.toxicity import ToxicityModel

    c = float(json.loads(str(np.load(OUT)["metadata"]))["C"])
    profanity = ToxicityModel().name
    started = time.perf_counter()
    parts = load_parts(Path.home() / ".cache/assay/train.sqlite")
    rows: list[Row] = []
    for left_out in SOURCES:
        trained = tuple(s for s in SOURCES if s != left_out)
        fitted_on = ", ".join(TOXICITY_DATASETS[s] for s in trained)
        head, iso, _ = calibrated_head(parts, trained, c)
        part = parts[left_out]
        head_probs = iso.predict(head.decision_function(part["x"]))
        samples = [Sample(response=t) for t in part["raw"]]
        keywords, keywords_model, _, _ = metric_scores(
            "toxicity_score", samples, ctx.res(toxicity_method="keywords")
        )
        in_sample = left_out == "davidson"  # alt-profanity-check learned these tweets
        scored = (
            ("head", f"toxicity head (fitted on {fitted_on} only)", head_probs, fitted_on),
            ("profanity-check", profanity, part["profanity"], "its authors' data"),
            (
                "profanity-check+head",
                f"mean of {profanity} and toxicity head (fitted on {fitted_on} only)",
                (head_probs + part["profanity"]) / 2,
                f"{fitted_on} (head); its authors' data (profanity-check)",
            ),
            (
                "head+keywords",
                f"mean of {keywords_model} and toxicity head (fitted on {fitted_on} only)",
                (head_probs + np.asarray(keywords, dtype=float)) / 2,
                f"{fitted_on} (head); nothing (keywords)",
            ),
            ("keywords", keywords_model, np.asarray(keywords, dtype=float), "nothing"),
        )
        seconds = time.perf_counter() - started
        for method, model, scores, fitted in scored:
            found = auroc_rows(
                "toxicity_left_out",
                TOXICITY_DATASETS[left_out],
                f"toxicity_score ({method})",
                model,
                scores,
                part["y"],
                seconds,
                ctx.seed,
                note="1 = hate or offensive" if left_out == "davidson" else "1 = hate",
            )
            keep_in_sample = in_sample and "profanity" in method
            rows += found if keep_in_sample else scored_left_out(found, fitted)
    _, _, oof = calibrated_head(parts, SOURCES, c)
    offset = 0
    for name in SOURCES:
        y = parts[name]["y"]
        rows += cross_validated(
            auroc_rows(
                "toxicity_head_cv",
                TOXICITY_DATASETS[name],
                "toxicity_score (head)",
                "toxicity head (grouped 5-fold CV over the three sources)",
                oof[offset : offset + len(y)],
                y,
                time.perf_counter() - started,
                ctx.seed,
                note="cross-validated: each text scored by a head fitted without its group",
            )
        )
        offset += len(y)
    return rows
