"""Validity checks of the entailment model (`assay.models.entailment`) as the support
estimator, on the two data sets of the question "is this text supported by its
evidence?": BEGIN (dialogue replies against Wikipedia knowledge) and QAGS CNN/DM (summary
sentences against their article). The model was trained on neither
(``scripts/train_entailment.py``: NLI pairs and synthetic Wikipedia pairs), so both are
left out of its training; the graded support, fitted on nothing, and the plain mean of
the two (``graded+entailment``, equal weights, fitted on nothing more) are scored beside
it on the same items. The rule for the default (docs/validity.md): the estimator whose worst
left-out number is best, and a default changes only when the new one loses on no left-out
data set. Registered into `validity_checks.CHECKS` when ``validity.py`` imports this
module."""

from __future__ import annotations

import tempfile

import numpy as np

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from validity_checks import Context, check, metric_scores
from validity_data import begin_rows, qags_cnndm_long, qags_cnndm_sentences
from validity_stats import Row, auroc_rows, scored_left_out

#: what the entailment model was fitted on (its validity rows' ``fitted_on``)
ENTAILMENT_FITTED_ON = "SNLI, MultiNLI, SciTail and FEVER pairs, synthetic Wikipedia pairs"
#: the support estimators compared: support_estimator -> (row label, fitted on)
SUPPORT_ESTIMATORS = {
    "graded+entailment": ("graded+entailment", ENTAILMENT_FITTED_ON),
    "entailment": ("entailment", ENTAILMENT_FITTED_ON),
    "graded": ("sentence_support (graded)", "nothing"),
}
#: the metrics that report the support (hallucination as 1 - it)
METRICS = ("faithfulness", "ragas_faithfulness", "hallucination")


@check
def check_support_estimators_left_out(ctx: Context) -> list[Row]:
    """faithfulness, ragas_faithfulness and hallucination with each support estimator
    (``support_estimator``) on BEGIN and QAGS CNN/DM, both left out of every estimator's
    fitting: AUROC for supported vs not (QAGS: also within each summary's article)."""
    begin, begin_labels = begin_rows(ctx.data)
    qags, qags_labels, qags_groups = qags_cnndm_sentences(ctx.data)
    data = (
        ("begin-wow-dev", begin, begin_labels, None),
        ("qags-cnndm-dev", qags, qags_labels, qags_groups),
    )
    rows: list[Row] = []
    for setting, (label, fitted_on) in SUPPORT_ESTIMATORS.items():
        res = ctx.res(judge_model=None, support_estimator=setting)
        for dataset, samples, labels, groups in data:
            for metric in METRICS:
                scores, estimator, seconds, _ = metric_scores(metric, samples, res)
                if metric == "hallucination":  # lower is better: 1 - it ranks support
                    scores, metric = 1.0 - scores, "1 - hallucination"
                rows += scored_left_out(
                    auroc_rows(
                        "support_estimators_left_out",
                        dataset,
                        f"{metric} ({label})",
                        estimator,
                        np.asarray(scores),
                        labels,
                        seconds,
                        ctx.seed,
                        groups=groups,
                        note=f"left out: the estimator was fitted on {fitted_on}",
                    ),
                    fitted_on,
                )
    return rows


@check
def check_support_long_documents(ctx: Context) -> list[Row]:
    """faithfulness with each support estimator on QAGS CNN/DM with every article read
    inside a document of 10,000 words (`validity_data.long_documents`: the
    article among about 30 others): AUROC for supported vs not, and within each article,
    beside the same sentences against the article alone (support_estimators_left_out).
    One on-disk cache serves the three estimators, so each document is parsed and
    embedded once (the values are those of an uncached run)."""
    samples, labels, groups = qags_cnndm_long(ctx.data)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as cache:
        for setting, (label, fitted_on) in SUPPORT_ESTIMATORS.items():
            config = AssayConfig(cache_dir=cache, judge_model=None, support_estimator=setting)
            res = Resources(config)
            scores, estimator, seconds, _ = metric_scores("faithfulness", samples, res)
            rows += scored_left_out(
                auroc_rows(
                    "support_long_documents",
                    "qags-cnndm-long",
                    f"faithfulness ({label})",
                    estimator,
                    np.asarray(scores),
                    labels,
                    seconds,
                    ctx.seed,
                    groups=groups,
                    note=f"left out: the estimator was fitted on {fitted_on}",
                ),
                fitted_on,
            )
    return rows
