"""Offline ``assay generate`` against people: SQuAD v2.0 dev passages and their human questions.

SQuAD (Rajpurkar et al., CC BY-SA 4.0) is not shipped with Assay and nothing downloads it:
give the path of a dev file in the official JSON form (``--squad dev-v2.0.json``; the dev
set only, never train). Two measures, printed as JSON:

1. **Answers against people.** Each passage becomes one chunk (a JSONL of chunks, its id
   ``p<n>``); `assay.generation.generate` makes ``--n`` single-fact questions offline.
   For each generated question whose passage has human questions with answers, its
   answer span (``metadata.answer``) is compared with the human answer spans of that
   passage after SQuAD's normalisation (lower case, no punctuation, no articles):
   ``exact_share`` (equal to one of them), ``f1_share`` (SQuAD token F1 >= 0.5 with one
   of them) and ``sentence_share`` (the generated reference sentence contains one of
   them: the question is about a fact people also asked about).
2. **The answerability checks on human questions.** Each human question becomes a
   candidate whose reference is the passage's sentence holding its answer (or, for an
   unanswerable question, its "plausible answer"), checked as a judge-written question
   is (`assay.generation.filters.filter_candidates`, no answer span: the entailment
   model decides ``answerable_alone`` and ``not_entailed``). With the answerable
   questions as positives: ``precision`` (of the kept, the share answerable) and
   ``recall`` (of the answerable, the share kept).

    python benchmarks/generate_quality.py --squad dev-v2.0.json --n 200
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import re
import string
import sys
import tempfile
import time
from pathlib import Path


def normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, punctuation and articles removed."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def f1(prediction: str, truth: str) -> float:
    """SQuAD's token F1 of two answers after `normalise`."""
    pred, gold = normalise(prediction).split(), normalise(truth).split()
    common = collections.Counter(pred) & collections.Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _sentence_at(passage: str, start: int) -> str:
    """The sentence of ``passage`` holding the character ``start``."""
    bounds = [0, *(m.end() for m in re.finditer(r"(?<=[.!?])\s+", passage)), len(passage)]
    for left, right in itertools.pairwise(bounds):
        if left <= start < right:
            return passage[left:right].strip()
    return passage.strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad", type=Path, required=True, help="a SQuAD v2.0 dev JSON file")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from assay.engine.resources import Resources
    from assay.generation import generate
    from assay.generation.documents import Chunk
    from assay.generation.filters import Candidate, filter_candidates

    data = json.loads(args.squad.read_text(encoding="utf-8"))
    passages = [p for article in data["data"] for p in article["paragraphs"]]
    res = Resources()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        chunks_file = Path(tmp) / "passages.jsonl"
        with chunks_file.open("w", encoding="utf-8") as out:
            for i, passage in enumerate(passages):
                out.write(json.dumps({"id": f"p{i}", "text": passage["context"]}) + "\n")
        result = generate(
            chunks_file, args.n, mix="single=1", seed=args.seed, judge=False, resources=res
        )
    human = {
        f"p{i}": [a["text"] for q in p["qas"] for a in q["answers"]] for i, p in enumerate(passages)
    }
    compared = exact = near = in_sentence = 0
    for row in result.rows:
        gold = human[row["metadata"]["source"]["chunks"][0]]
        if not gold:
            continue
        compared += 1
        answer = row["metadata"]["answer"]
        exact += any(normalise(answer) == normalise(g) for g in gold)
        near += any(f1(answer, g) >= 0.5 for g in gold)
        in_sentence += any(normalise(g) in normalise(row["expected"]) for g in gold)

    candidates, labels = [], []
    for i, passage in enumerate(passages):
        chunk = Chunk(f"p{i}", "squad", "", passage["context"])
        for q in passage["qas"]:
            spans = q["answers"] or q.get("plausible_answers") or []
            if not spans:
                continue
            sentence = _sentence_at(passage["context"], spans[0]["answer_start"])
            candidates.append(Candidate("single", q["question"], sentence, [chunk], "", "squad"))
            labels.append(not q.get("is_impossible", False))
    kept, report = filter_candidates(candidates, res, "en", duplicate_cosine=1.01)
    kept_ids = {id(c) for c in kept}
    passed = [id(c) in kept_ids for c in candidates]
    true_pos = sum(p and y for p, y in zip(passed, labels, strict=True))
    res.close()
    print(
        json.dumps(
            {
                "passages": len(passages),
                "generated": len(result.rows),
                "compared_with_people": compared,
                "exact_share": round(exact / max(compared, 1), 4),
                "f1_share": round(near / max(compared, 1), 4),
                "sentence_share": round(in_sentence / max(compared, 1), 4),
                "human_questions": len(candidates),
                "answerable": sum(labels),
                "kept_by_checks": sum(passed),
                "precision": round(true_pos / max(sum(passed), 1), 4),
                "recall": round(true_pos / max(sum(labels), 1), 4),
                "removed": report.to_dict()["removed"],
                "seconds": round(time.perf_counter() - started, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
