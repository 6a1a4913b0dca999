"""The entailment model on FeverSymmetric v0.2 (Schuster et al. 2019, CC BY-SA 3.0): a
fact-verification test set that no Assay model trains on (FEVER-NLI in
``scripts/data/nli_more`` is deduplicated against it). AUROC of P(entailment) for
SUPPORTS vs REFUTES (evidence as premise, claim as hypothesis), and the share right at
P(entailment) > 0.5, on its dev and test files.

    python benchmarks/fever_symmetric.py FEVER_SYMMETRIC_GIT_DIR

``FEVER_SYMMETRIC_GIT_DIR``: a clone of TalSchuster/FeverSymmetric; the files are read
at commit `COMMIT` with ``git show``, so nothing is copied into the project. Measured
2026-11-28 (float32 or bfloat16, as ``precision="auto"`` picks):

| weights | dev AUROC | dev right | test AUROC | test right |
| --- | --- | --- | --- | --- |
| before 2026-11-28 (48,213 pairs) | 0.694 | 0.678 | 0.696 | 0.676 |
| ``--more-data`` (75,846 pairs, shipped) | 0.744 | 0.692 | 0.765 | 0.702 |
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from sklearn.metrics import roc_auc_score

from assay.models.entailment import EntailmentModel

COMMIT = "fa25d17e73ea0694edc78133ec654b9f32f6db73"
FILES = {"dev": "symmetric_v0.2/fever_symmetric_dev.jsonl",
         "test": "symmetric_v0.2/fever_symmetric_test.jsonl"}  # fmt: skip


def rows(git_dir: str, path: str) -> list[dict]:
    """The JSON lines of ``path`` at `COMMIT` in the repository ``git_dir``."""
    text = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{COMMIT}:{path}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def claims(git_dir: str) -> dict[str, tuple[list[tuple[str, str]], np.ndarray]]:
    """Each split's (evidence, claim) pairs and whether each claim is SUPPORTS, by split."""
    out = {}
    for split, path in FILES.items():
        items = rows(git_dir, path)
        pairs = [(r["evidence"], r["claim"]) for r in items]
        out[split] = (pairs, np.array([r["gold_label"] == "SUPPORTS" for r in items]))
    return out


def main(argv: list[str]) -> None:
    if len(argv) != 1 or argv[0] in {"-h", "--help"}:
        raise SystemExit(__doc__)
    model = EntailmentModel()
    print(f"model: {model.name}")
    for split, (pairs, supports) in claims(argv[0]).items():
        entailed = model.probabilities(pairs)[:, 0]
        right = float(np.mean((entailed > 0.5) == supports))
        auroc = roc_auc_score(supports, entailed)
        print(f"{split}: {len(pairs)} claims, AUROC {auroc:.3f}, right at 0.5: {right:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
