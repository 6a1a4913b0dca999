"""The BERT encoder in plain torch (`assay.models.bert`) against transformers and
sentence-transformers on the shipped all-MiniLM-L6-v2, which folders it takes, and the
folders it leaves to transformers (then run as before, with the same values)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from assay.core.extras import ModelUnavailable
from assay.models.bert import ACTIVATIONS, MeanPooledBert, load_bert
from assay.models.bert_files import ACTIVATION_NAMES, read_bert_folder, read_sentence_folder
from assay.models.bertscore import BERTScorer
from assay.models.embedders import SentenceTransformerEmbedder, minilm_path
from assay.models.token_batches import TokenRows

TEXTS = [
    "A cat was sitting on the mat.",
    "   padded with spaces   ",
    "Café naïve résumé, 東京, ok 👍🏽!",
    "river " * 600,  # past both 256 and 512 word pieces
    "x",
]


def linked_copy(tmp_path: Path, name: str, edit: dict[str, dict] | None = None) -> Path:
    """A folder of symlinks to the shipped model's files, with the JSON files named in
    ``edit`` written anew with those keys changed."""
    folder = tmp_path / name
    folder.mkdir()
    source = Path(minilm_path())
    for item in source.iterdir():
        if edit and item.name in edit:
            data = json.loads(item.read_text(encoding="utf-8"))
            data.update(edit[item.name])
            (folder / item.name).write_text(json.dumps(data), encoding="utf-8")
        else:
            os.symlink(item, folder / item.name)
    return folder


def padded_batch(texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    from transformers import AutoTokenizer

    batch = AutoTokenizer.from_pretrained(minilm_path())(
        texts, padding=True, truncation=True, return_tensors="pt"
    )
    return batch["input_ids"], batch["attention_mask"]


def test_hidden_states_equal_transformers_bert() -> None:
    from transformers import AutoModel

    found = read_bert_folder(minilm_path())
    assert found is not None
    config, pieces = found
    assert pieces.max_length == 512 and pieces.pad_id == 0 and pieces.special_ids == (101, 102)
    ids, mask = padded_batch(TEXTS)
    types = (torch.arange(ids.shape[1])[None, :] >= 3).long() * mask  # two segments
    reference = AutoModel.from_pretrained(minilm_path()).eval()
    with torch.inference_mode():
        want = reference(input_ids=ids, attention_mask=mask, token_type_ids=types,
                         output_hidden_states=True).hidden_states  # fmt: skip
        whole = load_bert(minilm_path(), config)(ids, mask, types)
        cut = load_bert(minilm_path(), config, num_layers=3)(ids, mask, types)
        embedded = load_bert(minilm_path(), config, num_layers=0)(ids, mask, types)
    keep = mask.bool()
    for mine, theirs in ((whole, want[6]), (cut, want[3]), (embedded, want[0])):
        assert mine.shape == theirs.shape
        np.testing.assert_allclose(mine[keep].numpy(), theirs[keep].numpy(), atol=2e-5)


def test_the_activation_names_are_the_encoders() -> None:
    assert set(ACTIVATION_NAMES) == set(ACTIVATIONS)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ({"config.json": {"model_type": "roberta"}}, "another architecture"),
        ({"config.json": {"position_embedding_type": "relative_key"}}, "relative positions"),
        ({"config.json": {"hidden_act": "silu"}}, "an activation it lacks"),
        ({"tokenizer_config.json": {"do_lower_case": False}}, "a normaliser overridden"),
        ({"tokenizer_config.json": {"tokenizer_class": "XLMRobertaTokenizer"}}, "a tokenizer"),
    ],
)
def test_folders_it_does_not_run_are_left_to_transformers(
    tmp_path: Path, edit: dict[str, dict], why: str
) -> None:
    assert read_bert_folder(linked_copy(tmp_path, "other", edit)) is None, why


def test_a_folder_without_tokenizer_json_is_left_to_transformers(tmp_path: Path) -> None:
    folder = linked_copy(tmp_path, "no-fast")
    (folder / "tokenizer.json").unlink()
    assert read_bert_folder(folder) is None


def test_weights_that_do_not_fit_name_the_missing_tensor(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    folder = linked_copy(tmp_path, "broken")
    weights = load_file(str(folder / "model.safetensors"))
    del weights["encoder.layer.2.output.dense.weight"]
    (folder / "model.safetensors").unlink()
    save_file(weights, str(folder / "model.safetensors"))
    found = read_bert_folder(folder)
    assert found is not None
    with pytest.raises(ModelUnavailable, match=r"encoder\.layer\.2\.output\.dense\.weight"):
        load_bert(folder, found[0])


def test_mean_pooled_vectors_equal_sentence_transformers() -> None:
    from sentence_transformers import SentenceTransformer

    folder = read_sentence_folder(minilm_path())
    assert folder is not None
    assert (folder.max_seq_length, folder.normalize, folder.lowercase) == (256, True, False)
    mine = MeanPooledBert(folder).encode(TEXTS).numpy()
    theirs = SentenceTransformer(minilm_path(), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(mine, theirs, atol=1e-6)
    embedder = SentenceTransformerEmbedder(minilm_path())
    assert embedder.engine == "assay"


def test_other_pooling_runs_in_sentence_transformers_with_its_values(tmp_path: Path) -> None:
    """A folder pooling the [CLS] token is not mean pooling: sentence-transformers runs it,
    and the vectors are its own (not the mean-pooled ones)."""
    from sentence_transformers import SentenceTransformer

    folder = linked_copy(tmp_path, "cls-pooling")
    os.unlink(folder / "1_Pooling")
    (folder / "1_Pooling").mkdir()
    pooling = json.loads((Path(minilm_path()) / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    assert read_sentence_folder(folder) is None
    embedder = SentenceTransformerEmbedder(str(folder))
    assert embedder.engine == "sentence-transformers"
    theirs = SentenceTransformer(str(folder), device="cpu").encode(TEXTS[:2])
    np.testing.assert_allclose(embedder._encode(TEXTS[:2]), theirs, atol=1e-6)
    mean_pooled = SentenceTransformerEmbedder(minilm_path())._encode(TEXTS[:2])
    assert np.abs(theirs - mean_pooled).max() > 0.05


def test_bertscore_of_a_model_transformers_runs_equals_the_reference(tmp_path: Path) -> None:
    """A DistilBERT (random weights, the MiniLM tokenizer) is not a BERT: BERTScore loads
    it with transformers, and its scores are bert-score's own."""
    import bert_score
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel

    folder = tmp_path / "tiny-distilbert"
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=30522, dim=32, n_layers=2, n_heads=2, hidden_dim=64)
    DistilBertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(folder)
    scorer = BERTScorer(str(folder), 2, rescale=False)
    assert scorer._encoder.engine == "transformers"
    cands = ["The cat sat on the mat.", "Paris", "no no no"]
    refs = ["A cat was sitting on the mat.", "The capital of France is Paris.", "no"]
    library = bert_score.BERTScorer(model_type=str(folder), num_layers=2)
    expected = np.stack([t.numpy() for t in library.score(cands, refs)], axis=1)
    mine = np.stack(scorer.score(cands, refs), axis=1)
    np.testing.assert_allclose(mine, expected, atol=1e-4)


def test_passes_by_tokens_give_the_one_pass_vectors() -> None:
    """CUDA's passes by padded tokens, run on the CPU: with 300 tokens a pass the long text
    runs alone, the short ones together; the vectors are those of one pass, in order."""
    folder = read_sentence_folder(minilm_path())
    assert folder is not None
    by_tokens = MeanPooledBert(folder, tokens_per_batch=300)
    rows = TokenRows([e.ids for e in by_tokens._backend.encode_batch(TEXTS)])
    passes = [rows.order[first:stop].tolist() for first, stop in by_tokens._passes(rows.by_length)]
    # 256 tokens alone; then 12, 10, 5 and 3 tokens: 4 rows of 12 padded tokens
    assert rows.lengths.tolist() == [10, 5, 12, 256, 3]
    assert passes == [[3], [2, 0, 1, 4]]
    one_pass = MeanPooledBert(folder).encode(TEXTS).numpy()
    np.testing.assert_allclose(by_tokens.encode(TEXTS).numpy(), one_pass, atol=1e-6)


def test_the_callers_padding_flag_gives_the_same_states() -> None:
    """``padded`` from the caller (no wait for the device) against the mask read on the
    device: a batch without padding runs without a mask, one with padding with it."""
    found = read_bert_folder(minilm_path())
    assert found is not None
    model = load_bert(minilm_path(), found[0], num_layers=2)
    ids, mask = padded_batch(["one two three", "four five six"])  # equal lengths
    assert bool(mask.all())
    with torch.inference_mode():
        read = model(ids, mask)
        told = model(ids, mask, padded=False)
        masked = model(ids, mask, padded=True)  # an all-ones mask changes nothing
    np.testing.assert_array_equal(read.numpy(), told.numpy())
    np.testing.assert_allclose(masked.numpy(), read.numpy(), atol=1e-6)
