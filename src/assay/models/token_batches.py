"""Texts' token ids laid out for a transformer's forward passes, shared by BERTScore's
`assay.models.token_encoder.TokenEncoder` and the mean-pooled BERT embedder
(`assay.models.bert.MeanPooledBert`): texts longest first, passes of a number of texts
or of at most a number of padded tokens, each pass's ids padded to its longest text, and
their way to the device."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["TokenRows", "padded_ids", "to_device", "token_passes"]


class TokenRows:
    """Where each text's tokens go in the concatenated vectors: texts longest first
    (stable), each text's tokens in consecutive rows.

    Attributes:
        lengths: tokens of each text, in the texts' order.
        order: the texts in row order (longest first).
        offsets: the row of each text's first token, in the texts' order.
        by_length: the lengths in row order (longest first).
        starts: the first row of each text in row order, and the total at the end.
        flat: the token ids in row order.
    """

    def __init__(self, ids: list[list[int]]) -> None:
        self.lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        self.order = np.argsort(-self.lengths, kind="stable")
        self.by_length = self.lengths[self.order]
        self.starts = np.concatenate([[0], np.cumsum(self.by_length)]).astype(np.int64)
        self.offsets = np.empty_like(self.lengths)
        self.offsets[self.order] = self.starts[:-1]
        self.flat = np.fromiter(
            itertools.chain.from_iterable(ids[i] for i in self.order.tolist()),
            dtype=np.int64,
            count=int(self.starts[-1]),
        )


def token_passes(
    by_length: np.ndarray, batch_size: int, tokens_per_batch: int | None
) -> Iterator[tuple[int, int]]:
    """(start, stop) of each forward pass over texts sorted longest first: ``batch_size``
    texts a pass, or, with ``tokens_per_batch``, as many as keep the pass's padded tokens
    (its texts times its longest) within it (at least one text)."""
    n = len(by_length)
    start = 0
    while start < n:
        if tokens_per_batch is None:
            rows = batch_size
        else:
            rows = max(1, tokens_per_batch // max(1, int(by_length[start])))
        yield start, min(n, start + rows)
        start += rows


def padded_ids(rows: TokenRows, first: int, stop: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """The token ids of the texts ``first:stop`` (row order), padded with ``pad`` to the
    first (longest) one, and where the texts' own tokens are (the attention mask)."""
    widths = rows.by_length[first:stop]
    inside = np.arange(int(widths[0]))[None, :] < widths[:, None]
    input_ids = np.full(inside.shape, pad, dtype=np.int64)
    input_ids[inside] = rows.flat[rows.starts[first] : rows.starts[stop]]
    return input_ids, inside


def to_device(array: np.ndarray, device: Any) -> Any:
    """``array`` as a torch tensor on ``device``: on CUDA copied from pinned memory without
    waiting for the device, on the CPU sharing the array's memory."""
    import torch

    tensor = torch.from_numpy(array)
    if torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor
