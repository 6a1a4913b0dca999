"""Validity checks of the entailment model (`assay.models.entailment`) as the support
estimator, on the two data sets of the question "is this text supported by its
evidence?": BEGIN (dialogue replies against Wikipedia knowledge) and QAGS CNN/DM (summary
sentences against their article). The model was trained on neither
(``scripts/train_entailment.py``: NLI pairs and synthetic Wikipedia pairs, some with the
errors LLMs make), so both are left out of its training; the graded support, fitted on
nothing, and the plain mean of the two (``graded+entailment``, equal weights, fitted on
nothing more) are scored beside it on the same items. The rule for the default
(docs/validity.md): the estimator whose worst left-out number is best, and a default
changes only when the new one loses on no left-out data set. Registered into
`validity_checks.CHECKS` when ``validity.py`` imports this module."""

from __future__ import annotations

import tempfile

import numpy as np

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from validity_checks import Context, check, metric_scores
from validity_data import begin_rows, qags_cnndm_long, qags_cnndm_sentences
from validity_stats import Row, auroc_rows, scored_left_out

#: what the entailment model was fitted on (its validity rows' ``fitted_on``)
ENTAILMENT_FITTED_ON = (
    "SNLI, MultiNLI, SciTail and FEVER pairs, synthetic Wikipedia pairs with LLM-style errors"
)
#: the support estimators compared: row label -> (support_estimator, entailment_premises,
#: fitted on); the windows+sentences reading is an option (`assay.estimators.entailment`)
SUPPORT_ESTIMATORS = {
    "graded+entailment": ("graded+entailment", "windows", ENTAILMENT_FITTED_ON),
    "entailment": ("entailment", "windows", ENTAILMENT_FITTED_ON),
    "sentence_support (graded)": ("graded", "windows", "nothing"),
    "graded+entailment, windows+sentences": (
        "graded+entailment",
        "windows+sentences",
        ENTAILMENT_FITTED_ON,
    ),
    "entailment, windows+sentences": ("entailment", "windows+sentences", ENTAILMENT_FITTED_ON),
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
    for setting, (estimator_setting, premises, _) in SUPPORT_ESTIMATORS.items():
        res = ctx.res(
            judge_model=None, support_estimator=estimator_setting, entailment_premises=premises
        )
        for dataset, samples, labels, groups in data:
            for metric in METRICS:
                scores, estimator, seconds, _ = metric_scores(metric, samples, res)
                if metric == "hallucination":  # lower is better: 1 - it ranks support
                    scores, metric = 1.0 - scores, "1 - hallucination"
                scored = (scores, estimator, seconds)
                rows += _estimator_rows("support_estimators_left_out", dataset, metric, setting,
                                        scored, labels, ctx.seed, groups)  # fmt: skip
    return rows


def _estimator_rows(
    check_: str,
    dataset: str,
    metric: str,
    setting: str,
    scored: tuple[np.ndarray, str, float],
    labels: np.ndarray,
    seed: int,
    groups: np.ndarray | None,
) -> list[Row]:
    """The AUROC rows of a metric's ``scored`` (scores, estimator, seconds) with the
    support estimator ``setting`` (a `SUPPORT_ESTIMATORS` label), marked as left out of
    that estimator's fitting."""
    fitted_on = SUPPORT_ESTIMATORS[setting][2]
    scores, estimator, seconds = scored
    note = f"left out: the estimator was fitted on {fitted_on}"
    rows = auroc_rows(check_, dataset, f"{metric} ({setting})", estimator, np.asarray(scores),
                      labels, seconds, seed, groups=groups, note=note)  # fmt: skip
    return scored_left_out(rows, fitted_on)


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
        for setting, (estimator_setting, premises, _) in SUPPORT_ESTIMATORS.items():
            config = AssayConfig(cache_dir=cache, judge_model=None,
                                 support_estimator=estimator_setting,
                                 entailment_premises=premises)  # fmt: skip
            res = Resources(config)
            scores, estimator, seconds, _ = metric_scores("faithfulness", samples, res)
            res.close()  # its cache file, before the folder goes
            rows += _estimator_rows("support_long_documents", "qags-cnndm-long", "faithfulness",
                                    setting, (scores, estimator, seconds), labels, ctx.seed,
                                    groups)  # fmt: skip
    return rows
