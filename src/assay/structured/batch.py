"""Batches: pairing ground-truth and output documents, evaluating them, per-field aggregates.

Inputs (what ``assay json-eval`` accepts):

- two JSON files: one pair, named after the output file;
- two directories: ``*.json`` files paired by file name (the specification's batch-by-path); a name
  present on one side only becomes an error row;
- one JSONL file with both documents on each line, under ``expected_json`` and
  ``output_json`` (or the aliases `Sample` accepts: ``ground_truth_json``/``gt_json`` and
  ``aio_json``/``extracted_json``); each value is a JSON value or a string holding JSON.
  Optional per line: ``id`` or ``name`` (the row's name, default ``line N``) and
  ``safety_score`` (the RQS safety input, default 1.0).

A document that cannot be read (malformed JSON, missing partner, nesting deeper than
``max_json_depth`` levels) becomes a `DocResult` with an ``error`` naming its path; the
rest of the batch is still evaluated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.core.config import load_config
from assay.core.extras import ModelUnavailable
from assay.core.json_documents import check_document, depth_limit
from assay.core.sample import FIELD_ALIASES
from assay.inputs.records import InputError, InputErrors
from assay.structured.pipeline import EvalOptions, JsonEvalResult, evaluate_many
from assay.structured.scorers import FieldScorer
from assay.structured.strategies import StrategyConfig

__all__ = [
    "DocPair",
    "DocResult",
    "FieldAggregate",
    "evaluate_pairs",
    "field_aggregates",
    "load_pairs",
    "pairs_from_directories",
    "pairs_from_files",
    "pairs_from_jsonl",
]

EXPECTED_KEYS = FIELD_ALIASES["expected_json"]
OUTPUT_KEYS = FIELD_ALIASES["output_json"]


def _whole_input_error(source: Path | str, message: str) -> InputErrors:
    """The input as a whole is unusable (a path that does not exist, a file and a
    directory mixed): Assay's one input error, as the sample readers raise it. One bad
    document is not that but an error row."""
    return InputErrors([InputError(str(source), None, None, message)])


@dataclass(slots=True)
class DocPair:
    """One ground-truth/output pair to evaluate, or the reason it cannot be."""

    name: str
    expected: Any = None
    output: Any = None
    expected_source: str | None = None
    output_source: str | None = None
    safety_score: float | None = None  # None: the batch default
    error: str | None = None


@dataclass(slots=True)
class DocResult:
    """The evaluation of one pair (or its error)."""

    name: str
    result: JsonEvalResult | None
    error: str | None = None
    expected_source: str | None = None
    output_source: str | None = None

    def row(self) -> dict[str, Any]:
        """One JSON row: name, the four scores, the error, the breakdown."""
        scores: dict[str, Any] = (
            self.result.scores()
            if self.result
            else dict.fromkeys(("completeness", "hallucination", "accuracy", "rqs"))
        )
        return {
            "name": self.name,
            **scores,
            "error": self.error,
            "expected_path": self.expected_source,
            "output_path": self.output_source,
            "breakdown": self.result.to_dict() if self.result else None,
        }


# ---- reading ------------------------------------------------------------------------------
def _read_json(path: Path) -> tuple[Any, str | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path}: cannot read: {exc}"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
    except (ValueError, RecursionError) as exc:
        return None, f"{path}: {unreadable_json(exc)}"


def unreadable_json(exc: BaseException) -> str:
    """Why ``json.loads`` refused a text that is not a syntax error: a number over Python's
    4,300-digit limit (ValueError) or nesting deeper than the parser's stack."""
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply to parse"
    return f"unreadable JSON: {exc}"


def pairs_from_files(expected: Path, output: Path) -> list[DocPair]:
    """One pair from two JSON files, named after the output file."""
    pair = DocPair(output.name, expected_source=str(expected), output_source=str(output))
    pair.expected, err_gt = _read_json(expected)
    pair.output, err_out = _read_json(output)
    errors = [e for e in (err_gt, err_out) if e]
    pair.error = "; ".join(errors) or None
    return [pair]


def pairs_from_directories(expected: Path, output: Path, pattern: str = "*.json") -> list[DocPair]:
    """Pairs of same-named files in two directories (sorted by name)."""
    gt_files = {p.name: p for p in expected.glob(pattern) if p.is_file()}
    out_files = {p.name: p for p in output.glob(pattern) if p.is_file()}
    pairs: list[DocPair] = []
    for name in sorted(set(gt_files) | set(out_files)):
        g, o = gt_files.get(name), out_files.get(name)
        if g is None:
            pairs.append(
                DocPair(name, output_source=str(o), error=f"{o}: no ground truth {expected / name}")
            )
        elif o is None:
            pairs.append(
                DocPair(name, expected_source=str(g), error=f"{g}: no output {output / name}")
            )
        else:
            pairs.extend(pairs_from_files(g, o))
    return pairs


def _pick(record: Mapping[str, Any], keys: Sequence[str]) -> tuple[str | None, Any]:
    for key in keys:
        if key in record:
            return key, record[key]
    return None, None


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in {"{", "["}:
            return json.loads(stripped)
    return value


def pairs_from_jsonl(path: Path) -> list[DocPair]:
    """Pairs from a JSONL file holding both documents per line."""
    pairs: list[DocPair] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise _whole_input_error(path, f"cannot read: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        pair = DocPair(f"line {number}", expected_source=where, output_source=where)
        pairs.append(pair)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            pair.error = f"{where}: malformed JSON at column {exc.colno}: {exc.msg}"
            continue
        except (ValueError, RecursionError) as exc:
            pair.error = f"{where}: {unreadable_json(exc)}"
            continue
        if not isinstance(record, dict):
            pair.error = f"{where}: each line must be a JSON object, got {type(record).__name__}"
            continue
        name = record.get("id", record.get("name"))
        if name is not None:
            pair.name = str(name)
        gt_key, gt = _pick(record, EXPECTED_KEYS)
        out_key, out = _pick(record, OUTPUT_KEYS)
        if gt_key is None or out_key is None:
            lacking = [
                f"'{keys[0]}' (or {', '.join(repr(k) for k in keys[1:])})"
                for key, keys in ((gt_key, EXPECTED_KEYS), (out_key, OUTPUT_KEYS))
                if key is None
            ]
            pair.error = f"{where}: add {' and '.join(lacking)}"
            continue
        try:
            pair.expected, pair.output = _maybe_json(gt), _maybe_json(out)
        except json.JSONDecodeError as exc:
            pair.error = f"{where}: a document string is malformed JSON: {exc.msg}"
            continue
        except (ValueError, RecursionError) as exc:
            pair.error = f"{where}: a document string is {unreadable_json(exc)}"
            continue
        safety = record.get("safety_score")
        if safety is not None:
            if (
                isinstance(safety, bool)
                or not isinstance(safety, int | float)
                or not math.isfinite(safety)
                or not 0 <= safety <= 1
            ):
                pair.error = f"{where}: safety_score must be a number in [0, 1], got {safety!r}"
                continue
            pair.safety_score = float(safety)
    return pairs


def load_pairs(paths: Sequence[str | Path]) -> list[DocPair]:
    """Pairs from ``[GT, OUT]`` (two files or two directories) or ``[PAIRS.jsonl]``.

    Raises `assay.inputs.records.InputErrors` when the input as a whole is unusable.
    """
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.exists():
            raise _whole_input_error(p, "no such file or directory")
    if len(paths) == 1:
        (single,) = paths
        if single.is_dir():
            raise _whole_input_error(
                single, "is a directory: give GT and OUT directories, or one JSONL file of pairs"
            )
        return pairs_from_jsonl(single)
    if len(paths) != 2:
        raise _whole_input_error(
            " ".join(map(str, paths)), f"expected GT OUT or PAIRS.jsonl, got {len(paths)} paths"
        )
    gt, out = paths
    if gt.is_dir() and out.is_dir():
        return pairs_from_directories(gt, out)
    if gt.is_file() and out.is_file():
        return pairs_from_files(gt, out)
    raise _whole_input_error(f"{gt} and {out}", "must both be files or both be directories")


# ---- evaluating --------------------------------------------------------------------------
def evaluate_pairs(
    pairs: Sequence[DocPair],
    strategies: StrategyConfig | Mapping[str, Any] | None = None,
    *,
    options: EvalOptions | None = None,
    scorer: FieldScorer | None = None,
    safety_score: float = 1.0,
    max_depth: int | None = None,
) -> list[DocResult]:
    """Evaluate every readable pair in one batch; unreadable ones keep their error.
    ``safety_score`` is the RQS safety input of pairs that do not carry their own. A
    document nesting deeper than ``max_depth`` levels (default: the configured
    ``max_json_depth``, 500 unless set) is an error row naming where."""
    with depth_limit(load_config().max_json_depth if max_depth is None else max_depth):
        return _evaluate_pairs(
            pairs, StrategyConfig.coerce(strategies), options, scorer, safety_score
        )


def _unusable(pair: DocPair) -> str | None:
    """Why a read pair cannot be compared (too deep, keys JSON cannot hold), naming the file."""
    for document, side, source in (
        (pair.expected, "expected JSON", pair.expected_source),
        (pair.output, "output JSON", pair.output_source),
    ):
        try:
            check_document(document, side)
        except ValueError as exc:
            return f"{source or pair.name}: {exc}"
    return None


def _evaluate_pairs(
    pairs: Sequence[DocPair],
    config: StrategyConfig,
    options: EvalOptions | None,
    scorer: FieldScorer | None,
    safety_score: float,
) -> list[DocResult]:
    errors: dict[int, str] = {}
    for p in pairs:
        problem = None if p.error else _unusable(p)
        if problem:
            errors[id(p)] = problem
    good = [p for p in pairs if p.error is None and id(p) not in errors]

    def run(batch: list[DocPair]) -> list[JsonEvalResult]:
        return evaluate_many(
            [(p.expected, p.output) for p in batch],
            config,
            options=options,
            scorer=scorer,
            safety_scores=[
                safety_score if p.safety_score is None else p.safety_score for p in batch
            ],
        )

    try:
        evaluated: list[JsonEvalResult | None] = list(run(good))
    except ModelUnavailable:
        raise
    except Exception:  # isolate the document that fails; the rest are still evaluated
        evaluated = []
        for p in good:
            try:
                evaluated.extend(run([p]))
            except ModelUnavailable:
                raise
            except Exception as exc:
                evaluated.append(None)
                errors[id(p)] = f"{p.output_source or p.name}: evaluation failed: {exc!r}"
    by_id = {id(p): r for p, r in zip(good, evaluated, strict=True)}
    return [
        DocResult(
            p.name,
            by_id.get(id(p)),
            p.error or errors.get(id(p)),
            p.expected_source,
            p.output_source,
        )
        for p in pairs
    ]


# ---- per-field aggregates ----------------------------------------------------------------
@dataclass(slots=True)
class FieldAggregate:
    """How one field fared across a batch. Fields inside arrays are pooled under their
    path with indices as ``*`` (``items.*.sku``)."""

    field: str
    documents: int = 0  # documents where the field appears on either side
    expected: int = 0  # ... where the GT fills it (gt_non_null)
    missing: int = 0  # aio_missing_or_null
    hallucinated: int = 0  # extra_keys + gt_null_aio_has_value
    scored: int = 0  # scored for accuracy (both filled, not IGNORE)
    wrong: int = 0  # scored 0
    similarities: list[float] = field(default_factory=list)

    @property
    def missing_rate(self) -> float | None:
        return self.missing / self.expected if self.expected else None

    @property
    def wrong_rate(self) -> float | None:
        return self.wrong / self.scored if self.scored else None

    @property
    def mean_similarity(self) -> float | None:
        return sum(self.similarities) / len(self.similarities) if self.similarities else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "documents": self.documents,
            "expected": self.expected,
            "missing": self.missing,
            "hallucinated": self.hallucinated,
            "scored": self.scored,
            "wrong": self.wrong,
            "missing_rate": self.missing_rate,
            "wrong_rate": self.wrong_rate,
            "mean_similarity": self.mean_similarity,
        }


def field_aggregates(results: Iterable[JsonEvalResult | DocResult | None]) -> list[FieldAggregate]:
    """Per-field counts over a batch, most troublesome first (missing + hallucinated +
    wrong, descending; then by name)."""
    table: dict[str, FieldAggregate] = {}

    def get(name: str) -> FieldAggregate:
        agg = table.get(name)
        if agg is None:
            agg = table[name] = FieldAggregate(name)
        return agg

    for item in results:
        result = item.result if isinstance(item, DocResult) else item
        if result is None:
            continue
        cls, flat = result.classification, result.comparison.flat
        seen: set[str] = set()
        for path in cls.all_keys:
            generic = flat.generic_path(path)
            if generic not in seen:  # count a pooled field once per document
                seen.add(generic)
                get(generic).documents += 1
        for path in cls.gt_non_null:
            get(flat.generic_path(path)).expected += 1
        for path in cls.aio_missing_or_null:
            get(flat.generic_path(path)).missing += 1
        for path in (*cls.extra_keys, *cls.gt_null_aio_has_value):
            get(flat.generic_path(path)).hallucinated += 1
        for f in result.fields:
            if f.score is None:
                continue
            agg = get(flat.generic_path(f.field))
            agg.scored += 1
            agg.wrong += f.score == 0.0
            if f.similarity is not None:
                agg.similarities.append(f.similarity)
    return sorted(table.values(), key=lambda a: (-(a.missing + a.hallucinated + a.wrong), a.field))
