"""Scoring received traces as they complete: the background worker of ``assay serve``.

`LiveScoring` runs in a thread of the server. Each round it takes the traces that are
due (`assay.store.live_traces.LiveTraces.due`: root seen and quiet for the grace
period), turns each into one sample with the OTLP file reader's mapping
(`assay.inputs.otlp.traces.trace_record`: OpenInference and GenAI conventions), scores
the samples of each ``service.name`` through the same engine as ``assay evaluate``
(`assay.evaluation.runner.evaluate`, the server's shared models and judge budget) and
stores them in the run ``live/<service.name>``, the sample id being the trace id. A
trace whose spans came after it was scored is scored again into the same sample. A
restarted server finds the traces stored but not scored and scores them: nothing
acknowledged is lost. ``live_sample_rate`` scores a share of the traces (chosen by the
trace id, so the same ones after a restart); the others are stored without scores.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from assay.core.config import AssayConfig
from assay.core.redaction import known_secrets, redact_text, register_secret
from assay.core.sample import Sample
from assay.inputs.otlp.traces import trace_record
from assay.inputs.records import samples_from_records
from assay.metrics.registry import metric_names
from assay.store.db import Store, StoreError
from assay.store.live_monitors import LiveMonitors, StateChange, closed_hour, parse_monitors
from assay.store.live_traces import DueTrace, LiveTraces, live_run_id
from assay.store.models import utcnow
from assay.store.recorder import RunRecorder

if TYPE_CHECKING:
    from assay.engine.resources import Resources
    from assay.metrics.base import Metric

__all__ = ["LiveScoring", "sampled_in"]

log = logging.getLogger("assay.live")

#: traces a service may have waiting before the worker takes them (one round's chunk)
ROUND = 256
#: traces stored (with their marks) in one transaction
WRITE_BATCH = 16
#: seconds after which a trace whose root never came is scored from the spans it has
ORPHAN_SECONDS = 300.0


def sampled_in(trace_id: str, rate: float) -> bool:
    """Whether a trace is among the ``rate`` share scored: its id's first 8 hex digits
    as a fraction of 2**32, below ``rate``."""
    if rate >= 1:
        return True
    try:
        return int(trace_id[:8], 16) / 2**32 < rate
    except ValueError:
        return False


class LiveScoring:
    """The worker that scores completed traces into ``live/<service>`` runs.

    ``metrics``: the metrics scored (none: traces are stored as samples only).
    `start` runs it in a daemon thread until `stop`; `run_once` is one round (tests).
    ``backlog`` is the number of traces waiting, read each round: the receiver answers
    503 with ``Retry-After`` while it is at ``config.live_queue_limit``. As each hour
    closes it reads ``config.live_monitors`` on every live run
    (`assay.store.live_monitors`) and POSTs each state change to ``config.live_webhook``
    (a secret: redacted wherever Assay writes text, shown as its host).
    Raises ValueError for a monitor rule that does not read.
    """

    def __init__(
        self,
        store: Store,
        config: AssayConfig,
        metrics: Sequence[Metric],
        resources: Resources,
        *,
        poll_seconds: float = 0.2,
        orphan_seconds: float = ORPHAN_SECONDS,
    ) -> None:
        self.traces = LiveTraces(store)
        self.store = store
        self.config = config
        self.metrics = list(metrics)
        self.resources = resources
        self.poll_seconds = poll_seconds
        self.orphan_seconds = orphan_seconds
        self.backlog = 0
        self.scored = 0  # traces scored by this process
        self.last_error: str | None = None
        self._next_index: dict[str, int] = {}
        self._runs: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._round_lock = threading.Lock()
        known = set(metric_names())
        self.monitors = LiveMonitors(
            store, parse_monitors(config.live_monitors, known.__contains__)
        )
        self.webhook = config.live_webhook or None
        register_secret(self.webhook)
        self._hour_read: object = None
        #: held while scoring: the server's ``/api/evaluate`` takes the same lock, so the
        #: shared models and judge client serve one evaluation at a time
        self.evaluate_lock = threading.Lock()

    @property
    def queue_limit(self) -> int:
        return self.config.live_queue_limit

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="assay-live", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                done = self.run_once()
                self.read_monitors()
            except (StoreError, OSError) as exc:  # the store is busy or gone: wait, retry
                self.last_error = str(exc)
                log.warning("live scoring waits: %s", exc)
                done = 0
            except Exception as exc:  # a bug must not stop the worker: say it, go on
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("live scoring round failed")
                done = 0
            if not done:
                self._stop.wait(self.poll_seconds)

    def run_once(self, now_offset: float = 0.0) -> int:
        """Score the traces due now (``now_offset`` seconds later, for tests); returns
        how many were scored."""
        with self._round_lock:
            now = utcnow() + timedelta(seconds=now_offset)
            due = self.traces.due(
                self.config.live_grace_seconds, self.orphan_seconds, ROUND, now=now
            )
            if due:
                spans = self.traces.spans_of([d.trace_id for d in due])
                by_service: dict[str, list[DueTrace]] = defaultdict(list)
                for trace in due:
                    by_service[trace.service].append(trace)
                for service, traces in by_service.items():
                    self._score(service, traces, spans)
                self.scored += len(due)
            self.backlog = self.traces.backlog()
            return len(due)

    def read_monitors(self, now_offset: float = 0.0) -> list[StateChange]:
        """Once an hour has closed, read the monitors on it and send the changes to the
        webhook; returns the changes (none until the next hour closes)."""
        hour = closed_hour(utcnow() + timedelta(seconds=now_offset))
        if not self.monitors.monitors or hour == self._hour_read:
            return []
        changes = self.monitors.evaluate(hour)
        self._hour_read = hour
        for change in changes:
            log.warning(
                "monitor %s on %s: %s (value %s, hour %s)",
                change.monitor,
                change.service,
                change.state,
                change.value,
                change.hour.isoformat(),
            )
            if self.webhook:
                self._notify(change)
        return changes

    def _notify(self, change: StateChange) -> None:
        import httpx

        try:
            answer = httpx.post(self.webhook or "", json=change.to_dict(), timeout=5.0)
            answer.raise_for_status()
        except httpx.HTTPError as exc:
            why = redact_text(str(exc), known_secrets())
            self.last_error = f"the monitor webhook ({self.webhook_shown}) failed: {why}"
            log.warning("%s", self.last_error)

    @property
    def webhook_shown(self) -> str | None:
        """The webhook as it may be shown: its scheme and host (the path of a hook URL
        is often its secret)."""
        if not self.webhook:
            return None
        parts = urlsplit(self.webhook)
        return f"{parts.scheme}://{parts.hostname or '?'}/…"

    def _score(self, service: str, traces: list[DueTrace], spans: dict) -> None:
        """Score a service's due traces and store them with their marks, `WRITE_BATCH`
        traces a transaction (a crash before one commits leaves its traces due)."""
        from assay.evaluation.runner import evaluate

        run_id = self._run(service)
        samples = {t.trace_id: self._sample(t, spans[t.trace_id]) for t in traces}
        indices = {t.trace_id: self._index(run_id, t) for t in traces}
        rate = self.config.live_sample_rate
        scored = [t for t in traces if self.metrics and sampled_in(t.trace_id, rate)]
        kept = [t for t in traces if t not in scored]
        rows: dict[str, dict] = {}
        if scored:
            recorder = RunRecorder(
                self.store,
                run_id,
                self.metrics,
                self.config,
                index_map=[indices[t.trace_id] for t in scored],
                replace=True,
            )

            def keep(i: int, sample: Sample, results: dict) -> None:
                rows[scored[i].trace_id] = recorder.row(i, sample, results)

            with self.evaluate_lock:
                evaluate(
                    [samples[t.trace_id] for t in scored],
                    metrics=self.metrics,
                    resources=self.resources,
                    on_sample=keep,
                )
        unscored = RunRecorder(self.store, run_id, [], self.config, replace=True)
        for trace in kept:
            rows[trace.trace_id] = unscored.row(
                indices[trace.trace_id], samples[trace.trace_id], {}
            )
        for trace in traces:  # only a trace scored before has a row to replace
            rows[trace.trace_id]["replace"] = trace.sample_index is not None
        # short transactions: the receiver's writes wait for none of them long
        for start in range(0, len(traces), WRITE_BATCH):
            batch = traces[start : start + WRITE_BATCH]
            self.store.record_many(
                [rows[t.trace_id] for t in batch],
                then=self.traces.marking([(t, run_id, indices[t.trace_id]) for t in batch]),
            )

    def warm_up(self) -> None:
        """Load the live metrics' models (and reach the judge) before traces come: score
        one made-up sample, stored nowhere."""
        if not self.metrics:
            return
        from assay.evaluation.runner import evaluate

        text = "Assay warms up its live metrics."
        sample = Sample(id="warm-up", query=text, response=text, contexts=[text])
        with self.evaluate_lock:
            evaluate([sample], metrics=self.metrics, resources=self.resources)

    def _run(self, service: str) -> str:
        run_id = live_run_id(service)
        if run_id not in self._runs:
            self.store.start_run(
                run_id,
                name=f"live/{service}",
                source="live",
                metrics=[m.name for m in self.metrics],
                tags={"service": service},
            )
            self._runs.add(run_id)
        return run_id

    def _index(self, run_id: str, trace: DueTrace) -> int:
        if trace.sample_index is not None:
            return trace.sample_index
        if run_id not in self._next_index:
            self._next_index[run_id] = self.traces.next_sample_index(run_id)
        index = self._next_index[run_id]
        self._next_index[run_id] = index + 1
        return index

    def _sample(self, trace: DueTrace, spans: list) -> Sample:
        """The trace as a sample; one that does not make a valid sample is kept as its id
        with the reason in ``metadata``."""
        samples, errors = samples_from_records(
            [(None, trace_record(spans))] if spans else [],
            f"trace {trace.trace_id}",
            max_json_depth=self.config.max_json_depth,
        )
        if samples:
            return samples[0]
        why = str(errors[0]) if errors else "the trace has no readable span"
        return Sample(id=trace.trace_id, tags={"service": trace.service}, metadata={"otel": why})
