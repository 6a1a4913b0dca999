"""The code paths a CUDA run takes, run on the CPU: BERTScore's tokenising through the
Rust backend, its passes by tokens and its large matching blocks, float16 under
autocast, sentence-transformers embedders cast to float16, and the next chunk's asks
answered while the current chunk reduces. Each gives the values of the CPU's default
path (exactly, or within the stated tolerance of float32)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

import assay.models.token_encoder as token_encoder
from assay.core.config import AssayConfig
from assay.core.sample import Sample
from assay.engine.resources import Resources
from assay.evaluation.chunks import score_chunks
from assay.metrics.registry import resolve_metrics
from assay.models.bertscore import BERTScorer
from assay.models.embedders import SentenceTransformerEmbedder, minilm_path
from test_bertscore_precision import PAIRS as STS_PAIRS

#: the STS-B-like pairs of the bfloat16 tests, and a long and a short text
PAIRS = [
    *STS_PAIRS[:6],
    ("Refunds take 3 business days. " * 40, "Refunds are processed within 30 days."),
    ("Nobody answered.", "The stock market fell sharply today, and bonds rallied."),
]

#: texts whose token ids the backend must give as transformers' tokenizer does: accents,
#: CJK, emoji, spaces to strip, an empty text and one past the model's 512 tokens
TEXTS = [
    "Café naïve résumé",
    "東京は日本の首都です。",
    "ok 👍🏽 thanks!!",
    "   padded with spaces   ",
    "",
    "word " * 700,
    "Mixed CASE and numbers 3.14159, $42.",
]


@pytest.fixture(scope="module")
def scorer() -> BERTScorer:
    return BERTScorer()


def test_backend_token_ids_equal_the_transformers_tokenizer(scorer: BERTScorer) -> None:
    from transformers import AutoTokenizer

    encoder = scorer._encoder
    assert encoder.engine == "assay"  # the folder's tokenizer.json, read without transformers
    expected = AutoTokenizer.from_pretrained(minilm_path())(
        [t.strip() for t in TEXTS],
        add_special_tokens=True,
        truncation=True,
        max_length=encoder.max_length,
    )["input_ids"]
    ours = encoder.token_ids(TEXTS)
    assert ours == [list(ids) for ids in expected]
    assert len(ours[5]) == 512  # truncated at the model's length


def test_passes_by_tokens_and_large_blocks_give_the_same_scores(
    scorer: BERTScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cands, refs = [c for c, _ in PAIRS], [r for _, r in PAIRS]
    by_texts = scorer._encoder.score_pairs(list(zip(cands, refs, strict=True)), batch_size=3)
    by_tokens = BERTScorer(tokens_per_batch=300)
    encoder = by_tokens._encoder
    # several passes (a pass of 300 tokens holds one 250-token text, or many short ones)
    lengths = np.array(sorted((len(x) for x in encoder.token_ids(cands + refs)), reverse=True))
    passes = list(encoder._passes(lengths, batch_size=3))
    assert passes[0] == (0, 1) and len(passes) >= 2 and passes[-1][1] == len(lengths)
    # blocks bounded by similarities: shrink the bound so the 8 pairs need several
    monkeypatch.setattr(token_encoder, "_MATCH_ELEMENTS", 4_000)
    c_len = np.array([len(x) for x in encoder.token_ids(cands)])
    r_len = np.array([len(x) for x in encoder.token_ids(refs)])
    blocks = list(encoder._match_blocks(c_len, r_len))
    assert len(blocks) >= 2 and blocks[-1].stop == len(PAIRS)
    for block in blocks:
        size = block.stop - block.start
        assert size == 1 or size * c_len[block].max() * r_len[block].max() <= 4_000
    ours = encoder.score_pairs(list(zip(cands, refs, strict=True)), batch_size=3)
    np.testing.assert_allclose(ours, by_texts, atol=1e-5, rtol=0)


def test_float16_scores_are_within_tolerance_and_named(scorer: BERTScorer) -> None:
    cands, refs = [c for c, _ in PAIRS], [r for _, r in PAIRS]
    half = BERTScorer(precision="float16")
    assert half.name == "all-MiniLM-L6-v2@L6/fp16"
    gap = np.abs(half.raw_scores(cands, refs) - scorer.raw_scores(cands, refs))
    # STS-B dev: at most 0.00022 over 1,500 pairs; float16 keeps 11 bits, so some move
    assert 1e-6 < gap.max() <= 0.001


def test_sentence_transformer_in_float16_is_within_tolerance_and_named() -> None:
    full = SentenceTransformerEmbedder(minilm_path())
    half = SentenceTransformerEmbedder(minilm_path(), precision="float16")
    assert (full.name, half.name) == ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2/fp16")
    left, right = [c for c, _ in PAIRS], [r for _, r in PAIRS]
    gap = np.abs(half.pair_similarity(left, right) - full.pair_similarity(left, right))
    assert 1e-6 < gap.max() <= 0.002  # STS-B dev: at most 0.0005
    vectors = half.embed(left)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_precision_settings_are_checked() -> None:
    assert AssayConfig(bertscore_precision="float16").bertscore_precision == "float16"
    assert AssayConfig(embedder_precision="float16").embedder_precision == "float16"
    with pytest.raises(ValidationError, match="embedder_precision"):
        AssayConfig(embedder_precision="int8")
    with pytest.raises(ValueError, match="embedder_precision='int8'"):
        SentenceTransformerEmbedder(minilm_path(), precision="int8")


def test_asks_answered_ahead_give_the_rows_of_one_chunk_at_a_time(resources: Resources) -> None:
    samples = [
        Sample(id=str(i), response=c, expected=r, query="q") for i, (c, r) in enumerate(PAIRS * 2)
    ]
    metrics = resolve_metrics(["bertscore", "semantic_similarity", "exact_match"], None)
    chunks = [samples[i : i + 3] for i in range(0, len(samples), 3)]
    seconds: dict[str, float] = {}
    plain = [row for _, rows in score_chunks(metrics, chunks, resources, seconds) for row in rows]
    ahead = [
        row
        for _, rows in score_chunks(metrics, iter(chunks), resources, seconds, ahead=True)
        for row in rows
    ]
    assert len(ahead) == len(samples)
    for one, other in zip(plain, ahead, strict=True):
        assert {k: r.value for k, r in one.items()} == {k: r.value for k, r in other.items()}
    assert seconds["asks"] > 0
    assert list(score_chunks(metrics, iter([]), resources, seconds, ahead=True)) == []
