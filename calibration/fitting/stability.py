"""How stable is a judge? Score each sample k times (sampling at ``temperature``, each rollout its own DSPy
cache entry) and measure how often its verdict flips and how much its score moves; then measure what the
usual remedies buy, from the same rollouts:

* majority vote of m rollouts / mean of m rollouts: the k rollouts are cut into k // m groups; a flip is
  now a disagreement between groups;
* log-probability expected scores: run ``stability`` on the judge built with ``use_logprobs=True``.

    report = stability(Faithfulness(lm=lm), samples, k=9)
    print(report.table(group=3))

Must not change the judge: it only asks it again.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judges.lm.resolve import resolve_lm
from judges.metrics.base import Judge


@dataclass
class StabilityReport:
    """``scores[i, r]``: the judge's score of sample i in rollout r (NaN where that rollout failed)."""

    name: str
    scores: np.ndarray
    threshold: float = 0.5
    temperature: float = 0.7

    @staticmethod
    def _flips(values: np.ndarray, threshold: float) -> tuple[float, float]:
        verdicts = values >= threshold
        flip = np.mean([len(set(row[~np.isnan(v)])) > 1 for row, v in zip(verdicts, values)])
        pairs = []
        for row, v in zip(verdicts, values):
            kept = row[~np.isnan(v)]
            if len(kept) > 1:
                agree = sum(kept[a] == kept[b] for a in range(len(kept)) for b in range(a + 1, len(kept)))
                pairs.append(1 - agree / (len(kept) * (len(kept) - 1) / 2))
        return float(flip), float(np.mean(pairs)) if pairs else 0.0

    def summary(self, values: np.ndarray | None = None) -> dict[str, float]:
        """``flip_rate``: share of items whose judgments are not all the same verdict (grows with the number
        of judgments: k single rollouts flip more often than k // m votes even at equal quality);
        ``pairwise_disagreement``: chance that two judgments of an item disagree, and ``score_std``: the
        per-item standard deviation (unbiased, ddof=1): these two compare fairly across group sizes."""
        values = self.scores if values is None else values
        flip, pairwise = self._flips(values, self.threshold)
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = np.nanstd(values, axis=1, ddof=1)
        return {"flip_rate": flip, "pairwise_disagreement": pairwise,
                "score_std": float(np.nanmean(spread)) if np.isfinite(spread).any() else 0.0,
                "failed_rollouts": int(np.isnan(self.scores).sum()) if values is self.scores else 0}

    def grouped(self, group: int, how: str) -> np.ndarray:
        """Scores of k // group aggregated judges per sample: ``how`` is "majority" or "mean"."""
        k = self.scores.shape[1]
        if group < 1 or k // group < 2:
            raise ValueError(f"need at least 2 groups of {group} rollouts, have {k} rollouts")
        blocks = self.scores[:, : (k // group) * group].reshape(len(self.scores), k // group, group)
        if how == "majority":
            return (np.nanmean(blocks >= self.threshold, axis=2) > 0.5).astype(float)
        if how == "mean":
            return np.nanmean(blocks, axis=2)
        raise ValueError(f"how={how!r} is not 'majority' or 'mean'")

    def table(self, group: int = 3) -> str:
        rows = [("single rollout", self.summary())]
        for how in ("majority", "mean"):
            rows.append((f"{how} of {group}", self.summary(self.grouped(group, how))))
        lines = [f"stability of {self.name}: {self.scores.shape[0]} samples x {self.scores.shape[1]} rollouts "
                 f"at temperature {self.temperature}",
                 "| judgment | verdict flip rate | pairwise disagreement | score std |", "|---|---:|---:|---:|"]
        for label, s in rows:
            lines.append(f"| {label} | {s['flip_rate']:.3f} | {s['pairwise_disagreement']:.3f} | {s['score_std']:.3f} |")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold, "temperature": self.temperature,
                "scores": [[None if np.isnan(v) else float(v) for v in row] for row in self.scores],
                "summary": self.summary()}


def stability(judge: Judge, samples: Sequence[Any], *, k: int = 5, temperature: float = 0.7,
              threshold: float = 0.5) -> StabilityReport:
    """Score every sample ``k`` times with sampled LM calls; a failed rollout is NaN and counted."""
    if not isinstance(k, int) or k < 2:
        raise ValueError(f"stability: k must be an int >= 2, got {k!r}")
    if not temperature > 0:
        raise ValueError("stability: temperature must be > 0 (at 0 the embedded LM is deterministic)")
    base = resolve_lm(judge.judge_lm)
    scores = np.full((len(samples), k), np.nan)
    for r in range(k):
        rollout = copy.copy(judge)
        rollout.judge_lm = base.copy(temperature=temperature, rollout_id=r)
        for i, sample in enumerate(samples):
            try:
                scores[i, r] = float(rollout.score(sample).score)
            except Exception:  # counted as a failed rollout
                pass
    return StabilityReport(judge.name, scores, threshold, temperature)
