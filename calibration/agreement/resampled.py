"""Agreement statistics on every bootstrap resample at once: one resample a row of a matrix.

    batched = batched_statistics("binary", 0.5, labels)     # name -> (labels rows, scores rows) -> values
    on_resamples("roc_auc", one_at_a_time, batched, labels, scores, draws)   # a value or None per resample

``calibration.agreement.stats`` draws the resamples and reads the quantiles; the values are those of its
statistics on one resample at a time (tested), without a Python call per resample.

Owns: the row-wise forms of the statistics. Must not draw resamples or decide what a report shows.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

#: Up to this many items Kendall's tau is computed on the pairs' sign matrices (fast for small sets);
#: above it by scipy's O(n log n) algorithm.
KENDALL_PAIRWISE_MAX = 400
#: Resampled rows computed at once (bounds the memory of Kendall's pair matrices).
RESAMPLE_CHUNK = 64


def _row_ranks_and_ties(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``stats._ranks`` of each row (1-based, ties given their average rank: (first + last position) / 2 + 1),
    and each row's sum of squared tie-group sizes (a group of t equal values counts t * t)."""
    rows, n = x.shape
    order = np.argsort(x, axis=1, kind="mergesort")
    ordered = np.take_along_axis(x, order, axis=1)
    new = np.ones((rows, n), bool)
    new[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    last = np.ones((rows, n), bool)
    last[:, :-1] = new[:, 1:]
    position = np.broadcast_to(np.arange(n), (rows, n))
    first = np.maximum.accumulate(np.where(new, position, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, position, n)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((rows, n))
    np.put_along_axis(ranks, order, (first + end) / 2.0 + 1.0, axis=1)
    return ranks, (end - first + 1).sum(axis=1)


def _row_ranks(x: np.ndarray) -> np.ndarray:
    return _row_ranks_and_ties(x)[0]


def _row_pearson(y: np.ndarray, s: np.ndarray) -> np.ndarray:
    dy, ds = y - y.mean(axis=1, keepdims=True), s - s.mean(axis=1, keepdims=True)
    scale = np.sqrt(np.einsum("ij,ij->i", dy, dy) * np.einsum("ij,ij->i", ds, ds))
    return np.where(scale > 0, np.einsum("ij,ij->i", dy, ds) / np.where(scale > 0, scale, 1.0), np.nan)


def _row_kendall_binary(y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Kendall's tau-b against 0/1 labels from ranks: only pairs of a positive and a negative differ in the
    label, and their concordant minus discordant count is 2U - n1 * n0 (U the Mann-Whitney statistic); the
    pairs the scores do not tie are n * n - (sum of squared tie-group sizes). The pair matrices' integers."""
    ranks, tied = _row_ranks_and_ties(s)
    positive = y == 1
    n = y.shape[1]
    n1 = positive.sum(axis=1)
    n0 = n - n1
    u = np.where(positive, ranks, 0.0).sum(axis=1) - n1 * (n1 + 1) / 2
    pairs = (2 * n1 * n0 * (n * n - tied)).astype(np.float64)
    varied = (np.std(y, axis=1) > 0) & (np.std(s, axis=1) > 0) & (pairs > 0)
    return np.where(varied, 2 * (2 * u - n1 * n0) / np.sqrt(np.where(varied, pairs, 1.0)), np.nan)


def _row_kendall(y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row on the pairs' sign matrices, as ``stats._kendall``."""
    out = np.full(len(y), np.nan)
    varied = (np.std(y, axis=1) > 0) & (np.std(s, axis=1) > 0)
    for at in range(0, len(y), RESAMPLE_CHUNK):
        rows = np.arange(at, min(at + RESAMPLE_CHUNK, len(y)))
        rows = rows[varied[rows]]
        if not len(rows):
            continue
        dy = np.sign(y[rows, :, None] - y[rows, None, :]).astype(np.int8)
        ds = np.sign(s[rows, :, None] - s[rows, None, :]).astype(np.int8)
        concordance = np.einsum("rij,rij->r", dy, ds, dtype=np.int64)
        pairs = np.count_nonzero(dy, axis=(1, 2)) * np.count_nonzero(ds, axis=(1, 2)).astype(np.float64)
        out[rows] = concordance / np.sqrt(pairs)
    return out


def batched_statistics(kind: str, threshold: float,
                       y: np.ndarray) -> dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    """The statistics of ``stats.statistic_functions`` that have a form over many resamples at once: (labels,
    scores), one resample a row, to one value a row (NaN where undefined). The same values as one resample at
    a time (tested), without a Python call per resample; the others are computed a resample at a time."""
    batched = {
        "spearman": lambda y, s: _row_pearson(_row_ranks(y), _row_ranks(s)),
        "pearson": _row_pearson,
        "mae": lambda y, s: np.mean(np.abs(y - s), axis=1),
    }
    two_classes = set(np.unique(y)) <= {0.0, 1.0}
    if two_classes:
        batched["kendall"] = _row_kendall_binary
    elif len(y) <= KENDALL_PAIRWISE_MAX:
        batched["kendall"] = _row_kendall
    if kind != "binary":
        return batched

    def roc_auc(y, s):
        positive = y == 1
        n1 = positive.sum(axis=1)
        n0 = y.shape[1] - n1
        ranked = np.where(positive, _row_ranks(s), 0.0).sum(axis=1)
        return np.where((n1 > 0) & (n0 > 0), (ranked - n1 * (n1 + 1) / 2) / np.maximum(n1 * n0, 1), np.nan)

    def probabilities(s, values):
        return np.where(np.all((s >= 0) & (s <= 1), axis=1), values, np.nan)

    def ece(y, s, n_bins=10):
        clipped = np.clip(s, 0.0, 1.0)
        bins = np.minimum((clipped * n_bins).astype(int), n_bins - 1) + n_bins * np.arange(len(s))[:, None]
        gaps = np.bincount(bins.ravel(), weights=(y - clipped).ravel(), minlength=n_bins * len(s))
        return probabilities(s, np.abs(gaps.reshape(len(s), n_bins)).sum(axis=1) / s.shape[1])

    batched.update({
        "accuracy": lambda y, s: np.mean(y == (s >= threshold), axis=1),
        "roc_auc": roc_auc,
        "brier": lambda y, s: probabilities(s, np.mean((s - y) ** 2, axis=1)),
        "ece": ece,
    })
    if two_classes:  # two classes: recall and chance agreement per class in closed form
        def per_class(y, s):
            d = s >= threshold
            return [((y == c).mean(axis=1), (d == c).mean(axis=1), ((y == c) & (d == c)).sum(axis=1),
                     (y == c).sum(axis=1)) for c in (0, 1)]

        def balanced_accuracy(y, s):
            (_, _, hit0, size0), (_, _, hit1, size1) = per_class(y, s)
            recall0, recall1 = hit0 / np.maximum(size0, 1), hit1 / np.maximum(size1, 1)
            return np.where((size0 > 0) & (size1 > 0), (recall0 + recall1) / 2, np.where(size0 > 0, recall0, recall1))

        def cohen_kappa(y, s):
            (py0, pd0, _, _), (py1, pd1, _, _) = per_class(y, s)
            observed, expected = np.mean(y == (s >= threshold), axis=1), py0 * pd0 + py1 * pd1
            return np.where(expected < 1, (observed - expected) / np.where(expected < 1, 1 - expected, 1.0), np.nan)

        batched.update({"balanced_accuracy": balanced_accuracy, "cohen_kappa": cohen_kappa})
    return batched


def on_resamples(name: str, fn: Callable, batched: dict[str, Callable], y: np.ndarray, s: np.ndarray,
                  draws: np.ndarray) -> list[float | None]:
    """The statistic ``name`` on each resample ``draws`` (rows of item indices): None where undefined."""
    if name not in batched:
        return [fn(y[d], s[d]) for d in draws]
    values = np.empty(len(draws))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for at in range(0, len(draws), 8 * RESAMPLE_CHUNK):
            rows = draws[at:at + 8 * RESAMPLE_CHUNK]
            values[at:at + len(rows)] = batched[name](y[rows], s[rows])
    return [float(v) if math.isfinite(v) else None for v in values]
