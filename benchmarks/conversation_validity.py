"""Agreement of the offline conversation estimators with people, on public dialogue dev data.

Run ``python benchmarks/conversation_validity.py`` (all checks) or with words that pick
checks by name (``usr``, ``retention``); ``--json FILE`` also writes the rows. The metrics
run as users get them with no judge configured (their local estimators, method
``local``), through ``get_metric(name).score_batch``.

Data (``benchmarks/data/dialogue``, see its README; both are used as development data):

- ``usr_topical_chat.jsonl``: USR's Topical-Chat ratings (Mehri & Eskenazi 2020), 360
  responses (6 systems x 60 contexts), each the assistant's last turn after its context;
  3 annotators per response. "Maintains Context" (1-3) is what ``turn_relevancy`` asks
  of a reply; the estimator's score of that last reply is compared with it.
- ``dstc9_interactive.jsonl``: DSTC9 interactive evaluation (Gunasekara et al. 2021), 550
  human-chatbot conversations (50 of each of 11 chatbots), about 3 annotators each, rated
  as whole conversations: "consistent" (0/1) against ``knowledge_retention``,
  "coherent" (1-3) against ``turn_relevancy``, "understanding" (1-3) and the overall
  rating (1-5) against ``conversation_completeness``.

Statistics: Spearman and Kendall (tau-b) of the metric against the annotators' mean,
AUROC for a binary label and balanced accuracy at a threshold chosen by 5-fold
cross-validation (the cut that maximises balanced accuracy on four folds, applied to the
fifth); 95% intervals from a bootstrap over contexts (USR: the 6 responses to one context
move together) or conversations. Each embedding estimator runs with the default embedder
(USE multilingual v3) and with all-MiniLM-L6-v2 (``embedder="minilm"``, the models extra).
Each metric comes with baselines that know nothing about meaning (the length of the reply
or of the conversation; a constant has AUROC 0.5 and balanced accuracy 0.5): an estimator
is worth something where it beats them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, spearmanr

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from validity_checks import Checks, check_name, format_table, metric_scores
from validity_stats import Row

DATA = Path(__file__).resolve().parent / "data" / "dialogue"
BOOTSTRAP = 1000
FOLDS = 5

Stat = Callable[[np.ndarray, np.ndarray], float]


@dataclass(frozen=True)
class Rated:
    """One conversation of a data file with its human scores."""

    sample: Sample
    human: dict[str, list[int | None]]
    group: str  # what moves together in the bootstrap and the folds
    system: str


@dataclass(frozen=True)
class Scored:
    """A metric's results on a data file: conversation values, the score of the last
    assistant turn (from ``details["turns"]``; NaN where that turn was not reviewed), the
    estimator named in the details, and seconds taken."""

    values: np.ndarray
    last_turn: np.ndarray
    estimator: str
    seconds: float


# ---- data --------------------------------------------------------------------------------


@functools.cache
def load(path: Path) -> tuple[Rated, ...]:
    """A data file's conversations; the group is the conversation's context for USR (the
    id without its response number) and the conversation itself otherwise."""
    rated = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        human = record.pop("human")
        system = record.pop("system")
        ident = record["id"]
        group = ident.rsplit("-", 1)[0] if ident.startswith("usr-") else ident
        rated.append(Rated(Sample(**record), human, group, system))
    return tuple(rated)


def human_mean(rated: Sequence[Rated], quality: str) -> np.ndarray:
    """The annotators' mean of a quality per conversation (N/A answers left out; NaN when
    all are N/A)."""
    out = []
    for r in rated:
        given = [v for v in r.human[quality] if v is not None]
        out.append(float(np.mean(given)) if given else np.nan)
    return np.asarray(out)


def reply_words(rated: Sequence[Rated]) -> np.ndarray:
    """Words in the conversation's last turn (the rated reply in USR)."""
    return np.asarray([len((r.sample.turns or [])[-1].content.split()) for r in rated], float)


def turn_count(rated: Sequence[Rated]) -> np.ndarray:
    return np.asarray([len(r.sample.turns or []) for r in rated], float)


def mean_reply_words(rated: Sequence[Rated]) -> np.ndarray:
    """Mean words per assistant turn of the conversation."""
    out = []
    for r in rated:
        replies = [t.content for t in r.sample.turns or [] if t.role == "assistant"]
        out.append(float(np.mean([len(t.split()) for t in replies])) if replies else np.nan)
    return np.asarray(out)


# ---- scoring -----------------------------------------------------------------------------


def score(name: str, rated: Sequence[Rated], res: Resources) -> Scored:
    """Run a metric on the conversations; any sample error stops the check."""
    samples = [r.sample for r in rated]
    values, estimator, seconds, results = metric_scores(name, samples, res)
    last = []
    for sample, result in zip(samples, results, strict=True):
        final = len(sample.turns or []) - 1
        turns = result.details.get("turns") or []
        hit = [t["score"] for t in turns if t.get("turn") == final and t.get("score") is not None]
        last.append(float(hit[0]) if hit else np.nan)
    return Scored(values, np.asarray(last), estimator, seconds)


# ---- statistics --------------------------------------------------------------------------


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    return float(spearmanr(x, y).statistic)


def kendall(x: np.ndarray, y: np.ndarray) -> float:
    return float(kendalltau(x, y).statistic)


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a positive scores above a negative, ties counting half."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if len(set(labels.tolist())) == 2 else 0.5


def balanced_accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    positives, negatives = labels == 1, labels == 0
    return float((predicted[positives].mean() + (1 - predicted[negatives]).mean()) / 2)


def fold_of(groups: np.ndarray, folds: int = FOLDS) -> np.ndarray:
    """Fold number of each item: groups are dealt to folds in a fixed shuffled order, so
    one group's items share a fold."""
    names = np.unique(groups)
    order = np.random.default_rng(0).permutation(len(names))
    fold = {names[i]: k % folds for k, i in enumerate(order)}
    return np.asarray([fold[g] for g in groups])


def best_cut(scores: np.ndarray, labels: np.ndarray) -> float:
    """The cut ``score >= cut`` -> positive with the highest balanced accuracy."""
    cuts = np.unique(scores)
    accuracies = [balanced_accuracy((scores >= c).astype(int), labels) for c in cuts]
    return float(cuts[int(np.argmax(accuracies))])


def cv_balanced_accuracy(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> float:
    """Balanced accuracy of predictions made with a cut tuned on the other folds."""
    folds = fold_of(groups)
    predicted = np.zeros_like(labels)
    for k in range(FOLDS):
        test = folds == k
        cut = best_cut(scores[~test], labels[~test])
        predicted[test] = (scores[test] >= cut).astype(int)
    return balanced_accuracy(predicted, labels)


def grouped_ci(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, stat: Stat, reps: int
) -> tuple[float, float]:
    """95% percentile interval of ``stat`` over resamples of whole groups."""
    names, inverse = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inverse == g) for g in range(len(names))]
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(reps):
        idx = np.concatenate([members[g] for g in rng.integers(len(names), size=len(names))])
        value = stat(x[idx], y[idx])
        if not np.isnan(value):
            draws.append(value)
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def within_group_spearman(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> float:
    """Mean Spearman over groups (e.g. the 6 replies to one context) where both vary."""
    rhos = []
    for g in np.unique(groups):
        xg, yg = x[groups == g], y[groups == g]
        if len(set(xg.tolist())) > 1 and len(set(yg.tolist())) > 1:
            rhos.append(spearman(xg, yg))
    return float(np.mean(rhos)) if rhos else float("nan")


@dataclass(frozen=True)
class Against:
    """What rows are about: the check, data set, what was scored and by what."""

    check: str
    dataset: str
    metric: str
    model: str
    seconds: float = 0.0
    note: str = ""


def _kept(
    scores: np.ndarray, gold: np.ndarray, groups: np.ndarray, about: Against
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, object]]:
    """Scores, gold and groups where both are known, and the fields every row shares."""
    ok = ~np.isnan(scores) & ~np.isnan(gold)
    common = {**asdict(about), "n": int(ok.sum()), "na": int((~ok).sum())}
    return scores[ok], gold[ok], groups[ok], common


def rank_rows(
    about: Against, scores: np.ndarray, gold: np.ndarray, groups: np.ndarray, reps: int
) -> list[Row]:
    """Spearman and Kendall (each with its bootstrap interval) against graded scores."""
    x, y, g, common = _kept(scores, gold, groups, about)
    return [
        Row(statistic=name, value=stat(x, y), ci95=grouped_ci(x, y, g, stat, reps), **common)
        for name, stat in (("spearman", spearman), ("kendall", kendall))
    ]


def binary_rows(
    about: Against, scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, reps: int
) -> list[Row]:
    """AUROC (bootstrap interval) and cross-validated balanced accuracy for 0/1 labels."""
    x, y, g, common = _kept(scores, labels, groups, about)
    y = y.astype(int)
    return [
        Row(statistic="auroc", value=auroc(x, y), ci95=grouped_ci(x, y, g, auroc, reps), **common),
        Row(statistic="balanced_acc_cv", value=cv_balanced_accuracy(x, y, g), **common),
    ]


# ---- checks ------------------------------------------------------------------------------


@dataclass
class Context:
    data: Path = DATA
    reps: int = BOOTSTRAP
    resources: dict[str, Resources] = field(default_factory=dict)

    def res(self, embedder: str | None = None) -> Resources:
        """No judge, so every conversation metric runs its local estimator; the default
        embedder (USE multilingual v3) or the one named. Made once per embedder; the
        embedding cache is on (the metrics embed the same turns), so the seconds shown
        are not the cost of a cold run."""
        key = embedder or "default"
        if key not in self.resources:
            config = {"embedder": embedder} if embedder else {}
            self.resources[key] = Resources(AssayConfig(judge_model=None, **config))
        return self.resources[key]


#: this script's checks, named as validity.py's are (`check_name`)
CHECKS = Checks()
check = CHECKS


def _groups(rated: Sequence[Rated]) -> np.ndarray:
    return np.asarray([r.group for r in rated])


#: embedders the embedding estimators are checked with: the default (USE multilingual v3)
#: and all-MiniLM-L6-v2 (``embedder="minilm"``)
EMBEDDERS: tuple[str | None, ...] = (None, "minilm")

#: (what was scored, its values, the estimator or "-", seconds)
Candidate = tuple[str, np.ndarray, str, float]


def _embedder_runs(
    ctx: Context, metric: str, rated: Sequence[Rated], last_turn: bool = False
) -> list[Candidate]:
    """The metric's values (or its last reply's score) with each of `EMBEDDERS`."""
    out: list[Candidate] = []
    for embedder in EMBEDDERS:
        scored = score(metric, rated, ctx.res(embedder))
        label = (
            metric + ("[last reply]" if last_turn else "") + (f" ({embedder})" if embedder else "")
        )
        values = scored.last_turn if last_turn else scored.values
        out.append((label, values, scored.estimator, scored.seconds))
    return out


def _rows(
    ctx: Context,
    check_: str,
    dataset: str,
    candidates: Sequence[Candidate],
    gold: np.ndarray,
    groups: np.ndarray,
    note: str,
    labels: np.ndarray | None = None,
) -> list[Row]:
    """Rank rows of every candidate against ``gold`` (and binary rows against ``labels``
    when given); the note goes on the first candidate's rows."""
    rows: list[Row] = []
    for i, (metric, values, model, seconds) in enumerate(candidates):
        about = Against(check_, dataset, metric, model, seconds, note if i == 0 else "")
        if labels is not None:
            rows += binary_rows(about, values, labels, groups, ctx.reps)
        rows += rank_rows(about, values, gold, groups, ctx.reps)
        if dataset.startswith("usr"):
            x, y, g, common = _kept(values, gold, groups, about)
            within = within_group_spearman(x, y, g)
            rows.append(Row(statistic="spearman_within_context", value=within, **common))
    return rows


@check
def check_usr_turn_relevancy(ctx: Context) -> list[Row]:
    """turn_relevancy's score of the rated reply vs USR Topical-Chat "Maintains Context"
    (and the overall rating)."""
    rated = load(ctx.data / "usr_topical_chat.jsonl")
    candidates = [
        *_embedder_runs(ctx, "turn_relevancy", rated, last_turn=True),
        ("baseline: reply words", reply_words(rated), "-", 0.0),
    ]
    note = "score of the rated (last) reply; 6 replies per context, bootstrap over contexts"
    rows: list[Row] = []
    for quality in ("maintains_context", "overall"):
        gold = human_mean(rated, quality)
        name = f"usr_turn_relevancy_{quality}"
        rows += _rows(ctx, name, "usr-topical-chat", candidates, gold, _groups(rated), note)
    return rows


@check
def check_dstc9_knowledge_retention(ctx: Context) -> list[Row]:
    """knowledge_retention vs DSTC9 "consistent": AUROC for no annotator finding the
    system inconsistent, Spearman with the annotators' mean."""
    rated = load(ctx.data / "dstc9_interactive.jsonl")
    consistent = human_mean(rated, "consistent")
    label = np.where(np.isnan(consistent), np.nan, (consistent == 1).astype(float))
    scored = score("knowledge_retention", rated, ctx.res(None))  # it embeds nothing
    candidates = [
        ("knowledge_retention", scored.values, scored.estimator, scored.seconds),
        ("baseline: -turns", -turn_count(rated), "-", 0.0),
    ]
    note = (
        f"positive = all annotators rated it consistent ({int(np.nansum(label))} of {len(rated)})"
    )
    return _rows(
        ctx,
        "dstc9_knowledge_retention",
        "dstc9-interactive",
        candidates,
        consistent,
        _groups(rated),
        note,
        labels=label,
    )


@check
def check_dstc9_turn_relevancy(ctx: Context) -> list[Row]:
    """turn_relevancy (the conversation's value) vs DSTC9 "coherent" (1-3)."""
    rated = load(ctx.data / "dstc9_interactive.jsonl")
    candidates = [
        *_embedder_runs(ctx, "turn_relevancy", rated),
        ("baseline: turns", turn_count(rated), "-", 0.0),
        ("baseline: mean reply words", mean_reply_words(rated), "-", 0.0),
    ]
    gold = human_mean(rated, "coherent")
    note = "one rating of the whole conversation; the value is the mean over replies"
    return _rows(
        ctx, "dstc9_turn_relevancy", "dstc9-interactive", candidates, gold, _groups(rated), note
    )


@check
def check_dstc9_conversation_completeness(ctx: Context) -> list[Row]:
    """conversation_completeness vs DSTC9 "understanding" (1-3) and the overall rating."""
    rated = load(ctx.data / "dstc9_interactive.jsonl")
    candidates = [
        *_embedder_runs(ctx, "conversation_completeness", rated),
        ("baseline: turns", turn_count(rated), "-", 0.0),
        ("baseline: mean reply words", mean_reply_words(rated), "-", 0.0),
    ]
    note = "open-domain chat: what the user wanted is implicit; N/A = no request found"
    rows: list[Row] = []
    for quality in ("understanding", "overall"):
        gold = human_mean(rated, quality)
        name = f"dstc9_completeness_{quality}"
        rows += _rows(ctx, name, "dstc9-interactive", candidates, gold, _groups(rated), note)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Agreement of conversation metrics with people.")
    parser.add_argument("names", nargs="*", help="run checks whose name contains any of these")
    parser.add_argument("--data", type=Path, default=DATA, help=f"data folder (default {DATA})")
    parser.add_argument("--bootstrap", type=int, default=BOOTSTRAP, help="bootstrap resamples")
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    args = parser.parse_args(argv)
    if args.list:
        print(CHECKS.listing())
        return 0
    chosen = CHECKS.matching(args.names)
    if not chosen:
        parser.error(f"no check matches {args.names}; try --list")
    ctx = Context(data=args.data, reps=args.bootstrap)
    rows: list[Row] = []
    for func in chosen:
        print(f"running {check_name(func)} ...", file=sys.stderr)
        found = func(ctx)
        print(format_table(found) + "\n", flush=True)
        rows.extend(found)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
