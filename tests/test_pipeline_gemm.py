"""spaCy's layers multiplying through numpy's BLAS (assay.text.pipeline_gemm): the products
of thinc's own ``gemm`` within float rounding, and the same annotations as the pipeline
spaCy loads, on the shipped examples and news articles."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.dev_data import dev_file
from tests.test_attribute_rules import _example_texts

from assay.text import pipeline_gemm
from assay.text.pipeline_gemm import blas_gemm_ops, numpy_blas, use_blas_gemm

spacy = pytest.importorskip("spacy")
from thinc.api import NumpyOps  # noqa: E402


@pytest.fixture(scope="module")
def pipelines(resources):
    """Assay's pipeline (given the BLAS products) and the same pipeline as spaCy loads it."""
    plain = spacy.load(resources.config.spacy_model)
    return resources.nlp, plain


@pytest.mark.parametrize(("trans1", "trans2"), [(False, False), (True, False), (False, True)])
def test_gemm_is_thincs_within_float_rounding(trans1, trans2):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 5) if not trans1 else (5, 7)).astype("float32")
    y = rng.standard_normal((5, 4) if not trans2 else (4, 5)).astype("float32")
    ours, thincs = blas_gemm_ops(), NumpyOps()
    expected = thincs.gemm(x, y, trans1=trans1, trans2=trans2)
    got = ours.gemm(x, y, trans1=trans1, trans2=trans2)
    # by hand: the product of the (transposed) operands
    np.testing.assert_allclose(got, (x.T if trans1 else x) @ (y.T if trans2 else y), rtol=1e-6)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    out = np.zeros((7, 4), dtype="float32")
    assert ours.gemm(x, y, out=out, trans1=trans1, trans2=trans2) is out
    np.testing.assert_array_equal(out, got)


def test_every_layer_of_the_pipeline_runs_on_the_blas_products(pipelines):
    nlp, plain = pipelines
    with_models = [name for name, c in nlp.pipeline if getattr(c, "model", None) is not None]
    assert with_models == ["tok2vec", "tagger", "parser", "ner"]
    for name in with_models:
        kinds = {type(layer.ops).__name__ for layer in nlp.get_pipe(name).model.walk()}
        assert kinds == {"BlasGemmOps"}, name
        assert {type(layer.ops) for layer in plain.get_pipe(name).model.walk()} == {NumpyOps}
    assert use_blas_gemm(spacy.blank("en")) == 0  # no component with layers


def test_a_pipeline_keeps_blis_where_numpy_has_no_fast_blas(monkeypatch, resources):
    assert "openblas" in numpy_blas()  # the wheels' BLAS (scipy-openblas)
    nlp = spacy.load(resources.config.spacy_model)
    monkeypatch.setattr(pipeline_gemm, "numpy_blas", lambda: "blas")  # a reference BLAS
    assert use_blas_gemm(nlp) == 0
    assert {type(layer.ops) for layer in nlp.get_pipe("parser").model.walk()} == {NumpyOps}
    monkeypatch.undo()
    named = ("tok2vec", "tagger", "parser", "ner")  # the components with layers
    layers = sum(len(list(nlp.get_pipe(name).model.walk())) for name in named)
    assert use_blas_gemm(nlp) == layers


def _same_annotations(pipelines, texts: list[str]) -> int:
    """Assert both pipelines annotate each text alike (every annotation but the token
    vectors, which differ in float rounding); the tokens compared."""
    nlp, plain = pipelines
    tokens = 0
    for ours, theirs in zip(nlp.pipe(texts), plain.pipe(texts), strict=True):
        exclude = ["tensor", "user_data"]
        assert ours.to_bytes(exclude=exclude) == theirs.to_bytes(exclude=exclude), ours.text[:80]
        np.testing.assert_allclose(ours.tensor, theirs.tensor, atol=1e-4)
        tokens += len(ours)
    return tokens


def test_annotations_are_spacys_on_the_examples(pipelines):
    assert _same_annotations(pipelines, _example_texts()) > 3_500


def test_annotations_are_spacys_on_news_articles(pipelines):
    lines = dev_file("qags-cnndm-dev.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    assert _same_annotations(pipelines, [json.loads(line)["article"] for line in lines]) > 10_000
