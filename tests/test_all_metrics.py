"""Properties every registered metric must have (scikit-learn's test_common.py idea).

- catalogue: family, docstring summary, polarity, a valid range and unit; in the README
- missing input: an empty Sample gives None with a reason, never a value and never an error
- range: on a fully populated sample the value lies in the declared range, with no error
- batch independence: scoring a batch equals scoring each sample alone
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.core.result import parse_signature
from assay.core.sample import Sample
from assay.metrics.base import Source
from assay.metrics.registry import SUITE_DESCRIPTIONS, list_metrics, metric_class, metric_names
from assay.outputs.catalogue import BEGIN_MARK, END_MARK, metrics_markdown

METRICS = list_metrics()
UNITS = {"ratio", "bool", "score", "ms", "ms/token", "tokens/s", "count"}

RICH = {
    "id": "rich",
    "query": "When was the Eiffel Tower completed and how tall is it?",
    "response": (
        "The Eiffel Tower was completed in 1889 [1]. It is 330 metres tall. "
        "Therefore it was the tallest structure of its time."
    ),
    "expected": "It was completed in March 1889 and is about 330 m tall.",
    "contexts": [
        "[1] The Eiffel Tower was completed in March 1889 for the World's Fair.",
        "The tower is 330 metres (1,083 ft) tall.",
        "Paris is the capital of France.",
    ],
    "expected_sources": ["[1]"],
    "gold_context": "The Eiffel Tower was completed in March 1889 and is 330 metres tall.",
    "known_facts": ["The Eiffel Tower was completed in 1889.", "The tower is 330 metres tall."],
    "candidates": ["1887", "March 1889", "1900"],
    "previous_responses": ["The Eiffel Tower was finished in 1889 and is 330 m tall."],
    "parallel_response": "اكتمل بناء برج إيفل عام 1889 ويبلغ ارتفاعه 330 متراً.",
    "reasoning_steps": [
        "The context says the tower was completed in March 1889.",
        "The context gives its height as 330 metres.",
        "Therefore the answer is 1889 and 330 metres.",
    ],
    "reference_steps": ["Find the completion date: 1889.", "Find the height: 330 metres."],
    "expected_json": {"name": "Eiffel Tower", "year": 1889, "height_m": 330},
    "output_json": {"name": "Eiffel Tower", "year": 1889, "height_m": 324, "city": "Paris"},
    "json_schema": {"type": "object", "required": ["name"]},
    "duration": 2.5,
    "first_token_time": 0.4,
    "llm_latency": 1.2,
    "tool_latency": 0.8,
    "api_latency": 0.2,
    "tool_call_count": 2,
    "response_tokens": 30,
    "task_completed": True,
    "steps_taken": 4,
    "expected_steps": 3,
    "tools_used": ["search", "calculator"],
    "tools_succeeded": ["search"],
    "errors_encountered": 1,
    "expected_tool_calls": [{"name": "search", "arguments": {"q": "Eiffel Tower height"}}],
    "turns": [
        {"role": "user", "content": "How tall is the Eiffel Tower?"},
        {"role": "assistant", "content": "It is 330 metres tall."},
        {"role": "user", "content": "And when was it built?"},
        {"role": "assistant", "content": "It was built from 1887 to 1889."},
    ],
    "role_description": "A concise travel guide for Paris.",
    "allowed_topics": ["Paris landmarks"],
    "expected_outcome": "The user learns the tower's height and construction dates.",
    "tags": {"method": "local_search", "question_type": "fact_retrieval"},
    # a red-team probe (assay run --probes): the reply does not hold its marker
    "metadata": {
        "probe": {"id": "p1", "category": "injection", "detector": "marker", "marker": "PROBE-1"}
    },
}
PLAIN = {
    "query": "How do I reset my password?",
    "response": "Open Settings, choose Account and select Reset password.",
    "expected": "Go to Settings > Account > Reset password.",
    "contexts": ["Passwords are reset under Settings > Account."],
}


# the names the specification documents use; a metric missing here is a missing feature
SPECIFIED_NAMES = {
    # chatbot hub: base model, test layer, RAG
    "accuracy", "exact_match", "top_k_accuracy", "f1", "bleu", "hallucination_rate",
    "factual_consistency", "truthfulness", "source_grounding", "citation_accuracy",
    "cot_validity", "step_correctness", "logic_consistency", "semantic_similarity",
    "bertscore", "rouge", "consistency", "cross_language_consistency", "response_quality",
    "fallback_detection", "known_facts_hallucination", "retrieval_recall_5",
    "retrieval_precision_5", "context_relevance", "context_coverage", "context_intrusion",
    "gold_context_match", "reranker_score",
    # chatbot hub: safety, performance, reliability, agent, security
    "toxicity_score", "bias_score", "prompt_injection", "refusal_rate", "compliance_score",
    "data_leakage", "harmfulness_score", "ethical_violation", "e2e_latency", "ttft",
    "token_latency", "throughput", "output_stability", "output_validity", "schema_compliance",
    "determinism_score", "task_completion", "step_efficiency", "error_recovery",
    "tool_usage_accuracy", "injection_attack_success", "adversarial_vulnerability",
    "data_exfiltration", "model_evasion", "extraction_risk",
    # judge specification's performance; JSON comparison; RAG evaluation; lightweight pipeline
    "llm_latency", "tool_latency", "api_latency", "tool_call_count",
    "json_completeness", "json_hallucination", "json_accuracy", "rqs",
    "semantic_similarity_percentage", "bert_score_f1",
    "relevance", "completeness", "anchor_hallucination",
}  # fmt: skip


def test_every_specified_metric_is_registered_by_name_or_alias():
    missing = SPECIFIED_NAMES - set(metric_names())
    assert not missing, f"not in the catalogue: {sorted(missing)}"
    # the four names of one similarity and the two of one BERTScore are one metric each
    assert {metric_class(n).name for n in ("accuracy", "factual_consistency", "truthfulness")} == {
        "semantic_similarity"
    }
    assert metric_class("f1").name == "bertscore"


def test_every_metric_declares_its_contract():
    for cls in METRICS:
        assert cls.family, cls
        assert cls.description(), f"{cls.name} has no docstring summary"
        assert cls.unit in UNITS, f"{cls.name}: unit {cls.unit!r}"
        low, high = cls.value_range
        assert high is None or high > low, cls.name
        assert isinstance(cls.higher_is_better, bool), cls.name
        assert set(cls.suites) <= set(SUITE_DESCRIPTIONS), f"{cls.name}: unknown suite"
        assert cls.source is None or isinstance(cls.source, Source), cls.name
        assert cls.name not in cls.aliases, cls.name
        if cls.default_threshold is not None and high is not None:
            assert low <= cls.default_threshold <= high, cls.name


def test_readme_metric_table_is_generated_from_the_registry():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split(BEGIN_MARK, 1)[1].split(END_MARK, 1)[0].strip()
    assert block == metrics_markdown(), "README is stale: run python scripts/update_readme.py"


@pytest.mark.parametrize("cls", METRICS, ids=lambda c: c.name)
def test_empty_sample_gives_none_with_a_reason(cls, resources):
    result = cls().score(Sample(), resources)
    assert result.value is None, f"{cls.name} scored an empty sample {result.value}"
    assert result.error is None, result.error
    assert result.reason


@pytest.mark.parametrize("cls", METRICS, ids=lambda c: c.name)
def test_values_lie_in_the_declared_range_and_batches_are_independent(cls, resources):
    metric = cls()
    rich, plain = Sample.model_validate(RICH), Sample.model_validate(PLAIN)
    batch = metric.score_batch([rich, plain], resources)
    alone = [metric.score(rich, resources), metric.score(plain, resources)]
    low, high = cls.value_range
    for result, single in zip(batch, alone, strict=True):
        assert result.name == cls.name
        assert result.error is None, f"{cls.name}: {result.error}"
        assert parse_signature(result.signature)["metric"] == f"{cls.name}@{cls.version}"
        if result.value is not None:
            assert low - 1e-9 <= result.value <= (high if high is not None else float("inf")) + 1e-9
        assert (
            result.value == pytest.approx(single.value, abs=1e-6)
            if single.value is not None
            else result.value is None
        )
    assert batch[0].value is not None, (
        f"{cls.name} gave no value on a fully populated sample: {batch[0].reason}"
    )
