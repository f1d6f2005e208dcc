"""The `dspy-judges` CLI: metrics, evaluate (with resume), calibrate (scripted LM), report, exit codes."""

import json
import re
import subprocess
import sys
from pathlib import Path

import dspy
import mlflow
import numpy as np
import pytest

from calibration.agreement.record import CalibrationRun
from calibration.fitting.compiled import CompiledJudge
from judges.metrics.catalogue import metric_classes
from judges_app.cli import COMMANDS, main, parser
from judges_app.cli.common import build_metric
from judges_app.tracking import metric_key

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402


def write_json(path, value):
    path.write_text(json.dumps(value))
    return path


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_metrics_lists_the_catalogue(capsys):
    assert main(["metrics", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert len(rows) == len(metric_classes()) >= 40
    assert rows["faithfulness"]["required_fields"] == ["response", "retrieved_contexts"]
    assert not rows["faithfulness_with_verifier"]["needs_lm"]  # its claims are its sentences unless claims="lm"
    assert rows["faithfulness"]["needs_lm"] and not rows["rouge_score"]["needs_lm"]
    assert rows["semantic_similarity"]["needs_embeddings"]
    assert rows["aspect_critic"]["required_params"] == ["name", "definition"]
    assert rows["context_precision"]["alias_of"] == "llm_context_precision_with_reference"
    assert main(["metrics"]) == 0
    assert "tool_call_accuracy" in capsys.readouterr().out


def test_build_metric_parses_parameters_and_says_what_is_missing():
    critic = build_metric('aspect_critic:{"name": "polite", "definition": "Is it polite?"}')
    assert critic.name == "polite"
    assert build_metric('rouge_score:{"rouge_type": "rouge1"}').rouge_type == "rouge1"
    with pytest.raises(Exception, match=r"needs \['name', 'definition'\]"):
        build_metric("aspect_critic")
    with pytest.raises(Exception, match="unknown metric 'nope'"):
        build_metric("nope")
    with pytest.raises(Exception, match="JSON object"):
        build_metric("rouge_score:{bad")


def test_evaluate_writes_outputs_and_resumes(tmp_path, capsys):
    data = write_jsonl(tmp_path / "qa.jsonl", [{"response": f"answer {i}", "reference": f"answer {i % 2}"}
                                               for i in range(6)])
    out = tmp_path / "out"
    argv = ["evaluate", str(data), "-m", "exact_match", "-m", "rouge_score", "--out", str(out),
            "--runs-dir", str(tmp_path / "runs"), "--no-mlflow"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert re.search(r"exact_match\s+0\.333", printed)  # samples 0 and 1 of 6 match
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 12 and {r["metric"] for r in records} == {"exact_match", "rouge_score"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exact_match"]["mean"] == pytest.approx(1 / 3)
    assert (out / "scores.csv").read_text().startswith("sample,exact_match,rouge_score")
    run_lines = (out / "run.jsonl").read_text().splitlines()
    assert len(run_lines) == 13  # header + one line per (sample, metric)
    assert main(argv) == 0  # resumes: nothing left to do, same result, run file unchanged
    assert (out / "run.jsonl").read_text().splitlines() == run_lines
    assert json.loads((out / "summary.json").read_text())["exact_match"]["mean"] == pytest.approx(1 / 3)


def test_evaluate_input_errors_exit_2_and_say_what_to_fix(tmp_path, capsys):
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"response": "a", "reference": "a"}, {"response": "b"}])
    assert main(["evaluate", str(bad), "-m", "exact_match", "--no-mlflow", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "sample 1" in err and "reference" in err and "exact_match" in err
    assert main(["evaluate", str(tmp_path / "missing.jsonl"), "-m", "exact_match", "--no-mlflow"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["evaluate", str(bad), "-m", "nope", "--no-mlflow"]) == 2
    assert "dspy-judges metrics" in capsys.readouterr().err
    unknown = write_jsonl(tmp_path / "unknown.jsonl", [{"response": "a", "reference": "a", "answr": "typo"}])
    assert main(["evaluate", str(unknown), "-m", "exact_match", "--no-mlflow"]) == 2
    assert "answr" in capsys.readouterr().err


def demo_sensitive_lm():
    """Says "yes" to everything unless the prompt carries demos; with demos it answers correctly."""

    def respond(prompt):
        responses = [r for r in re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt) if r != "{response}"]
        verdict = ("good" in responses[-1]) if len(responses) > 1 else True
        return {"reason": "scripted", "verdict": str(verdict)}

    return scripted_lm(respond)


@pytest.mark.usefixtures("mlflow_store")  # logs to tmp_path/runs/mlflow.db
def test_calibrate_compiles_reports_and_logs(tmp_path, capsys):
    rows = [{"response": f"item {i}: {'good' if i % 2 else 'bad'}", "label": i % 2} for i in range(24)]
    data = write_jsonl(tmp_path / "labels.jsonl", rows)
    out = tmp_path / "cal"
    argv = ["calibrate", str(data), "--judge", "aspect_critic",
            "--judge-params", '{"name": "good", "definition": "Does the response say the item is good?"}',
            "--optimizer", "none", "--optimizer", "labeled", "--optimizer", "bootstrap", "--calibrator", "platt",
            "--n-train", "8", "--n-test", "12", "--max-demos", "2", "--out", str(out), "--n-bootstrap", "100",
            "--runs-dir", str(tmp_path / "runs"), "--no-traces",
            "--prices", str(write_json(tmp_path / "prices.json", {"scripted/test": {"input": 1e6, "output": 0}}))]
    with dspy.context(lm=demo_sensitive_lm()):
        assert main(argv) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "judge as shipped" in printed and "compiled (bootstrap)" in printed
    assert "report figures" in captured.err  # a bar over the figures, as over each other step
    run = CalibrationRun.load(out / "calibration_run.json")
    assert len(run.labels) == 12
    usage = run.meta["usage"]  # one call per item for a one-step judge; 1e6 $/1M tokens: cost = tokens in
    assert usage["judge as shipped"]["lm_calls"] == 12 and usage["compiled (bootstrap)"]["lm_calls"] == 12
    shipped_in = usage["judge as shipped"]["by_model"]["scripted/test"]["prompt_tokens"]
    assert shipped_in > 12 * 20 and usage["judge as shipped"]["cost"] == shipped_in
    assert usage["fit (bootstrap)"]["lm_calls"] >= 8  # bootstrapping demos on train, then scoring train
    assert re.search(r"judge as shipped: 12 calls, \d+ tokens in / \d+ out, \$\d", printed)
    assert run.agreement["judge as shipped"].value("balanced_accuracy") == 0.5  # says yes to everything
    assert run.agreement["compiled (labeled)"].value("balanced_accuracy") == 1.0
    assert run.agreement["compiled (bootstrap)"].value("balanced_accuracy") == 1.0
    compiled = CompiledJudge.load(out / "compiled_good_bootstrap.json")
    assert compiled.report["demos"] == {"judge_aspect": 2} and compiled.compiled_lm == "scripted/test"
    assert compiled.report["calibrator"]["scores"] == "out-of-fold scores of the training items"
    from calibration.fitting.compiled import CompiledLMError, CompiledLMWarning

    with pytest.warns(CompiledLMWarning, match="compiled and calibrated with the LM scripted/test and runs with "
                                               "openai/gpt-4o-mini"):
        CompiledJudge.load(out / "compiled_good_bootstrap.json", lm="openai/gpt-4o-mini")
    with pytest.raises(CompiledLMError):
        CompiledJudge.load(out / "compiled_good_bootstrap.json", lm="openai/gpt-4o-mini", strict=True)
    scored = write_jsonl(tmp_path / "to_score.jsonl", [{"response": r["response"]} for r in rows[:2]])
    assert main(["evaluate", str(scored), "-m", str(out / "compiled_good_bootstrap.json"), "--lm",
                 "openai/gpt-4o-mini", "--strict", "--no-mlflow", "--out", str(tmp_path / "ev")]) == 2
    assert "compiled and calibrated with the LM scripted/test" in capsys.readouterr().err
    assert (out / "report" / "index.html").is_file() and (out / "report" / "optimizers.png").is_file()
    assert (tmp_path / "runs" / "mlflow.db").is_file()
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("dspy-judges-calibrate").experiment_id
    logged = client.search_runs([experiment])[0].data.metrics
    assert logged[metric_key("judge as shipped.lm_calls")] == 12
    assert logged[metric_key("judge as shipped.prompt_tokens")] == shipped_in
    assert logged[metric_key("judge as shipped.cost")] == shipped_in

    assert main(["report", str(out / "calibration_run.json"), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "index.html").is_file()


def test_calibrate_input_errors(tmp_path, capsys):
    data = write_jsonl(tmp_path / "labels.jsonl", [{"response": "x", "label": i % 2} for i in range(6)])
    assert main(["calibrate", str(data), "--judge", "rouge_score", "--optimizer", "bootstrap", "--n-train", "2",
                 "--n-test", "2", "--no-mlflow"]) == 2
    assert ("--judge rouge_score: --optimizer 'bootstrap' does not fit rouge_score (it has no LM step to compile); "
            "the optimizers that fit it: none") in capsys.readouterr().err
    assert main(["calibrate", str(data), "--judge", "faithfulness", "--optimizer", "labeled", "--no-mlflow"]) == 2
    assert ("--optimizer 'labeled' does not fit faithfulness (its label is not the output of one step); the "
            "optimizers that fit it: none, bootstrap, random_search, mipro, simba, gepa, memory") in capsys.readouterr().err
    assert main(["calibrate", str(data), "--judge", "rouge_score", "--n-train", "2", "--n-test", "2",
                 "--no-mlflow"]) == 2  # optimizer none by default: refused for the missing reference
    assert "cannot be scored by --judge rouge_score" in capsys.readouterr().err
    assert main(["calibrate", str(data), "--n-train", "4", "--n-test", "4", "--no-mlflow"]) == 2
    assert ("6 labelled items; --n-train 4 + --n-test 4 needs 8: give a smaller split, e.g. --n-train 4 --n-test 2"
            in capsys.readouterr().err)
    nolabel = write_jsonl(tmp_path / "nolabel.jsonl", [{"response": "x"}])
    assert main(["calibrate", str(nolabel), "--no-mlflow"]) == 2
    assert "nolabel.jsonl: line 1 has no 'label'" in capsys.readouterr().err
    assert main(["report", str(data)]) == 2
    prices = write_json(tmp_path / "prices.json", {"scripted/test": 3})
    assert main(["calibrate", str(data), "--n-train", "2", "--n-test", "2", "--no-mlflow", "--prices", str(prices)]) == 2
    assert "bad entries ['scripted/test']" in capsys.readouterr().err


def test_console_script_help_runs():
    done = subprocess.run([sys.executable, "-m", "judges_app.cli", "calibrate", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "--optimizer" in done.stdout and "begin-slice" in done.stdout
    for command in ([], ["agreement"], ["label"]):  # help is for users: no notes for the code's developers
        shown = subprocess.run([sys.executable, "-m", "judges_app.cli", *command, "--help"], capture_output=True,
                               text=True, timeout=60).stdout
        assert "usage:" in shown and "Must not" not in shown and "Owns:" not in shown


def test_a_command_imports_only_what_it_runs():
    """`dspy-judges metrics` imports neither MLflow, scikit-learn nor another command's module; the top-level help
    still lists every command with its line; a command named gets its own options."""
    code = ("import sys; from judges_app.cli import main, parser; code = main(['metrics', '--json']); "
            "print(code, *(name in sys.modules for name in ('mlflow', 'sklearn', 'judges_app.cli.calibrate')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split()[-4:] == ["0", "False", "False", "False"], done.stderr[-2000:]
    top = parser().format_help()
    assert all(name in top for name in COMMANDS) and "label the pool items" in top
    assert parser("calibrate").parse_args(["calibrate", "begin-slice", "--n-train", "8"]).n_train == 8


def failing_lm(fails):
    """AspectCritic's verdict is "good" in the response; ``fails(response)`` says which items raise."""

    def respond(prompt):
        response = re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt)[-1]
        if fails(response):
            raise ConnectionError(f"scripted outage on {response!r}")
        return {"reason": "scripted", "verdict": str("good" in response)}

    return scripted_lm(respond)


CRITIC = ["--judge", "aspect_critic", "--judge-params", '{"name": "good", "definition": "Is the item good?"}']


def critic_labels(tmp_path, n=24):
    rows = [{"response": f"item {i}: {'good' if i % 2 else 'bad'}", "label": i % 2} for i in range(n)]
    return write_jsonl(tmp_path / "labels.jsonl", rows)


def test_calibrate_refuses_a_judge_the_data_cannot_feed_before_any_lm_call(tmp_path, capsys):
    """The default judge (faithfulness) on answers without contexts: exit 2 naming the field, no LM call."""
    data = write_jsonl(tmp_path / "qa.jsonl", [{"response": f"a{i}", "reference": "a", "label": i % 2}
                                               for i in range(8)])
    lm = failing_lm(lambda response: True)
    with dspy.context(lm=lm):
        assert main(["calibrate", str(data), "--n-train", "4", "--n-test", "4", "--no-mlflow",
                     "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "cannot be scored by --judge faithfulness" in err and "retrieved_contexts" in err
    assert lm.engine.calls == 0


def test_calibrate_with_an_lm_that_always_fails_is_an_error_not_a_table(tmp_path, capsys):
    with dspy.context(lm=failing_lm(lambda response: True)):
        code = main(["calibrate", str(critic_labels(tmp_path)), *CRITIC, "--optimizer", "none", "--n-train", "6",
                     "--n-test", "6", "--no-mlflow", "--out", str(tmp_path / "o"), "--n-bootstrap", "50"])
    captured = capsys.readouterr()
    assert code == 1
    assert "failed on all 6 test items" in captured.err and "scripted outage" in captured.err
    assert "| scorer" not in captured.out


def test_calibrate_leaves_failed_items_out_counts_them_and_fails_above_the_share(tmp_path, capsys):
    """Items 1 and 2 of every 6 fail: never scored 0.5 (the old imputation), counted in the table, the findings
    and the report, and the command exits 1 above --max-failure-share."""
    fails = lambda response: int(response.split()[1].rstrip(":")) % 6 in (1, 2)  # noqa: E731
    argv = ["calibrate", str(critic_labels(tmp_path)), *CRITIC, "--optimizer", "none", "--calibrator", "platt",
            "--n-train", "12", "--n-test", "12", "--no-mlflow", "--n-bootstrap", "50"]
    with dspy.context(lm=failing_lm(fails)):
        assert main([*argv, "--out", str(tmp_path / "strict")]) == 1
        captured = capsys.readouterr()
        assert "more than --max-failure-share 20%" in captured.err
        assert "| failed |" in captured.out and "Failures (left out of agreement, never imputed)" in captured.out
        assert main([*argv, "--out", str(tmp_path / "lenient"), "--max-failure-share", "0.5"]) == 0
    run = CalibrationRun.load(tmp_path / "lenient" / "calibration_run.json")
    shipped = run.scores["judge as shipped"]
    failed = [i for i, v in enumerate(shipped) if v is None]
    assert 0 < len(failed) < len(shipped) and 0.5 not in shipped
    assert run.meta["failures"]["judge as shipped"] == len(failed)
    assert run.agreement["judge as shipped"].n == len(shipped) - len(failed)
    assert run.agreement["judge as shipped"].value("balanced_accuracy") == 1.0  # perfect on what it scored
    assert any("scripted outage" in e for e in run.meta["errors"]["judge as shipped"])
    page = (tmp_path / "lenient" / "report" / "index.html").read_text()
    summary = page[page.index("<h2>Summary"):page.index("<h2>Agreement")]
    assert "Failures (left out of agreement, never imputed): judge as shipped" in summary
    with pytest.raises(SystemExit) as exited:  # argparse: a share above 1 is bad input
        main(["calibrate", str(critic_labels(tmp_path)), "--max-failure-share", "2", "--no-mlflow"])
    assert exited.value.code == 2 and "between 0 and 1" in capsys.readouterr().err


@pytest.mark.usefixtures("mlflow_store")  # logs to tmp_path/runs/mlflow.db
def test_a_compiled_judge_evaluates_and_measures_agreement_on_new_labels(tmp_path, capsys):
    """calibrate saves a compiled judge; `evaluate -m compiled.json` scores with it and `agreement` measures
    it on new labels (the drift check): the same table, CIs and hard slice as calibrate."""
    out = tmp_path / "cal"
    with dspy.context(lm=demo_sensitive_lm()):
        assert main(["calibrate", str(critic_labels(tmp_path)), *CRITIC, "--optimizer", "labeled", "--calibrator",
                     "platt", "--n-train", "8", "--n-test", "8", "--no-mlflow", "--no-report", "--n-bootstrap", "50",
                     "--out", str(out), "--max-demos", "2"]) == 0
        compiled = str(out / "compiled_good_labeled.json")
        fresh = write_jsonl(tmp_path / "fresh.jsonl", [{"response": f"item {i}: {'good' if i % 3 else 'bad'}",
                                                        "label": int(i % 3 != 0)} for i in range(12)])
        unlabelled = write_jsonl(tmp_path / "fresh_items.jsonl", [{"response": f"item {i}: good"} for i in range(3)])
        capsys.readouterr()
        assert main(["evaluate", str(unlabelled), "-m", compiled, "--no-mlflow", "--out", str(tmp_path / "e")]) == 0
        assert re.search(r"\ngood\s+\d\.\d{3}", capsys.readouterr().out)
        assert main(["agreement", compiled, str(fresh), "--n-bootstrap", "50", "--out", str(tmp_path / "a"),
                     "--runs-dir", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    run = CalibrationRun.load(tmp_path / "a" / "agreement_run.json")
    assert set(run.scores) >= {"good (compiled + calibrated)", "good (raw judge score)"}
    assert run.agreement["good (compiled + calibrated)"].value("balanced_accuracy") == 1.0
    assert "| scorer |" in printed and "HTML report:" in printed
    # no split here: the words say so (not "held-out test", not "cut-off fitted on train"), the page too
    # 3 of the 12 new items repeat ones it was fitted on: left out and said
    assert "left out 3 items a compiled judge was fitted on; 9 remain" in printed
    assert "every labelled item, no split, n=9" in printed and "held-out" not in printed
    assert "fitted on train" not in printed
    page = (tmp_path / "a" / "report" / "index.html").read_text()
    assert "<title>Agreement report" in page and "held-out" not in page
    # measured on the labels it was fitted on, its own training items are left out and counted
    fitted = json.loads(Path(compiled).read_text())["report"]["fitted_on_items"]
    assert len(fitted) == 8
    with dspy.context(lm=demo_sensitive_lm()):
        assert main(["agreement", compiled, str(critic_labels(tmp_path)), "--n-bootstrap", "50", "--no-mlflow",
                     "--no-report", "--out", str(tmp_path / "again")]) == 0
    assert "left out 8 items a compiled judge was fitted on; 16 remain" in capsys.readouterr().out
    with dspy.context(lm=demo_sensitive_lm()):  # beside a new calibration whose test split holds its training items
        assert main(["calibrate", str(critic_labels(tmp_path)), *CRITIC, "--optimizer", "none", "--calibrator", "none",
                     "--n-train", "8", "--n-test", "16", "--seed", "1", "--beside", compiled, "--no-mlflow",
                     "--no-report", "--n-bootstrap", "20", "--out", str(tmp_path / "beside")]) == 0
    assert re.search(r"warning: --beside \S+ was fitted on \d+ of the 16 test items", capsys.readouterr().out)
    assert main(["agreement", str(tmp_path / "missing.json"), str(fresh), "--no-mlflow"]) == 2


def test_rationales_are_kept_and_shown_beside_the_judges_reasons(tmp_path, capsys):
    rows = [{"response": f"item {i}: {'good' if i % 2 else 'bad'}", "label": i % 2,
             **({"rationale": f"item {i} is plainly bad"} if i % 2 == 0 else {})} for i in range(16)]
    data = write_jsonl(tmp_path / "labels.jsonl", rows)
    from calibration.data.labelled import LabelledSet

    labelled = LabelledSet.from_jsonl(data)
    assert labelled.rationale(0) == "item 0 is plainly bad" and labelled.rationale(1) is None
    assert labelled.subset([2]).rationale(0) == "item 2 is plainly bad"
    with dspy.context(lm=demo_sensitive_lm()):  # says "good" to everything without demos
        assert main(["calibrate", str(data), *CRITIC, "--optimizer", "none", "--calibrator", "none", "--n-train", "6",
                     "--n-test", "8", "--no-mlflow", "--n-bootstrap", "30", "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "their rationale beside its reasons" in printed and "person: item" in printed and "judge: " in printed
    run = CalibrationRun.load(tmp_path / "o" / "calibration_run.json")
    wrong = run.meta["disagreements"]
    assert wrong["scorer"] == "judge as shipped" and wrong["count"] == 4  # the four label-0 test items
    assert all(d["rationale"].endswith("is plainly bad") for d in wrong["items"])
    page = (tmp_path / "o" / "report" / "index.html").read_text()
    assert "the person&#x27;s rationale" in page and "is plainly bad" in page


# --- the audit's exit codes and paths (issue 59) ---------------------------------------------------------
def test_evaluate_exit_codes_the_audit_asked_for(tmp_path, capsys):
    """Two metrics of one name are a usage error (2); a run in which no item of a metric was scored is a failure
    (1), after its outputs are written."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"response": f"item {i}: good", "reference": "x"} for i in range(3)])
    assert main(["evaluate", str(data), "-m", "exact_match", "-m", "exact_match", "--no-mlflow",
                 "--out", str(tmp_path / "o1")]) == 2
    assert "two metrics share the name(s) ['exact_match']: give each its own with ALIAS=" in capsys.readouterr().err
    critic = 'aspect_critic:{"name": "good", "definition": "Is the item good?"}'
    with dspy.context(lm=failing_lm(lambda response: True)):
        code = main(["evaluate", str(data), "-m", critic, "-m", "exact_match", "--no-mlflow",
                     "--out", str(tmp_path / "o2")])
    assert code == 1 and "no item could be scored by good: every one failed" in capsys.readouterr().err
    assert (tmp_path / "o2" / "scores.csv").is_file() and (tmp_path / "o2" / "summary.json").is_file()


def test_outputs_replace_symlinks_instead_of_writing_through_them(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", [{"response": "a", "reference": "a"}])
    out, victim = tmp_path / "o", tmp_path / "elsewhere.txt"
    out.mkdir()
    victim.write_text("keep me")
    for name in ("scores.csv", "samples.jsonl", "summary.json"):
        (out / name).symlink_to(victim)
    assert main(["evaluate", str(data), "-m", "exact_match", "--no-mlflow", "--out", str(out)]) == 0
    assert victim.read_text() == "keep me"
    assert all((out / n).is_file() and not (out / n).is_symlink() for n in ("scores.csv", "samples.jsonl", "summary.json"))
    assert not list(out.glob(".*.tmp"))
    labels = write_jsonl(tmp_path / "l.jsonl", [{"response": f"r {i}", "reference": f"r {i % 3}", "label": i % 2}
                                                for i in range(8)])
    cal = tmp_path / "cal"
    (cal / "report").mkdir(parents=True)
    written = ("calibration_run.json", "compiled_exact_match_none.json", "report/index.html", "report/reliability.png")
    for name in written:
        (cal / name).symlink_to(victim)
    assert main(["calibrate", str(labels), "--judge", "exact_match", "--calibrator", "platt", "--n-train", "4",
                 "--n-test", "4", "--no-mlflow", "--n-bootstrap", "20", "--out", str(cal)]) == 0
    assert victim.read_text() == "keep me" and not any((cal / n).is_symlink() for n in written)


def test_paths_that_are_not_files_are_named(tmp_path, capsys):
    folder = tmp_path / "folder"
    folder.mkdir()
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    assert main(["evaluate", str(folder), "-m", "exact_match", "--no-mlflow"]) == 2
    assert f"{folder} is a directory, not a file" in capsys.readouterr().err
    assert main(["evaluate", str(zero), "-m", "exact_match", "--no-mlflow"]) == 2
    assert "(a link to /dev/zero) is not a regular file" in capsys.readouterr().err
    labels = write_jsonl(tmp_path / "l.jsonl", [{"response": "a", "reference": "a", "label": 1}])
    assert main(["agreement", str(folder), str(labels), "--no-mlflow"]) == 2
    assert f"{folder} is a directory, not a file: give a compiled judge .json file or a metric name" in \
        capsys.readouterr().err
    assert main(["agreement", "exact_match", str(folder), "--no-mlflow"]) == 2
    assert "is a directory, not a file" in capsys.readouterr().err
    with pytest.raises(ValueError, match="is a directory, not a compiled judge file"):
        CompiledJudge.load(folder)
    binary = tmp_path / "judge.json"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ValueError, match=r"judge\.json is not text \(a binary file\?\)"):
        CompiledJudge.load(binary)


def test_identical_inputs_with_conflicting_labels_are_reported(tmp_path, capsys):
    """16 copies of one input, labelled 0 and 1: calibrate says so, and that train and test share it."""
    data = write_jsonl(tmp_path / "same.jsonl", [{"response": "the same answer", "reference": "the same answer",
                                                  "label": i % 2} for i in range(16)])
    assert main(["calibrate", str(data), "--judge", "exact_match", "--calibrator", "platt", "--n-train", "8",
                 "--n-test", "8", "--no-mlflow", "--no-report", "--n-bootstrap", "20",
                 "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert ("Warning: 1 distinct input(s) appear with conflicting labels (16 items): no judge can agree with both "
            "labels of one input") in printed
    assert "Warning: 1 input(s) are in both train and test" in printed


def test_a_full_disk_names_the_run_file_it_could_not_write(tmp_path, capsys, monkeypatch):
    import errno

    from judges.run import run_file

    real_write = run_file.os.write

    def full_for_records(fd, data):  # os.write is the process's: only the run file's record lines fail
        if b'"sample"' in bytes(data):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(run_file.os, "write", full_for_records)
    data = write_jsonl(tmp_path / "d.jsonl", [{"response": "a", "reference": "a"}])
    assert main(["evaluate", str(data), "-m", "exact_match", "--no-mlflow", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "No space left on device: the run file could not take 1 record line(s)" in err
    assert str(tmp_path / "o" / "run.jsonl") in err


def test_sigterm_stops_a_command_as_ctrl_c_does_and_the_handler_is_restored(monkeypatch, capsys):
    import os
    import signal
    import time

    import judges_app.cli.metrics as metrics_command

    def killed(args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # interrupted long before
        return 0

    monkeypatch.setattr(metrics_command, "run", killed)
    before = signal.getsignal(signal.SIGTERM)
    start = time.monotonic()
    assert main(["metrics"]) == 130 and time.monotonic() - start < 4
    assert "interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_interrupted_calibrate_says_what_it_paid_for_and_the_rerun_reuses_it(tmp_path, capsys):
    """Ctrl-C after three judge calls: exit 130, the paid calls said, the three judgments kept; the same command
    again pays only for the rest (as many calls as an uninterrupted run, less three)."""
    labels = critic_labels(tmp_path)
    argv = ["calibrate", str(labels), *CRITIC, "--optimizer", "none", "--calibrator", "platt", "--n-train", "8",
            "--n-test", "8", "--no-mlflow", "--n-bootstrap", "50", "--no-report"]

    def counting(interrupt_at=None):
        def respond(prompt):
            lm.calls += 1
            if lm.calls == interrupt_at:
                raise KeyboardInterrupt
            response = re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt)[-1]
            return {"reason": "scripted", "verdict": str("good" in response)}
        lm = scripted_lm(respond)
        lm.calls = 0
        return lm

    first = counting(interrupt_at=4)
    with dspy.context(lm=first):
        assert main([*argv, "--out", str(tmp_path / "o")]) == 130
    err = capsys.readouterr().err
    assert "interrupted after" in err and "3 new judgments are kept in" in err and "3 paid LM calls" in err
    assert len((tmp_path / "o" / "judgments.jsonl").read_text().splitlines()) == 1 + 3
    again, fresh = counting(), counting()
    with dspy.context(lm=again):
        assert main([*argv, "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "resuming: 3 judgments recorded by an earlier run" in out and "3 judgments came from judgments.jsonl" in out
    with dspy.context(lm=fresh):
        assert main([*argv, "--out", str(tmp_path / "fresh")]) == 0
    assert again.calls == fresh.calls - 3 > 0
    resumed = CalibrationRun.load(tmp_path / "o" / "calibration_run.json")
    whole = CalibrationRun.load(tmp_path / "fresh" / "calibration_run.json")
    assert resumed.scores == whole.scores and resumed.meta["judgments"]["reused"] == 3


def test_a_researchers_file_as_it_is_is_read_with_columns_label_words_and_ids(tmp_path, capsys):
    """Their own columns, label words, a plain-text knowledge column and an id column: read with --columns,
    --labels and --id-column; what was decided for every row is said once; disagreements carry their ids."""
    import csv

    path = tmp_path / "dialogue.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["turn", "dialogue_history", "knowledge", "bot_reply", "annotator_verdict"])
        for i in range(24):
            fact = f"The tower number {i} was finished in {1800 + i}."
            reply = fact if i % 2 else f"The bridge number {i} opened in {1900 + i}."
            writer.writerow([f"d{i:02d}", "Hi!", fact, reply, "Faithful" if i % 2 else "hallucinated"])
    argv = ["calibrate", str(path), "--judge", "novel_bigram_support", "--optimizer", "none", "--calibrator", "platt",
            "--n-train", "10", "--n-test", "12", "--no-mlflow", "--no-report", "--n-bootstrap", "50",
            "--label-column", "annotator_verdict", "--id-column", "turn",
            "--columns", "bot_reply=response,knowledge=retrieved_contexts", "--labels", "faithful=1,hallucinated=0",
            "--table", str(tmp_path / "table.tex"), "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    tex = (tmp_path / "table.tex").read_text()
    assert "\\begin{tabular}" in tex and "n = 12 items" in tex and "from 50 bootstrap resamples (seed 0)" in tex
    assert re.search(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", tex)  # three decimals on intervals
    assert out.count("columns left out (not named in columns): dialogue_history") == 1
    assert out.count("24 'retrieved_contexts' cells were plain text, each read as a list of one text") == 1
    run = CalibrationRun.load(tmp_path / "o" / "calibration_run.json")
    ids = [d["id"] for d in run.meta["disagreements"]["items"]]
    assert all(re.fullmatch(r"d\d\d", i) for i in ids)
    assert main([*argv[:-2], "--labels", "faithful=1", "--out", str(tmp_path / "o2")]) == 2
    assert "label 'hallucinated' in 'annotator_verdict' is none of the label words 'faithful'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # at parse, as argparse refuses
        main([*argv[:-2], "--columns", "bot_reply=answer", "--out", str(tmp_path / "o3")])
    assert refused.value.code == 2 and "answer is not a sample field" in capsys.readouterr().err


def test_agreement_measures_several_judges_in_one_table_and_compares_every_pair(tmp_path, capsys):
    """Two judges and a variant of one (another setting): rows named by what differs, one table, each pair
    compared on the same items with Holm-adjusted p-values, each judge's disagreements kept."""
    rows = []
    for i in range(40):
        fact = f"The tower number {i} was finished in {1800 + i}."
        good = i % 2 == 1
        reply = fact if good else (f"The tower number {i} was finished in {1700 + i}." if i % 4 == 0
                                   else f"The bridge number {i} opened in {1900 + i}.")
        rows.append({"response": reply, "retrieved_contexts": [fact], "label": int(good), "turn": f"t{i}"})
    data = write_jsonl(tmp_path / "grounded.jsonl", rows)
    argv = ["agreement", str(data), "--judge", "novel_bigram_support", "--judge", "weakest_sentence_support",
            "--judge", 'unsupported_specifics', "--id-column", "turn", "--n-bootstrap", "200", "--no-mlflow",
            "--out", str(tmp_path / "a")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Holm-adjusted over 3 pairs" in printed and printed.count(" vs ") >= 3 and "DeLong p=" in printed
    run = CalibrationRun.load(tmp_path / "a" / "agreement_run.json")
    assert {"novel_bigram_support", "weakest_sentence_support", "unsupported_specifics"} <= set(run.scores)
    pairs = run.meta["judge_pairs"]
    assert len(pairs) == 3 and all(p["delong_holm"] >= p["delong_p"] for p in pairs)
    assert set(run.meta["disagreements_by_judge"]) == {"novel_bigram_support", "weakest_sentence_support",
                                                       "unsupported_specifics"}
    page = (tmp_path / "a" / "report" / "index.html").read_text()
    assert "The judges pair by pair (roc_auc, p-values Holm-adjusted over 3 pairs)" in page
    shown = [d for d in run.meta["disagreements_by_judge"].values() if d["items"]]
    assert page.count("Disagreements of ") == len(shown) and all(f">{d['items'][0]['id']}<" in page for d in shown)
    variants = ["agreement", str(data), "--judge", "faithfulness_with_verifier", "--judge",
                'faithfulness_with_verifier:{"aggregate": "share"}', "--id-column", "turn", "--n-bootstrap", "50",
                "--no-mlflow", "--no-report",
                "--out", str(tmp_path / "v")]
    assert main(variants) == 0  # each variant's row names the setting that tells it apart
    printed = capsys.readouterr().out
    assert "faithfulness_with_verifier (aggregate='combined')" in printed
    assert "faithfulness_with_verifier (aggregate='share')" in printed
    assert main(["agreement", str(data), str(data), "--judge", "novel_bigram_support", "--no-mlflow"]) == 2
    assert "give only the labelled DATA" in capsys.readouterr().err


def test_several_annotators_give_their_agreement_and_the_judge_joins_as_one_more_rater(tmp_path, capsys):
    """Three people labelled each item (one left one blank): Krippendorff's alpha and Fleiss' kappa among them,
    the judge's alpha as a fourth rater, its kappa against the majority and each person, each with a CI."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(40):
        fact = f"The tower number {i} was finished in {1800 + i}."
        good = i % 2 == 1
        reply = fact if good else f"The bridge number {i} opened in {1900 + i}."
        people = [good if rng.random() > 0.1 else not good for _ in range(3)]
        row = {"response": reply, "retrieved_contexts": [fact]}
        row.update({f"a{k + 1}": "faithful" if v else "hallucinated" for k, v in enumerate(people)})
        rows.append(row)
    rows[0]["a3"] = None
    data = write_jsonl(tmp_path / "three.jsonl", rows)
    assert main(["agreement", "novel_bigram_support", str(data), "--label-column", "a1,a2,a3", "--labels",
                 "faithful=1,hallucinated=0", "--n-bootstrap", "100", "--no-mlflow", "--no-report",
                 "--out", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr().out
    assert "People (a1, a2, a3; 40 items, nominal labels): Krippendorff's alpha 0." in printed
    assert "Fleiss' kappa" in printed and "With the judge as one more rater: alpha" in printed
    assert re.search(r"against each person: a1 -?\d\.\d{3} \[", printed)
    found = CalibrationRun.load(tmp_path / "a" / "agreement_run.json").meta["raters"]["novel_bigram_support"]
    people = found["stats"]["alpha_people"]
    assert 0.5 < people["value"] < 1 and people["low"] <= people["value"] <= people["high"]


def grounded_rows(n: int) -> list[dict]:
    """``n`` labelled replies to one fact each: the odd ones restate it (1), the even ones tell of something
    else (0)."""
    rows = []
    for i in range(n):
        fact = f"The tower number {i} was finished in {1800 + i}."
        reply = fact if i % 2 else f"The bridge number {i} opened in {1900 + i}."
        rows.append({"response": reply, "retrieved_contexts": [fact], "label": i % 2})
    return rows


def test_calibrate_repeats_gives_each_scorer_s_spread_over_splits(tmp_path, capsys):
    data = write_jsonl(tmp_path / "g.jsonl", grounded_rows(40))
    assert main(["calibrate", str(data), "--judge", "novel_bigram_support", "--optimizer", "none", "--calibrator",
                 "platt", "--n-train", "16", "--n-test", "16", "--repeats", "3", "--no-mlflow", "--no-report",
                 "--n-bootstrap", "50", "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "Over 3 splits (seeds 0-2), roc_auc: mean, standard deviation, lowest-highest" in printed
    spread = CalibrationRun.load(tmp_path / "o" / "calibration_run.json").meta["repeats"]
    shipped = spread["judge as shipped"]
    assert len(shipped["values"]) == 3 and shipped["min"] <= shipped["mean"] <= shipped["max"]
    assert re.search(r"judge as shipped: \d\.\d{3} sd \d\.\d{3} \(\d\.\d{3}-\d\.\d{3}\)", printed)


def test_calibrate_label_curve_measures_each_scorer_by_the_number_of_labels(tmp_path, capsys):
    data = write_jsonl(tmp_path / "g.jsonl", grounded_rows(48))
    assert main(["calibrate", str(data), "--judge", "novel_bigram_support", "--optimizer", "none", "--calibrator",
                 "platt", "--n-train", "24", "--n-test", "24", "--label-curve", "8,16", "--no-mlflow",
                 "--n-bootstrap", "50", "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "roc_auc by the number of training labels (8, 16, 24), on the same test items:" in printed
    curve = CalibrationRun.load(tmp_path / "o" / "calibration_run.json").meta["label_curve"]
    assert curve["sizes"] == [8, 16, 24] and all(len(v) == 3 for v in curve["scorers"].values())
    page = (tmp_path / "o" / "report" / "index.html").read_text()
    assert "Agreement by the number of labels" in page and (tmp_path / "o" / "report" / "label_curve.png").exists()


def test_evaluate_writes_each_sample_s_own_id_beside_its_position(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", [{"turn": f"t{i}", "response": f"answer {i}", "reference": "answer 0"}
                                              for i in range(3)])
    assert main(["evaluate", str(data), "-m", "exact_match", "--id-column", "turn", "--no-mlflow",
                 "--out", str(tmp_path / "e")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "e" / "samples.jsonl").read_text().splitlines()]
    assert [(r["sample"], r["id"], r["score"]) for r in lines] == [(0, "t0", 1.0), (1, "t1", 0.0), (2, "t2", 0.0)]
    assert (tmp_path / "e" / "scores.csv").read_text().splitlines()[0] == "sample,id,exact_match"
    header = json.loads((tmp_path / "e" / "run.jsonl").read_text().splitlines()[0])["header"]
    assert header["ids"] == ["t0", "t1", "t2"]  # the run file names each position by the user's id too
