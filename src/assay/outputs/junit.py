"""JUnit XML for CI servers (``--junit FILE``): a test case per sample and gated metric.

The file is one ``<testsuite>`` as Apache Ant's JUnit task writes it (the schema the
tests validate against: tests/data/JUnit.xsd). A gated metric is one with a pass
threshold on that sample (`assay.evaluation.tally.applied_threshold`: the metric's
default in a suite that gates it, ``--threshold`` or ``thresholds``); ungated metrics
get no test case. Each case is named after the sample's id, its ``classname`` is
``assay.METRIC``, and it holds, by the result:

- nothing: the value passes its threshold;
- ``<failure type="below threshold">``: the value misses it; the message gives the
  value and the threshold, the text the response (cut at `RESPONSE_CHARS`) and the
  reason (the result's ``reason`` and its ``details`` as JSON, cut at `EVIDENCE_CHARS`);
- ``<error type="metric error">``: the metric failed on the sample, with its error;
- ``<skipped>``: the metric had no value (N/A), with the reason.

Text under evaluation is untrusted: characters XML 1.0 cannot hold (control
characters, lone surrogates, U+FFFE/U+FFFF) are written as ``\\xNN``/``\\uNNNN``, and
all text is escaped (no CDATA), so ``]]>`` or ``</testcase>`` in an answer stays text.
Cases are spooled to a temporary file as samples finish, and the file is written at
`JunitReport.close` (the counts come first), so a large run holds no case in memory.
"""

from __future__ import annotations

import json
import re
import socket
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from assay.core.config import AssayConfig
from assay.core.jsonout import to_jsonable
from assay.core.redaction import known_secrets, redact
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.evaluation.tally import applied_threshold, passes
from assay.metrics.base import PASS_THRESHOLD, Metric

__all__ = ["EVIDENCE_CHARS", "RESPONSE_CHARS", "JunitReport", "xml_text"]

#: the most characters of a result's evidence summary a failure carries
EVIDENCE_CHARS = 2000
#: the most characters of the sample's response a failure quotes
RESPONSE_CHARS = 500

#: what XML 1.0 cannot hold: C0 controls but tab, LF and CR; surrogates; U+FFFE, U+FFFF
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_text(text: object) -> str:
    """``text`` as a string XML 1.0 can hold: each character it cannot, as ``\\xNN`` or
    ``\\uNNNN`` (escaping of ``<``, ``&`` and quotes is the serialiser's)."""
    return _NOT_XML.sub(_shown, str(text))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _evidence(result: MetricResult, secrets: list[str]) -> str:
    """The reason and the details of a result as JSON, redacted of ``secrets`` as the
    ``--out`` evidence is, at most `EVIDENCE_CHARS` characters."""
    parts = []
    if result.reason:
        parts.append(redact(result.reason, secrets, by_name=False))
    details = {k: v for k, v in result.details.items() if k != PASS_THRESHOLD}
    if details:
        shown = redact(to_jsonable(details), secrets, by_name=False)
        parts.append(f"details: {json.dumps(shown, ensure_ascii=False, sort_keys=True)}")
    return _cut("\n".join(parts), EVIDENCE_CHARS)


class JunitReport:
    """Callable ``(index, sample, results)`` collecting the test cases of a run; `close`
    writes ``path``. ``metrics``: the run's metrics; ``config``: its thresholds;
    ``name``: the test suite's name (the run's name or the data file)."""

    def __init__(
        self, path: Path, metrics: Sequence[Metric], config: AssayConfig, name: str
    ) -> None:
        self.path = path
        self.metrics = list(metrics)
        self.config = config
        self.name = name
        self.started = datetime.now(UTC)
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        self.secrets = known_secrets(config)
        self._cases = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())

    def __call__(self, index: int, sample: Sample, results: dict[str, MetricResult]) -> None:
        """Spool the test cases of one scored sample."""
        for metric in self.metrics:
            result = results.get(metric.name)
            if result is None:
                continue
            threshold = applied_threshold(metric, result, self.config)
            if threshold is None:
                continue  # an ungated metric
            case = self._case(metric, sample.id if sample.id is not None else index)
            child = self._outcome(metric, result, threshold, sample.response)
            if child is not None:
                case.append(child)
            self.counts["tests"] += 1
            self._cases.write(ET.tostring(case, encoding="utf-8", xml_declaration=False))
            self._cases.write(b"\n")

    def _case(self, metric: Metric, sample_id: Any) -> ET.Element:
        # a sample's time is not its metric's: a chunk of samples is scored at once
        return ET.Element(
            "testcase",
            {"name": xml_text(sample_id), "classname": f"assay.{metric.name}", "time": "0"},
        )

    def _outcome(
        self, metric: Metric, result: MetricResult, threshold: float, response: str | None
    ) -> ET.Element | None:
        if result.error is not None:
            self.counts["errors"] += 1
            error = xml_text(redact(result.error, self.secrets, by_name=False))
            element = ET.Element("error", {"type": "metric error", "message": error})
            element.text = error
            return element
        if result.value is None:
            self.counts["skipped"] += 1
            why = redact(f"N/A: {result.reason or 'no value'}", self.secrets, by_name=False)
            element = ET.Element("skipped", {"message": xml_text(why)})
            element.text = xml_text(why)
            return element
        if passes(metric, result.value, threshold):
            return None
        self.counts["failures"] += 1
        sign = ">=" if metric.higher_is_better else "<="
        message = f"{metric.name} = {result.value:.4f}, needs {sign} {threshold:g}"
        element = ET.Element("failure", {"type": "below threshold", "message": message})
        # redacted, then cut: a secret across the cut must not keep its first part
        shown = redact(response, self.secrets, by_name=False)
        said = "" if shown is None else f"response: {_cut(shown, RESPONSE_CHARS)}\n"
        element.text = xml_text(f"{message}\n{said}{_evidence(result, self.secrets)}".rstrip())
        return element

    def discard(self) -> None:
        """Drop the spooled cases without writing the file."""
        self._cases.close()

    def close(self, seconds: float) -> None:
        """Write the file (the suite's counts and ``seconds``, then its cases) and drop
        the spool. Raises OSError when the file cannot be written."""
        counts = self.counts
        suite = ET.Element(
            "testsuite",
            {
                "name": xml_text(self.name).strip() or "assay",
                "timestamp": self.started.strftime("%Y-%m-%dT%H:%M:%S"),
                "hostname": xml_text(socket.gethostname()).strip() or "localhost",
                **{key: str(value) for key, value in counts.items()},
                "time": f"{max(seconds, 0.0):.3f}",
            },
        )
        head = ET.tostring(suite, encoding="unicode").removesuffix(" />")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("wb") as out:
                out.write(b'<?xml version="1.0" encoding="UTF-8"?>\n')
                out.write(f"{head}>\n<properties />\n".encode())
                self._cases.seek(0)
                while chunk := self._cases.read(1 << 20):
                    out.write(chunk)
                out.write(b"<system-out />\n<system-err />\n</testsuite>\n")
        finally:
            self._cases.close()
