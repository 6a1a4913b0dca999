"""`MetricResult`: the one output shape of every metric."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from assay.redaction import known_secrets, redact_text

__all__ = ["MetricResult"]


@dataclass(frozen=True, slots=True)
class MetricResult:
    """What one metric said about one sample.

    Attributes:
        name: the metric's registry name.
        value: the score on the metric's canonical scale (ratios in 0..1, performance
            metrics in their unit), or ``None`` when the metric could not be computed.
            Never NaN.
        components: named sub-scores (e.g. ``rouge1_f1`` of ``rouge``), same rules as value.
        details: the evidence: matched patterns, unsupported claims, missing keys, the
            judge's reason, counts a ratio was computed from.
        method: what ran: ``local`` (offline estimator or model), ``llm`` (a judge),
            ``pattern`` (rules), ``reference`` (a reference library), ``measurement``.
        reason: why the value is ``None`` (missing input, undefined), or a short
            explanation of the score.
        error: the error message when computing failed for this sample.
        signature: what produced the value: metric version, method, model, thresholds.
    """

    name: str
    value: float | None
    components: dict[str, float | None] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    method: str = "local"
    reason: str | None = None
    error: str | None = None
    signature: str = ""

    def __post_init__(self) -> None:
        # messages can carry what a server or a library echoed back: never a secret
        if self.error:
            object.__setattr__(self, "error", redact_text(self.error, known_secrets()))
        if self.reason:
            object.__setattr__(self, "reason", redact_text(self.reason, known_secrets()))
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError(f"metric {self.name} produced a non-finite value {self.value!r}")
        for key, component in self.components.items():
            if component is not None and not math.isfinite(component):
                raise ValueError(f"metric {self.name} component {key} is not finite")

    @property
    def ok(self) -> bool:
        """True when a value was computed."""
        return self.value is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "components": dict(self.components),
            "details": self.details,
            "method": self.method,
            "reason": self.reason,
            "error": self.error,
            "signature": self.signature,
        }
