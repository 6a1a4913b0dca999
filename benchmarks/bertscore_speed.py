"""Side by side, in one process: the ``bertscore`` metric, in float32 and in bfloat16
(``bertscore_precision``), against the bert-score library.

All three score the same 1,000 generated (response, expected) pairs of ``throughput.py`` with
the shipped all-MiniLM-L6-v2 at layer 6, after warm-up (models loaded, 32 other pairs
scored). Ours: ``assay.evaluation.runner.evaluate`` with only ``bertscore`` (chunks of
``chunk_size`` samples, as users run it; memo and cache start empty). The library:
``bert_score.BERTScorer(...).score(cands, refs)`` (what ``bert_score.score()`` runs once
its model is loaded), batch size 64. Rounds run the three in turn, each round on new pairs.

    python benchmarks/bertscore_speed.py            # 3 rounds of 1,000 pairs
    python benchmarks/bertscore_speed.py --rounds 5 --pairs 500

Prints per round: our samples/s in float32 and in bfloat16, the library's, our ratios to
the library, and the largest difference in raw F1 (ours minus the library's) over the
pairs for each of our two precisions.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np

from throughput import make_samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=1000)
    args = parser.parse_args(argv)

    import bert_score

    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources
    from assay.evaluation.runner import evaluate
    from assay.metrics.registry import resolve_metrics
    from assay.models.embedders import minilm_path

    metrics = resolve_metrics(["bertscore"], None)
    ours = {
        precision: Resources(AssayConfig(use_cache=False, bertscore_precision=precision))
        for precision in ("float32", "bfloat16")
    }
    library = bert_score.BERTScorer(model_type=minilm_path(), num_layers=6, batch_size=64)
    warm = make_samples(32, seed=1)
    for res in ours.values():
        evaluate(warm, metrics=metrics, resources=res)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        library.score([s["response"] for s in warm], [s["expected"] for s in warm])

    print(
        f"{'round':<7}{'fp32/s':>8}{'bf16/s':>8}{'library/s':>11}{'fp32/lib':>10}"
        f"{'bf16/lib':>10}{'|dF1| fp32':>12}{'|dF1| bf16':>12}"
    )
    for round_ in range(args.rounds):
        samples = make_samples(args.pairs, seed=100 + round_)
        cands = [s["response"] for s in samples]
        refs = [s["expected"] for s in samples]

        rates, f1s = {}, {}
        for precision, res in ours.items():
            start = time.perf_counter()
            run = evaluate(samples, metrics=metrics, resources=res)
            rates[precision] = args.pairs / (time.perf_counter() - start)
            f1s[precision] = np.array([r["bertscore"].details["raw"]["f1"] for r in run.results])

        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, _, lib_f1 = library.score(cands, refs)
        lib_rate = args.pairs / (time.perf_counter() - start)

        diff = {k: float(np.max(np.abs(f1 - lib_f1.numpy()))) for k, f1 in f1s.items()}
        print(
            f"{round_ + 1:<7}{rates['float32']:>8.1f}{rates['bfloat16']:>8.1f}{lib_rate:>11.1f}"
            f"{rates['float32'] / lib_rate:>10.2f}{rates['bfloat16'] / lib_rate:>10.2f}"
            f"{diff['float32']:>12.2e}{diff['bfloat16']:>12.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
