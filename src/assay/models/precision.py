"""The number format a local torch model runs in: float32, or bfloat16 where the CPU
computes it natively.

Why: on a CPU with AMX or AVX-512 BF16 (Intel Sapphire Rapids and later, AMD Zen 4 and
later) oneDNN runs a bfloat16 matrix product several times faster than a float32 one. On
the 2-core Xeon of the benchmarks, the entailment cross-encoder scored 225 pairs/s in
bfloat16 against 86 in float32 (the same 240 RAG pairs, alternated three times), with the
probabilities at most 0.013 apart (mean 0.001). ONNX Runtime's int8 dynamic quantisation
of the same model was slower (165 pairs/s) and further off (up to 0.28 apart), and
ONNX Runtime in float32 no faster than torch (88). On a CPU without native bfloat16
the format is emulated and slower than float32, so ``auto`` keeps float32 there.

`resolve_precision` turns a setting (``auto``, ``float32``, ``bfloat16``) into the format
that runs; `PRECISION_SUFFIX` is what a model's name gains in each (results say which
format ran: ``assay-entailment-minilm-l6/bf16``).
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["PRECISIONS", "PRECISION_SUFFIX", "native_bf16_cpu", "resolve_precision"]

#: the settings a local model's precision takes
PRECISIONS = ("auto", "float32", "bfloat16")
#: what a model's name gains in each format that runs
PRECISION_SUFFIX = {"float32": "", "bfloat16": "/bf16"}
#: the CPU flags (Linux ``/proc/cpuinfo``) of native bfloat16 matrix products
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def native_bf16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (a flag of `BF16_FLAGS` in
    ``/proc/cpuinfo``); False where that file cannot be read (not Linux)."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return not BF16_FLAGS.isdisjoint(line.split(":", 1)[-1].split())
    return False


def resolve_precision(setting: str, device: str) -> str:
    """The format a model runs in for the precision ``setting`` on ``device``: ``auto``
    is ``bfloat16`` on a CPU with native bfloat16 (`native_bf16_cpu`), else ``float32``
    (on CUDA too: the GPU path has not been measured in bfloat16); ``float32`` and
    ``bfloat16`` run as named.

    Raises:
        ValueError: a setting outside `PRECISIONS`.
    """
    if setting not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}. Got {setting!r}.")
    if setting != "auto":
        return setting
    return "bfloat16" if device == "cpu" and native_bf16_cpu() else "float32"
