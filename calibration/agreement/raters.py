"""Several people label each item: how well do they agree with each other, and does the judge agree with them
as well as they agree among themselves?

    table = rater_agreement(ratings, judge, level="nominal", names=["a1", "a2", "a3"])

``ratings`` is items x people (NaN where a person gave no label). People's agreement is Krippendorff's alpha
(the ``krippendorff`` package; nominal, ordinal or interval) and, for nominal labels every person gave, Fleiss'
kappa. The judge joins as one more rater (its decisions at 0.5 for binary labels, its scores on the label
scale otherwise): alpha with the judge against alpha of people alone, the difference with a bootstrap CI over
items. Then the judge against the majority (or mean) label and against each person: Cohen's kappa for nominal
labels, Spearman otherwise. Every interval is a percentile bootstrap over items.

Owns: agreement among raters. Must not read files or score items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

LEVELS = ("nominal", "ordinal", "interval")


def krippendorff_alpha(ratings: np.ndarray, level: str) -> float | None:
    """Krippendorff's alpha of ``ratings`` (items x raters, NaN missing); None when it is undefined (no item with
    two labels, or a single value in all)."""
    import krippendorff

    values = ratings[~np.isnan(ratings)]
    if len(np.unique(values)) < 2 or np.sum(np.sum(~np.isnan(ratings), axis=1) >= 2) < 1:
        return None
    alpha = krippendorff.alpha(reliability_data=ratings.T, level_of_measurement=level)
    return float(alpha) if np.isfinite(alpha) else None


def fleiss_kappa(ratings: np.ndarray) -> float | None:
    """Fleiss' kappa of nominal ``ratings`` (items x raters) on the items every rater labelled; None when no
    item has every label or every label is one category."""
    complete = ratings[~np.isnan(ratings).any(axis=1)]
    if len(complete) < 1 or complete.shape[1] < 2:
        return None
    categories = np.unique(complete)
    if len(categories) < 2:
        return None
    counts = np.stack([(complete == c).sum(axis=1) for c in categories], axis=1).astype(float)
    raters = complete.shape[1]
    per_item = ((counts**2).sum(axis=1) - raters) / (raters * (raters - 1))
    shares = counts.sum(axis=0) / counts.sum()
    expected = float((shares**2).sum())
    return float((per_item.mean() - expected) / (1 - expected)) if expected < 1 else None


def _cohen(a: np.ndarray, b: np.ndarray) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    if len(a) < 2 or len(np.unique(np.concatenate([a, b]))) < 2:
        return None
    value = cohen_kappa_score(a, b)
    return float(value) if np.isfinite(value) else None


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    from scipy.stats import spearmanr

    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(spearmanr(a, b).statistic)


def consensus(ratings: np.ndarray, level: str) -> np.ndarray:
    """Each item's label of the people: the majority for nominal labels (a tie goes to the larger value), the
    mean otherwise."""
    if level == "nominal":
        out = []
        for row in ratings:
            seen = row[~np.isnan(row)]
            values, counts = np.unique(seen, return_counts=True)
            out.append(values[counts == counts.max()].max())
        return np.asarray(out, dtype=float)
    return np.nanmean(ratings, axis=1)


def rater_agreement(ratings: Sequence[Sequence[float | None]], judge: Sequence[float | None], *, level: str,
                    names: Sequence[str], n_bootstrap: int = 1000, seed: int = 0,
                    confidence: float = 0.95) -> dict[str, Any]:
    """People's agreement with each other and the judge's with them (see the module docstring). ``judge`` holds
    the judge's rating of each item on the people's scale (None where it failed: those items are left out)."""
    if level not in LEVELS:
        raise ValueError(f"rater_agreement: level={level!r} is not one of {list(LEVELS)}")
    people = np.asarray([[np.nan if v is None else float(v) for v in row] for row in ratings], dtype=float)
    if people.ndim != 2 or people.shape[1] != len(names) or people.shape[1] < 2:
        raise ValueError(f"rater_agreement: ratings must be items x {len(names)} raters, at least 2")
    keep = np.asarray([v is not None for v in judge])
    people, machine = people[keep], np.asarray([v for v in judge if v is not None], dtype=float)
    with_judge = np.column_stack([people, machine])
    compare = _cohen if level == "nominal" else _spearman

    def statistics(rows: np.ndarray) -> dict[str, float | None]:
        p, j, w = people[rows], machine[rows], with_judge[rows]
        alpha_people, alpha_with = krippendorff_alpha(p, level), krippendorff_alpha(w, level)
        out = {"alpha_people": alpha_people, "alpha_with_judge": alpha_with,
               "alpha_difference": None if alpha_people is None or alpha_with is None else alpha_with - alpha_people,
               "judge_vs_consensus": compare(j, consensus(p, level))}
        for k, name in enumerate(names):
            given = ~np.isnan(p[:, k])
            out[f"judge_vs_{name}"] = compare(j[given], p[given, k])
        if level == "nominal":
            out["fleiss_kappa_people"] = fleiss_kappa(p)
        return out

    everything = np.arange(len(people))
    points = statistics(everything)
    draws = np.random.default_rng(seed).integers(0, len(people), size=(n_bootstrap, len(people)))
    resampled = [statistics(rows) for rows in draws]
    alpha = (1 - confidence) / 2
    table = {}
    for key, point in points.items():
        values = [r[key] for r in resampled if r[key] is not None]
        table[key] = {"value": point,
                      "low": float(np.quantile(values, alpha)) if values and point is not None else None,
                      "high": float(np.quantile(values, 1 - alpha)) if values and point is not None else None}
    return {"level": level, "raters": list(names), "items": int(len(people)), "left_out": int((~keep).sum()),
            "n_bootstrap": n_bootstrap, "stats": table}


def raters_text(found: dict[str, Any]) -> list[str]:
    """The rater table as lines for the terminal."""
    def cell(key: str) -> str:
        stat = found["stats"].get(key) or {}
        if stat.get("value") is None:
            return "n/a"
        ci = "" if stat.get("low") is None else f" [{stat['low']:.3f}, {stat['high']:.3f}]"
        return f"{stat['value']:.3f}{ci}"

    measure = "Cohen's kappa" if found["level"] == "nominal" else "Spearman"
    lines = [f"People ({', '.join(found['raters'])}; {found['items']} items, {found['level']} labels): "
             f"Krippendorff's alpha {cell('alpha_people')}"
             + (f", Fleiss' kappa {cell('fleiss_kappa_people')}" if found["level"] == "nominal" else ""),
             f"With the judge as one more rater: alpha {cell('alpha_with_judge')}; the change "
             f"{cell('alpha_difference')} (below 0: the judge agrees with people less than they agree with each other)",
             f"The judge against the people's {'majority' if found['level'] == 'nominal' else 'mean'}: {measure} "
             f"{cell('judge_vs_consensus')}; against each person: "
             + ", ".join(f"{name} {cell(f'judge_vs_{name}')}" for name in found["raters"])]
    return lines
