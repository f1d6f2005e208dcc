"""Cheap signals: numbers computed from a sample (and the judge's result on it) without an LM call.

They serve as baselines the judges must beat (``calibration.heldout``) and as inputs of the stacked
calibrator (``calibration.calibrators``). Each takes ``(sample, result=None)``: ``result`` is the judge's
Prediction (or a dict) for the signals read from the judge's own steps. ``DIRECTIONS`` says which way each
signal points (+1: higher means more likely a positive label, -1: lower, 0: unknown), so that a calibrator
can be kept monotone in it. The grounding signals are the metrics of ``judges.metrics.grounding`` (what each
catches that token overlap misses is in that module's docstring).

The verifier signals (``verifier_weakest``, ``verifier_mean``) run the shipped groundedness verifier, a small
cross-encoder (``judges.lm.verifier``): tens of milliseconds an item, no LM.

Must not call an LM: every signal here is cheap and deterministic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from judges.data.language import split_sentences, tokenize
from judges.lm.embeddings import default_embeddings, resolve_embedder
from judges.lm.verifier import resolve_verifier
from judges.metrics.grounding import (
    alignment,
    bigram_share,
    sentence_supports,
    specifics_share,
    supported_specifics,
)


def _evidence(sample) -> str:
    return "\n".join(sample.retrieved_contexts or sample.reference_contexts or sample.reference_alternatives())


def token_overlap(sample, result=None) -> float:
    """Share of the response's tokens (CJK characters, words) that occur in the evidence text."""
    response = tokenize(sample.response or "")
    evidence = set(tokenize(_evidence(sample)))
    return sum(t in evidence for t in response) / len(response) if response else 0.0


def reference_token_recall(sample, result=None) -> float:
    """Share of the reference's tokens found in the response: does the answer contain the gold answer?
    With alternatives (a list of acceptable answers) the best alternative counts."""
    if not sample.reference or not sample.response:
        return 0.0
    response = set(tokenize(sample.response))
    best = 0.0
    for alternative in sample.reference_alternatives():
        tokens = tokenize(alternative)
        if tokens:
            best = max(best, sum(t in response for t in tokens) / len(tokens))
    return best


def embedding_similarity(sample, result=None) -> float:
    evidence = _evidence(sample)
    if not sample.response or not evidence:
        return 0.0
    return float(resolve_embedder().similarity([sample.response], [evidence])[0, 0])


def specifics_supported(sample, result=None) -> float:
    """Share of the response's numbers, dates and names found in the evidence (1.0 when it has none)."""
    return specifics_share(sample.response or "", _evidence(sample))


def weakest_sentence(sample, result=None) -> float:
    """The lowest token overlap of any response sentence with the evidence."""
    return float(min(sentence_supports(sample.response or "", _evidence(sample))[1]))


def bigram_support(sample, result=None) -> float:
    """Share of the response's word pairs found in the evidence (1 - the novel bigram rate)."""
    return bigram_share(sample.response or "", _evidence(sample))


def embedding_alignment(sample, result=None) -> float:
    """BERTScore-style precision of the response's tokens against the evidence's (the embedded embedder)."""
    value = alignment(sample.response or "", _evidence(sample), resolve_embedder())
    return 0.0 if value is None else value


@functools.lru_cache(maxsize=4096)
def _verifier_probabilities(response: str, evidence: str) -> tuple[float, ...]:
    claims = split_sentences(response) or [response]
    return tuple(row["probability"] for row in resolve_verifier().support([evidence], claims))


def verifier_weakest(sample, result=None) -> float:
    """The shipped verifier's lowest P(supported) over the response's sentences (each against its best
    evidence chunk): the trained counterpart of ``weakest_sentence``. English only (``judges.lm.verifier``)."""
    if not (sample.response or "").strip() or not _evidence(sample).strip():
        return 0.0
    return float(min(_verifier_probabilities(sample.response, _evidence(sample))))


def verifier_mean(sample, result=None) -> float:
    """The shipped verifier's mean P(supported) over the response's sentences."""
    if not (sample.response or "").strip() or not _evidence(sample).strip():
        return 0.0
    values = _verifier_probabilities(sample.response, _evidence(sample))
    return float(sum(values) / len(values))


def claims_missing_specifics(sample, result=None) -> float:
    """From the judge's own steps: the share of its extracted claims holding a number, date or name that
    the evidence does not contain (0.0 without claims)."""
    claims = (result or {}).get("claims", []) or []
    evidence = _evidence(sample)
    flagged = sum(bool(supported_specifics(c, evidence)[1]) for c in claims if isinstance(c, str))
    return flagged / len(claims) if claims else 0.0


def claim_count(sample, result=None) -> float:
    return float(len((result or {}).get("claims", []) or []))


def unsupported_count(sample, result=None) -> float:
    return float(sum(not v["supported"] for v in (result or {}).get("verdicts", []) or []))


FEATURES: dict[str, Callable[[Any, Any], float]] = {
    "token_overlap": token_overlap,
    "reference_token_recall": reference_token_recall,
    "embedding_similarity": embedding_similarity,
    "specifics_supported": specifics_supported,
    "weakest_sentence": weakest_sentence,
    "bigram_support": bigram_support,
    "embedding_alignment": embedding_alignment,
    "verifier_weakest": verifier_weakest,
    "verifier_mean": verifier_mean,
    "claim_count": claim_count,
    "unsupported_count": unsupported_count,
    "claims_missing_specifics": claims_missing_specifics,
}
#: Which way each signal points: +1 higher -> more likely positive, -1 lower, 0 no assumption.
DIRECTIONS: dict[str, int] = {
    "judge score": 1, "token_overlap": 1, "reference_token_recall": 1, "embedding_similarity": 1,
    "specifics_supported": 1, "weakest_sentence": 1, "bigram_support": 1, "embedding_alignment": 1,
    "verifier_weakest": 1, "verifier_mean": 1,
    "claim_count": 0, "unsupported_count": -1, "claims_missing_specifics": -1,
}
#: Signals that need only the sample (no judge result): the baselines a judge is compared with.
SAMPLE_SIGNALS = ("token_overlap", "reference_token_recall", "embedding_similarity", "specifics_supported",
                  "weakest_sentence", "bigram_support", "embedding_alignment", "verifier_weakest")


#: The signals that read the embedder's vectors of the response and the evidence.
EMBEDDING_SIGNALS = ("embedding_similarity", "embedding_alignment")
#: The signals that run a model on each item (the embedder's texts are encoded ahead, in batches).
SLOW_SIGNALS = ("verifier_weakest", "verifier_mean")
#: Texts the embedder encodes per call ahead of the signals (batched by length within each call).
PREPARE_CHUNK = 256


def signal_columns(names: Sequence[str], samples: Sequence[Any], results: Sequence[Any] | None = None, *,
                   progress: bool = False) -> dict[str, np.ndarray]:
    """Each signal of ``names`` on every (sample, judge result), a column per name. The embedder encodes
    every distinct response and evidence text first, in one call batched by length, when a signal reads
    them; its cache and the verifier's then serve every later request for the same text in the process
    (baselines, the calibrator's candidates, the report, ``apply``). ``progress`` shows bars for what takes
    time: encoding the texts, and each verifier signal."""
    samples = list(samples)
    results = list(results) if results is not None else [None] * len(samples)
    embedded = any(name in EMBEDDING_SIGNALS for name in names) and samples
    embedder = resolve_embedder() if embedded else None
    with default_embeddings(embedder):  # the signals resolve this same embedder, with what it prepared
        if embedded:
            texts = list(dict.fromkeys(t for s in samples for t in (s.response or "", _evidence(s))))
            with tqdm(total=len(texts), desc="signals: embedding the texts", unit="text",
                      disable=not progress) as bar:
                for at in range(0, len(texts), PREPARE_CHUNK):
                    embedder.prepare(texts[at:at + PREPARE_CHUNK])
                    bar.update(len(texts[at:at + PREPARE_CHUNK]))
        columns = {}
        for name in names:
            rows = zip(samples, results)
            if progress and name in SLOW_SIGNALS:
                rows = tqdm(rows, total=len(samples), desc=f"signal: {name.replace('_', ' ')}", unit="item")
            columns[name] = np.array([FEATURES[name](s, r) for s, r in rows], float)
    return columns


def feature_matrix(names: Sequence[str], samples: Sequence[Any], results: Sequence[Any] | None = None, *,
                   progress: bool = False) -> np.ndarray | None:
    """The cheap signals ``names`` of each (sample, judge result), one row per sample (``signal_columns``);
    None for no names."""
    if not names:
        return None
    columns = signal_columns(names, samples, results, progress=progress)
    return np.column_stack([columns[name] for name in names]) if len(samples) else np.zeros((0, len(names)))
