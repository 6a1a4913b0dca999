"""Offline ``assay generate``: 1,000 questions from 100 pages (about 50,000 words) on 2 cores.

The pages are made from text this machine already has, never from an evaluation set: by
default the descriptions of the installed Python packages (their README, shipped in each
package's metadata; in name order), their prose paragraphs (`_prose`: no lists, tables,
code) cut into pages of about 500 words, each a Markdown file with a heading; ``--source
DIR`` takes the .md/.txt files of a folder instead (``--source docs``: Assay's own
documentation, dense technical text where fewer sentences make questions). It prints, as
JSON:

- ``seconds``: the wall time of `assay.generation.generate` (documents read, chunked,
  parsed, questions made, checked), models loaded inside it (a cold start);
- ``made`` and the summary's counts (candidates, what each check removed);
- ``entailed_share``: the share of answerable rows whose reference the entailment model
  reads as entailed by their contexts (the check itself, so 1.0 by construction), and
  ``verbatim_share``: the share whose reference sentences occur word for word in their
  contexts' prose (no model: the extractive guarantee);
- ``near_duplicate_share``: the share of questions with another question at USE cosine
  >= 0.9 or rapidfuzz ratio >= 90 (the check's own two measures: 0 by construction), and
  ``token_set_duplicate_share``, an independent and harsher one: rapidfuzz
  ``token_set_ratio`` >= 90 (a question whose words are nearly all in another's counts).

With ``--judge`` it measures the judged path instead: the test judge server
(``tests/judge_server.py``, in this process) answers each call after ``--delay`` seconds
(default 0.2) and breaks its JSON on a seeded 30 % of first replies
(``tests/generate_judge.py``); it prints the calls (JSON retries included), the seconds
and the rows made for ``--n`` questions (default 100) from ``--pages`` pages (default 10).

    python benchmarks/generate_speed.py                  # 100 pages, 1,000 questions
    python benchmarks/generate_speed.py --pages 20 --n 200
    python benchmarks/generate_speed.py --judge          # 100 questions, 200 ms a call
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path


def _texts(source: Path | None) -> list[str]:
    """The source texts: the installed packages' descriptions (None), or a folder's files."""
    if source is None:
        from importlib.metadata import distributions

        found = {}
        for dist in distributions():
            body = dist.metadata.get_payload() or dist.metadata.get("Description") or ""
            found.setdefault(dist.metadata["Name"], body)
        return [found[name] for name in sorted(found, key=str.lower)]
    return [
        p.read_text(encoding="utf-8")
        for p in sorted(source.rglob("*"))
        if p.suffix in {".md", ".txt"}
    ]


def _prose(paragraph: str) -> bool:
    """A paragraph of prose: 15 words or more ending with a full stop, not a list, table,
    heading, quote, code or a reStructuredText directive."""
    text = paragraph.strip()
    return (
        len(text.split()) >= 15
        and text.endswith(".")
        and not re.match(r"[-*+>|#`=:.\d]|\s{4}", paragraph)
        and ">>>" not in text
    )


def make_pages(source: Path | None, pages: int, words_per_page: int, out: Path) -> int:
    """Write ``pages`` Markdown pages of about ``words_per_page`` words from ``source``
    (see `_texts`; paragraphs kept whole); returns the words written."""
    paragraphs = []
    for text in _texts(source):
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        paragraphs += [p.strip() for p in re.split(r"\n\s*\n", text) if _prose(p)]
    written, index, page = 0, 0, 0
    while page < pages and index < len(paragraphs):
        body, count = [], 0
        while count < words_per_page and index < len(paragraphs):
            body.append(paragraphs[index])
            count += len(paragraphs[index].split())
            index += 1
        (out / f"page{page:03d}.md").write_text(f"# Page {page + 1}\n\n" + "\n\n".join(body))
        written += count
        page += 1
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--words", type=int, default=500)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judge", action="store_true", help="measure the judged path")
    parser.add_argument("--delay", type=float, default=0.2, help="judge seconds a call")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.judge:
        return judged(args)

    from rapidfuzz import fuzz
    from rapidfuzz.process import cdist

    from assay.core.config import load_config
    from assay.engine import answer, embed_ask
    from assay.engine.resources import Resources
    from assay.generation import generate
    from assay.generation.extractive import prose

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        words = make_pages(args.source, args.pages, args.words, folder)
        cache = folder / "cache"
        config = load_config({"cache_dir": str(cache), "judge_model": None})
        res = Resources(config)
        started, cpu = time.perf_counter(), time.process_time()
        result = generate(folder, args.n, seed=args.seed, judge=False, resources=res)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        rows = result.rows
        answerable = [r for r in rows if r["metadata"]["kind"] != "unanswerable"]
        entailed = sum(1 for r in answerable if r["metadata"].get("entailment", 0) >= 0.5)
        verbatim = sum(
            1
            for r in answerable
            if all(
                any(s in prose(c) for c in r["contexts"])
                # a multi-chunk reference is two sentences, the second may open in lower
                # case ("orjson serializes ..."): split at every full stop and space
                for s in re.split(r"(?<=\.) ", r["expected"])
            )
        )
        queries = [r["query"] for r in rows]
        fuzzy = sum(
            1
            for i, q in enumerate(queries)
            if any(fuzz.token_set_ratio(q, o) >= 90 for j, o in enumerate(queries) if j != i)
        )
        vectors = answer([embed_ask(q) for q in queries], res).vectors(queries)
        import numpy as np

        matrix = np.stack([vectors[q] for q in queries])
        similar = matrix @ matrix.T
        np.fill_diagonal(similar, 0)
        ratios = cdist(queries, queries, scorer=fuzz.ratio)
        np.fill_diagonal(ratios, 0)
        written = ratios.max(axis=1) >= 90
        res.close()
    summary = result.summary
    print(
        json.dumps(
            {
                "pages": args.pages,
                "words": words,
                "requested": args.n,
                "made": len(rows),
                "seconds": round(seconds, 1),
                "cpu_seconds": round(cpu, 1),
                "load_average": [round(x, 1) for x in os.getloadavg()],
                "cpus": os.cpu_count(),
                "by_kind": summary["by_kind"],
                "candidates": summary["candidates"],
                "filters": summary["filters"],
                "shortfall": summary["shortfall"],
                "entailed_share": round(entailed / max(len(answerable), 1), 4),
                "verbatim_share": round(verbatim / max(len(answerable), 1), 4),
                "near_duplicate_share": round(
                    float(((similar.max(axis=1) >= 0.9) | written).mean()) if rows else 0.0, 4
                ),
                "token_set_duplicate_share": round(fuzzy / max(len(rows), 1), 4),
            },
            indent=1,
        )
    )


def judged(args: argparse.Namespace) -> None:
    """The judged path against the test judge server (see the module doc)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources
    from assay.generation import generate
    from generate_judge import GenerationScript
    from judge_server import JudgeServer

    pages = args.pages if args.pages != 100 else 10
    n = args.n if args.n != 1000 else 100
    script = GenerationScript(broken=0.3)
    with (
        tempfile.TemporaryDirectory() as tmp,
        JudgeServer(delay=args.delay, script=script) as server,
    ):
        folder = Path(tmp)
        make_pages(args.source, pages, args.words, folder)
        config = AssayConfig(
            cache_dir=str(folder / "cache"), judge_model="bench-judge", judge_base_url=server.url
        )
        res = Resources(config)
        # models loaded first (a warm process): the judge's part is what is measured
        res.embedder.embed(["warm-up"])
        res.entailment.probabilities([("warm-up premise.", "warm-up hypothesis.")])
        started = time.perf_counter()
        stages: dict[str, float] = {}

        def progress(stage: str, done: int, total: int) -> None:
            stages[f"{stage} {done}/{total}"] = round(time.perf_counter() - started, 1)

        result = generate(folder, n, seed=args.seed, resources=res, progress=progress)
        seconds = time.perf_counter() - started
        res.close()
    summary = result.summary
    print(
        json.dumps(
            {
                "pages": pages,
                "requested": n,
                "made": summary["made"],
                "seconds": round(seconds, 1),
                "judge_delay_seconds": args.delay,
                "server_calls": server.calls,
                "seconds_at_last_progress": stages,
                "broken_first_replies": script.broken_sent,
                "judge": summary["judge"],
                "by_kind": summary["by_kind"],
                "filters": summary["filters"]["removed"],
                "shortfall": summary["shortfall"],
                "load_average": [round(x, 1) for x in os.getloadavg()],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
