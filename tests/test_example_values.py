"""What Assay computes on the example files equals the snapshot (`example_values`: what is
compared, and how to write the snapshot again), and every value is of the kind its metric
declares.

A key whose digest equals the snapshot's is equal to the last bit. One whose digest moved
is compared row by row: the same structure and keys, the same strings, ints, bools and
Nones, and every float within `REL_TOL`/`ABS_TOL` of the snapshot's. Why a tolerance: the
float32 kernels of the neural models (embeddings, BERTScore, cross-encoders) round
differently on other CPU types (OpenBLAS, MKL and oneDNN pick their kernels by the CPU),
and CI runs on whatever machine it gets; there their values differ in the last bits (up
to 3.6e-7 seen), while a real change moves a value much further. A float the code rounded
to four decimals (``round(cosine, 4)``; written with at most four) may also be one unit
of its fourth decimal away: a last-bit difference that lies across a rounding boundary
moves it that far."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from example_values import (
    FIELDS,
    JSON_EVAL,
    example_evaluations,
    example_results,
    read_snapshot,
)

# float32 carries about 7 digits; the kernels of other CPUs differ in the last one or two
REL_TOL = 1e-5
ABS_TOL = 1e-6
# the decimals the code rounds model scores to
ROUNDED_DECIMALS = 4


def _decimals(value: float) -> int:
    """The decimals of the shortest text that reads back as `value` (99 in exponent form)."""
    text = repr(value)
    return 99 if "e" in text else len(text.partition(".")[2])


def _same_float(expected: float, found: float) -> bool:
    if math.isnan(expected) or math.isnan(found):
        return math.isnan(expected) and math.isnan(found)
    if math.isclose(expected, found, rel_tol=REL_TOL, abs_tol=ABS_TOL):
        return True
    # rounded on both sides, and one unit of the last rounded decimal apart (not two)
    unit = 10.0**-ROUNDED_DECIMALS
    return (
        max(_decimals(expected), _decimals(found)) <= ROUNDED_DECIMALS
        and abs(expected - found) < 1.5 * unit
    )


def first_difference(expected: Any, found: Any, path: str = "") -> str | None:
    """Where `found` first differs from `expected` (JSON values), floats beyond the
    tolerance, as ``"<path> <expected> != <found>"``; None where they agree."""
    here = path or "(top)"
    if type(expected) is not type(found):
        return f"{here} {expected!r} != {found!r}"
    if isinstance(expected, float):
        return None if _same_float(expected, found) else f"{here} {expected!r} != {found!r}"
    if isinstance(expected, dict):
        if expected.keys() != found.keys():
            missing = sorted(expected.keys() - found.keys())
            new = sorted(found.keys() - expected.keys())
            return f"{here} keys: " + ", ".join(
                f"{label} {names}" for label, names in (("missing", missing), ("new", new)) if names
            )
        for key in sorted(expected):
            inner = f"{path}.{key}" if path else str(key)
            difference = first_difference(expected[key], found[key], inner)
            if difference is not None:
                return difference
        return None
    if isinstance(expected, list):
        if len(expected) != len(found):
            return f"{here} {len(expected)} items != {len(found)}"
        for index, (a, b) in enumerate(zip(expected, found, strict=True)):
            difference = first_difference(a, b, f"{path}[{index}]")
            if difference is not None:
                return difference
        return None
    return None if expected == found else f"{here} {expected!r} != {found!r}"


def rows_difference(key: str, expected: list[Any], found: list[Any]) -> str | None:
    """The first difference of a key's rows beyond the tolerance, as ``"row 3
    details.matches[2].score 0.8123 != 0.815"``; a metric's rows by the names of
    `FIELDS`."""
    if len(expected) != len(found):
        return f"{len(expected)} rows != {len(found)}"
    for index, (a, b) in enumerate(zip(expected, found, strict=True)):
        if key != JSON_EVAL:
            a, b = dict(zip(FIELDS, a, strict=True)), dict(zip(FIELDS, b, strict=True))
        difference = first_difference(a, b)
        if difference is not None:
            return f"row {index} {difference}"
    return None


def snapshot_differences(expected: dict[str, Any], found: dict[str, Any]) -> list[str]:
    """One line for each key of `expected` (the snapshot's ``results``) missing from
    `found`, new in it, or whose rows moved beyond the tolerance."""
    out = [f"{key}: missing" for key in sorted(expected.keys() - found.keys())]
    out += [f"{key}: new" for key in sorted(found.keys() - expected.keys())]
    for key in sorted(expected.keys() & found.keys()):
        if expected[key]["digest"] == found[key]["digest"]:
            continue
        difference = rows_difference(key, expected[key]["rows"], found[key]["rows"])
        if difference is not None:
            out.append(f"{key}: {difference}")
    return out


@pytest.fixture(scope="module")
def evaluations(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The evaluations with models of their own and an empty embedding cache, as the
    snapshot was written: a vector cached by another test, embedded in another batch,
    can differ from a fresh one in its last bits. The models run in float32, as the
    snapshot's did: bfloat16, the default on a CPU with native bfloat16, moves the
    entailment model's probabilities by up to about 0.01 (tests/test_model_speed_paths.py
    holds that path to its tolerance), so the snapshot is the same on every machine."""
    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources

    cache = str(tmp_path_factory.mktemp("example-values-cache"))
    resources = Resources(AssayConfig(cache_dir=cache, model_precision="float32"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ASSAY_CACHE_DIR", cache)
        yield example_evaluations(resources)
    resources.close()


@pytest.mark.slow
def test_every_example_value_equals_the_snapshot(evaluations: dict[str, Any]) -> None:
    snapshot = read_snapshot()
    moved = snapshot_differences(snapshot["results"], example_results(evaluations))
    assert moved == [], (
        f"results moved since {snapshot['commit']} (snapshot != now; floats beyond rel "
        f"{REL_TOL:g}, abs {ABS_TOL:g}):\n" + "\n".join(moved) + "\n"
        "(python tests/example_values.py --write, if the change means it)"
    )


@pytest.mark.slow
def test_every_value_is_of_its_metrics_declared_kind(evaluations: dict[str, Any]) -> None:
    """A ``bool`` metric gives 1 or 0, with a judge or offline; every value lies in the
    metric's declared range."""
    wrong = set()
    for name, evaluation in evaluations.items():
        for metric in evaluation.metrics:
            low, high = metric.value_range
            for row in evaluation.results:
                value = row[metric.name].value
                if value is None:
                    continue
                if metric.unit == "bool" and value not in (0.0, 1.0):
                    wrong.add((name, metric.name, "bool", value))
                if value < low or (high is not None and value > high):
                    wrong.add((name, metric.name, "range", value))
    assert sorted(wrong) == []
