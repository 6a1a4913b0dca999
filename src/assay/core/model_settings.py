"""Settings of Assay's own local models: which entailment model, and in which number
format they run; `assay.core.config.AssayConfig` inherits them."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings

__all__ = ["ModelSettings"]


class ModelSettings(BaseSettings):
    """The local models' settings (see the module docstring)."""

    entailment_model: str | None = Field(
        None,
        validation_alias=AliasChoices("ASSAY_ENTAILMENT_MODEL", "entailment_model"),
        description=(
            "Local folder of a sequence-classification model whose labels name entailment "
            "and contradiction, neutral or not_entailment; default: Assay's shipped model."
        ),
    )
    model_precision: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        validation_alias=AliasChoices("ASSAY_MODEL_PRECISION", "model_precision"),
        description=(
            "Number format of Assay's own torch models (the entailment cross-encoder): auto "
            "(bfloat16 on a CPU that computes it natively, AMX or AVX-512 BF16, else "
            "float32; the model's name then ends in /bf16), float32 (the fast path off), "
            "bfloat16."
        ),
    )
