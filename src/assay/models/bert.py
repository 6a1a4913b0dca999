"""A BERT encoder in plain torch, read from a local transformer folder without importing
transformers.

Why: importing transformers costs 1.7 s on the 2-core machine (sentence-transformers,
which imports it, 4.2 s), and on a GPU machine it pulled scikit-learn and sympy (7.5 s of
a 14-18 s start-up). The shipped models (all-MiniLM-L6-v2 for BERTScore and the MiniLM
embedder, Assay's entailment classifier) are BERT models, which need torch, ``tokenizers``
and ``safetensors`` only.

What runs here (the BERT of Devlin et al. 2019 in evaluation mode):

- embeddings: ``LayerNorm(word[id] + position[i] + token_type[t])``;
- each layer: ``a = LayerNorm(x + W_o · attention(x))`` with ``attention`` the
  multi-head ``softmax(q kᵀ / √d + mask) v`` over the positions the attention mask keeps
  (`torch.nn.functional.scaled_dot_product_attention`; the query, key and value
  projections are one fused Linear), then ``LayerNorm(a + W_2 · act(W_1 · a))``;
- the pooler, when asked for: ``tanh(W_p · h[CLS])``; the classifier: ``W_c · pooled``.

`assay.models.bert_files.read_bert_folder` says whether a folder holds a model this runs
(``model_type`` ``bert``, absolute positions, an activation of `ACTIVATIONS`, a
``tokenizer.json`` of a BERT tokenizer whose normaliser agrees with
``tokenizer_config.json``, unsharded weights); anything else is loaded by transformers as
before, with the same values. The tests hold
the hidden states, BERTScore and the MiniLM vectors equal to transformers' and
sentence-transformers' on the shipped model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from assay.core.extras import ModelUnavailable
from assay.models.bert_files import SentenceFolder, encode_batch
from assay.models.device import DEFAULT_TOKENS_PER_BATCH
from assay.models.token_batches import TokenRows, padded_ids, to_device, token_passes

__all__ = ["ACTIVATIONS", "BertEncoder", "MeanPooledBert", "load_bert"]

#: the activations of ``hidden_act`` this encoder runs, by their transformers names (the
#: names `assay.models.bert_files.ACTIVATION_NAMES` accepts)
ACTIVATIONS = {
    "gelu": functional.gelu,
    "gelu_new": lambda x: functional.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: functional.gelu(x, approximate="tanh"),
    "relu": functional.relu,
}


class _Layer(nn.Module):
    """One transformer layer: self-attention and the feed-forward block, each followed by
    a residual sum and a LayerNorm."""

    def __init__(self, hidden: int, heads: int, inner: int, eps: float, act: Any) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attention_out = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        self.up = nn.Linear(hidden, inner)
        self.down = nn.Linear(inner, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=eps)
        self.act = act

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        batch, length, hidden = x.shape
        qkv = self.qkv(x).view(batch, length, 3, self.heads, hidden // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        context = functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        context = context.transpose(1, 2).reshape(batch, length, hidden)
        x = self.attention_norm(self.attention_out(context) + x)
        return self.output_norm(self.down(self.act(self.up(x))) + x)


class BertEncoder(nn.Module):
    """BERT's embeddings and its first ``num_layers`` layers, with the pooler and a
    classifier of ``num_labels`` outputs when asked for (see the module).

    ``forward(input_ids, attention_mask, token_type_ids=None, padded=None)`` gives the
    last kept layer's hidden states, shape (batch, length, hidden) (``padded``: whether
    the mask holds a 0, when the caller knows; else it is read from the mask); `classify`
    the classifier's logits.
    """

    def __init__(
        self, config: dict[str, Any], num_layers: int, pooler: bool = False, num_labels: int = 0
    ) -> None:
        super().__init__()
        hidden = int(config["hidden_size"])
        eps = float(config.get("layer_norm_eps", 1e-12))
        # tables as plain parameters: nn.Embedding's random start (its normal_) imports
        # torch._dynamo on the meta device, 0.7 s
        self.word = nn.Parameter(torch.empty(int(config["vocab_size"]), hidden))
        positions = int(config.get("max_position_embeddings", 512))
        self.position = nn.Parameter(torch.empty(positions, hidden))
        self.token_type = nn.Parameter(torch.empty(int(config.get("type_vocab_size", 2)), hidden))
        self.embedding_norm = nn.LayerNorm(hidden, eps=eps)
        act = ACTIVATIONS[config.get("hidden_act", "gelu")]
        self.layers = nn.ModuleList(
            _Layer(hidden, int(config["num_attention_heads"]), int(config["intermediate_size"]),
                   eps, act)
            for _ in range(num_layers)
        )  # fmt: skip
        self.pooler = nn.Linear(hidden, hidden) if pooler or num_labels else None
        self.classifier = nn.Linear(hidden, num_labels) if num_labels else None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        padded: bool | None = None,
    ) -> torch.Tensor:
        length = input_ids.shape[1]
        positions = torch.arange(length, device=input_ids.device)
        x = functional.embedding(input_ids, self.word) + self.position[positions][None]
        if token_type_ids is None:
            x = x + self.token_type[0]
        else:
            x = x + functional.embedding(token_type_ids, self.token_type)
        x = self.embedding_norm(x)
        # a padded key takes no part; with no padding in the batch no mask (faster kernels;
        # ``padded`` from the caller spares a wait for the device to find out)
        if padded is None:
            padded = not bool(attention_mask.all())
        keep = attention_mask.bool()[:, None, None, :] if padded else None
        for layer in self.layers:
            x = layer(x, keep)
        return x

    def classify(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The classifier's logits on the pooled [CLS] vector, shape (batch, labels)."""
        if self.pooler is None or self.classifier is None:
            raise ValueError("this encoder was built without a classifier")
        hidden = self(input_ids, attention_mask, token_type_ids)
        return self.classifier(torch.tanh(self.pooler(hidden[:, 0])))


def _checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    """The folder's weights by their transformers names (`_plain_names`)."""
    file = folder / "model.safetensors"
    if file.is_file():
        from safetensors.torch import load_file

        return _plain_names(load_file(str(file)))
    return _plain_names(
        torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    )


def _plain_names(raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Weights by their transformers names without a model prefix (``bert.``) and with
    old LayerNorm names (gamma, beta) renamed."""
    out = {}
    for key, value in raw.items():
        key = key.removeprefix("bert.")
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight")
        out[key.replace("LayerNorm.beta", "LayerNorm.bias")] = value
    return out


def _state(weights: dict[str, torch.Tensor], model: BertEncoder) -> dict[str, torch.Tensor]:
    """``model``'s state from transformers-named ``weights`` (the three attention
    projections of a layer concatenated into its fused one)."""
    state = {
        "word": weights["embeddings.word_embeddings.weight"],
        "position": weights["embeddings.position_embeddings.weight"],
        "token_type": weights["embeddings.token_type_embeddings.weight"],
    }
    for name, key in (
        ("embedding_norm", "embeddings.LayerNorm"),
        ("pooler", "pooler.dense"),
        ("classifier", "classifier"),
    ):
        for part in ("weight", "bias"):
            if f"{name}.{part}" in model.state_dict():
                state[f"{name}.{part}"] = weights[f"{key}.{part}"]
    for i in range(len(model.layers)):
        layer = f"encoder.layer.{i}."
        for part in ("weight", "bias"):
            state[f"layers.{i}.qkv.{part}"] = torch.cat(
                [weights[f"{layer}attention.self.{p}.{part}"] for p in ("query", "key", "value")]
            )
            for name, key in (
                ("attention_out", "attention.output.dense"),
                ("attention_norm", "attention.output.LayerNorm"),
                ("up", "intermediate.dense"),
                ("down", "output.dense"),
                ("output_norm", "output.LayerNorm"),
            ):
                state[f"layers.{i}.{name}.{part}"] = weights[f"{layer}{key}.{part}"]
    return {k: v.to(torch.float32) for k, v in state.items()}


def load_bert(
    folder: str | Path,
    config: dict[str, Any],
    num_layers: int | None = None,
    *,
    pooler: bool = False,
    num_labels: int = 0,
    weights: dict[str, torch.Tensor] | None = None,
) -> BertEncoder:
    """A `BertEncoder` of ``folder``'s first ``num_layers`` layers (None: all) in float32,
    in evaluation mode on the CPU; ``weights`` (transformers names) replace or add to the
    folder's own.

    Raises:
        ModelUnavailable: the weights lack a tensor the model needs, or have a wrong shape.
    """
    layers = int(config["num_hidden_layers"]) if num_layers is None else num_layers
    with torch.device("meta"):
        model = BertEncoder(config, layers, pooler=pooler, num_labels=num_labels)
    found = _checkpoint(Path(folder))
    found.update(_plain_names(weights or {}))
    try:
        model.load_state_dict(_state(found, model), assign=True)
    except (KeyError, RuntimeError) as exc:
        raise ModelUnavailable(
            f"the weights in {str(folder)!r} do not fit a BERT model: {exc}"
        ) from exc
    return model.eval()


class MeanPooledBert:
    """A sentence-transformers model that is a BERT, mean pooling and, optionally, L2
    normalisation, in plain torch: ``encode`` gives what ``SentenceTransformer.encode``
    gives, float32 on the CPU.

    A text is cut to ``max_seq_length`` word pieces; its vector is the mean of its token
    vectors, ``Σ_i m_i h_i / max(Σ_i m_i, 1e-9)`` over the attention mask ``m``, then
    divided by its L2 norm when the folder normalises. Texts run longest first, all in one
    pass on the CPU (the embedder's batches bound them), and in passes of at most
    ``tokens_per_batch`` padded tokens on CUDA (default `DEFAULT_TOKENS_PER_BATCH`), whose
    inputs go to the device from pinned memory; the vectors of a call come back in one
    copy.

    Args:
        folder: the folder's parts (`assay.models.bert_files.read_sentence_folder`).
        device: torch device.
        dtype: the weights' number format (the whole model is cast, as
            ``SentenceTransformer.half()`` does).
        tokens_per_batch: padded tokens per forward pass; None: one pass on the CPU,
            `DEFAULT_TOKENS_PER_BATCH` on CUDA.
    """

    def __init__(
        self,
        folder: SentenceFolder,
        device: str = "cpu",
        dtype: Any = None,
        tokens_per_batch: int | None = None,
    ) -> None:
        self.folder = folder
        self.device = torch.device(device)
        self.model = load_bert(folder.transformer, folder.config).to(self.device, dtype)
        backend = folder.pieces.backend
        backend.no_padding()
        backend.enable_truncation(folder.max_seq_length)
        self._backend = backend
        self._pad = folder.pieces.pad_id
        if tokens_per_batch is None and self.device.type == "cuda":
            tokens_per_batch = DEFAULT_TOKENS_PER_BATCH
        #: padded tokens per forward pass (None: all the texts of a call in one pass)
        self.tokens_per_batch = tokens_per_batch

    def _passes(self, by_length: np.ndarray) -> Iterator[tuple[int, int]]:
        """(start, stop) of each forward pass over texts sorted longest first: one pass,
        or passes of at most ``tokens_per_batch`` padded tokens (at least one text each)."""
        return token_passes(by_length, len(by_length), self.tokens_per_batch)

    def encode(self, texts: list[str]) -> torch.Tensor:
        """One vector per text, float32 on the CPU, shape (texts, hidden)."""
        if self.folder.lowercase:
            texts = [t.lower() for t in texts]
        rows = TokenRows([e.ids for e in encode_batch(self._backend, texts)])
        pooled = []
        with torch.inference_mode():
            for first, stop in self._passes(rows.by_length):
                input_ids, inside = padded_ids(rows, first, stop, self._pad)
                mask = to_device(inside.astype(np.int64), self.device)
                hidden = self.model(
                    to_device(input_ids, self.device), mask, padded=not bool(inside.all())
                )
                weights = mask.unsqueeze(-1).to(hidden.dtype)
                vectors = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
                if self.folder.normalize:
                    vectors = functional.normalize(vectors, p=2, dim=1)
                pooled.append(vectors)
            in_row_order = torch.cat(pooled).float().cpu()  # one copy back
        out = torch.empty_like(in_row_order)
        out[torch.from_numpy(rows.order)] = in_row_order
        return out
