"""The toxicity head as a calibration's features: its embeddings and its shipped weights.

Where a team's toxicity labels disagree with every piece of evidence ``toxicity_score``
reports, a calibration may refit the learned toxicity head itself
(`assay.models.toxicity_head`): the same logistic model ``p = sigmoid(b + w · e(t))``
on the L2-normalised USE multilingual v3 embedding ``e`` of the normalised response
``t``, with the SHIPPED weights ``(b, w)`` as the prior (`assay.evaluation.calibration_fit`),
so few labels stay near the shipped head and many move it to the team's data. The refit
keeps the head's own L2 penalty (``1/C``) on the weights: without it, 1,000 Davidson
labels overfitted the 512 weights (5-fold AUROC 0.869 against 0.941 with it and 0.930
for the shipped head).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.models.toxicity_head import normalise_for_toxicity

__all__ = ["HeadPrior", "head_embeddings", "head_prior"]


def head_embeddings(samples: Sequence[Sample], res: Resources) -> np.ndarray:
    """The embeddings the toxicity head reads, one row per sample (512 columns): each
    response normalised (`normalise_for_toxicity`) and embedded by the head's encoder
    (zeros for a blank one, as the head itself does)."""
    head = res.toxicity
    texts = [normalise_for_toxicity(s.response or "") for s in samples]
    matrix = np.zeros((len(texts), len(head.weights)), dtype=np.float64)
    present = [i for i, t in enumerate(texts) if t.strip()]
    if present:
        vectors = head.embedder.embed([texts[i] for i in present])
        matrix[present] = np.asarray(vectors, dtype=np.float64)
    return matrix


@dataclass(frozen=True)
class HeadPrior:
    """The shipped head as a prior: ``weights`` ``(b, w...)``, its ``name`` in words and
    ``weight_ridge``, its own training's L2 penalty ``1/C`` (C in the head's metadata),
    which the refit keeps on the weights besides the 100-label prior."""

    weights: np.ndarray
    name: str
    weight_ridge: float


def head_prior(res: Resources) -> HeadPrior:
    """The shipped toxicity head as a prior (`HeadPrior`)."""
    head = res.toxicity
    return HeadPrior(
        np.concatenate([[head.bias], head.weights]), head.name, 1.0 / float(head.metadata["C"])
    )
