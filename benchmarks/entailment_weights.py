"""Candidate entailment weights against the shipped ones, paired, before a release: AUROC of
`faithfulness` with the model alone (``support_estimator = "entailment"``) and with the
default (``graded+entailment``) on BEGIN dev and QAGS CNN/DM, and of P(entailment) on
FeverSymmetric v0.2 dev and test (`fever_symmetric.py`), each with the change and its
paired bootstrap 95 % interval (`assay.core.agreement_stats.bootstrap_interval`: 2,000
draws of the same items for both weights).

    python benchmarks/entailment_weights.py FEVER_SYMMETRIC_GIT_DIR NEW.safetensors [...] \\
        [--old OLD.safetensors]

Two screens for supported answers that give a cause, a purpose or a detail, which the
dev sets hold few of (weights trained on LLM-style pairs once gained on every dev set
and cut "Mars is called the Red Planet because ..." from 0.89 to 0.61:
`scripts/llm_error_pairs.py`): both readings on the 90 hand-written answers of
``benchmarks/data/explaining_answers`` ("Explaining"; AUROC, and the mean of the
supported ones, which should not fall, and the AUROC within each kind of answer), and
`faithfulness` (the default reading) of each answer of ``examples/rag.jsonl`` with both
weights. A third screen is for the error the model once let pass most: an answer that
merges two facts of its passage, right names and numbers on the wrong thing ("Tom led
the meeting" where Priya led it and Tom took notes): both readings on the 80
hand-written answers of ``benchmarks/data/merged_answers`` ("Merged"), the same way.

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
from assay.core.agreement_stats import bootstrap_interval
from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.inputs.read import read_samples
from fever_symmetric import claims
from validity_checks import DATA, metric_scores
from validity_data import (
    EXPLAINING_ANSWERS,
    MERGED_ANSWERS,
    begin_rows,
    hand_written_answers,
    qags_cnndm_sentences,
)

#: the shipped RAG example, whose answers are read with each weights file
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "rag.jsonl"
#: the support estimator of each reading: the model alone, and the default
SETTINGS = {"alone": "entailment", "default": "graded+entailment"}
DRAWS = 2000


def faithfulness_scores(samples: list, setting: str) -> np.ndarray:
    """`faithfulness` of each sample with the support estimator ``setting``, read with
    the weights `entailment.DEFAULT_WEIGHTS` names, in a fresh model cache."""
    with tempfile.TemporaryDirectory() as cache:
        config = AssayConfig(judge_model=None, support_estimator=setting, cache_dir=cache)
        return np.asarray(metric_scores("faithfulness", samples, Resources(config))[0])


def scores_of(weights: Path, samples: dict, fever: dict, answers: list) -> dict[str, np.ndarray]:
    """The scores each reading gives with ``weights``, by "<data set> <reading>", and
    ``answers``' default reading (by "example")."""
    entailment.DEFAULT_WEIGHTS = weights
    out: dict[str, np.ndarray] = {}
    for reading, setting in SETTINGS.items():
        for name, items in samples.items():
            out[f"{name} {reading}"] = faithfulness_scores(items, setting)
    model = entailment.EntailmentModel()
    for split, (pairs, _) in fever.items():
        out[f"FeverSymmetric {split}"] = model.probabilities(pairs)[:, 0]
    out["example"] = faithfulness_scores(answers, SETTINGS["default"])
    return out


def auroc_change(labels: np.ndarray, old: np.ndarray, new: np.ndarray) -> float | None:
    """AUROC of the new scores minus that of the old; None for labels of one class (the
    resample is dropped)."""
    if labels.min() == labels.max():
        return None
    return float(roc_auc_score(labels, new) - roc_auc_score(labels, old))


def kind_aurocs(labels: np.ndarray, kinds: list[str], old: np.ndarray, new: np.ndarray) -> str:
    """AUROC of the old and the new scores within each kind of answer ("cause 0.44 ->
    0.45; ..."), in the order the kinds first occur. Each kind has only 14 to 28 answers,
    so these are for finding where a candidate moves, not for deciding."""
    column = np.asarray(kinds)
    parts = []
    for kind in dict.fromkeys(kinds):
        inside = column == kind
        before = roc_auc_score(labels[inside], old[inside])
        after = roc_auc_score(labels[inside], new[inside])
        parts.append(f"{kind} {before:.2f} -> {after:.2f}")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fever_git_dir", help="a clone of TalSchuster/FeverSymmetric")
    parser.add_argument("new", type=Path, nargs="+", help="candidate weights")
    parser.add_argument("--old", type=Path, default=entailment.DEFAULT_WEIGHTS)
    args = parser.parse_args()
    begin, begin_labels = begin_rows(DATA)
    qags, qags_labels, _ = qags_cnndm_sentences(DATA)
    screens = {"Explaining": EXPLAINING_ANSWERS, "Merged": MERGED_ANSWERS}
    written = {name: hand_written_answers(folder) for name, folder in screens.items()}
    samples = {"BEGIN": begin, "QAGS": qags, **{n: rows[0] for n, rows in written.items()}}
    fever = claims(args.fever_git_dir)
    named = [("BEGIN", begin_labels), ("QAGS", qags_labels)]
    named += [(name, rows[1]) for name, rows in written.items()]
    labels = {f"{name} {reading}": np.asarray(y) for reading in SETTINGS for name, y in named}
    for split, (_, supports) in fever.items():
        labels[f"FeverSymmetric {split}"] = supports
    answers, _ = read_samples(EXAMPLE)
    old = scores_of(args.old, samples, fever, answers)
    for weights in args.new:
        new = scores_of(weights, samples, fever, answers)
        print(f"{weights.name} against {args.old.name}")
        print("| data set, reading | old | new | change | 95 % interval |")
        print("| --- | --- | --- | --- | --- |")
        for key, y in labels.items():
            before, after = roc_auc_score(y, old[key]), roc_auc_score(y, new[key])
            labelled = y.astype(float)  # bootstrap_interval's columns are floats or objects
            interval = bootstrap_interval(
                auroc_change, labelled, old[key], new[key], resamples=DRAWS
            )
            assert interval is not None  # both classes in every data set
            low, high = interval
            print(f"| {key} | {before:.4f} | {after:.4f} | {after - before:+.4f} "
                  f"| {low:+.4f} .. {high:+.4f} |", flush=True)  # fmt: skip
        for name, (_, screen_labels, kinds) in written.items():
            supported = screen_labels == 1
            for reading in SETTINGS:
                key = f"{name} {reading}"
                print(f"{key}, mean of the supported answers: {old[key][supported].mean():.3f} "
                      f"-> {new[key][supported].mean():.3f}")  # fmt: skip
                print(f"{key}, AUROC by kind, old -> new: "
                      + kind_aurocs(screen_labels, kinds, old[key], new[key]))  # fmt: skip
        print(f"\nfaithfulness of {EXAMPLE.name}'s answers, old -> new")
        for sample, before, after in zip(answers, old["example"], new["example"], strict=True):
            print(f"{sample.id}: {before:.2f} -> {after:.2f}  {sample.response[:70]}")


if __name__ == "__main__":
    main()
