"""The metric registry and named suites.

Metrics register themselves with ``@register``; their ``suites`` attribute puts them in
named suites. ``all-offline`` holds every metric (each works with no key and no
download; judged metrics fall back to their local estimator).

A metric's ``aliases`` are other names of the same computation: asking for an alias gives
the metric reporting under that name (`get_metric`). Suites list each computation once,
under the metric's own name; an alias asked for by name next to a suite that brings its
metric in replaces that name, so the value is computed once and reported as asked.

A suite listed in `SUITE_GATES` gates only the metrics named there: the others it brings
in report their values without a pass/fail (`Metric.ungated`) unless asked for by name or
given a threshold (``thresholds``, ``--threshold``, a threshold setting set in a config).
The ``base`` suite gates what a good answer passes: it is not a fallback and it is
classified CORRECT against the expected answer; ``exact_match`` fails every paraphrase,
``semantic_similarity`` at 0.7 fails some, and ``response_quality`` fails prose holding a
``>`` ("Settings > Account"), so these inform without deciding.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import warnings
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.metrics.base import Metric

__all__ = [
    "SUITE_DESCRIPTIONS",
    "SUITE_GATES",
    "get_metric",
    "list_metrics",
    "load_builtin",
    "metric_class",
    "metric_names",
    "register",
    "resolve_metrics",
    "suite_names",
]

_REGISTRY: dict[str, type[Metric]] = {}
_ALIASES: dict[str, str] = {}  # alias -> the metric's own name

SUITE_DESCRIPTIONS: dict[str, str] = {
    "base": "The chatbot default: answer vs expected answer, lexical and semantic; "
    "gated on fallback_detection and answer_classification.",
    "base-model": "The chatbot hub's base-model metrics, similarity proxies included.",
    "lexical": "String-overlap metrics against the expected answer (no model).",
    "semantic": "Embedding and BERTScore similarity metrics.",
    "rag": "Retrieval and grounding metrics over the retrieved contexts.",
    "reasoning": "Chain-of-thought metrics over reasoning steps.",
    "pipeline": "The lightweight no-LLM pipeline: relevance, completeness, hallucination.",
    "safety": "Toxicity, bias, harm, PII and refusal patterns.",
    "security": "Attack-success detectors over query and response.",
    "probes": "Whether each red-team probe of assay run --probes worked (attack_success).",
    "reliability": "Stability, validity and schema compliance.",
    "agent": "Agent task, tool-call and goal metrics.",
    "conversation": "Multi-turn chats: relevancy, knowledge retention, role and topic "
    "adherence, completeness, goal accuracy.",
    "performance": "Latency and throughput from timings.",
    "judged": "LLM-as-judge metrics (local estimators when no judge is configured).",
    "structured": "JSON output vs ground-truth JSON.",
    "all-offline": "Every metric; judged ones use their local estimator without a judge.",
}

#: the metrics a suite gates (pass/fail per sample); a suite not listed gates every metric
#: that has a threshold
SUITE_GATES: dict[str, frozenset[str]] = {
    "base": frozenset({"fallback_detection", "answer_classification"}),
}


def register(cls: type[Metric]) -> type[Metric]:
    """Class decorator adding a metric to the registry."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no name")
    known = _REGISTRY.get(cls.name)
    reloaded = known is not None and (known.__module__, known.__qualname__) == (
        cls.__module__,
        cls.__qualname__,
    )
    if known is not None and known is not cls and not reloaded:
        raise ValueError(
            f"metric name {cls.name!r} is used by both "
            f"{_REGISTRY[cls.name].__qualname__} and {cls.__qualname__}"
        )
    if not cls.family:
        raise TypeError(f"metric {cls.name} declares no family")
    if not (cls.__doc__ or "").strip():
        raise TypeError(f"metric {cls.name} has no docstring")
    for alias in cls.aliases:
        owner = _REGISTRY.get(alias) or _REGISTRY.get(_ALIASES.get(alias, ""))
        if owner is not None and owner.name != cls.name:
            raise ValueError(f"alias {alias!r} of {cls.name!r} is already a name of {owner.name!r}")
    if cls.name in _ALIASES and _ALIASES[cls.name] != cls.name:
        raise ValueError(f"metric name {cls.name!r} is an alias of {_ALIASES[cls.name]!r}")
    _REGISTRY[cls.name] = cls
    _ALIASES.update(dict.fromkeys(cls.aliases, cls.name))
    return cls


@cache
def load_builtin() -> None:
    """Import every module of `assay.metrics` once: each family registers its metrics."""
    import assay.metrics

    for module in pkgutil.iter_modules(assay.metrics.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"assay.metrics.{module.name}")


def metric_class(name: str) -> type[Metric]:
    """The class of the metric called ``name`` (its own name or an alias)."""
    load_builtin()
    try:
        return _REGISTRY[_ALIASES.get(name, name)]
    except KeyError:
        close = difflib.get_close_matches(name, metric_names(), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise KeyError(
            f"unknown metric {name!r}.{hint} Run 'assay metrics' to list them."
        ) from None


def metric_names() -> list[str]:
    """Every name a metric can be asked for by: the metrics' own names and their aliases."""
    load_builtin()
    return sorted([*_REGISTRY, *_ALIASES])


def get_metric(name: str, **params: Any) -> Metric:
    """An instance of the metric called ``name``; asked for by an alias, it reports its
    results under that alias."""
    cls = metric_class(name)
    metric = cls(**params)
    return metric if name == cls.name else metric.reported_as(name)


def list_metrics(family: str | None = None) -> list[type[Metric]]:
    """Registered metric classes, sorted by family then name."""
    load_builtin()
    found = [c for c in _REGISTRY.values() if family is None or c.family == family]
    return sorted(found, key=lambda c: (c.family, c.name))


def suite_names() -> list[str]:
    return list(SUITE_DESCRIPTIONS)


def suite(name: str) -> list[str]:
    """Metric names in a suite."""
    load_builtin()
    if name not in SUITE_DESCRIPTIONS:
        raise KeyError(f"unknown suite {name!r}; suites: {', '.join(SUITE_DESCRIPTIONS)}")
    if name == "all-offline":
        return [c.name for c in list_metrics()]
    return [c.name for c in list_metrics() if name in c.suites]


def resolve_metrics(
    names: list[str] | None = None, suites: list[str] | None = None
) -> list[Metric]:
    """Instances for the given metric names and suites (default suite: ``base``).

    A metric that a suite brings in but whose extra is not installed (``bertscore`` in a
    base install) is left out with an `AssayNote` naming the pip command that adds it;
    a metric asked for by name is always kept (it then fails with that command).
    A metric only suites bring in, none of which gates it, is `Metric.ungated`.
    """
    from assay.core.config import AssayNote
    from assay.core.extras import missing_extra_of_needs, pip_command

    from_suites: list[str] = []
    gating: set[str] = set()  # metrics some asked-for suite gates (`SUITE_GATES`)
    for s in suites or ([] if names else ["base"]):
        members = suite(s)
        from_suites.extend(members)
        gating.update(SUITE_GATES.get(s, members))
    asked = set(names or [])
    # an alias asked for by name stands in for its metric brought by a suite (computed once)
    renamed = {
        own: n for n in names or [] if (own := metric_class(n).name) != n and own not in asked
    }
    from_suites = [renamed.get(n, n) for n in from_suites]
    seen: dict[str, Metric] = {}
    left_out: dict[str, list[str]] = {}  # extra -> metrics left out for want of it
    skipped: set[str] = set()
    for n in [*from_suites, *(names or [])]:
        if n in seen or n in skipped:
            continue
        extra = None if n in asked else missing_extra_of_needs(metric_class(n).needs)
        if extra is not None:
            left_out.setdefault(extra, []).append(n)
            skipped.add(n)
            continue
        metric = get_metric(n)
        seen[n] = metric if n in asked or metric_class(n).name in gating else metric.ungated()
    for extra, metrics in left_out.items():
        warnings.warn(
            AssayNote(
                f"left out {', '.join(metrics)}: "
                f"{'it needs' if len(metrics) == 1 else 'they need'} the {extra} extra, "
                f"which is not installed ({pip_command(extra)})"
            ),
            stacklevel=2,
        )
    return list(seen.values())
