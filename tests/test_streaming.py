"""The streamed run: each chunk is read, scored, written and forgotten, and the report is
the same as that of a run that keeps every sample.

The 1,000,000-sample run is measured in a child process started when the suite is
collected (`large_runs`): its peak RSS (``ru_maxrss`` from ``wait4``) must stay under
1 GB, and within a few bytes a sample of a 20,000-sample run's: memory flat in the data
size, but for the 8-byte value a metric keeps per sample.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.evaluation.tally import RunTally
from assay.inputs.read import read_samples, stream_samples
from assay.inputs.records import InputErrors
from assay.metrics.base import Metric
from large_runs import LargeRun, large_run, start_large_run, stop_large_run

runner = CliRunner()


class Words(Metric):
    """Words of the response / 10; errors on 'boom'; labels LONG or SHORT."""

    name = "words"
    family = "test"
    requires = ("response",)
    default_threshold = 0.2

    def compute(self, sample, res):
        if "boom" in sample.response:
            raise RuntimeError(f"boom at {len(sample.response)} characters")
        n = len(sample.response.split())
        return self.result(n / 10, label="LONG" if n > 2 else "SHORT")


def _samples() -> list[Sample]:
    out = []
    for i in range(23):
        text = " ".join(["w"] * (i % 5)) or None
        if i in {4, 17}:
            text = "boom " * (i + 1)
        tags = {"kind": "ab"[i % 2]} if i % 3 else {}
        out.append(Sample(id=f"s{i}", response=text, tags=tags))
    return out


@pytest.fixture()
def res(tmp_path):
    return Resources(AssayConfig(cache_dir=str(tmp_path), chunk_size=4))


def test_a_streamed_run_reports_what_a_kept_run_reports(res):
    kept = evaluate(_samples(), metrics=[Words()], resources=res)
    seen: list[int] = []
    streamed = evaluate(
        iter(_samples()),
        metrics=[Words()],
        resources=res,
        keep=False,
        group_by=["kind"],
        on_sample=lambda i, s, r: seen.append(i),
    )
    assert seen == list(range(23))
    assert streamed.samples == [] and streamed.results == [] and streamed.n_samples == 23

    def plain(summaries):
        return [s.to_dict() | {"seconds": 0} for s in summaries]

    assert plain(streamed.summary()) == plain(kept.summary())
    (s,) = streamed.summary()
    # of 23: 5 N/A (i % 5 == 0: no response), 2 errors (i = 4, 17), 16 values
    assert (s.n, s.n_na, s.n_error) == (16, 5, 2)
    assert streamed.label_counts() == kept.label_counts()
    # LONG: 3 or 4 words, i % 5 in {3, 4}: 3, 8, 13, 18, 9, 14, 19 (4 errored)
    assert streamed.label_counts() == {"words": {"SHORT": 9, "LONG": 7}}
    causes = streamed.whole().error_causes()
    assert [(c.message, c.samples, c.metrics) for c in causes] == [
        ("RuntimeError: boom at 25 characters", 2, {"words": 2})
    ]
    groups = streamed.group_tallies(["kind"])
    assert list(groups) == [("-",), ("a",), ("b",)]
    for key, indices in kept.groups(["kind"]).items():
        assert groups[key].samples == len(indices)
        assert plain(groups[key].summaries({})) == plain(kept.summary(indices))
    assert streamed.whole().tags_seen == {"kind"}
    with pytest.raises(ValueError, match="streamed run keeps no samples"):
        streamed.group_tallies(["other"])


def test_a_tally_counts_each_errored_sample_once_per_cause():
    class Twice(Words):
        name = "twice"

    tally = RunTally([Words(), Twice()], AssayConfig())
    boom = Sample(response="boom boom")
    rows = [
        {m.name: m.failed(RuntimeError(f"boom at {n} characters")) for m in (Words(), Twice())}
        for n in (9, 1000)
    ]
    for row in rows:
        tally.add(boom, row)
    (cause,) = tally.error_causes()
    # "9" and "1,000" differ only in numbers: one cause, on 2 samples, 2 errors a metric
    assert (cause.samples, cause.metrics) == (2, {"words": 2, "twice": 2})
    assert tally.errored("words") == 2


def test_stream_samples_reads_what_read_samples_reads(tmp_path):
    path = tmp_path / "data.jsonl"
    lines = ['{"id": "a", "response": "x"}', "not json", '{"id": "b"}', '{"response": "y"}']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    listed, errors = read_samples(path)
    stream = stream_samples(path, count_lines=True)
    assert stream.lines == 4
    assert [s.id for s in stream.samples] == [s.id for s in listed] == ["a", "line-4"]
    assert [str(e) for e in stream.errors] == [str(e) for e in errors]
    assert [e.line for e in errors] == [2, 3]
    strict = stream_samples(path, strict=True)
    assert next(strict.samples).id == "a"
    with pytest.raises(InputErrors, match="line 2"):
        next(strict.samples)


def test_the_cli_streams_a_jsonl_run_and_writes_the_same_lines(env):
    data = env / "data.jsonl"
    rows = [
        {"id": f"s{i}", "response": f"answer {i % 3}", "expected": "answer 1"} for i in range(9)
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n", encoding="utf-8")
    streamed = runner.invoke(
        app,
        [
            "evaluate",
            str(data),
            "-m",
            "exact_match",
            "--format",
            "json",
            "-o",
            str(env / "a.jsonl"),
        ],
    )
    assert streamed.exit_code == 0, streamed.output
    # a .parquet/.csv --out keeps every sample: the run that is not streamed
    kept = runner.invoke(
        app,
        [
            *("evaluate", str(data), "-m", "exact_match", "--format", "json"),
            "-o",
            str(env / "b.csv"),
        ],
    )
    assert kept.exit_code == 0, kept.output

    def report(output: str) -> dict:
        payload = json.loads(output[output.index("{") : output.rindex("}") + 1])
        for metric in payload["metrics"]:
            metric["seconds"] = 0
        return {k: v for k, v in payload.items() if k not in {"run_id", "wall_seconds"}}

    assert report(streamed.stdout) == report(kept.stdout)
    assert report(streamed.stdout)["samples"] == 9
    assert report(streamed.stdout)["skipped_records"] == 1
    written = [json.loads(line) for line in (env / "a.jsonl").read_text().splitlines()]
    assert [r["exact_match"] for r in written] == [0.0, 1.0, 0.0] * 3


def test_a_strict_stream_stops_at_the_bad_record_and_keeps_what_it_scored(env):
    data = env / "data.jsonl"
    good = [json.dumps({"id": f"s{i}", "response": "a", "expected": "a"}) for i in range(600)]
    data.write_text("\n".join([*good, "{broken", *good]) + "\n", encoding="utf-8")
    out = env / "out.jsonl"
    result = runner.invoke(
        app, ["evaluate", str(data), "-m", "exact_match", "--strict", "-o", str(out)]
    )
    assert result.exit_code == 2
    assert "line 601" in result.output
    # the chunks before the bad line (chunks of 256) were scored and written
    assert len(out.read_text().splitlines()) == 512
    assert "512 finished samples are in" in result.output


def test_a_million_samples_run_in_flat_memory_under_1_gb(tmp_path):
    """1,000,000 samples through ``assay evaluate -m exact_match --out`` (started in the
    background when the suite was collected: `large_runs`): every line written, peak RSS
    under 1 GB and at most 40 MB (40 bytes a sample: the value kept and the allocator's
    slack) over a 20,000-sample run's."""
    big = large_run()
    if big is None:  # run on its own: start it here
        start_large_run(1_000_000)
        big = large_run()
    assert big is not None
    small = LargeRun(20_000)
    try:
        runs = {20_000: small.wait(), 1_000_000: big.wait()}
        for n, run in runs.items():
            assert run.exit_code == 0, run.stderr
            with run.out.open("rb") as lines:
                assert sum(1 for _ in lines) == n
    finally:
        small.stop()
        stop_large_run()
    peaks = {n: run.peak_rss_mb for n, run in runs.items()}
    assert peaks[1_000_000] < 1024, peaks
    assert peaks[1_000_000] - peaks[20_000] < 40, peaks


def test_a_group_key_no_sample_has_is_named_with_the_tags_the_data_has(env):
    data = env / "data.jsonl"
    rows = [
        {"id": f"s{i}", "response": "a", "expected": "a", "tags": {"kind": "x"}} for i in range(3)
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["evaluate", str(data), "-m", "exact_match", "--group-by", "topic"])
    assert result.exit_code == 0, result.output
    assert "no sample has the tag 'topic' (tags in the data: kind); its group is '-'" in " ".join(
        result.output.split()
    )
