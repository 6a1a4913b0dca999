"""The learned agreement head: does an answer say what the reference answer says? A
logistic model over eleven features that relate the answer to the reference, calibrated.

The features (`assay.estimators.agreement.agreement_features`) come from `reference_agreement`'s
result for the pair and from the words of both sides:

======================  =========================================================================
``rule_score``          the rule-based agreement (question-residual cosine, halved per cue)
``cosine``              embedding cosine of the full answer and reference
``content_cosine``      cosine after removing the question's content words (``cosine`` if none)
``negation_mismatch``   1 when exactly one side is negated and neither is hedged
``yes_no``              +1 both start with the same yes/no, -1 opposite, 0 otherwise
``anchor_conflicts``    numbers, dates or entities the two state differently (count)
``content_f1``          F1 of the two sides' content-word multisets
``copy_answer``         LCS(answer, reference) / answer words
``copy_reference``      LCS(answer, reference) / reference words
``novel_words``         share of the answer's content words in neither reference nor question
``length_ratio``        log(1 + answer words) - log(1 + reference words)
======================  =========================================================================

Every feature compares the answer with the reference (or the question): none describes
the answer alone. Features of the answer alone (whether it is negated, its length, an "I
don't know") raise the cross-validated AUROC on TruthfulQA from 0.85 to 0.89, by learning
that data set's style (its correct answers often debunk a premise with "no" or
"nothing"), not agreement with the reference; they are left out.

Scoring: `assay.models.logistic_head` (standardised features, logistic, sigmoid
calibration); ``p`` is a probability-like number that the answer agrees with the
reference, at an even prior. Weights, calibration, threshold and the training record are
in ``assay/models/data/agreement_head.npz``, written by ``scripts/train_agreement_head.py``.
The cosines are of the embedder the head was trained with, and ``anchor_conflicts`` needs
spaCy: where either is missing, `reference_agreement` keeps the rule score (and says so).
"""

from __future__ import annotations

from assay.models.logistic_head import LogisticHead

__all__ = ["FEATURES", "HEAD_FILE", "AgreementHead"]

#: the shipped weights, inside the package
HEAD_FILE = "agreement_head.npz"
#: the feature names, in the order of the weights
FEATURES: tuple[str, ...] = (
    "rule_score",
    "cosine",
    "content_cosine",
    "negation_mismatch",
    "yes_no",
    "anchor_conflicts",
    "content_f1",
    "copy_answer",
    "copy_reference",
    "novel_words",
    "length_ratio",
)


class AgreementHead(LogisticHead):
    """The shipped agreement head (or the one at ``path``): ``probability(features)`` of
    `agreement_features` rows (`assay.models.logistic_head.LogisticHead`)."""

    file = HEAD_FILE
    features = FEATURES
    kind = "agreement_head"
