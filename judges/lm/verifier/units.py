"""How a verifier cuts evidence into the units a claim is scored against, and orders its pairs into batches.
The settings named below are ``Verifier``'s (``judges.lm.verifier``).

* **Long evidence** is split into overlapping chunks of whole sentences; each claim takes the best of those
  chunks and (``single_sentences=True``, the default) of the evidence's single sentences, and the sentence of
  that unit sharing most words with the claim is named as its evidence. Single sentences were added because
  a cross-encoder this small misreads a copied sentence next to others.
* **A shortlist per claim** (``top_units=2``, the default; ``None`` scores every unit): each claim is scored
  only against the 2 units sharing most of its words, rarer words weighing more (``shortlist``). A claim
  sharing no word with any unit is scored against every unit. On long evidence this scores a fraction of the
  pairs, with no loss of agreement.
* **Windows of about 128 tokens** (``chunk_tokens``): faster than longer windows, with no loss of agreement.

Each was chosen by a trial with a rule written before it ran (docs/verifier-log.md: "Single sentences as
units", "Shortlist of 2 units", "Windows of 128 tokens").

Owns: windows of whole sentences, the shortlist of units per claim, a unit's best sentence, batches by length.
Pure functions over text and token counts: must not load or call a model (``judges.lm.verifier`` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from judges.data.language import split_sentences, tokenize


def sentence_windows(split: Sequence[tuple[str, list[str]]], token_counts: Callable[[list[str]], list[int]],
                     chunk_tokens: int) -> list[tuple[str, list[str]]]:
    """Each (text, its sentences) cut into windows of whole sentences of about ``chunk_tokens`` tokens (as
    ``token_counts`` counts them), each window starting at the previous one's last sentence; a text that fits
    is one window. Each window comes with its sentences (``Verifier.chunks``; the training's summary pairs)."""
    out = []
    for text, sentences in split:
        lengths = token_counts(sentences)
        if sum(lengths) <= chunk_tokens:
            out.append((text.strip(), sentences))
            continue
        start = 0
        while start < len(sentences):
            end, size = start, 0
            while end < len(sentences) and (end == start or size + lengths[end] <= chunk_tokens):
                size += lengths[end]
                end += 1
            out.append((" ".join(sentences[start:end]), sentences[start:end]))
            if end >= len(sentences):
                break
            start = end - 1 if end - 1 > start else end
    return [(chunk, sentences) for chunk, sentences in out if chunk]


def shortlist(units: Sequence[str], claims: Sequence[str], k: int) -> list[list[int]]:
    """Per claim, the indices of the ``k`` units sharing most of its words, each word weighted by how rare it
    is among the units (log(1 + units / units holding it)); among equals the shorter unit, then the earlier.
    A claim sharing no word with any unit gets every unit: nothing to rank them by."""
    vocab = [set(tokenize(unit)) for unit in units]
    held: dict[str, int] = {}
    for words in vocab:
        for word in words:
            held[word] = held.get(word, 0) + 1
    out = []
    for claim in claims:
        weight = {w: float(np.log1p(len(units) / held[w])) for w in set(tokenize(claim)) if w in held}
        if not weight:
            out.append(list(range(len(units))))
            continue
        # fsum: the exact sum whatever order the set of shared words iterates in (it changes with the process's
        # hash seed); a plain sum's last bits moved with it, and with them which of two equal units was kept.
        ranked = sorted(range(len(units)), key=lambda j: (-math.fsum(weight[w] for w in vocab[j] & weight.keys()),
                                                          len(units[j]), j))
        out.append(sorted(ranked[:k]))
    return out


def best_sentence(text: str, claim: str, sentences: Sequence[str] | None = None) -> str:
    """The sentence of ``text`` (its ``sentences`` when already split) sharing most words with ``claim`` (the
    first among equals)."""
    words = set(tokenize(claim))
    sentences = sentences or split_sentences(text) or [text]
    return max(sentences, key=lambda s: len(words & set(tokenize(s))))
