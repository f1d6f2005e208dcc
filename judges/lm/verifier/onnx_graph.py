"""The shipped groundedness verifier on ONNX Runtime: exported from torch once, then scored without torch.

    shipped_onnx()                      # the cached graph's path (exported with torch the first time)
    shipped_onnx_int8()                 # the same graph with int8 weights (``"embedded-int8"``), made once
    onnx_runtime(checked_manifest(), 256, strict=True)  # (session, pair and counting tokenizers) for ``Verifier``

``Verifier(runtime="auto")`` (the default) runs the shipped verifier here, float32 or int8, when ONNX Runtime
and onnx are installed (the ``embeddings`` extra). The graph is the same model traced by torch's exporter,
kept in ``model_cache_dir()`` (``$DSPY_JUDGES_CACHE``, else ``$XDG_CACHE_HOME/dspy-judges``, else
``~/.cache/dspy-judges``): the shipped safetensors stay the only weights in the package. Its tokenizers
are the base model's ``tokenizer.json`` read by ``tokenizers`` itself, the library the transformers
tokenizer wraps: the same token ids.

Owns: exporting, caching and loading the ONNX graph. Must not score (``judges.lm.verifier.Verifier`` does) or
change the shipped weights.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from judges.lm.files import embedded_embedder_path, model_cache_dir
from judges.lm.onnx_files import (
    INSTALL_HINT,
    OPSET,
    check_writable,
    export_bert,
    export_once,
    onnx_available,
    open_session,
    sweep_partials,
)
from judges.lm.verifier.files import (
    SHIPPED_MANIFEST,
    SHIPPED_WEIGHTS,
    VerifierError,
    checked_manifest,
    load_shipped,
)

__all__ = ["INSTALL_HINT", "OPSET", "GraphCacheError", "onnx_available", "onnx_runtime", "shipped_onnx",
           "shipped_onnx_int8"]


class GraphCacheError(VerifierError):
    """The model cache cannot hold the exported graph (not a folder, not writable)."""


def shipped_onnx(weights: Path = SHIPPED_WEIGHTS, manifest: Path = SHIPPED_MANIFEST, *,
                 meta: dict[str, Any] | None = None) -> Path:
    """The shipped verifier as an ONNX graph (float32, any batch size and length), exported by torch once
    into ``model_cache_dir()`` and reused. The name carries the weights' SHA-256, the base model's config
    (its SHA-256) and weights (size and time), the torch and transformers versions and the opset, so changed
    weights or a new exporter make a new file (older graphs stay: another environment may share the cache).
    It is written beside its final name and renamed into place, so a reader never sees half a file (two
    processes exporting at once each write their own and the last rename wins: same bytes). ``meta``: the
    manifest as ``checked_manifest`` returned it, when the caller has checked the files already (they are
    not hashed twice)."""
    from importlib.metadata import version

    meta = meta if meta is not None else checked_manifest(weights, manifest)
    base = embedded_embedder_path()
    config = hashlib.sha256((base / "config.json").read_bytes()).hexdigest()
    weights_stat = (base / "model.safetensors").stat()
    key = (f"{meta['sha256']}|{config}|{weights_stat.st_size}|{weights_stat.st_mtime_ns}|torch {version('torch')}|"
           f"transformers {version('transformers')}|opset {OPSET}")
    target = model_cache_dir() / f"groundedness-minilm.{hashlib.sha256(key.encode()).hexdigest()[:12]}.onnx"
    sweep_partials(target.parent, "groundedness-minilm.")
    if target.is_file():
        return target
    try:  # before loading torch: a cache that cannot take the file fails fast
        check_writable(target.parent)
    except OSError as err:
        raise GraphCacheError(f"the verifier's ONNX graph cannot be written to {target.parent}: {err} (set "
                              "DSPY_JUDGES_CACHE to a writable folder)") from None
    model, tokenizer, _ = load_shipped(weights, manifest)
    example = tokenizer(["An example passage."], ["An example claim."], return_tensors="pt")
    return export_bert(target, model, example, "logits", lambda outputs: outputs.logits)


def shipped_onnx_int8(*, meta: dict[str, Any] | None = None) -> Path:
    """The shipped graph (``shipped_onnx``) with its weights quantized to int8 by ONNX Runtime's dynamic
    quantization (activations quantized as they come), made once beside it and reused: the name adds the
    ONNX Runtime version that quantized it. Deterministic: the same graph gives the same bytes."""
    import logging

    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = shipped_onnx(meta=meta)
    target = source.with_name(f"{source.stem}.int8-ort{onnxruntime.__version__}.onnx")
    if target.is_file():
        return target
    root = logging.getLogger()
    quiet = logging.NullHandler()  # the quantizer's advice goes to the root logger, which would else get
    root.addHandler(quiet)         # a handler of its own for good (logging.warning's basicConfig)

    def quantize(graph: Path, partial: Path) -> None:
        # The quantizer writes its shape-inferred copy beside its input under a fixed name and deletes it:
        # two processes (or threads) quantizing the same file would delete each other's. So each reads its
        # own link to the graph, in a folder of its own.
        with tempfile.TemporaryDirectory(prefix=f"{partial.name}.", dir=partial.parent) as private:
            own = Path(private) / graph.name
            try:
                os.link(graph, own)
            except OSError:  # a file system without hard links
                shutil.copyfile(graph, own)
            quantize_dynamic(str(own), str(partial), weight_type=QuantType.QInt8)

    def write(partial: Path) -> None:
        try:
            quantize(source, partial)
        except OSError as err:
            raise GraphCacheError(f"the verifier's int8 graph cannot be written to {target.parent}: {err} (set "
                                  "DSPY_JUDGES_CACHE to a writable folder)") from None
        except Exception:  # noqa: BLE001 - the float32 graph may be damaged: export it again, once
            import onnx

            try:
                onnx.checker.check_model(str(source))
            except Exception:  # noqa: BLE001 - damaged
                source.unlink(missing_ok=True)
                quantize(shipped_onnx(meta=meta), partial)
            else:
                raise

    try:
        return export_once(target, write)
    finally:
        root.removeHandler(quiet)


def onnx_runtime(meta: dict[str, Any], max_length: int, *, strict: bool, int8: bool = False):
    """(session, pair tokenizer, counting tokenizer) for the shipped verifier on ONNX Runtime, its files
    already checked (``meta``: ``checked_manifest()``); ``int8``: its int8 graph (``shipped_onnx_int8``).
    When it cannot be made: with ``strict`` a ``VerifierError``, else (None, None, None) and a RuntimeWarning
    (``Verifier`` falls back to torch). The pair tokenizer pads to the batch's longest pair and cuts pairs
    longer than ``max_length`` tokens, the longer side first; the counting one neither pads nor cuts."""
    try:
        from tokenizers import Tokenizer

        if not onnx_available():
            raise RuntimeError(f"onnxruntime or onnx is not installed: {INSTALL_HINT}")
        graph = shipped_onnx_int8 if int8 else shipped_onnx
        session = open_session(lambda: graph(meta=meta))
        source = str(embedded_embedder_path() / "tokenizer.json")
        pairs, counter = Tokenizer.from_file(source), Tokenizer.from_file(source)
        pairs.enable_padding(pad_id=pairs.token_to_id("[PAD]"), pad_token="[PAD]")
        pairs.enable_truncation(max_length, strategy="longest_first")
        counter.no_truncation()
        counter.no_padding()
        return session, pairs, counter
    except GraphCacheError as err:
        if strict:
            raise
        reason = err
    except Exception as err:  # noqa: BLE001 - an exporter or runtime error of any kind
        if strict:
            raise VerifierError(f"the shipped verifier could not run on ONNX Runtime (graph cache "
                                f"{model_cache_dir()}): {err}") from err
        reason = err
    warnings.warn(f"the shipped verifier runs on torch: ONNX Runtime could not load it from {model_cache_dir()} "
                  f"({reason})", RuntimeWarning, stacklevel=3)
    return None, None, None
