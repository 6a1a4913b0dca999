"""A judge panel: several judges asked the same questions under one concurrency budget.

`judge_from_config` makes the run's judge: a `JudgeClient` for ``judge_model`` or for a
``judge_models`` list of one (the same client, so results, signatures and cache keys are
those of that single judge), a `JudgePanel` for two or more. The panel holds one
`JudgeClient` per judge, each with its own model, base URL, key, rate limit, Retry-After
pause and circuit breaker; they share one semaphore of ``judge_concurrency`` slots (the
total in flight across the judges), one persistent cache (each question keyed by its
judge's model and endpoint, so each judge's answers are cached apart and a re-run or
``--resume`` asks a judge only what it has not answered) and, with ``judge_batch``, one
Batch API transport (each judge sends its own batches to its own server).

The engine asks each judge every judge question (`assay.engine.Answers.member`), and a
judged metric reduces each judge's answers to a value, then combines them
(`assay.judge.panel_rules.combine`). The panel keeps the values it was given
(`record`) and reports the judges' agreement on each metric, Krippendorff's alpha on the
interval scale over the run's samples, with its usage (`PanelUsage.to_dict`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from assay.core.judges import JudgeMember
from assay.judge.aio import in_background_loop, run_async, run_sync
from assay.judge.batch import BatchTransport
from assay.judge.cache import JudgeCache
from assay.judge.client import JudgeClient, JudgeReply, SharedBudget
from assay.judge.prompts import Prompt
from assay.judge.usage import summed_usage

if TYPE_CHECKING:
    from assay.core.config import AssayConfig

__all__ = ["JudgePanel", "PanelUsage", "judge_from_config", "panel_agreement"]

R = TypeVar("R")


def judge_from_config(config: AssayConfig) -> JudgeClient | JudgePanel | None:
    """The run's judge: None when none is configured; a `JudgeClient` for ``judge_model``
    or for a panel of one (built exactly as that single judge); else a `JudgePanel`.

    Configured means a panel (``judge_models``), or a model and a base URL (any
    OpenAI-compatible server), or a model and an API key (OpenAI at its default URL).
    Every judge has the run's concurrency, timeout, retries and reply limit and shares
    the run's cache and Batch API transport; its URL, key, rate limit and prices are its
    own.
    """
    members = config.judge_members()
    if not members:
        if not config.judge_model or not config.judge_configured:
            return None
        members = [
            JudgeMember(
                label=config.judge_model,
                model=config.judge_model,
                base_url=config.judge_base_url,
                api_key=config.judge_api_key,
                rate_limit=config.judge_rate_limit,
                price_prompt=config.judge_price_prompt,
                price_completion=config.judge_price_completion,
            )
        ]
    enabled = config.judge_cache and config.use_cache
    cache = JudgeCache(Path(config.cache_dir) / "judge.sqlite" if enabled else None)
    batch = BatchTransport.from_config(config) if config.judge_batch else None
    clients = {
        m.label: JudgeClient(
            m.model,
            m.base_url,
            m.api_key,
            concurrency=config.judge_concurrency,
            timeout=config.judge_timeout,
            max_retries=config.judge_max_retries,
            cache=cache,
            price_prompt=m.price_prompt,
            price_completion=m.price_completion,
            rate_limit=m.rate_limit,
            max_reply_bytes=config.max_reply_bytes,
            batch=batch,
        )
        for m in members
    }
    if len(clients) == 1:
        return next(iter(clients.values()))
    return JudgePanel(clients, config.panel, config.judge_concurrency)


def panel_agreement(
    ratings: Mapping[str, Sequence[Mapping[str, float | None]]], labels: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per metric of ``ratings`` (metric -> one row per sample: judge label -> value):
    Krippendorff's alpha on the interval scale between the judges ``labels`` (``alpha``:
    1 = the judges agree, 0 = no better than chance, below 0 = systematic disagreement;
    None when undefined: fewer than two values on any sample, or every value the same),
    and ``samples``, the samples two or more judges gave a value."""
    from assay.core.agreement_stats import krippendorff_alpha

    out = {}
    for metric, rows in sorted(ratings.items()):
        table = [[row.get(label) for label in labels] for row in rows]
        pairable = sum(1 for r in table if sum(v is not None for v in r) >= 2)
        alpha = krippendorff_alpha(table, level="interval")
        out[metric] = {"alpha": None if alpha is None else round(alpha, 4), "samples": pairable}
    return out


class PanelUsage:
    """A panel's usage: the judges' counters summed, each judge's own (``judges``), the
    rule (``panel``) and the judges' agreement per metric (``agreement``)."""

    def __init__(self, panel: JudgePanel) -> None:
        self._panel = panel

    def to_dict(self) -> dict[str, Any]:
        """The judges' usages summed (`assay.judge.usage.summed_usage`), then ``judges``
        (label -> `JudgeUsage.to_dict`), ``panel`` and ``agreement``
        (`JudgePanel.agreement`)."""
        each = {label: c.usage.to_dict() for label, c in self._panel.members.items()}
        out = summed_usage(list(each.values()))
        out["judges"] = each
        out["panel"] = self._panel.rule
        out["agreement"] = self._panel.agreement()
        return out


class JudgePanel:
    """Several judges (label -> `JudgeClient`) under one budget of ``concurrency`` request
    slots, combined by ``rule`` (``mean``, ``majority`` or ``min``)."""

    def __init__(self, members: Mapping[str, JudgeClient], rule: str, concurrency: int) -> None:
        if len(members) < 2:
            raise ValueError("a judge panel needs two or more judges")
        if concurrency < 1:
            raise ValueError(f"judge concurrency must be at least 1. Got {concurrency}.")
        self.members = dict(members)
        self.rule = rule
        self.concurrency = concurrency
        slots = asyncio.Semaphore(concurrency)  # bound to the judge loop when first awaited
        for client in self.members.values():
            client.share_slots(slots)
        self.usage = PanelUsage(self)
        self._ratings: dict[str, list[dict[str, float | None]]] = {}
        self._lock = threading.Lock()

    @property
    def labels(self) -> tuple[str, ...]:
        """The judges' labels, in configured order."""
        return tuple(self.members)

    @property
    def model(self) -> str:
        """The panel as a result's signature names it: ``panel(a,b)``."""
        return f"panel({','.join(self.members)})"

    @property
    def unreachable(self) -> str | None:
        """Why no judge can be reached, once every judge's circuit is open; None while one
        can (the others then decide: a judge that cannot be reached fails its questions)."""
        reasons = [c.unreachable for c in self.members.values()]
        if any(r is None for r in reasons):
            return None
        return "; ".join(
            f"{label}: {why}" for label, why in zip(self.members, reasons, strict=True)
        )

    @property
    def budget(self) -> SharedBudget | None:
        return next(iter(self.members.values())).budget

    @budget.setter
    def budget(self, budget: SharedBudget | None) -> None:
        """Request slots shared with other processes (the Ray executor's cluster budget):
        every judge takes its slots there."""
        for client in self.members.values():
            client.budget = budget

    def __repr__(self) -> str:
        return f"JudgePanel({self.model}, rule={self.rule!r})"

    # ---- asking --------------------------------------------------------------------------
    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run a coroutine on the judge loop from sync code."""
        return run_sync(coro)

    async def ask_each(
        self, questions: Sequence[tuple[str, Prompt[Any], Mapping[str, Any]]]
    ) -> list[JudgeReply[Any] | Exception]:
        """The answers to ``questions`` (judge label, prompt, block values), in order:
        each judge's questions through its client's ``ask_all``, the judges at once. A
        question that fails (its judge unreachable included) has its exception as its
        answer; a label of no judge of the panel, a KeyError."""
        if not in_background_loop():
            return await run_async(self.ask_each(questions))
        rows: dict[str, list[int]] = {}
        for i, (label, _, _) in enumerate(questions):
            rows.setdefault(label, []).append(i)
        out: list[JudgeReply[Any] | Exception] = [
            KeyError(f"no judge {label!r} in {self.model}") for label, _, _ in questions
        ]

        async def one(label: str, indices: list[int]) -> None:
            asked = [(questions[i][1], questions[i][2]) for i in indices]
            replies = await self.members[label].ask_all(asked)
            for i, reply in zip(indices, replies, strict=True):
                out[i] = reply

        jobs: list[Awaitable[None]] = [one(lb, ix) for lb, ix in rows.items() if lb in self.members]
        await asyncio.gather(*jobs)
        return out

    # ---- agreement -----------------------------------------------------------------------
    def record(self, metric: str, values: Sequence[Mapping[str, float | None]]) -> None:
        """Keep each sample's judge values (label -> value, None for no value) of
        ``metric``, for `agreement`."""
        with self._lock:
            kept = self._ratings.setdefault(metric, [])
            kept.extend({label: row.get(label) for label in self.members} for row in values)

    def ratings(self) -> dict[str, list[dict[str, float | None]]]:
        """The judge values recorded so far: metric -> one row per sample (label -> value,
        None for no value), in the order recorded."""
        with self._lock:
            return {metric: list(rows) for metric, rows in self._ratings.items()}

    def agreement(self) -> dict[str, dict[str, Any]]:
        """`panel_agreement` of the samples recorded so far."""
        return panel_agreement(self.ratings(), list(self.members))

    def close(self) -> None:
        """Close every judge's connections, and the cache they share."""
        for client in self.members.values():
            client.close()
