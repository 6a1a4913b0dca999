"""pytest plugin: the ``assay`` fixture for scoring inside tests, and an opt-in results store.

    def test_answer(assay):
        assay.check(
            query="How do I reset my password?",
            response=bot("How do I reset my password?"),
            expected="Open Settings > Account > Reset password.",
            metrics=["semantic_similarity", "toxicity_score"],
        )

``check`` fails the test with a message showing each failing metric's score, threshold
and evidence. With ``--assay-store URL`` (or ``assay_store`` in the ini file, or
``ASSAY_DATABASE_URL`` with ``--assay-store=default``) every test's outcome and
duration, the validated query/response pairs with their similarity, every metric value
and the quality checks are written to the store as one run per session. Without it,
nothing is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from assay.config import AssayConfig, load_config
from assay.metric import PASS_THRESHOLD, Metric
from assay.registry import resolve_metrics
from assay.resources import Resources
from assay.result import MetricResult
from assay.runner import applied_threshold, passes
from assay.sample import Sample

__all__ = ["AssayChecker", "CheckResult"]

_CHECKS = pytest.StashKey[list["CheckResult"]]()
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@dataclass(frozen=True)
class CheckResult:
    """What one ``assay.check`` computed: the sample, results and which metrics failed."""

    sample: Sample
    results: dict[str, MetricResult]
    thresholds: dict[str, float | None]
    failures: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> float | None:
        return self.results[name].value

    @property
    def passed(self) -> bool:
        return not self.failures


class AssayChecker:
    """The object the ``assay`` fixture gives a test."""

    def __init__(self, resources: Resources, checks: list[CheckResult]) -> None:
        self._resources = resources
        self._checks = checks

    @property
    def config(self) -> AssayConfig:
        return self._resources.config

    def score(
        self,
        sample: Sample | None = None,
        *,
        metrics: Sequence[str | Metric] | None = None,
        suites: Sequence[str] | None = None,
        **fields: Any,
    ) -> dict[str, MetricResult]:
        """Score without asserting: {metric name: MetricResult}."""
        sample = sample or Sample.model_validate(fields)
        chosen = self._metrics(metrics, suites)
        return {m.name: m.score(sample, self._resources) for m in chosen}

    def check(
        self,
        sample: Sample | None = None,
        *,
        metrics: Sequence[str | Metric] | None = None,
        suites: Sequence[str] | None = None,
        thresholds: dict[str, float] | None = None,
        **fields: Any,
    ) -> CheckResult:
        """Score and fail the test when a metric misses its threshold or cannot be computed.

        Thresholds: ``thresholds`` argument, else the configured/default threshold of the
        metric (a per-sample threshold in the result, e.g. the Arabic one, wins over the
        default but not over an explicit argument). Metrics without any threshold are
        reported but never fail.
        """
        sample = sample or Sample.model_validate(fields)
        chosen = self._metrics(metrics, suites)
        results = {m.name: m.score(sample, self._resources) for m in chosen}
        explicit = thresholds or {}
        used: dict[str, float | None] = {}
        failures = []
        for metric in chosen:
            result = results[metric.name]
            threshold = explicit.get(metric.name)
            if threshold is None:
                threshold = applied_threshold(metric, result, self.config)
            used[metric.name] = threshold
            if result.error:
                failures.append(_describe(metric, result, threshold, "could not be computed"))
            elif threshold is None:
                continue
            elif result.value is None:
                failures.append(_describe(metric, result, threshold, "is N/A"))
            elif not passes(metric, result.value, float(threshold)):
                failures.append(_describe(metric, result, threshold, "missed its threshold"))
        check = CheckResult(sample, results, used, failures)
        self._checks.append(check)
        if failures:
            pytest.fail("assay check failed:\n" + "\n".join(failures), pytrace=False)
        return check

    def _metrics(
        self, metrics: Sequence[str | Metric] | None, suites: Sequence[str] | None
    ) -> list[Metric]:
        names = [m for m in metrics or [] if isinstance(m, str)]
        chosen = resolve_metrics(names, list(suites) if suites else None) if names or suites else []
        chosen.extend(m for m in metrics or [] if isinstance(m, Metric))
        return chosen or resolve_metrics(None, ["base"])


def _describe(metric: Metric, result: MetricResult, threshold: float | None, what: str) -> str:
    sign = ">=" if metric.higher_is_better else "<="
    value = "N/A" if result.value is None else f"{result.value:.4f}"
    limit = "" if threshold is None else f" (needs {sign} {threshold:g})"
    lines = [f"  {metric.name} = {value}{limit} {what} [method: {result.method}]"]
    if result.reason:
        lines.append(f"    reason: {result.reason}")
    if result.error:
        lines.append(f"    error: {result.error}")
    evidence = {k: v for k, v in result.details.items() if k != PASS_THRESHOLD}
    if evidence:
        text = repr(evidence)
        lines.append(f"    evidence: {text[:400]}{'...' if len(text) > 400 else ''}")
    return "\n".join(lines)


# ---- plugin hooks ----------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "Assay LLM-output evaluation")
    group.addoption(
        "--assay-store",
        default=None,
        metavar="URL",
        help="Write test outcomes and metric values to this results store "
        "(SQLite path or database URL; 'default' uses ASSAY_DATABASE_URL or ./assay.db).",
    )
    group.addoption("--assay-run-name", default=None, help="Name of the stored run.")
    parser.addini("assay_store", "Results store URL for the assay plugin (opt-in).", default="")


class _StoreSession:
    """Writes one run per pytest session, one row per test, as each test finishes."""

    def __init__(self, url: str, name: str | None, config: AssayConfig) -> None:
        from assay.store.db import Store

        self.store = Store(None if url == "default" else url)
        self.run_id = uuid.uuid4().hex[:12]
        self.config = config
        self.index = 0
        self.store.start_run(self.run_id, name=name, source="pytest")

    def record(self, item: pytest.Item, status: str, duration: float, error: str | None) -> None:
        from assay.store.recorder import RunRecorder

        checks = item.stash.get(_CHECKS, [])
        if not checks:
            self.store.record(
                self.run_id,
                self.index,
                Sample(id=item.nodeid),
                {},
                status=status,
                duration=duration,
                test_name=item.nodeid,
                error=error,
            )
            self.index += 1
            return
        # the quality checks and validated pair of each check; metrics are not needed
        # (the test's outcome is the status), so a user's unregistered metric is fine
        recorder = RunRecorder(self.store, self.run_id, [], self.config)
        for check in checks:
            self.store.record(
                self.run_id,
                self.index,
                check.sample,
                check.results,
                status=status,
                duration=duration,
                test_name=item.nodeid,
                quality=recorder.quality_of(check.sample),
                validation=recorder.validation_of(check.sample, check.results),
                error=error,
            )
            self.index += 1

    def finish(self) -> None:
        self.store.finish_run(self.run_id)
        self.store.close()


_store_session: _StoreSession | None = None
_resources: Resources | None = None


def _session_resources() -> Resources:
    global _resources
    if _resources is None:
        _resources = Resources(load_config())
    return _resources


def pytest_configure(config: pytest.Config) -> None:
    global _store_session
    url = config.getoption("--assay-store") or config.getini("assay_store")
    if url and _store_session is None:
        from assay.store.db import StoreError

        try:
            _store_session = _StoreSession(
                url, config.getoption("--assay-run-name"), _session_resources().config
            )
        except StoreError as exc:
            raise pytest.UsageError(f"--assay-store: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    global _store_session, _resources
    if _store_session is not None:
        _store_session.finish()
        _store_session = None
    if _resources is not None:
        _resources.close()
        _resources = None


@pytest.fixture
def assay(request: pytest.FixtureRequest) -> AssayChecker:
    """Score LLM output inside a test; see `AssayChecker.check`."""
    checks: list[CheckResult] = []
    request.node.stash[_CHECKS] = checks
    return AssayChecker(_session_resources(), checks)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    reports = item.stash.setdefault(_REPORTS, {})
    reports[report.when] = report
    if report.when != "teardown" or _store_session is None:
        return
    phases = list(reports.values())
    if any(r.failed for r in phases):
        status = "failed"
    elif any(r.skipped for r in phases):
        status = "skipped"
    else:
        status = "passed"
    failed = next((r for r in phases if r.failed), None)
    error = None if failed is None else str(failed.longrepr)[:4000]
    duration = sum(r.duration for r in phases)
    _store_session.record(item, status, duration, error)
