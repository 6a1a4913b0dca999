"""Samples/s and peak memory of the offline suites on 1,000 generated short-answer samples
(the ``rag`` configuration: RAG samples with 3 contexts of about 150 words).

Each configuration runs in its own process (so peak RSS is its own) with a fresh, empty
embedding cache: embeddings are really computed. "After warm-up" = models loaded and one
small batch scored first; the timed run then scores 1,000 samples whose texts were not
seen during warm-up.

    python benchmarks/throughput.py            # all configurations
    python benchmarks/throughput.py lexical    # one configuration (names: see CONFIGS)
    python benchmarks/throughput.py rag --samples 300   # fewer samples
    python benchmarks/throughput.py faithfulness --samples 200  # news summaries (QAGS)
    python benchmarks/throughput.py long --samples 20   # the same against 10,000 words
    ASSAY_EMBEDDER=e5-small python benchmarks/throughput.py semantic   # another embedder
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from assay.engine.resources import Resources
    from assay.engine.work import KindWork

CONFIGS = {
    "lexical": {"suites": ["lexical"]},
    "embedding": {"suites": ["semantic"], "exclude_needs": "bertscore"},
    "lexical+embedding": {"suites": ["lexical", "semantic"], "exclude_needs": "bertscore"},
    "bertscore": {"metrics": ["bertscore"]},
    "base": {"suites": ["base"]},
    "semantic": {"suites": ["semantic"]},
    "rag": {"suites": ["rag"], "samples": "rag"},
    "faithfulness": {"metrics": ["faithfulness"], "samples": "news"},
    "long": {"metrics": ["faithfulness"], "samples": "long"},
}
#: samples scored before the timed run (models loaded, code paths warm)
WARM_UP = 32
#: the dev data folder (QAGS CNN/DM for the ``faithfulness`` configuration)
DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))

SUBJECTS = [
    "the invoice",
    "your order",
    "the premium plan",
    "a refund",
    "the password",
    "delivery",
    "the warranty",
    "our support team",
    "the mobile app",
    "your account",
]
VERBS = [
    "is processed within",
    "can be changed in",
    "costs",
    "takes",
    "is available for",
    "requires",
    "expires after",
    "is sent to",
]
OBJECTS = [
    "3 business days",
    "the settings page",
    "25 dollars a month",
    "two weeks",
    "all customers",
    "a valid email address",
    "30 days",
    "the billing address",
    "every region",
    "one hour",
]


def make_samples(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        s, v, o = rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)
        o2 = rng.choice(OBJECTS)
        rows.append(
            {
                "id": f"{seed}-{i}",
                "query": f"Question {i}: how does {s} work?",
                "response": f"{s.capitalize()} {v} {o} (case {seed}-{i}).",
                "expected": f"{s.capitalize()} {v} {o2}, reference {i}.",
                "previous_responses": [f"{s.capitalize()} {v} {o}."],
            }
        )
    return rows


def make_rag_samples(n: int, seed: int) -> list[dict]:
    """RAG samples as the rag suite's speed budget states them: 3 contexts of about 150
    words (10 sentences of 15 words each), a 2-sentence answer (one sentence taken from a
    context, one not) and a reference. Every sentence carries its sample's numbers, so no
    text repeats across samples (the embedding cache cannot make the run cheaper)."""
    rng = random.Random(seed)

    def sentence(i: int, k: int) -> str:
        s, v, o = rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)
        return f"In region {seed}-{i}-{k}, {s} {v} {o} for customers of plan {i * 31 + k}."

    rows = []
    for i in range(n):
        contexts = [" ".join(sentence(i, 10 * c + k) for k in range(10)) for c in range(3)]
        first = contexts[rng.randrange(3)].split(". ")[rng.randrange(9)] + "."
        rows.append(
            {
                "id": f"{seed}-{i}",
                "query": f"Question {i}: what does plan {i * 31} include?",
                "response": f"{first} It also includes {rng.choice(OBJECTS)} at no cost.",
                "expected": sentence(i, 99),
                "contexts": contexts,
            }
        )
    return rows


def qags_summaries() -> list[tuple[str, str]]:
    """QAGS CNN/DM dev in file order: each article's summary (its sentences joined) and
    the article."""
    with (DATA / "qags-cnndm-dev.jsonl").open(encoding="utf-8") as handle:
        items = [json.loads(line) for line in handle]
    return [
        (" ".join(s["sentence"] for s in it["summary_sentences"]), it["article"]) for it in items
    ]


def make_news_samples(n: int, seed: int) -> list[dict]:
    """News summaries against their article, as ``assay evaluate -m faithfulness`` reads
    them: QAGS CNN/DM dev (235 CNN/DailyMail articles of about 320 words, each with a
    3-sentence summary written by a summarisation model). The warm-up (any seed but 2)
    takes the last ``n`` articles (``WARM_UP`` of them), the timed run (``seed`` 2) at most
    ``n`` of the others, from the first: no article is read twice, so no parse, vector or
    entailment pair of the warm-up serves the timed run (the 1,000 asked by default are
    the 203 there are)."""
    items = qags_summaries()
    chosen = items[: min(n, len(items) - WARM_UP)] if seed == 2 else items[-n:]
    return [
        {"id": f"{seed}-{i}", "response": summary, "contexts": [article]}
        for i, (summary, article) in enumerate(chosen)
    ]


def make_long_samples(n: int, seed: int) -> list[dict]:
    """Documents of `validity_data.LONG_WORDS` words, as ``-m faithfulness`` reads a long
    source: the summary of a QAGS CNN/DM article (as in `make_news_samples`) against one
    context that holds the article among about 30 others (`validity_data.long_documents`).
    The timed run (``seed`` 2) takes the first ``n`` articles; the warm-up (any other seed)
    one document, of the last article (a document's parse serves no other)."""
    from validity_data import long_documents

    items = qags_summaries()
    documents = long_documents([article for _, article in items])
    chosen = range(min(n, len(items) - 1)) if seed == 2 else [len(items) - 1]
    return [
        {"id": f"{seed}-{i}", "response": items[i][0], "contexts": [documents[i]]} for i in chosen
    ]


def run_one(name: str, n: int = 1000) -> dict:
    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources
    from assay.evaluation.runner import evaluate
    from assay.metrics.registry import resolve_metrics

    spec = CONFIGS[name]
    metrics = resolve_metrics(spec.get("metrics"), spec.get("suites"))
    if spec.get("exclude_needs"):
        metrics = [m for m in metrics if spec["exclude_needs"] not in m.needs]
    with tempfile.TemporaryDirectory() as cache:
        res = Resources(AssayConfig(cache_dir=cache))
        samplers = {"rag": make_rag_samples, "news": make_news_samples, "long": make_long_samples}
        make = samplers.get(spec.get("samples", ""), make_samples)
        evaluate(make(WARM_UP, seed=1), metrics=metrics, resources=res)
        samples = make(n, seed=2)
        warmed = res.model_work.totals()
        start = time.perf_counter()
        run = evaluate(samples, metrics=metrics, resources=res)
        seconds = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "config": name,
        "metrics": len(metrics),
        "samples": len(samples),
        "seconds": round(seconds, 2),
        "samples_per_s": round(len(samples) / seconds, 1),
        "peak_rss_mb": round(rss_mb),
        "model_work": _model_work(res, warmed),
        "slowest": sorted(run.seconds_by_metric.items(), key=lambda kv: -kv[1])[:3],
    }


def _model_work(res: Resources, warmed: Mapping[str, KindWork]) -> str:
    """What reached the models in the timed run (the work `since` ``warmed``, the totals
    after the warm-up, which loads the models) and the seconds each kind took
    (`assay.engine.work`, the line ``assay evaluate`` prints): texts parsed, texts embedded,
    BERTScore pairs and entailment pairs scored (distinct (window, sentence) pairs; the
    windows skipped are those outside each sentence's top ``WINDOWS_PER_SENTENCE``), the
    entailment model's name and precision with it."""
    from assay.engine.work import work_line

    loaded = vars(res)
    named = [loaded["entailment"].name] if "entailment" in loaded else []
    return "; ".join([work_line(res.model_work.since(warmed)), *named])


def main(argv: list[str]) -> None:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return
    unknown = [a for a in argv if not a.startswith("-") and a not in CONFIGS and not a.isdigit()]
    if unknown and "--one" not in argv:
        raise SystemExit(f"unknown configuration {unknown[0]!r}; choose from {', '.join(CONFIGS)}")
    n = 1000
    if "--samples" in argv:
        at = argv.index("--samples")
        n = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2 :]
    if len(argv) >= 2 and argv[0] == "--one":
        print(json.dumps(run_one(argv[1], n)))
        return
    names = argv or list(CONFIGS)
    print(
        f"{'config':<20}{'metrics':>8}{'samples/s':>12}{'seconds':>9}{'peak RSS MB':>13}  "
        "slowest | model work"
    )
    for name in names:
        out = subprocess.run(
            [sys.executable, __file__, "--one", name, "--samples", str(n)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        slow = ", ".join(f"{k} {v:.2f}s" for k, v in row["slowest"])
        print(
            f"{row['config']:<20}{row['metrics']:>8}{row['samples_per_s']:>12}{row['seconds']:>9}"
            f"{row['peak_rss_mb']:>13}  {slow} | {row['model_work']}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
