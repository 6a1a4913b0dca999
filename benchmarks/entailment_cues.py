"""Does an entailment model judge the claim by its words alone? For each weights file, the
mean P(entailment) of human-labelled *entailed* pairs whose hypothesis has a cue word
that LLM-style error pairs put in not-entailed hypotheses ("because", ", so",
"exactly", "all", "always", "will", "proves") against those without one, and the AUROC
on FeverSymmetric v0.2 dev and test (`fever_symmetric.py`: built to punish claim-only
cues). A model that learnt the cue marks the cue pairs down: the gap grows.

    python benchmarks/entailment_cues.py FEVER_SYMMETRIC_GIT_DIR --pairs A.jsonl.gz \\
        [B.jsonl.gz ...] --weights W1.safetensors [W2.safetensors ...] [--trained 10000]

``--pairs``: the `train_entailment.py --pairs-out` files the weights were trained on; a
probe pair is an entailed SNLI, MultiNLI, FEVER-NLI or SciTail pair past the first
``--trained`` pairs of every file (the part a ``--limit`` training never read). Each
``--weights`` file replaces the shipped weights in turn (float32 or bfloat16, as
``precision="auto"`` picks). `scripts/llm_error_pairs.py` has what this gave on
2026-11-29.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

from sklearn.metrics import roc_auc_score

import assay.models.entailment as entailment
from fever_symmetric import claims

#: the words the LLM-style rules bring into not-entailed hypotheses
CUE = re.compile(r"\b(because|exactly|all|always|will|proves?|proved)\b|, so\b", re.IGNORECASE)
#: the human-labelled pair kinds of the training files
HUMAN_KINDS = frozenset({"snli", "mnli", "mnlimismatched", "fevernli", "scitail"})
#: pairs without a cue word that are scored (the first of them in file order)
PLAIN_PAIRS = 3000


def probe_pairs(files: list[Path], trained: int) -> tuple[list[tuple[str, str]], list]:
    """The entailed human-labelled (premise, hypothesis) pairs past the first ``trained``
    of every file and in none of those first ``trained``: those with a cue word, and the
    first `PLAIN_PAIRS` without one."""
    seen: set[tuple[str, str]] = set()
    pool: dict[tuple[str, str], None] = {}
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            pairs = [json.loads(line) for line in handle]
        seen |= {(p["premise"], p["hypothesis"]) for p in pairs[:trained]}
        for p in pairs[trained:]:
            if p["kind"] in HUMAN_KINDS and p["label"] == 0:
                pool.setdefault((p["premise"], p["hypothesis"]))
    unseen = [pair for pair in pool if pair not in seen]
    cue = [pair for pair in unseen if CUE.search(pair[1])]
    plain = [pair for pair in unseen if not CUE.search(pair[1])][:PLAIN_PAIRS]
    return cue, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fever_git_dir", help="a clone of TalSchuster/FeverSymmetric")
    parser.add_argument("--pairs", type=Path, nargs="+", required=True)
    parser.add_argument("--weights", type=Path, nargs="+", required=True)
    parser.add_argument("--trained", type=int, default=10_000)
    args = parser.parse_args()
    cue, plain = probe_pairs(args.pairs, args.trained)
    fever = claims(args.fever_git_dir)
    print(f"{len(cue)} cue pairs, {len(plain)} plain pairs")
    print("| weights | P(ent) cue | P(ent) plain | gap | FeverSymmetric dev | test |")
    print("| --- | --- | --- | --- | --- | --- |")
    for weights in args.weights:
        entailment.DEFAULT_WEIGHTS = weights
        model = entailment.EntailmentModel()
        with_cue = float(model.probabilities(cue)[:, 0].mean())
        without = float(model.probabilities(plain)[:, 0].mean())
        aurocs = [
            roc_auc_score(supports, model.probabilities(pairs)[:, 0])
            for pairs, supports in fever.values()
        ]
        print(
            f"| {weights.name} | {with_cue:.3f} | {without:.3f} | {without - with_cue:.3f} "
            f"| {aurocs[0]:.3f} | {aurocs[1]:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
