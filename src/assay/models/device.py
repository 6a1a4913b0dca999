"""Where the torch models run (``device``), how many threads a model may use, and how many
tokens a forward pass holds on CUDA."""

from __future__ import annotations

import os

from assay.core.extras import ModelUnavailable

__all__ = ["DEFAULT_TOKENS_PER_BATCH", "model_threads", "torch_device"]

#: padded tokens per forward pass on CUDA when ``tokens_per_batch`` is not set (BERTScore's
#: token encoder and the mean-pooled BERT embedder)
DEFAULT_TOKENS_PER_BATCH = 65_536


def torch_device(setting: str) -> str:
    """The torch device for the ``device`` setting: ``cpu``; ``cuda`` (`ModelUnavailable`
    when torch sees no CUDA GPU); ``auto``: ``cuda`` when torch sees one, else ``cpu``."""
    if setting == "cpu":
        return "cpu"
    if setting not in {"auto", "cuda"}:
        raise ValueError(f"device must be auto, cpu or cuda. Got {setting!r}.")
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if setting == "cuda":
        raise ModelUnavailable(
            "device cuda was asked for, but torch sees no CUDA GPU on this machine "
            "(torch.cuda.is_available() is False); use --device auto or cpu"
        )
    return "cpu"


def model_threads() -> int:
    """Threads a model's forward pass may use: ``OMP_NUM_THREADS`` when set (Ray sets it
    to the CPUs a worker reserved, so two one-CPU workers do not each take every core),
    else every core."""
    try:
        threads = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        threads = 0
    return threads if threads > 0 else (os.cpu_count() or 1)
