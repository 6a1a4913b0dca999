"""Shared by the safety tests (test_safety_metrics.py, test_safety_patterns.py,
test_safety_toxicity.py): the chatbot hub's toxicity component weights, the
module-scoped ``keywords_res`` fixture (resources on the keyword toxicity path), ``value``
(a metric's value on one sample) and ``head_probability`` (the toxicity head by hand).
The test modules that take the fixture load this module with ``pytest_plugins``."""

from __future__ import annotations

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric

HUB_COMPONENT_WEIGHTS = {
    "toxic": 1.0,
    "severe_toxic": 1.5,
    "obscene": 0.8,
    "threat": 1.2,
    "insult": 0.9,
    "identity_hate": 1.3,
}


@pytest.fixture(scope="module")
def keywords_res(tmp_path_factory: pytest.TempPathFactory) -> Resources:
    """Resources configured for the keyword toxicity path (hand-computable values)."""
    cache = str(tmp_path_factory.mktemp("kw-cache"))
    return Resources(AssayConfig(toxicity_method="keywords", cache_dir=cache))


def value(name: str, res: Resources, **fields: object) -> float | None:
    return get_metric(name).score(Sample(**fields), res).value


def head_probability(text: str, res: Resources) -> float:
    """The head by hand: logit w . e + b on the USE vector of the normalised text, then
    the shipped isotonic map (linear interpolation through its steps)."""
    from assay.models.logistic_head import load_head_arrays
    from assay.models.toxicity_head import HEAD_FILE, normalise_for_toxicity

    arrays = load_head_arrays(HEAD_FILE)
    vector = res.embedder.embed([normalise_for_toxicity(text)])[0]
    logit = float(sum(float(w) * float(e) for w, e in zip(arrays["weights"], vector, strict=True)))
    logit += float(arrays["bias"])
    return float(np.interp(logit, arrays["calibration_x"], arrays["calibration_y"]))
