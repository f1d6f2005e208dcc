"""Cheap signals: numbers computed from a sample (and the judge's result on it) without an LM call.

They serve as baselines the judges must beat (``calibration.heldout``) and as inputs of the stacked
calibrator (``calibration.calibrators``). Each takes ``(sample, result=None)``: ``result`` is the judge's
Prediction (or a dict) for the signals read from the judge's own steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from judges.language import tokenize
from judges.models import resolve_embedder


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


def claim_count(sample, result=None) -> float:
    return float(len((result or {}).get("claims", []) or []))


def unsupported_count(sample, result=None) -> float:
    return float(sum(not v["supported"] for v in (result or {}).get("verdicts", []) or []))


FEATURES: dict[str, Callable[[Any, Any], float]] = {
    "token_overlap": token_overlap,
    "reference_token_recall": reference_token_recall,
    "embedding_similarity": embedding_similarity,
    "claim_count": claim_count,
    "unsupported_count": unsupported_count,
}


def feature_matrix(names: Sequence[str], samples: Sequence[Any], results: Sequence[Any]) -> np.ndarray | None:
    """The cheap signals ``names`` of each (sample, judge result), one row per sample; None for no names."""
    if not names:
        return None
    return np.array([[FEATURES[f](s, r) for f in names] for s, r in zip(samples, results)], float)
