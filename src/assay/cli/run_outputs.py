"""Where ``assay evaluate`` puts each scored sample: ``--out`` and the results store.

`RunOutputs` writes each sample as it is scored (a JSONL line, a stored row), keeps the
flat rows only for a .csv or .parquet ``--out`` (written at the end, in sample order),
goes on scoring when one output fails (saying which outputs still get every sample),
and closes them all at the end or on an interrupt.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.evaluation.runner import Evaluation
from assay.outputs.sinks import EVIDENCE, SAMPLE_FIELDS, JsonlSink, output_row, write_table

if TYPE_CHECKING:
    from assay.outputs.junit import JunitReport
    from assay.store.recorder import RunRecorder

__all__ = ["OUT_FIELDS", "TABLE_SUFFIXES", "RunOutputs", "chosen_fields", "reason"]

#: ``--out`` suffixes written as one table at the end of the run
TABLE_SUFFIXES = frozenset({".csv", ".parquet"})

#: the keys of a row that do not depend on the run's metrics or the data's tags
OUT_FIELDS = (
    "id",
    *SAMPLE_FIELDS,
    "target.status",
    "target.http_status",
    "target.reason",
    "duration",
    "first_token_time",
)


def chosen_fields(given: str | None, out: Path | None, metrics: list[str]) -> list[str] | None:
    """The keys ``--out-fields`` keeps (comma separated; each once, in the order given),
    or None (all). Raises ValueError naming an unknown field and listing the valid ones:
    `OUT_FIELDS`, the run's ``metrics``, ``METRIC.COMPONENT`` of one of them, ``tag.KEY``
    and, for a .jsonl ``out``, ``evidence``."""
    if given is None:
        return None
    if out is None:
        raise ValueError("--out-fields chooses the fields of --out FILE: give --out too")
    names = list(dict.fromkeys(n.strip() for n in given.split(",") if n.strip()))
    if not names:
        raise ValueError("--out-fields: give field names, comma separated (e.g. id,response)")
    jsonl = out.suffix.lower() == ".jsonl"
    valid = [*OUT_FIELDS, *([EVIDENCE] if jsonl else []), *metrics]
    for name in names:
        head, dot, tail = name.partition(".")
        if name in valid or (dot and tail and (head == "tag" or head in metrics)):
            continue
        where = "" if jsonl or name != EVIDENCE else " (evidence is written to .jsonl only)"
        raise ValueError(
            f"--out-fields: unknown field {name!r}{where}; valid: {', '.join(valid)}, "
            "tag.KEY (a tag) and METRIC.COMPONENT (a metric's component)"
        )
    return names


def reason(exc: BaseException) -> str:
    """An OS error's reason without its errno ("No space left on device"), else the message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


class RunOutputs:
    """The outputs of one run: ``out`` (a .jsonl sink written sample by sample, or a
    table, of `assay.outputs.sinks.output_row` rows), the store's ``recorder``, and which
    of them failed (``failed``: "out", "store", "stdout", "junit"). ``store_errors``: what a
    failing store raises; ``fields``: a table's ``--out-fields``."""

    def __init__(
        self,
        out: Path | None,
        sink: JsonlSink | None,
        recorder: RunRecorder | None,
        store_errors: tuple[type[BaseException], ...],
        err: Console,
        fields: list[str] | None = None,
        junit: JunitReport | None = None,
    ) -> None:
        self.out = out
        self.junit = junit  # --junit: its cases spool as samples finish, written at close
        self.fields = fields  # --out-fields of a table (a JsonlSink keeps its own)
        self.sink = sink
        self.recorder = recorder
        self.store_errors = store_errors
        self.err = err
        self.failed: list[str] = []
        self.finished = 0  # samples handed over
        self.table = out is not None and out.suffix.lower() in TABLE_SUFFIXES
        # (sample index, flat row) for a table --out (a Ray run finishes chunks in any order)
        self.rows: list[tuple[int, dict[str, Any]]] = []
        # the --out-fields no row has had yet (a misspelt component, a tag no sample has)
        self.unseen = {f for f in fields if f != EVIDENCE} if fields is not None else set()

    def output_failed(self, output: str, what: str, exc: BaseException, going_on: bool) -> None:
        """Say that ``output`` failed (and, ``going_on``, where every sample still goes)."""
        self.failed.append(output)
        message = f"{what} failed: {reason(exc)}"
        if going_on:
            kept = [str(self.out)] if self.out is not None and "out" not in self.failed else []
            if self.recorder is not None and "store" not in self.failed:
                kept.append("the results store")
            if kept:
                message += f"; scoring goes on, every sample still goes to {' and '.join(kept)}"
            else:
                message += "; scoring goes on for the summary"
        self.err.print(f"[red]error:[/red] {escape(message)}")

    def __call__(self, index: int, sample: Sample, results: dict[str, MetricResult]) -> None:
        """Write one scored sample to every output that has not failed."""
        self.finished += 1
        if self.sink is not None or self.table:
            row = output_row(sample, results)
            if self.unseen:
                self.unseen.difference_update(row)
            if self.sink is not None:
                try:
                    self.sink.write(row, sample, results)
                except OSError as exc:
                    self._drop_sink(exc, going_on=True)
            else:
                self.rows.append((index, row))
        if self.junit is not None:
            self.junit(index, sample, results)
        if self.recorder is not None and "store" not in self.failed:
            try:
                self.recorder(index, sample, results)
            except self.store_errors as exc:
                self.output_failed("store", "writing to the results store", exc, going_on=True)

    def flush(self) -> None:
        """Write out the JSONL lines of the samples so far (after each chunk)."""
        if self.sink is not None:
            try:
                self.sink.flush()
            except OSError as exc:
                self._drop_sink(exc, going_on=True)

    def _drop_sink(self, exc: OSError, going_on: bool) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            with contextlib.suppress(OSError):
                sink.close()
        self.output_failed("out", f"writing {self.out}", exc, going_on=going_on)

    def close(self, evaluation: Evaluation | None) -> None:
        """Close the sink, finish the stored run (interrupted when ``evaluation`` is None)
        and write a table ``--out``."""
        if self.sink is not None:
            try:
                self.sink.close()
            except OSError as exc:
                self._drop_sink(exc, going_on=False)
        recorder = self.recorder
        if recorder is not None:
            status = "finished" if evaluation is not None else "interrupted"
            usage = evaluation.judge_usage if evaluation is not None else None
            try:
                recorder.store.finish_run(recorder.run_id, status=status, judge_usage=usage)
            except self.store_errors as exc:
                self.output_failed("store", "closing the stored run", exc, going_on=False)
            recorder.store.close()
        if self.out is not None and self.table and self.rows:
            try:
                self.rows.sort(key=lambda pair: pair[0])
                write_table([row for _, row in self.rows], self.out, self.fields)
            except (OSError, ValueError, ImportError) as exc:
                self.output_failed("out", f"writing {self.out}", exc, going_on=False)
        if self.junit is not None:
            junit, self.junit = self.junit, None
            self._write_junit(junit, evaluation)
        if evaluation is not None and self.finished and self.unseen and self.fields:
            empty = ", ".join(f for f in self.fields if f in self.unseen)
            self.err.print(
                f"[yellow]note:[/yellow] --out-fields: no sample had {escape(empty)}: "
                "written as null"
            )

    def _write_junit(self, junit: JunitReport, evaluation: Evaluation | None) -> None:
        """Write the --junit file of a finished run; an interrupted run writes none (a CI
        server would read the samples it lacks as passed)."""
        if evaluation is None:
            junit.discard()
            return
        try:
            junit.close(evaluation.wall_seconds)
        except OSError as exc:
            self.output_failed("junit", f"writing {junit.path}", exc, going_on=False)

    def where(self) -> str:
        """Where the samples finished before an interrupt are (or why they are nowhere)."""
        n = self.finished
        if not n:
            where = "; no sample had finished"
        elif self.out is not None and "out" not in self.failed:
            where = f"; {n} finished samples are in {self.out}"
        elif self.recorder is not None and "store" not in self.failed:
            where = f"; {n} finished samples are stored"
        elif self.out is not None or self.recorder is not None:
            where = f"; {n} samples had finished, but writing them failed"
        else:
            where = (
                f"; {n} samples had finished (add --out FILE or --store to keep partial results)"
            )
        if self.recorder is not None:
            where += f"; resume with --resume {self.recorder.run_id}"
        return where
