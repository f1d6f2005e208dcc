"""ONNX graphs exported from torch once, kept in the model cache and opened by ONNX Runtime.

    export_once(target, write)     # ``write(partial)`` exports; the file is renamed into place when whole
    export_bert(target, model, example, "logits", lambda out: out.logits)   # a transformers BERT, by torch
    open_session(make_graph)       # an InferenceSession; a damaged graph is removed and made again, once

The shipped verifier (``judges.lm.verifier.onnx_graph``) and the embedded embedder
(``judges.lm.embedder_onnx``) both keep their graphs this way in ``model_cache_dir()``.

Owns: the cache's file handling (writable check, partial files and their sweep, rename into place) and
opening a session. Must not know which model a graph holds.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from judges.lm.threads import usable_cores

#: The ONNX operator set graphs are exported with (ONNX Runtime 1.20 and later run it).
OPSET = 17
#: Export leftovers older than this (a process killed mid-export) are removed by the next export.
STALE_PARTIAL_SECONDS = 3600
INSTALL_HINT = "pip install 'dspy-judges[embeddings]' (onnxruntime and onnx)"
#: A BERT's inputs, positional in the exported graphs.
BERT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_available() -> bool:
    """Whether ONNX Runtime (to run) and onnx (to export, once) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def sweep_partials(folder: Path, prefix: str) -> None:
    """Remove ``prefix*.partial`` files older than ``STALE_PARTIAL_SECONDS`` (a process killed exporting)."""
    for old in folder.glob(f"{prefix}*.partial") if folder.is_dir() else ():
        try:
            if time.time() - old.stat().st_mtime > STALE_PARTIAL_SECONDS:
                old.unlink()
        except OSError:
            pass  # another process's, or gone already


def check_writable(folder: Path) -> None:
    """Make ``folder`` and write a probe file in it; raises OSError when it cannot take a file."""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".probe.{os.getpid()}.{threading.get_ident()}"
    probe.write_bytes(b"")
    probe.unlink()


def export_once(target: Path, write: Callable[[Path], None]) -> Path:
    """``target``, made by ``write(partial)`` when it is not there yet. The partial file is renamed into place
    only when ``write`` returns, so a reader never sees half a file (two processes exporting at once each
    write their own and the last rename wins: same bytes)."""
    if target.is_file():
        return target
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        write(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def export_bert(target: Path, model: Any, example: Any, output: str, pick: Callable[[Any], Any]) -> Path:
    """``target`` (``export_once``): the transformers BERT ``model`` traced by torch's exporter on ``example``
    (its tokenizer's tensors), the three ``BERT_INPUTS`` positional, ``pick(the model's outputs)`` the one
    output, named ``output``; batch size and length dynamic."""
    import torch

    class Traced(torch.nn.Module):  # positional inputs in, one tensor out: what the exporter traces
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return pick(self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids))

    def write(partial: Path) -> None:
        with warnings.catch_warnings():  # the tracer's notes on Python control flow in BERT's mask code
            warnings.simplefilter("ignore")
            torch.onnx.export(Traced().eval(), tuple(example[n] for n in BERT_INPUTS), str(partial),
                              input_names=list(BERT_INPUTS), output_names=[output],
                              dynamic_axes={n: {0: "batch", 1: "tokens"} for n in BERT_INPUTS}, opset_version=OPSET,
                              dynamo=False)

    return export_once(target, write)


def open_session(make_graph: Callable[[], Path]):
    """An ONNX Runtime session (CPU) on ``make_graph()``. A graph that fails to load and fails onnx's checker
    is taken as damaged: removed and made again, once. One that passes the checker is kept and the error
    raised (this ONNX Runtime cannot run it; making it again would not help)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    # Threads sleep between runs: a judge runs two sessions in turn (the talk classifier's embedder, the verifier),
    # and one's spinning threads would hold the cores the other's run needs (docs/verifier-log.md, "Speed of the
    # combination").
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if usable_cores() < (os.cpu_count() or 1):  # pinned to fewer cores: ONNX Runtime would count the machine's
        options.intra_op_num_threads = usable_cores()
    path = make_graph()
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - ONNX Runtime raises its own error types
        import onnx  # the checker: imported only here, where it is needed

        try:
            onnx.checker.check_model(str(path))
        except Exception:  # noqa: BLE001 - damaged: export it again
            path.unlink(missing_ok=True)
            return onnxruntime.InferenceSession(str(make_graph()), options, providers=["CPUExecutionProvider"])
        raise RuntimeError(f"ONNX Runtime {onnxruntime.__version__} cannot run {path}: {err}") from err


def length_batches(lengths: Sequence[int], size: int, ratio: float) -> list[list[int]]:
    """Positions of ``lengths`` in batches of up to ``size``, shortest first, a batch closed when the next
    length is over ``ratio`` times its first: padding each batch to its longest then wastes at most about
    ``ratio - 1`` of its tokens, at the cost of more, smaller batches."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if not batches or len(batches[-1]) >= size or lengths[i] > ratio * lengths[batches[-1][0]]:
            batches.append([])
        batches[-1].append(i)
    return batches
