"""Agreement of Assay's metrics with people, on the labelled development data.

Run ``python benchmarks/validity.py`` (all checks) or ``python benchmarks/validity.py stsb``
(checks whose name contains any of the given words). Prints one table row per check and
statistic; ``--json FILE`` also writes the rows.

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
import csv
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import pearsonr, spearmanr

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from assay.config import AssayConfig
from assay.registry import get_metric
from assay.resources import Resources
from assay.sample import Sample

DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))
BOOTSTRAP = 1000


@dataclass
class Row:
    """One number of the report."""

    check: str
    dataset: str
    metric: str
    model: str
    statistic: str
    value: float | None
    ci95: tuple[float, float] | None = None
    n: int = 0
    na: int = 0
    seconds: float = 0.0
    note: str = ""


@dataclass
class Context:
    """What every check receives: the data folder and shared settings."""

    data: Path = DATA
    seed: int = 0
    resources: dict[str, Resources] = field(default_factory=dict)

    def res(self, **config: object) -> Resources:
        """Resources for a configuration, made once per run (models load once)."""
        key = json.dumps(config, sort_keys=True)
        if key not in self.resources:
            self.resources[key] = Resources(AssayConfig(use_cache=False, **config))
        return self.resources[key]


Check = Callable[[Context], list[Row]]
CHECKS: list[Check] = []


def check(func: Check) -> Check:
    """Register a check; its name is the function name without ``check_``."""
    CHECKS.append(func)
    return func


def check_name(func: Check) -> str:
    return func.__name__.removeprefix("check_")


# ---- data --------------------------------------------------------------------------------


@functools.cache
def stsb_pairs(data: Path) -> tuple[list[str], list[str], np.ndarray]:
    """STS-B dev: sentence1, sentence2 and the mean human similarity (0-5).

    TAB-separated, no header, unquoted text: read with QUOTE_NONE, keep the first 7 fields
    (genre, file, year, id, score, sentence1, sentence2).
    """
    left: list[str] = []
    right: list[str] = []
    gold: list[float] = []
    with (data / "stsb-dev.tsv").open(encoding="utf-8", newline="") as handle:
        for fields in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(fields) < 7:
                continue
            _genre, _file, _year, _id, score, s1, s2 = fields[:7]
            left.append(s1)
            right.append(s2)
            gold.append(float(score))
    return left, right, np.asarray(gold, dtype=np.float64)


@functools.cache
def begin_rows(data: Path) -> tuple[list[Sample], np.ndarray]:
    """BEGIN (Wizard of Wikipedia dev): knowledge as the context, response as the answer,
    label 1 for "Fully attributable", 0 otherwise."""
    samples: list[Sample] = []
    labels: list[int] = []
    with (data / "begin-wow-dev.tsv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            samples.append(Sample(response=row["response"], contexts=[row["knowledge"]]))
            labels.append(int(row["begin_label"] == "Fully attributable"))
    return samples, np.asarray(labels)


@functools.cache
def truthfulqa_items(data: Path) -> tuple[list[Sample], np.ndarray, np.ndarray]:
    """TruthfulQA (first 400 questions): every correct and every incorrect answer as a
    sample against the best answer; labels 1/0 and the question index of each."""
    samples: list[Sample] = []
    labels: list[int] = []
    groups: list[int] = []
    with (data / "truthfulqa-dev.csv").open(encoding="utf-8", newline="") as handle:
        for index, row in enumerate(csv.DictReader(handle)):
            for column, label in (("Correct Answers", 1), ("Incorrect Answers", 0)):
                for answer in row[column].split("; "):
                    if answer.strip():
                        samples.append(
                            Sample(
                                query=row["Question"],
                                response=answer.strip(),
                                expected=row["Best Answer"],
                            )
                        )
                        labels.append(label)
                        groups.append(index)
    return samples, np.asarray(labels), np.asarray(groups)


# ---- scoring and statistics ----------------------------------------------------------------


def metric_values(
    name: str, samples: Sequence[Sample], res: Resources
) -> tuple[np.ndarray, str, float]:
    """Values of a metric (NaN where None), the model of its signature, and seconds taken."""
    metric = get_metric(name)
    started = time.perf_counter()
    results = metric.score_batch(samples, res)
    seconds = time.perf_counter() - started
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(f"{name}: {len(errors)} samples failed, first: {errors[0]}")
    values = np.array([np.nan if r.value is None else r.value for r in results])
    model = next(
        (
            p.removeprefix("model=")
            for r in results
            for p in r.signature.split("|")
            if p.startswith("model=")
        ),
        "-",
    )
    return values, model, seconds


def _bootstrap_ci(
    x: np.ndarray, y: np.ndarray, stat: Callable[[np.ndarray, np.ndarray], float], seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = [stat(x[idx], y[idx]) for idx in rng.integers(len(x), size=(BOOTSTRAP, len(x)))]
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def _scored_pairs(
    check_: str,
    dataset: str,
    metric: str,
    model: str,
    values: np.ndarray,
    gold: np.ndarray,
    seconds: float,
    note: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, object]]:
    """Values and gold where the metric gave a value (NaN = N/A left out), the mask, and the
    fields every row of this check shares (its N/A count included)."""
    ok = ~np.isnan(values)
    common: dict[str, object] = {
        "check": check_,
        "dataset": dataset,
        "metric": metric,
        "model": model,
        "n": int(ok.sum()),
        "na": int((~ok).sum()),
        "seconds": seconds,
        "note": note,
    }
    return values[ok], gold[ok], ok, common


def spearman_row(
    check_: str,
    dataset: str,
    metric: str,
    model: str,
    values: np.ndarray,
    gold: np.ndarray,
    seconds: float,
    seed: int,
    note: str = "",
) -> list[Row]:
    """Spearman (with a 95% bootstrap interval) and Pearson of values against gold."""
    x, y, _, common = _scored_pairs(check_, dataset, metric, model, values, gold, seconds, note)

    def rho(a: np.ndarray, b: np.ndarray) -> float:
        return float(spearmanr(a, b).statistic)

    return [
        Row(statistic="spearman", value=rho(x, y), ci95=_bootstrap_ci(x, y, rho, seed), **common),
        Row(statistic="pearson", value=float(pearsonr(x, y).statistic), **common),
    ]


def auroc_rows(
    check_: str,
    dataset: str,
    metric: str,
    model: str,
    scores: np.ndarray,
    labels: np.ndarray,
    seconds: float,
    seed: int,
    groups: np.ndarray | None = None,
    note: str = "",
) -> list[Row]:
    """AUROC of scores for label 1 vs 0 (95% bootstrap interval); with ``groups``, also the
    share of (positive, negative) pairs of the same group (e.g. one question) that the
    scores order correctly, ties counting half."""
    from sklearn.metrics import roc_auc_score

    x, y, ok, common = _scored_pairs(check_, dataset, metric, model, scores, labels, seconds, note)

    def auc(a: np.ndarray, b: np.ndarray) -> float:
        return float(roc_auc_score(b, a)) if len(set(b.tolist())) == 2 else 0.5

    rows = [Row(statistic="auroc", value=auc(x, y), ci95=_bootstrap_ci(x, y, auc, seed), **common)]
    if groups is not None:  # each positive vs each negative of the same group
        g = groups[ok]
        pairs, wins = 0, 0.0
        for k in np.unique(g):
            xk, yk = x[g == k], y[g == k]
            n_pairs = int(yk.sum()) * int((1 - yk).sum())
            if n_pairs:
                pairs += n_pairs
                wins += auc(xk, yk) * n_pairs
        rows.append(Row(statistic="auroc_within_group", value=wins / pairs, **common))
    return rows


def _scores(
    name: str, samples: Sequence[Sample], res: Resources, component: str | None = None
) -> tuple[np.ndarray, str, float, list[object]]:
    """Values (or one component) of a metric, NaN where None; its estimator; seconds."""
    started = time.perf_counter()
    results = get_metric(name).score_batch(samples, res)
    seconds = time.perf_counter() - started
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(f"{name}: {len(errors)} samples failed, first: {errors[0]}")
    values = [r.components.get(component) if component else r.value for r in results]
    scores = np.array([np.nan if v is None else v for v in values], dtype=float)
    estimator = next(
        (str(r.details["estimator"]) for r in results if "estimator" in r.details), "-"
    )
    return scores, estimator, seconds, list(results)


def _stsb_check(
    ctx: Context, name: str, metric: str, note: str = "", **config: object
) -> list[Row]:
    left, right, gold = stsb_pairs(ctx.data)
    samples = [Sample(response=a, expected=b) for a, b in zip(left, right, strict=True)]
    values, model, seconds = metric_values(metric, samples, ctx.res(**config))
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
        scores, estimator, seconds, _ = _scores(name, samples, res)
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
    """Seed 004's anchor_hallucination vs BEGIN attributable/not: AUROC of 1 - value."""
    samples, labels = begin_rows(ctx.data)
    scores, _, seconds, _ = _scores("anchor_hallucination", samples, ctx.res())
    return auroc_rows(
        "begin_anchor_hallucination",
        "begin-wow-dev",
        "1 - anchor_hallucination",
        "spaCy en_core_web_sm",
        1.0 - scores,
        labels,
        seconds,
        ctx.seed,
        note="seed 004 formula: max(claim error, 0.2 drift step); lower-is-better inverted",
    )


@check
def check_truthfulqa_correctness_local(ctx: Context) -> list[Row]:
    """Local correctness estimators (no LLM) vs TruthfulQA correct/incorrect answers: AUROC."""
    samples, labels, groups = truthfulqa_items(ctx.data)
    res = ctx.res(judge_model=None)
    rows: list[Row] = []
    # the classification's continuous score; DON'T KNOW answers score 0 like the metric
    scores, estimator, seconds, results = _scores(
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
        "agreement (DON'T KNOW as reported)",
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
        "agreement (without DON'T KNOW)",
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
    scores, estimator, seconds, _ = _scores("factual_accuracy", samples, res)
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


# ---- report ------------------------------------------------------------------------------


def format_table(rows: Sequence[Row]) -> str:
    header = ("check", "metric", "model", "stat", "value", "95% CI", "n", "N/A", "s")
    lines = []
    for r in rows:
        ci = f"{r.ci95[0]:.3f}-{r.ci95[1]:.3f}" if r.ci95 else ""
        value = "N/A" if r.value is None else f"{r.value:.3f}"
        lines.append(
            (
                r.check,
                r.metric,
                r.model,
                r.statistic,
                value,
                ci,
                str(r.n),
                str(r.na),
                f"{r.seconds:.1f}",
            )
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out.extend("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines)
    notes = [f"{r.check}: {r.note}" for r in rows if r.note and r.statistic == "spearman"]
    return "\n".join(out + (["", *notes] if notes else []))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Agreement of metrics with human labels.")
    parser.add_argument("names", nargs="*", help="run checks whose name contains any of these")
    parser.add_argument("--data", type=Path, default=DATA, help=f"data folder (default {DATA})")
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    args = parser.parse_args(argv)

    if args.list:
        for func in CHECKS:
            print(f"{check_name(func):40s} {(func.__doc__ or '').strip()}")
        return 0
    chosen = [f for f in CHECKS if not args.names or any(n in check_name(f) for n in args.names)]
    if not chosen:
        parser.error(f"no check matches {args.names}; try --list")
    ctx = Context(data=args.data)
    rows: list[Row] = []
    for func in chosen:
        print(f"running {check_name(func)} ...", file=sys.stderr)
        rows.extend(func(ctx))
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
