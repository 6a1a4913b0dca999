"""Assay: offline-first quality metrics for what LLM applications say.

The public API is re-exported here; everything else is internal and may change. Names are
imported on first use (PEP 562), so ``import assay`` loads none of the metrics, models or
the runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> (module, attribute) it comes from
_EXPORTS: dict[str, tuple[str, str]] = {
    "AssayConfig": ("assay.config", "AssayConfig"),
    "AssayWarning": ("assay.config", "AssayWarning"),
    "ConfigError": ("assay.config", "ConfigError"),
    "Evaluation": ("assay.runner", "Evaluation"),
    "InputError": ("assay.io", "InputError"),
    "InputErrors": ("assay.io", "InputErrors"),
    "Metric": ("assay.metric", "Metric"),
    "MetricResult": ("assay.result", "MetricResult"),
    "MetricSummary": ("assay.runner", "MetricSummary"),
    "Resources": ("assay.resources", "Resources"),
    "Sample": ("assay.sample", "Sample"),
    "ToolCall": ("assay.sample", "ToolCall"),
    "Trace": ("assay.tracing", "Trace"),
    "evaluate": ("assay.runner", "evaluate"),
    "get_metric": ("assay.registry", "get_metric"),
    "list_metrics": ("assay.registry", "list_metrics"),
    "load_config": ("assay.config", "load_config"),
    "read_samples": ("assay.io", "read_samples"),
    "register": ("assay.registry", "register"),
    "resolve_metrics": ("assay.registry", "resolve_metrics"),
    "samples_from_dataframe": ("assay.io", "samples_from_dataframe"),
    "trace": ("assay.tracing", "assay_trace"),
    "traced": ("assay.tracing", "traced"),
}

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

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    """Import a public name on first use and keep it in the module's namespace."""
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'assay' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names and the module's dunders (not its helpers and loaded submodules)."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
