"""The runner with small unregistered metrics whose values are known exactly."""

import pytest

from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.core.stats import bootstrap_ci
from assay.engine.resources import Resources
from assay.evaluation.runner import evaluate, passes
from assay.metrics.base import Metric


class LengthRatio(Metric):
    """len(response) / 10, a test metric."""

    name = "length_ratio"
    family = "test"
    requires = ("response",)
    default_threshold = 0.5

    def compute(self, sample, res):
        return self.result(len(sample.response) / 10)


class Errors(Metric):
    """Lower-is-better metric that raises on the word 'boom'."""

    name = "errors"
    family = "test"
    requires = ("response",)
    higher_is_better = False
    default_threshold = 0.2

    def compute_batch(self, samples, res):
        out = []
        for s in samples:
            if "boom" in s.response:
                raise RuntimeError("exploded")
            out.append(self.result(0.1 * len(s.response.split())))
        return out


@pytest.fixture()
def res(tmp_path):
    return Resources(AssayConfig(cache_dir=str(tmp_path), chunk_size=2))


def test_summary_numbers_are_computed_from_the_values(res):
    samples = [Sample(id=str(i), response="x" * n) for i, n in enumerate([2, 4, 6, 8])] + [
        Sample(id="none")
    ]
    run = evaluate(samples, metrics=[LengthRatio()], resources=res)
    (s,) = run.summary()
    # values 0.2, 0.4, 0.6, 0.8 and one N/A
    assert s.n == 4 and s.n_na == 1 and s.n_error == 0
    assert s.mean == pytest.approx(0.5)
    assert s.median == pytest.approx(0.5)
    assert s.p90 == pytest.approx(0.74)  # h = 3 * 0.9 = 2.7 -> 0.6 + 0.7 * 0.2
    assert (s.ci_low, s.ci_high) == bootstrap_ci([0.2, 0.4, 0.6, 0.8], seed=0)
    assert s.threshold == 0.5
    assert s.pass_rate == pytest.approx(0.5)  # 0.6 and 0.8 are >= 0.5
    assert run.results[4]["length_ratio"].reason == "missing input: response"


class DomainFlagged(Metric):
    """1.0 per response; a response in capitals reads as outside the estimator's domain."""

    name = "domain_flagged"
    family = "test"
    requires = ("response",)

    def compute(self, sample, res):
        unlike = sample.response.isupper()
        reasons = ["shouting: not in the training data"] if unlike else []
        return self.result(1.0, in_domain=not unlike, out_of_domain=reasons)


def test_values_outside_the_estimators_domain_are_counted_and_shown(res):
    """Each summary counts the values whose details say ``in_domain: false`` (a value
    without the key, or N/A, is not counted); the run table gains a column for them and
    a line names the metrics, only when some value is outside."""
    from rich.console import Console

    from assay.cli.report import summary_table

    samples = [Sample(response=r) for r in ("fine", "LOUD", "ALSO LOUD", "calm")]
    run = evaluate(samples, metrics=[DomainFlagged(), LengthRatio()], resources=res)
    flagged, plain = run.summary()
    assert (flagged.n, flagged.n_out_of_domain) == (4, 2)
    assert (plain.n, plain.n_out_of_domain) == (4, 0)
    console = Console(width=200, record=True)
    console.print(summary_table(run.summary()))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "metric" in line)
    assert "out of domain" in header
    row = next(line for line in text.splitlines() if "domain_flagged" in line)
    assert [cell.strip() for cell in row.split("│")[2:6]] == ["4", "0", "0", "2"]
    console = Console(width=200, record=True)
    console.print(summary_table(run.summary([0, 3])))
    assert "out of domain" not in console.export_text()


def test_a_failing_sample_is_isolated_and_polarity_drives_pass_rate(res):
    samples = [Sample(response="a"), Sample(response="boom here"), Sample(response="a b c")]
    run = evaluate(samples, metrics=[Errors()], resources=res)
    values = run.values("errors")
    assert values[0] == pytest.approx(0.1)
    assert values[1] is None
    assert values[2] == pytest.approx(0.3)
    assert run.results[1]["errors"].error == "RuntimeError: exploded"
    (s,) = run.summary()
    assert s.n_error == 1
    assert s.pass_rate == pytest.approx(0.5)  # 0.1 <= 0.2 passes, 0.3 does not
    assert passes(Errors, 0.2, 0.2) and not passes(Errors, 0.21, 0.2)


def test_on_sample_sees_every_sample_in_order_and_groups_split_by_tag(res):
    seen = []
    samples = [
        Sample(response="aa", tags={"method": "a"}),
        Sample(response="aaaa", tags={"method": "b"}),
        Sample(response="aaaaaa", tags={"method": "a"}),
    ]
    run = evaluate(
        samples,
        metrics=[LengthRatio()],
        resources=res,
        on_sample=lambda i, s, r: seen.append((i, r["length_ratio"].value)),
    )
    assert seen == [(0, pytest.approx(0.2)), (1, pytest.approx(0.4)), (2, pytest.approx(0.6))]
    groups = run.groups(["method"])
    assert groups == {("a",): [0, 2], ("b",): [1]}
    assert run.summary(groups[("a",)])[0].mean == pytest.approx(0.4)


def test_flat_rows_carry_id_tags_values_and_components(res):
    class WithParts(Metric):
        """Two components."""

        name = "parts"
        family = "test"

        def compute(self, sample, res):
            return self.result(0.5, components={"left": 0.25, "right": 0.75})

    run = evaluate([Sample(id="s1", tags={"model": "m"})], metrics=[WithParts()], resources=res)
    assert run.row(0) == {
        "id": "s1",
        "tag.model": "m",
        "parts": 0.5,
        "parts.left": 0.25,
        "parts.right": 0.75,
    }


def test_nan_never_leaves_a_metric(res):
    class Undefined(Metric):
        """Divides zero by zero."""

        name = "undefined"
        family = "test"

        def compute(self, sample, res):
            return self.result(float("nan"))

    (result,) = evaluate([Sample()], metrics=[Undefined()], resources=res).results[0].values()
    assert result.value is None
    assert "non-finite" in result.reason


def test_a_dataframe_is_evaluated_row_by_row(res):
    import pandas as pd

    frame = pd.DataFrame({"id": ["a", "b"], "answer": ["xx", "xxxx"]})
    run = evaluate(frame, metrics=[LengthRatio()], resources=res)
    assert [s.id for s in run.samples] == ["a", "b"]
    assert run.values("length_ratio") == [pytest.approx(0.2), pytest.approx(0.4)]


def test_a_threshold_the_user_sets_beats_a_per_sample_threshold(tmp_path):
    from assay.core.result import MetricResult
    from assay.evaluation.runner import applied_threshold
    from assay.metrics.base import PASS_THRESHOLD

    arabic = MetricResult("length_ratio", 0.6, details={PASS_THRESHOLD: 0.3})
    plain = MetricResult("length_ratio", 0.6)
    default = AssayConfig(cache_dir=str(tmp_path))
    assert applied_threshold(LengthRatio, arabic, default) == 0.3  # the per-sample one
    assert applied_threshold(LengthRatio, plain, default) == 0.5  # the class default (0.5)
    strict = AssayConfig(cache_dir=str(tmp_path), thresholds={"length_ratio": 0.9})
    assert applied_threshold(LengthRatio, arabic, strict) == 0.9  # the user's wins


def test_huge_integers_in_evidence_stay_writable_json():
    import json

    from assay.core.jsonout import to_jsonable

    big = 10**5000  # str(big) itself raises past 4,300 digits
    loaded = json.loads(json.dumps(to_jsonable({"n": big, "small": 7})))
    assert loaded == {"n": "1" + "0" * 5000, "small": 7}
