"""Labels as data: a person's verdict on a sample, and the key that carries it across runs.

A sample carries labels in two fields (`assay.core.sample.Sample`), both holding values
normalised to [0, 1] in the metric's own direction (1 = faithful for ``faithfulness``,
1 = toxic for ``toxicity_score``):

- ``label``: the sample's one verdict, read from the columns `LABEL_COLUMNS` (``label``,
  ``human_label``, ``human_score``, ``rating``) or from the column ``--label-field`` names;
- ``labels``: one verdict per metric, ``{"faithfulness": 0, "toxicity_score": 1}``.

What a label may be, and how a rating on a declared scale becomes one, is
`assay.core.label_values` (re-exported here: `label_value`, `LabelScale`, `LabelError`).
`sample_key` is the key under which the results store keeps a sample's labels, so labels
given once serve every later run of the same data.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

from assay.core.label_values import (
    LABEL_COLUMNS,
    LabelError,
    LabelScale,
    is_binary,
    label_value,
    metric_labels,
)
from assay.core.sample import Sample

__all__ = [
    "LABEL_COLUMNS",
    "SAMPLE_KEY_FIELDS",
    "LabelError",
    "LabelScale",
    "is_binary",
    "label_value",
    "metric_labels",
    "metric_verdict",
    "sample_key",
    "sample_label",
]

#: the fields `sample_key` hashes: the sample's id and the texts a person judged
SAMPLE_KEY_FIELDS = (
    "id",
    "query",
    "response",
    "expected",
    "contexts",
    "turns",
    "trace",
    "reasoning_steps",
)


def _keyed(value: Any) -> Any:
    """A field's value as JSON: turns and steps as ``model_dump(mode="json",
    exclude_none=True)`` (the form the store keeps them in), texts as they are."""
    if isinstance(value, list):
        return [
            item.model_dump(mode="json", exclude_none=True) if hasattr(item, "model_dump") else item
            for item in value
        ]
    return value


def sample_key(sample: Sample) -> str:
    """The hex SHA-256 of the sample's id and texts (`SAMPLE_KEY_FIELDS`) as one compact
    UTF-8 JSON object with sorted keys, absent fields as null: the same data gives the
    same key on every run and machine; a changed text (one context more, a word of the
    response) gives another. Tags, metadata and labels are not part of it, so labelling
    a sample keeps its key.

    orjson writes the JSON (under 1 µs for a RAG sample with 6 KB of text, where the
    standard library took 40); a text holding a lone surrogate, which orjson refuses,
    is written by ``json.dumps`` with the same options, its surrogates kept as
    ``surrogatepass`` encodes them."""
    values = sample.__dict__
    document = {name: _keyed(values[name]) for name in SAMPLE_KEY_FIELDS}
    try:
        data = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def metric_verdict(value: Any, threshold: float, higher_is_better: bool) -> Any:
    """The metric's own verdict on ``value`` as a label in its direction: true where a
    higher-is-better metric passes its threshold (``value >= threshold``) or a
    lower-is-better one fails it (``value > threshold``: toxic, unsupported), the side
    of the run's gate (`assay.evaluation.tally.passes`). A float gives a bool, a numpy
    array an array of them."""
    return value >= threshold if higher_is_better else value > threshold


def sample_label(sample: Sample, metric: str) -> float | None:
    """The sample's verdict for ``metric``: ``sample.labels[metric]`` when given, else the
    sample's one verdict ``sample.label``, else None (values already in [0, 1])."""
    value = sample.labels.get(metric)
    return sample.label if value is None else value
