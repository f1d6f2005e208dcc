"""A calibration run: several scorers on one labelled set, their agreement with the labels, as a table and JSON.

    run = CalibrationRun("faithfulness", labels, {"baseline": b, "judge": j, "calibrated": c}, meta={...})
    print(run.table())                      # Markdown: one row per scorer, value [95% CI] per statistic
    run.save("runs/faithfulness.json"); CalibrationRun.load("runs/faithfulness.json")

Scorers keep the order of the ``scores`` dict everywhere (tables, legends, colours); put the final one
(e.g. the calibrated judge) last. Figures are in ``calibration.plots``, the HTML page in ``calibration.report``.

Owns: the saved JSON record of a calibration or comparison run. Must not fit or score anything.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from calibration.agreement.stats import (
    AgreementReport,
    PairedComparison,
    agreement,
    compare,
    undefined_agreement,
)
from judges.run.records import write_replacing

FORMAT = "dspy-judges/calibration-run"
FORMAT_VERSION = 1
LABEL_KINDS = ("binary", "ordinal", "continuous")
DEFAULT_STATS = {
    "binary": ("roc_auc", "balanced_accuracy", "cohen_kappa", "brier", "ece"),
    "ordinal": ("quadratic_kappa", "spearman", "kendall", "mae"),  # ordinal kappa is quadratic-weighted
    "continuous": ("spearman", "pearson", "mae"),
}
STAT_NAMES = {"accuracy": "accuracy", "roc_auc": "ROC-AUC", "balanced_accuracy": "balanced accuracy",
              "cohen_kappa": "Cohen's kappa", "quadratic_kappa": "quadratic kappa", "spearman": "Spearman",
              "kendall": "Kendall's tau", "pearson": "Pearson", "brier": "Brier", "ece": "ECE", "mae": "MAE"}
#: The statistic a run is summarised by, per label kind.
HEADLINE = {"binary": "roc_auc", "ordinal": "quadratic_kappa", "continuous": "spearman"}


def first_bad(values: Sequence[float]) -> int | None:
    """Index of the first value that is not a finite number, or None."""
    for i, v in enumerate(values):
        try:
            if not math.isfinite(float(v)):
                return i
        except (TypeError, ValueError):
            return i
    return None


@dataclass
class CalibrationRun:
    """One labelled set scored by several scorers (ordered: ``scores[name]`` has one score per label).

    A score of None marks an item the scorer failed on: it is left out of that scorer's agreement (never
    imputed) and counted in ``failed(name)`` and in the table's ``failed`` column."""

    name: str
    labels: list[float]
    scores: dict[str, list[float | None]]
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
        bad = first_bad(self.labels)
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
            bad = first_bad([0.0 if v is None else v for v in values])
            if bad is not None:
                raise ValueError(f"CalibrationRun {self.name!r}: scorer {scorer!r} score at index {bad} "
                                 f"({values[bad]!r}) is not a finite number (None marks a failed item)")
        self.scores = {str(k): [None if v is None else float(v) for v in values] for k, values in self.scores.items()}
        unknown = [k for k in self.agreement if k not in self.scores]
        if unknown:
            raise ValueError(f"CalibrationRun {self.name!r}: agreement given for unknown scorer(s) {unknown}")

    def compute_agreement(self, n_bootstrap: int = 1000, seed: int = 0, *,
                          progress: bool = False) -> dict[str, AgreementReport]:
        """Agreement of every scorer with the labels (bootstrap CIs), stored in ``self.agreement``;
        ``progress`` shows a bar over the scorers."""
        names = tqdm(list(self.scores), desc=f"agreement ({n_bootstrap} bootstrap draws)", unit="scorer",
                     disable=not progress)
        self.agreement = {name: self._agree(name, n_bootstrap, seed) for name in names}
        return self.agreement

    def hard_slice_accuracy(self, name: str) -> tuple[float | None, int]:
        """Accuracy of scorer ``name`` on the hard slice (``meta["hard_slice"]``: the test items the best
        baseline, at its cut-off fitted on train, gets wrong) and the number of slice items it scored.
        Baselines are read at their own train cut-offs, the others at ``threshold``."""
        hard = self.meta.get("hard_slice")
        if not hard or self.label_kind != "binary":
            return None, 0
        cut = hard.get("thresholds", {}).get(name, self.threshold)
        pairs = [(self.labels[i], self.scores[name][i]) for i in hard["items"] if self.scores[name][i] is not None]
        if not pairs:
            return None, 0
        return float(np.mean([(v >= cut) == (y == 1) for y, v in pairs])), len(pairs)

    def failed(self, name: str) -> int:
        """Items scorer ``name`` failed on (None scores)."""
        return sum(v is None for v in self.scores[name])

    def _agree(self, name: str, n_bootstrap: int, seed: int) -> AgreementReport:
        pairs = [(y, v) for y, v in zip(self.labels, self.scores[name]) if v is not None]
        if len(pairs) < 2:
            return undefined_agreement(self.label_kind, len(pairs), threshold=self.threshold,
                                       reason=f"{self.failed(name)} of {len(self.labels)} items failed")
        labels, scores = zip(*pairs)
        return agreement(labels, scores, kind=self.label_kind, threshold=self.threshold,
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
        failures = any(self.failed(name) for name in reports)
        hard = self.meta.get("hard_slice") if self.label_kind == "binary" else None
        head = ["scorer", *(["failed"] if failures else []), *stats,
                *([f"hard slice accuracy (n={len(hard['items'])})"] if hard else [])]
        lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for name, report in reports.items():
            cells = [ci_cell(report.stats[s]) for s in stats]
            if failures:
                cells.insert(0, f"{self.failed(name)} of {len(self.labels)}")
            if hard:
                accuracy, n = self.hard_slice_accuracy(name)
                cells.append("n/a" if accuracy is None else f"{accuracy:.2f}" + (f" ({n})" if n != len(hard["items"]) else ""))
            lines.append(f"| {name.replace('|', chr(92) + '|')} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def caption(self) -> str:
        """The table's settings in one line: items, resamples, seed, the interval's method, what is undefined."""
        reports = self.ensure_agreement()
        first = next(iter(reports.values()))
        shifted = sorted({s for r in reports.values() for s, v in r.stats.items() if v.get("ci") == "bias-shifted"})
        undefined = sorted({f"{s} of {name} ({v['undefined']})" for name, r in reports.items()
                            for s, v in r.stats.items() if v.get("undefined")})
        text = (f"{self.name}: n = {len(self.labels)} items; value [95% CI] from {first.n_bootstrap} bootstrap "
                f"resamples (seed {self.meta.get('seed', 0)}), percentile intervals")
        if shifted:
            text += f", {', '.join(shifted)}'s moved by the bootstrap's bias (a resample's repeats inflate it)"
        if undefined:
            text += f"; n/a: {'; '.join(undefined)}"
        return text + "."

    def write_table(self, path: str | Path, stats: Sequence[str] | None = None) -> Path:
        """The agreement table as a file for a paper, by its extension: Markdown (.md), LaTeX (.tex, booktabs) or
        CSV (.csv, value, low and high in columns of their own); the caption line holds the settings."""
        path = Path(path)
        reports = self.ensure_agreement()
        stats = list(stats or DEFAULT_STATS[self.label_kind])
        if path.suffix == ".md":
            text = self.table(stats) + "\n\n" + self.caption() + "\n"
        elif path.suffix == ".tex":
            def tex(value: str) -> str:
                return value.replace("\\", "\\textbackslash{}").replace("_", "\\_").replace("&", "\\&") \
                    .replace("%", "\\%").replace("#", "\\#")
            rows = [" & ".join([tex(name), *(tex(ci_cell(r.stats[s])) for s in stats)]) + " \\\\"
                    for name, r in reports.items()]
            text = "\n".join(["\\begin{table}", "\\centering", f"\\caption{{{tex(self.caption())}}}",
                              "\\begin{tabular}{l" + "r" * len(stats) + "}", "\\toprule",
                              " & ".join(["scorer", *(tex(s) for s in stats)]) + " \\\\", "\\midrule", *rows,
                              "\\bottomrule", "\\end{tabular}", "\\end{table}", ""])
        elif path.suffix == ".csv":
            out = io.StringIO()
            writer = csv.writer(out)
            writer.writerow(["scorer", *(f"{s}{part}" for s in stats for part in ("", "_low", "_high"))])
            for name, r in reports.items():
                writer.writerow([name, *(("" if r.stats[s].get(k) is None else f"{r.stats[s][k]:.6g}")
                                         for s in stats for k in ("value", "low", "high"))])
            writer.writerow([f"# {self.caption()}"])
            text = out.getvalue()
        else:
            raise ValueError(f"write_table: {path.name}: give a .md, .tex or .csv file")
        return write_replacing(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))

    def compare(self, a: str, b: str, n_bootstrap: int = 1000, seed: int = 0,
                stats: Sequence[str] | None = None) -> PairedComparison:
        """Scorer ``a`` vs scorer ``b`` on the items both scored: paired bootstrap CIs of the differences
        (of ``stats`` only, when given) and McNemar's test (``calibration.agreement.compare``)."""
        return compare(self.labels, self.scores[a], self.scores[b], kind=self.label_kind, threshold=self.threshold,
                       n_bootstrap=n_bootstrap, seed=seed, stats=stats)

    def constant_scorers(self, tolerance: float = 1e-6) -> list[str]:
        """Judge scorers (not baselines) whose scores do not vary over the items they scored: they cannot
        rank anything (ROC-AUC 0.5), whatever their other numbers say."""
        out = []
        for name, values in self.scores.items():
            scored = [v for v in values if v is not None]
            if not name.startswith("baseline") and len(scored) > 1 and max(scored) - min(scored) <= tolerance:
                out.append(name)
        return out

    def findings(self, n_bootstrap: int = 1000, seed: int = 0) -> list[str]:
        """What the run says, in plain sentences: failures, the best scorer and whether it beats the best
        baseline (paired test), what compiling did, constant scorers, what each calibrator kept."""
        reports = self.ensure_agreement(n_bootstrap, seed)
        stat = HEADLINE[self.label_kind]
        label = STAT_NAMES.get(stat, stat)
        out: list[str] = []
        failed = {name: self.failed(name) for name in self.scores if self.failed(name)}
        failed.update({k: v for k, v in self.meta.get("failures", {}).items() if v and k not in self.scores})
        if failed:
            out.append("Failures (left out of agreement, never imputed): " + "; ".join(
                f"{name} {count} of {len(self.labels) if name in self.scores else count}" if name in self.scores
                else f"{name} {count}" for name, count in failed.items()) + ".")
        ranked = [(r.value(stat), n) for n, r in reports.items() if r.value(stat) is not None]
        if not ranked:
            out.append(f"No scorer has a defined {label} on these {len(self.labels)} items.")
            return out
        best_value, best = max(ranked)
        out.append(f"Best by {label}: {best} ({ci_cell(reports[best].stats[stat])}).")
        baselines = [(v, n) for v, n in ranked if n.startswith("baseline")]
        if baselines and not best.startswith("baseline"):
            base_value, base = max(baselines)
            out.append(self._versus(best, base, stat, n_bootstrap, seed, "the best baseline"))
        elif baselines:
            judges = [(v, n) for v, n in ranked if not n.startswith("baseline")]
            if judges:
                judge_value, judge = max(judges)
                out.append(f"No judge beats {best}; the best judge is {judge} ({judge_value:.3f}). "
                           + self._versus(judge, best, stat, n_bootstrap, seed, "that baseline"))
        for name in self.scores:
            if name.startswith("compiled (") and " + " not in name and "judge as shipped" in self.scores:
                out.append(f"Compiling ({name[len('compiled ('):-1]}): "
                           + self._versus(name, "judge as shipped", stat, n_bootstrap, seed))
        hard = self.meta.get("hard_slice") if self.label_kind == "binary" else None
        if hard:
            judged = [(self.hard_slice_accuracy(n)[0], n) for n in self.scores if not n.startswith("baseline")]
            judged = [(a, n) for a, n in judged if a is not None]
            if not hard["items"]:
                text = (f"Hard slice: none; {hard['baseline']} gets every test item right at its cut-off "
                        f"{hard['threshold']:.3g} fitted on {hard.get('fitted_on', 'train')}")
            else:
                text = (f"Hard slice: the {len(hard['items'])} test items {hard['baseline']} gets wrong at its cut-off "
                        f"{hard['threshold']:.3g} fitted on {hard.get('fitted_on', 'train')}")
            if judged and hard["items"]:
                accuracy, name = max(judged)
                text += f"; the best judge scorer there, {name}, is right on {accuracy:.0%} of them"
            out.append(text + ".")
        verifier, overlap = "baseline: verifier weakest", "baseline: token overlap"
        if verifier in reports and overlap in reports:  # what the trained verifier adds over word overlap
            out.append("What the verifier adds over word overlap: " + self._versus(
                verifier, overlap, stat, n_bootstrap, seed, "token overlap"))
        for warning in self.meta.get("data_warnings", []):
            out.append(f"Warning: {warning}")
        for name, shares in self.meta.get("range_warnings", {}).items():
            out.append(f"Warning: {name}: test inputs outside the range its calibrator saw at fit time ("
                       + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()) + "): it extrapolates there.")
        for label, memory in self.meta.get("memory", {}).items():
            text = (f"Memory ({label}): {memory.get('episodes_kept', 0)} of {memory['items']} train items remembered "
                    f"as demos (k={memory['k']} nearest per input; the judge agreed with people on "
                    f"{memory['agreed']})" if memory.get("episodic") else f"Memory ({label}): episodic memory off")
            if memory.get("guidelines"):
                text += "; guidelines distilled from people's rationales: " + " | ".join(memory["guidelines"])
            elif memory.get("semantic"):
                text += "; no guidelines (" + memory.get("note", "the LM gave none") + ")"
            out.append(text + ".")
        for label, tuned in self.meta.get("finetune", {}).items():
            out.append(f"Fine-tuning ({label}): {tuned.get('decision', 'no decision recorded')}.")
        for label, decision in self.meta.get("guard", {}).items():
            if label in self.meta.get("finetune", {}) and self.meta["finetune"][label].get("kept") == "shipped" \
                    and decision == self.meta["finetune"][label].get("decision"):
                continue  # said by the fine-tuning line: nothing was compiled to check
            out.append(f"Compiling ({label}), checked on train items held back from it: {decision}.")
        for name in self.constant_scorers():
            out.append(f"Warning: {name} gave every scored test item the same score "
                       f"({next(v for v in self.scores[name] if v is not None):.3f}); it cannot tell items apart.")
        for name, inputs in self.meta.get("calibrator_inputs", {}).items():
            signals = [s.replace("_", " ") for s in inputs.get("signals", [])]
            if inputs.get("judge_score") and signals:
                out.append(f"{name}: the calibrator uses the judge's score and {', '.join(signals)}.")
            elif signals:
                out.append(f"{name}: the calibrator kept {', '.join(signals)} and dropped the judge's own score, "
                           "so this scorer's agreement comes from those cheap signals, not from the judge.")
            elif inputs.get("kind") == "stacked":
                out.append(f"{name}: no cheap signal lowered the cross-validated loss; the calibrator maps the "
                           "judge's score alone.")
            else:
                out.append(f"{name}: {inputs.get('kind')} calibration of the judge's score alone.")
        return out

    def _versus(self, a: str, b: str, stat: str, n_bootstrap: int, seed: int, role: str | None = None) -> str:
        """One sentence: ``a`` vs ``b`` (``role``, e.g. "the best baseline") on ``stat`` with the paired CI
        and whether the difference is established."""
        paired = self.compare(a, b, n_bootstrap, seed, stats=[stat])
        cell = paired.stats[stat]
        what = f"{role} ({b})" if role else b
        if cell["difference"] is None:
            return f"{a} vs {what}: the difference in {STAT_NAMES.get(stat, stat)} is undefined."
        established = ("established at 95%: " + (a if cell["better"] == "a" else b) + " is better"
                       if cell["better"] else "not established at 95% (the paired CI includes 0)")
        mcnemar = (f"; McNemar p = {paired.mcnemar['p_value']:.2f}" if paired.mcnemar else "")
        return (f"{a} vs {what}: {STAT_NAMES.get(stat, stat)} {cell['difference']:+.3f} "
                f"[{cell['low']:+.3f}, {cell['high']:+.3f}] on {paired.n} paired items, {established}{mcnemar}.")

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": FORMAT_VERSION, "name": self.name, "labels": self.labels,
                "scores": self.scores, "label_kind": self.label_kind, "threshold": self.threshold,
                "meta": self.meta, "agreement": {k: r.to_dict() for k, r in self.agreement.items()}}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(), ensure_ascii=False, indent=1, default=str)
        return write_replacing(path, lambda file: file.write_text(text, encoding="utf-8"))

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


def num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    return f"{value:.{digits}f}"


def main_statistic(label_kind: str) -> str:
    """The one statistic a scorer is summarised by where one number is shown (pairs, splits, label curves):
    ROC-AUC for binary labels, Spearman otherwise."""
    return "roc_auc" if label_kind == "binary" else "spearman"


def spread_over_splits(runs: Sequence[CalibrationRun]) -> dict[str, dict[str, Any]]:
    """Each scorer's main statistic (ROC-AUC for binary labels, Spearman otherwise) over ``runs`` made on other
    splits of one labelled set: every value, their mean, standard deviation (ddof 1) and range. Scorers
    missing from a run, or undefined in one, are reported on the runs that have them."""
    stat = main_statistic(runs[0].label_kind)
    out: dict[str, dict[str, Any]] = {}
    for name in runs[0].scores:
        values = [r.ensure_agreement()[name].value(stat) for r in runs if name in r.scores]
        values = [v for v in values if v is not None]
        if values:
            out[name] = {"stat": stat, "values": values, "mean": float(np.mean(values)),
                         "sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
                         "min": float(min(values)), "max": float(max(values))}
    return out


def ci_cell(stat: dict[str, float | None]) -> str:
    """``value [low, high]``, three decimals each (with two, an interval that excludes zero and one that touches
    it can print alike); ``n/a`` when undefined."""
    if stat.get("value") is None:
        return "n/a"
    ci = "" if stat.get("low") is None else f" [{stat['low']:.3f}, {stat['high']:.3f}]"
    return f"{stat['value']:.3f}{ci}"
