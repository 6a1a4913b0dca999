"""Assay: offline-first quality metrics for what LLM applications say.

The public API is re-exported here; everything else is internal and may change.
"""

from assay.config import AssayConfig, AssayWarning, ConfigError, load_config
from assay.io import InputError, InputErrors, read_samples, samples_from_dataframe
from assay.metric import Metric
from assay.registry import get_metric, list_metrics, register, resolve_metrics
from assay.resources import Resources
from assay.result import MetricResult
from assay.runner import Evaluation, MetricSummary, evaluate
from assay.sample import Sample, ToolCall
from assay.tracing import Trace, traced
from assay.tracing import assay_trace as trace

__version__ = "0.1.0"

__all__ = [
    "AssayConfig",
    "AssayWarning",
    "ConfigError",
    "Evaluation",
    "InputError",
    "InputErrors",
    "Metric",
    "MetricResult",
    "MetricSummary",
    "Resources",
    "Sample",
    "ToolCall",
    "Trace",
    "__version__",
    "evaluate",
    "get_metric",
    "list_metrics",
    "load_config",
    "read_samples",
    "register",
    "resolve_metrics",
    "samples_from_dataframe",
    "trace",
    "traced",
]
