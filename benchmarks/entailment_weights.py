"""Candidate entailment weights against the shipped ones, paired, before a release: AUROC of
`faithfulness` with the model alone (``support_estimator = "entailment"``) and with the
default (``graded+entailment``) on BEGIN dev and QAGS CNN/DM, and of P(entailment) on
FeverSymmetric v0.2 dev and test (`fever_symmetric.py`), each with the change and its
paired bootstrap 95 % interval (2,000 draws of the same items for both weights).

    python benchmarks/entailment_weights.py FEVER_SYMMETRIC_GIT_DIR NEW.safetensors [...] \\
        [--old OLD.safetensors]

``--old`` defaults to the shipped weights. Each weights file replaces the shipped one in
turn (float32 or bfloat16, as ``precision="auto"`` picks), with a fresh model cache, so
no score of other weights is read back. This is a quick screen: a release still needs
``benchmarks/validity.py support_estimators_left_out support_long_documents`` (the other
metrics, QAGS within each article, 10,000-word documents) and the cards.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

import assay.models.entailment as entailment
from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from fever_symmetric import FILES, rows
from validity_checks import DATA, metric_scores
from validity_data import begin_rows, qags_cnndm_sentences

#: the support estimator of each reading: the model alone, and the default
SETTINGS = {"alone": "entailment", "default": "graded+entailment"}
DRAWS = 2000


def scores_of(weights: Path, samples: dict, fever: dict) -> dict[str, np.ndarray]:
    """The scores each reading gives with ``weights``, by "<data set> <reading>"."""
    entailment.DEFAULT_WEIGHTS = weights
    out: dict[str, np.ndarray] = {}
    for reading, setting in SETTINGS.items():
        for name, items in samples.items():
            with tempfile.TemporaryDirectory() as cache:
                config = AssayConfig(judge_model=None, support_estimator=setting, cache_dir=cache)
                scored = metric_scores("faithfulness", items, Resources(config))
            out[f"{name} {reading}"] = np.asarray(scored[0])
    model = entailment.EntailmentModel()
    for split, items in fever.items():
        pairs = [(r["evidence"], r["claim"]) for r in items]
        out[f"FeverSymmetric {split}"] = model.probabilities(pairs)[:, 0]
    return out


def paired_change(
    labels: np.ndarray, old: np.ndarray, new: np.ndarray, rng: np.random.Generator
) -> tuple[float, float]:
    """The 2.5 and 97.5 percentiles of AUROC(new) - AUROC(old) over `DRAWS` resamples of
    the items (a draw with one class only is skipped)."""
    changes = []
    for _ in range(DRAWS):
        idx = rng.integers(0, len(labels), len(labels))
        if labels[idx].min() == labels[idx].max():
            continue
        changes.append(roc_auc_score(labels[idx], new[idx]) - roc_auc_score(labels[idx], old[idx]))
    low, high = np.percentile(changes, [2.5, 97.5])
    return float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fever_git_dir", help="a clone of TalSchuster/FeverSymmetric")
    parser.add_argument("new", type=Path, nargs="+", help="candidate weights")
    parser.add_argument("--old", type=Path, default=entailment.DEFAULT_WEIGHTS)
    args = parser.parse_args()
    begin, begin_labels = begin_rows(DATA)
    qags, qags_labels, _ = qags_cnndm_sentences(DATA)
    samples = {"BEGIN": begin, "QAGS": qags}
    fever = {split: rows(args.fever_git_dir, path) for split, path in FILES.items()}
    labels = {f"{name} {reading}": np.asarray(y) for reading in SETTINGS
              for name, y in (("BEGIN", begin_labels), ("QAGS", qags_labels))}  # fmt: skip
    for split, items in fever.items():
        labels[f"FeverSymmetric {split}"] = np.array([r["gold_label"] == "SUPPORTS" for r in items])
    old = scores_of(args.old, samples, fever)
    for weights in args.new:
        new = scores_of(weights, samples, fever)
        rng = np.random.default_rng(0)
        print(f"{weights.name} against {args.old.name}")
        print("| data set, reading | old | new | change | 95 % interval |")
        print("| --- | --- | --- | --- | --- |")
        for key, y in labels.items():
            before, after = roc_auc_score(y, old[key]), roc_auc_score(y, new[key])
            low, high = paired_change(y, old[key], new[key], rng)
            print(f"| {key} | {before:.4f} | {after:.4f} | {after - before:+.4f} "
                  f"| {low:+.4f} .. {high:+.4f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
