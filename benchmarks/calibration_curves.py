"""Learning curves of ``assay calibrate`` on the development data (issue 33, "Measures").

For each source: score every labelled item once with the default (offline), then, for n
in 25, 50, 100, 200 and each of ``--draws`` random draws, calibrate on n labels of that
source (`assay.evaluation.calibration.fit_calibration`, exactly as ``assay calibrate``:
the prior, the folds, the toxicity head refit for ``toxicity_score``) and score the REST
of the source, where the AUROC of the calibrated probabilities is compared with the
default's on the same items. Items that share a context (QAGS sentences of one article,
TruthfulQA answers to one question) never sit on both sides: the rest leaves out every
group a calibration item came from.

Sources (all development data, /work/shared/data; nothing is tuned on a public
evaluation benchmark): faithfulness on BEGIN dev and QAGS CNN/DM, toxicity_score on
Davidson tweets (hate or offensive = 1; note that the shipped toxicity models were
trained on these tweets, so the default is in-sample there), answer_classification
against the best answer on TruthfulQA questions 1-400.

``assay calibrate`` refuses fewer than 20 labels of a class; to study 25 labels this
benchmark lowers that floor to 2 (`fit_calibration(min_per_class=2)`), and a draw with
fewer than 2 of a class is redrawn.

    python benchmarks/calibration_curves.py [--data /work/shared/data] [--draws 10]
        [--cache /tmp/assay-curves] [--sources begin,qags,davidson,truthfulqa]
        [--method auto|score|evidence|head]

Prints one table row per source and n: the default's and the calibration's mean AUROC
on the rest, the mean difference and the 2.5-97.5 % range of the differences over the
draws, and the draws where the calibration fell more than 0.01 below the default.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from assay.core.agreement_stats import auroc
from assay.core.config import AssayConfig
from assay.core.result import MetricResult
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.evaluation.calibration import evidence_of, fit_calibration
from assay.evaluation.calibration_apply import Calibrations
from assay.evaluation.calibration_file import (
    HEAD_METHOD,
    load_calibration,
    write_calibration,
)
from assay.evaluation.calibration_head import head_embeddings, head_prior
from assay.evaluation.runner import evaluate
from assay.metrics.registry import get_metric
from validity_data import (
    begin_rows,
    davidson_tweets,
    qags_cnndm_sentences,
    truthfulqa_items,
)

SIZES = (25, 50, 100, 200)


@dataclass
class Source:
    """One labelled source: its samples, labels, groups and the metric calibrated."""

    name: str
    metric: str
    samples: list[Sample]
    labels: np.ndarray
    groups: np.ndarray


def sources(data: Path, chosen: list[str]) -> list[Source]:
    found = []
    if "begin" in chosen:
        samples, labels = begin_rows(data)
        found.append(Source("BEGIN dev", "faithfulness", samples, labels, np.arange(len(samples))))
    if "qags" in chosen:
        samples, labels, groups = qags_cnndm_sentences(data)
        found.append(Source("QAGS CNN/DM", "faithfulness", samples, labels, groups))
    if "davidson" in chosen:
        samples, classes = davidson_tweets(data, 400, 0)
        toxic = (classes != 2).astype(np.int64)
        found.append(Source("Davidson", "toxicity_score", samples, toxic, np.arange(len(samples))))
    if "truthfulqa" in chosen:
        samples, labels, groups = truthfulqa_items(data)
        found.append(Source("TruthfulQA q1-400", "answer_classification", samples, labels, groups))
    return found


def scored(source: Source, res: Resources, cache: Path | None) -> list[MetricResult]:
    """The default's result on every item (read from ``cache`` when scored before)."""
    path = None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / f"{source.name.replace('/', '_').replace(' ', '_')}.json"
        if path.exists():
            return [MetricResult(**row) for row in json.loads(path.read_text())]
    t0 = time.perf_counter()
    run = evaluate(
        source.samples, metrics=[source.metric], resources=res, calibrations=Calibrations([])
    )
    results = [row[source.metric] for row in run.results]
    print(f"scored {source.name}: {len(results)} items in {time.perf_counter() - t0:.0f} s")
    if path is not None:
        path.write_text(json.dumps([r.to_dict() for r in results]))
    return results


def draw(source: Source, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n items at random with at least 2 of each class, and the rest (no shared group)."""
    while True:
        chosen = rng.choice(len(source.labels), size=n, replace=False)
        y = source.labels[chosen]
        if min(int(y.sum()), int(n - y.sum())) >= 2:
            break
    rest = np.flatnonzero(~np.isin(source.groups, source.groups[chosen]))
    return chosen, rest


def calibrated_on_rest(
    path: Path, results: list[MetricResult], rest: np.ndarray, embeddings: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rest's default scores, calibrated probabilities and item indices (items whose
    evidence the calibration cannot read are left out)."""
    calibration = load_calibration(path)
    evidence = evidence_of([results[i] for i in rest], [1.0] * len(rest))
    if calibration.method == HEAD_METHOD:
        assert embeddings is not None
        probabilities = calibration.probabilities(embeddings[rest[evidence.indices]])
    else:
        order = [evidence.names.index(n) for n in calibration.feature_names]
        probabilities = calibration.probabilities(evidence.features[:, order])
    return evidence.scores, probabilities, rest[evidence.indices]


def curve(
    source: Source, results: list[MetricResult], draws: int, res: Resources, method: str
) -> list[str]:
    metric = get_metric(source.metric)
    embeddings = None
    if source.metric == "toxicity_score":
        embeddings = head_embeddings(source.samples, res)
        shipped = head_prior(res)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "calibration.json"
        for n in SIZES:
            before, after, methods = [], [], []
            for r in range(draws):
                chosen, rest = draw(source, n, np.random.default_rng(1000 * n + r))

                def head(indices: np.ndarray, chosen: np.ndarray = chosen) -> tuple:
                    assert embeddings is not None
                    return embeddings[chosen[indices]], shipped

                content = fit_calibration(
                    metric,
                    [results[i] for i in chosen],
                    [float(source.labels[i]) for i in chosen],
                    head_features=head if embeddings is not None else None,
                    min_per_class=2,
                    method=method,
                )
                write_calibration(content, path)
                scores, probabilities, kept = calibrated_on_rest(path, results, rest, embeddings)
                y = source.labels[kept].tolist()
                before.append(auroc(y, scores.tolist()))
                after.append(auroc(y, probabilities.tolist()))
                methods.append(content["method"])
            b, a = np.array(before), np.array(after)
            d = a - b
            low, high = np.percentile(d, [2.5, 97.5])
            worse = int(np.sum(d < -0.01))
            chosen_methods = ", ".join(f"{m} {methods.count(m)}" for m in sorted(set(methods)))
            rows.append(
                f"| {source.metric} | {source.name} | {n} | {b.mean():.3f} | {a.mean():.3f} "
                f"| {d.mean():+.3f} | {low:+.3f} to {high:+.3f} | {worse} of {draws} "
                f"| {chosen_methods} |"
            )
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--sources", default="begin,qags,davidson,truthfulqa")
    parser.add_argument(
        "--method",
        default="auto",
        help="auto (as assay calibrate), or one candidate forced: score, evidence, head",
    )
    args = parser.parse_args()
    res = Resources(AssayConfig(judge_model=None))
    header = [
        "| metric | source | labels | default AUROC (rest) | calibrated AUROC (rest) "
        "| difference | 2.5-97.5 % of draws | draws > 0.01 below | method chosen |",
        "|---|---|--:|--:|--:|--:|---|--:|---|",
    ]
    print("\n".join(header), flush=True)
    table = []
    for source in sources(args.data, args.sources.split(",")):
        results = scored(source, res, args.cache)
        table.extend(curve(source, results, args.draws, res, args.method))
    res.close()
    print("\n".join([*header, *table]))


if __name__ == "__main__":
    main()
