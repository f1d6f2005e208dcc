"""Figures of a calibration run or an evaluation: reliability diagram, scores by label, confusion matrices,
histograms, agreement bars, before/after compiling per optimizer.

Every function returns a ``matplotlib.figure.Figure`` (no pyplot state) and writes a PNG when given
``path``. Scorers keep the order of the ``scores`` dict; a scorer has the same colour in every figure.

Must not compute agreement itself (``calibration.agreement.stats``) or write HTML (``report``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from calibration.agreement.record import STAT_NAMES, first_bad
from calibration.agreement.stats import (
    LOWER_IS_BETTER,
    AgreementReport,
    expected_calibration_error,
)
from judges.run.records import write_replacing

#: Statistics whose value for a scorer that knows nothing is 0.5 (drawn as a "chance" line).
CHANCE_AT_HALF = ("roc_auc", "balanced_accuracy")
#: The statistics drawn as bars, per label kind.
BAR_STATS = {"binary": ("roc_auc", "balanced_accuracy", "cohen_kappa"),
             "ordinal": ("quadratic_kappa", "spearman", "kendall"), "continuous": ("spearman", "pearson", "kendall")}


def _palette(names: Sequence[str]) -> dict[str, Any]:
    """One colour per scorer, by position, so a scorer has the same colour in every figure."""
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {name: cmap(i % cmap.N) for i, name in enumerate(names)}


def _finish(fig: Figure, path: str | Path | None) -> Figure:
    if path is not None:
        kind = Path(path).suffix.lstrip(".") or "png"
        write_replacing(path, lambda file: fig.savefig(file, dpi=120, bbox_inches="tight", format=kind))
    return fig


def _grid(fig: Figure, n: int) -> list:
    """``n`` subplots, up to 3 per row; unused cells removed."""
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig.set_size_inches(4.2 * cols, 3.3 * rows + 0.4)
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.remove()
    return axes[:n]


def _legend(ax, n: int) -> None:
    if n <= 4:
        ax.legend(fontsize=8, loc="best")
    else:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def _checked(labels: Sequence[float], scores: dict[str, Sequence[float | None]], where: str):
    """Labels and each scorer's scores as arrays. A None score (an item the scorer failed on) becomes NaN
    here and every figure leaves it out of that scorer; any other non-finite score is an error."""
    y = np.asarray(labels, dtype=float)
    if not scores:
        raise ValueError(f"{where}: scores is empty")
    out = {}
    for name, values in scores.items():
        if len(values) != len(y):
            raise ValueError(f"{where}: scorer {name!r} has {len(values)} scores but there are {len(y)} labels")
        bad = first_bad([0.0 if v is None else v for v in values])
        if bad is not None:
            raise ValueError(f"{where}: scorer {name!r} score at index {bad} is not a finite number")
        out[name] = np.array([np.nan if v is None else v for v in values], dtype=float)
    return y, out


def reliability_diagram(labels: Sequence[float], scores: dict[str, Sequence[float]], *, n_bins: int = 10,
                        min_per_bin: int = 8, path: str | Path | None = None) -> Figure:
    """Per scorer and score bin: the fraction of human positives vs the mean score. Bins hold equal counts
    (score quantiles), at most ``n_bins`` and as few as keep ``min_per_bin`` items in each where the set
    allows: a point from two items is noise. The ECE in the legend uses ``n_bins`` equal-width bins."""
    y, scores = _checked(labels, scores, "reliability_diagram")
    if not set(np.unique(y)) <= {0.0, 1.0}:
        raise ValueError("reliability_diagram: labels must be 0/1 (use score_by_label for other labels)")
    colours = _palette(list(scores))
    fig = Figure(figsize=(6.2, 5.4))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], ls="--", lw=1, color="grey", label="perfectly calibrated")
    for name, s in scores.items():
        scored = ~np.isnan(s)
        failed = f", {int((~scored).sum())} failed" if not scored.all() else ""
        if not scored.any():
            ax.plot([], [], color=colours[name], label=f"{name} (no scored item{failed})")
            continue
        s, ys_all = np.clip(s[scored], 0.0, 1.0), y[scored]
        count = max(1, min(n_bins, len(s) // max(1, min_per_bin)))
        edges = np.unique(np.quantile(s, np.linspace(0, 1, count + 1))[1:-1])
        bins = np.searchsorted(edges, s, side="right")
        used = [b for b in range(len(edges) + 1) if (bins == b).any()]
        xs = [s[bins == b].mean() for b in used]
        ys = [ys_all[bins == b].mean() for b in used]
        counts = np.array([(bins == b).sum() for b in used])
        ece = expected_calibration_error(ys_all, s, n_bins)
        ax.plot(xs, ys, color=colours[name], lw=1.5, marker="o", ms=3, label=f"{name} (ECE {ece:.3f}{failed})")
        ax.scatter(xs, ys, s=12 + 400 * counts / len(y), color=colours[name], alpha=0.3, edgecolors="none")
    ax.text(0.98, 0.02, f"marker area ∝ items in the bin (n = {len(y)})", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7, color="dimgrey")
    ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), aspect="equal", title="Reliability diagram",
           xlabel="judge score", ylabel="fraction labelled positive by humans")
    ax.grid(alpha=0.25)
    _legend(ax, len(scores) + 1)
    return _finish(fig, path)


def score_by_label(labels: Sequence[float], scores: dict[str, Sequence[float]], *,
                   path: str | Path | None = None) -> Figure:
    """Mean ± 1 sd of each scorer's score per human label value (labels binned when more than 10 values)."""
    y, scores = _checked(labels, scores, "score_by_label")
    values = np.unique(y)
    if len(values) > 10:  # continuous labels: 10 equal-width bins, shown at their centres
        edges = np.linspace(values[0], values[-1], 11)
        groups = np.minimum(np.searchsorted(edges, y, side="right") - 1, 9)
        centres = (edges[:-1] + edges[1:]) / 2
        keep = [g for g in range(10) if (groups == g).any()]
        values, masks = centres[keep], [groups == g for g in keep]
    else:
        masks = [y == v for v in values]
    colours = _palette(list(scores))
    gap = np.min(np.diff(values)) if len(values) > 1 else 1.0
    fig = Figure(figsize=(6.8, 4.6))
    ax = fig.subplots()
    for i, (name, s) in enumerate(scores.items()):
        offset = (i - (len(scores) - 1) / 2) * 0.5 * gap / max(len(scores), 1)
        scored = ~np.isnan(s)
        shown = [j for j, m in enumerate(masks) if (m & scored).any()]
        means = [s[masks[j] & scored].mean() for j in shown]
        sds = [s[masks[j] & scored].std() for j in shown]
        label = name if scored.all() else f"{name} ({int((~scored).sum())} failed)"
        ax.errorbar(values[shown] + offset, means, yerr=sds, color=colours[name], marker="o", capsize=3, lw=1.5,
                    label=label)
    ax.set_xticks(values, [f"{v:g}\n(n={m.sum()})" for v, m in zip(values, masks)], fontsize=8)
    ax.set(title="Judge score by human label", xlabel="human label", ylabel="judge score (mean ± 1 sd)")
    ax.grid(alpha=0.25)
    _legend(ax, len(scores))
    return _finish(fig, path)


def confusion_matrix_figure(matrix: Sequence[Sequence[int]], classes: Sequence[Any], *,
                            title: str = "Confusion matrix", path: str | Path | None = None) -> Figure:
    """Counts (and the share of each human-label row) in the cells; rows human label, columns verdict."""
    m = np.asarray(matrix, dtype=int)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] != len(classes):
        raise ValueError(f"confusion_matrix_figure: matrix of shape {m.shape} does not fit {len(classes)} classes")
    size = max(3.4, 0.7 * len(classes) + 2.0)
    fig = Figure(figsize=(size, size))
    ax = fig.subplots()
    ax.imshow(m, cmap="Blues", vmin=0, vmax=max(int(m.max()), 1))
    totals = m.sum(axis=1)
    for i in range(len(classes)):
        for j in range(len(classes)):
            share = f"\n{m[i, j] / totals[i]:.0%}" if totals[i] else ""
            colour = "white" if m[i, j] > 0.6 * m.max() else "black"
            ax.text(j, i, f"{m[i, j]}{share}", ha="center", va="center", color=colour, fontsize=10)
    ticks = range(len(classes))
    ax.set_xticks(ticks, [str(c) for c in classes])
    ax.set_yticks(ticks, [str(c) for c in classes])
    ax.set(title=title, xlabel="judge verdict", ylabel="human label")
    return _finish(fig, path)


def _label_groups(y: np.ndarray) -> list[tuple[str, np.ndarray]]:
    values = np.unique(y)
    if len(values) <= 10:
        return [(f"human: {v:g}", y == v) for v in values]
    median = float(np.median(y))
    return [(f"human ≤ {median:g}", y <= median), (f"human > {median:g}", y > median)]


def score_histograms(labels: Sequence[float], scores: dict[str, Sequence[float]], *,
                     path: str | Path | None = None) -> Figure:
    """One subplot per scorer: its score distribution, one overlaid histogram per human label."""
    y, scores = _checked(labels, scores, "score_histograms")
    allv = np.concatenate(list(scores.values()))
    allv = allv[~np.isnan(allv)] if (~np.isnan(allv)).any() else np.array([0.0, 1.0])
    unit = allv.min() >= 0 and allv.max() <= 1
    edges = np.linspace(0, 1, 21) if unit else np.linspace(allv.min(), allv.max() + 1e-9, 21)
    groups = _label_groups(y)
    colours = ["#E69F00", "#0072B2"] if len(groups) == 2 else \
        [matplotlib.colormaps["viridis"](i / max(len(groups) - 1, 1)) for i in range(len(groups))]
    fig = Figure()
    axes = _grid(fig, len(scores))
    for ax, (name, s) in zip(axes, scores.items()):
        scored = ~np.isnan(s)
        for (label, mask), colour in zip(groups, colours):
            ax.hist(s[mask & scored], bins=edges, alpha=0.55, color=colour, label=f"{label} (n={(mask & scored).sum()})")
        title = name if scored.all() else f"{name}\n({int((~scored).sum())} failed items left out)"
        ax.set(title=title, xlabel="judge score", ylabel="items", xlim=(edges[0], edges[-1]))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=7)
    fig.suptitle("Judge scores by human label")
    fig.tight_layout()
    return _finish(fig, path)


def agreement_bars(agreement: dict[str, AgreementReport], *,
                   stats: Sequence[str] = ("roc_auc", "balanced_accuracy", "cohen_kappa"),
                   path: str | Path | None = None) -> Figure:
    """Grouped bars: one group per statistic, one bar per scorer (dict order), 95% bootstrap CI whiskers.
    Undefined (None) or missing statistics are marked ``n/a`` instead of a bar."""
    if not agreement:
        raise ValueError("agreement_bars: agreement is empty")
    names = list(agreement)
    colours = _palette(names)
    width = 0.8 / len(names)
    fig = Figure(figsize=(max(6.0, 1.2 + len(stats) * (0.3 * len(names) + 0.8)), 4.6))
    ax = fig.subplots()
    for i, name in enumerate(names):
        for j, stat in enumerate(stats):
            s = agreement[name].stats.get(stat) or {}
            value, low, high = s.get("value"), s.get("low"), s.get("high")
            x = j - 0.4 + width * (i + 0.5)
            if value is None:
                ax.text(x, 0, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color=colours[name])
                continue
            err = None if low is None or high is None else [[max(value - low, 0)], [max(high - value, 0)]]
            ax.bar(x, value, width * 0.92, color=colours[name], yerr=err, capsize=2.5,
                   error_kw={"elinewidth": 1, "ecolor": "#333333"})
    ax.axhline(0, color="black", lw=0.8)
    chance = [j for j, stat in enumerate(stats) if stat in CHANCE_AT_HALF]
    for j in chance:
        ax.hlines(0.5, j - 0.45, j + 0.45, colors="#444444", linestyles="--", lw=1, zorder=3)
    ax.set_xticks(range(len(stats)), [STAT_NAMES.get(s, s) for s in stats])
    ax.set(title="Agreement with human labels (95% bootstrap CI)", xlabel="statistic", ylabel="value")
    ax.grid(axis="y", alpha=0.25)
    handles = [Patch(color=colours[n], label=n) for n in names]
    if chance:
        handles.append(Line2D([], [], color="#444444", ls="--", lw=1, label="chance (0.5)"))
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncol=min(len(names), 4), frameon=False)
    return _finish(fig, path)


COMPILED_SCORER = re.compile(r"^(?:judge as shipped|compiled \((?P<optimizer>[^)]*)\))(?P<calibrated> \+ .* calibration)?$")


def optimizer_comparison(agreement: dict[str, AgreementReport], *,
                         stats: Sequence[str] = ("roc_auc", "balanced_accuracy"),
                         path: str | Path | None = None) -> Figure:
    """Before/after per optimizer, one panel per statistic: for each optimizer ("none" = the shipped
    judge) a bar for the judge as compiled and one for compiled + calibration, with 95% CI whiskers; a
    dashed line marks the shipped judge and a dotted one the best baseline. Scorers are found by the
    names ``compare_on_heldout`` gives them."""
    rows: dict[str, dict[str, AgreementReport]] = {}
    for name, report in agreement.items():
        match = COMPILED_SCORER.match(name)
        if match:
            rows.setdefault(match["optimizer"] or "none", {})["calibrated" if match["calibrated"] else "compiled"] = report
    if "calibrated" not in rows.get("none", {}):
        rows.pop("none", None)  # the shipped judge alone is the dashed line
    if not rows:
        raise ValueError("optimizer_comparison: no compiled or calibrated judge among the scorers "
                         f"{list(agreement)}")
    baselines = {n: r for n, r in agreement.items() if n.startswith("baseline: ")}
    optimizers = list(rows)
    fig = Figure(figsize=(max(6.0, 1.0 + 1.4 * len(optimizers)) * min(len(stats), 2) / 1.4, 4.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(stats)))
    kinds = {"compiled": ("compiled", "#4c72b0"), "calibrated": ("compiled + calibration", "#dd8452")}
    for ax, stat in zip(axes, stats):
        for k, (kind, (label, colour)) in enumerate(kinds.items()):
            ax.bar(0, 0, 0, color=colour, label=label)  # a legend entry even when every bar is n/a
            for i, optimizer in enumerate(optimizers):
                report = rows[optimizer].get(kind)
                s = (report.stats.get(stat) if report else None) or {}
                value, low, high = s.get("value"), s.get("low"), s.get("high")
                x = i + (k - 0.5) * 0.38
                if value is None:
                    ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color=colour)
                    continue
                err = None if low is None or high is None else [[max(value - low, 0)], [max(high - value, 0)]]
                ax.bar(x, value, 0.36, color=colour, yerr=err, capsize=2.5,
                       error_kw={"elinewidth": 1, "ecolor": "#333333"})
        if stat in CHANCE_AT_HALF:
            ax.axhline(0.5, color="#999999", ls="-.", lw=1, label="chance (0.5)")
        shipped = agreement["judge as shipped"].value(stat) if "judge as shipped" in agreement else None
        if shipped is not None:
            ax.axhline(shipped, color="#555555", ls="--", lw=1, label=f"judge as shipped ({shipped:.2f})")
        scored = [(r.value(stat), n) for n, r in baselines.items() if r.value(stat) is not None]
        if scored:
            best, name = (min if stat in LOWER_IS_BETTER else max)(scored)
            ax.axhline(best, color="#2ca02c", ls=":", lw=1.5, label=f"best {name} ({best:.2f})")
        ax.set_xticks(range(len(optimizers)), [o if o != "none" else "none\n(as shipped)" for o in optimizers])
        ax.set(title=STAT_NAMES.get(stat, stat), xlabel="optimizer", ylabel=STAT_NAMES.get(stat, stat))
        ax.grid(axis="y", alpha=0.25)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    fig.suptitle("Agreement with human labels before / after compiling, per optimizer (95% CI)")
    return _finish(fig, path)


def metric_histograms(scores: dict[str, Sequence[float | None]], *, path: str | Path | None = None) -> Figure:
    """One subplot per metric: the histogram of its defined scores (None and non-finite left out)."""
    if not scores:
        raise ValueError("metric_histograms: scores is empty")
    colours = _palette(list(scores))
    fig = Figure()
    axes = _grid(fig, len(scores))
    for ax, (name, values) in zip(axes, scores.items()):
        defined = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
        if len(defined):
            unit = defined.min() >= 0 and defined.max() <= 1
            ax.hist(defined, bins=np.linspace(0, 1, 21) if unit else 20, color=colours[name], alpha=0.85)
            ax.axvline(defined.mean(), color="black", ls="--", lw=1)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            title = f"{name}\nn={len(defined)} of {len(values)}, mean {defined.mean():.3f}"
        else:
            ax.text(0.5, 0.5, "no defined scores", ha="center", va="center", transform=ax.transAxes)
            title = f"{name}\nn=0 of {len(values)}"
        ax.set(title=title, xlabel="score", ylabel="samples")
    fig.tight_layout()
    return _finish(fig, path)


def label_curve_figure(curve: dict[str, Any], *, path: str | Path | None = None) -> Figure:
    """Each scorer's main statistic against the number of labels it was fitted on (the same test items for
    every size): how many labels a judge needs before compiling and calibrating pay off."""
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    colours = _palette(list(curve["scorers"]))
    for name, values in curve["scorers"].items():
        points = [(n, v) for n, v in zip(curve["sizes"], values) if v is not None]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", color=colours[name], label=name,
                    linestyle="--" if name.startswith("baseline") else "-")
    ax.set_xlabel("labelled items fitted on")
    ax.set_ylabel(STAT_NAMES.get(curve["stat"], curve["stat"]))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return _finish(fig, path)
