"""Compute a BERTScore rescaling baseline for a local transformer from text we have.

Why: raw BERTScores of unrelated sentences are far above 0, so bert-score rescales them
with ``(raw - b) / (1 - b)``, where ``b`` is the expected score of two unrelated sentences.
bert-score's authors (Zhang et al. 2020, "BERTScore", appendix on baseline rescaling)
computed ``b`` per model and layer by pairing 1M random Common Crawl sentences and averaging
P, R and F; they ship the results only for hub model names. This script does the same for
a local model with sentences from the development data in ``/work/shared/data`` (never from
STS-B, which is the evaluation set of ``benchmarks/validity.py``):

1. Sentence pool, two corpora:
   - TruthfulQA (``truthfulqa-dev.csv``): every best, correct and incorrect answer (the lists
     are split on "; "); the group of an answer is its question.
   - BEGIN / Wizard of Wikipedia (``begin-wow-dev.tsv``, read with csv QUOTE_NONE): every
     knowledge snippet and response; the group is the row.
   Texts are stripped; texts under ``--min-words`` words (default 3) are dropped; duplicates
   are kept once (first group wins).
2. Pairs: with a fixed seed (``--seed``, default 0; numpy ``default_rng``), each side of a
   pair first picks a corpus with probability 1/2 (so the short TruthfulQA answers do not
   dominate), then a sentence uniformly from it; a pair whose two sentences share a group
   (same question or same dialogue turn) is redrawn, so every pair is unrelated.
   ``--pairs`` pairs (default 10,000).
3. Every pair is scored at every layer (bert-score ``BERTScorer(all_layers=True)``, no idf,
   the same scoring as the metrics use), and the mean P, R and F per layer are written in
   bert-score's baseline format: a comma-separated table with the header ``LAYER,P,R,F``
   and one row per layer, 0 being the embedding layer (bert-score reads row ``num_layers``
   with ``pandas.read_csv``; its own files carry the ``.tsv`` extension, kept here).

Default output: ``src/assay/models/data/bertscore_baseline_minilm_l6.tsv`` for the shipped
all-MiniLM-L6-v2. For another model::

    python scripts/make_bertscore_baseline.py --model /path/to/model --out my_baseline.tsv

then set ``bertscore_model`` and ``bertscore_baseline`` (ASSAY_BERTSCORE_BASELINE).
The run is deterministic for a given seed, data and model; it prints the standard error of
each layer's mean F so the precision of ``b`` is known.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))
DEFAULT_OUT = ROOT / "src" / "assay" / "models" / "data" / "bertscore_baseline_minilm_l6.tsv"


def truthfulqa_texts(path: Path) -> list[tuple[str, str]]:
    """(text, group) for every TruthfulQA answer; the group is the question's row."""
    out: list[tuple[str, str]] = []
    with path.open(encoding="utf-8", newline="") as handle:
        for i, row in enumerate(csv.DictReader(handle)):
            answers = [row["Best Answer"]]
            for column in ("Correct Answers", "Incorrect Answers"):
                answers.extend(row[column].split("; "))
            out.extend((a, f"truthfulqa:{i}") for a in answers)
    return out


def begin_texts(path: Path) -> list[tuple[str, str]]:
    """(text, group) for every BEGIN knowledge snippet and response; the group is the row."""
    out: list[tuple[str, str]] = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for i, row in enumerate(reader):
            out.extend((row[col], f"begin:{i}") for col in ("knowledge", "response"))
    return out


def clean(items: list[tuple[str, str]], min_words: int) -> list[tuple[str, str]]:
    """Stripped, long enough, first occurrence of each text only."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for text, group in items:
        text = " ".join(text.split())
        if len(text.split()) >= min_words and text not in seen:
            seen.add(text)
            out.append((text, group))
    return out


def random_pairs(corpora: list[list[tuple[str, str]]], n: int, seed: int) -> list[tuple[str, str]]:
    """n pairs of unrelated texts: corpus uniform per side, text uniform within it."""
    rng = np.random.default_rng(seed)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < n:
        a_corpus, b_corpus = (corpora[k] for k in rng.integers(len(corpora), size=2))
        a = a_corpus[int(rng.integers(len(a_corpus)))]
        b = b_corpus[int(rng.integers(len(b_corpus)))]
        if a[1] != b[1]:  # different question / dialogue turn (so also different texts)
            pairs.append((a[0], b[0]))
    return pairs


def layer_means(
    model: str, num_layers: int, pairs: list[tuple[str, str]], chunk: int, batch_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean (P, R, F) per layer, shape (layers + 1, 3), and the standard error of each."""
    import bert_score

    scorer = bert_score.BERTScorer(
        model_type=model, num_layers=num_layers, all_layers=True, lang="en", device="cpu"
    )
    total = None
    total_sq = None
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        p, r, f = scorer.score(
            [c for c, _ in part], [ref for _, ref in part], batch_size=batch_size
        )
        values = np.stack([p.numpy(), r.numpy(), f.numpy()], axis=-1).astype(np.float64)
        sums, sq = values.sum(axis=1), (values**2).sum(axis=1)  # (layers + 1, 3)
        total = sums if total is None else total + sums
        total_sq = sq if total_sq is None else total_sq + sq
        print(f"  scored {min(start + chunk, len(pairs))}/{len(pairs)} pairs", file=sys.stderr)
    n = len(pairs)
    mean = total / n
    var = np.maximum(total_sq / n - mean**2, 0.0) * n / (n - 1)
    return mean, np.sqrt(var / n)


def write_baseline(path: Path, means: np.ndarray) -> None:
    """bert-score's baseline format: LAYER,P,R,F, one row per layer from 0."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["LAYER", "P", "R", "F"])
        for layer, (p, r, f) in enumerate(means):
            writer.writerow([layer, f"{p:.8f}", f"{r:.8f}", f"{f:.8f}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="local transformer folder (default: shipped MiniLM)")
    parser.add_argument("--num-layers", type=int, help="layers of the model (default: all)")
    parser.add_argument("--out", type=Path, default=None, help=f"default: {DEFAULT_OUT}")
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-words", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)

    from assay.models.bertscore import model_layer_count
    from assay.models.embedders import minilm_path

    model = args.model or minilm_path()
    if args.out is None and args.model is not None:
        parser.error("--out is required with --model (the default file is the shipped MiniLM's)")
    out = args.out or DEFAULT_OUT
    num_layers = args.num_layers or model_layer_count(model)

    corpora = [
        clean(truthfulqa_texts(args.data / "truthfulqa-dev.csv"), args.min_words),
        clean(begin_texts(args.data / "begin-wow-dev.tsv"), args.min_words),
    ]
    print(
        f"sentence pool: {len(corpora[0])} TruthfulQA answers, "
        f"{len(corpora[1])} BEGIN knowledge snippets/responses",
        file=sys.stderr,
    )
    pairs = random_pairs(corpora, args.pairs, args.seed)
    started = time.perf_counter()
    means, stderr = layer_means(model, num_layers, pairs, chunk=2_000, batch_size=args.batch_size)
    write_baseline(out, means)
    print(f"{len(pairs)} pairs, {time.perf_counter() - started:.1f} s; wrote {out}")
    print("LAYER       P          R          F     (standard error of F)")
    for layer, ((p, r, f), se) in enumerate(zip(means, stderr[:, 2], strict=True)):
        print(f"{layer:5d}  {p:.6f}   {r:.6f}   {f:.6f}   ({se:.6f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
