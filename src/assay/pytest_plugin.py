"""pytest plugin: the ``assay`` fixture for scoring inside tests, and an opt-in results store.

    def test_answer(assay):
        assay.check(
            query="How do I reset my password?",
            response=bot("How do I reset my password?"),
            expected="Open Settings > Account > Reset password.",
            metrics=["semantic_similarity", "toxicity_score"],
        )

The ``assay_target`` fixture (`assay.pytest_target`, ``--assay-target SPEC``) calls the
application under test as ``assay run`` does and gives back the answered sample.

``check`` fails the test with a message showing each failing metric's score, threshold
and evidence; a metric that errored fails it as ``errored: <error>``, one that is N/A
(missing input) and gated as ``N/A: <reason>``. With ``--assay-store URL`` (or
``assay_store`` in the ini file, or ``ASSAY_DATABASE_URL`` with ``--assay-store=default``)
every test's outcome and duration, the validated query/response pairs with their
similarity, every metric value and the quality checks are written to the store as one run
per session. Without it, nothing is written.

The store never stops the session. When it cannot be opened (unreachable server, locked
or unwritable SQLite file) or fails on a later write, every test still runs and reports
as usual (the exit status is the tests' own), the terminal summary warns with the reason
(passwords hidden), and the run with every result the store did not take is kept in a
spool file, ``<rootdir>/.assay-spool/<run id>.jsonl`` (``--assay-spool DIR`` to put it
elsewhere). ``--assay-store-timeout SECONDS`` bounds how long a write waits for a locked
SQLite store (default: the store's 10 s, tried three times) before spooling starts.

The spool is JSON lines, every string redacted like the store's text: first
``{"kind": "run", "run_id", "name", "source": "pytest", "store": <URL, password hidden>,
"problem"}``, then one ``{"kind": "test", "index", "test_name", "status", "duration",
"error", "timestamp", "sample": {id, query, response, expected, tags, duration},
"results": {metric: MetricResult.to_dict()}, "quality", "validation"}`` per row (a test,
or each ``check`` of a test). `import_spool` loads it into a store later and finishes the
run; importing twice adds nothing::

    python -c "from assay.pytest_plugin import import_spool; import_spool(SPOOL, URL)"
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from assay.core.config import AssayConfig, load_config
from assay.core.jsonout import dumps, to_jsonable
from assay.core.redaction import (
    known_secrets,
    redact,
    redact_text,
    redact_url,
    register_secret,
    url_password,
)
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.base import PASS_THRESHOLD, Metric
from assay.metrics.registry import resolve_metrics
from assay.pytest_target import add_target_options, assay_target  # noqa: F401  (the fixture)

if TYPE_CHECKING:
    from assay.store.db import Store

__all__ = ["AssayChecker", "CheckResult", "import_spool"]

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
        default but not over an explicit argument). The test fails when a metric

        - errored (an exception in the metric, a judge call that failed): always, with
          ``<metric> errored: <error>``;
        - is N/A (missing input, undefined for this sample) and has a threshold:
          ``<metric> = N/A: <reason>``;
        - missed its threshold: ``<metric> = <value> (needs >= t) missed its threshold``;
        - is named in ``thresholds`` but not computed by this check (a gate that would
          otherwise gate nothing).

        Metrics without any threshold that compute a value or are N/A are reported but
        never fail.
        """
        from assay.evaluation.runner import (  # loads every metric: on first use
            applied_threshold,
            passes,
        )

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
            if result.error or (
                threshold is not None
                and (result.value is None or not passes(metric, result.value, float(threshold)))
            ):
                failures.append(_describe(metric, result, threshold))
        # a threshold for a metric this check does not compute would gate nothing
        for name in sorted(set(explicit) - set(results)):
            failures.append(
                f"  {name} has a threshold ({explicit[name]:g}) but is not among the metrics "
                "this check computes"
            )
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


def _describe(metric: Metric, result: MetricResult, threshold: float | None) -> str:
    """One failing metric: errored (and why), N/A (and why), or the value that missed."""
    sign = ">=" if metric.higher_is_better else "<="
    limit = "" if threshold is None else f" (needs {sign} {threshold:g})"
    method = f" [method: {result.method}]"
    if result.error:
        lines = [f"  {metric.name} errored: {result.error}{limit}{method}"]
    elif result.value is None:
        lines = [f"  {metric.name} = N/A: {result.reason or 'no value'}{limit}{method}"]
    else:
        lines = [f"  {metric.name} = {result.value:.4f}{limit} missed its threshold{method}"]
    if result.reason and (result.error or result.value is not None):  # N/A has it inline
        lines.append(f"    reason: {result.reason}")
    evidence = {k: v for k, v in result.details.items() if k != PASS_THRESHOLD}
    if evidence:
        text = repr(evidence)
        lines.append(f"    evidence: {text[:400]}{'...' if len(text) > 400 else ''}")
    return "\n".join(lines)


# ---- the results store and its spool ----------------------------------------------------
_SAMPLE_FIELDS = {"id", "query", "response", "expected", "tags", "duration"}  # what is stored


@dataclass(frozen=True)
class _Row:
    """One row of the run: a test, or one ``check`` of a test."""

    index: int
    test_name: str
    status: str
    duration: float
    error: str | None
    sample: Sample
    results: dict[str, MetricResult]
    quality: dict[str, bool] | None
    validation: dict[str, Any] | None
    timestamp: datetime

    def write(self, store: Store, run_id: str) -> None:
        store.record(
            run_id,
            self.index,
            self.sample,
            self.results,
            status=self.status,
            duration=self.duration,
            test_name=self.test_name,
            quality=self.quality,
            validation=self.validation,
            error=self.error,
            timestamp=self.timestamp,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "test",
            "index": self.index,
            "test_name": self.test_name,
            "status": self.status,
            "duration": self.duration,
            "error": self.error,
            "timestamp": self.timestamp.isoformat(),
            "sample": self.sample.model_dump(mode="json", include=_SAMPLE_FIELDS),
            "results": {name: r.to_dict() for name, r in self.results.items()},
            "quality": self.quality,
            "validation": self.validation,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> _Row:
        return cls(
            index=data["index"],
            test_name=data["test_name"],
            status=data["status"],
            duration=data["duration"],
            error=data["error"],
            sample=Sample.model_validate(data["sample"]),
            results={name: MetricResult(**r) for name, r in data["results"].items()},
            quality=data["quality"],
            validation=data["validation"],
            timestamp=datetime.fromisoformat(data["timestamp"]),
        )


def _open_store(url: str, timeout: float | None) -> Store:
    """Open (and migrate) the store; ``timeout``: seconds a SQLite write waits for a lock."""
    from sqlalchemy import event

    from assay.store.db import Store

    store = Store(url, migrate=False)
    if timeout is not None and store.dialect == "sqlite":
        pragma = f"PRAGMA busy_timeout={round(timeout * 1000)}"
        # before the store's own connect listener (its journal_mode pragma can wait on a
        # lock too) and after it (it sets its own 10 s busy timeout)
        for first in (True, False):
            event.listen(
                store.engine, "connect", lambda conn, _record: conn.execute(pragma), insert=first
            )

    store.migrate()
    return store


class _StoreSession:
    """Writes one run per pytest session, one row per test (per check), as each test
    finishes. A store that cannot be opened or written never stops the session: from the
    first failure on, the run and every row not yet written go to the spool file, and
    `warning` says what happened and where they are."""

    def __init__(
        self,
        url: str,
        name: str | None,
        config: AssayConfig,
        spool_dir: Path,
        timeout: float | None,
    ) -> None:
        from assay.store.db import default_url, normalise_url

        target = default_url() if url == "default" else url
        if "://" not in target:  # a SQLite path: absolute, for the warning and the spool
            target = str(Path(target).expanduser().absolute())
        register_secret(url_password(target))
        self.safe_url = redact_url(normalise_url(target))
        self.run_id = uuid.uuid4().hex[:12]
        self.name = name
        self.config = config
        self.spool = spool_dir / f"{self.run_id}.jsonl"
        self.index = 0
        self.rows = self.spooled = self.lost = 0
        self.problem: str | None = None
        self.spool_problem: str | None = None
        self.store: Store | None = None
        try:
            self.store = _open_store(target, timeout)
            self.store.start_run(self.run_id, name=name, source="pytest")
        except Exception as exc:  # whatever the store raised, the session goes on
            self._failed(exc)

    def record(self, item: pytest.Item, status: str, duration: float, error: str | None) -> None:
        for row in self._rows(item, status, duration, error):
            self.rows += 1
            if self.store is not None:
                try:
                    row.write(self.store, self.run_id)
                    continue
                except Exception as exc:
                    self._failed(exc)
            if self._append(row.to_json()):
                self.spooled += 1
            else:
                self.lost += 1

    def _rows(
        self, item: pytest.Item, status: str, duration: float, error: str | None
    ) -> list[_Row]:
        from assay.store.models import utcnow
        from assay.store.recorder import RunRecorder

        # the quality checks and validated pair of each check; metrics are not needed
        # (the test's outcome is the status), so a user's unregistered metric is fine;
        # the recorder only computes them here, it writes nothing
        recorder = RunRecorder(self.store, self.run_id, [], self.config)  # type: ignore[arg-type]
        checks = item.stash.get(_CHECKS, [])
        pairs = [(c.sample, c.results) for c in checks] or [(Sample(id=item.nodeid), {})]
        rows = []
        for sample, results in pairs:
            rows.append(
                _Row(
                    index=self.index,
                    test_name=item.nodeid,
                    status=status,
                    duration=duration,
                    error=error,
                    sample=sample,
                    results=results,
                    quality=recorder.quality_of(sample) if checks else None,
                    validation=recorder.validation_of(sample, results) if checks else None,
                    timestamp=utcnow(),
                )
            )
            self.index += 1
        return rows

    def finish(self) -> None:
        if self.store is None:
            return
        try:
            self.store.finish_run(self.run_id)
        except Exception as exc:
            self._failed(exc)
        else:
            self.store.close()

    def _failed(self, exc: BaseException) -> None:
        """The store failed: close it, spool the run from now on, remember why."""
        self.problem = _reason(exc, self.safe_url)
        if self.store is not None:
            self.store.close()
            self.store = None
        header = {
            "kind": "run",
            "run_id": self.run_id,
            "name": self.name,
            "source": "pytest",
            "store": self.safe_url,
            "problem": self.problem,
        }
        self._append(header)

    def _append(self, record: dict[str, Any]) -> bool:
        """One JSON line onto the spool, every string redacted; False when it failed."""
        if self.spool_problem is not None:
            return False
        line = dumps(redact(to_jsonable(record), known_secrets(), by_name=False))
        try:
            self.spool.parent.mkdir(parents=True, exist_ok=True)
            with self.spool.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
        except OSError as exc:
            self.spool_problem = _reason(exc, str(self.spool))
            return False
        return True

    @property
    def warning(self) -> str | None:
        """What the terminal summary says when the store failed; None when it did not."""
        if self.problem is None:
            return None
        lines = [f"the results store could not be written: {self.problem}"]
        missing = self.spooled + self.lost
        if self.spool_problem is None:
            lines.append(
                f"the run and the {missing} of {self.rows} test results the store did not "
                f"take are kept in {self.spool}"
            )
            lines.append(
                'load them into the store later with: python -c "from assay.pytest_plugin '
                f"import import_spool; import_spool('{self.spool}', '{self.safe_url}')\""
            )
        else:
            lines.append(
                f"{self.lost} of {self.rows} test results are lost: the spool could not be "
                f"written: {self.spool_problem}"
            )
        return "\n".join(lines)


def _reason(exc: BaseException, where: str) -> str:
    """``where: ErrorType: message`` of the driver's or the system's own error, on one line,
    with every known secret and URL password cut out."""
    from assay.store.db import StoreError

    cause = exc.__cause__ if isinstance(exc, StoreError) and exc.__cause__ else exc
    error = getattr(cause, "orig", None) or cause  # SQLAlchemy wraps the driver's error
    message = " ".join(str(error).split())
    return redact_text(f"{where}: {type(error).__name__}: {message}", known_secrets())


def import_spool(path: str | Path, url: str | None = None) -> str:
    """Load a spool file written by the plugin into a results store (``url``; None: the
    default store) and finish its run; returns the run id. Rows the store already holds
    (same run, same index) are skipped, so importing twice adds nothing."""
    from assay.store.db import Store

    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
    head = json.loads(lines[0])
    run_id = head["run_id"]
    store = Store(url)
    try:
        done = store.done_indices(run_id)
        store.start_run(run_id, name=head["name"], source=head["source"])
        for line in lines[1:]:
            row = _Row.from_json(json.loads(line))
            if row.index not in done:
                row.write(store, run_id)
        store.finish_run(run_id)
    finally:
        store.close()
    return run_id


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
    group.addoption(
        "--assay-spool",
        default=None,
        metavar="DIR",
        help="Where results the store cannot take are kept (default: .assay-spool in the rootdir).",
    )
    group.addoption(
        "--assay-store-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="How long a write waits for a locked SQLite store before its results are "
        "spooled (default: the store's 10 s, tried 3 times).",
    )
    parser.addini("assay_store", "Results store URL for the assay plugin (opt-in).", default="")
    add_target_options(group)


_SESSION = pytest.StashKey[_StoreSession]()
_resources: Resources | None = None


def _session_resources() -> Resources:
    global _resources
    if _resources is None:
        _resources = Resources(load_config())
    return _resources


def pytest_configure(config: pytest.Config) -> None:
    url = config.getoption("--assay-store") or config.getini("assay_store")
    if url:
        spool = config.getoption("--assay-spool")
        config.stash[_SESSION] = _StoreSession(
            url,
            config.getoption("--assay-run-name"),
            _session_resources().config,
            config.invocation_params.dir / spool if spool else config.rootpath / ".assay-spool",
            config.getoption("--assay-store-timeout"),
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    store = session.config.stash.get(_SESSION, None)
    if store is not None:
        store.finish()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    store = config.stash.get(_SESSION, None)
    warning = None if store is None else store.warning
    if warning is not None:
        terminalreporter.write_sep("=", "assay results store", yellow=True)
        first, *rest = warning.splitlines()
        terminalreporter.write_line(f"WARNING: {first}", yellow=True)
        for line in rest:
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _resources
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
    store = item.config.stash.get(_SESSION, None)
    if report.when != "teardown" or store is None:
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
    store.record(item, status, duration, error)
