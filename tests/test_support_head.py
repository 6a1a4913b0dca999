"""The learned support head (`assay.models.support_head`): its features, worked out by hand,
the shipped file, and the fallback to the graded support on another embedder."""

from __future__ import annotations

import math

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.estimators.offline import sentence_support, sentence_support_texts
from assay.models.support_head import (
    FEATURES,
    SupportHead,
    longest_common_subsequence,
    support_features,
)


def test_longest_common_subsequence() -> None:
    assert longest_common_subsequence(list("abcbdab"), list("bdcaba")) == 4  # e.g. "bcba"
    assert longest_common_subsequence(["a", "b"], []) == 0
    assert longest_common_subsequence(["x", "y", "z"], ["x", "q", "z"]) == 2


def test_features_worked_out_by_hand() -> None:
    text = "Paris is in Germany. It has 3 towers."
    evidence = ["Paris is in France. It has two towers."]
    rows = [{"semantic": 0.9, "lexical": 0.5}, {"semantic": 0.8, "lexical": 0.5}]
    got = dict(zip(FEATURES, support_features(text, evidence, rows), strict=True))
    # text words: [paris is in germany] [it has 3 towers]; evidence: [paris is in france]
    # [it has two towers]. Content words {paris, germany, 3, towers}: germany, 3 are new.
    # Bigrams: (in germany), (has 3), (3 towers) new of 6. Per sentence, its best evidence
    # sentence shares 3 of 4 words in order (LCS 3/4); new bigrams 1/3 and 2/3; new content
    # words 1/2 each. Names after the first word: Germany (new). Numbers: 3 (new).
    assert got == pytest.approx(
        {
            "semantic_mean": 0.85,
            "semantic_min": 0.8,
            "lexical_mean": 0.5,
            "lexical_min": 0.5,
            "novel_words": 0.5,
            "novel_bigrams": 0.5,
            "sentences": 2,
            "log_words": math.log(9),
            "copy_mean": 0.75,
            "copy_min": 0.75,
            "local_bigrams_mean": 0.5,
            "local_bigrams_max": 2 / 3,
            "local_words_mean": 0.5,
            "local_words_max": 0.5,
            "novel_names": 1.0,
            "novel_numbers": 1,
        }
    )


def test_the_shipped_head_file() -> None:
    head = SupportHead()
    assert tuple(head.metadata["features"]) == FEATURES
    assert head.embedder == "use-multilingual-v3"
    assert head.weights.shape == head.mean.shape == head.scale.shape == (len(FEATURES),)
    # the training record: nested grouped CV on both dev sets, above the graded support's
    # 0.917 (BEGIN) and 0.775 (QAGS) measured on the same items
    assert head.metadata["nested_cv"]["qags-cnndm-dev"]["auroc"] > 0.80
    assert head.metadata["nested_cv"]["begin-wow-dev"]["auroc"] > 0.90
    # a supported-looking text (copied) against an unsupported one (all new words)
    copied = np.array([1, 1, 1, 1, 0, 0, 1, math.log(10), 1, 1, 0, 0, 0, 0, 0, 0])
    invented = np.array([0.3, 0.3, 0, 0, 1, 1, 1, math.log(10), 0.1, 0.1, 1, 1, 1, 1, 1, 2])
    p_copied, p_invented = head.probability(np.stack([copied, invented]))
    assert p_copied > head.threshold > p_invented


def test_another_embedder_falls_back_to_the_graded_support(resources: Resources) -> None:
    config = AssayConfig(
        cache_dir=resources.config.cache_dir, embedder="minilm", support_estimator="head"
    )
    res = Resources(config)
    texts, evidence = ["Canberra is the capital."], [["Canberra is the capital of Australia."]]
    needed = sentence_support_texts(texts, evidence)
    vectors = dict(zip(needed, res.embedder.embed(needed), strict=True))
    [support] = sentence_support(res, vectors, texts, evidence)
    assert support.estimator == "sentence_support"
    assert support.score == support.graded
    assert support.head_features is None


def test_local_results_pass_at_the_heads_threshold(resources: Resources, tmp_path) -> None:
    from assay.evaluation.runner import evaluate

    contexts = ["Canberra is the capital city of Australia. It was selected in 1908."]
    samples = [
        {"response": "Canberra is the capital city of Australia.", "contexts": contexts},
        {"response": "Perth became the capital in 1850 after a vote.", "contexts": contexts},
    ]
    config = AssayConfig(cache_dir=str(tmp_path), judge_model=None, support_estimator="head")
    res = Resources(config)
    res.__dict__["embedder"] = resources.embedder
    run = evaluate(samples, metrics=["faithfulness", "hallucination"], resources=res)
    threshold = round(res.support_head.threshold, 4)
    faithful, invented = run.results
    assert faithful["faithfulness"].details["pass_threshold"] == threshold
    assert faithful["hallucination"].details["pass_threshold"] == round(1 - threshold, 4)
    assert faithful["faithfulness"].value >= threshold > invented["faithfulness"].value
    # one of two passes, by either metric (hallucination = 1 - p, lower is better)
    rates = {m.name: m.pass_rate for m in run.summary()}
    assert rates["faithfulness"] == rates["hallucination"] == 0.5


def test_the_head_is_not_the_default_and_is_asked_for(resources: Resources) -> None:
    """The head is not the default (it lost to the graded support on both data sets left
    out of its training; the default, ``auto``, is the graded support, averaged with the
    entailment model's where it is installed, `assay.estimators.entailment`);
    ``support_estimator = "head"`` asks for the head, which then scores the same vectors."""
    texts, evidence = ["Canberra is the capital."], [["Canberra is the capital of Australia."]]
    needed = sentence_support_texts(texts, evidence)
    vectors = dict(zip(needed, resources.embedder.embed(needed), strict=True))
    default = Resources(AssayConfig(cache_dir=resources.config.cache_dir))
    [graded] = sentence_support(default, vectors, texts, evidence)
    assert default.config.support_estimator == "auto"
    assert (graded.estimator, graded.score) == ("sentence_support", graded.graded)
    head = Resources(AssayConfig(cache_dir=resources.config.cache_dir, support_estimator="head"))
    [learned] = sentence_support(head, vectors, texts, evidence)
    assert learned.estimator == "support_head" and learned.head_features is not None
    assert learned.graded == graded.graded  # the same graded score, reported beside it
