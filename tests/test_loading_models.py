"""The models a run is sure to use load in a thread while its data is read
(`Resources.load_in_background`): which ones, once each, and a model that cannot load
still fails in its metric as before."""

from __future__ import annotations

import pytest

import assay
from assay.core.config import AssayConfig
from assay.engine.resources import Resources
from assay.models.bertscore import BERTScorer


def test_bertscore_and_a_torch_embedder_load_when_a_metric_is_sure_to_use_them(
    tmp_path,
) -> None:
    res = Resources(AssayConfig(embedder="minilm", cache_dir=str(tmp_path), use_cache=False))
    res.load_in_background([frozenset({"bertscore"}), frozenset({"embedder"})])
    res.wait_for_loading()
    assert {"bertscorer", "embedder"} <= set(res.__dict__)
    assert res._loading is not None and res._loading.name == "assay-load-models"


def test_models_a_metric_may_not_use_are_not_loaded(tmp_path) -> None:
    # the judged metrics use the embedder in some setups only; USE is no torch model
    judged = Resources(AssayConfig(embedder="minilm", cache_dir=str(tmp_path)))
    judged.load_in_background([frozenset({"judge", "embedder", "spacy"})])
    assert judged._loading is None
    use = Resources(AssayConfig(embedder="use-multilingual", cache_dir=str(tmp_path)))
    use.load_in_background([frozenset({"embedder"})])
    assert use._loading is None and "embedder" not in use.__dict__


def test_a_run_loads_its_scorer_once(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[BERTScorer] = []
    original = BERTScorer.from_config.__func__

    def counted(cls, config):
        made.append(original(cls, config))
        return made[-1]

    monkeypatch.setattr(BERTScorer, "from_config", classmethod(counted))
    res = Resources(AssayConfig(cache_dir=str(tmp_path), chunk_size=2))
    samples = [{"response": f"The cat sat {i}.", "expected": "A cat sat."} for i in range(5)]
    evaluation = assay.evaluate(samples, metrics=["bertscore"], resources=res, keep=False)
    assert res._loading is not None and not res._loading.is_alive()
    assert len(made) == 1 and res.bertscorer is made[0]
    (summary,) = evaluation.summary()
    assert summary.name == "bertscore" and summary.n == 5


def test_a_model_that_cannot_load_fails_in_its_metric(tmp_path) -> None:
    missing = str(tmp_path / "no-such-model")
    res = Resources(AssayConfig(bertscore_model=missing, cache_dir=str(tmp_path)))
    res.load_in_background([frozenset({"bertscore"})])
    res.wait_for_loading()
    assert "bertscorer" not in res.__dict__  # the failure is not kept
    evaluation = assay.evaluate(
        [{"response": "a", "expected": "b"}], metrics=["bertscore"], resources=res
    )
    result = evaluation.results[0]["bertscore"]
    assert result.value is None and "does not exist" in (result.error or "")
