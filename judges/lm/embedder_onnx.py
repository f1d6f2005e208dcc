"""The embedded embedder (all-MiniLM-L6-v2) on ONNX Runtime: its transformer exported from torch once, then
run without torch, texts batched by token length.

    onnx_embedder(folder)   # its runner on the cached graph; None (and a RuntimeWarning) when it cannot be made

One pass over a text gives both what ``Embedder`` offers: its token vectors (the transformer's last hidden
states, what sentence-transformers calls ``token_embeddings``) and its sentence vector (their mean over the
text's tokens, sentence-transformers' mean pooling). The tokenizer is the folder's ``tokenizer.json`` read by
``tokenizers``, cut at the model's ``max_seq_length``: the same token ids sentence-transformers feeds it.

Owns: exporting the embedder's graph and running it. Must not cache results (``Embedder`` does) or choose
which embedder a metric uses (``judges.lm.embeddings`` does).
"""

from __future__ import annotations

import hashlib
import json
import threading
import warnings
from importlib.metadata import version
from pathlib import Path

import numpy as np

from judges.lm.files import model_cache_dir
from judges.lm.onnx_files import (
    BERT_INPUTS,
    OPSET,
    check_writable,
    export_bert,
    length_batches,
    onnx_available,
    open_session,
    sweep_partials,
)

#: How much longer than the shortest text of a batch its longest may be.
PADDING_RATIO = 1.3


def _mean_pooling(folder: Path) -> bool:
    """Whether the folder's sentence-transformers modules are a transformer, mean pooling and (optionally)
    normalisation: the pipeline this module reproduces."""
    modules = json.loads((folder / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        return False
    pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text())
    return bool(pooling.get("pooling_mode_mean_tokens")) and not any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens")


def embedder_graph(folder: Path) -> Path:
    """The folder's transformer as an ONNX graph (last hidden states, any batch size and length), exported by
    torch once into ``model_cache_dir()``. The name carries the config's SHA-256, the weights' size and time,
    the torch and transformers versions and the opset, so other weights or a new exporter make a new file."""
    config = hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    weights = (folder / "model.safetensors").stat()  # size and time, as the verifier's key: not 90 MB read a start
    key = (f"{config}|{weights.st_size}|{weights.st_mtime_ns}|torch {version('torch')}|"
           f"transformers {version('transformers')}|opset {OPSET}")
    target = model_cache_dir() / f"embedder-{folder.name}.{hashlib.sha256(key.encode()).hexdigest()[:12]}.onnx"
    sweep_partials(target.parent, "embedder-")
    if target.is_file():
        return target
    check_writable(target.parent)
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(folder)).eval()
    example = AutoTokenizer.from_pretrained(str(folder))(["An example sentence."], return_tensors="pt")
    return export_bert(target, model, example, "hidden", lambda outputs: outputs.last_hidden_state)


class OnnxTransformer:
    """``run(texts) -> list of (tokens, d) float32 arrays``: each text's last hidden states, [CLS] and [SEP]
    included, padding left out. Texts are tokenized together, ordered by length and run in batches padded
    only to their own longest text (padding is masked, so a text's vectors do not depend on its batch)."""

    def __init__(self, folder: Path, batch_size: int = 64):
        from tokenizers import Tokenizer

        self.batch_size = batch_size
        self.session = open_session(lambda: embedder_graph(folder))
        config = json.loads((folder / "sentence_bert_config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(config.get("max_seq_length", 256)))
        self.tokenizer.no_padding()
        self._lock = threading.Lock()  # tokenizers' settings are per object; encode_batch is safe, settings not

    def run(self, texts: list[str]) -> list[np.ndarray]:
        with self._lock:
            encoded = self.tokenizer.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encoded])
        out: list[np.ndarray] = [np.zeros((0, 0), np.float32)] * len(texts)
        for rows in length_batches(lengths.tolist(), self.batch_size, PADDING_RATIO):
            width = int(lengths[rows].max())
            feed = {name: np.zeros((len(rows), width), np.int64) for name in BERT_INPUTS}
            for at, row in enumerate(rows):
                n = lengths[row]
                feed["input_ids"][at, :n] = encoded[row].ids
                feed["attention_mask"][at, :n] = 1
                feed["token_type_ids"][at, :n] = encoded[row].type_ids
            hidden = self.session.run(None, feed)[0]
            for at, row in enumerate(rows):
                out[row] = hidden[at, : lengths[row]].astype(np.float32)
        return out


def onnx_embedder(folder: Path, batch_size: int = 64) -> OnnxTransformer | None:
    """The ONNX runner for a sentence-transformers ``folder`` whose pipeline is a transformer with mean
    pooling; None when ONNX Runtime is missing, the pipeline is another, or the graph cannot be made (a
    RuntimeWarning says why: the caller runs sentence-transformers on torch instead)."""
    if not onnx_available():
        return None
    try:
        if not _mean_pooling(folder):
            return None
        return OnnxTransformer(folder, batch_size)
    except Exception as err:  # noqa: BLE001 - an exporter, runtime or cache error of any kind
        warnings.warn(f"the embedder {folder.name} runs on torch: its ONNX graph could not be made or loaded in "
                      f"{model_cache_dir()} ({type(err).__name__}: {err})", RuntimeWarning, stacklevel=3)
        return None
