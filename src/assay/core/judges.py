"""Judge panel settings: several judges (``judge_models``) and how their verdicts combine
(``panel``), read from ``[tool.assay]``, ``ASSAY_JUDGE_MODELS`` (JSON) and ``ASSAY_PANEL``.

Each judge names its model, its OpenAI-compatible ``base_url`` and the NAME of the
environment variable holding its key (``api_key_env``), never the key itself: a file that
holds a key is refused. A judge that leaves ``base_url`` or ``api_key_env`` out takes the
single-judge setting (``judge_base_url``, ``judge_api_key``), so judges that differ only
by model need one line each. `PanelSettings.judge_members` resolves them, reading each
key from the environment and registering it as a secret (`assay.core.redaction`), so that
nothing Assay writes contains it. A panel of one is the single judge it names.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode

__all__ = ["JUDGE_OFF", "PANEL_RULES", "JudgeMember", "JudgeSpec", "PanelSettings", "judge_labels"]

#: how a panel combines its judges' values (`assay.judge.panel_rules.combine`)
PANEL_RULES = ("mean", "majority", "min")
#: the settings that turn the judge off: no single judge and no panel
JUDGE_OFF: dict[str, Any] = {"judge_model": None, "judge_models": []}


class JudgeSpec(BaseModel):
    """One judge of a panel, as written in ``judge_models``.

    Attributes:
        model: the model name as its server knows it.
        base_url: the server's OpenAI-compatible ``/v1`` URL (None: ``judge_base_url``,
            else OpenAI's).
        api_key_env: the environment variable holding its key (None: ``judge_api_key``).
        rate_limit: most requests a second to this judge (None: ``judge_rate_limit``).
        price_prompt, price_completion: its price per 1M tokens (None: the judge_price_*).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    rate_limit: float | None = Field(None, gt=0, allow_inf_nan=False)
    price_prompt: float | None = Field(None, ge=0, allow_inf_nan=False)
    price_completion: float | None = Field(None, ge=0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_key_in_files(cls, value: Any) -> Any:
        if isinstance(value, dict) and "api_key" in value:
            raise ValueError(
                "a judge's key is never written in a file: name the environment variable "
                "that holds it in api_key_env"
            )
        return value

    @field_validator("api_key_env")
    @classmethod
    def _variable_is_set(cls, name: str | None) -> str | None:
        if name is not None and not os.environ.get(name):
            raise ValueError(f"api_key_env names {name!r}, which is not set in the environment")
        return name


@dataclass(frozen=True)
class JudgeMember:
    """A panel judge resolved: its label (the model, or ``model@host`` when two judges
    share a model name), model, URL, key, rate limit and prices."""

    label: str
    model: str
    base_url: str | None
    api_key: str | None
    rate_limit: float | None
    price_prompt: float | None
    price_completion: float | None


def judge_labels(specs: list[tuple[str, str | None]]) -> list[str]:
    """The label of each judge (model, base URL): its model name, or ``model@host[:port]``
    for a model name two judges share (the URL's credentials and path left out)."""
    models = [model for model, _ in specs]
    labels = []
    for model, url in specs:
        if models.count(model) == 1:
            labels.append(model)
            continue
        host = urlsplit(url).netloc.rpartition("@")[2] if url else "api.openai.com"
        labels.append(f"{model}@{host}")
    if len(set(labels)) != len(labels):
        raise ValueError(f"judge_models names the same judge twice: {labels}")
    return labels


class PanelSettings(BaseSettings):
    """The panel's settings; `assay.core.config.AssayConfig` inherits them."""

    judge_models: Annotated[list[JudgeSpec], NoDecode] = Field(
        default_factory=list,
        validation_alias=AliasChoices("ASSAY_JUDGE_MODELS", "judge_models"),
        description=(
            "Several judges, a panel: a list of {model, base_url, api_key_env} (the NAME of "
            "the variable holding the key), e.g. ASSAY_JUDGE_MODELS as JSON. Replaces "
            "judge_model; a panel of one is that judge (docs/calibration.md)."
        ),
    )
    panel: Literal["mean", "majority", "min"] = Field(
        "mean",
        validation_alias=AliasChoices("ASSAY_PANEL", "panel"),
        description=(
            "How a panel's verdicts combine: mean, majority (the majority side at the "
            "metric's threshold, its mean) or min (the strictest judge)."
        ),
    )

    @field_validator("judge_models", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        """``ASSAY_JUDGE_MODELS`` (a string): a JSON list of judges."""
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(
                'not a JSON list of judges such as [{"model": "a"}, {"model": "b", '
                f'"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "B_KEY"}}]: {exc}'
            ) from None

    @model_validator(mode="after")
    def _one_judge_setting(self) -> PanelSettings:
        if not self.judge_models:
            return self
        if getattr(self, "judge_model", None):
            raise ValueError(
                "judge_model and judge_models are both set: keep one (a panel of one judge "
                "is judge_models with one entry)"
            )
        judge_labels([(s.model, s.base_url) for s in self.judge_models])  # distinct judges
        self.judge_members()  # registers each key as a secret
        return self

    def without_judge(self) -> Self:
        """These settings with no judge at all, neither one nor a panel (``--no-judge``:
        every judged metric runs its local estimator)."""
        return self.model_copy(update=dict(JUDGE_OFF))

    @property
    def judge_configured(self) -> bool:
        """A judge is configured: a panel (``judge_models``), or a model plus a base URL
        (any OpenAI-compatible server) or plus an API key (OpenAI at its default URL)."""
        model = getattr(self, "judge_model", None)
        url, key = getattr(self, "judge_base_url", None), getattr(self, "judge_api_key", None)
        return bool(self.judge_models) or bool(model and (url or key))

    def judge_members(self) -> list[JudgeMember]:
        """The panel's judges, resolved: each key read from its environment variable (and
        registered as a secret), the single-judge settings filling what a judge leaves
        out. Empty without ``judge_models``."""
        from assay.core.redaction import register_secret, url_password

        specs = self.judge_models
        base = getattr(self, "judge_base_url", None)
        labels = judge_labels([(s.model, s.base_url or base) for s in specs])
        members = []
        for label, spec in zip(labels, specs, strict=True):
            key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
            url = spec.base_url or base
            register_secret(key)
            register_secret(url_password(url))
            members.append(
                JudgeMember(
                    label=label,
                    model=spec.model,
                    base_url=url,
                    api_key=key if spec.api_key_env else getattr(self, "judge_api_key", None),
                    rate_limit=spec.rate_limit or getattr(self, "judge_rate_limit", None),
                    price_prompt=_first(spec.price_prompt, self, "judge_price_prompt"),
                    price_completion=_first(spec.price_completion, self, "judge_price_completion"),
                )
            )
        return members


def _first(value: float | None, settings: object, name: str) -> float | None:
    return value if value is not None else getattr(settings, name, None)
