"""Does numpy's BLAS give spaCy's parses faster and the same? (`assay.text.pipeline_gemm`)

Parses the texts of the dev data sets with the spaCy pipeline as spaCy loads it (thinc's
blis products, one thread) and as Assay loads it (`use_blas_gemm`: numpy's ``matmul``),
alternately, and prints for each data set the seconds of each (the parse without the
entity recogniser, then the recogniser over every doc, as Assay runs them), the docs
whose annotations differ (tags, lemmas, dependencies, sentence bounds, entities:
``Doc.to_bytes`` without the tensor) and the largest difference between the token
vectors of the shared ``tok2vec`` (on the first 100 texts).

    python benchmarks/parse_speed.py              # every data set
    python benchmarks/parse_speed.py --repeat 3   # time each pipeline 3 times (the median)

The data sets, as `validity_data` reads them: QAGS CNN/DM (articles and summary
sentences), BEGIN dev (knowledge and responses), STS-B dev (both sentences), TruthfulQA
1-400 (every correct and incorrect answer and the best one), the 50-sample RAG
speed set (contexts and answers) and `throughput.py`'s 200 RAG samples (contexts and
answers; retrieved passages of 150 words).

Measured 2026-11-29 on 2 vCPUs (AMD EPYC, numpy with OpenBLAS 0.3.31), median of 3:

| data set | texts | parse, blis s | parse, BLAS s | ratio | entities, blis s | BLAS s \
| docs differing | max tensor diff |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| QAGS CNN/DM | 949 | 5.82 | 3.53 | 0.61 | 6.59 | 4.81 | 0 | 2.9e-06 |
| BEGIN dev | 754 | 1.10 | 0.61 | 0.56 | 1.31 | 0.92 | 0 | 2.4e-06 |
| STS-B dev | 2,910 | 2.64 | 1.67 | 0.63 | 3.10 | 2.15 | 0 | 2.1e-06 |
| TruthfulQA 1-400 | 2,781 | 2.06 | 1.07 | 0.52 | 2.26 | 1.60 | 0 | 2.5e-06 |
| RAG speed set | 98 | 0.12 | 0.07 | 0.56 | 0.13 | 0.09 | 0 | 2.3e-06 |
| throughput.py rag, 200 | 800 | 7.77 | 4.44 | 0.57 | 9.13 | 6.33 | 0 | 2.9e-06 |

So the parse takes 0.52-0.63 of its time and the entity recogniser (which has its own
``tok2vec`` and many more classes to choose from at each step) about 0.7, and not one of
the 8,292 docs differs in any annotation. (Assay recognises entities only in the texts whose
entities it reads, the answers, not in retrieved passages: `assay.text.parses`.)

"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np
import spacy

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.text.attribute_rules import index_attribute_ruler
from assay.text.parses import parse_texts
from throughput import make_rag_samples
from validity_checks import DATA
from validity_data import begin_rows, qags_cnndm_sentences, stsb_pairs, truthfulqa_items


def sample_texts(samples: list) -> list[str]:
    """Every text of the samples: the answer, the reference and each context."""
    return [t for x in samples for t in (x.response, x.expected, *(x.contexts or [])) if t]


def stsb_texts() -> list[str]:
    left, right, _ = stsb_pairs(DATA)
    return [*left, *right]


def rag_set_texts() -> list[str]:
    rows = [json.loads(x) for x in (DATA / "rag-bench-50.jsonl").read_text().splitlines()]
    return [t for r in rows for t in [r["answer"], *r["contexts"]]]


def throughput_rag_texts() -> list[str]:
    rows = make_rag_samples(200, seed=11)
    return [t for r in rows for t in [r["response"], *r["contexts"]]]


#: what is compared: every annotation (the token vectors are compared on their own)
EXCLUDE = ["tensor", "user_data"]
HEADER = """\
| data set | texts | parse, blis s | parse, BLAS s | ratio | entities, blis s | BLAS s \
| docs differing | max tensor diff |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |"""

#: what is compared: every annotation (the token vectors are compared on their own)
EXCLUDE = ["tensor", "user_data"]
HEADER = """\
| data set | texts | parse, blis s | parse, BLAS s | ratio | entities, blis s | BLAS s \
| docs differing | max tensor diff |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |"""

DATA_SETS: dict[str, Callable[[], list[str]]] = {
    "QAGS CNN/DM": lambda: sample_texts(qags_cnndm_sentences(DATA)[0]),
    "BEGIN dev": lambda: sample_texts(begin_rows(DATA)[0]),
    "STS-B dev": stsb_texts,
    "TruthfulQA 1-400": lambda: sample_texts(truthfulqa_items(DATA)[0]),
    "RAG speed set": rag_set_texts,
    "throughput.py rag, 200": throughput_rag_texts,
}


def parse(nlp, texts: list[str]) -> tuple[float, float, list]:
    """The docs of ``texts`` as Assay makes them: one pass without the entity recogniser
    (`parse_texts`), then the recogniser over every doc; the seconds of each step."""
    started = time.perf_counter()
    docs = list(parse_texts(nlp, texts, defer_entities=True).values())
    parsed = time.perf_counter()
    for _ in nlp.get_pipe("ner").pipe(docs, batch_size=64):
        pass
    return parsed - started, time.perf_counter() - parsed, docs


def tensor_difference(old, new, texts: list[str]) -> float:
    """The largest difference between the two pipelines' ``tok2vec`` token vectors of
    ``texts`` (`parse_texts` drops them)."""
    old_vectors, new_vectors = old.get_pipe("tok2vec"), new.get_pipe("tok2vec")
    docs = [(old_vectors(old.make_doc(t)), new_vectors(new.make_doc(t))) for t in texts]
    return max(float(np.abs(a.tensor - b.tensor).max(initial=0.0)) for a, b in docs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="timings of each pipeline")
    args = parser.parse_args()
    blas = Resources(AssayConfig()).nlp  # as Assay loads it: `use_blas_gemm` given
    blis = spacy.load(AssayConfig().spacy_model)
    index_attribute_ruler(blis)
    parse(blis, ["Warm up the pipelines."])
    parse(blas, ["Warm up the pipelines."])
    print(HEADER)
    for name, load in DATA_SETS.items():
        texts = list(dict.fromkeys(t for t in load() if t and t.strip()))
        times: dict[str, list[tuple[float, float]]] = {"blis": [], "blas": []}
        for _ in range(args.repeat):
            *seconds, old = parse(blis, texts)
            times["blis"].append(tuple(seconds))
            *seconds, new = parse(blas, texts)
            times["blas"].append(tuple(seconds))
        differing = sum(
            a.to_bytes(exclude=EXCLUDE) != b.to_bytes(exclude=EXCLUDE)
            for a, b in zip(old, new, strict=True)
        )
        tensor = tensor_difference(blis, blas, texts[:100])
        (parse_old, ner_old), (parse_new, ner_new) = (
            [statistics.median(step[k] for step in times[pipeline]) for k in (0, 1)]
            for pipeline in ("blis", "blas")
        )
        print(
            f"| {name} | {len(texts):,} | {parse_old:.2f} | {parse_new:.2f} "
            f"| {parse_new / parse_old:.2f} | {ner_old:.2f} | {ner_new:.2f} "
            f"| {differing} | {tensor:.1e} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
