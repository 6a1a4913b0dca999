"""A large ``assay evaluate`` run started in the background when the suite collects a
test that needs it, so that it runs on the core the (single-process) suite leaves idle
and its test only collects the result: `start_large_run` (from ``conftest.py``) and
`large_run` (in the test).

The child's peak RSS is its own ``ru_maxrss``, read by ``wait4``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: the node id suffix of the test that collects the run
LARGE_RUN_TEST = "test_a_million_samples_run_in_flat_memory_under_1_gb"


@dataclass
class RunResult:
    """What a finished child run left: its exit code, stderr, peak RSS and output file."""

    exit_code: int
    stderr: str
    peak_rss_mb: float
    out: Path


def write_samples(path: Path, n: int) -> None:
    """``n`` exact_match samples, one JSON line each."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(f'{{"id":"s{i}","response":"answer {i % 7}","expected":"answer 1"}}\n')


def evaluate_command(data: Path, out: Path) -> list[str]:
    command = [sys.executable, "-m", "assay.cli", "evaluate", str(data), "-m", "exact_match"]
    return [*command, "--quiet", "--format", "json", "--out", str(out)]


class LargeRun:
    """``assay evaluate`` of ``n`` generated samples in a child process."""

    def __init__(self, n: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="assay-large-run-"))
        env = dict(os.environ, ASSAY_CACHE_DIR=str(self.folder / "cache"))
        data = self.folder / "data.jsonl"
        write_samples(data, n)
        self.out = self.folder / "out.jsonl"
        self.child = subprocess.Popen(
            evaluate_command(data, self.out),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.result: RunResult | None = None

    def wait(self) -> RunResult:
        if self.result is None:
            _, status, usage = os.wait4(self.child.pid, 0)
            stderr = self.child.stderr.read().decode() if self.child.stderr else ""
            self.result = RunResult(
                os.waitstatus_to_exitcode(status), stderr, usage.ru_maxrss / 1024, self.out
            )
        return self.result

    def stop(self) -> None:
        if self.result is None and self.child.poll() is None:
            self.child.kill()
            self.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_started: LargeRun | None = None


def start_large_run(n: int) -> None:
    global _started
    if _started is None:
        _started = LargeRun(n)


def large_run() -> LargeRun | None:
    """The run started for this session, or None (the test then runs it itself)."""
    return _started


def stop_large_run() -> None:
    global _started
    if _started is not None:
        _started.stop()
        _started = None
