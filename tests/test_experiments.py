"""The experiment scripts run end to end (tiny sizes, scripted LM): tables printed, files written, MLflow runs."""

import json
import re
import runpy
import sys
from pathlib import Path

import dspy
import mlflow
import pytest

from judges_app.tracking import metric_key

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402

EXPERIMENTS = Path(__file__).parents[1] / "experiments"


def rating_lm():
    """An answer-accuracy judge that is right: rating 4 when the item's response says YES, else 0."""
    def respond(prompt):
        return {"rating": 4 if re.findall(r"\b(YES|NO)\b", prompt)[-1] == "YES" else 0}

    return scripted_lm(respond)


@pytest.fixture
def labelled(tmp_path, monkeypatch, mlflow_store):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{mlflow_store}")
    rows = [{"user_input": f"question {i}?", "response": f"answer {i} {'YES' if i % 2 else 'NO'}",
             "reference": f"answer {i}", "label": i % 2} for i in range(40)]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_script(name, argv, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [name, *argv])
    with dspy.context(lm=rating_lm()), pytest.raises(SystemExit) as done:
        runpy.run_path(str(EXPERIMENTS / name), run_name="__main__")
    assert done.value.code == 0
    return capsys.readouterr().out


def test_compare_optimizers(labelled, tmp_path, monkeypatch, capsys):
    out = tmp_path / "optimizers"
    printed = run_script("compare_optimizers.py", ["--study", f"{labelled}:answer_accuracy", "--optimizers",
                                                   "none,labeled,bootstrap", "--n-train", "8", "--n-test", "8",
                                                   "--n-bootstrap", "100", "--out", str(out)], monkeypatch, capsys)
    table = (out / "results.md").read_text()
    assert (out / "qa-answer_accuracy" / "results.md").read_text().startswith(table.split("\n\n")[0])
    for scorer in ("judge as shipped", "compiled (labeled)", "compiled (bootstrap) + stacked calibration"):
        assert re.search(rf"\| qa \| answer_accuracy \| {re.escape(scorer)} \| 1\.000 \[1\.00, 1\.00\] \| 1\.000 ",
                         table), scorer
        assert scorer in printed
    assert re.search(r"qa:answer_accuracy: \d+\.\d min", printed)
    runs = mlflow.search_runs(experiment_names=["dspy-judges-calibrate"])
    assert len(runs) == 1 and runs[f"metrics.{metric_key('compiled (labeled).roc_auc')}"].iloc[0] == 1.0


def test_label_curve(labelled, tmp_path, monkeypatch, capsys):
    out = tmp_path / "curve"
    printed = run_script("label_curve.py", ["--data", str(labelled), "--judge", "answer_accuracy", "--sizes", "4,8",
                                            "--n-test", "10", "--repeats", "2", "--out", str(out)], monkeypatch, capsys)
    rows = json.loads((out / "qa-answer_accuracy.json").read_text())["rows"]
    best = rows[2]["method"]  # the cheap signal with the best ROC-AUC on the label pool
    from calibration.fitting.signals import SAMPLE_SIGNALS

    assert best.removeprefix("logistic on ") in SAMPLE_SIGNALS
    assert [(r["n"], r["method"]) for r in rows] == [
        (n, m) for n in (4, 8) for m in ("Platt on judge score", "stacked", best)]
    assert all(r["roc_auc"] == 1.0 and r["roc_auc_sd"] == 0.0 for r in rows if r["method"] == "Platt on judge score")
    assert "| 8 | balanced | stacked |" in printed and (out / "qa-answer_accuracy.md").is_file()
    runs = mlflow.search_runs(experiment_names=["dspy-judges-experiments"])
    assert len(runs) == 1 and runs["params.judge"].iloc[0] == "answer_accuracy"
    run_script("label_curve.py", ["--data", str(labelled), "--judge", "answer_accuracy", "--sizes", "6,8",
                                  "--n-test", "10", "--repeats", "2", "--selection", "random,active", "--out", str(out)],
               monkeypatch, capsys)
    rows = json.loads((out / "qa-answer_accuracy.json").read_text())["rows"]
    assert {(r["selection"], r["n"]) for r in rows} == {(s, n) for s in ("random", "active") for n in (6, 8)}
    assert all(r["draws"] <= 2 for r in rows)


@pytest.mark.long(why='fine-tunes the verifier (one epoch of torch training) inside the label-curve experiment')
def test_label_curve_with_a_fine_tuned_verifier(tmp_path, monkeypatch, capsys, mlflow_store):
    pytest.importorskip("torch")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{mlflow_store}")
    out = tmp_path / "curve"
    run_script("label_curve.py", ["--data", "begin-slice", "--judge", "faithfulness_with_verifier", "--sizes", "20,40",
                                  "--n-test", "20", "--repeats", "1", "--finetune", "--finetune-epochs", "1",
                                  "--out", str(out)],
               monkeypatch, capsys)
    rows = json.loads((out / "begin-slice-faithfulness_with_verifier.json").read_text())["rows"]
    tuned = [r for r in rows if r["method"] == "fine-tuned verifier, Platt"]
    assert [r["n"] for r in tuned] == [40]  # 20 labels are refused (fewer than 40): no row
    assert 0.0 <= tuned[0]["roc_auc"] <= 1.0 and {r["n"] for r in rows} == {20, 40}
    monkeypatch.setattr(sys, "argv", ["label_curve.py", "--data", "begin-slice", "--judge", "faithfulness", "--finetune"])
    with pytest.raises(SystemExit) as refused:
        runpy.run_path(str(EXPERIMENTS / "label_curve.py"), run_name="__main__")
    assert refused.value.code == 2 and "--finetune" in capsys.readouterr().err


def test_stability_study(labelled, tmp_path, monkeypatch, capsys):
    out = tmp_path / "stability"
    printed = run_script("stability_study.py", ["--study", f"{labelled}:answer_accuracy", "--n", "6", "--k", "6",
                                                "--out", str(out)], monkeypatch, capsys)
    table = (out / "results.md").read_text()
    # a deterministic scripted judge never flips: flip rate, disagreement and std 0; it ranks perfectly
    assert re.search(r"sampled verdicts, single rollout \| 0\.000 \| 0\.000 \| 0\.000 \| 1\.000 \| 1\.000 \|", table)
    assert "majority of 3" in printed and "mean of 3" in printed
    assert len(mlflow.search_runs(experiment_names=["dspy-judges-experiments"])) == 1


def faithfulness_lm():
    """A faithfulness judge that is right: one claim, supported when the response says YES."""
    def respond(prompt):
        asked = prompt.split("Respond with")[-1]
        if "verdicts" in asked:
            claim = re.findall(r'\[\[ ## claims ## \]\]\n\["(.*?)"\]', prompt)[-1]
            return {"verdicts": json.dumps([{"claim": claim, "reason": "r", "supported": "YES" in claim}])}
        response = re.findall(r"\[\[ ## text ## \]\]\n(.*?)\n", prompt)[-1]
        return {"claims": json.dumps([response])}

    return scripted_lm(respond)


def test_transfer(tmp_path, monkeypatch, capsys, mlflow_store):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{mlflow_store}")
    rows = [{"response": f"answer {i} {'YES' if i % 2 else 'NO'}", "retrieved_contexts": [f"answer {i} YES"],
             "label": i % 2} for i in range(60)]
    source, target = tmp_path / "source.jsonl", tmp_path / "target.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows[:30]))
    target.write_text("".join(json.dumps(r) + "\n" for r in rows[30:]))
    monkeypatch.setattr(sys, "argv", ["transfer.py", "--study", f"{source}:{target}", "--study", f"{source}:{source}",
                                      "--n-train", "12", "--n-test", "12", "--n-bootstrap", "50",
                                      "--out", str(tmp_path / "out")])
    with dspy.context(lm=faithfulness_lm()), pytest.raises(SystemExit) as done:
        runpy.run_path(str(EXPERIMENTS / "transfer.py"), run_name="__main__")
    assert done.value.code == 0
    printed = capsys.readouterr().out
    table = (tmp_path / "out" / "results.md").read_text()
    assert re.search(r"\| source -> target \| judge as shipped \| 1\.000 ", table)
    assert "judge + stacked, monotone" in table and "baseline: best single signal" in table
    assert "hard slice" in printed.lower()
    run = json.loads((tmp_path / "out" / "source-to-source.json").read_text())
    assert run["meta"]["train"] == 12 and run["meta"]["test"] == 12  # in-domain: disjoint draws
    assert len(mlflow.search_runs(experiment_names=["dspy-judges-transfer"])) == 2
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    from transfer import draw, read

    drawn, indices = draw(read(str(target)), 40, seed=0)  # more than the set has: all of it, said so
    assert len(drawn) == 30 and indices == set(range(30))
    assert "40 items asked for, 30 there: taking them all" in capsys.readouterr().out


def test_selection_rule(tmp_path, monkeypatch, capsys):
    rows = [{"response": f"answer {i} {'YES' if i % 2 else 'NO'}", "retrieved_contexts": [f"answer {i} YES"],
             "label": i % 2} for i in range(60)]
    source, target = tmp_path / "source.jsonl", tmp_path / "target.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows[:30]))
    target.write_text("".join(json.dumps(r) + "\n" for r in rows[30:]))
    # 40 test items asked of a 30-item target: every seed tests on all 30, and the study's name says so
    monkeypatch.setattr(sys, "argv", ["selection_rule.py", "--study", f"{source}:{target}", "--seeds", "3",
                                      "--n-train", "12", "--n-test", "40"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(EXPERIMENTS / "selection_rule.py"), run_name="__main__")
    assert done.value.code == 0
    printed = capsys.readouterr().out
    rows_printed = [line for line in printed.splitlines() if line.startswith(f"| {source}:{target} (test 30) |")]
    assert [line.split(" | ")[1] for line in rows_printed] == ["best single signal", "stacked, one_se",
                                                               "stacked, any_gain"]
    # token overlap separates the labels perfectly here: every scorer ranks every test item right
    assert all(" | 1.000 (0.000) | " in line for line in rows_printed)


def test_optimise_program_runs_each_optimizer_with_one_metric(tmp_path, monkeypatch, capsys):
    """experiments/optimise_program.py on a scripted program LM that answers with the first retrieved fact:
    every optimizer runs, the held-out table is printed and written, and the demos kept passed the metric."""
    sys.path.insert(0, str(EXPERIMENTS))
    import optimise_program
    from test_optimizers import placeholder_fields

    def respond(prompt):
        if "[[ ## context ## ]]" in prompt and "`answer`" in prompt.split("Your output fields are:")[-1][:300]:
            return {"answer": prompt.split("[[ ## context ## ]]")[-1].split("[[ ## question")[0].strip().split("\n")[0]}
        return placeholder_fields(prompt)

    lm = scripted_lm(respond)
    monkeypatch.setattr(optimise_program, "resolve_lm", lambda name: lm)
    ran, real_run = [], optimise_program.run
    monkeypatch.setattr(optimise_program, "run", lambda program_lm, *a, **k: ran.append(program_lm) or real_run(
        program_lm, *a, **k))
    assert optimise_program.main(["--optimizers", "bootstrap,mipro,gepa", "--out", str(tmp_path)]) == 0
    assert ran[0].kwargs["seed"] == 0  # the program LM samples with the run's seed: two runs print one table
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "results.json").read_text())
    assert list(result["rows"]) == ["none", "bootstrap", "mipro", "gepa"] and len(result["test"]) == 10
    assert "| uncompiled |" in printed and "| gepa |" in printed
    assert result["rows"]["bootstrap"]["demos"] and result["rows"]["gepa"]["repeats"] > 0
    metric = optimise_program.make_metric("verifier")
    facts = {f["answer"]: f for f in optimise_program.load_facts()}
    assert all(any(metric(dspy.Example(short_answer=a), dspy.Prediction(answer=d, context=[f["fact"]]))
                   for a, f in facts.items()) for d in result["rows"]["bootstrap"]["demos"])


@pytest.mark.integration
def test_the_embedded_lm_samples_one_answer_for_one_seed():
    """What makes experiments/optimise_program.py reproduce: sampling at temperature 1 with a seed."""
    from judges import local_lm

    lm = local_lm(cache=False).copy(seed=7, temperature=1.0, max_tokens=16)
    assert lm("Name three colours.") == lm("Name three colours.")


@pytest.mark.parametrize("script", sorted(p.name for p in EXPERIMENTS.glob("*.py")))
def test_every_study_says_what_it_answers_with_help(script, monkeypatch, capsys):
    """experiments/ holds the studies a user would run again, each with --help (its README indexes them)."""
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(EXPERIMENTS / script), run_name="__main__")
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out
    assert script in (EXPERIMENTS / "README.md").read_text()


def test_a_refit_does_not_write_over_a_combination_that_reads_the_verifiers_units(tmp_path):
    """combination_fresh.py fits on signals whose word signals read every context: writing its fit over a file
    that says ``words_read: units`` (round 8) would silently undo round 8, so it refuses, naming the file."""
    sys.path.insert(0, str(EXPERIMENTS))
    from combination_fresh import refuse_to_undo_round_eight

    units, evidence = tmp_path / "units.json", tmp_path / "evidence.json"
    units.write_text(json.dumps({"words_read": "units"}))
    evidence.write_text(json.dumps({"inputs": []}))
    with pytest.raises(SystemExit, match=r"units\.json reads its word signals from the verifier's units"):
        refuse_to_undo_round_eight(str(units))
    refuse_to_undo_round_eight(str(evidence))  # a file of the old kind, or none, may be written
    refuse_to_undo_round_eight(str(tmp_path / "new.json"))
