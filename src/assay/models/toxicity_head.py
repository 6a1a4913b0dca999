"""The learned toxicity head: logistic regression on frozen sentence embeddings, calibrated.

A text is normalised (`normalise_for_toxicity`: social-media artefacts removed), embedded
by the shipped encoder the head was trained on (USE multilingual v3, in the base install),
and scored::

    z = w · e(text) + b          (e: the L2-normalised embedding, w: 512 weights)
    p = isotonic(z)              (piecewise-linear interpolation through the fitted steps)

``p`` is a probability-like number, calibrated by cross-validation on the training data.
The weights, the calibration steps and the training metadata are in
``assay/models/data/toxicity_head.npz`` (written by ``scripts/train_toxicity_head.py``,
which also documents the data and its licence); inference is numpy only. In a run the
embeddings are answers of the execution engine (the toxicity metrics plan their embed
asks, `assay.metrics.toxicity_plan.toxicity_asks`), handed to
`ToxicityHead.probabilities`.
"""

from __future__ import annotations

import functools
import html
import json
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from assay.core.extras import ModelUnavailable
from assay.models.embedders import Embedder
from assay.models.logistic_head import load_head_arrays

__all__ = ["HEAD_FILE", "ToxicityHead", "normalise_for_toxicity"]

#: the shipped weights, inside the package
HEAD_FILE = "toxicity_head.npz"

_RETWEET = re.compile(r"(?<!\w)RT(?!\w)\s*:?")
_MENTION = re.compile(r"(?<!\w)@\w+:?")
_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_HASH = re.compile(r"(?<!\w)#(?=\w)")
_SPACES = re.compile(r"\s+")
#: Unicode categories dropped: symbols such as emoji (So), private use (Co), surrogates
#: (Cs) and unassigned code points (Cn); the tweets carry emoji as numeric entities
_DROPPED_CATEGORIES = frozenset({"So", "Co", "Cs", "Cn"})


@functools.lru_cache(maxsize=65_536)
def normalise_for_toxicity(text: str) -> str:
    """The text the head reads: HTML entities decoded, emoji and other symbols dropped,
    retweet markers ("RT"), @mentions and URLs removed, "#" taken off hashtags (the word
    stays), whitespace collapsed. Training applies the same function, so the head cannot
    learn tweet artefacts; ordinary prose passes through unchanged apart from spacing.

    Remembered per text: every metric that reads toxicity plans and reduces the same
    response (11 calls per sample in the safety suites), and the character scan was a
    tenth of the suites' time. ASCII text has no character of the dropped categories, so
    it skips the scan."""
    text = html.unescape(text)
    if not text.isascii():
        text = "".join(c for c in text if unicodedata.category(c) not in _DROPPED_CATEGORIES)
    text = _URL.sub(" ", text)
    text = _RETWEET.sub(" ", text)
    text = _MENTION.sub(" ", text)
    text = _HASH.sub("", text)
    return _SPACES.sub(" ", text).strip(" :")


class ToxicityHead:
    """``probabilities(texts)`` of the shipped head over ``embedder``'s vectors.

    ``embedder`` must be the encoder named in the file (``metadata["embedder"]``): the
    weights mean nothing on another model's vectors, so a mismatch raises
    `ModelUnavailable`. Probabilities are remembered per text.
    """

    def __init__(
        self, embedder: Embedder, path: str | Path | None = None, cache_size: int = 16384
    ) -> None:
        arrays = load_head_arrays(HEAD_FILE, path)
        self.weights = arrays["weights"].astype(np.float64)
        self.bias = float(arrays["bias"])
        self.calibration_x = arrays["calibration_x"].astype(np.float64)
        self.calibration_y = arrays["calibration_y"].astype(np.float64)
        self.metadata: dict[str, Any] = json.loads(str(arrays["metadata"]))
        if embedder.name != self.metadata["embedder"]:
            raise ModelUnavailable(
                f"the toxicity head was trained on {self.metadata['embedder']!r} vectors; "
                f"got the embedder {embedder.name!r}"
            )
        self.embedder = embedder
        self.threshold = float(self.metadata["threshold"])
        self.name = (
            f"toxicity head on {self.metadata['embedder']} ({self.metadata['data']}, "
            f"target {self.metadata['target']}, logistic, isotonic)"
        )
        self._cache: OrderedDict[str, float] = OrderedDict()
        self._cache_size = cache_size
        self.calls = 0  # texts that reached the head

    def decision(self, vectors: np.ndarray) -> np.ndarray:
        """The logistic head's logit ``w · e + b`` per row of embeddings."""
        return np.asarray(vectors, dtype=np.float64) @ self.weights + self.bias

    def calibrate(self, logits: np.ndarray) -> np.ndarray:
        """The isotonic map: linear interpolation through the fitted (logit, rate) steps,
        constant beyond the ends."""
        return np.interp(logits, self.calibration_x, self.calibration_y)

    def probabilities(
        self, texts: Sequence[str], vectors: Mapping[str, np.ndarray] | None = None
    ) -> list[float]:
        """Calibrated probability of toxic text.

        ``vectors``: the head embedder's vectors of the normalised texts
        (`normalise_for_toxicity`), by normalised text, e.g. the answers of the toxicity
        metrics' embed asks (`assay.metrics.toxicity_plan.toxicity_asks`); a blank
        normalised text needs none (its vector is zeros, as the embedder gives it). None:
        the unseen texts are embedded here, in one batch.
        """
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            self.calls += len(missing)
            normalised = [normalise_for_toxicity(t) for t in missing]
            if vectors is None:
                matrix = self.embedder.embed(normalised)
            else:
                blank = np.zeros(len(self.weights), dtype=np.float32)
                matrix = np.stack([vectors[n] if n.strip() else blank for n in normalised])
            probs = self.calibrate(self.decision(matrix))
            for text, p in zip(missing, probs, strict=True):
                self._cache[text] = float(p)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return [self._cache[t] for t in texts]
