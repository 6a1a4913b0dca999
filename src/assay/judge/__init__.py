"""The LLM judge: an OpenAI-compatible client with prompts as data, cache and usage.

- `client.JudgeClient`: concurrent, retrying, cached requests to any OpenAI-compatible
  chat endpoint; one per run (``Resources.judge``), with a memo so metrics share calls.
- `prompts`: the specifications' judge prompts as versioned, hashable templates with typed
  output models; untrusted text goes only into escaped, tagged data blocks.
- `parsing`: JSON, json-repair and the prompt's prose fallback, in that order.
- `prose`: the score (or label) a prose reply gives, never one it quotes.
- `verdicts`: the prompts' output models (what a reply must hold).
- `batch.BatchTransport`: the OpenAI Batch API as the client's transport (``judge_batch``:
  half the price; batch ids kept in a ledger so a stopped run's batches are collected).
- `completion`: what a chat completion's reply holds, and the judge's errors.
- `panel.JudgePanel`: several judges (``judge_models``) under one concurrency budget,
  each with its own URL, key and rate limit; `panel.judge_from_config` makes the run's
  judge; `panel_rules.combine`: their values combined by the ``panel`` rule (mean,
  majority, min), with Krippendorff's alpha between them per metric.
- `cache.JudgeCache`: persistent replies by hash of (model, messages, parameters).
- `usage.JudgeUsage`: calls, cache hits, tokens, latency and cost of a run.
- `aio.run_sync`: run judge coroutines from sync code, even inside a running loop.
- `estimators`: the offline estimators the judged metrics fall back to.
"""

from __future__ import annotations

from assay.judge.aio import run_async, run_sync
from assay.judge.cache import JudgeCache
from assay.judge.client import JudgeClient, JudgeError, JudgeReply, JudgeUnreachable
from assay.judge.prompts import PROMPTS, Prompt
from assay.judge.usage import JudgeUsage

__all__ = [
    "PROMPTS",
    "JudgeCache",
    "JudgeClient",
    "JudgeError",
    "JudgeReply",
    "JudgeUnreachable",
    "JudgeUsage",
    "Prompt",
    "run_async",
    "run_sync",
]
