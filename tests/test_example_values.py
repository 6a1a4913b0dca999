"""What Assay computes on the example files: every value, method, error and evidence equals
the snapshot to the last bit (`example_values`: what is compared, and how to write the
snapshot again), and every value is of the kind its metric declares."""

from __future__ import annotations

import json

import pytest

from example_values import SNAPSHOT, example_digests, example_evaluations


@pytest.fixture(scope="module")
def evaluations(tmp_path_factory):
    """The evaluations with models of their own and an empty embedding cache, as the
    snapshot was written: a vector cached by another test, embedded in another batch,
    can differ from a fresh one in its last bits."""
    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources

    cache = str(tmp_path_factory.mktemp("example-values-cache"))
    resources = Resources(AssayConfig(cache_dir=cache))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ASSAY_CACHE_DIR", cache)
        yield example_evaluations(resources)
    resources.close()


@pytest.mark.slow
def test_every_example_value_equals_the_snapshot(evaluations):
    expected = json.loads(SNAPSHOT.read_text())
    found = example_digests(evaluations)
    moved = sorted(k for k in expected["digests"] if found.get(k) != expected["digests"][k])
    added = sorted(set(found) - set(expected["digests"]))
    assert (moved, added) == ([], []), (
        f"results moved since {expected['commit']}: {moved}; new: {added} "
        "(python tests/example_values.py --write, if the change means it)"
    )


@pytest.mark.slow
def test_every_value_is_of_its_metrics_declared_kind(evaluations):
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
