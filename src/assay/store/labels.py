"""The store's labels: people's verdicts on samples, kept apart from any run.

A label is keyed by its sample's `assay.core.labels.sample_key` (the hash of the sample's
id and texts), and every stored result row carries the same key
(``test_results.sample_key``, revision 0010), so the labels given on one run of a data
set serve every later run of it. `LabelStore` is the labels' half of
`assay.store.db.Store` (mixed into it): add, list and delete labels, and rebuild a run's
samples with their labels attached (`LabelStore.run_samples`).

A sample stored with labels (``Sample.label``, ``Sample.labels``: a labelled data file)
has them written with it, annotator ``file`` (`write_file_labels`), once: a second run of
the same data adds no row for a (sample key, metric, annotator, value) already there, and
a unique index (``uq_labels_file_verdict``, revision 0010) holds to it when two runs of
the same data are stored at the same moment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from assay.core.label_values import number_text
from assay.core.labels import LabelError, sample_key
from assay.core.sample import Sample
from assay.store.models import Label, TestResult, utcnow
from assay.store.transcript import OMITTED_KEY

__all__ = [
    "ALL_METRICS",
    "FILE_ANNOTATOR",
    "TEXT_LIMITS",
    "FileLabels",
    "LabelStore",
    "StoredLabel",
    "combined_labels",
    "write_file_labels",
]

#: the annotator of the labels a data file carried
FILE_ANNOTATOR = "file"
#: the most characters each text of a label may hold (its column's size; a sample's id, a
#: note and the raw value are TEXT, bounded so one request cannot fill the database)
TEXT_LIMITS = {
    "annotator": 256,
    "metric": 128,
    "sample_id": 10_000,
    "run_id": 64,
    "raw": 1_000,
    "scale": 32,
    "note": 10_000,
}
#: `LabelStore.labels_for_keys`'s default: the labels of every metric (and the one verdict)
ALL_METRICS: Any = object()
#: keys looked up per query (well under SQLite's and PostgreSQL's bound-parameter limits)
_KEYS_PER_QUERY = 500
T = TypeVar("T")


@dataclass(frozen=True)
class StoredLabel:
    """One stored label (`assay.store.models.Label`): ``metric`` None is the sample's
    one verdict; ``value`` in [0, 1] in the metric's direction; ``raw`` as given, on
    ``scale`` (None: already in [0, 1]); ``created_at`` in UTC (naive, as the store
    keeps times)."""

    id: int
    sample_key: str
    sample_id: str | None
    run_id: str | None
    metric: str | None
    value: float
    raw: str
    scale: str | None
    annotator: str
    note: str | None
    created_at: datetime

    @classmethod
    def of(cls, row: Label) -> StoredLabel:
        return cls(
            id=row.id,
            sample_key=row.sample_key,
            sample_id=row.sample_id,
            run_id=row.run_id,
            metric=row.metric,
            value=row.value,
            raw=row.raw,
            scale=row.scale,
            annotator=row.annotator,
            note=row.note,
            created_at=row.created_at,
        )


def _checked(sample_key: str, value: float, texts: dict[str, str | None]) -> None:
    """`LabelError` for a label the store must not keep, naming the field and value:
    a key that is not one, a value outside [0, 1], no annotator, an empty metric name,
    or a text longer than its column holds (`TEXT_LIMITS`)."""
    if not (
        isinstance(sample_key, str)
        and len(sample_key) == 64
        and all(c in "0123456789abcdef" for c in sample_key)
    ):
        raise LabelError(
            f"{sample_key!r:.80} is not a sample key (64 lower-case hex digits: "
            "assay.core.labels.sample_key)",
            field="sample_key",
            value=sample_key,
        )
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0.0 <= value <= 1.0
    ):
        raise LabelError(
            f"{value!r:.40} is not a label value in [0, 1]", field="value", value=value
        )
    annotator = texts["annotator"]
    if not isinstance(annotator, str) or not annotator.strip():
        raise LabelError("an annotator is required (who gave the label)", field="annotator")
    metric = texts["metric"]
    if metric is not None and not metric.strip():
        raise LabelError(f"{metric!r} is not a metric name", field="metric", value=metric)
    for field, text in texts.items():
        if text is not None and not isinstance(text, str):
            raise LabelError(f"{text!r:.40} is not text", field=field, value=text)
        if text is not None and len(text) > TEXT_LIMITS[field]:
            raise LabelError(
                f"has {len(text):,} characters; at most {TEXT_LIMITS[field]:,}", field=field
            )


@dataclass(frozen=True)
class FileLabels:
    """The labels one stored sample carried, to write with its row (`write_file_labels`)."""

    key: str
    sample: Sample
    run_id: str
    when: datetime


def write_file_labels(session: Session, entries: Iterable[FileLabels]) -> int:
    """Write the labels the samples carry (``label``: metric NULL; ``labels``: one row a
    metric), annotator `FILE_ANNOTATOR`, raw the normalised value's text (the sample
    holds no other), skipping each (key, metric, file, value) stored already or met
    earlier in ``entries``. One query finds those stored (per 500 keys) and one insert
    writes the rest, in the caller's transaction (`Store.record`, `Store.record_many`).
    Returns the rows written."""
    wanted: list[tuple[FileLabels, str | None, float]] = []
    for entry in entries:
        if entry.sample.label is not None:
            wanted.append((entry, None, entry.sample.label))
        wanted.extend((entry, metric, value) for metric, value in entry.sample.labels.items())
    if not wanted:
        return 0
    present: set[tuple[str, str | None, float]] = set()
    for chunk in _chunks(sorted({entry.key for entry, _, _ in wanted})):
        stored = session.execute(
            select(Label.sample_key, Label.metric, Label.value).where(
                Label.sample_key.in_(chunk), Label.annotator == FILE_ANNOTATOR
            )
        )
        present.update((key, metric, value) for key, metric, value in stored)
    rows = []
    for entry, metric, value in wanted:
        if (entry.key, metric, value) in present:
            continue
        present.add((entry.key, metric, value))
        rows.append(
            {
                "sample_key": entry.key,
                "sample_id": entry.sample.id,
                "run_id": entry.run_id,
                "metric": metric,
                "value": value,
                "raw": number_text(value),
                "scale": None,
                "annotator": FILE_ANNOTATOR,
                "note": None,
                "created_at": entry.when,
            }
        )
    if rows:  # a run of the same data stored at this moment may have written some
        session.execute(_insert_new(session), rows)
    return len(rows)


def _insert_new(session: Session) -> Any:
    """An insert into ``labels`` that skips a row the unique index ``uq_labels_file_verdict``
    already holds (``ON CONFLICT DO NOTHING``, SQLite and PostgreSQL alike)."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(Label.__table__).on_conflict_do_nothing()
    return sqlite.insert(Label.__table__).on_conflict_do_nothing()


def combined_labels(labels: Iterable[StoredLabel]) -> dict[str | None, float]:
    """Metric (None: the one verdict) -> the mean over annotators of each annotator's
    latest value (by ``created_at``, then id): an annotator who changed their mind counts
    once, with their last verdict; two annotators who disagree (1 and 0) give 0.5."""
    latest: dict[tuple[str | None, str], StoredLabel] = {}
    for label in sorted(labels, key=lambda lab: (lab.created_at, lab.id)):
        latest[(label.metric, label.annotator)] = label
    sums: dict[str | None, list[float]] = {}
    for (metric, _annotator), label in latest.items():
        sums.setdefault(metric, []).append(label.value)
    return {metric: sum(values) / len(values) for metric, values in sums.items()}


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(keys), _KEYS_PER_QUERY):
        yield keys[start : start + _KEYS_PER_QUERY]


def _items(stored: list[Any] | None) -> list[Any] | None:
    """Stored turns or steps without the store's ``{"omitted": n}`` marker item."""
    if stored is None:
        return None
    return [item for item in stored if not (isinstance(item, dict) and OMITTED_KEY in item)]


def _rebuilt(row: TestResult) -> Sample:
    """The sample of a stored result row, from what the row keeps."""
    return Sample.model_validate(
        {
            "id": row.sample_id,
            "query": row.query,
            "response": row.response,
            "expected": row.expected,
            "contexts": row.contexts,
            "turns": _items(row.turns),
            "trace": _items(row.trace),
            "expected_tool_calls": _items(row.expected_tool_calls),
            "duration": row.duration,
            "first_token_time": row.first_token_time,
            "tags": dict(row.tags or {}),
        }
    )


class LabelStore:
    """The labels' half of `assay.store.db.Store`: it writes through the store's
    ``_write`` (one transaction, retried while SQLite is busy) and reads through its
    ``session``."""

    if TYPE_CHECKING:
        safe_url: str

        def session(self) -> Session: ...

        def _write(self, action: Callable[[Session], T], attempts: int = 3) -> T: ...

    def add_label(
        self,
        *,
        sample_key: str,
        value: float,
        raw: str,
        annotator: str,
        metric: str | None = None,
        sample_id: str | None = None,
        run_id: str | None = None,
        scale: str | None = None,
        note: str | None = None,
    ) -> StoredLabel:
        """Store one verdict and return it. ``value`` must already be in [0, 1] (read
        it with `assay.core.labels.label_value`); ``raw`` is what was given (a key
        pressed, ``"4"``) on ``scale`` (``"1-5"``). `LabelError` (naming the field) for a
        malformed key, a value outside [0, 1], no annotator, or a text longer than
        `TEXT_LIMITS` allows."""
        texts = {
            "annotator": annotator,
            "metric": metric,
            "sample_id": sample_id,
            "run_id": run_id,
            "raw": raw,
            "scale": scale,
            "note": note,
        }
        _checked(sample_key, value, texts)

        def action(session: Session) -> StoredLabel:
            row = Label(
                sample_key=sample_key,
                sample_id=sample_id,
                run_id=run_id,
                metric=metric.strip() if metric is not None else None,
                value=float(value),
                raw=raw,
                scale=scale,
                annotator=annotator.strip(),
                note=note,
                created_at=utcnow(),
            )
            session.add(row)
            session.flush()
            return StoredLabel.of(row)

        return self._write(action)

    def labels_for_keys(
        self, keys: Iterable[str], metric: str | None = ALL_METRICS
    ) -> list[StoredLabel]:
        """The labels of the samples with these keys, oldest first. ``metric``: by
        default every label; None: only the samples' one verdicts (metric NULL); a name:
        only that metric's labels (the one verdict is not added: `run_samples` and
        `assay.core.labels.sample_label` fall back to it)."""
        wanted = sorted(set(keys))
        found: list[StoredLabel] = []
        with self.session() as session:
            for chunk in _chunks(wanted):
                stmt = select(Label).where(Label.sample_key.in_(chunk))
                if metric is None:
                    stmt = stmt.where(Label.metric.is_(None))
                elif metric is not ALL_METRICS:
                    stmt = stmt.where(Label.metric == metric)
                found.extend(StoredLabel.of(row) for row in session.scalars(stmt))
        return sorted(found, key=lambda label: (label.created_at, label.id))

    def labels_for_run(self, run_id: str) -> list[StoredLabel]:
        """The labels of the run's samples (matched by sample key), given on any run or
        none, oldest first. Rows stored before revision 0010 have no key: see
        `run_sample_keys` for theirs."""
        return self.labels_for_keys(self.run_sample_keys(run_id).values())

    def delete_label(self, label_id: int) -> bool:
        """Delete one label (an annotator undoes a verdict); False when there was none."""

        def action(session: Session) -> bool:
            gone = session.execute(delete(Label).where(Label.id == label_id))
            return bool(gone.rowcount)

        return self._write(action)

    def run_sample_keys(self, run_id: str) -> dict[int, str]:
        """Sample index -> sample key of a run's stored rows: the key stored with the row,
        or for a row written before revision 0010 the key of the sample rebuilt from it
        (equal to the original's unless the store cut a long text or list)."""
        of_run = TestResult.run_id == run_id
        with self.session() as session:
            stored = session.execute(
                select(TestResult.sample_index, TestResult.sample_key)
                .where(of_run)
                .order_by(TestResult.sample_index)
            )
            keys: dict[int, str | None] = {index: key for index, key in stored}
            if None in keys.values():  # rows from before 0010: read whole, only those
                old = select(TestResult).where(of_run, TestResult.sample_key.is_(None))
                for row in session.scalars(old):
                    keys[row.sample_index] = sample_key(_rebuilt(row))
        return {index: key for index, key in keys.items() if key is not None}

    def run_samples(self, run_id: str) -> list[Sample]:
        """The run's samples in sample-index order, rebuilt from the stored rows (id,
        query, response, expected, contexts, turns, trace, reference tool calls, timings
        and tags, as the store keeps them: a text past its limit is cut), with their
        labels attached from the labels table, given on any run of the same data.

        Per metric, ``labels[metric]`` (and ``label`` for the one verdict) is the mean
        over annotators of each annotator's latest value (`combined_labels`): with one
        annotator it is their verdict; two who disagree on a binary label give 0.5.
        Raises `LabelError` naming the run and index of a row that no longer makes a
        sample."""
        with self.session() as session:
            rows = list(
                session.scalars(
                    select(TestResult)
                    .where(TestResult.run_id == run_id)
                    .order_by(TestResult.sample_index)
                )
            )
        samples: list[Sample] = []
        keys: list[str] = []
        for row in rows:
            try:
                sample = _rebuilt(row)
            except ValidationError as exc:
                raise LabelError(
                    f"the stored row does not make a sample: {exc.errors()[0]['msg']}",
                    field=f"run {run_id} sample {row.sample_index}",
                ) from None
            samples.append(sample)
            keys.append(row.sample_key or sample_key(sample))
        by_key: dict[str, list[StoredLabel]] = {}
        for label in self.labels_for_keys(keys):
            by_key.setdefault(label.sample_key, []).append(label)
        for sample, key in zip(samples, keys, strict=True):
            combined = combined_labels(by_key.get(key, []))
            sample.label = combined.pop(None, None)
            sample.labels = {metric: value for metric, value in combined.items() if metric}
        return samples
