"""Agreement of seed 004's ``anchor_hallucination`` with people on BEGIN (Wizard of Wikipedia).

``python benchmarks/validity_grounding.py`` prints the AUROC of ``1 - anchor_hallucination``
for "Fully attributable" (positive) against "Not fully attributable" responses, with the
knowledge snippet as the context and the response as the answer (BEGIN dev, 430 rows; see
the data README). ``begin_auroc()`` returns the numbers for ``benchmarks/validity.py``.
Also printed: the AUROC of the two parts (``1 - claim_error`` and the topic overlap) and of
the variant with named entities as anchors, to show where the signal comes from.
"""

from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path
from typing import Any

from sklearn.metrics import roc_auc_score

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from assay.config import AssayConfig
from assay.metrics.grounding import AnchorHallucination
from assay.resources import Resources
from assay.sample import Sample

DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))
POSITIVE = "Fully attributable"


def begin_rows(path: Path | None = None) -> list[dict[str, str]]:
    """Rows of begin-wow-dev.tsv (TAB-separated, header, CRLF line ends, no quoting)."""
    path = path or DATA / "begin-wow-dev.tsv"
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [{k: (v or "").strip() for k, v in row.items()} for row in reader]


def begin_auroc(path: Path | None = None, resources: Resources | None = None) -> dict[str, Any]:
    """AUROC of ``1 - anchor_hallucination`` (and of its parts) against BEGIN's labels."""
    rows = begin_rows(path)
    labels = [1 if r["begin_label"] == POSITIVE else 0 for r in rows]
    samples = [Sample(response=r["response"], contexts=[r["knowledge"]]) for r in rows]
    res = resources or Resources(AssayConfig(use_cache=False))
    out: dict[str, Any] = {"n": len(rows), "positives": sum(labels)}
    for variant, metric in (
        ("seed", AnchorHallucination()),
        ("with_entities", AnchorHallucination(include_entities=True)),
    ):
        start = time.perf_counter()
        results = metric.score_batch(samples, res)
        seconds = time.perf_counter() - start
        kept = [(y, r) for y, r in zip(labels, results, strict=True) if r.value is not None]
        ys = [y for y, _ in kept]
        out[variant] = {
            "auroc": float(roc_auc_score(ys, [1 - r.value for _, r in kept])),  # type: ignore[operator]
            "auroc_claims_only": float(
                roc_auc_score(ys, [1 - r.components["claim_error"] for _, r in kept])  # type: ignore[operator]
            ),
            "auroc_overlap_only": float(
                roc_auc_score(ys, [r.components["topic_overlap"] or 0.0 for _, r in kept])
            ),
            "na": len(results) - len(kept),
            "no_anchor_share": sum(1 for _, r in kept if r.details["n_anchors"] == 0)
            / max(1, len(kept)),
            "mean_anchors": sum(r.details["n_anchors"] for _, r in kept) / max(1, len(kept)),
            "samples_per_s": len(samples) / seconds if seconds else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    path = Path(argv[0]) if argv else None
    report = begin_auroc(path)
    print(f"BEGIN WoW dev: n={report['n']}, fully attributable={report['positives']}")
    for variant in ("seed", "with_entities"):
        r = report[variant]
        print(
            f"anchor_hallucination[{variant}]: AUROC(1 - value) = {r['auroc']:.3f}; "
            f"claims only {r['auroc_claims_only']:.3f}; overlap only "
            f"{r['auroc_overlap_only']:.3f}; no-anchor share {r['no_anchor_share']:.2f}; "
            f"mean anchors {r['mean_anchors']:.2f}; N/A {r['na']}; "
            f"{r['samples_per_s']:.0f} samples/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
