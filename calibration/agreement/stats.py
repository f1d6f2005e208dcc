"""Judge-human agreement: the statistics (scikit-learn / scipy), each with a bootstrap 95% CI, in one
printable, serialisable report.

    report = agreement(human_labels, judge_scores, kind="binary", threshold=0.5)
    print(report)                      # a table
    report.to_dict(); report.to_json()

``kind="binary"``: labels are 0/1 and judge scores are in [0, 1]; threshold-based statistics (accuracy,
balanced accuracy, Cohen's kappa, confusion matrix) use ``score >= threshold``; ranking and probability
statistics (ROC-AUC, Brier, ECE) use the scores themselves. ``kind="ordinal"``: labels and predictions
are ordered integers; kappa is quadratic-weighted. ``kind="continuous"``: correlations and MAE.
Undefined statistics (ROC-AUC with one class, a correlation of a constant) are ``None``, never NaN.

Must not score samples: it compares scores with labels as given.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibration.agreement.resampled import KENDALL_PAIRWISE_MAX, batched_statistics, on_resamples


def expected_calibration_error(labels: Sequence[float], scores: Sequence[float], n_bins: int = 10) -> float:
    """Mean |accuracy - confidence| over equal-width score bins, weighted by bin size."""
    labels, scores = np.asarray(labels, float), np.clip(np.asarray(scores, float), 0.0, 1.0)
    bins = np.minimum((scores * n_bins).astype(int), n_bins - 1)
    # per bin |sum(labels) - sum(scores)| = size * |accuracy - confidence|
    gaps = np.bincount(bins, weights=labels - scores, minlength=n_bins)
    return float(np.abs(gaps).sum() / len(labels))


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their average rank, as ``scipy.stats.rankdata`` (without its input checks,
    which cost more than the ranking on a bootstrap's small arrays)."""
    order = np.argsort(x, kind="mergesort")
    ordered = x[order]
    group = np.cumsum(np.concatenate([[True], ordered[1:] != ordered[:-1]])) - 1
    counts = np.bincount(group)
    average = np.cumsum(counts) - (counts - 1) / 2.0
    ranks = np.empty(len(x))
    ranks[order] = average[group]
    return ranks


def _kendall(y: np.ndarray, s: np.ndarray) -> float:
    """Kendall's tau-b, as ``scipy.stats.kendalltau``; NaN when either side is constant."""
    if not (np.std(y) > 0 and np.std(s) > 0):
        return float("nan")
    if len(y) > KENDALL_PAIRWISE_MAX:
        from scipy import stats

        return float(stats.kendalltau(y, s)[0])
    dy, ds = np.sign(y[:, None] - y[None, :]), np.sign(s[:, None] - s[None, :])
    return float((dy * ds).sum() / math.sqrt(np.count_nonzero(dy) * np.count_nonzero(ds)))


def _roc_auc(y: np.ndarray, s: np.ndarray) -> float:
    """Mann-Whitney form of ROC-AUC (ties count half), as ``sklearn.metrics.roc_auc_score``."""
    positive = y == 1
    n1, n0 = int(positive.sum()), int((~positive).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    return float((_ranks(s)[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _balanced_accuracy(y: np.ndarray, d: np.ndarray) -> float:
    """Mean recall over the classes present in ``y``, as ``sklearn.metrics.balanced_accuracy_score``."""
    return float(np.mean([np.mean(d[y == c] == c) for c in np.unique(y)]))


def _cohen_kappa(y: np.ndarray, d: np.ndarray) -> float:
    """(p_o - p_e) / (1 - p_e), as ``sklearn.metrics.cohen_kappa_score``; NaN when p_e is 1."""
    classes = np.union1d(y, d)
    observed = np.mean(y == d)
    expected = sum(np.mean(y == c) * np.mean(d == c) for c in classes)
    return float((observed - expected) / (1 - expected)) if expected < 1 else float("nan")


def _probabilities(s: np.ndarray) -> bool:
    return bool(np.all((s >= 0) & (s <= 1)))


def _pearson(y: np.ndarray, s: np.ndarray) -> float:
    dy, ds = y - y.mean(), s - s.mean()
    scale = math.sqrt(float(dy @ dy) * float(ds @ ds))
    return float(dy @ ds / scale) if scale > 0 else float("nan")


def statistic_functions(kind: str, threshold: float) -> dict[str, Callable[[np.ndarray, np.ndarray], float | None]]:
    """The statistics of one label kind. The binary ones and the correlations are written in numpy (checked
    against scikit-learn / scipy in the tests): the bootstrap calls each of them a thousand times, and the
    library versions' input checks made a report of six scorers take minutes."""
    from sklearn import metrics

    def guarded(fn):
        def run(y, s):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    return _finite(fn(y, s))
                except ValueError:  # e.g. a degenerate resample
                    return None
        return run

    common = {
        "spearman": guarded(lambda y, s: _pearson(_ranks(y), _ranks(s))),
        "kendall": guarded(_kendall),
        "pearson": guarded(_pearson),
        "mae": guarded(lambda y, s: float(np.mean(np.abs(y - s)))),
    }
    if kind == "binary":
        def decided(s):
            return (s >= threshold).astype(int)

        return {
            "accuracy": guarded(lambda y, s: float(np.mean(y == decided(s)))),
            "balanced_accuracy": guarded(lambda y, s: _balanced_accuracy(y, decided(s))),
            "cohen_kappa": guarded(lambda y, s: _cohen_kappa(y, decided(s))),
            "roc_auc": guarded(_roc_auc),
            # probability statistics: undefined for scores outside [0, 1] (e.g. negative cosines)
            "brier": guarded(lambda y, s: float(np.mean((s - y) ** 2)) if _probabilities(s) else float("nan")),
            "ece": guarded(lambda y, s: expected_calibration_error(y, s) if _probabilities(s) else float("nan")),
            **common,
        }
    if kind == "ordinal":
        return {
            "accuracy": guarded(lambda y, s: metrics.accuracy_score(y, np.rint(s).astype(int))),
            "quadratic_kappa": guarded(lambda y, s: metrics.cohen_kappa_score(y.astype(int), np.rint(s).astype(int),
                                                                              weights="quadratic")),
            **common,
        }
    if kind == "continuous":
        return dict(common)
    raise ValueError(f"agreement: kind={kind!r} is not one of binary, ordinal, continuous")


@dataclass
class AgreementReport:
    """Point estimates with bootstrap 95% CIs: ``stats[name] = {"value", "low", "high"}``."""

    kind: str
    n: int
    stats: dict[str, dict[str, float | None]]
    confusion_matrix: list[list[int]] | None = None
    threshold: float | None = None
    n_bootstrap: int = 1000
    meta: dict[str, Any] = field(default_factory=dict)

    def value(self, name: str) -> float | None:
        return self.stats[name]["value"]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, "threshold": self.threshold, "n_bootstrap": self.n_bootstrap,
                "stats": self.stats, "confusion_matrix": self.confusion_matrix, "meta": self.meta}

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgreementReport:
        return cls(kind=data["kind"], n=data["n"], stats=data["stats"], confusion_matrix=data.get("confusion_matrix"),
                   threshold=data.get("threshold"), n_bootstrap=data.get("n_bootstrap", 1000), meta=data.get("meta", {}))

    def __str__(self) -> str:
        def fmt(v):
            return "  n/a" if v is None else f"{v:6.3f}"

        title = f"agreement ({self.kind}, n={self.n}" + (f", threshold {self.threshold}" if self.threshold is not None else "")
        lines = [title + f", 95% bootstrap CI over {self.n_bootstrap} resamples)"]
        for name, s in self.stats.items():
            lines.append(f"  {name:<18} {fmt(s['value'])}  [{fmt(s['low'])}, {fmt(s['high'])}]")
        if self.confusion_matrix is not None:
            lines.append(f"  confusion matrix (rows: human, cols: judge) {self.confusion_matrix}")
        return "\n".join(lines)


def undefined_agreement(kind: str, n: int, *, threshold: float = 0.5, reason: str) -> AgreementReport:
    """A report whose every statistic is undefined (None): fewer than two items to measure on."""
    names = statistic_functions(kind, threshold)
    return AgreementReport(kind, n, {name: {"value": None, "low": None, "high": None} for name in names}, None,
                           threshold if kind == "binary" else None, 0, {"undefined": reason})


#: Statistics whose bootstrap is biased: a resample repeats items, and its ECE is larger than the sample's, so
#: the percentile interval can lie wholly above the estimate. Their interval
#: is moved down by the bootstrap's own bias estimate (the resamples' mean less the estimate), marked
#: ``"ci": "bias-shifted"``. (BCa was tried: it cannot reach below the smallest resample, so it missed as often.)
BIAS_SHIFTED_STATISTICS = frozenset({"ece"})


def bias_shifted_interval(point: float, samples: Sequence[float], confidence: float) -> tuple[float, float]:
    """The percentile interval of ``samples`` moved by their bias (mean less ``point``), floored at 0."""
    values = np.asarray(samples, dtype=float)
    bias = float(values.mean()) - point
    alpha = (1 - confidence) / 2
    low, high = (float(np.quantile(values, q)) - bias for q in (alpha, 1 - alpha))
    return max(low, 0.0), max(high, 0.0)


def agreement(
    labels: Sequence[float],
    scores: Sequence[float],
    *,
    kind: str = "binary",
    threshold: float = 0.5,
    n_bootstrap: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> AgreementReport:
    """Agreement between human ``labels`` and judge ``scores`` (same order), with percentile bootstrap CIs (moved
    by their bias for ``BIAS_SHIFTED_STATISTICS``, marked ``"ci": "bias-shifted"``); a statistic left undefined says why
    (``"undefined"``), e.g. Brier and ECE for scores outside [0, 1]."""
    y, s = np.asarray(labels, dtype=float), np.asarray(scores, dtype=float)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"agreement: labels and scores must be two equal-length lists, got {y.shape} and {s.shape}")
    if len(y) < 2:
        raise ValueError("agreement: need at least 2 labelled items")
    bad = np.where(~np.isfinite(y) | ~np.isfinite(s))[0]
    if len(bad):
        raise ValueError(f"agreement: labels/scores are missing or not finite at items {bad[:10].tolist()}")
    statistics, batched = statistic_functions(kind, threshold), batched_statistics(kind, threshold, y)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(y), size=(n_bootstrap, len(y)))
    alpha = (1 - confidence) / 2
    out: dict[str, dict[str, float | None]] = {}
    for name, fn in statistics.items():
        point = fn(y, s)
        samples = [v for v in on_resamples(name, fn, batched, y, s, draws) if v is not None]
        low = float(np.quantile(samples, alpha)) if samples else None
        high = float(np.quantile(samples, 1 - alpha)) if samples else None
        out[name] = {"value": point, "low": low if point is not None else None,
                     "high": high if point is not None else None}
        if name in BIAS_SHIFTED_STATISTICS and samples and point is not None:
            out[name]["low"], out[name]["high"] = bias_shifted_interval(point, samples, confidence)
            out[name]["ci"] = "bias-shifted"
        if name in ("brier", "ece") and point is None and not _probabilities(s):
            out[name]["undefined"] = "scores outside [0, 1] are not probabilities"
    matrix = None
    if kind in ("binary", "ordinal"):
        from sklearn.metrics import confusion_matrix

        decided = (s >= threshold).astype(int) if kind == "binary" else np.rint(s).astype(int)
        classes = sorted(set(y.astype(int)) | set(decided))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one class only: a 1x1 matrix is the right answer
            matrix = confusion_matrix(y.astype(int), decided, labels=classes).tolist()
    return AgreementReport(kind, len(y), out, matrix, threshold if kind == "binary" else None, n_bootstrap)


#: Statistics where a smaller value is better agreement.
LOWER_IS_BETTER = frozenset({"brier", "ece", "mae"})


@dataclass
class PairedComparison:
    """Scorer A vs scorer B on the same items. ``stats[name]``: ``difference`` (A - B), its paired bootstrap
    95% CI (``low``, ``high``), the paired bootstrap's two-sided ``p`` of no difference, and ``better``: "a" or
    "b" when the CI excludes 0 (the difference is established at 95%), else None. ``mcnemar``: the items only
    A decides right, only B decides right, and the exact two-sided McNemar p-value (binary labels)."""

    kind: str
    n: int
    stats: dict[str, dict[str, Any]]
    mcnemar: dict[str, Any] | None = None
    n_bootstrap: int = 1000

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, "stats": self.stats, "mcnemar": self.mcnemar,
                "n_bootstrap": self.n_bootstrap}

    def better(self, name: str) -> str | None:
        return self.stats[name]["better"]


def compare(
    labels: Sequence[float],
    scores_a: Sequence[float | None],
    scores_b: Sequence[float | None],
    *,
    kind: str = "binary",
    threshold: float = 0.5,
    n_bootstrap: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    stats: Sequence[str] | None = None,
) -> PairedComparison:
    """Is scorer A really better than scorer B on these items? Paired bootstrap CI of the difference of each
    agreement statistic (the same resampled items for both), and McNemar's exact test on the threshold
    decisions for binary labels. Items either scorer failed on (None) are left out of both. ``stats``: only
    these statistics (each one's result is the same as among all: the resampled items do not change)."""
    if not len(labels) == len(scores_a) == len(scores_b):
        raise ValueError(f"compare: labels, scores_a and scores_b must have one value per item, got "
                         f"{len(labels)}, {len(scores_a)}, {len(scores_b)}")
    kept = [i for i in range(len(labels)) if scores_a[i] is not None and scores_b[i] is not None]
    y = np.asarray([labels[i] for i in kept], float)
    a = np.asarray([scores_a[i] for i in kept], float)
    b = np.asarray([scores_b[i] for i in kept], float)
    bad = np.where(~np.isfinite(y) | ~np.isfinite(a) | ~np.isfinite(b))[0]
    if len(bad):
        raise ValueError(f"compare: labels/scores are not finite at items {[kept[i] for i in bad[:10]]}")
    statistics = statistic_functions(kind, threshold)
    if stats is not None:
        unknown = [name for name in stats if name not in statistics]
        if unknown:
            raise ValueError(f"compare: {unknown} are not statistics of {kind} labels; choose from {list(statistics)}")
        statistics = {name: statistics[name] for name in stats}
    if len(y) < 2:
        empty = {name: {"difference": None, "low": None, "high": None, "better": None, "p": None}
                 for name in statistics}
        return PairedComparison(kind, len(y), empty, None, n_bootstrap)
    draws = np.random.default_rng(seed).integers(0, len(y), size=(n_bootstrap, len(y)))
    alpha = (1 - confidence) / 2
    batched = batched_statistics(kind, threshold, y)
    out: dict[str, dict[str, Any]] = {}
    for name, fn in statistics.items():
        va, vb = fn(y, a), fn(y, b)
        point = None if va is None or vb is None else va - vb
        diffs = [da - db for da, db in zip(on_resamples(name, fn, batched, y, a, draws),
                                           on_resamples(name, fn, batched, y, b, draws))
                 if da is not None and db is not None]
        low = float(np.quantile(diffs, alpha)) if diffs and point is not None else None
        high = float(np.quantile(diffs, 1 - alpha)) if diffs and point is not None else None
        better = None
        if low is not None and (low > 0 or high < 0):
            a_higher = low > 0
            better = "a" if a_higher != (name in LOWER_IS_BETTER) else "b"
        spread = np.asarray(diffs)  # two-sided p: twice the smaller share of differences on either side of 0
        p = (float(min(1.0, 2 * min(np.mean(spread <= 0), np.mean(spread >= 0))))
             if diffs and point is not None else None)
        out[name] = {"difference": point, "low": low, "high": high, "better": better, "p": p}
    mcnemar = None
    if kind == "binary":
        from scipy.stats import binomtest

        right_a, right_b = (a >= threshold) == (y == 1), (b >= threshold) == (y == 1)
        only_a, only_b = int((right_a & ~right_b).sum()), int((right_b & ~right_a).sum())
        p = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
        mcnemar = {"only_a_right": only_a, "only_b_right": only_b, "p_value": float(p)}
    return PairedComparison(kind, len(y), out, mcnemar, n_bootstrap)
