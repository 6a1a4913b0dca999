"""The offline toxicity classifier shipped in the ``alt-profanity-check`` wheel.

A TF-IDF + calibrated linear SVM trained on human-labelled tweets (Davidson et al.) and
Wikipedia comments; one probability per text, English vocabulary. Loaded once per
`Resources`; probabilities are remembered per text so the metrics that read toxicity
(toxicity_score, compliance_score, ethical_violation) cost one model call per batch.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from assay.core.extras import ModelUnavailable

__all__ = ["ToxicityModel"]


class ToxicityModel:
    """``probabilities(texts)`` of the shipped classifier; `ModelUnavailable` if missing."""

    def __init__(self, cache_size: int = 16384) -> None:
        try:
            from importlib.metadata import version

            from profanity_check import predict_prob
        except Exception as exc:  # ImportError, or a joblib/scikit-learn mismatch
            raise ModelUnavailable(
                "toxicity model unavailable (pip install alt-profanity-check): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self._predict = predict_prob
        self.name = (
            f"alt-profanity-check {version('alt-profanity-check')} (TF-IDF + calibrated linear SVM)"
        )
        self._cache: OrderedDict[str, float] = OrderedDict()
        self._cache_size = cache_size
        self.calls = 0  # texts that reached the model

    def probabilities(self, texts: Sequence[str]) -> list[float]:
        """Probability of toxicity per text, one model call for the texts not seen yet."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            self.calls += len(missing)
            for text, p in zip(missing, self._predict(missing), strict=True):
                self._cache[text] = float(p)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return [self._cache[t] for t in texts]
