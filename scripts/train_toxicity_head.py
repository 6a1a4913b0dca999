"""Train the toxicity head shipped in ``src/assay/models/data/toxicity_head.npz``.

Data: three sources of different kinds, each labelled by people (no evaluation benchmark
is read or tuned on; the texts contain slurs and hateful statements):

- ``davidson``: Davidson et al. (2017) tweets, ``../shared/data/davidson-tweets.csv``
  (24,783; t-davidson/hate-speech-and-offensive-language, MIT). Positive: hate speech or
  offensive language (class 0 or 1), against neither.
- ``stormfront``: de Gibert et al. (2018) white-supremacist forum sentences,
  ``benchmarks/data/stormfront/sentences.jsonl`` (10,225: all but the dataset's
  ``sampled_test``; CC BY-SA 3.0 ES). Positive: hate.
- ``toxigen``: the human-written statements of ToxiGen (Hartvigsen et al. 2022),
  ``scripts/data/toxigen/statements.jsonl`` (946 about 13 groups; MIT / CDLA-Permissive-2.0).
  Positive: hate (mostly implicit, in polite words), against neutral statements about
  the same groups.

Steps (deterministic: fixed fold seeds, lbfgs, the same result on every CPU run):

1. Text: every text goes through `assay.models.toxicity_head.normalise_for_toxicity`
   (HTML entities decoded, emoji dropped, "RT", @mentions and URLs removed, "#" taken off
   hashtags), the function the metric applies at run time.
2. Embeddings: the base install's USE multilingual v3 (`USEMultilingualEmbedder`),
   through the embedding cache at ``--cache`` (the first run about 5 minutes on 2 cores).
3. Weights: each source weighs the same in total, and inside a source both classes weigh
   the same, so the 946 statements count as much as the 24,783 tweets.
4. Groups: texts of a source whose lower-cased letters and digits are the same, or whose
   embeddings have cosine >= ``NEAR_DUPLICATE_COSINE`` (0.95), are one group
   (union-find); folds never split a group.
5. Leave one source out, for each ``C`` of ``C_GRID``: the head fitted on the other two
   sources scores the one left out (AUROC), beside alt-profanity-check on the same texts,
   the mean of the two probabilities (the ``auto`` default where alt-profanity-check is
   installed) and the mean of the head's probability and the keyword score (the ``auto``
   default of the base install). ``C`` is the one whose worst left-out head AUROC is
   best.
6. Cross-validated: grouped 5-fold CV over the pooled sources at that ``C``; AUROC of the
   out-of-fold logits per source.
7. Shipped head: fitted on all three; the isotonic map from logit to probability on the
   5-fold out-of-fold logits (weighted as in 3, so the probability is for an even prior
   in every source); the decision thresholds (the head alone, its mean with
   alt-profanity-check, its mean with the keyword score) maximise weighted balanced
   accuracy on the out-of-fold probabilities. alt-profanity-check was trained on
   Davidson's tweets, so its numbers there are in-sample.

Run: ``python scripts/train_toxicity_head.py [--out PATH]`` (needs scikit-learn and
alt-profanity-check, i.e. the ``models`` extra; inference needs neither).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import time
from pathlib import Path

import numpy as np
from head_training import DATA, best_threshold
from profanity_check import predict_prob
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedGroupKFold

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.metrics.safety import safety_patterns
from assay.metrics.toxicity_plan import keyword_toxicity
from assay.models.cache import EmbeddingCache
from assay.models.embedders import USEMultilingualEmbedder
from assay.models.toxicity_head import normalise_for_toxicity

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src/assay/models/data/toxicity_head.npz"
SOURCES = ("davidson", "stormfront", "toxigen")
C_GRID = (0.25, 0.5, 1.0, 2.0, 4.0)
NEAR_DUPLICATE_COSINE = 0.95
FOLDS = 5
FOLD_SEED = 0


def load_source(name: str) -> tuple[list[str], np.ndarray]:
    """Raw texts and 0/1 labels (1 = toxic) of one source."""
    if name == "davidson":
        with (DATA / "davidson-tweets.csv").open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        return [r["tweet"] for r in rows], np.array([int(r["class"]) <= 1 for r in rows], int)
    path = {
        "stormfront": ROOT / "benchmarks/data/stormfront/sentences.jsonl",
        "toxigen": ROOT / "scripts/data/toxigen/statements.jsonl",
    }[name]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r.get("split") != "test"]  # Stormfront's own test sample
    return [r["text"] for r in rows], np.array([r["label"] == "hate" for r in rows], int)


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


def source_weights(y: np.ndarray, source: np.ndarray) -> np.ndarray:
    """Each source the same total weight, both classes the same inside each (mean 1)."""
    w = np.zeros(len(y))
    for s in np.unique(source):
        part = source == s
        share = y[part].mean()
        w[part] = np.where(y[part] == 1, 0.5 / share, 0.5 / (1 - share)) / part.sum()
    return w / w.mean()


def fit(x: np.ndarray, y: np.ndarray, source: np.ndarray, c: float) -> LogisticRegression:
    head = LogisticRegression(C=c, max_iter=5000)
    return head.fit(x, y, sample_weight=source_weights(y, source))


def load_parts(cache: Path) -> dict[str, dict[str, np.ndarray]]:
    """Per source: embeddings ``x`` of the normalised texts, labels ``y``, duplicate
    ``groups``, the texts as read (``raw``), alt-profanity-check's probability of each
    (``profanity``) and its keyword toxicity (``keywords``, `keyword_toxicity`)."""
    keyword_lists = safety_patterns(Resources(AssayConfig(judge_model=None)))
    embedder = USEMultilingualEmbedder(EmbeddingCache(cache))
    parts = {}
    for name in SOURCES:
        raw, y = load_source(name)
        texts = [normalise_for_toxicity(t) for t in raw]
        started = time.perf_counter()
        x = embedder.embed(texts).astype(np.float64)
        groups = duplicate_groups(texts, x.astype(np.float32))
        parts[name] = {
            "x": x,
            "y": y,
            "groups": groups,
            "raw": raw,
            "profanity": predict_prob(raw),
            "keywords": np.array([keyword_toxicity(t, keyword_lists)[0] for t in raw]),
        }
        print(
            f"{name}: {len(y)} texts ({y.sum()} toxic), {len(np.unique(groups))} groups, "
            f"embedded in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return parts


def pooled(parts: dict, sources: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """``x``, ``y``, source name, duplicate group (unique across sources) and
    alt-profanity-check probability and keyword score of the given sources, concatenated."""
    offsets = np.cumsum([0] + [len(parts[s]["y"]) for s in sources])
    return (
        np.concatenate([parts[s]["x"] for s in sources]),
        np.concatenate([parts[s]["y"] for s in sources]),
        np.concatenate([[s] * len(parts[s]["y"]) for s in sources]),
        np.concatenate([parts[s]["groups"] + o for s, o in zip(sources, offsets, strict=False)]),
        np.concatenate([parts[s]["profanity"] for s in sources]),
        np.concatenate([parts[s]["keywords"] for s in sources]),
    )


def out_of_fold_logits(
    x: np.ndarray, y: np.ndarray, source: np.ndarray, groups: np.ndarray, c: float
) -> np.ndarray:
    """Each text's logit from the head fitted on the other folds (grouped, stratified by
    source and label)."""
    strata = np.char.add(source.astype(str), y.astype(str))
    splitter = StratifiedGroupKFold(n_splits=FOLDS, shuffle=True, random_state=FOLD_SEED)
    oof = np.zeros(len(y))
    for train, test in splitter.split(x, strata, groups):
        oof[test] = fit(x[train], y[train], source[train], c).decision_function(x[test])
    return oof


def calibrated_head(
    parts: dict, sources: tuple[str, ...], c: float
) -> tuple[LogisticRegression, IsotonicRegression, np.ndarray]:
    """The head fitted on ``sources``, its isotonic map fitted on their out-of-fold
    logits (weighted as the training), and those logits."""
    x, y, source, groups, _, _ = pooled(parts, sources)
    oof = out_of_fold_logits(x, y, source, groups, c)
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(oof, y, sample_weight=source_weights(y, source))
    return fit(x, y, source, c), iso, oof


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/assay/train.sqlite")
    args = parser.parse_args()
    parts = load_parts(args.cache)

    print("\nleave one source out: AUROC on the source left out")
    left_out: dict[float, dict[str, dict[str, float]]] = {}
    for c in C_GRID:
        left_out[c] = {}
        for name in SOURCES:
            head, iso, _ = calibrated_head(parts, tuple(s for s in SOURCES if s != name), c)
            part = parts[name]
            probs = iso.predict(head.decision_function(part["x"]))
            left_out[c][name] = {
                "head": roc_auc_score(part["y"], head.decision_function(part["x"])),
                "profanity": roc_auc_score(part["y"], part["profanity"]),
                "mean": roc_auc_score(part["y"], (probs + part["profanity"]) / 2),
                "keywords": roc_auc_score(part["y"], part["keywords"]),
                "head+keywords": roc_auc_score(part["y"], (probs + part["keywords"]) / 2),
            }
        row = " | ".join(
            f"{n} head {v['head']:.3f} profanity {v['profanity']:.3f} mean {v['mean']:.3f} "
            f"keywords {v['keywords']:.3f} head+keywords {v['head+keywords']:.3f}"
            for n, v in left_out[c].items()
        )
        print(f"  C={c:g}: {row}", flush=True)
    c = max(C_GRID, key=lambda k: (round(min(v["head"] for v in left_out[k].values()), 4), -k))
    print(f"C = {c:g}: the best worst left-out head AUROC")

    head, iso, oof = calibrated_head(parts, SOURCES, c)
    _, y, source, _, profanity, keywords = pooled(parts, SOURCES)
    print(f"\ngrouped {FOLDS}-fold CV over the pooled sources, AUROC per source:")
    cross_validated = {}
    for s in SOURCES:
        part = source == s
        cross_validated[s] = roc_auc_score(y[part], oof[part])
        print(f"  {s}: head {cross_validated[s]:.3f}")
    weights = source_weights(y, source)
    oof_probs = iso.predict(oof)
    threshold = best_threshold(oof_probs, y, weights)
    mean_threshold = best_threshold((oof_probs + profanity) / 2, y, weights)
    keywords_threshold = best_threshold((oof_probs + keywords) / 2, y, weights)
    metadata = {
        "embedder": USEMultilingualEmbedder.name,
        "target": "toxic: hate, or offensive language",
        "data": "Davidson tweets, Stormfront sentences, ToxiGen statements",
        "sources": {
            s: {"n": int((source == s).sum()), "n_positive": int(y[source == s].sum())}
            for s in SOURCES
        },
        "data_licences": {
            "davidson": "MIT (t-davidson/hate-speech-and-offensive-language)",
            "stormfront": "CC BY-SA 3.0 ES (Vicomtech/hate-speech-dataset)",
            "toxigen": "MIT / CDLA-Permissive-2.0 (microsoft/TOXIGEN)",
        },
        "weighting": "each source the same total weight; both classes the same inside each",
        "C": c,
        "C_rule": "best worst AUROC on a source left out of training",
        "left_out_auroc": {str(k): v for k, v in left_out.items()},
        "cv_auroc": cross_validated,
        "threshold": threshold,
        "threshold_with_profanity_check": mean_threshold,
        "threshold_with_keywords": keywords_threshold,
        "threshold_rule": "max weighted balanced accuracy on 5-fold out-of-fold probabilities",
        "calibration": "isotonic on 5-fold out-of-fold logits, weighted as the training",
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
    print(
        f"\nshipped head: C={c:g}, threshold {threshold:.3f}, "
        f"with alt-profanity-check {mean_threshold:.3f}, with the keywords {keywords_threshold:.3f}"
    )
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
