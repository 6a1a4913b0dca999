"""Where the torch models run (``device``), how many threads a model may use, and how many
tokens a forward pass holds on CUDA.

Threads: a container or ``taskset`` often gives a process fewer cores than the host has;
``os.cpu_count()`` counts the host's, and a model with more threads than cores runs slower
(its threads wait on each other). `available_cores` reads what the process may really use.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from assay.core.extras import ModelUnavailable

__all__ = ["DEFAULT_TOKENS_PER_BATCH", "available_cores", "model_threads", "torch_device"]

#: the cgroup's CPU bandwidth: v2 ``cpu.max`` ("quota period" or "max period"), v1 the
#: quota and period files (quota -1: no limit)
CGROUP_V2_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")

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


def _cgroup_cpus() -> float | None:
    """The CPUs the cgroup's bandwidth limit allows (quota / period), or None when no limit
    is set or none can be read."""
    v2, v1_quota, v1_period = CGROUP_V2_CPU_MAX, CGROUP_V1_QUOTA, CGROUP_V1_PERIOD
    try:
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        if v1_quota.is_file() and v1_period.is_file():
            quota_us = int(v1_quota.read_text())
            return None if quota_us <= 0 else quota_us / int(v1_period.read_text())
    except (OSError, ValueError):
        return None
    return None


def available_cores() -> int:
    """The cores this process may use: the CPUs of its affinity mask
    (``os.sched_getaffinity``, where the platform has it; else ``os.cpu_count()``), at
    most the cgroup's CPU quota rounded up (a quota of 1.5 CPUs: 2 threads), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def model_threads() -> int:
    """Threads a model's forward pass may use: ``OMP_NUM_THREADS`` when set (Ray sets it
    to the CPUs a worker reserved, so two one-CPU workers do not each take every core),
    else the cores the process may use (`available_cores`), not the host's."""
    try:
        threads = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        threads = 0
    return threads if threads > 0 else available_cores()
