"""`TokenEncoder`: a transformer cut after a layer, and BERTScore's greedy token matching.

The transformer of a BERT folder (the shipped all-MiniLM-L6-v2) runs in Assay's own plain
torch (`assay.models.bert`, built with only the layers kept; its tokenizer read from
``tokenizer.json``); any other architecture is loaded by transformers' ``AutoModel`` and
cut after the layer. ``engine`` says which. The work of
`assay.models.bertscore.BERTScorer`, in three steps per call:

1. Tokenise every distinct text once with the tokenizer's Rust backend (``tokenizers``),
   as bert-score does: stripped, special tokens added, truncated at the model's maximum
   length. The backend is called directly: transformers' wrapper returns the same ids but
   spends about 30 µs a text turning its encodings back into Python objects.
2. Embed: texts run through the model longest first, so little of a pass is padding. On
   the CPU a pass holds ``batch_size`` texts; on CUDA it holds up to ``tokens_per_batch``
   padded tokens (a pass of short texts holds many of them, a pass of long ones few), and
   a pass's inputs go to the device from pinned memory without waiting for the pass
   before. Every token vector is L2-normalised and stays where the model ran: the
   vectors of all texts are one tensor on that device, text after text.
3. Match on that device: for a pair, ``sim = C @ R.T`` over its tokens (one padded
   ``bmm`` for a block of pairs), P = mean over the candidate's tokens of the row
   maximum, R = mean over the reference's tokens of the column maximum, F = 2PR/(P+R).
   As in bert-score without idf, [CLS] and [SEP] weigh 0 in the means but can still be
   matched, a padded position's cosine is 0 (bert-score multiplies by the mask), and a
   text with no token between [CLS] and [SEP] scores P = R = F = 0. On the CPU a block is
   256 pairs; on CUDA a block holds up to ``_MATCH_ELEMENTS`` similarities. The scores of
   the whole call come back to the host once. (The batching by tokens and the large blocks
are CUDA's default, and run on the CPU too when ``tokens_per_batch`` is set: the tests
check them there.)

``precision`` ``bfloat16`` or ``float16`` runs the transformer under ``torch.autocast``
with its Linear weights cast once; the outputs are cast back to float32 before
normalisation, and the matching is float32.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from assay.core.extras import ModelUnavailable
from assay.models.bert_files import WordPieces, encode_batch, read_bert_folder
from assay.models.device import DEFAULT_TOKENS_PER_BATCH
from assay.models.token_batches import TokenRows, padded_ids, to_device, token_passes

__all__ = ["AUTOCAST_PRECISIONS", "TokenEncoder"]

#: fast tokenizers that need a space before the first word to tokenise it like later words
#: (bert-score encodes with ``add_prefix_space=True`` for GPT-2 and RoBERTa tokenizers)
_PREFIX_SPACE = ("GPT2", "Roberta", "Longformer", "Bart")
#: pairs matched per ``bmm`` on the CPU (bounds the memory of the padded similarities)
_MATCH_BATCH = 256
#: similarities (pairs x candidate width x reference width) per ``bmm`` on CUDA: 256 MiB
#: of float32
_MATCH_ELEMENTS = 1 << 26
#: the number formats run under autocast, by name
AUTOCAST_PRECISIONS = ("bfloat16", "float16")


def _cut_layers(model: Any, num_layers: int) -> bool:
    """Drop the layers after ``num_layers`` from a transformer's layer list, in place.

    Returns False when the model keeps its layers somewhere this does not know; its
    hidden state ``num_layers`` is then read instead (same values, all layers run).
    """
    import torch

    for owner in (getattr(model, "encoder", None), getattr(model, "transformer", None), model):
        for name in ("layer", "layers"):
            layers = getattr(owner, name, None) if owner is not None else None
            if isinstance(layers, torch.nn.ModuleList):
                setattr(owner, name, torch.nn.ModuleList(list(layers)[:num_layers]))
                return True
    return False


def _load_native(path: str, num_layers: int) -> tuple[WordPieces, Any] | None:
    """The folder's tokenizer and its model cut after ``num_layers`` layers, in plain
    torch (`assay.models.bert`), or None when it is not a BERT that runs there."""
    try:
        found = read_bert_folder(path)
        from assay.models import bert
    except ImportError as exc:
        raise ModelUnavailable(
            "BERTScore needs the packages 'torch', 'tokenizers' and 'safetensors' "
            "(pip install torch==2.13.0 transformers)"
        ) from exc
    if found is None:
        return None
    config, pieces = found
    return pieces, bert.load_bert(path, config, num_layers)


def _load_transformers(path: str) -> tuple[WordPieces, Any]:
    """The fast tokenizer and the model of a local transformer folder, by transformers."""
    try:
        import torch  # noqa: F401  (TokenEncoder runs it; missing, the same message)
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise ModelUnavailable(
            "BERTScore needs the packages 'torch' and 'transformers' "
            "(pip install torch==2.13.0 transformers)"
        ) from exc
    bar_was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, use_fast=True, local_files_only=True)
        if type(tokenizer).__name__.startswith(_PREFIX_SPACE):
            tokenizer = AutoTokenizer.from_pretrained(
                path, use_fast=True, local_files_only=True, add_prefix_space=True
            )
        model = AutoModel.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(
            f"cannot load a transformer and tokenizer from {path!r}: {exc}"
        ) from exc
    finally:
        if bar_was_on:
            hf_logging.enable_progress_bar()
    if not hasattr(tokenizer, "backend_tokenizer"):
        raise ModelUnavailable(
            f"the tokenizer in {path!r} has no fast (Rust) version; BERTScore needs a "
            "tokenizer.json or a tokenizer transformers can convert"
        )
    limit = int(tokenizer.model_max_length)
    if limit > 100_000:  # "no limit" in the tokenizer files: the model's positions
        limit = int(getattr(model.config, "max_position_embeddings", 512))
    backend = tokenizer.backend_tokenizer
    pieces = WordPieces(
        backend=type(backend).from_str(backend.to_str()),
        max_length=limit,
        pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        special_ids=tuple(
            sorted(t for t in (tokenizer.cls_token_id, tokenizer.sep_token_id) if t is not None)
        ),
    )
    return pieces, model


class TokenEncoder:
    """A transformer cut after ``num_layers`` layers, with its fast tokenizer, that scores
    (candidate, reference) pairs with BERTScore's greedy matching (see the module).

    Args:
        path: local transformer folder.
        num_layers: layers kept (0: the embedding layer).
        device: torch device (``cpu`` or ``cuda``).
        precision: ``float32``, or ``bfloat16`` / ``float16`` under autocast.
        tokens_per_batch: padded tokens per forward pass; None: texts are batched by
            count on the CPU and by `DEFAULT_TOKENS_PER_BATCH` tokens on CUDA.
    """

    def __init__(
        self,
        path: str,
        num_layers: int,
        device: str = "cpu",
        precision: str = "float32",
        tokens_per_batch: int | None = None,
    ) -> None:
        native = _load_native(path, num_layers)  # raises ModelUnavailable without torch
        import torch

        self._torch = torch
        if native is not None:
            pieces, model = native
            self._hidden_index: int | None = None
        else:
            pieces, model = _load_transformers(path)
            model.eval()
            if hasattr(model, "encoder") and hasattr(model, "decoder"):
                model = model.encoder
            self._hidden_index = None if _cut_layers(model, num_layers) else num_layers
        #: what runs the model: ``assay`` (`assay.models.bert`) or ``transformers``
        self.engine = "transformers" if native is None else "assay"
        self._device = torch.device(device)
        self._model = model.to(self._device)
        self._autocast = getattr(torch, precision) if precision in AUTOCAST_PRECISIONS else None
        if self._autocast is not None:
            # the weights autocast would cast on every call, cast once (the same values)
            for module in self._model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.to(self._autocast)
        if tokens_per_batch is None and self._device.type == "cuda":
            tokens_per_batch = DEFAULT_TOKENS_PER_BATCH
        self.tokens_per_batch = tokens_per_batch
        self.max_length = pieces.max_length
        self._backend = pieces.backend
        self._backend.no_padding()
        self._backend.enable_truncation(pieces.max_length)
        self._pad = pieces.pad_id
        self._unweighted = np.array(pieces.special_ids, dtype=np.int64)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, as bert-score encodes them."""
        encodings = encode_batch(self._backend, [t.strip() for t in texts])
        return [e.ids for e in encodings]

    # ---- embedding ----------------------------------------------------------------
    def _passes(self, lengths: np.ndarray, batch_size: int) -> Iterator[tuple[int, int]]:
        """(start, stop) of each forward pass over texts sorted longest first."""
        return token_passes(lengths, batch_size, self.tokens_per_batch)

    def _to_device(self, array: np.ndarray) -> Any:
        return to_device(array, self._device)

    def embed(self, rows: TokenRows, batch_size: int) -> Any:
        """Normalised token vectors of every text, on the model's device, in the rows of
        ``rows`` (text after text, longest first), with one zero row at the end."""
        torch = self._torch
        parts: list[Any] = []
        with torch.inference_mode():
            for first, stop in self._passes(rows.by_length, batch_size):
                input_ids, inside = padded_ids(rows, first, stop, self._pad)
                hidden = self._forward(
                    self._to_device(input_ids),
                    self._to_device(inside.astype(np.int64)),
                    padded=not bool(inside.all()),
                )
                hidden = torch.nn.functional.normalize(hidden.float(), dim=-1)
                keep = self._to_device(np.flatnonzero(inside.ravel()))
                parts.append(hidden.reshape(-1, hidden.shape[-1]).index_select(0, keep))
            width = parts[0].shape[1] if parts else 1
            parts.append(torch.zeros((1, width), device=self._device))
            return torch.cat(parts)

    def _forward(self, input_ids: Any, mask: Any, padded: bool) -> Any:
        if self._autocast is not None:
            with self._torch.autocast(self._device.type, dtype=self._autocast):
                return self._run_model(input_ids, mask, padded)
        return self._run_model(input_ids, mask, padded)

    def _run_model(self, input_ids: Any, mask: Any, padded: bool) -> Any:
        if self.engine == "assay":
            return self._model(input_ids, mask, padded=padded)
        if self._hidden_index is None:
            return self._model(input_ids=input_ids, attention_mask=mask)[0]
        out = self._model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        return out.hidden_states[self._hidden_index]

    # ---- matching -----------------------------------------------------------------
    def _match_blocks(self, c_len: np.ndarray, r_len: np.ndarray) -> Iterator[slice]:
        """Blocks of pairs matched by one ``bmm``: 256 pairs when passes hold a number of
        texts (the CPU's default); when they hold a number of tokens (CUDA's), as many
        pairs as keep the padded similarities under `_MATCH_ELEMENTS`."""
        n = len(c_len)
        if self.tokens_per_batch is None:
            for start in range(0, n, _MATCH_BATCH):
                yield slice(start, min(n, start + _MATCH_BATCH))
            return
        start = 0
        while start < n:
            stop, wide_c, wide_r = start, 0, 0
            while stop < n:
                c, r = max(wide_c, int(c_len[stop])), max(wide_r, int(r_len[stop]))
                if stop > start and (stop - start + 1) * c * r > _MATCH_ELEMENTS:
                    break
                wide_c, wide_r, stop = c, r, stop + 1
            yield slice(start, stop)
            start = stop

    def score_pairs(self, pairs: Sequence[tuple[str, str]], batch_size: int) -> np.ndarray:
        """Raw BERTScore (P, R, F) of each (candidate, reference) pair, shape (n, 3)."""
        torch = self._torch
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        rows = TokenRows(self.token_ids(texts))
        vectors = self.embed(rows, batch_size)
        offsets, lengths = rows.offsets, rows.lengths
        pad_row = len(vectors) - 1
        # each vector row's weight: 0 for [CLS], [SEP] and the zero row
        weights = np.append(~np.isin(rows.flat, self._unweighted), False).astype(np.float32)
        weights_on = self._to_device(weights)
        where = {text: i for i, text in enumerate(texts)}
        cand = np.array([where[c] for c, _ in pairs], dtype=np.int64)
        ref = np.array([where[r] for _, r in pairs], dtype=np.int64)
        scores: list[Any] = []
        with torch.inference_mode():
            for part in self._match_blocks(lengths[cand], lengths[ref]):
                c_rows = self._to_device(_gather_index(offsets, lengths, cand[part], pad_row))
                r_rows = self._to_device(_gather_index(offsets, lengths, ref[part], pad_row))
                sim = torch.bmm(vectors[c_rows], vectors[r_rows].transpose(1, 2))
                w_c, w_r = weights_on[c_rows], weights_on[r_rows]
                prec = (sim.max(dim=2).values * w_c).sum(dim=1) / w_c.sum(dim=1)
                rec = (sim.max(dim=1).values * w_r).sum(dim=1) / w_r.sum(dim=1)
                f1 = 2 * prec * rec / (prec + rec)
                scores.append(torch.stack([prec, rec, f1], dim=1))
        out = torch.cat(scores).double().cpu().numpy() if scores else np.zeros((0, 3))
        # a text of [CLS] [SEP] only: bert-score's P = R = F = 0
        empty = (lengths[cand] <= 2) | (lengths[ref] <= 2)
        out[empty] = 0.0
        return np.nan_to_num(out, nan=0.0)


def _gather_index(
    offsets: np.ndarray, lengths: np.ndarray, texts: np.ndarray, pad_row: int
) -> np.ndarray:
    """Rows of the tokens of each of ``texts`` in the concatenated vectors, padded with
    ``pad_row``."""
    offsets, lengths = offsets[texts], lengths[texts]
    width = int(lengths.max())
    positions = offsets[:, None] + np.arange(width)[None, :]
    inside = np.arange(width)[None, :] < lengths[:, None]
    return np.where(inside, positions, pad_row)
