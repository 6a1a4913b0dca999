"""A BERT folder's configuration and tokenizer, read without torch or transformers: what
`assay.models.bert` needs to run the model in plain torch, or None when transformers must
load it (see there)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ACTIVATION_NAMES",
    "SentenceFolder",
    "WordPieces",
    "encode_batch",
    "read_bert_folder",
    "read_sentence_folder",
]

#: the ``hidden_act`` values `assay.models.bert` runs
ACTIVATION_NAMES = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
#: ``model_max_length`` values that mean "no limit" in tokenizer files
_NO_LIMIT = 100_000
#: the tokenizer classes whose ``tokenizer.json`` is used as it is
_BERT_TOKENIZERS = (None, "BertTokenizer", "BertTokenizerFast")


@dataclass(frozen=True)
class WordPieces:
    """A fast tokenizer and the facts about it that encoding needs.

    Attributes:
        backend: the ``tokenizers.Tokenizer`` (special tokens added by its post-processor).
        max_length: the most tokens the model reads (``model_max_length``, else the
            model's ``max_position_embeddings``).
        pad_id: the padding token's id.
        special_ids: the ids of the [CLS] and [SEP] tokens.
    """

    backend: Any
    max_length: int
    pad_id: int
    special_ids: tuple[int, ...]


def encode_batch(backend: Any, texts: list[str]) -> list[Any]:
    """The encodings of ``texts`` (special tokens added) from a ``tokenizers.Tokenizer``:
    ``encode_batch_fast`` where the release has it (the same ids without the character
    offsets, about a tenth faster), else ``encode_batch``."""
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    return encode(texts, add_special_tokens=True)


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _token_name(value: Any) -> str | None:
    """A special token's text from tokenizer files (a string, or a dict with content)."""
    return value.get("content") if isinstance(value, dict) else value


def _word_pieces(folder: Path, config: dict[str, Any]) -> WordPieces | None:
    """The folder's BERT tokenizer from ``tokenizer.json``, or None when transformers
    would build a different one (another tokenizer class, or a normaliser that the
    tokenizer's configuration overrides)."""
    from tokenizers import Tokenizer

    setup = _read_json(folder / "tokenizer_config.json")
    special = _read_json(folder / "special_tokens_map.json")
    file = folder / "tokenizer.json"
    if not file.is_file() or setup.get("tokenizer_class") not in _BERT_TOKENIZERS:
        return None
    text = file.read_text(encoding="utf-8")
    normaliser = json.loads(text).get("normalizer") or {}
    if normaliser.get("type") != "BertNormalizer":
        return None
    for key, option in (
        ("do_lower_case", "lowercase"),
        ("strip_accents", "strip_accents"),
        ("tokenize_chinese_chars", "handle_chinese_chars"),
    ):
        if key in setup and setup[key] != normaliser.get(option):
            return None
    backend = Tokenizer.from_str(text)
    ids = {}
    for name, default in (("cls_token", "[CLS]"), ("sep_token", "[SEP]"), ("pad_token", "[PAD]")):
        token = _token_name(setup.get(name) or special.get(name)) or default
        ids[name] = backend.token_to_id(token)
    if ids["cls_token"] is None or ids["sep_token"] is None:
        return None
    limit = int(setup.get("model_max_length") or _NO_LIMIT + 1)
    if limit > _NO_LIMIT:
        limit = int(config.get("max_position_embeddings", 512))
    return WordPieces(
        backend=backend,
        max_length=limit,
        pad_id=ids["pad_token"] if ids["pad_token"] is not None else 0,
        special_ids=tuple(sorted({ids["cls_token"], ids["sep_token"]})),
    )


def read_bert_folder(path: str | Path) -> tuple[dict[str, Any], WordPieces] | None:
    """The configuration and tokenizer of a BERT folder this module runs, or None (load
    it with transformers)."""
    folder = Path(path)
    config = _read_json(folder / "config.json")
    if (
        config.get("model_type") != "bert"
        or config.get("position_embedding_type", "absolute") != "absolute"
        or config.get("hidden_act", "gelu") not in ACTIVATION_NAMES
        or config.get("is_decoder")
        or config.get("add_cross_attention")
        or not any((folder / f).is_file() for f in ("model.safetensors", "pytorch_model.bin"))
    ):
        return None
    pieces = _word_pieces(folder, config)
    return None if pieces is None else (config, pieces)


@dataclass(frozen=True)
class SentenceFolder:
    """A sentence-transformers folder of a BERT, mean pooling and, optionally, L2
    normalisation: what `assay.models.bert.MeanPooledBert` runs.

    Attributes:
        transformer: the folder of the BERT's files.
        config: its ``config.json``.
        pieces: its tokenizer.
        max_seq_length: the most tokens a text is cut to.
        normalize: whether the pooled vectors are L2-normalised.
        lowercase: whether texts are lowercased first (``do_lower_case``).
    """

    transformer: Path
    config: dict[str, Any]
    pieces: WordPieces
    max_seq_length: int
    normalize: bool
    lowercase: bool


def _module_kind(module: dict[str, Any]) -> str | None:
    """Transformer, Pooling or Normalize for a sentence-transformers module entry."""
    kind = str(module.get("type", ""))
    if not kind.startswith("sentence_transformers."):
        return None
    return kind.rsplit(".", 1)[-1]


def read_sentence_folder(path: str | Path) -> SentenceFolder | None:
    """The parts of a sentence-transformers folder that is a BERT with mean pooling (and
    optionally normalisation) and no prompts, or None: sentence-transformers loads it."""
    folder = Path(path)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None
    modules = json.loads(modules_file.read_text(encoding="utf-8"))
    kinds = [_module_kind(m) for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    setup = _read_json(folder / "config_sentence_transformers.json")
    if setup.get("prompts") or setup.get("default_prompt_name"):
        return None
    pooling = _read_json(folder / modules[1].get("path", "") / "config.json")
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True}
    if modes != {"pooling_mode_mean_tokens"} or pooling.get("pooling_mode", "mean") != "mean":
        return None
    transformer = folder / modules[0].get("path", "")
    found = read_bert_folder(transformer)
    if found is None:
        return None
    config, pieces = found
    encoder_setup = _read_json(transformer / "sentence_bert_config.json")
    longest = min(pieces.max_length, int(config.get("max_position_embeddings", 512)))
    return SentenceFolder(
        transformer=transformer,
        config=config,
        pieces=pieces,
        max_seq_length=int(encoder_setup.get("max_seq_length") or longest),
        normalize=kinds[-1] == "Normalize",
        lowercase=bool(encoder_setup.get("do_lower_case")),
    )
