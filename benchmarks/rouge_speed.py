"""Assay's ROUGE (`assay.text.rouge`) against rouge-score, side by side in one process.

Scores the first ``--pairs`` STS-B dev sentence pairs (or, without the development data,
consecutive sentences of the docs) with both, ``--runs`` times alternating, and prints
the median seconds of each and their ratio; then one pair of long texts (``--long-chars``
characters each, built from the docs) once with each. Values are checked equal as they
go. Assay's stemmer cache is cleared before each of its runs, so each run stems every
word again as rouge-score does.

    python benchmarks/rouge_speed.py [--pairs 1000] [--runs 5] [--long-chars 20000]

Needs rouge-score (the dev extra).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from rouge_score import rouge_scorer

from assay.text.porter import porter_stem
from assay.text.rouge import ROUGE_TYPES, rouge_scores, rouge_tokens
from assay.text.tokenize import sentences

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))


def _pairs(count: int) -> tuple[str, list[tuple[str, str]]]:
    stsb = DATA / "stsb-dev.tsv"
    if stsb.exists():
        with stsb.open(encoding="utf-8") as f:
            rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            return "STS-B dev", [(row[5], row[6]) for row in rows][:count]
    found = [s for p in sorted((ROOT / "docs").glob("*.md")) for s in sentences(p.read_text())]
    return "docs sentences", list(pairwise(found))[:count]


def _assay(target: str, prediction: str) -> tuple[float, ...]:
    scores = rouge_scores(rouge_tokens(target), rouge_tokens(prediction))
    return tuple(
        x for k in ROUGE_TYPES for x in (scores[k].precision, scores[k].recall, scores[k].fmeasure)
    )


SCORER = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def _reference(target: str, prediction: str) -> tuple[float, ...]:
    scores = SCORER.score(target, prediction)
    return tuple(x for k in ROUGE_TYPES for x in tuple(scores[k]))


def _time(
    score: Callable[[str, str], tuple[float, ...]], pairs: list[tuple[str, str]]
) -> tuple[float, list]:
    start = time.perf_counter()
    values = [score(t, p) for t, p in pairs]
    return time.perf_counter() - start, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--long-chars", type=int, default=20000)
    args = parser.parse_args()

    source, pairs = _pairs(args.pairs)
    ours, theirs = [], []
    for _ in range(args.runs):
        porter_stem.cache_clear()
        seconds, mine = _time(_assay, pairs)
        ours.append(seconds)
        seconds, reference = _time(_reference, pairs)
        theirs.append(seconds)
        assert mine == reference, "values differ"
    mine_s, ref_s = statistics.median(ours), statistics.median(theirs)
    print(f"{len(pairs)} {source} pairs, median of {args.runs} runs:")
    print(f"  assay {mine_s:.3f} s, rouge-score {ref_s:.3f} s, ratio {ref_s / mine_s:.1f}x")

    text = " ".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    target, prediction = text[: args.long_chars], text[args.long_chars : 2 * args.long_chars]
    tokens = (len(rouge_tokens(target)), len(rouge_tokens(prediction)))
    porter_stem.cache_clear()
    mine_s, mine = _time(_assay, [(target, prediction)])
    ref_s, reference = _time(_reference, [(target, prediction)])
    assert mine == reference, "values differ"
    print(f"two texts of {args.long_chars} characters ({tokens[0]} and {tokens[1]} tokens):")
    print(f"  assay {mine_s:.3f} s, rouge-score {ref_s:.3f} s, ratio {ref_s / mine_s:.0f}x")


if __name__ == "__main__":
    main()
