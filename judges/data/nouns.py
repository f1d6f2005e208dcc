"""English nouns and their senses, from WordNet 3.0: is a word a noun, and may one noun stand for another?

    is_noun("carbon dioxide")            # True
    may_stand_for("movie", "film")       # True: a sense in common
    may_stand_for("animal", "dogs")      # True: the claim's noun is a kind the evidence's is one of
    may_stand_for("oxygen", "carbon dioxide")   # False: a swap

The swap check (``judges.data.contrasts.noun_swap_contrasts``) reads a claim whose one noun differs from an
evidence sentence's as a swap only when the claim's noun may not stand for the sentence's. Any sense counts, so a
noun with many senses is rarely read as swapped: a missed swap costs less than a paraphrase capped.

Data: ``lexicon/wordnet-nouns.npz``, built from WordNet 3.0's ``data.noun`` by
``calibration.verifier.wordnet_nouns``; WordNet's licence is in ``lexicon/WORDNET_LICENSE``.

Owns: reading the lexicon. Must not call a model.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
from importlib import resources

import numpy as np

LEXICON = "wordnet-nouns.npz"


def _lexicon_file():
    return resources.files("judges.data") / "lexicon" / LEXICON


@functools.cache
def _lexicon() -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The sorted lemmas, and each lemma's synsets and each synset's hypernyms as ragged arrays."""
    with resources.as_file(_lexicon_file()) as path, \
            np.load(path, allow_pickle=False) as found:
        return (found["lemmas"].tobytes().decode("utf-8").split("\n"), found["sense_starts"], found["senses"],
                found["hypernym_starts"], found["hypernyms"])


@functools.cache
def lexicon_identity() -> str:
    """The lexicon file's name and SHA-256: a verifier reading it scores by it (run files record it)."""
    data = _lexicon_file().read_bytes()
    return f"{LEXICON} sha256:{hashlib.sha256(data).hexdigest()}"


def _synsets(lemma: str) -> frozenset[int] | None:
    lemmas, starts, senses_, _, _ = _lexicon()
    at = bisect.bisect_left(lemmas, lemma)
    if at == len(lemmas) or lemmas[at] != lemma:
        return None
    return frozenset(senses_[starts[at]:starts[at + 1]].tolist())


@functools.cache
def senses(noun: str) -> frozenset[int]:
    """The WordNet synsets of ``noun`` (one or more words, any case): as written, else with its last word's
    noun lemma by LemmInflect ("children" -> "child", "carbon dioxides" -> "carbon dioxide"); empty when
    WordNet lists neither as a noun."""
    from lemminflect import getLemma

    words = noun.casefold().split()
    if not words:
        return frozenset()
    found = _synsets(" ".join(words))
    if found is None:
        stem = getLemma(words[-1], upos="NOUN")
        found = _synsets(" ".join([*words[:-1], stem[0]])) if stem else None
    return found or frozenset()


def is_noun(word: str) -> bool:
    """Whether WordNet lists ``word`` (or its singular) as a noun."""
    return bool(senses(word))


@functools.cache
def _ancestors(synset: int) -> frozenset[int]:
    """Every hypernym of ``synset``, up to the root, itself excluded."""
    _, _, _, starts, hypernyms = _lexicon()
    found: set[int] = set()
    todo = [synset]
    while todo:
        at = todo.pop()
        for parent in hypernyms[starts[at]:starts[at + 1]].tolist():
            if parent not in found:
                found.add(parent)
                todo.append(parent)
    return frozenset(found)


def may_stand_for(claim_noun: str, evidence_noun: str) -> bool:
    """Whether ``claim_noun`` may say what ``evidence_noun`` says: a sense in common (a synonym), or a sense
    of the claim's that is a hypernym of one of the evidence's (the claim says less: "animal" for "dog").
    The other way round ("dog" for "animal") the claim says more than the evidence, so it may not."""
    mine, theirs = senses(claim_noun), senses(evidence_noun)
    return bool(mine & theirs) or any(mine & _ancestors(s) for s in theirs)
