"""Which item should a person label next? Active selection for calibrating a judge.

An unlabelled item is worth a person's time when the calibrated judge is unsure of it, when the judge and
a cheap signal disagree about it (one of them is wrong there), and when it is unlike the items already
picked (ten near-copies teach the calibrator one thing). ``labelling_priority`` scores the first two,
``select_for_labelling`` adds the third greedily (maximal marginal relevance), and ``selection_order``
simulates a person labelling a pool batch by batch, refitting between batches, so that
``experiments/label_curve.py`` can compare active with random selection at the same label counts.

    priority  = mean of  1 - |2p - 1|   (uncertainty: 1 at p = 0.5, 0 at p = 0 or 1)
                    and  |p - s|        (disagreement with the signal s in [0, 1], when there is one)
    value(i)  = (1 - diversity) * priority(i) + diversity * (1 - max cosine(i, picked))

Ties go to the earlier item, so a ranking is deterministic.

Must not ask a person anything (the ``label`` command does) or call an LM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["labelling_priority", "select_for_labelling", "selection_order"]


def labelling_priority(probabilities: Sequence[float], signal: Sequence[float] | None = None) -> np.ndarray:
    """Per item: the judge's uncertainty, averaged with its disagreement with ``signal`` when given. NaN
    probabilities (items the judge failed on) are treated as p = 0.5: nothing is known about them."""
    p = np.asarray(probabilities, float)
    if p.ndim != 1:
        raise ValueError(f"labelling_priority: probabilities must be one number per item, got shape {p.shape}")
    p = np.where(np.isfinite(p), np.clip(p, 0.0, 1.0), 0.5)
    uncertainty = 1.0 - np.abs(2.0 * p - 1.0)
    if signal is None:
        return uncertainty
    s = np.asarray(signal, float)
    if s.shape != p.shape:
        raise ValueError(f"labelling_priority: {len(s)} signal values for {len(p)} items")
    disagreement = np.where(np.isfinite(s), np.abs(p - np.clip(s, 0.0, 1.0)), 0.0)
    return (uncertainty + disagreement) / 2.0


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def select_for_labelling(priority: Sequence[float], budget: int, *, vectors: np.ndarray | None = None,
                         exclude: Sequence[int] = (), diversity: float = 0.3) -> list[int]:
    """``budget`` item indices in the order to label them: the highest value first, where value trades
    ``priority`` against similarity (cosine of ``vectors``, e.g. embeddings) to the items already picked,
    ``exclude`` included (those already labelled). Without ``vectors``, by priority alone."""
    priority = np.asarray(priority, float)
    if not 0.0 <= diversity <= 1.0:
        raise ValueError(f"select_for_labelling: diversity must be in [0, 1], got {diversity}")
    if budget < 0:
        raise ValueError(f"select_for_labelling: budget must be >= 0, got {budget}")
    excluded = set(exclude)
    left = [i for i in range(len(priority)) if i not in excluded]
    if vectors is None or diversity == 0.0:
        return sorted(left, key=lambda i: (-priority[i], i))[:budget]
    unit = _unit_rows(np.asarray(vectors, float))
    if len(unit) != len(priority):
        raise ValueError(f"select_for_labelling: {len(unit)} vectors for {len(priority)} items")
    nearest = np.full(len(priority), 0.0)  # max similarity to anything picked so far (0: nothing yet)
    for j in exclude:
        nearest = np.maximum(nearest, unit @ unit[j])
    picked = []
    while left and len(picked) < budget:
        value = (1.0 - diversity) * priority[left] + diversity * (1.0 - nearest[left])
        best = left[int(np.argmax(value))]  # argmax keeps the first of equal values: the earlier item
        picked.append(best)
        left.remove(best)
        nearest = np.maximum(nearest, unit @ unit[best])
    return picked


def selection_order(labels: Sequence[int], n: int, *, strategy: str,
                    probabilities: Callable[[list[int]], np.ndarray] | None = None,
                    signal: Sequence[float] | None = None, vectors: np.ndarray | None = None, start: int = 6,
                    batch: int = 2, diversity: float = 0.3, seed: int = 0) -> list[int]:
    """The first ``n`` pool items a simulated person labels, in order (``labels`` are the pool's binary
    labels, revealed only for picked items). Both strategies begin with the same seeded random items,
    ``start`` of them or more until both labels have been seen (a calibrator needs both). ``"random"``
    goes on in that random order; ``"active"`` asks ``probabilities(picked)`` (the calibrator refitted on
    the picked items, applied to the whole pool) after every ``batch`` and picks by
    ``select_for_labelling``."""
    if strategy not in ("random", "active"):
        raise ValueError(f"selection_order: strategy={strategy!r} is not 'random' or 'active'")
    labels = np.asarray(labels)
    if n > len(labels):
        raise ValueError(f"selection_order: {n} labels asked of a pool of {len(labels)}")
    order = np.random.default_rng(seed).permutation(len(labels)).tolist()
    first = min(start, n)
    while first < n and len(set(labels[order[:first]].tolist())) < 2:
        first += 1
    if strategy == "random":
        return order[:n]
    if probabilities is None:
        raise ValueError("selection_order: strategy='active' needs probabilities=")
    picked = order[:first]
    while len(picked) < n:
        priority = labelling_priority(probabilities(picked), signal)
        picked += select_for_labelling(priority, min(batch, n - len(picked)), vectors=vectors, exclude=picked,
                                       diversity=diversity)
    return picked
