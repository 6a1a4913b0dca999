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

One trace never stops the others: a trace that fails to assemble, to score or to be
stored is **quarantined**: stored as an error sample whose error gives the reason
(``quarantined: ...``), counted in ``GET /api/live`` and shown on the overview, and not
tried again until a new span of it comes. Monitor state changes go to the webhook from a
background queue (`assay.server.live_webhook`): scoring never waits on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from assay.core.config import AssayConfig
from assay.core.redaction import register_secret
from assay.core.sample import Sample
from assay.inputs.otlp.traces import trace_record
from assay.inputs.records import samples_from_records
from assay.metrics.registry import metric_names
from assay.server.live_webhook import WebhookQueue
from assay.store.db import Store, StoreError
from assay.store.live_monitors import LiveMonitors, StateChange, closed_hour, parse_monitors
from assay.store.live_traces import QUARANTINED, DueTrace, LiveTraces, live_run_id
from assay.store.models import utcnow
from assay.store.recorder import RunRecorder

if TYPE_CHECKING:
    from assay.engine.resources import Resources
    from assay.metrics.base import Metric

__all__ = ["LiveScoring", "sampled_in", "unscored_rules"]

log = logging.getLogger("assay.live")

#: traces a service may have waiting before the worker takes them (one round's chunk)
ROUND = 256
#: traces stored (with their marks) in one transaction
WRITE_BATCH = 16
#: seconds after which a trace whose root never came is scored from the spans it has
ORPHAN_SECONDS = 300.0
#: spans read into memory in one round (its first trace is read whatever its size)
ROUND_SPANS = 20_000
#: seconds a trace whose quarantine could not even be stored waits before another try
HOLD_SECONDS = 60.0
#: characters of an exception's message kept as a quarantine's reason
_REASON_CHARS = 500


def sampled_in(trace_id: str, rate: float) -> bool:
    """Whether a trace is among the ``rate`` share scored: its id's first 8 hex digits
    as a fraction of 2**32, below ``rate``."""
    if rate >= 1:
        return True
    try:
        return int(trace_id[:8], 16) / 2**32 < rate
    except ValueError:
        return False


def unscored_rules(rules: Sequence[Any], metrics: Sequence[str]) -> list[str]:
    """A warning for each monitor rule on a metric that is not among ``metrics`` (the
    live metrics): it can never have data."""
    scored = ", ".join(metrics) or "none"
    return [
        f"monitor {rule.text!r} reads {rule.metric!r}, which live scoring does not score "
        f"(the live metrics: {scored}): it will stay without data; add {rule.metric} to "
        "--live-metrics"
        for rule in rules
        if rule.metric is not None and rule.metric not in metrics
    ]


def _within_spans(due: list[DueTrace]) -> list[DueTrace]:
    """The first of ``due`` whose spans add up to at most `ROUND_SPANS` (at least one):
    memory holds a round's spans, and a trace may have up to 10,000."""
    taken, spans = [], 0
    for trace in due:
        spans += trace.spans
        if taken and spans > ROUND_SPANS:
            break
        taken.append(trace)
    return taken


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


class LiveScoring:
    """The worker that scores completed traces into ``live/<service>`` runs.

    ``metrics``: the metrics scored (none: traces are stored as samples only).
    `start` runs it in a daemon thread until `stop`; `run_once` is one round (tests).
    ``backlog`` is the number of traces waiting, counted by the receiver as each export
    is stored and by the worker after each round: the receiver answers 503 with
    ``Retry-After`` while it is at ``config.live_queue_limit``. As each hour closes it
    reads ``config.live_monitors`` on every live run (`assay.store.live_monitors`) and
    queues each state change for ``config.live_webhook`` (a secret: redacted wherever
    Assay writes text, shown as its host). ``warnings`` names the rules on metrics that
    are not scored. Raises ValueError for a monitor rule that does not read.
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
        self.backlog = self.traces.backlog()
        self.scored = 0  # traces this process scored with the live metrics
        self.sampled_out = 0  # traces it stored without scores (the sample rate)
        self.unscored = 0  # traces it stored without scores (no live metrics)
        self.quarantined = 0  # traces it quarantined
        self.last_error: str | None = None
        self._next_index: dict[str, int] = {}
        self._runs: set[str] = set()
        self._held: dict[str, float] = {}  # trace id -> when it may be tried again
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._round_lock = threading.Lock()
        known = set(metric_names())
        self.monitors = LiveMonitors(
            store, parse_monitors(config.live_monitors, known.__contains__)
        )
        #: said by ``assay serve`` at start, and shown in ``/api/live`` and the overview
        self.warnings = unscored_rules(self.monitors.monitors, [m.name for m in self.metrics])
        self.webhook = config.live_webhook or None
        register_secret(self.webhook)
        self.webhooks: WebhookQueue | None = None
        if self.webhook:
            self.webhooks = WebhookQueue(
                self.webhook, self.webhook_shown or "?", on_error=self._webhook_failed
            )
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
        if self.webhooks is not None:
            self.webhooks.close()

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
        how many were stored (scored, sampled out or quarantined)."""
        with self._round_lock:
            now = utcnow() + timedelta(seconds=now_offset)
            clock = time.monotonic()
            self._held = {t: until for t, until in self._held.items() if until > clock}
            due = self.traces.due(
                self.config.live_grace_seconds,
                self.orphan_seconds,
                ROUND + len(self._held),
                now=now,
            )
            due = _within_spans([d for d in due if d.trace_id not in self._held][:ROUND])
            if due:
                spans = self.traces.spans_of([d.trace_id for d in due])
                by_service: dict[str, list[DueTrace]] = defaultdict(list)
                for trace in due:
                    by_service[trace.service].append(trace)
                for service, traces in by_service.items():
                    try:
                        self._score(service, traces, spans)
                    except (StoreError, OSError):
                        raise  # the store is busy or gone: the round waits and tries again
                    except Exception as exc:  # its run cannot be started: hold, go on
                        self._hold(traces, f"the run of service {service[:80]!r}", exc)
            self.backlog = self.traces.backlog()
            return len(due)

    def read_monitors(self, now_offset: float = 0.0) -> list[StateChange]:
        """Once an hour has closed, read the monitors on it and queue the changes for the
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
            if self.webhooks is not None:
                self.webhooks.send(change.to_dict())
        return changes

    def _hold(self, traces: list[DueTrace], what: str, exc: Exception) -> None:
        """Set ``traces`` aside for `HOLD_SECONDS` (they stay pending), saying why."""
        until = time.monotonic() + HOLD_SECONDS
        self._held.update((t.trace_id, until) for t in traces)
        self.last_error = f"{what} cannot be stored: {_reason(exc)}"
        log.warning("%s; %d traces wait %d s", self.last_error, len(traces), HOLD_SECONDS)

    def _webhook_failed(self, message: str) -> None:
        self.last_error = message

    @property
    def webhook_shown(self) -> str | None:
        """The webhook as it may be shown: its scheme and host (the path of a hook URL
        is often its secret)."""
        if not self.webhook:
            return None
        parts = urlsplit(self.webhook)
        return f"{parts.scheme}://{parts.hostname or '?'}/…"

    def status(self) -> dict[str, Any]:
        """What this worker did and how it is set, for ``GET /api/live``."""
        return {
            "scoring": True,
            "scored": self.scored,
            "sampled_out": self.sampled_out,
            "unscored": self.unscored,
            "metrics": [m.name for m in self.metrics],
            "sample_rate": self.config.live_sample_rate,
            "grace_seconds": self.config.live_grace_seconds,
            "queue_limit": self.config.live_queue_limit,
            "rules": [m.text for m in self.monitors.monitors],
            "warnings": self.warnings,
            "webhook": self.webhook_shown,
            "webhook_queue": self.webhooks.counts if self.webhooks is not None else None,
            "last_error": self.last_error,
        }

    # ---- one service's traces ------------------------------------------------------------
    def _score(self, service: str, traces: list[DueTrace], spans: dict) -> None:
        """Score a service's due traces and store them with their marks, `WRITE_BATCH`
        traces a transaction (a crash before one commits leaves its traces due). A trace
        that fails to assemble, score or store is quarantined; the others go on."""
        run_id = self._run(service)
        indices = {t.trace_id: self._index(run_id, t) for t in traces}
        samples: dict[str, Sample] = {}
        failed: dict[str, str] = {}
        for trace in traces:
            try:
                samples[trace.trace_id] = self._sample(trace, spans[trace.trace_id])
            except Exception as exc:  # this trace's error, never the round's
                failed[trace.trace_id] = f"the trace does not assemble: {_reason(exc)}"
        rate = self.config.live_sample_rate
        chosen = [
            t
            for t in traces
            if t.trace_id in samples and self.metrics and sampled_in(t.trace_id, rate)
        ]
        results = self._evaluate(chosen, samples, failed)
        scoring = RunRecorder(self.store, run_id, self.metrics, self.config, replace=True)
        unscored = RunRecorder(self.store, run_id, [], self.config, replace=True)
        rows: dict[str, dict] = {}
        for trace in traces:
            key = trace.trace_id
            if key not in failed:
                recorder = scoring if key in results else unscored
                try:
                    rows[key] = recorder.row(indices[key], samples[key], results.get(key, {}))
                    rows[key]["replace"] = trace.sample_index is not None
                except Exception as exc:  # its checks fail on this sample: its error
                    failed[key] = f"the trace cannot be stored: {_reason(exc)}"
            if key in failed:
                rows[key] = self._quarantine_row(
                    run_id, trace, indices[key], samples.get(key), failed[key]
                )
        # short transactions: the receiver's writes wait for none of them long
        for start in range(0, len(traces), WRITE_BATCH):
            batch = traces[start : start + WRITE_BATCH]
            try:
                self._write(run_id, batch, rows, indices, failed)
            except (StoreError, OSError):
                raise  # the store is busy or gone: the round waits and tries again
            except Exception:  # a row that does not store: find it, store the others
                for trace in batch:
                    self._write_alone(run_id, trace, rows, indices, failed)
            for trace in batch:
                self._count(trace, failed, results)

    def _count(self, trace: DueTrace, failed: dict[str, str], results: dict) -> None:
        key = trace.trace_id
        if key in self._held:
            return
        if key in failed:
            self.quarantined += 1
            log.warning("trace %s quarantined: %s", key, failed[key])
        elif key in results:
            self.scored += 1
        elif self.metrics:
            self.sampled_out += 1
        else:
            self.unscored += 1

    def _evaluate(
        self, traces: list[DueTrace], samples: dict[str, Sample], failed: dict[str, str]
    ) -> dict[str, dict]:
        """The metric results of each trace's sample; a sample whose scoring raises is
        scored alone, and quarantined (in ``failed``) when it raises alone too."""
        from assay.evaluation.runner import evaluate

        found: dict[str, dict] = {}

        def score(batch: list[DueTrace]) -> None:
            def keep(i: int, sample: Sample, results: dict) -> None:
                found[batch[i].trace_id] = results

            with self.evaluate_lock:
                evaluate(
                    [samples[t.trace_id] for t in batch],
                    metrics=self.metrics,
                    resources=self.resources,
                    on_sample=keep,
                )

        if not traces:
            return found
        try:
            score(traces)
            return found
        except (StoreError, OSError):
            raise
        except Exception:  # one sample's fault, or all of them: score them one by one
            pass
        for trace in traces:
            if trace.trace_id in found:
                continue
            try:
                score([trace])
            except (StoreError, OSError):
                raise
            except Exception as exc:
                failed[trace.trace_id] = f"scoring failed: {_reason(exc)}"
        return found

    def _write(
        self,
        run_id: str,
        batch: list[DueTrace],
        rows: dict[str, dict],
        indices: dict[str, int],
        failed: dict[str, str],
    ) -> None:
        done = [(t, run_id, indices[t.trace_id]) for t in batch if t.trace_id not in failed]
        held = [(t, run_id, indices[t.trace_id]) for t in batch if t.trace_id in failed]
        marking, quarantining = self.traces.marking(done), self.traces.quarantining(held)

        def then(session: Any) -> None:
            marking(session)
            quarantining(session)

        self.store.record_many([rows[t.trace_id] for t in batch], then=then)

    def _write_alone(
        self,
        run_id: str,
        trace: DueTrace,
        rows: dict[str, dict],
        indices: dict[str, int],
        failed: dict[str, str],
    ) -> None:
        """Store one trace of a batch that did not store; when its row does not store
        either, its quarantine; when that fails too, hold it for `HOLD_SECONDS`."""
        key = trace.trace_id
        try:
            self._write(run_id, [trace], rows, indices, failed)
            return
        except (StoreError, OSError):
            raise
        except Exception as exc:
            failed[key] = f"the trace cannot be stored: {_reason(exc)}"
        rows[key] = self._quarantine_row(run_id, trace, indices[key], None, failed[key])
        try:
            self._write(run_id, [trace], rows, indices, failed)
        except (StoreError, OSError):
            raise
        except Exception as exc:
            self._hold([trace], f"trace {key}, nor its quarantine,", exc)

    def _quarantine_row(
        self, run_id: str, trace: DueTrace, index: int, sample: Sample | None, reason: str
    ) -> dict[str, Any]:
        """The stored form of a quarantined trace: its sample when it assembled (else
        its id and service), no scores, status ``error``, the error `QUARANTINED` and
        ``reason``."""
        if sample is None:
            sample = Sample(id=trace.trace_id, tags={"service": trace.service[:256]})
        return {
            "run_id": run_id,
            "sample_index": index,
            "sample": sample,
            "results": {},
            "status": "error",
            "error": QUARANTINED + reason,
            "replace": trace.sample_index is not None,
        }

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
                name=f"live/{service}"[:256],
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
        """The trace as a sample. Raises ValueError (with the reason) for a trace with no
        readable span or one that does not make a valid sample; whatever else
        `trace_record` raises on a hostile trace passes through (the caller quarantines)."""
        if not spans:
            raise ValueError("the trace has no readable span")
        samples, errors = samples_from_records(
            [(None, trace_record(spans))],
            f"trace {trace.trace_id}",
            max_json_depth=self.config.max_json_depth,
        )
        if not samples:
            raise ValueError(str(errors[0]) if errors else "the trace makes no sample")
        return samples[0]
