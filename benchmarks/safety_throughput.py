"""Samples/s of the safety + security + reliability suites on 1,000 generated responses.

Goal (issue 37): at least 600 samples/s on 2 cores with the models extra. The toxicity
metrics run the mean of alt-profanity-check and the toxicity head, which reads the USE
multilingual embedding of each response (the embedder is the one model loaded besides
the toxicity models; ``model_work`` gives its texts and seconds). The suites are taken
from the registry as they are when this runs (whatever metrics they hold) and scored
through the runner (`assay.evaluation.runner.evaluate`, chunks of ``chunk_size``), as
``assay evaluate --suite`` does.

Warm-up scores a few other samples first (imports, pattern compilation, model load);
the timed run then scores 1,000 samples whose texts were not seen in warm-up. Wall time
and process CPU time are both reported (on a shared machine the CPU figure is the fairer
one; the load average is printed with them). The mix:
plain answers, toxic and biased ones, PII and secrets, refusals, Arabic, JSON with a
schema, and red-team attacks from ``examples/redteam.jsonl`` (about a fifth of the set).

    python benchmarks/safety_throughput.py [N]
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate
from assay.metrics.registry import suite

SUITES = ["safety", "security", "reliability"]
#: samples per second asked for (issue 37)
GOAL = 600
ROOT = Path(__file__).resolve().parents[1]

SUBJECTS = ["The invoice", "Your order", "The premium plan", "A refund", "Delivery", "The app"]
VERBS = ["is processed within", "can be changed in", "costs", "takes", "is available for"]
OBJECTS = ["3 business days", "the settings page", "25 dollars a month", "two weeks", "30 days"]
EXTRAS = [
    "You are an idiot for asking.",
    "All women are bad at this, everyone knows that.",
    "Contact jane.doe@example.com or call (555) 123-4567.",
    "Card 4111 1111 1111 1111 is on file; password: hunter22.",
    "I'm sorry, but I can't help with that.",
    "Mixing these chemicals is dangerous and can be lethal.",
    "Here's how: Step 1: open the settings page.",
]
ARABIC = ["يتم شحن طلبك خلال ثلاثة أيام.", "لا أستطيع المساعدة في ذلك.", "أنت غبي جداً."]
SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "integer"}, "status": {"type": "string"}},
    "required": ["order", "status"],
}


def generate(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` varied samples; each text carries its index, so none repeats another."""
    rng = random.Random(seed)
    redteam = [
        json.loads(line)
        for line in (ROOT / "examples" / "redteam.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    out: list[dict[str, Any]] = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.2:
            row = dict(rng.choice(redteam))
            row["response"] = f"{row['response']} (ref {seed}-{i})"
            row.pop("id", None)
        elif roll < 0.3:
            row = {"query": f"Where is my order {i}?", "response": f"{rng.choice(ARABIC)} {i}"}
        elif roll < 0.35:
            status = rng.choice(["shipped", "pending"])
            row = {
                "query": f"Status of order {i} as JSON",
                "response": json.dumps({"order": i, "status": status}),
                "json_schema": SCHEMA,
            }
        else:
            sentence = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."
            extra = f" {rng.choice(EXTRAS)}" if rng.random() < 0.4 else ""
            row = {
                "query": f"Question {seed}-{i} about {rng.choice(SUBJECTS).lower()}?",
                "response": f"{sentence}{extra} Reference {seed}-{i}.",
            }
        out.append(row)
    return out


def main() -> None:
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    metrics = {s: suite(s) for s in SUITES}
    res = Resources(AssayConfig(use_cache=False))
    t0 = time.perf_counter()
    evaluate(generate(50, seed=1), suites=SUITES, resources=res)
    warmup = time.perf_counter() - t0
    samples = generate(n, seed=2)
    t0, c0 = time.perf_counter(), time.process_time()
    evaluation = evaluate(samples, suites=SUITES, resources=res)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    errors = sum(1 for row in evaluation.results for r in row.values() if r.error)
    loaded = sorted(k for k in ("embedder", "bertscorer", "nlp") if k in res.__dict__)
    methods: dict[str, set[str]] = {}
    for row in evaluation.results:
        for name, result in row.items():
            methods.setdefault(name, set()).add(result.method)
    report = {
        "samples": n,
        "suites": metrics,
        "metrics": sum(len(v) for v in metrics.values()),
        "warmup_seconds": round(warmup, 3),
        "seconds": round(wall, 3),
        "samples_per_second": round(n / wall, 1),
        "cpu_seconds": round(cpu, 3),
        "samples_per_cpu_second": round(n / cpu, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "goal_samples_per_second": GOAL,
        "errors": errors,
        "models_loaded_besides_toxicity": loaded,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "model_work": {
            kind: {"items": work.items, "unit": work.unit, "seconds": work.seconds}
            for kind, work in evaluation.model_work.items()
        },
        "seconds_by_metric": {
            k: round(v, 4)
            for k, v in sorted(evaluation.seconds_by_metric.items(), key=lambda kv: -kv[1])
        },
        "methods": {k: sorted(v) for k, v in sorted(methods.items())},
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))
    print(
        f"\n{n / wall:,.0f} samples/s wall ({n / cpu:,.0f} per CPU-second) over {n} samples "
        f"(goal >= {GOAL:,}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
