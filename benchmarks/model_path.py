"""The run around a transformer: how many pairs a second ``assay evaluate -m bertscore``
and ``-m semantic_similarity --embedder minilm`` reach when the transformer itself costs
nothing, on this machine's CPU.

``python benchmarks/model_path.py [--pairs 32768]`` writes that many short sentence
pairs, replaces the forward pass of Assay's BERT (`assay.models.bert.BertEncoder`) with
a constant of the right shape, and times each command in this process (the CLI's own
code path; one small run first, so imports and loading are not timed; ``--chunk-size``
8192 and ``--batch-size`` 1024 as `benchmarks/gpu.py` runs them): reading,
tokenising, planning, padding, BERTScore's matching or the pooling, reducing and the
summary. On a GPU the transformer's own time shrinks to a few seconds a 100,000 pairs;
what is left is this, so it bounds the end-to-end rate there (`benchmarks/gpu.py`). The
values are meaningless (every vector is the same); only the time counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from typer.testing import CliRunner

import assay.models.bert as bert
from assay.cli import app
from gpu import sentences


def constant_forward(
    self: bert.BertEncoder,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    token_type_ids: torch.Tensor | None = None,
    padded: bool | None = None,
) -> torch.Tensor:
    return torch.ones(input_ids.shape[0], input_ids.shape[1], self.word.shape[1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Pairs/s of the run around the model.")
    parser.add_argument("--pairs", type=int, default=32_768)
    parser.add_argument("--chunk-size", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=1024, help="as benchmarks/gpu.py")
    args = parser.parse_args(argv)
    bert.BertEncoder.forward = constant_forward  # type: ignore[method-assign]
    runner = CliRunner()
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        data, small = Path(folder) / "pairs.jsonl", Path(folder) / "small.jsonl"
        for path, n in ((data, args.pairs), (small, 100)):
            first, second = sentences(n, 1), sentences(n, 2, first=n)
            rows = [{"id": str(i), "response": a, "expected": b} for i, (a, b) in
                    enumerate(zip(first, second, strict=True))]  # fmt: skip
            path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        for name, extra in (("bertscore", []), ("semantic_similarity", ["--embedder", "minilm"])):
            common = ["-m", name, *extra, "-q", "--no-cache", "--device", "cpu"]
            runner.invoke(app, ["evaluate", str(small), *common])
            started = time.perf_counter()
            result = runner.invoke(
                app,
                ["evaluate", str(data), *common, "--chunk-size", str(args.chunk_size),
                 "--batch-size", str(args.batch_size)],
            )  # fmt: skip
            seconds = time.perf_counter() - started
            if result.exit_code != 0:
                print(result.output, file=sys.stderr)
                return 1
            out[name] = {"seconds": round(seconds, 2), "pairs_per_s": round(args.pairs / seconds)}
    print(json.dumps({"pairs": args.pairs, **out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
