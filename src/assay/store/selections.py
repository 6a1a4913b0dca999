"""What one side of a comparison reads from the store: a `Selection` (a run and/or a
sample tag value), its metric values keyed for pairing, and the signatures of its
results. `assay.store.compare` computes the statistics from them."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from assay.store.models import ScoringDetail, TestResult

__all__ = ["Selection", "selection_signatures", "selection_values"]


@dataclass(frozen=True)
class Selection:
    """Which stored results one side of a comparison takes: a run and/or a tag value."""

    run_id: str | None = None
    tag: str | None = None
    value: str | None = None

    @classmethod
    def parse(cls, text: str) -> Selection:
        """``RUN_ID``, ``key=value`` or ``RUN_ID:key=value``."""
        run, _, tag = text.partition(":") if ":" in text else ("", "", text)
        if "=" in tag:
            key, _, value = tag.partition("=")
            return cls(run_id=run or None, tag=key, value=value)
        return cls(run_id=text)

    def label(self) -> str:
        parts = [self.run_id] if self.run_id else []
        if self.tag:
            parts.append(f"{self.tag}={self.value}")
        return ":".join(parts) or "all"


def selection_values(session: Session, selection: Selection) -> dict[str, dict[str, float | None]]:
    """metric -> {pairing key -> value} for one selection (None: N/A or errored, so that
    a comparison can count the samples left out of its pairs).

    The pairing key is the sample id (else the test name); a selection spanning several
    runs (a tag without a run) keys by (run, sample) so no run's value overwrites
    another's, and such keys pair only with the same run and sample on the other side.
    A key seen again in the same run (several checks in one pytest test, which share its
    name) gets its occurrence number (``name#2``), in sample order, so no value is lost
    and the n-th check of a test pairs with the n-th check of the same test.
    """
    columns = [
        ScoringDetail.metric_name,
        ScoringDetail.metric_value,
        TestResult.sample_id,
        TestResult.test_name,
        ScoringDetail.run_id,
    ]
    if selection.tag:  # JSON decoded per row: read only when a tag selects
        columns.append(TestResult.tags)
    stmt = select(*columns).join(TestResult, TestResult.id == ScoringDetail.test_result_id)
    if selection.run_id:
        stmt = stmt.where(ScoringDetail.run_id == selection.run_id)
    stmt = stmt.order_by(ScoringDetail.run_id, TestResult.sample_index, ScoringDetail.id)
    out: dict[str, dict[str, float | None]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    # Core rows (no ORM entity loading): a run's 10,000s of rows come back as tuples
    for metric, value, sample_id, test_name, run_id, *tags in (
        session.connection().execute(stmt).all()
    ):
        if tags and (tags[0] or {}).get(selection.tag) != selection.value:
            continue
        key = sample_id or test_name
        occurrence = seen[(run_id, metric, key)] = seen.get((run_id, metric, key), 0) + 1
        if occurrence > 1:
            key = f"{key}#{occurrence}"
        if not selection.run_id:
            key = f"{run_id}/{key}"
        out.setdefault(metric, {})[key] = None if value is None else float(value)
    return out


def selection_signatures(session: Session, selection: Selection) -> dict[str, set[str]]:
    """metric -> the distinct signatures of one selection's results that were computed
    (errored results and rows stored before signatures were kept are left out)."""
    stmt = select(ScoringDetail.metric_name, ScoringDetail.signature).where(
        ScoringDetail.signature.is_not(None), ScoringDetail.error.is_(None)
    )
    if selection.run_id:
        stmt = stmt.where(ScoringDetail.run_id == selection.run_id)
    if selection.tag:  # (PostgreSQL's json has no equality: no DISTINCT over tags)
        stmt = stmt.add_columns(TestResult.tags).join(
            TestResult, TestResult.id == ScoringDetail.test_result_id
        )
    else:
        stmt = stmt.distinct()
    out: dict[str, set[str]] = {}
    for metric, signature, *tags in session.connection().execute(stmt).all():
        if tags and (tags[0] or {}).get(selection.tag) != selection.value:
            continue
        out.setdefault(metric, set()).add(signature)
    return out
