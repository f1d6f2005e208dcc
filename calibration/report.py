"""Calibration runs and reports: several scorers on one labelled set, their agreement, figures and HTML.

    run = CalibrationRun("faithfulness", labels, {"baseline": b, "judge": j, "calibrated": c}, meta={...})
    print(run.table())                      # Markdown: one row per scorer, value [95% CI] per statistic
    run.save("runs/faithfulness.json"); CalibrationRun.load("runs/faithfulness.json")
    write_report("runs/faithfulness.json", "reports/faithfulness")   # index.html + PNGs
    write_report("runs/eval.jsonl", "reports/eval")                   # an evaluate() output works too

Scorers keep the order of the ``scores`` dict everywhere (tables, legends, colours); put the final one
(e.g. the calibrated judge) last. Every figure function returns a ``matplotlib.figure.Figure`` (no pyplot
state) and writes a PNG when given ``path``.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from calibration.agreement import AgreementReport, agreement, expected_calibration_error

FORMAT = "dspy-judges/calibration-run"
FORMAT_VERSION = 1
LABEL_KINDS = ("binary", "ordinal", "continuous")
DEFAULT_STATS = {
    "binary": ("roc_auc", "balanced_accuracy", "cohen_kappa", "brier", "ece"),
    "ordinal": ("quadratic_kappa", "spearman", "kendall", "mae"),  # ordinal kappa is quadratic-weighted
    "continuous": ("spearman", "pearson", "mae"),
}
STAT_NAMES = {"roc_auc": "ROC-AUC", "balanced_accuracy": "balanced accuracy", "cohen_kappa": "Cohen's kappa",
              "spearman": "Spearman", "kendall": "Kendall's tau", "pearson": "Pearson", "brier": "Brier", "mae": "MAE"}
BAR_STATS = {"binary": ("roc_auc", "balanced_accuracy", "cohen_kappa"),
             "ordinal": ("quadratic_kappa", "spearman", "kendall"), "continuous": ("spearman", "pearson", "kendall")}
LOWER_IS_BETTER = {"brier", "ece", "mae"}


def _first_bad(values: Sequence[float]) -> int | None:
    """Index of the first value that is not a finite number, or None."""
    for i, v in enumerate(values):
        try:
            if not math.isfinite(float(v)):
                return i
        except (TypeError, ValueError):
            return i
    return None


# ------------------------------------------------------------------------------------------------
# CalibrationRun
# ------------------------------------------------------------------------------------------------
@dataclass
class CalibrationRun:
    """One labelled set scored by several scorers (ordered: ``scores[name]`` has one score per label)."""

    name: str
    labels: list[float]
    scores: dict[str, list[float]]
    label_kind: str = "binary"
    threshold: float = 0.5
    meta: dict[str, Any] = field(default_factory=dict)
    agreement: dict[str, AgreementReport] = field(default_factory=dict)

    def __post_init__(self):
        if self.label_kind not in LABEL_KINDS:
            raise ValueError(f"CalibrationRun {self.name!r}: label_kind={self.label_kind!r} "
                             f"is not one of {LABEL_KINDS}")
        if not self.scores:
            raise ValueError(f"CalibrationRun {self.name!r}: scores is empty; give at least one scorer")
        bad = _first_bad(self.labels)
        if bad is not None:
            raise ValueError(f"CalibrationRun {self.name!r}: labels[{bad}] = {self.labels[bad]!r} "
                             "is not a finite number")
        self.labels = [float(v) for v in self.labels]
        if self.label_kind == "binary" and not set(self.labels) <= {0.0, 1.0}:
            bad = next(i for i, v in enumerate(self.labels) if v not in (0.0, 1.0))
            raise ValueError(f"CalibrationRun {self.name!r}: binary labels must be 0 or 1, labels[{bad}] = "
                             f"{self.labels[bad]:g} (use label_kind='ordinal' or 'continuous')")
        for scorer, values in self.scores.items():
            if len(values) != len(self.labels):
                raise ValueError(f"CalibrationRun {self.name!r}: scorer {scorer!r} has {len(values)} scores "
                                 f"but there are {len(self.labels)} labels")
            bad = _first_bad(values)
            if bad is not None:
                raise ValueError(f"CalibrationRun {self.name!r}: scorer {scorer!r} score at index {bad} "
                                 f"({values[bad]!r}) is not a finite number")
        self.scores = {str(k): [float(v) for v in values] for k, values in self.scores.items()}
        unknown = [k for k in self.agreement if k not in self.scores]
        if unknown:
            raise ValueError(f"CalibrationRun {self.name!r}: agreement given for unknown scorer(s) {unknown}")

    def compute_agreement(self, n_bootstrap: int = 1000, seed: int = 0) -> dict[str, AgreementReport]:
        """Agreement of every scorer with the labels (bootstrap CIs), stored in ``self.agreement``."""
        self.agreement = {name: self._agree(name, n_bootstrap, seed) for name in self.scores}
        return self.agreement

    def _agree(self, name: str, n_bootstrap: int, seed: int) -> AgreementReport:
        return agreement(self.labels, self.scores[name], kind=self.label_kind, threshold=self.threshold,
                         n_bootstrap=n_bootstrap, seed=seed)

    def ensure_agreement(self, n_bootstrap: int = 1000, seed: int = 0) -> dict[str, AgreementReport]:
        """Compute agreement only for scorers that lack it; return it in scorer order."""
        self.agreement = {name: self.agreement.get(name) or self._agree(name, n_bootstrap, seed)
                          for name in self.scores}
        return self.agreement

    def table(self, stats: Sequence[str] | None = None) -> str:
        """A Markdown table: one row per scorer, cells ``value [low, high]`` (95% bootstrap CI) or ``n/a``."""
        reports = self.ensure_agreement()
        stats = list(stats or DEFAULT_STATS[self.label_kind])
        known = next(iter(reports.values())).stats
        unknown = [s for s in stats if s not in known]
        if unknown:
            raise ValueError(f"table: unknown statistic(s) {unknown} for {self.label_kind} labels; "
                             f"available: {list(known)}")
        lines = ["| scorer | " + " | ".join(stats) + " |", "|---" * (len(stats) + 1) + "|"]
        for name, report in reports.items():
            cells = [_ci_cell(report.stats[s]) for s in stats]
            lines.append(f"| {name.replace('|', chr(92) + '|')} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": FORMAT_VERSION, "name": self.name, "labels": self.labels,
                "scores": self.scores, "label_kind": self.label_kind, "threshold": self.threshold,
                "meta": self.meta, "agreement": {k: r.to_dict() for k, r in self.agreement.items()}}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1, default=str), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> CalibrationRun:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not a JSON file ({err})") from None
        return cls._from_dict(data, str(path))

    @classmethod
    def _from_dict(cls, data: Any, where: str) -> CalibrationRun:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"{where}: 'format' is {found!r}, expected {FORMAT!r}")
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{where}: 'version' is {data.get('version')!r}, this library reads {FORMAT_VERSION}")
        missing = [k for k in ("name", "labels", "scores", "label_kind", "threshold") if k not in data]
        if missing:
            raise ValueError(f"{where}: missing key(s) {missing}")
        reports = {}
        for scorer, report in (data.get("agreement") or {}).items():
            try:
                reports[scorer] = AgreementReport.from_dict(report)
            except (KeyError, TypeError) as err:
                raise ValueError(f"{where}: agreement[{scorer!r}] lacks key {err}") from None
        try:
            return cls(data["name"], data["labels"], data["scores"], data["label_kind"], data["threshold"],
                       data.get("meta") or {}, reports)
        except (ValueError, TypeError, AttributeError) as err:
            raise ValueError(f"{where}: {err}") from None


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    return f"{value:.{digits}f}"


def _ci_cell(stat: dict[str, float | None]) -> str:
    if stat.get("value") is None:
        return "n/a"
    ci = "" if stat.get("low") is None else f" [{stat['low']:.2f}, {stat['high']:.2f}]"
    return f"{stat['value']:.3f}{ci}"


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------
def _palette(names: Sequence[str]) -> dict[str, Any]:
    """One colour per scorer, by position, so a scorer has the same colour in every figure."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {name: cmap(i % cmap.N) for i, name in enumerate(names)}


def _finish(fig: Figure, path: str | Path | None) -> Figure:
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
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


def _checked(labels: Sequence[float], scores: dict[str, Sequence[float]], where: str):
    y = np.asarray(labels, dtype=float)
    if not scores:
        raise ValueError(f"{where}: scores is empty")
    out = {}
    for name, values in scores.items():
        if len(values) != len(y):
            raise ValueError(f"{where}: scorer {name!r} has {len(values)} scores but there are {len(y)} labels")
        bad = _first_bad(values)
        if bad is not None:
            raise ValueError(f"{where}: scorer {name!r} score at index {bad} is not a finite number")
        out[name] = np.asarray(values, dtype=float)
    return y, out


def reliability_diagram(labels: Sequence[float], scores: dict[str, Sequence[float]], *, n_bins: int = 10,
                        path: str | Path | None = None) -> Figure:
    """Per scorer and equal-width score bin: the fraction of human positives vs the mean score."""
    y, scores = _checked(labels, scores, "reliability_diagram")
    if not set(np.unique(y)) <= {0.0, 1.0}:
        raise ValueError("reliability_diagram: labels must be 0/1 (use score_by_label for other labels)")
    colours = _palette(list(scores))
    fig = Figure(figsize=(6.2, 5.4))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], ls="--", lw=1, color="grey", label="perfectly calibrated")
    for name, s in scores.items():
        s = np.clip(s, 0.0, 1.0)
        bins = np.minimum((s * n_bins).astype(int), n_bins - 1)
        used = [b for b in range(n_bins) if (bins == b).any()]
        xs = [s[bins == b].mean() for b in used]
        ys = [y[bins == b].mean() for b in used]
        counts = np.array([(bins == b).sum() for b in used])
        ece = expected_calibration_error(y, s, n_bins)
        ax.plot(xs, ys, color=colours[name], lw=1.5, marker="o", ms=3, label=f"{name} (ECE {ece:.3f})")
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
        means = [s[m].mean() for m in masks]
        sds = [s[m].std() for m in masks]
        ax.errorbar(values + offset, means, yerr=sds, color=colours[name], marker="o", capsize=3, lw=1.5, label=name)
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
    import matplotlib

    y, scores = _checked(labels, scores, "score_histograms")
    allv = np.concatenate(list(scores.values()))
    unit = allv.min() >= 0 and allv.max() <= 1
    edges = np.linspace(0, 1, 21) if unit else np.linspace(allv.min(), allv.max() + 1e-9, 21)
    groups = _label_groups(y)
    colours = ["#E69F00", "#0072B2"] if len(groups) == 2 else \
        [matplotlib.colormaps["viridis"](i / max(len(groups) - 1, 1)) for i in range(len(groups))]
    fig = Figure()
    axes = _grid(fig, len(scores))
    for ax, (name, s) in zip(axes, scores.items()):
        for (label, mask), colour in zip(groups, colours):
            ax.hist(s[mask], bins=edges, alpha=0.55, color=colour, label=f"{label} (n={mask.sum()})")
        ax.set(title=name, xlabel="judge score", ylabel="items", xlim=(edges[0], edges[-1]))
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
    from matplotlib.patches import Patch

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
    ax.set_xticks(range(len(stats)), list(stats))
    ax.set(title="Agreement with human labels (95% bootstrap CI)", xlabel="statistic", ylabel="value")
    ax.grid(axis="y", alpha=0.25)
    handles = [Patch(color=colours[n], label=n) for n in names]
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncol=min(len(names), 4), frameon=False)
    return _finish(fig, path)


_COMPILED = re.compile(r"^(?:judge as shipped|compiled \((?P<optimizer>[^)]*)\))(?P<calibrated> \+ .* calibration)?$")


def optimizer_comparison(agreement: dict[str, AgreementReport], *,
                         stats: Sequence[str] = ("roc_auc", "balanced_accuracy"),
                         path: str | Path | None = None) -> Figure:
    """Before/after per optimizer, one panel per statistic: for each optimizer ("none" = the shipped
    judge) a bar for the judge as compiled and one for compiled + calibration, with 95% CI whiskers; a
    dashed line marks the shipped judge and a dotted one the best baseline. Scorers are found by the
    names ``compare_on_heldout`` gives them."""
    rows: dict[str, dict[str, AgreementReport]] = {}
    for name, report in agreement.items():
        match = _COMPILED.match(name)
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


# ------------------------------------------------------------------------------------------------
# HTML report
# ------------------------------------------------------------------------------------------------
CSS = """body{font-family:system-ui,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}th,td{border:1px solid #ddd;padding:.3em .6em}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%}.grid{display:flex;flex-wrap:wrap;gap:1em}.grid img{width:300px}
.note{color:#666;font-size:.85em}"""


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f"<td{' class=n' if i >= numeric_from else ''}>{c if isinstance(c, _Raw) else html.escape(str(c))}</td>"
        for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


class _Raw(str):
    """Cell text already escaped."""


def _img(file: str, alt: str) -> str:
    return f'<img src="{html.escape(file)}" alt="{html.escape(alt)}">'


def _meta_rows(meta: dict[str, Any]) -> list[list[str]]:
    return [[k, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)] for k, v in meta.items()]


def _page(title: str, sections: list[tuple[str, str]]) -> str:
    body = "".join(f"<h2>{html.escape(h)}</h2>\n{content}\n" for h, content in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head>\n<body><h1>{html.escape(title)}</h1>\n{body}</body></html>\n")


def _classes(run: CalibrationRun, name: str) -> list[int]:
    """The class order of ``agreement``'s confusion matrix for this scorer."""
    s = np.asarray(run.scores[name])
    decided = (s >= run.threshold).astype(int) if run.label_kind == "binary" else np.rint(s).astype(int)
    return sorted(set(np.asarray(run.labels).astype(int).tolist()) | set(decided.tolist()))


def _calibration_report(run: CalibrationRun, out: Path, n_bootstrap: int, title: str | None) -> str:
    reports = run.ensure_agreement(n_bootstrap)
    names = list(run.scores)
    y = np.asarray(run.labels)
    meta = {"labelled set": run.name, "items": len(y), "label kind": run.label_kind}
    if run.label_kind == "binary":
        meta.update({"positives": int(y.sum()), "threshold": run.threshold})
    meta.update({"scorers": ", ".join(names), **run.meta})
    stats = list(next(iter(reports.values())).stats)
    rows = []
    for name in names:
        cells = []
        for stat in stats:
            values = [reports[n].stats[stat]["value"] for n in names if reports[n].stats[stat]["value"] is not None]
            best = (min if stat in LOWER_IS_BETTER else max)(values) if values else None
            text = html.escape(_ci_cell(reports[name].stats[stat]))
            value = reports[name].stats[stat]["value"]
            bold = len(names) > 1 and value is not None and round(value, 3) == round(best, 3)
            cells.append(_Raw(f"<b>{text}</b>" if bold else text))
        rows.append([name, *cells])
    n_boot = next(iter(reports.values())).n_bootstrap
    sections = [("Parameters", _table(["", "value"], _meta_rows(meta), numeric_from=2)),
                ("Agreement with human labels", _table(["scorer", *stats], rows)
                 + f'<p class="note">value [95% bootstrap CI, {n_boot} resamples]; best per column in bold '
                   f"(lower is better for {', '.join(sorted(LOWER_IS_BETTER))}).</p>")]
    if run.label_kind == "binary":
        reliability_diagram(run.labels, run.scores, path=out / "reliability.png")
        sections.append(("Reliability", _img("reliability.png", "reliability diagram")))
    else:
        score_by_label(run.labels, run.scores, path=out / "score_by_label.png")
        sections.append(("Judge score by human label", _img("score_by_label.png", "score by human label")))
    score_histograms(run.labels, run.scores, path=out / "histograms.png")
    sections.append(("Score distributions", _img("histograms.png", "score histograms")))
    agreement_bars(reports, stats=BAR_STATS[run.label_kind], path=out / "agreement.png")
    sections.append(("Agreement per scorer", _img("agreement.png", "agreement bars")))
    if any(_COMPILED.match(n) and n != "judge as shipped" for n in names):
        optimizer_comparison(reports, stats=BAR_STATS[run.label_kind][:2], path=out / "optimizers.png")
        sections.append(("Before / after compiling, per optimizer", _img("optimizers.png", "optimizer comparison")))
    if run.label_kind != "continuous":
        images = []
        for i, name in enumerate(names):
            file = f"confusion_{i}.png"
            verdict = f" (verdict: score ≥ {run.threshold:g})" if run.label_kind == "binary" else ""
            confusion_matrix_figure(reports[name].confusion_matrix, _classes(run, name), title=name + verdict,
                                    path=out / file)
            images.append(_img(file, f"confusion matrix of {name}"))
        sections.append(("Confusion matrices", '<div class="grid">' + "".join(images) + "</div>"))
    return _page(title or f"Calibration report: {run.name}", sections)


def _evaluation_report(result, out: Path, title: str, meta: dict[str, Any]) -> str:
    summary = result.summary()
    overall = summary.pop("_overall")
    meta = {**meta, "samples": result.n_samples, "metrics": ", ".join(result.metric_names),
            "failures": overall["failures"]}
    if result.wall_seconds:
        meta["wall seconds"] = round(result.wall_seconds, 3)
    header = ["metric", "n", "mean", "std", "failures", "undefined", "LM calls", "input tokens", "output tokens",
              "latency p50 (s)", "latency p95 (s)"]
    rows = [[name, s["n"], _num(s["mean"]), _num(s["std"]), s["failures"], s["undefined"], s["lm_calls"],
             s["input_tokens"], s["output_tokens"], _num(s["latency_p50"]), _num(s["latency_p95"])]
            for name, s in summary.items()]
    metric_histograms({n: result.scores(n) for n in result.metric_names}, path=out / "metrics.png")
    failures = result.failures
    listed = _table(["sample", "metric", "error"], [list(f) for f in failures[:200]], numeric_from=3)
    more = f'<p class="note">… and {len(failures) - 200} more.</p>' if len(failures) > 200 else ""
    sections = [("Parameters", _table(["", "value"], _meta_rows(meta), numeric_from=2)),
                ("Summary per metric", _table(header, rows)),
                ("Score distributions", _img("metrics.png", "metric histograms")),
                (f"Failures ({len(failures)})", listed + more if failures else "<p>None.</p>")]
    return _page(title, sections)


def _read_evaluation(path: Path):
    """An EvaluationResult from ``to_jsonl`` records or a run file (header line first)."""
    from judges.evaluation import EvaluationResult, read_run_records

    header, records = read_run_records(path)
    names = list(header.get("metrics") or {}) if header else []
    names += [r["metric"] for r in records if r["metric"] not in names]
    n_samples = max((r["sample"] for r in records), default=-1) + 1
    meta = {"source": path.name, "kind": "run file" if header else "evaluate records (JSONL)"}
    if header:
        meta["metric settings"] = header.get("metrics")
    ordered = sorted(records, key=lambda r: (r["sample"], names.index(r["metric"])))
    return EvaluationResult(ordered, names, n_samples, wall_seconds=0.0), meta


def _read_source(path: Path):
    expected = (f"{path}: expected a calibration run (JSON with format {FORMAT!r}) or an evaluate output "
                "(JSONL from EvaluationResult.to_jsonl, or a run file whose first line is {\"header\": ...})")
    text = path.read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "format" in whole:
        return CalibrationRun._from_dict(whole, str(path)), {}
    lines = [line for line in text.split("\n") if line.strip()]
    try:
        first = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        first = None
    if isinstance(first, dict) and (isinstance(first.get("header"), dict) or {"sample", "metric"} <= set(first)):
        return _read_evaluation(path)
    raise ValueError(expected)


def write_report(source, out_dir: str | Path, *, title: str | None = None, n_bootstrap: int = 1000) -> Path:
    """Write ``index.html`` and its PNGs into ``out_dir``; return the path of ``index.html``.

    ``source``: a CalibrationRun or EvaluationResult, or the path of a saved CalibrationRun (JSON), of
    ``EvaluationResult.to_jsonl`` records, or of an ``evaluate(run_file=...)`` run file. Agreement missing
    from a calibration run is computed with ``n_bootstrap`` resamples."""
    from judges.evaluation import EvaluationResult

    meta: dict[str, Any] = {}
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"write_report: {path} is not a file")
        source, meta = _read_source(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(source, CalibrationRun):
        page = _calibration_report(source, out, n_bootstrap, title)
    elif isinstance(source, EvaluationResult):
        page = _evaluation_report(source, out, title or "Evaluation report", meta)
    else:
        raise TypeError(f"write_report: expected a path, CalibrationRun or EvaluationResult, "
                        f"got {type(source).__name__}")
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
