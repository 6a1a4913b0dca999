"""The judge and RAG specifications' worked numbers: answer correctness (the formula, end
to end from the judge's scores, custom weights, a part that fails), the RAGAS score
example, the factual accuracy grades and its G-Eval steps, and rank-aware average
precision."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.metrics.judged import (
    AnswerClassification,
    AnswerCorrectness,
    FactualAccuracy,
    Faithfulness,
    JudgedRelevance,
    average_precision,
    factual_grade,
    ragas_composite,
    weighted_correctness,
)
from judge_server import JudgeServer

pytest_plugins = ["tests.judged_metrics_helpers"]
pytest.register_assert_rewrite("tests.judged_metrics_helpers")

from tests.judged_metrics_helpers import SAMPLE, by_task, grounding, judged, reference  # noqa: E402

# ---- the specifications' worked numbers -----------------------------------------------------


def test_answer_correctness_formula_worked_example() -> None:
    # the judge specification: 0.90 x 0.7 + 1.00 x 0.3 = 0.63 + 0.30 = 0.93
    weights = {"relevance": 0.7, "faithfulness": 0.3}
    assert weighted_correctness(0.90, 1.00, weights) == pytest.approx(0.93)
    # the judge specification's full example: 1.0 x 0.7 + 1.0 x 0.3 = 1.0
    assert weighted_correctness(1.0, 1.0, weights) == pytest.approx(1.0)


def test_answer_correctness_end_to_end_from_judge_scores(
    resources: Resources, tmp_path: Path, server: JudgeServer
) -> None:
    server.script = by_task(
        {
            "relevance_rubric": {"score": 0.90, "reason": "good detail"},
            "grounding_rubrics": grounding(faithfulness=1.00),
        }
    )
    res = judged(resources, tmp_path, server)
    result = AnswerCorrectness().score(SAMPLE, res)
    assert result.value == pytest.approx(0.93)  # 0.7 x 0.90 + 0.3 x 1.00
    assert result.components == {"relevance": 0.90, "faithfulness": 1.00}
    assert result.method == "llm"
    # the parts' own metrics reuse the same two calls (memo): no more requests
    assert JudgedRelevance().score(SAMPLE, res).value == 0.90
    assert Faithfulness().score(SAMPLE, res).value == 1.00
    assert server.calls == 2


def test_answer_correctness_custom_weights(resources: Resources, tmp_path: Path) -> None:
    # equal weights: (0.5 x 0.90 + 0.5 x 1.00) / 1.0 = 0.95
    assert weighted_correctness(0.9, 1.0, {"relevance": 1, "faithfulness": 1}) == 0.95
    with pytest.raises(ValueError, match="'relevance' and 'faithfulness'"):
        AnswerCorrectness(weights={"relevance": 1.0})
    with pytest.raises(ValueError):
        AssayConfig(answer_correctness_weights={"relevance": -1, "faithfulness": 1})


def test_answer_correctness_is_none_when_a_part_fails(
    resources: Resources, tmp_path: Path, server: JudgeServer
) -> None:
    # the faithfulness judge answers nonsense twice -> that part fails -> None with reason
    server.script = by_task({"grounding_rubrics": "I refuse to grade this."})
    res = judged(resources, tmp_path, server)
    result = AnswerCorrectness().score(SAMPLE, res)
    assert result.value is None
    assert "faithfulness" in result.reason and "relevance" not in result.reason.split(";")[0][:9]
    assert "unparsable" in result.error


def test_ragas_score_reproduces_the_specification_example() -> None:
    # the RAG specification, local_search: F 100, CP NaN, CR 100, AR 83.27 -> 93.73
    # (0.3 x 1.0 + 0.2 x 1.0 + 0.3 x 0.8327) / (0.3 + 0.2 + 0.3) = 0.74981 / 0.8 = 0.93726
    value, weights = ragas_composite(
        {
            "faithfulness": 1.0,
            "context_precision": None,
            "context_recall": 1.0,
            "answer_relevance": 0.8327,
        }
    )
    assert round(value, 4) == 0.9373
    assert weights == pytest.approx(
        {"faithfulness": 0.375, "context_recall": 0.25, "answer_relevance": 0.375}
    )
    # basic_search: 0, 0, 0, 83.27 -> 0.3 x 0.8327 = 0.2498 (the specification: 24.98)
    value, _ = ragas_composite(
        {
            "faithfulness": 0.0,
            "context_precision": 0.0,
            "context_recall": 0.0,
            "answer_relevance": 0.8327,
        }
    )
    assert round(value, 4) == 0.2498
    # llm_with_context: only AR 82.29 -> 82.29
    value, _ = ragas_composite({"answer_relevance": 0.8229})
    assert value == pytest.approx(0.8229)
    assert ragas_composite({"faithfulness": None}) == (None, {})


@pytest.mark.parametrize(
    ("score", "grade"),
    [
        (1.0, "A"),
        (0.80, "A"),
        (0.7999, "B"),
        (0.60, "B"),
        (0.5999, "C"),
        (0.40, "C"),
        (0.3999, "D"),
        (0.20, "D"),
        (0.1999, "E"),
        (0.0, "E"),
    ],
)
def test_factual_grade_boundaries(score: float, grade: str) -> None:
    assert factual_grade(score) == grade


@pytest.mark.parametrize(
    ("steps", "value", "grade"),
    [
        # 0.5 x 0.80 + 0.3 x 0.80 + 0.2 x 0.80 = 0.80 -> A (no float slip below 80)
        ((80, 80, 80), 0.80, "A"),
        # 0.5 x 1.00 + 0.3 x 0 + 0.2 x 0 = 0.50 -> C
        ((100, 0, 0), 0.50, "C"),
        # 0.5 x 0.60 + 0.3 x 0.60 + 0.2 x 0.60 = 0.60 -> B
        ((60, 60, 60), 0.60, "B"),
        # 0.5 x 0.20 + 0.3 x 0.20 + 0.2 x 0.20 = 0.20 -> D
        ((20, 20, 20), 0.20, "D"),
        # 0.5 x 0.10 + 0.3 x 0.30 + 0.2 x 0.40 = 0.05 + 0.09 + 0.08 = 0.22 -> D
        ((10, 30, 40), 0.22, "D"),
        # 0.5 x 0.19 + 0.3 x 0.19 + 0.2 x 0.19 = 0.19 -> E
        ((19, 19, 19), 0.19, "E"),
    ],
)
def test_factual_accuracy_from_geval_steps(
    resources: Resources,
    tmp_path: Path,
    server: JudgeServer,
    steps: tuple[int, int, int],
    value: float,
    grade: str,
) -> None:
    server.script = by_task({"reference_verdicts": reference(steps)})
    res = judged(resources, tmp_path, server)
    result = FactualAccuracy().score(SAMPLE, res)
    assert result.value == pytest.approx(value)
    assert result.details["grade"] == grade
    assert result.components["correctness"] == pytest.approx(steps[0] / 100)
    assert result.details["reasoning"]["overall"] == "summary"
    # the classification reads the same reply: no second call
    assert AnswerClassification().score(SAMPLE, res).details["label"] == "CORRECT"
    assert server.calls_by_task() == {"reference_verdicts": 1}


def test_average_precision_rank_aware_form() -> None:
    # [1, 0, 1]: (1/1 + 2/3) / 2 = 0.8333; [0, 1, 1]: (1/2 + 2/3) / 2 = 0.5833
    assert average_precision([True, False, True]) == pytest.approx(0.8333, abs=1e-4)
    assert average_precision([False, True, True]) == pytest.approx(0.5833, abs=1e-4)
    assert average_precision([False, False]) == 0.0
