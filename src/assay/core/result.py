"""`MetricResult`: the one output shape of every metric, and its signature format.

A result's ``signature`` says what produced its value, as ``key=value`` parts joined by
``|`` (a ``|`` or ``%`` inside a value is written ``%7C`` / ``%25``), in this order:

- ``assay``: the Assay version, e.g. ``assay=0.1.0``
- ``metric``: the metric's registry name and version, ``metric=rouge@1``
- ``method``: ``local``, ``llm``, ``pattern``, ``reference``, ``measurement``, ``error``
- ``model``: the local model, pattern bundle or classifier that scored (when one did)
- ``model_hash``: what identifies its weights: ``sha256:<12 hex>`` over the size and the
  first and last MiB of each weights file of a local model folder (the shipped
  all-MiniLM-L6-v2), or ``<distribution>==<version>`` for a model shipped in a package
  (the Universal Sentence Encoder); hashed once per process (`assay.metrics.provenance`)
- ``judge``: the judge model of an ``llm`` result
- ``prompt``: the judge prompts' hashes, ``sha256[:12]`` of each template (``,``-joined)
- then the metric's parameters, ``name=value`` sorted by name (settings a metric adds,
  e.g. the semantic metrics' thresholds, follow in the same form).

For example ``assay=0.1.0|metric=faithfulness@2|method=llm|judge=gpt-4o-mini|prompt=
3f2a9c1d0b7e|threshold=0.5``. `parse_signature` reads one back (also the older format,
``name@version|method|model=…|k=v``, of results stored before) and
`signature_differences` names the parts in which two sets of signatures differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from assay.core.redaction import known_secrets, redact_text

__all__ = [
    "SIGNATURE_KEYS",
    "MetricResult",
    "format_signature",
    "parse_signature",
    "signature_differences",
]

#: the signature's leading parts, in order; parameters follow, sorted
SIGNATURE_KEYS = ("assay", "metric", "method", "model", "model_hash", "judge", "prompt")


def _escape(value: str) -> str:
    return value.replace("%", "%25").replace("|", "%7C")


def _unescape(value: str) -> str:
    return value.replace("%7C", "|").replace("%25", "%")


def format_signature(parts: dict[str, str]) -> str:
    """``parts`` as a signature: the known keys in `SIGNATURE_KEYS` order, then the rest
    sorted; empty values are left out."""
    keys = [k for k in SIGNATURE_KEYS if k in parts]
    keys += sorted(k for k in parts if k not in SIGNATURE_KEYS)
    return "|".join(f"{k}={_escape(str(parts[k]))}" for k in keys if parts[k] != "")


def parse_signature(text: str) -> dict[str, str]:
    """A signature's parts by key. In the older format a part without ``=`` is the
    ``metric`` (the first) or the ``method`` (the second)."""
    parts: dict[str, str] = {}
    bare = iter(("metric", "method"))
    for token in filter(None, text.split("|")):
        key, sep, value = token.partition("=")
        if not sep:
            key, value = next(bare, "unnamed"), token
        parts[key] = _unescape(value)
    return parts


def signature_differences(a: set[str], b: set[str]) -> list[str]:
    """The parts in which the signatures ``a`` (one side's, e.g. a run's for one metric)
    differ from ``b``, one line per key: ``model_hash: sha256:aaa vs sha256:bbb``. The
    values of a side that has several signatures are ``,``-joined; a side without the
    key shows ``(none)``. Empty when both sides hold the same parts."""
    left = [parse_signature(s) for s in a]
    right = [parse_signature(s) for s in b]
    keys = {k for p in left + right for k in p}
    order = [k for k in SIGNATURE_KEYS if k in keys] + sorted(keys - set(SIGNATURE_KEYS))
    out = []
    for key in order:
        va = sorted({p.get(key, "(none)") for p in left})
        vb = sorted({p.get(key, "(none)") for p in right})
        if va != vb:
            out.append(f"{key}: {', '.join(va)} vs {', '.join(vb)}")
    return out


@dataclass(slots=True)
class MetricResult:
    """What one metric said about one sample. A result is not changed once made (a
    changed copy is ``dataclasses.replace(result, ...)``); it is not frozen, because a
    frozen dataclass sets each field through ``object.__setattr__``, 1.1 of the 2 µs a
    result costs to make, once per sample and metric.

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
        signature: what produced the value (Assay and metric version, method, model and
            its weights hash or judge and prompt hash, parameters): see this module.
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
            self.error = redact_text(self.error, known_secrets())
        if self.reason:
            self.reason = redact_text(self.reason, known_secrets())
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
