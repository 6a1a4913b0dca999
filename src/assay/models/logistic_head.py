"""A shipped logistic head over named features, sigmoid-calibrated (numpy only).

The learned local judges that score a text from a handful of features (`support_head`,
`agreement_head`) share this form::

    z = w · ((x - mean) / scale) + b       (x: the features, standardised as in training)
    p = 1 / (1 + exp(-(a z + c)))           (a, c: the sigmoid calibration)

``p`` is a probability-like number, calibrated by cross-validation at an even prior of
the two classes. A head file (``.npz``, written by the head's training script under
``scripts/``) holds ``mean``, ``scale``, ``weights``, ``bias``, ``calibration`` (a, c) and
``metadata`` (JSON: the feature names, the embedder whose cosines some features are, the
data, the default threshold, the cross-validated scores).
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LogisticHead", "load_head_arrays"]


def load_head_arrays(name: str, path: str | Path | None = None) -> dict[str, np.ndarray]:
    """The arrays of a head file: ``path``, or the shipped ``assay/models/data/<name>``."""
    if path is None:
        source = importlib_resources.files("assay.models") / "data" / name
        with importlib_resources.as_file(source) as real, np.load(real) as data:
            return {k: data[k] for k in data.files}
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


class LogisticHead:
    """A head file's model: ``probability(features)``.

    Subclasses name their shipped ``file``, their ``features`` (in the weights' order) and
    a ``kind`` for the identity.

    Attributes:
        embedder: the embedder whose cosines the features were computed with.
        threshold: the default decision threshold on the probability (chosen in training).
        name: the head in words (embedder, data, model, calibration).
        identity: ``<kind>:sha256:<12 hex>`` of its arrays, for result signatures.
    """

    file: str
    features: tuple[str, ...]
    kind: str

    def __init__(self, path: str | Path | None = None) -> None:
        arrays = load_head_arrays(self.file, path)
        digest = hashlib.sha256()
        for key in sorted(arrays):
            digest.update(key.encode() + np.ascontiguousarray(arrays[key]).tobytes())
        self.mean = arrays["mean"].astype(np.float64)
        self.scale = arrays["scale"].astype(np.float64)
        self.weights = arrays["weights"].astype(np.float64)
        self.bias = float(arrays["bias"])
        self.slope, self.intercept = (float(v) for v in arrays["calibration"])
        self.metadata: dict[str, Any] = json.loads(str(arrays["metadata"]))
        if tuple(self.metadata["features"]) != self.features:
            raise ValueError(
                f"the {self.kind} file has features {self.metadata['features']}, "
                f"this version of Assay computes {list(self.features)}"
            )
        self.embedder: str = self.metadata["embedder"]
        self.threshold = float(self.metadata["threshold"])
        self.identity = f"{self.kind}:sha256:{digest.hexdigest()[:12]}"
        self.name = (
            f"{self.kind.replace('_', ' ')} on {self.embedder} "
            f"({self.metadata['data']}, logistic, sigmoid)"
        )

    def fits(self, embedder_name: str) -> bool:
        """Whether ``embedder_name``'s cosines are the ones the head was trained on."""
        return embedder_name == self.embedder

    def named(self, values: np.ndarray) -> dict[str, float]:
        """One row of features by name, rounded to 4 places (a result's evidence)."""
        return {name: round(float(v), 4) for name, v in zip(self.features, values, strict=True)}

    def decision(self, features: np.ndarray) -> np.ndarray:
        """The logit ``w · standardised(x) + b`` per row of features."""
        x = (np.atleast_2d(np.asarray(features, dtype=np.float64)) - self.mean) / self.scale
        return x @ self.weights + self.bias

    def probability(self, features: np.ndarray) -> np.ndarray:
        """The calibrated probability per row of features."""
        return 1.0 / (1.0 + np.exp(-(self.slope * self.decision(features) + self.intercept)))
