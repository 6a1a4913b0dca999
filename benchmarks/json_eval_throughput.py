"""Throughput of the JSON comparison without a judge: documents per second.

Generates N ground-truth documents of 50 leaf fields each (seeded, so every run sees the
same data) and an output for each with realistic damage, then times `evaluate_many` with
the offline scorer (rapidfuzz for FUZZY, the default embedder for SEMANTIC):

- 31 top-level scalars (ids, counts, amounts, flags, dates, e-mails, codes, 2 names),
  an ``address`` object (4 fields), ``items`` (3 objects x sku/qty/price = 9 fields), a
  ``tags`` array of scalars and 5 free-text ``description_*`` fields: mostly EXACT, 3 FUZZY
  fields and 6 SEMANTIC ones;
- in the outputs, each EXACT field is changed with p=0.05 and dropped with p=0.02, 20% of
  the documents get an invented key, and each description is paraphrased with
  p=``--changed-text`` (default 0.1; the rest are copied, which the scorer settles without
  embedding).

All SEMANTIC pairs of the batch go to the embedder in one call (batched by its
batch_size). The cold run starts with an empty in-memory embedding cache; the warm run
repeats the batch with the vectors cached, which is the pipeline's own speed. Goal:
>= 500 documents/s.

    python benchmarks/json_eval_throughput.py [--docs 1000] [--changed-text 0.1]
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import time
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.structured import (
    LocalFieldScorer,
    PairScore,
    StrategyConfig,
    evaluate_many,
)

ADJ = [
    "quick",
    "reliable",
    "modern",
    "compact",
    "durable",
    "secure",
    "smart",
    "flexible",
    "robust",
    "efficient",
]
NOUN = [
    "invoice",
    "shipment",
    "order",
    "contract",
    "report",
    "request",
    "account",
    "device",
    "service",
    "ticket",
]
VERB = [
    "covers",
    "includes",
    "describes",
    "confirms",
    "replaces",
    "updates",
    "lists",
    "tracks",
    "summarises",
]
OBJ = [
    "delivery",
    "costs",
    "payment",
    "terms",
    "warranty",
    "details",
    "customer",
    "data",
    "support",
    "hours",
]
SWAP = {
    "quick": "fast",
    "reliable": "dependable",
    "modern": "up-to-date",
    "covers": "spans",
    "includes": "contains",
    "describes": "explains",
    "costs": "charges",
    "data": "records",
}
CITIES = ["Oslo", "Lyon", "Porto", "Leeds", "Graz", "Cork", "Turku", "Ghent"]
FIRST = ["Anna", "Omar", "Lena", "Ravi", "Mia", "Yusuf", "Eva", "Tom"]
LAST = ["Smith", "Haddad", "Novak", "Garcia", "Berg", "Khan", "Rossi", "Meyer"]

CONFIG = StrategyConfig(
    {
        "name_0": "FUZZY",
        "name_1": "FUZZY",
        "address.street": "FUZZY",
        "code_*": "EXACT",
        "items.*.sku": "EXACT",
    }
)


def sentence(rng: random.Random) -> str:
    return (
        f"The {rng.choice(ADJ)} {rng.choice(NOUN)} {rng.choice(VERB)} the "
        f"{rng.choice(OBJ)} for {rng.randint(2, 90)} {rng.choice(NOUN)}s in {rng.choice(CITIES)}"
    )


def paraphrase(text: str, rng: random.Random) -> str:
    words = [SWAP.get(w, w) for w in text.split()]
    if rng.random() < 0.5:
        words.append("as agreed")
    return " ".join(words)


def make_document(rng: random.Random, i: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": i}
    for k in range(8):
        doc[f"qty_{k}"] = rng.randint(0, 500)
    for k in range(6):
        doc[f"amount_{k}"] = round(rng.uniform(1, 9999), 2)
    for k in range(4):
        doc[f"flag_{k}"] = rng.random() < 0.5
    for k in range(4):
        doc[f"date_{k}"] = (
            f"20{rng.randint(10, 29)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        )
    for k in range(3):
        doc[f"email_{k}"] = f"{rng.choice(FIRST).lower()}.{rng.randint(1, 999)}@example.com"
    for k in range(3):
        doc[f"code_{k}"] = f"C-{rng.randint(1000, 9999)}"
    for k in range(2):
        doc[f"name_{k}"] = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    doc["address"] = {
        "street": f"{rng.randint(1, 200)} {rng.choice(LAST)} Road",
        "city": rng.choice(CITIES),
        "postcode": str(rng.randint(1000, 9999)),
        "country": "NO",
    }
    doc["items"] = [
        {
            "sku": f"SKU-{rng.randint(100, 999)}",
            "qty": rng.randint(1, 9),
            "price": round(rng.uniform(1, 99), 2),
        }
        for _ in range(3)
    ]
    doc["tags"] = rng.sample(["a", "b", "c", "d", "e"], 2)
    for k in range(5):
        doc[f"description_{k}"] = sentence(rng)
    return doc


def damage(doc: dict[str, Any], rng: random.Random, changed_text: float) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    for key in list(out):
        value = out[key]
        if key.startswith("description_"):
            if rng.random() < changed_text:
                out[key] = paraphrase(value, rng)
        elif isinstance(value, int | float | str) and not isinstance(value, bool):
            roll = rng.random()
            if roll < 0.02:
                del out[key]
            elif roll < 0.07:
                out[key] = f"{value}x" if isinstance(value, str) else value + 1
    if rng.random() < 0.2:
        out["confidence"] = round(rng.random(), 2)
    return out


class TimedScorer:
    """The local scorer, timing its two calls."""

    method = "local"

    def __init__(self, inner: LocalFieldScorer) -> None:
        self.inner = inner
        self.seconds = {"fuzzy": 0.0, "semantic": 0.0}
        self.pairs = {"fuzzy": 0, "semantic": 0}

    def _timed(self, kind: str, pairs: Sequence[tuple[str, str]]) -> list[PairScore]:
        start = time.perf_counter()
        scores = getattr(self.inner, kind)(pairs)
        self.seconds[kind] += time.perf_counter() - start
        self.pairs[kind] += len(pairs)
        return scores

    def fuzzy(self, pairs: Sequence[tuple[str, str]]) -> list[PairScore]:
        return self._timed("fuzzy", pairs)

    def semantic(self, pairs: Sequence[tuple[str, str]]) -> list[PairScore]:
        return self._timed("semantic", pairs)


def run(docs: list[tuple[dict, dict]], scorer: LocalFieldScorer, label: str) -> float:
    timed = TimedScorer(scorer)
    embedder = scorer.resources.embedder
    embedded_before, model_before = scorer.texts_embedded, embedder.calls
    start = time.perf_counter()
    results = evaluate_many(docs, CONFIG, scorer=timed)
    elapsed = time.perf_counter() - start
    fields = sum(len(r.classification.all_keys) for r in results)
    pipeline = elapsed - timed.seconds["fuzzy"] - timed.seconds["semantic"]
    print(
        f"{label}: {len(docs) / elapsed:,.0f} documents/s ({len(docs)} docs, {fields:,} fields, "
        f"{elapsed:.2f} s)\n"
        f"  pipeline without scorer {pipeline:.2f} s ({len(docs) / pipeline:,.0f} docs/s); "
        f"FUZZY {timed.pairs['fuzzy']:,} pairs {timed.seconds['fuzzy']:.2f} s; "
        f"SEMANTIC {timed.pairs['semantic']:,} pairs {timed.seconds['semantic']:.2f} s\n"
        f"  texts sent to the embedder: {scorer.texts_embedded - embedded_before:,}; "
        f"encoded by the model (cache misses): {embedder.calls - model_before:,}; "
        f"mean accuracy {sum(r.accuracy for r in results) / len(results):.3f}, "
        f"mean rqs {sum(r.rqs for r in results) / len(results):.3f}"
    )
    return len(docs) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--changed-text", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    docs = []
    for i in range(args.docs):
        gt = make_document(rng, i)
        docs.append((gt, damage(gt, rng, args.changed_text)))
    leaves = 31 + 4 + 9 + 1 + 5
    res = Resources(AssayConfig(use_cache=False))  # in-memory cache only: a cold start
    scorer = LocalFieldScorer(res)
    start = time.perf_counter()
    res.embedder.embed(["warm-up sentence"])
    print(
        f"embedder {res.embedder.name} loaded in {time.perf_counter() - start:.2f} s; "
        f"{leaves} fields per document; load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs"
    )
    cold = run(docs, scorer, "cold (empty embedding cache)")
    warm = run(docs, scorer, "warm (vectors cached)   ")
    goal = "met" if cold >= 500 else "NOT met"
    print(f"goal >= 500 documents/s: {goal} cold ({cold:,.0f}); warm {warm:,.0f}")


if __name__ == "__main__":
    main()
