"""CalibrationRun (validation, agreement table, JSON round trip), the figures, and write_report."""

import json
import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from calibration.agreement.plots import (
    agreement_bars,
    confusion_matrix_figure,
    metric_histograms,
    optimizer_comparison,
    reliability_diagram,
    score_by_label,
    score_histograms,
)
from calibration.agreement.record import CalibrationRun
from calibration.agreement.report import write_report

PNG = b"\x89PNG\r\n\x1a\n"
N_BOOT = 20  # small: agreement's bootstrap dominates the test time


def synthetic_scores(n=60, seed=0):
    """Binary labels and three scorers of rising quality (noise around the label)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    def scorer(noise):
        return np.clip(0.5 * labels + 0.25 + rng.normal(0, noise, n), 0, 1).tolist()
    return labels.tolist(), {"baseline": scorer(0.4), "judge": scorer(0.25), "calibrated": scorer(0.1)}


@pytest.fixture(scope="module")
def run():
    labels, scores = synthetic_scores()
    run = CalibrationRun("toy", labels, scores, meta={"dataset": "synthetic", "seed": 0})
    run.compute_agreement(n_bootstrap=N_BOOT)
    return run


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 1000


# ------------------------------------------------------------------------------------------------
# CalibrationRun
# ------------------------------------------------------------------------------------------------
def test_validation_names_the_scorer_and_the_index():
    with pytest.raises(ValueError, match=r"'short'.* 2 scores .* 3 labels"):
        CalibrationRun("x", [0, 1, 1], {"ok": [0.1, 0.2, 0.3], "short": [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"'judge' score at index 1"):
        CalibrationRun("x", [0, 1, 1], {"judge": [0.1, float("nan"), 0.3]})
    with pytest.raises(ValueError, match="label_kind"):
        CalibrationRun("x", [0, 1], {"judge": [0.1, 0.2]}, label_kind="nominal")
    with pytest.raises(ValueError, match=r"labels\[0\]"):
        CalibrationRun("x", [None, 1], {"judge": [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"0 or 1, labels\[1\] = 3"):
        CalibrationRun("x", [1, 3], {"judge": [0.1, 0.2]})


def test_compute_agreement_and_markdown_table(run):
    assert list(run.agreement) == ["baseline", "judge", "calibrated"]
    assert run.agreement["calibrated"].value("roc_auc") > run.agreement["baseline"].value("roc_auc")
    table = run.table()
    lines = table.splitlines()
    assert lines[0] == "| scorer | roc_auc | balanced_accuracy | cohen_kappa | brier | ece |"
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["baseline", "judge", "calibrated"]
    assert re.search(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", lines[2])
    one_class = CalibrationRun("one", [1, 1, 1], {"j": [0.9, 0.8, 0.7]})
    one_class.compute_agreement(N_BOOT)
    assert "| j | n/a |" in one_class.table(["roc_auc"])
    with pytest.raises(ValueError, match="quadratic_kappa"):
        run.table(["quadratic_kappa"])


def test_save_load_round_trip_keeps_agreement(run, tmp_path):
    path = run.save(tmp_path / "run.json")
    data = json.loads(path.read_text())
    assert data["format"] == "dspy-judges/calibration-run" and data["version"] == 1
    again = CalibrationRun.load(path)
    assert again == run
    assert again.agreement["judge"].stats == run.agreement["judge"].stats


def test_load_errors_name_the_file_and_the_key(run, tmp_path):
    data = run.to_dict()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**data, "format": "something/else"}))
    with pytest.raises(ValueError, match=r"bad\.json.*'format'"):
        CalibrationRun.load(bad)
    bad.write_text(json.dumps({**data, "version": 9}))
    with pytest.raises(ValueError, match=r"bad\.json.*'version'"):
        CalibrationRun.load(bad)
    bad.write_text(json.dumps({k: v for k, v in data.items() if k != "labels"}))
    with pytest.raises(ValueError, match=r"bad\.json.*'labels'"):
        CalibrationRun.load(bad)


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------
def test_reliability_diagram(run, tmp_path):
    fig = reliability_diagram(run.labels, run.scores, path=tmp_path / "r.png")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "judge score" and ax.get_ylabel() == "fraction labelled positive by humans"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == "perfectly calibrated" and legend[1].startswith("baseline (ECE")
    assert_png(tmp_path / "r.png")
    with pytest.raises(ValueError, match="0/1"):
        reliability_diagram([1, 2, 3], {"j": [0.1, 0.2, 0.3]})


def test_the_reliability_diagram_draws_the_judge_its_calibrated_form_and_the_best_baseline_in_full_bins(tmp_path):
    from calibration.agreement.report import diagram_scorers

    rng = np.random.default_rng(1)
    labels = [int(v) for v in rng.random(32) < 0.5]
    noisy = {f"baseline: b{i}": [float(np.clip(y * 0.2 * i + rng.random() * 0.6, 0, 1)) for y in labels]
             for i in range(4)}
    judged = {name: [float(np.clip(y * 0.5 + rng.random() * 0.5, 0, 1)) for y in labels]
              for name in ("judge as shipped", "beside: faithfulness", "compiled (bootstrap)",
                           "compiled (bootstrap) + stacked calibration")}
    ten = CalibrationRun("ten", labels, {**noisy, **judged}, label_kind="binary")
    ten.compute_agreement(n_bootstrap=50)
    drawn = diagram_scorers(list(ten.scores), ten.agreement)
    best = max(noisy, key=lambda n: ten.agreement[n].value("roc_auc"))
    assert drawn == ["judge as shipped", "compiled (bootstrap) + stacked calibration", best]
    fig = reliability_diagram(labels, {n: ten.scores[n] for n in drawn}, path=tmp_path / "r.png")
    points = [line for line in fig.axes[0].get_lines()][1:]  # after the diagonal
    assert len(points) == 3 and all(len(line.get_xdata()) <= 32 // 8 for line in points)  # >= 8 items a bin


def test_confusion_matrix_figure(tmp_path):
    fig = confusion_matrix_figure([[5, 1], [2, 7]], [0, 1], title="judge", path=tmp_path / "c.png")
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("judge verdict", "human label", "judge")
    assert {"5\n83%", "7\n78%"} <= {t.get_text() for t in ax.texts}
    assert_png(tmp_path / "c.png")
    with pytest.raises(ValueError, match="3 classes"):
        confusion_matrix_figure([[1, 2], [3, 4]], [0, 1, 2], title="x")


def test_score_histograms_one_subplot_per_scorer(run, tmp_path):
    fig = score_histograms(run.labels, run.scores, path=tmp_path / "h.png")
    assert [ax.get_title() for ax in fig.axes] == ["baseline", "judge", "calibrated"]
    assert fig.axes[0].get_xlabel() == "judge score" and fig.axes[0].get_xlim() == (0.0, 1.0)
    assert [t.get_text().split(" (")[0] for t in fig.axes[0].get_legend().get_texts()] == ["human: 0", "human: 1"]
    assert_png(tmp_path / "h.png")


def test_agreement_bars_copes_with_none_and_many_scorers(run, tmp_path):
    reports = dict(run.agreement)
    lonely = CalibrationRun("one class", [1, 1, 1, 1], {"x": [0.9, 0.2, 0.7, 0.6]}).compute_agreement(N_BOOT)["x"]
    assert lonely.value("roc_auc") is None
    many = {f"opt{i} {'before' if i % 2 else 'after'}": reports["judge"] for i in range(7)}
    fig = agreement_bars({**many, "one class": lonely}, path=tmp_path / "a.png")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "statistic"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ROC-AUC", "balanced accuracy", "Cohen's kappa"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 9 and legend[-1] == "chance (0.5)"  # 8 scorers and the chance line of AUC / BA
    assert "n/a" in [t.get_text() for t in ax.texts]
    assert_png(tmp_path / "a.png")


def test_optimizer_comparison_pairs_compiled_and_calibrated_per_optimizer(run, tmp_path):
    r = run.agreement
    reports = {"baseline: token overlap": r["baseline"], "judge as shipped": r["judge"],
               "judge as shipped + stacked calibration": r["calibrated"], "compiled (bootstrap)": r["judge"],
               "compiled (bootstrap) + stacked calibration": r["calibrated"], "compiled (gepa)": r["baseline"]}
    fig = optimizer_comparison(reports, path=tmp_path / "o.png")
    assert_png(tmp_path / "o.png")
    roc = fig.axes[0]
    assert roc.get_title() == "ROC-AUC"
    assert [t.get_text() for t in roc.get_xticklabels()] == ["none\n(as shipped)", "bootstrap", "gepa"]
    heights = sorted(round(p.get_height(), 6) for p in roc.patches if p.get_width() > 0)
    expected = [r[k].value("roc_auc") for k in ("judge", "calibrated", "judge", "calibrated", "baseline")]
    assert heights == sorted(round(v, 6) for v in expected)  # 5 bars: gepa has no calibrated one
    assert "n/a" in [t.get_text() for t in roc.texts]
    legend = [t.get_text() for t in roc.get_legend().get_texts()]
    assert f"judge as shipped ({r['judge'].value('roc_auc'):.2f})" in legend
    assert f"best baseline: token overlap ({r['baseline'].value('roc_auc'):.2f})" in legend
    with pytest.raises(ValueError, match="no compiled or calibrated judge"):
        optimizer_comparison({"judge as shipped": r["judge"], "baseline: x": r["baseline"]})


def test_metric_histograms_and_score_by_label(tmp_path):
    fig = metric_histograms({"exact": [1.0, 0.0, None, 1.0], "empty": [None, None]}, path=tmp_path / "m.png")
    assert fig.axes[0].get_title() == "exact\nn=3 of 4, mean 0.667"
    assert fig.axes[0].get_xlabel() == "score"
    assert_png(tmp_path / "m.png")
    rng = np.random.default_rng(1)
    labels = rng.integers(1, 6, 40)
    fig = score_by_label(labels, {"judge": (labels + rng.normal(0, 1, 40)).tolist()}, path=tmp_path / "s.png")
    assert fig.axes[0].get_xlabel() == "human label"
    assert_png(tmp_path / "s.png")


# ------------------------------------------------------------------------------------------------
# write_report
# ------------------------------------------------------------------------------------------------
def referenced_images(page, folder):
    files = re.findall(r'<img src="([^"]+)"', page)
    assert files and all((folder / f).is_file() for f in files)
    for f in files:
        assert_png(folder / f)
    return files


def test_write_report_from_a_calibration_run_file(run, tmp_path):
    labels, scores = run.labels, {"<b>x</b>": run.scores["baseline"], **run.scores}
    tricky = CalibrationRun("toy & co", labels, scores, meta={"judge": "<i>j</i>"})
    tricky.compute_agreement(N_BOOT)
    index = write_report(tricky.save(tmp_path / "run.json"), tmp_path / "report")
    assert index == tmp_path / "report" / "index.html"
    page = index.read_text()
    files = referenced_images(page, index.parent)
    assert {"reliability.png", "histograms.png", "agreement.png", "confusion_3.png"} <= set(files)
    for name in ("baseline", "judge", "calibrated", "&lt;b&gt;x&lt;/b&gt;", "toy &amp; co", "&lt;i&gt;j&lt;/i&gt;"):
        assert name in page
    assert "<b>x</b>" not in page and "<i>j</i>" not in page
    auc = run.agreement["calibrated"].stats["roc_auc"]
    cell = f"{auc['value']:.3f}(</b>)?<br><span class=ci>\\[{auc['low']:.3f}, {auc['high']:.3f}\\]</span>"
    assert re.search(cell, page)  # the interval under its value: many statistics fit without scrolling
    assert "quadratic kappa" not in page and "Spearman" in page  # every binary statistic, no others
    assert page.index("Summary") < page.index("Agreement with human labels") < page.index("Run details")
    assert 'name="viewport"' in page and "Best by ROC-AUC: calibrated" in page


def test_the_report_cannot_mislead(tmp_path):
    """Audit: the report opened with raw JSON parameters and 152.3671150529999, bolded a failed judge's
    ECE 0.000 as best, bolded by point estimate when CIs overlapped, and had no chance line."""
    rng = np.random.default_rng(3)
    labels = [0, 1] * 15
    close_a = np.clip(np.array(labels) * 0.3 + rng.uniform(0, 0.7, 30), 0, 1).tolist()
    close_b = np.clip(np.array(close_a) + rng.normal(0, 0.05, 30), 0, 1).tolist()  # the same scorer, jittered
    failed = [None] * 28 + [1.0, 0.0]  # failed on 28 of 30 items; perfect on the two it scored
    run = CalibrationRun("toy", labels, {"baseline: a": close_a, "judge as shipped": close_b, "broken": failed},
                         meta={"seconds_total": 152.3671150529999, "usage": {"judge as shipped": {
                             "lm_calls": 3, "cached_calls": 1, "by_model": {"m": {"prompt_tokens": 9, "completion_tokens": 2}}}},
                               "calibrator_notes": {"x": "note"}})
    page = write_report(run, tmp_path / "r", n_bootstrap=200).read_text()
    head = page[:page.index("<h2>Agreement")]
    assert "Failures (left out of agreement, never imputed): broken 28 of 30" in head
    assert "152.3671150529999" not in page and "152" in page and '{"' not in page
    table = page[page.index("<h2>Agreement"):page.index("<h2>Reliability")]
    assert "<b>" not in table  # two overlapping scorers and one measured on 2 items: no established best
    assert "28 of 30" in table


def test_write_report_in_memory_ordinal_run(tmp_path):
    rng = np.random.default_rng(2)
    labels = rng.integers(1, 6, 30).tolist()
    run = CalibrationRun("ordinal", labels, {"judge": np.clip(np.add(labels, rng.normal(0, 1, 30)), 1, 5).tolist()},
                         label_kind="ordinal")
    index = write_report(run, tmp_path / "out", n_bootstrap=N_BOOT)
    page = index.read_text()
    assert "score_by_label.png" in referenced_images(page, index.parent)
    assert "quadratic kappa" in page and "reliability.png" not in page


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    from judges import EvaluationDataset, ExactMatch, evaluate

    pairs = [("a", "a"), ("b", "b"), ("c", "x"), ("d", "d"), ("e", "y")]  # 3 of 5 match: mean 0.6
    rows = [{"response": response, "reference": reference} for response, reference in pairs]
    folder = tmp_path_factory.mktemp("evaluate")
    run_file = folder / "run.jsonl"
    result = evaluate(EvaluationDataset.from_list(rows), [ExactMatch()], run_file=run_file, progress=False)
    return result, result.to_jsonl(folder / "records.jsonl"), run_file


@pytest.mark.parametrize("which", ["records", "run_file", "in_memory"])
def test_write_report_from_an_evaluate_output(evaluated, which, tmp_path):
    result, records, run_file = evaluated
    name = result.metric_names[0]
    assert result.summary()[name]["mean"] == pytest.approx(0.6)
    source = {"records": records, "run_file": run_file, "in_memory": result}[which]
    page = write_report(source, tmp_path / "out").read_text()
    assert referenced_images(page, tmp_path / "out") == ["metrics.png"]
    row = re.search(rf"<tr><td>{name}</td>(.*?)</tr>", page).group(1)
    assert re.findall(r"<td class=n>([^<]*)</td>", row)[:3] == ["5", "0.600", "0.490"]
    assert "Failures (0)" in page


def test_write_report_lists_failures(tmp_path):
    from judges.run.result import EvaluationResult

    records = [{"sample": 0, "metric": "m", "score": 1.0, "latency_s": 0.1},
               {"sample": 1, "metric": "m", "score": None, "error": "ValueError: <bad>", "latency_s": 0.2}]
    page = write_report(EvaluationResult(records, ["m"], 2, wall_seconds=1.0), tmp_path).read_text()
    assert "Failures (1)" in page and "ValueError: &lt;bad&gt;" in page


def test_write_report_refuses_other_files(tmp_path):
    for text in ("hello\n", '{"format": "dspy-judges/compiled-judge"}', '[1, 2]\n', "", '{"sample": 0}\n'):
        path = tmp_path / "x.json"
        path.write_text(text)
        with pytest.raises(ValueError, match=r"x\.json.*expected|x\.json.*'format'"):
            write_report(path, tmp_path / "out")
    path.write_text('{"sample": 0, "metric": "m", "score": 1.0}\nnot json\n')
    with pytest.raises(ValueError, match=r"x\.json: line 2 is not JSON"):
        write_report(path, tmp_path / "out")
    with pytest.raises(ValueError, match="not a file"):
        write_report(tmp_path / "missing.jsonl", tmp_path / "out")
