"""Several judges on the same items, compared pair by pair: which differences hold once every pair is tested.

    rows = compare_pairs(run, ["judge A", "judge B", "judge C"], n_bootstrap=1000, seed=0)

For each pair: the difference of the main statistic (ROC-AUC for binary labels, Spearman otherwise) with its
paired bootstrap interval (``calibration.agreement.stats.compare``); for binary labels DeLong's test of the
two ROC-AUCs (correlated, on the same items) and McNemar's exact test of the decisions; otherwise a paired
bootstrap p-value. Each family of p-values is Holm-adjusted over the pairs, so that testing many pairs does not
find differences by chance.

Owns: DeLong's test, Holm's adjustment and the pairwise table. Must not score (``calibration.agreement.record``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import norm, rankdata

from calibration.agreement.record import main_statistic


def delong_test(labels: Sequence[int], scores_a: Sequence[float], scores_b: Sequence[float]) -> dict[str, float]:
    """DeLong's test that two ROC-AUCs measured on the same items differ (Sun and Xu's fast algorithm): both
    AUCs, their difference, its standard error and the two-sided p-value."""
    y = np.asarray(labels, dtype=int)
    positives, negatives = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    m, n = len(positives), len(negatives)
    if m < 2 or n < 2:
        raise ValueError("delong_test: needs at least 2 items of each label")
    aucs, v01, v10 = [], [], []
    for scores in (np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)):
        pos, neg = scores[positives], scores[negatives]
        tx, ty, tz = rankdata(pos), rankdata(neg), rankdata(np.concatenate([pos, neg]))
        aucs.append((tz[:m].sum() - m * (m + 1) / 2) / (m * n))
        v01.append((tz[:m] - tx) / n)
        v10.append(1.0 - (tz[m:] - ty) / m)
    s01, s10 = np.cov(np.vstack(v01)), np.cov(np.vstack(v10))
    variance = (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / m + (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / n
    difference = float(aucs[0] - aucs[1])
    if variance <= 0:
        return {"auc_a": float(aucs[0]), "auc_b": float(aucs[1]), "difference": difference, "se": 0.0,
                "p": 1.0 if difference == 0 else 0.0}
    z = difference / math.sqrt(variance)
    return {"auc_a": float(aucs[0]), "auc_b": float(aucs[1]), "difference": difference, "se": math.sqrt(variance),
            "p": float(2 * norm.sf(abs(z)))}


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of ``pvalues`` (None stays None): the smallest is multiplied by the number
    of tests, the next by one fewer, each kept at least as large as the one before and at most 1."""
    kept = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(kept):
        running = max(running, min(1.0, (len(kept) - rank) * p))
        adjusted[i] = running
    return adjusted


def compare_pairs(run: Any, judges: Sequence[str], *, n_bootstrap: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Every pair of ``judges`` (scorer names of ``run``, a ``CalibrationRun``) on the items both scored: the
    main statistic's difference and interval, the tests, their Holm-adjusted p-values over the pairs."""
    stat = main_statistic(run.label_kind)
    rows = []
    for a, b in itertools.combinations(judges, 2):
        paired = run.compare(a, b, n_bootstrap=n_bootstrap, seed=seed, stats=[stat])
        row = {"a": a, "b": b, "n": paired.n, "stat": stat,
               **{k: v for k, v in paired.stats[stat].items() if k != "p"}}
        if run.label_kind == "binary":
            both = [i for i in range(len(run.labels)) if run.scores[a][i] is not None and run.scores[b][i] is not None]
            y = [int(round(run.labels[i])) for i in both]
            try:
                row["delong_p"] = delong_test(y, [run.scores[a][i] for i in both], [run.scores[b][i] for i in both])["p"]
            except ValueError:
                row["delong_p"] = None
            row["mcnemar_p"] = (paired.mcnemar or {}).get("p")
        else:
            row["bootstrap_p"] = paired.stats[stat]["p"]
        rows.append(row)
    for test in ("delong_p", "mcnemar_p", "bootstrap_p"):
        if rows and test in rows[0]:
            for row, adjusted in zip(rows, holm([r[test] for r in rows])):
                row[test.replace("_p", "_holm")] = adjusted
    return rows


def pairs_text(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per pair, for the terminal: the difference with its interval, each test's p and Holm's."""
    lines = []
    for row in rows:
        if row.get("difference") is None:
            lines.append(f"{row['a']} vs {row['b']}: no {row['stat']} difference on {row['n']} shared items")
            continue
        text = (f"{row['a']} vs {row['b']} (n={row['n']}): {row['stat']} {row['difference']:+.3f} "
                f"[{row['low']:+.3f}, {row['high']:+.3f}]")
        for test, name in (("delong", "DeLong"), ("mcnemar", "McNemar"), ("bootstrap", "bootstrap")):
            if row.get(f"{test}_p") is not None:
                text += f"; {name} p={row[f'{test}_p']:.3g} (Holm {row[f'{test}_holm']:.3g})"
        lines.append(text)
    return lines
