"""Lexical metrics: string overlap between the response and the expected answer (no model)."""

from __future__ import annotations

from assay.metric import Metric
from assay.registry import register
from assay.resources import Resources
from assay.result import MetricResult
from assay.sample import Sample


@register
class ExactMatch(Metric):
    """1 when the response equals the expected answer after trimming and lower-casing, else 0.

    Formula (seed 000): ``1.0 if response.strip().lower() == expected.strip().lower() else 0.0``.
    Range {0, 1}, higher is better. Requires response and expected. Weakness: any
    difference in punctuation or wording scores 0; use ``rouge`` or
    ``semantic_similarity`` for graded overlap.
    """

    name = "exact_match"
    family = "lexical"
    requires = ("response", "expected")
    unit = "bool"
    default_threshold = 1.0
    suites = ("base", "lexical")
    seed = "000"

    def compute(self, sample: Sample, res: Resources) -> MetricResult:
        response = sample.response.strip().lower()  # type: ignore[union-attr]
        expected = sample.expected.strip().lower()  # type: ignore[union-attr]
        return self.result(1.0 if response == expected else 0.0, method="pattern")
