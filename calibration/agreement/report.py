"""The HTML report of a calibration run or an evaluate output: one page with tables and plots.

    write_report("runs/faithfulness.json", "reports/faithfulness")   # index.html + PNGs
    write_report("runs/eval.jsonl", "reports/eval")                   # an evaluate() output works too

The run itself (agreement, table, JSON) is ``calibration.run.CalibrationRun``; the figures are in
``calibration.plots``.

Owns: the HTML pages of a calibration run or an evaluation. Must not score or fit anything.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from calibration.agreement.plots import (
    BAR_STATS,
    COMPILED_SCORER,
    agreement_bars,
    confusion_matrix_figure,
    label_curve_figure,
    metric_histograms,
    optimizer_comparison,
    reliability_diagram,
    score_by_label,
    score_histograms,
)
from calibration.agreement.record import (
    FORMAT,
    STAT_NAMES,
    CalibrationRun,
    ci_cell,
    num,
)
from calibration.agreement.stats import LOWER_IS_BETTER
from judges.run.records import write_replacing
from judges.run.result import EvaluationResult
from judges.run.run_file import read_run_calls, read_run_records
from judges.run.usage import unrecorded_usage

__all__ = ["CalibrationRun", "write_report"]


CSS = """body{font-family:system-ui,sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.9em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.3em .6em;vertical-align:top}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
img{max-width:100%;height:auto}.grid{display:flex;flex-wrap:wrap;gap:1em}.grid img{width:300px;max-width:100%}
.note{color:#666;font-size:.85em}ul.findings li{margin:.35em 0}.warn{color:#a33}.ci{color:#666;font-size:.85em}
@media (max-width:600px){body{margin:.5em auto;padding:0 .5em}h1{font-size:1.25em}table{font-size:.8em}}"""


def stacked_cell(stat: dict[str, Any], best: bool) -> str:
    """A statistic's cell as HTML: the value (bold when it is the established best), its interval on a second
    line, so that a table of many statistics fits a laptop's screen instead of scrolling sideways."""
    text = ci_cell(stat)
    value, _, interval = text.partition(" ")
    value = f"<b>{html.escape(value)}</b>" if best else html.escape(value)
    return value + (f"<br><span class=ci>{html.escape(interval)}</span>" if interval else "")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f"<td{' class=n' if i >= numeric_from else ''}>{c if isinstance(c, _Raw) else html.escape(str(c))}</td>"
        for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


class _Raw(str):
    """Cell text already escaped."""


def _img(file: str, alt: str) -> str:
    return f'<img src="{html.escape(file)}" alt="{html.escape(alt)}">'


def readable(value: Any) -> str:
    """A parameter value as a person reads it: floats to 3 significant digits, lists joined, objects as
    ``key: value`` lines (no JSON dumps)."""
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(readable(v) for v in value) if value else "-"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {readable(v)}" for k, v in value.items()) if value else "-"
    return str(value)


def _meta_rows(meta: dict[str, Any]) -> list[list[str]]:
    return [[str(k).replace("_", " "), readable(v)] for k, v in meta.items()]


def _page(title: str, sections: list[tuple[str, str]]) -> str:
    body = "".join(f"<h2>{html.escape(h)}</h2>\n{content}\n" for h, content in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head>\n<body><h1>{html.escape(title)}</h1>\n{body}</body></html>\n")


def _classes(run: CalibrationRun, name: str) -> list[int]:
    """The class order of ``agreement``'s confusion matrix for this scorer (over the items it scored)."""
    scored = [(y, v) for y, v in zip(run.labels, run.scores[name]) if v is not None]
    s = np.asarray([v for _, v in scored], float)
    decided = (s >= run.threshold).astype(int) if run.label_kind == "binary" else np.rint(s).astype(int)
    return sorted(set(int(y) for y, _ in scored) | set(decided.tolist()))


def _established_best(run: CalibrationRun, reports: dict, stat: str, n_bootstrap: int) -> str | None:
    """The scorer with the best ``stat`` if the paired bootstrap says it beats the runner-up at 95%, else None."""
    ranked = sorted(((r.value(stat), n) for n, r in reports.items() if r.value(stat) is not None),
                    reverse=stat not in LOWER_IS_BETTER)
    if len(ranked) < 2:
        return None
    (_, best), (_, runner_up) = ranked[0], ranked[1]
    return best if run.compare(best, runner_up, n_bootstrap, stats=[stat]).better(stat) == "a" else None


def diagram_scorers(names: list[str], reports: dict) -> list[str]:
    """The scorers a reliability diagram draws: the judge as shipped (or the judge as given), its last
    calibrated form, and the baseline with the best ROC-AUC; the table holds every other scorer."""
    judges = [n for n in names if not n.startswith("baseline:")]
    if len(judges) > 2:
        calibrated = [n for n in judges if "calibrat" in n][-1:]
        judges = [n for n in judges if n == "judge as shipped"][:1] + calibrated or judges[:1] + judges[-1:]
    baselines = sorted((n for n in names if n.startswith("baseline:") and reports[n].value("roc_auc") is not None),
                       key=lambda n: -reports[n].value("roc_auc"))
    return judges + baselines[:1]


def _usage_rows(usage: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for phase, u in usage.items():
        tokens = [sum(t.get(k, 0) for t in u.get("by_model", {}).values()) for k in ("prompt_tokens", "completion_tokens")]
        rows.append([phase, u.get("lm_calls", 0), u.get("cached_calls", 0), tokens[0], tokens[1],
                     "-" if u.get("cost") is None else f"${u['cost']:.4f}"])
    return rows


def _calibration_report(run: CalibrationRun, out: Path, n_bootstrap: int, title: str | None, progress: bool) -> str:
    reports = run.ensure_agreement(n_bootstrap)
    names = list(run.scores)
    y = np.asarray(run.labels)
    stats = list(next(r for r in reports.values() if r.stats).stats)
    failures = any(run.failed(n) for n in names)
    bold = {stat: _established_best(run, reports, stat, n_bootstrap) for stat in stats}
    hard = run.meta.get("hard_slice") if run.label_kind == "binary" else None
    rows = []
    for name in names:
        cells = [_Raw(stacked_cell(reports[name].stats[stat], bold[stat] == name)) for stat in stats]
        if hard:
            accuracy, _ = run.hard_slice_accuracy(name)
            cells.append("n/a" if accuracy is None else f"{accuracy:.2f}")
        rows.append([name, *([f"{run.failed(name)} of {len(y)}"] if failures else []), *cells])
    n_boot = max(r.n_bootstrap for r in reports.values())
    findings = "".join(f'<li{" class=warn" if f.startswith(("Warning", "Failures")) else ""}>{html.escape(f)}</li>'
                       for f in run.findings(n_bootstrap))
    measured = run.meta.get("measured_on") or f"{len(y)} held-out items"
    items = measured + (f", {int(y.sum())} labelled positive" if run.label_kind == "binary" else "")
    sections = [("Summary", f"<p>{html.escape(run.name)}: {items}.</p><ul class=findings>{findings}</ul>"),
                ("Agreement with human labels",
                 _table(["scorer", *(["failed"] if failures else []), *[STAT_NAMES.get(s, s) for s in stats],
                         *([f"hard slice accuracy (n={len(hard['items'])})"] if hard else [])], rows)
                 + f'<p class="note">value [95% bootstrap CI, {n_boot} resamples]. Bold: the best in its column and '
                   f"better than the runner-up at 95% by a paired bootstrap on the same items; a column without "
                   f"bold has no established best. Lower is better for {', '.join(sorted(LOWER_IS_BETTER))}."
                   + (" Failed items are left out of a scorer's statistics, never imputed." if failures else "")
                   + (f" Hard slice: the test items {html.escape(hard['baseline'])} (the best baseline on "
                      f"{html.escape(hard.get('fitted_on', 'train'))}, "
                      f"cut at {hard['threshold']:.3g}) gets wrong; a judge that only repeats it scores about 0 "
                      "there." if hard else "")
                   + "</p>")]
    compiled = any(COMPILED_SCORER.match(n) and n != "judge as shipped" for n in names)
    matrices = [i for i, n in enumerate(names)
                if run.label_kind != "continuous" and reports[n].confusion_matrix is not None]
    figures = tqdm(total=3 + compiled + len(matrices), desc="report figures", unit="figure", disable=not progress)
    if run.label_kind == "binary":
        drawn = diagram_scorers(names, reports)
        reliability_diagram(run.labels, {n: run.scores[n] for n in drawn}, path=out / "reliability.png")
        sections.append(("Reliability", _img("reliability.png", "reliability diagram")
                         + f'<p class="note">Drawn: {html.escape(", ".join(drawn))}; bins of equal counts (at least 8 '
                           "items each where the set allows); the table above holds every scorer.</p>"))
    else:
        score_by_label(run.labels, run.scores, path=out / "score_by_label.png")
        sections.append(("Judge score by human label", _img("score_by_label.png", "score by human label")))
    figures.update()
    score_histograms(run.labels, run.scores, path=out / "histograms.png")
    sections.append(("Score distributions", _img("histograms.png", "score histograms")))
    figures.update()
    agreement_bars(reports, stats=BAR_STATS[run.label_kind], path=out / "agreement.png")
    sections.append(("Agreement per scorer", _img("agreement.png", "agreement bars")))
    figures.update()
    if compiled:
        optimizer_comparison(reports, stats=BAR_STATS[run.label_kind][:2], path=out / "optimizers.png")
        sections.append(("Before / after compiling, per optimizer", _img("optimizers.png", "optimizer comparison")))
        figures.update()
    if run.label_kind != "continuous":
        images = []
        for i in matrices:
            name = names[i]
            file = f"confusion_{i}.png"
            verdict = f" (verdict: score ≥ {run.threshold:g})" if run.label_kind == "binary" else ""
            confusion_matrix_figure(reports[name].confusion_matrix, _classes(run, name), title=name + verdict,
                                    path=out / file)
            images.append(_img(file, f"confusion matrix of {name}"))
            figures.update()
        sections.append(("Confusion matrices", '<div class="grid">' + "".join(images) + "</div>"))
    curve = run.meta.get("label_curve")
    if curve:
        label_curve_figure(curve, path=out / "label_curve.png")
        sections.append(("Agreement by the number of labels", _img("label_curve.png", "label curve")
                         + f'<p class="note">{html.escape(curve["stat"])} on the same test items, each judge fitted on '
                           f'the first {", ".join(map(str, curve["sizes"]))} labelled training items.</p>'))
    spread = run.meta.get("repeats")
    if spread:
        rows = [[name, f"{v['mean']:.3f}", f"{v['sd']:.3f}", f"{v['min']:.3f}-{v['max']:.3f}",
                 ", ".join(f"{x:.3f}" for x in v["values"])] for name, v in spread.items()]
        sections.append((f"Over {len(next(iter(spread.values()))['values'])} splits "
                         f"({next(iter(spread.values()))['stat']})",
                         _table(["scorer", "mean", "sd", "range", "each split"], rows)))
    figures.close()
    meta = {k: v for k, v in run.meta.items()
            if k not in ("usage", "calibrator_inputs", "errors", "hard_slice", "range_warnings", "disagreements",
                         "disagreements_by_judge", "judge_pairs", "label_curve", "repeats")}
    pairs = run.meta.get("judge_pairs") or []
    if pairs:
        tests = [t for t in ("delong", "mcnemar", "bootstrap") if f"{t}_p" in pairs[0]]
        rows = [[p["a"], p["b"], p["n"], "n/a" if p.get("difference") is None else
                 f"{p['difference']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}]",
                 *(("n/a" if p.get(f"{t}_p") is None else f"{p[f'{t}_p']:.3g} ({p[f'{t}_holm']:.3g})") for t in tests)]
                for p in pairs]
        sections.append((f"The judges pair by pair ({pairs[0]['stat']}, p-values Holm-adjusted over {len(pairs)} pairs)",
                         _table(["judge A", "judge B", "items", "A - B [95% CI]", *(f"{t} p (Holm)" for t in tests)],
                                rows, numeric_from=2)))
    for disagree in (run.meta.get("disagreements_by_judge") or {"": run.meta.get("disagreements") or {}}).values():
        if not disagree.get("items"):
            continue
        rows = [[d.get("id", d["item"]), d["label"], d["score"], d.get("rationale") or "-", d.get("judge_reasons") or "-",
                 d.get("response") or ""] for d in disagree["items"]]
        sections.append((f"Disagreements of {disagree['scorer']} with people ({disagree['count']})",
                         _table(["item (id or row)", "label", "score", "the person's rationale", "the judge's reasons",
                                 "response"], rows, numeric_from=6)))
    if run.meta.get("errors"):
        sections.append(("Errors", _table(["scorer", "distinct errors"],
                                          [[k, "; ".join(v)] for k, v in run.meta["errors"].items()], numeric_from=2)))
    if run.meta.get("usage"):
        sections.append(("LM use", _table(["phase", "LM calls", "answered from cache", "prompt tokens",
                                           "completion tokens", "cost"],
                                          _usage_rows(run.meta["usage"]))
                         + '<p class="note">LM calls cost tokens in this run; answers from DSPy\'s cache were free '
                           "now (an interrupted earlier run may have paid for them).</p>"))
    sections.append(("Run details", _table(["", "value"], _meta_rows(
        {"label kind": run.label_kind, "threshold": run.threshold, **meta}), numeric_from=2)))
    return _page(title or f"Calibration report: {run.name}", sections)


def _evaluation_report(result, out: Path, title: str, meta: dict[str, Any]) -> str:
    summary = result.summary()
    overall = summary.pop("_overall")
    meta = {**meta, "samples": result.n_samples, "metrics": ", ".join(result.metric_names),
            "failures": overall["failures"]}
    if result.wall_seconds:
        meta["wall seconds"] = round(result.wall_seconds, 3)
    header = ["metric", "n", "mean", "std", "failures", "undefined", "LM calls", "answered from cache",
              "input tokens", "output tokens", "latency p50 (s)", "latency p95 (s)"]
    rows = [[name, s["n"], num(s["mean"]), num(s["std"]), s["failures"], s["undefined"], s["lm_calls"],
             s.get("cached_calls", 0), s["input_tokens"], s["output_tokens"], num(s["latency_p50"]),
             num(s["latency_p95"])] for name, s in summary.items()]
    metric_histograms({n: result.scores(n) for n in result.metric_names}, path=out / "metrics.png")
    failures = result.failures
    listed = _table(["sample", "metric", "error"], [list(f) for f in failures[:200]], numeric_from=3)
    more = f'<p class="note">… and {len(failures) - 200} more.</p>' if len(failures) > 200 else ""
    sections = [("Parameters", _table(["", "value"], _meta_rows(meta), numeric_from=2)),
                ("Summary per metric", _table(header, rows)),
                ("Score distributions", _img("metrics.png", "metric histograms")),
                (f"Failures ({len(failures)})", listed + more if failures else "<p>None.</p>")]
    return _page(title, sections)


def read_evaluation(path: Path):
    """An EvaluationResult from ``to_jsonl`` records or a run file (header line first; its call lines give the
    calls no record holds, ``judges.run.usage.unrecorded_usage``)."""
    header, records = read_run_records(path)
    names = list(header.get("metrics") or {}) if header else []
    names += [r["metric"] for r in records if r["metric"] not in names]
    n_samples = max((r["sample"] for r in records), default=-1) + 1
    meta = {"source": path.name, "kind": "run file" if header else
            "evaluate records (JSONL; LM calls no record holds are not in it: the run file and summary.json have them)"}
    unrecorded = {}
    if header:
        meta["metric settings"] = header.get("metrics")
        unrecorded = unrecorded_usage(read_run_calls(path), {(r["sample"], r["metric"]): r for r in records})
    ordered = sorted(records, key=lambda r: (r["sample"], names.index(r["metric"])))
    return EvaluationResult(ordered, names, n_samples, wall_seconds=0.0, unrecorded=unrecorded), meta


def _read_source(path: Path):
    expected = (f"{path}: expected a calibration run (JSON with format {FORMAT!r}) or an evaluate output "
                "(JSONL from EvaluationResult.to_jsonl, or a run file whose first line is {\"header\": ...})")
    text = path.read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply to read") from None
    if isinstance(whole, dict) and "format" in whole:
        return CalibrationRun._from_dict(whole, str(path)), {}
    lines = [line for line in text.split("\n") if line.strip()]
    try:
        first = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        first = None
    except RecursionError:
        raise ValueError(f"{path}: line 1 is nested too deeply to read") from None
    if isinstance(first, dict) and (isinstance(first.get("header"), dict) or {"sample", "metric"} <= set(first)):
        return read_evaluation(path)
    raise ValueError(expected)


def write_report(source, out_dir: str | Path, *, title: str | None = None, n_bootstrap: int = 1000,
                 progress: bool = False) -> Path:
    """Write ``index.html`` and its PNGs into ``out_dir``; return the path of ``index.html``.

    ``source``: a CalibrationRun or EvaluationResult, or the path of a saved CalibrationRun (JSON), of
    ``EvaluationResult.to_jsonl`` records, or of an ``evaluate(run_file=...)`` run file. Agreement missing
    from a calibration run is computed with ``n_bootstrap`` resamples. ``progress``: a bar over the figures."""
    meta: dict[str, Any] = {}
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"write_report: {path} is not a file")
        source, meta = _read_source(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(source, CalibrationRun):
        page = _calibration_report(source, out, n_bootstrap, title, progress)
    elif isinstance(source, EvaluationResult):
        page = _evaluation_report(source, out, title or "Evaluation report", meta)
    else:
        raise TypeError(f"write_report: expected a path, CalibrationRun or EvaluationResult, "
                        f"got {type(source).__name__}")
    return write_replacing(out / "index.html", lambda file: file.write_text(page, encoding="utf-8"))