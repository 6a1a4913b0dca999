"""Train the agreement head shipped in ``src/assay/models/data/agreement_head.npz``.

The head answers "does this answer say what the reference answer says?" for the offline
path of ``factual_accuracy`` (its correctness part) and ``answer_classification``
(`assay.models.agreement_head`).

Data: TruthfulQA, the first 400 questions (Lin et al. 2021; Apache-2.0), from ``--data``
(``../shared/data/truthfulqa-dev.csv``): every correct and every incorrect answer of a
question, each against the question's best answer as the reference; label 1 for a correct
answer. Groups: the question (its answers never sit on both sides of a split). Nothing
else is read: no evaluation benchmark (TruthfulQA beyond question 400 included) is trained
or tuned on.

Steps (deterministic; `head_training`):

1. Features: `assay.estimators.agreement.agreement_features`, the function the metrics
   run, on `reference_agreement`'s rule-based results with the base install's USE
   multilingual v3 embedder and spaCy anchors (embeddings cached in ``--cache-dir``).
2. Nested grouped 5-fold CV (C chosen on the training folds by inner grouped 3-fold CV,
   the sigmoid fitted on their out-of-fold logits): AUROC of the out-of-fold
   probabilities with a 95 % interval over resampled questions, against the rule score
   on the same items, with and without the answers the RAG rule labels DON'T KNOW.
3. The shipped head: C by grouped 5-fold CV on all items, fitted on all, the sigmoid on
   the out-of-fold logits, the threshold maximising balanced accuracy on them.

Run: ``python scripts/train_agreement_head.py [--out PATH]``. ``benchmarks/validity.py``
runs step 2 (`head_training.nested_cv_probabilities` on these features) for the
validity cards.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from head_training import (
    FOLDS,
    cv_entry,
    embedded,
    fit_and_save_head,
    nested_cv_probabilities,
    training_setup,
)

from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.estimators.agreement import (
    agreement_features,
    agreement_parse_texts,
    reference_agreement,
    reference_agreement_texts,
)
from assay.estimators.offline import uncertainty_phrase
from assay.models.agreement_head import FEATURES
from assay.text.anchors import parse_texts

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from validity_data import truthfulqa_items  # noqa: E402

OUT = ROOT / "src/assay/models/data/agreement_head.npz"


def features_and_rule(samples: Sequence[Sample], res: Resources) -> tuple[np.ndarray, np.ndarray]:
    """The head's features of each sample (answer against its reference) and the rule
    score."""
    questions = [s.query for s in samples]
    answers = [s.response or "" for s in samples]
    references = [s.expected or "" for s in samples]
    vectors = embedded(res, reference_agreement_texts(questions, answers, references))
    triples = list(zip(questions, answers, references, strict=True))
    docs = parse_texts(res.nlp, agreement_parse_texts(triples))
    agreements = reference_agreement(
        res, vectors, questions, answers, references, docs=docs, use_head=False
    )
    if any(a.anchor_conflicts is None for a in agreements):
        raise SystemExit(
            "the agreement head is trained with spaCy anchors: install the models extra"
        )
    x = np.stack(
        [
            agreement_features(q, a, r, g)
            for q, a, r, g in zip(questions, answers, references, agreements, strict=True)
        ]
    )
    return x, np.array([g.rule_score for g in agreements])


def main() -> None:
    args, res = training_setup(__doc__ or "", OUT)
    samples, y, groups = truthfulqa_items(args.data)
    x, rule = features_and_rule(samples, res)
    probs, chosen = nested_cv_probabilities(x, y, groups)
    answered = np.array([not uncertainty_phrase(s.response or "") for s in samples])
    print(f"nested {FOLDS}-fold grouped CV over {len(y)} answers (C per fold: {chosen})")
    cv = {
        subset: cv_entry(subset, y[m], probs[m], groups[m], rule[m], "rule score")
        for subset, m in (("all", np.ones(len(y), bool)), ("without DON'T KNOW", answered))
    }
    metadata = {
        "features": list(FEATURES),
        "embedder": res.embedder.name,
        "data": "TruthfulQA questions 1-400",
        "data_source": "TruthfulQA (Lin et al. 2021, Apache-2.0), first 400 questions",
        "nested_cv": cv,
        "script": "scripts/train_agreement_head.py",
    }
    fit_and_save_head(args.out, x, y, groups, metadata)


if __name__ == "__main__":
    main()
