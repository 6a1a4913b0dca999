"""Do the entailment model's speed paths keep its ranking? On BEGIN and QAGS CNN/DM (the
two left-out data sets of "is this text supported by its evidence?",
`validity_entailment.py`), the AUROC of the entailment support and of the default
``graded+entailment`` support (faithfulness) when each sentence is scored against:

- every window of its evidence (the reference: nothing skipped),
- the 2 windows sharing the most content words with it (``WINDOWS_PER_SENTENCE``, shipped),
- the 1 such window,

each in float32 and in bfloat16 (`assay.models.precision`), with the pairs scored and
the change from the reference. Issue 37's bars: a window cut within 0.005 of scoring
every window, a number format within 0.01 of float32.

    python benchmarks/validity_speed.py   # both data sets (10,752 pairs in each format)

Measured 2026-11-29 with the entailment weights shipped that day (the soup of four
passes, two with reworded LLM-style pairs: `scripts/llm_error_pairs.py`), on a 2-vCPU AMD
EPYC with AVX-512 BF16 and no AMX, Δ against every window in float32:

| data set | format | windows | pairs | AUROC entailment | Δ | AUROC faithfulness | Δ |
| --- | --- | --- | --- | --- | --- | --- | --- |
| BEGIN (one window a passage) | float32 | every = 2 = 1 | 620 | 0.9319 | 0 | 0.9469 | 0 |
| BEGIN | bfloat16 | every = 2 = 1 | 620 | 0.9319 | 0 | 0.9468 | -0.0001 |
| QAGS CNN/DM | float32 | every | 10,132 | 0.7947 | 0 | 0.8132 | 0 |
| QAGS CNN/DM | float32 | 2 (shipped) | 1,444 | 0.7982 | +0.0035 | 0.8152 | +0.0020 |
| QAGS CNN/DM | float32 | 1 | 722 | 0.7625 | -0.0322 | 0.8024 | -0.0108 |
| QAGS CNN/DM | bfloat16 | every | 10,132 | 0.7942 | -0.0005 | 0.8133 | +0.0001 |
| QAGS CNN/DM | bfloat16 | 2 (shipped) | 1,444 | 0.7978 | +0.0031 | 0.8153 | +0.0021 |
| QAGS CNN/DM | bfloat16 | 1 | 722 | 0.7622 | -0.0324 | 0.8023 | -0.0109 |

So the shipped cut (2 windows a sentence, ranked by shared content words) reads 7 times
fewer pairs than every window and ranks as well (+0.0035; +0.0024 with the weights of
28 November); 1 window loses 0.032 (over the 0.005 bar: not taken); bfloat16 moves no
AUROC by more than 0.0005 (the default where the CPU computes it; 0.0002 with the
weights of 28 November, on an Intel CPU with AMX). bfloat16 scored the 10,132 QAGS pairs
in 84 s here; float32 took 246 s, but other work shared the two cores then (146 s on a
quiet run of this machine type before, 110 s against 34 s in bfloat16 on the AMX
machine).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.metrics import roc_auc_score

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.estimators import entailment as estimator
from assay.models.entailment import EntailmentModel
from validity_checks import DATA, metric_scores
from validity_data import begin_rows, qags_cnndm_sentences

#: windows per sentence compared (None: every window)
WINDOW_COUNTS = (None, 2, 1)


def entailment_scores(
    model: EntailmentModel, samples: list, windows: int | None
) -> tuple[np.ndarray, int]:
    """The entailment support of each sample's response by its contexts with ``windows``
    windows per sentence, and the distinct pairs that reads."""
    estimator.WINDOWS_PER_SENTENCE = windows or 10_000
    estimator._sentence_premises.cache_clear()
    texts = [s.response for s in samples]
    evidence = [list(s.contexts) for s in samples]
    pairs = estimator.entailment_pairs(texts, evidence)
    probabilities = dict(zip(pairs, model.probabilities(pairs), strict=True))
    supports = estimator.entailment_support(probabilities, texts, evidence)
    return np.array([s.score for s in supports]), len(pairs)


def main() -> None:
    shipped = estimator.WINDOWS_PER_SENTENCE
    begin, begin_labels = begin_rows(DATA)
    qags, qags_labels, _ = qags_cnndm_sentences(DATA)
    graded_res = Resources(
        AssayConfig(use_cache=False, judge_model=None, support_estimator="graded")
    )
    print(f"{'data set':<16}{'precision':<10}{'windows':<9}{'pairs':>7}{'s':>7}"
          f"{'AUROC ent':>11}{'Δ':>8}{'AUROC faith':>13}{'Δ':>8}")  # fmt: skip
    for name, samples, labels in (("begin-wow-dev", begin, begin_labels),
                                  ("qags-cnndm-dev", qags, qags_labels)):  # fmt: skip
        graded, _, _, _ = metric_scores("faithfulness", samples, graded_res)
        reference: tuple[float, float] | None = None
        for precision in ("float32", "bfloat16"):
            model = EntailmentModel(precision=precision)
            for windows in WINDOW_COUNTS:
                started = time.perf_counter()
                entailed, pairs = entailment_scores(model, samples, windows)
                seconds = time.perf_counter() - started
                ent = roc_auc_score(labels, entailed)
                faith = roc_auc_score(labels, (graded + entailed) / 2)
                reference = reference or (ent, faith)
                label = "every" if windows is None else str(windows)
                print(
                    f"{name:<16}{precision:<10}{label:<9}{pairs:>7}{seconds:>7.1f}"
                    f"{ent:>11.4f}{ent - reference[0]:>+8.4f}"
                    f"{faith:>13.4f}{faith - reference[1]:>+8.4f}",
                    flush=True,
                )
    estimator.WINDOWS_PER_SENTENCE = shipped


if __name__ == "__main__":
    main()
