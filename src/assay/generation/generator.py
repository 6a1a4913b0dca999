"""`generate`: a test set of N questions from a team's documents, with a summary of the run.

The run, every stage bounded:

1. Read and chunk the documents (`assay.generation.documents`); unreadable files are
   listed in the summary and the rest go on.
2. Count each kind's share of N (`assay.generation.plan`); the kinds the method cannot
   make (offline: ``reasoning``) are shared among the others, as the summary reports.
3. At most `MAX_ROUNDS` rounds: ask the source (offline: `OfflineSource`; with a judge:
   `assay.generation.judged.JudgeSource`) for each kind's shortfall times `OVERSHOOT`
   (the first round) or `TOP_UP` (the later ones) plus 2, check them
   (`assay.generation.filters`), keep up to each kind's count. Before each later round
   the shortfall of a kind whose source ran dry moves to the kinds that have some left
   (``summary["moved_from_dry_kinds"]``), so a kind that runs dry in the second round
   still has its share made by the others in the third. Candidates that passed the checks
   when their kind was already full (``surplus``) are handed back to the offline source,
   whose facts they used can then make other kinds' questions.
4. Write the rows (`to_row`): ``id``, ``query``, ``expected``, ``contexts``, ``turns``
   for a conversation, ``tags`` with ``question_type`` (the kind: ``--group-by
   question_type`` scores each kind apart), and ``metadata`` with ``source`` (files and
   chunk ids), ``kind``, ``persona`` and ``method``; they are what ``assay run`` and
   ``assay evaluate`` read.

A run that cannot reach N returns what it made and says why in ``summary["shortfall"]``.
``resume`` keeps the rows already in ``out`` and makes only the rest; with a judge its
persistent cache answers again, free, what a stopped run had already asked.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.generation.documents import Chunk, read_chunks
from assay.generation.filters import (
    DUPLICATE_COSINE,
    Candidate,
    FilterReport,
    documents_language,
    filter_candidates,
)
from assay.generation.judged import FIRST_ROUND_OVERSHOOT, JudgeSource
from assay.generation.offline import OfflineSource
from assay.generation.plan import (
    KINDS,
    drawn_personas,
    parse_mix,
    quotas,
    read_personas,
    redistribute,
)
from assay.text.tokenize import words

__all__ = [
    "MAX_ROUNDS",
    "OVERSHOOT",
    "TOP_UP",
    "GenerationResult",
    "Progress",
    "generate",
    "read_rows",
    "to_row",
]

#: rounds of asking and checking, at most
MAX_ROUNDS = 3
#: candidates asked per missing question in the first round (checks remove some)
OVERSHOOT = FIRST_ROUND_OVERSHOOT
#: candidates asked per missing question in each later round
TOP_UP = 2.0

#: progress callback: (stage, done, total)
Progress = Callable[[str, int, int], None]


class Source(Protocol):
    method: str
    cannot: Mapping[str, str]

    def make(self, wants: Mapping[str, int]) -> dict[str, list[Candidate]]: ...

    def exhausted(self, kind: str) -> bool: ...

    def why_dry(self, kinds: list[str]) -> str: ...


@dataclass
class GenerationResult:
    """The rows made (JSONL-ready dicts, the resumed ones first) and the run's summary."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]


def to_row(candidate: Candidate, seed: int) -> dict[str, Any]:
    """The JSONL row of a kept candidate (see the module doc); its id is a hash of its
    kind, question and chunk ids, so the same set has the same ids."""
    ids = [c.id for c in candidate.chunks]
    digest = hashlib.sha256(orjson.dumps([candidate.kind, candidate.query, ids])).hexdigest()[:12]
    metadata: dict[str, Any] = {
        "source": {"files": list(dict.fromkeys(c.source for c in candidate.chunks)), "chunks": ids},
        "kind": candidate.kind,
        "persona": candidate.persona,
        "method": candidate.method,
        "seed": seed,
    }
    if candidate.answer is not None:
        metadata["answer"] = candidate.answer
    metadata.update(candidate.extra)
    row: dict[str, Any] = {
        "id": f"gen-{digest}",
        "query": candidate.query,
        "expected": candidate.expected,
        "contexts": candidate.contexts,
    }
    if candidate.turns is not None:
        row["turns"] = candidate.turns
    row["tags"] = {"question_type": candidate.kind}  # --group-by question_type
    row["metadata"] = metadata
    return row


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an earlier output (for ``resume``).

    Raises:
        ValueError: a line that is not a JSON object with a ``query`` (file and line named).
    """
    rows = []
    with Path(path).open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(row, dict) or not isinstance(row.get("query"), str):
                raise ValueError(f"{path}:{number}: field 'query': a string is required")
            rows.append(row)
    return rows


def _interleaved(made: Mapping[str, list[Candidate]]) -> list[Candidate]:
    out = []
    depth = max((len(v) for v in made.values()), default=0)
    for i in range(depth):
        out += [made[k][i] for k in KINDS if k in made and i < len(made[k])]
    return out


def _rounds(
    source: Source,
    need: dict[str, int],
    mix: Mapping[str, float],
    res: Resources,
    language: str,
    vocabulary: frozenset[str],
    earlier: list[str],
    duplicate_cosine: float,
    progress: Progress | None,
) -> tuple[dict[str, list[Candidate]], FilterReport, dict[str, Any]]:
    accepted: dict[str, list[Candidate]] = {k: [] for k in KINDS}
    report = FilterReport()
    info: dict[str, Any] = {"rounds": 0, "candidates": 0, "surplus": 0, "moved": {}}
    for round_index in range(MAX_ROUNDS):
        missing = {k: need[k] - len(accepted[k]) for k in KINDS}
        if round_index > 0:
            _move_dry(source, need, missing, mix, info["moved"])
            missing = {k: need[k] - len(accepted[k]) for k in KINDS}
        if not any(v > 0 for v in missing.values()):
            break
        factor = OVERSHOOT if round_index == 0 else TOP_UP
        wants = {k: math.ceil(v * factor) + 2 for k, v in missing.items() if v > 0}
        made = _interleaved(source.make(wants))
        info["rounds"] += 1
        info["candidates"] += len(made)
        if progress:
            progress("checking", 0, len(made))
        kept_so_far = [c.query for k in KINDS for c in accepted[k]]
        kept, _ = filter_candidates(
            made, res, language, vocabulary, [*earlier, *kept_so_far], duplicate_cosine, report
        )
        surplus = []
        for candidate in kept:
            if len(accepted[candidate.kind]) < need[candidate.kind]:
                accepted[candidate.kind].append(candidate)
            else:  # passed, but its kind is full
                surplus.append(candidate)
        info["surplus"] += len(surplus)
        if hasattr(source, "release"):  # their facts may serve another kind's next round
            source.release(surplus)
        if progress:
            progress("checking", len(made), len(made))
    info["need"] = need
    return accepted, report, info


def _move_dry(
    source: Source,
    need: dict[str, int],
    missing: Mapping[str, int],
    mix: Mapping[str, float],
    moved: dict[str, int],
) -> None:
    """Move the shortfall of the kinds whose source ran dry to the kinds with candidates
    left, in proportion to their weights (``need`` and ``moved`` updated)."""
    dry = [k for k in KINDS if missing[k] > 0 and source.exhausted(k)]
    open_weights = {
        k: mix.get(k, 0.0) for k in KINDS if not source.exhausted(k) and k not in source.cannot
    }
    total = sum(open_weights.values())
    if not dry or total <= 0:
        return
    shift = quotas(sum(missing[k] for k in dry), {k: w / total for k, w in open_weights.items()})
    for k in dry:
        moved[k] = moved.get(k, 0) + missing[k]
        need[k] -= missing[k]
    for k, extra in shift.items():
        need[k] += extra


def _shortfall(
    made: int,
    target: int,
    accepted: Mapping[str, list[Candidate]],
    need: Mapping[str, int],
    source: Source,
    report: FilterReport,
) -> str | None:
    if made >= target:
        return None
    short = [f"{k}: {len(accepted[k])} of {need[k]}" for k in KINDS if len(accepted[k]) < need[k]]
    dry = [k for k in KINDS if len(accepted[k]) < need[k] and source.exhausted(k)]
    removed = sum(report.removed.values())
    why = (
        f"made {made} of {target} after {MAX_ROUNDS} rounds ({'; '.join(short)}): "
        f"the checks removed {removed} candidates"
    )
    if dry:
        why += f", and {source.why_dry(dry)}"
    return why


def _personas(given: str | Path | Sequence[str] | None, chunks: Sequence[Chunk]) -> list[str]:
    if given is None:
        return drawn_personas(chunks)
    if isinstance(given, str | Path):
        return read_personas(given)
    personas = [p for p in given if p.strip()]
    if not personas:
        raise ValueError("personas: the list is empty")
    return personas


def generate(
    documents: str | Path | Sequence[str | Path],
    n: int = 50,
    *,
    mix: str | Mapping[str, float] | None = None,
    personas: str | Path | Sequence[str] | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    resume: bool = False,
    dry_run: bool = False,
    judge: bool | None = None,
    config: AssayConfig | None = None,
    resources: Resources | None = None,
    max_tokens: int = 300,
    duplicate_cosine: float = DUPLICATE_COSINE,
    progress: Progress | None = None,
) -> GenerationResult:
    """A test set of ``n`` questions from ``documents`` (folders, globs, files; see the
    module doc).

    Args:
        mix: the kinds' weights (``single=0.5,multi=0.2,...``; default `plan.DEFAULT_MIX`).
        personas: a personas file, or a list of descriptions; None: drawn from the documents.
        seed: the seed of every random choice (the same documents, seed and judge cache
            give the same set).
        out: the JSONL file to write (None: nothing is written).
        resume: keep the rows already in ``out`` and make only the rest.
        dry_run: make no judge call and no row: the summary holds the plan (with a
            judge: the planned calls, tokens and cost).
        judge: use the configured judge (None: when one is configured; False: offline).
        config, resources: the configuration (default: `assay.core.config.load_config`)
            or the run's shared `Resources`.
        max_tokens: the chunks' token budget.
        duplicate_cosine: the near-duplicate threshold.
        progress: called with (stage, done, total) as the run goes.

    Raises:
        ValueError: bad arguments, or no readable text in the documents.
        FileNotFoundError: a document spec that matches nothing.
        MissingExtra: a package the run needs is missing (its extra is named).
    """
    if n < 1:
        raise ValueError(f"n must be at least 1 (got {n})")
    started = time.perf_counter()
    weights = parse_mix(mix)
    own = resources is None
    res = resources if resources is not None else Resources(config)
    try:
        chunks, problems = read_chunks(documents, max_tokens)
        if not chunks:
            unread = "; ".join(f"{p.path}: {p.reason}" for p in problems) or "no files"
            raise ValueError(f"no readable text in the documents ({unread})")
        people = _personas(personas, chunks)
        existing = read_rows(out) if resume and out is not None and Path(out).exists() else []
        target = max(n - len(existing), 0)
        use_judge = res.config.judge_configured if judge is None else judge
        if use_judge and not res.config.judge_configured:
            raise ValueError("judge=True but no judge is configured (judge_model, judge_base_url)")
        source: Any
        if use_judge:
            source = JudgeSource(chunks, people, seed, res, n_target=target, progress=progress)
        elif dry_run:  # nothing to plan offline: no model is loaded
            source = None
        else:
            source = OfflineSource(chunks, people, seed, res)
        method = source.method if source is not None else OfflineSource.method
        cannot = source.cannot if source is not None else OfflineSource.cannot
        planned = quotas(target, weights)
        need = redistribute(planned, weights, [k for k in cannot if planned[k]])
        summary: dict[str, Any] = {
            "requested": n,
            "resumed": len(existing),
            "method": method,
            "documents": {
                "files": len({c.source for c in chunks}),
                "chunks": len(chunks),
                "unreadable": [{"path": p.path, "reason": p.reason} for p in problems],
            },
            "language": documents_language(chunks),
            "personas": people,
            "planned_by_kind": dict(need),
            "cannot_make": {k: r for k, r in cannot.items() if planned[k]},
            "redistributed": {k: planned[k] for k in cannot if planned[k]},
        }
        if dry_run:
            summary["dry_run"] = (
                source.dry_run(need)
                if hasattr(source, "dry_run")
                else {
                    "judge_calls": 0,
                    "note": "offline: no judge call, nothing is paid for",
                }
            )
            return GenerationResult(existing, summary)
        accepted, report, info = _rounds(
            source, dict(need), weights, res, summary["language"],
            frozenset(w for c in chunks for w in words(c.text)),
            [r["query"] for r in existing], duplicate_cosine, progress,
        )  # fmt: skip
        kept = [c for k in KINDS for c in accepted[k]]
        rows = [to_row(c, seed) for c in kept]
        made = len(rows)
        summary.update(
            made=made,
            by_kind=dict(Counter(c.kind for c in kept)),
            filters=report.to_dict(),
            candidates=info["candidates"],
            surplus=info["surplus"],
            rounds=info["rounds"],
            moved_from_dry_kinds=info["moved"],
            shortfall=_shortfall(made, target, accepted, info["need"], source, report),
        )
        if hasattr(source, "report"):
            summary["judge"] = source.report()
        if out is not None:
            _write(out, rows, append=bool(existing))
        summary["seconds"] = round(time.perf_counter() - started, 2)
        return GenerationResult([*existing, *rows], summary)
    finally:
        if own:
            res.close()


def _write(path: str | Path, rows: Sequence[Mapping[str, Any]], append: bool) -> None:
    with Path(path).open("ab" if append else "wb") as handle:
        for row in rows:
            handle.write(orjson.dumps(row) + b"\n")
