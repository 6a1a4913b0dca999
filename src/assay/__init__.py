"""Assay: offline-first quality metrics for what LLM applications say.

The public API is re-exported here; everything else is internal and may change. Names are
imported on first use (PEP 562), so ``import assay`` loads none of the metrics, models or
the runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from assay.core.version import __version__

#: public name -> (module, attribute) it comes from
_EXPORTS: dict[str, tuple[str, str]] = {
    "AssayConfig": ("assay.core.config", "AssayConfig"),
    "AssayWarning": ("assay.core.config", "AssayWarning"),
    "ConfigError": ("assay.core.config", "ConfigError"),
    "Evaluation": ("assay.evaluation.runner", "Evaluation"),
    "InputError": ("assay.inputs.records", "InputError"),
    "InputErrors": ("assay.inputs.records", "InputErrors"),
    "Metric": ("assay.metrics.base", "Metric"),
    "MetricResult": ("assay.core.result", "MetricResult"),
    "MetricSummary": ("assay.evaluation.runner", "MetricSummary"),
    "Resources": ("assay.engine.resources", "Resources"),
    "Sample": ("assay.core.sample", "Sample"),
    "ToolCall": ("assay.core.sample", "ToolCall"),
    "Trace": ("assay.inputs.tracing", "Trace"),
    "evaluate": ("assay.evaluation.runner", "evaluate"),
    "generate": ("assay.generation", "generate"),
    "get_metric": ("assay.metrics.registry", "get_metric"),
    "list_metrics": ("assay.metrics.registry", "list_metrics"),
    "load_config": ("assay.core.config", "load_config"),
    "read_samples": ("assay.inputs.read", "read_samples"),
    "register": ("assay.metrics.registry", "register"),
    "resolve_metrics": ("assay.metrics.registry", "resolve_metrics"),
    "run": ("assay.evaluation.runner", "run"),
    "samples_from_dataframe": ("assay.inputs.records", "samples_from_dataframe"),
    "trace": ("assay.inputs.tracing", "assay_trace"),
    "traced": ("assay.inputs.tracing", "traced"),
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
    "generate",
    "get_metric",
    "list_metrics",
    "load_config",
    "read_samples",
    "register",
    "resolve_metrics",
    "run",
    "samples_from_dataframe",
    "trace",
    "traced",
]

if TYPE_CHECKING:
    from assay.core.config import AssayConfig, AssayWarning, ConfigError, load_config
    from assay.core.result import MetricResult
    from assay.core.sample import Sample, ToolCall
    from assay.engine.resources import Resources
    from assay.evaluation.runner import Evaluation, MetricSummary, evaluate, run
    from assay.inputs.read import read_samples
    from assay.inputs.records import InputError, InputErrors, samples_from_dataframe
    from assay.inputs.tracing import Trace, traced
    from assay.inputs.tracing import assay_trace as trace
    from assay.metrics.base import Metric
    from assay.metrics.registry import get_metric, list_metrics, register, resolve_metrics


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
