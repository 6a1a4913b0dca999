"""Train the support head shipped in ``src/assay/models/data/support_head.npz``.

The head answers "is this text supported by its evidence?" for every faithfulness-type
metric's offline path (`assay.models.support_head`).

Data: the two human-labelled development sets on that question, from ``--data``
(``../shared/data``; described with their licences in its README). Nothing else is read:
no evaluation benchmark is trained or tuned on.

- BEGIN, Wizard-of-Wikipedia dev (Dziri et al. 2022; CC BY 4.0): 430 dialogue responses,
  label 1 for "Fully attributable" to the knowledge snippet. Groups: the snippet.
- QAGS CNN/DailyMail (Wang et al. 2020; research use, cite the paper): 714 summary
  sentences, label 1 when most of 3 crowd workers say the article supports it. Groups:
  the article (sentences of one summary share it).

Steps (deterministic):

1. Features: `assay.models.support_head.support_features`, the function the metrics run,
   on `sentence_support`'s rows with the base install's USE multilingual v3 embedder
   (embeddings cached in ``--cache-dir``; the first run takes about a minute on 2 cores).
2. Nested CV over the pooled 1,144 items: 5 outer folds, stratified and grouped
   (`head_training.folds`), C chosen on the training folds by inner grouped 3-fold CV
   AUROC, a class-balanced logistic head on standardised features, a sigmoid (Platt) map
   fitted on the inner out-of-fold logits at an even class prior (strictly monotone, so
   the probabilities keep the logits' ranking; an isotonic map's flat steps cost about
   0.01 AUROC here). Reported per data set: AUROC
   of the out-of-fold probabilities with a 95 % bootstrap interval (1,000 resamples of
   groups), against the graded sentence-support score on the same items.
3. Transfer: fitted on one data set, scored on the other (the nearest thing here to data
   of another source).
4. The shipped head: C by grouped 5-fold CV on all items, fitted on all; the sigmoid map
   on the 5-fold out-of-fold logits; the default threshold maximises balanced accuracy on
   those out-of-fold probabilities.

Run: ``python scripts/train_support_head.py [--out PATH]``. ``benchmarks/validity.py``
runs step 2 (`head_training.nested_cv_probabilities` on these features) for the
validity cards.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from head_training import (
    C_GRID,
    FOLD_SEED,
    FOLDS,
    choose_c,
    cv_entry,
    embedded,
    fit_and_save_head,
    fit_head,
    nested_cv_probabilities,
    training_setup,
)
from sklearn.metrics import roc_auc_score

from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.estimators.offline import sentence_support, sentence_support_texts
from assay.models.support_head import FEATURES, support_features
from assay.text.anchors import anchor_texts, parse_texts

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from validity_data import begin_rows, qags_cnndm_sentences  # noqa: E402

OUT = ROOT / "src/assay/models/data/support_head.npz"


def labelled_items(data: Path) -> dict[str, tuple[list[Sample], np.ndarray, np.ndarray]]:
    """Per data set: samples (answer = the judged text, contexts = its evidence), labels
    (1 = supported) and group ids (items sharing evidence share a group)."""
    begin, begin_labels = begin_rows(data)
    knowledge: dict[str, int] = {}
    begin_groups = np.array([knowledge.setdefault(s.contexts[0], len(knowledge)) for s in begin])
    qags, qags_labels, qags_groups = qags_cnndm_sentences(data)
    return {
        "begin-wow-dev": (list(begin), begin_labels, begin_groups),
        "qags-cnndm-dev": (list(qags), qags_labels, qags_groups),
    }


def features_and_baseline(
    samples: Sequence[Sample], res: Resources
) -> tuple[np.ndarray, np.ndarray]:
    """The head's features of each sample and the graded sentence-support score."""
    texts = [s.response or "" for s in samples]
    evidence = [s.contexts or [] for s in samples]
    vectors = embedded(res, sentence_support_texts(texts, evidence))
    docs = parse_texts(res.nlp, anchor_texts(texts, evidence))
    supports = sentence_support(res, vectors, texts, evidence, docs=docs, use_head=False)
    x = np.stack(
        [
            support_features(t, e, s.sentences)
            for t, e, s in zip(texts, evidence, supports, strict=True)
        ]
    )
    return x, np.array([s.score for s in supports])


def pooled_items(
    data: Path, res: Resources
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The two data sets pooled (step 2): features, labels, groups (kept apart across the
    sets), each item's data set name and the graded sentence-support score."""
    xs, ys, gs, names, baselines = [], [], [], [], []
    for offset, (name, (samples, y, groups)) in enumerate(labelled_items(data).items()):
        x, baseline = features_and_baseline(samples, res)
        xs.append(x)
        ys.append(y)
        gs.append(groups + offset * 1_000_000)
        names += [name] * len(y)
        baselines.append(baseline)
    return (
        np.vstack(xs),
        np.concatenate(ys),
        np.concatenate(gs),
        np.array(names),
        np.concatenate(baselines),
    )


def main() -> None:
    args, res = training_setup(__doc__ or "", OUT)
    x, y, groups, names_arr, baseline = pooled_items(args.data, res)
    sets = list(dict.fromkeys(names_arr.tolist()))
    probs, chosen = nested_cv_probabilities(x, y, groups)
    print(f"nested {FOLDS}-fold grouped CV over {len(y)} items (C per fold: {chosen})")
    cv = {}
    for name in sets:
        m = names_arr == name
        cv[name] = cv_entry(name, y[m], probs[m], groups[m], baseline[m], "graded sentence support")
    transfer = {}
    for train_name in sets:
        for test_name in sets:
            if train_name == test_name:
                continue
            tr, te = names_arr == train_name, names_arr == test_name
            c, _ = choose_c(x[tr], y[tr], groups[tr], FOLDS, C_GRID, FOLD_SEED, standardise=True)
            logits = fit_head(x[tr], y[tr], c, standardise=True).decision_function(x[te])
            auroc = roc_auc_score(y[te], logits)
            transfer[f"{train_name} -> {test_name}"] = round(auroc, 4)
            print(f"  trained on {train_name} only, scored on {test_name}: AUROC {auroc:.3f}")

    metadata = {
        "features": list(FEATURES),
        "embedder": res.embedder.name,
        "data": "BEGIN WoW dev + QAGS CNN/DM",
        "data_source": (
            "BEGIN (Dziri et al. 2022, CC BY 4.0); QAGS (Wang et al. 2020, research use)"
        ),
        "nested_cv": cv,
        "transfer_auroc": transfer,
        "script": "scripts/train_support_head.py",
    }
    fit_and_save_head(args.out, x, y, groups, metadata)


if __name__ == "__main__":
    main()
