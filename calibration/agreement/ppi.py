"""Prediction-powered inference (Angelopoulos et al., Science 2023; as ARES uses it): a dataset-level mean
with a confidence interval that stays valid when the judge is biased.

A judge scores a large unlabelled set (N items) and a small labelled set (n items, with human labels).
The judge's mean on the unlabelled set is corrected by its average error on the labelled set:

    mean_PP = lam * mean(f(unlabelled)) - mean(lam * f(labelled) - y)
    var     = lam^2 * var(f(unlabelled)) / N + var(lam * f(labelled) - y) / n

``lam = 1`` is classic PPI; ``power_tuning=True`` (PPI++, Angelopoulos et al. 2023) picks the ``lam`` that
minimises the variance, so a useless judge falls back to the labelled-only estimate instead of widening it.

Must not score samples: it takes judge scores and labels as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats


@dataclass
class MeanEstimate:
    mean: float
    low: float
    high: float
    method: str
    n_labelled: int
    n_unlabelled: int
    lam: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def width(self) -> float:
        return self.high - self.low


def classical_mean(labels: Sequence[float], alpha: float = 0.05) -> MeanEstimate:
    """The labelled-only mean with a normal-approximation CI (what PPI is compared with)."""
    y = np.asarray(labels, float)
    half = stats.norm.ppf(1 - alpha / 2) * y.std(ddof=1) / np.sqrt(len(y))
    return MeanEstimate(float(y.mean()), float(y.mean() - half), float(y.mean() + half), "classical", len(y), 0)


def ppi_mean(
    labels: Sequence[float],
    labelled_scores: Sequence[float],
    unlabelled_scores: Sequence[float],
    *,
    alpha: float = 0.05,
    power_tuning: bool = True,
) -> MeanEstimate:
    """Prediction-powered estimate of the mean human label, with a (1 - alpha) confidence interval."""
    y = np.asarray(labels, float)
    f_lab = np.asarray(labelled_scores, float)
    f_unl = np.asarray(unlabelled_scores, float)
    if y.shape != f_lab.shape:
        raise ValueError(f"ppi_mean: {len(y)} labels but {len(f_lab)} labelled scores")
    n, big_n = len(y), len(f_unl)
    if n < 2 or big_n < 2:
        raise ValueError("ppi_mean: need at least 2 labelled and 2 unlabelled items")
    for name, values in (("labels", y), ("labelled_scores", f_lab), ("unlabelled_scores", f_unl)):
        if not np.all(np.isfinite(values)):
            raise ValueError(f"ppi_mean: {name} contain missing or non-finite values")
    lam = 1.0
    if power_tuning:
        f_all = np.concatenate([f_lab, f_unl])
        variance = f_all.var(ddof=1)
        lam = float(np.cov(y, f_lab, ddof=1)[0, 1] / ((1 + n / big_n) * variance)) if variance > 0 else 0.0
        lam = float(np.clip(lam, 0.0, 1.0))
    rectifier = lam * f_lab - y
    estimate = lam * f_unl.mean() - rectifier.mean()
    variance = lam**2 * f_unl.var(ddof=1) / big_n + rectifier.var(ddof=1) / n
    half = stats.norm.ppf(1 - alpha / 2) * np.sqrt(variance)
    return MeanEstimate(float(estimate), float(estimate - half), float(estimate + half),
                        "ppi++" if power_tuning else "ppi", n, big_n, lam)
