"""Train the toxicity head shipped in ``src/assay/models/data/toxicity_head.npz``.

Data: the Davidson et al. (2017) tweets, ``/work/shared/data/davidson-tweets.csv`` (24,783
tweets; from t-davidson/hate-speech-and-offensive-language, MIT licence; see
``../shared/data/README.md``). Columns: count (annotators), hate_speech,
offensive_language, neither (votes), class (majority: 0 hate speech, 1 offensive,
2 neither), tweet. The text contains slurs. Nothing else is used: no evaluation
benchmark is read or tuned on.

Steps (deterministic: fixed fold seeds, lbfgs, the same result on every CPU run):

1. Text: every tweet goes through `assay.models.toxicity_head.normalise_for_toxicity`
   (HTML entities decoded, emoji dropped, "RT", @mentions and URLs removed, "#" taken
   off hashtags), the same function the metric applies at run time, so the head cannot
   learn tweet artefacts.
2. Embeddings: the base install's USE multilingual v3 (`USEMultilingualEmbedder`), through
   the embedding cache at ``--cache`` (a re-run costs seconds; the first run about 15
   minutes on 2 cores).
3. Groups: tweets whose normalised text is the same after lower-casing and keeping only
   letters and digits, or whose embeddings have cosine >= ``NEAR_DUPLICATE_COSINE`` (0.95),
   are one group (union-find); folds are ``StratifiedGroupKFold(5, shuffle, random_state=0)``
   so a retweet and its source never sit on both sides.
4. Targets (both are reported; ``--target`` picks the shipped one):
   ``hateful_or_offensive`` = class 0 or 1 against class 2; ``hate`` = class 0 against
   the rest.
5. Per outer fold: the L2 penalty ``C`` is chosen from ``C_GRID`` by inner grouped 3-fold CV
   AUROC on the training folds only (nested CV); the logistic head (class_weight balanced)
   is fitted on the training folds; an isotonic map from logit to probability is fitted on
   the training folds' inner out-of-fold logits, weighted so both classes count equally
   (the probability is for an even prior, not Davidson's 83 % offensive share), and applied
   to the test fold. Reported: AUROC of the test folds (mean, 95 % t-interval over the 5
   folds), Brier score, AUROC on the comment-like tweets (no @mention, RT, URL or hashtag
   in the raw text) and, per head, AUROC on the other label definitions.
6. Old model: ``alt-profanity-check`` on the same test folds (raw and normalised text). It
   was trained partly on these very tweets, so its numbers are in-sample (optimistic).
7. Shipped head: ``C`` by grouped 5-fold CV on all tweets, fitted on all; the isotonic map
   on the 5-fold out-of-fold logits; the default threshold is the one that maximises
   balanced accuracy on those out-of-fold probabilities.

Run: ``python scripts/train_toxicity_head.py [--target hateful_or_offensive] [--out PATH]``
(needs scikit-learn and alt-profanity-check, i.e. the ``models`` extra; inference needs
neither).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import time
from pathlib import Path

import numpy as np
from head_training import (
    balanced_weights,
    best_threshold,
    choose_c,
    fit_calibration,
    fit_head,
    folds,
    interval,
)
from sklearn.metrics import brier_score_loss, roc_auc_score

from assay.models.cache import EmbeddingCache
from assay.models.embedders import USEMultilingualEmbedder
from assay.models.toxicity_head import normalise_for_toxicity

DATA = Path("/work/shared/data/davidson-tweets.csv")
OUT = Path(__file__).resolve().parent.parent / "src/assay/models/data/toxicity_head.npz"
C_GRID = (0.25, 1.0, 4.0)
NEAR_DUPLICATE_COSINE = 0.95
FOLDS = 5
INNER_FOLDS = 3
FOLD_SEED = 0
TWEET_ARTEFACT = re.compile(r"(?<!\w)(?:RT|@\w+|#\w+)|https?://|www\.", re.IGNORECASE)
TARGETS = ("hateful_or_offensive", "hate")


def load_tweets(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [r["tweet"] for r in rows], np.array([int(r["class"]) for r in rows])


def labels(classes: np.ndarray, target: str) -> np.ndarray:
    if target == "hateful_or_offensive":
        return (classes <= 1).astype(int)
    if target == "hate":
        return (classes == 0).astype(int)
    raise ValueError(target)


def duplicate_groups(texts: list[str], vectors: np.ndarray) -> np.ndarray:
    """Group id per text: same letters-and-digits key, or embedding cosine >= threshold."""
    parent = list(range(len(texts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)

    first: dict[str, int] = {}
    for i, text in enumerate(texts):
        key = re.sub(r"[^0-9a-z]", "", text.lower())
        union(i, first.setdefault(key, i))
    for start in range(0, len(texts), 2000):
        block = vectors[start : start + 2000] @ vectors.T
        rows, cols = np.nonzero(block >= NEAR_DUPLICATE_COSINE)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            if start + r < c:
                union(start + r, c)
    return np.array([find(i) for i in range(len(texts))])


def cross_validate(
    x: np.ndarray,
    classes: np.ndarray,
    groups: np.ndarray,
    comment_like: np.ndarray,
    old: dict[str, np.ndarray],
    target: str,
) -> dict:
    """Nested CV of one target; returns the per-fold numbers."""
    y = labels(classes, target)
    report: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        report.setdefault(key, []).append(float(value))

    for fold, (train, test) in enumerate(folds(y, groups, FOLDS, FOLD_SEED)):
        c, inner = choose_c(x[train], y[train], groups[train], INNER_FOLDS, C_GRID, FOLD_SEED)
        head = fit_head(x[train], y[train], c)
        iso = fit_calibration(inner["oof_logits"], y[train])
        logits = head.decision_function(x[test])
        probs = iso.predict(logits)
        yt = y[test]
        add("C", c)
        add("auroc_logit", roc_auc_score(yt, logits))
        add("auroc_calibrated", roc_auc_score(yt, probs))
        add("brier_balanced", brier_score_loss(yt, probs, sample_weight=balanced_weights(yt)))
        mask = comment_like[test]
        add("auroc_comment_like", roc_auc_score(yt[mask], logits[mask]))
        for other in ("hate_vs_neither", "hate_vs_rest", "hateful_or_offensive_vs_neither"):
            cls = classes[test]
            if other == "hate_vs_neither":
                keep, pos = cls != 1, cls == 0
            elif other == "hate_vs_rest":
                keep, pos = np.ones(len(cls), bool), cls == 0
            else:
                keep, pos = np.ones(len(cls), bool), cls <= 1
            add(f"auroc_on_{other}", roc_auc_score(pos[keep], logits[keep]))
            for name, scores in old.items():
                add(f"old_{name}_on_{other}", roc_auc_score(pos[keep], scores[test][keep]))
        for name, scores in old.items():
            add(f"old_{name}_auroc", roc_auc_score(yt, scores[test]))
            add(f"old_{name}_auroc_comment_like", roc_auc_score(yt[mask], scores[test][mask]))
        print(f"  fold {fold}: C={c:g} AUROC {report['auroc_logit'][-1]:.3f}", flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--target", choices=TARGETS, default="hateful_or_offensive")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/assay/train.sqlite")
    parser.add_argument("--skip-cv", action="store_true", help="fit the shipped head only")
    args = parser.parse_args()

    raw, classes = load_tweets(args.data)
    texts = [normalise_for_toxicity(t) for t in raw]
    comment_like = np.array([not TWEET_ARTEFACT.search(t) for t in raw])
    embedder = USEMultilingualEmbedder(EmbeddingCache(args.cache))
    started = time.perf_counter()
    x = embedder.embed(texts).astype(np.float64)
    print(f"{len(texts)} tweets embedded in {time.perf_counter() - started:.0f} s", flush=True)
    groups = duplicate_groups(texts, x.astype(np.float32))
    print(f"{len(np.unique(groups))} duplicate groups; {comment_like.sum()} comment-like tweets")

    if not args.skip_cv:
        from profanity_check import predict_prob

        old = {"raw": predict_prob(raw), "normalised": predict_prob(texts)}
        for target in TARGETS:
            print(f"\ntarget {target}: nested {FOLDS}-fold grouped CV", flush=True)
            report = cross_validate(x, classes, groups, comment_like, old, target)
            for key, values in report.items():
                print(f"  {key}: {interval(values)}")

    y = labels(classes, args.target)
    c, search = choose_c(x, y, groups, FOLDS, C_GRID, FOLD_SEED)
    head = fit_head(x, y, c)
    iso = fit_calibration(search["oof_logits"], y)
    oof_probs = iso.predict(search["oof_logits"])
    threshold = best_threshold(oof_probs, y)
    metadata = {
        "embedder": embedder.name,
        "target": args.target,
        "data": "Davidson tweets",
        "data_source": "t-davidson/hate-speech-and-offensive-language (Davidson et al. 2017)",
        "data_licence": "MIT",
        "n_train": len(y),
        "n_positive": int(y.sum()),
        "C": c,
        "cv_auroc_by_C": {str(k): round(v, 4) for k, v in search["auroc_by_C"].items()},
        "threshold": threshold,
        "threshold_rule": "max balanced accuracy on 5-fold out-of-fold probabilities",
        "calibration": "isotonic on 5-fold out-of-fold logits, classes weighted equally",
        "normalisation": "assay.models.toxicity_head.normalise_for_toxicity",
        "script": "scripts/train_toxicity_head.py",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        weights=head.coef_[0].astype(np.float32),
        bias=np.float64(head.intercept_[0]),
        calibration_x=iso.X_thresholds_.astype(np.float64),
        calibration_y=iso.y_thresholds_.astype(np.float64),
        metadata=np.array(json.dumps(metadata, sort_keys=True)),
    )
    print(f"\nshipped head: target {args.target}, C={c:g}, threshold {threshold:.3f}")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
