"""Fail loudly, stay bounded: regression tests for what a bad-input and fault audit found (items 5 and 6 of
issue 17; the others are beside the code they test), and a fuzz test feeding random malformed rows, labels
and parameters through `evaluate` and `calibrate` on a scripted LM: every case ends in a named error
(exit 2) or a result with its failures recorded (exit 0), never a traceback (exit 1) or a silent result."""

import json
import os
import random
import re
import sys
import time
from pathlib import Path

import dspy
import numpy as np
import pytest

from calibration.data.labelled import LabelledSet, split
from calibration.fitting.fit import label_schema, scaled
from judges import BleuScore, EvaluationDataset, RougeScore, SingleTurnSample, evaluate
from judges_app.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def critic_lm(calls=None):
    def respond(prompt):
        response = re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt)[-1]
        return {"reason": "scripted", "verdict": str("good" in response)}

    return scripted_lm(respond)


CRITIC = ["--judge", "aspect_critic", "--judge-params", '{"name": "good", "definition": "Is the item good?"}']


def run_cli(argv, capsys):
    """(exit code, stdout, stderr) of `dspy-judges ARGV`; argparse's own exits included."""
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------------------------------------
# 5. Labels validated up front
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, kind, message", [
    ("2", "binary", "label 2 is not 0 or 1"),
    ("0.7", "binary", "label 0.7 is not 0 or 1"),
    ("Infinity", "binary", "not valid JSON (Infinity is not a finite number)"),
    ("NaN", "continuous", "not valid JSON (NaN is not a finite number)"),
    ('"inf"', "continuous", "is not a finite number"),
    ("2.5", "ordinal", "label 2.5 is not a whole number"),
])
def test_every_label_is_checked_against_its_kind_naming_file_line_and_value(tmp_path, capsys, bad, kind, message):
    """Audit: labels outside {0, 1} were silently dropped by the balanced sampler (exit 0), {1, 2} crashed with
    numpy messages, NaN/inf failed only after the judge phase."""
    rows = [json.dumps({"response": f"item {i}: good", "label": i % 2}) for i in range(9)]
    rows.insert(4, '{"response": "item x", "label": ' + bad + "}")
    data = write_lines(tmp_path / "labels.jsonl", rows)
    lm = critic_lm()
    with dspy.context(lm=lm):
        code, _, err = run_cli(["calibrate", str(data), *CRITIC, "--label-kind", kind, "--n-train", "4",
                                "--n-test", "4", "--no-mlflow"], capsys)
    assert code == 2 and "labels.jsonl: line 5" in err and message in err, err
    assert lm.engine.calls == 0


def test_one_label_value_is_refused_before_any_lm_call(tmp_path, capsys):
    data = write_lines(tmp_path / "ones.jsonl", [json.dumps({"response": f"item {i}: good", "label": 1})
                                                  for i in range(10)])
    lm = critic_lm()
    with dspy.context(lm=lm):
        code, _, err = run_cli(["calibrate", str(data), *CRITIC, "--n-train", "4", "--n-test", "4", "--no-mlflow"],
                               capsys)
    assert code == 2 and "every test label is 1" in err and lm.engine.calls == 0


def test_ordinal_labels_are_scaled_by_the_whole_set_or_the_declared_range():
    """Audit: the scale came from the train split only, so a test label of 7 came out as 7.0 "on a 0-1 scale"."""
    rows = [{"response": f"r{i}", "label": v} for i, v in enumerate([1, 2, 3, 4, 5, 1, 2, 3, 7, 7])]
    data = LabelledSet.from_records(rows, kind="ordinal")
    train = data.subset(range(8))  # labels 1..5 only
    schema = label_schema(train)
    assert (schema["low"], schema["high"]) == (1.0, 7.0)
    assert scaled([7], schema).tolist() == [1.0]
    parts = split(data, dev=0, test=0.3, seed=0)
    assert parts.train.label_range == parts.test.label_range == (1.0, 7.0)
    declared = LabelledSet.from_records(rows, kind="ordinal", label_range=(1, 10))
    assert label_schema(declared.subset([0, 1]))["high"] == 10.0
    with pytest.raises(ValueError, match="label 7 is outside the declared range 1-5"):
        LabelledSet.from_records(rows, kind="ordinal", label_range=(1, 5))


# ------------------------------------------------------------------------------------------------
# 6. The rest of what was found
# ------------------------------------------------------------------------------------------------
def test_an_empty_dataset_is_a_named_error(tmp_path, capsys):
    empty = write_lines(tmp_path / "empty.jsonl", [])
    code, _, err = run_cli(["evaluate", str(empty), "-m", "exact_match", "--no-mlflow"], capsys)
    assert code == 2 and "holds no samples" in err
    with pytest.raises(ValueError, match="holds no samples"):
        evaluate([], [RougeScore()], progress=False)


@pytest.mark.parametrize("extra, message", [
    (["--limit", "0"], "--limit: expected a whole number >= 1, got 0"),
    (["--limit", "-2"], "--limit: expected a whole number >= 1, got -2"),
    (["--threads", "0"], "--threads: expected a whole number >= 1, got 0"),
    (["--timeout", "-1"], "--timeout: expected a number of seconds above 0, at most 86,400"),
    (["-m", 'rouge_score:{"rouge_type": "rouge9"}'], "rouge_type='rouge9' is not one of"),
])
def test_bad_evaluate_options_exit_2_naming_the_option(tmp_path, capsys, extra, message):
    data = write_lines(tmp_path / "d.jsonl", [json.dumps({"response": "a", "reference": "a"})] * 3)
    code, _, err = run_cli(["evaluate", str(data), "-m", "exact_match", *extra, "--no-mlflow",
                            "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and message in err, err


def test_bad_calibrate_options_and_prices_exit_2_before_any_lm_call(tmp_path, capsys):
    rows = [json.dumps({"response": f"item {i}: {'good' if i % 2 else 'bad'}", "label": i % 2}) for i in range(12)]
    data = write_lines(tmp_path / "labels.jsonl", rows)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"scripted/test": {"input": "cheap", "output": 0}}))
    lm = critic_lm()
    base = ["calibrate", str(data), *CRITIC, "--n-train", "4", "--n-test", "4", "--no-mlflow"]
    with dspy.context(lm=lm):
        code, _, err = run_cli([*base, "--optimizer-options", "[1, 2]"], capsys)
        assert code == 2 and "--optimizer-options must be a JSON object, got list" in err
        code, _, err = run_cli([*base, "--prices", str(prices)], capsys)
        assert code == 2 and "bad entries ['scripted/test']" in err
        code, _, err = run_cli([*base, "--n-train", "0"], capsys)
        assert code == 2 and "--n-train: expected a whole number >= 1" in err
    assert lm.engine.calls == 0


def test_file_problems_name_the_file_and_line(tmp_path, capsys):
    bad_json = write_lines(tmp_path / "labels.jsonl", ['{"response": "a", "label": 1}', "{oops", '{"label": 0}'])
    code, _, err = run_cli(["calibrate", str(bad_json), "--no-mlflow"], capsys)
    assert code == 2 and "labels.jsonl: line 2 is not valid JSON" in err
    bom = tmp_path / "excel.csv"  # Excel's "CSV UTF-8" starts with a byte-order mark
    bom.write_bytes("\ufeffresponse,reference,label\nab,ab,1\ncd,ce,0\n".encode("utf-8"))
    assert LabelledSet.from_csv(bom).labels == [1, 0]
    bom.write_bytes("\ufeffresponse,reference\nab,ab\n".encode("utf-8"))
    assert EvaluationDataset.from_csv(bom)[0].response == "ab"
    surrogate = tmp_path / "surrogate.jsonl"
    surrogate.write_text('{"response": "a\\ud800b", "reference": "a"}\n')
    code, _, err = run_cli(["evaluate", str(surrogate), "-m", "exact_match", "--no-mlflow"], capsys)
    assert code == 2 and "field 'response'" in err and "lone surrogate U+D800" in err


def test_more_bad_files_and_outputs_end_in_one_named_error(tmp_path, capsys):
    """From a rerun of the audit (issue 28): each used to end in a raw exception and exit 1."""
    ok = write_lines(tmp_path / "ok.jsonl", [json.dumps({"response": "a", "reference": "a"})] * 2)
    deep = write_lines(tmp_path / "deep.jsonl", ['{"response": ' + "[" * 100_000 + "]" * 100_000 + ', "reference": "a"}'])
    ragged = write_lines(tmp_path / "ragged.csv", ["response,reference", "a,a", "x,y,z,w"])
    big = write_lines(tmp_path / "big.jsonl", [json.dumps({"response": "a", "reference": "a", "label": int("9" * 401)}),
                                               *[json.dumps({"response": "b", "reference": "a", "label": i % 2}) for i in range(5)]])
    a_file = write_lines(tmp_path / "a_file", ["x"])
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    cases = [
        (["evaluate", str(deep), "-m", "exact_match"], "deep.jsonl:1 is nested too deeply to read"),
        (["evaluate", str(ragged), "-m", "exact_match"], "ragged.csv: line 3 has 4 cells where the header has 2 columns"),
        (["calibrate", str(big), "--judge", "exact_match"], "line 1: label 99999999999999999999"),
        (["evaluate", str(ok), "-m", "exact_match", "--out", str(a_file)], f"--out {a_file} is a file"),
        (["evaluate", str(ok), "-m", "exact_match", "--out", str(tmp_path / "link")], "is a symbolic link"),
        (["evaluate", str(ok), "-m", "exact_match", "--run-file", str(tmp_path)], "is a directory"),
    ]
    for argv, message in cases:
        code, _, err = run_cli([*argv, "--no-mlflow", *(["--out", str(tmp_path / "o")] if "--out" not in argv else [])],
                               capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (argv, code, err)
    assert not list((tmp_path / "real").iterdir())  # nothing written through the link
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o555)
    if not os.access(read_only, os.W_OK):  # root writes anywhere: nothing to check then
        code, _, err = run_cli(["evaluate", str(ok), "-m", "exact_match", "--no-mlflow", "--out", str(read_only)], capsys)
        assert code == 2 and "is not writable" in err


def test_an_unwritable_mlflow_location_fails_at_once_and_says_no_mlflow(tmp_path, capsys, monkeypatch):
    """Audit: a read-only MLflow location cost ~107 s of retries, or failed after all the work."""
    data = write_lines(tmp_path / "d.jsonl", [json.dumps({"response": "a", "reference": "a"})])
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the runs folder should be")
    start = time.monotonic()
    code, out, err = run_cli(["evaluate", str(data), "-m", "exact_match", "--runs-dir", str(blocker / "runs"),
                              "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "MLflow cannot write" in err and "--no-mlflow" in err and "samples in" not in out
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens on the discard port
    code, _, err = run_cli(["evaluate", str(data), "-m", "exact_match", "--out", str(tmp_path / "o2")], capsys)
    assert code == 2 and "does not answer" in err
    assert time.monotonic() - start < 20


def test_bleu_never_exceeds_one_and_rouge_says_why_it_is_zero():
    rng = random.Random(1)
    for _ in range(2000):
        text = " ".join(rng.choice(["the", "a", "cat", "dog", "x", "."]) for _ in range(rng.randint(1, 30)))
        assert BleuScore().score({"response": text, "reference": text}).score <= 1.0
    result = RougeScore().score(SingleTurnSample(response="abc", reference="!!!"))
    assert result.score == 0.0 and result.undefined_reason == "the reference has no tokens; ROUGE is 0 by convention"


def test_answers_from_the_dspy_cache_are_counted_apart_from_paid_calls(tmp_path):
    """Audit: a run interrupted after its LM calls were cached under-counted them on resume (cached, unrecorded)."""
    from judges import AspectCritic

    lm = scripted_lm(lambda prompt: {"reason": "r", "verdict": "True"})
    lm.cache = True
    judge = AspectCritic(name="good", definition="Is it good?", lm=lm)
    data = EvaluationDataset([{"response": f"cache-me {time.time_ns()} {i}"} for i in range(3)])
    first = evaluate(data, [judge], num_threads=1, progress=False).summary()["good"]
    again = evaluate(data, [judge], num_threads=1, progress=False).summary()["good"]
    assert (first["lm_calls"], first["cached_calls"]) == (3, 0)
    assert (again["lm_calls"], again["cached_calls"]) == (0, 3)


# ------------------------------------------------------------------------------------------------
# The fuzz test
# ------------------------------------------------------------------------------------------------
def random_value(rng):
    return rng.choice([None, "", " ", "text", "好", "\ufeffbom", 0, -1, 3.5, float("1e308"), True, [], ["a", 1], [None],
                       {"a": 1}, "x" * 2000, "🙂" * 3, "\u0000", [["nested"]]])


def random_row(rng, label=None, mutate=0.25):
    fields = ["user_input", "response", "reference", "retrieved_contexts", "reference_contexts", "rubrics",
              "multi_responses", "answr"]
    row = {"response": "item good" if rng.random() < 0.5 else "item bad", "reference": "item good",
           "retrieved_contexts": ["item good"]}
    for _ in range(rng.randint(0, 3) if rng.random() < mutate else 0):
        field = rng.choice(fields)
        if rng.random() < 0.3:
            row.pop(field, None)
        else:
            row[field] = random_value(rng)
    if label is not None:
        row["label"] = label
    return row


def random_lines(rng, rows, broken=0.15):
    lines = [json.dumps(r, ensure_ascii=rng.random() < 0.5) for r in rows]
    for _ in range(rng.randint(0, 2)):
        if rng.random() < broken and lines:
            lines[rng.randrange(len(lines))] = rng.choice(["{", "[1, 2]", "null", '"just text"', "{\"response\": }"])
    return lines


METRIC_SPECS = ["exact_match", "rouge_score", "bleu_score", "chrf_score", "string_presence",
                "non_llm_string_similarity", 'rouge_score:{"rouge_type": "rouge2"}',
                'aspect_critic:{"name": "good", "definition": "Good?"}', "faithfulness", "answer_accuracy"]
BAD_METRIC_SPECS = ['rouge_score:{"mode": 1}', 'non_llm_string_similarity:{"distance_measure": "cosine"}',
                    "aspect_critic", "nope", "rouge_score:[1]", 'exact_match:{"ignore_case": true, "extra": 1}']


@pytest.mark.parametrize("seed", range(40))
def test_fuzz_evaluate_and_calibrate_end_in_a_named_error_or_recorded_failures(tmp_path, capsys, seed):
    rng = random.Random(seed)
    lm = critic_lm()
    # evaluate
    rows = [random_row(rng) for _ in range(rng.randint(1, 6))]
    data = write_lines(tmp_path / "data.jsonl", random_lines(rng, rows))
    specs = rng.sample(METRIC_SPECS, rng.randint(1, 3)) + ([rng.choice(BAD_METRIC_SPECS)] if rng.random() < 0.15 else [])
    argv = ["evaluate", str(data), *[x for s in specs for x in ("-m", s)], "--no-mlflow", "--out", str(tmp_path / "e")]
    if rng.random() < 0.2:
        argv += rng.choice([["--limit", rng.choice(["0", "2", "x"])], ["--threads", rng.choice(["0", "2", "-1"])],
                            ["--timeout", rng.choice(["0", "5", "nan"])]])
    with dspy.context(lm=lm):
        code, out, err = run_cli(argv, capsys)
    assert code in (0, 1, 2), f"evaluate {specs}: exit {code}\n{err[-1500:]}"
    if code == 2:
        assert "error:" in err and "Traceback" not in err
    else:  # 1: a metric scored no item (a failure of the run, said so), its outputs written all the same
        assert code == 0 or "failed: no item could be scored by" in err, err[-1500:]
        records = [json.loads(line) for line in (tmp_path / "e" / "samples.jsonl").read_text().splitlines()]
        n_samples = len({r["sample"] for r in records})
        assert len(records) == n_samples * len(specs)  # every (sample, metric) scored or recorded as failed
        assert all((r.get("score") is not None) != bool(r.get("error")) for r in records)
    # calibrate
    labels = [rng.choice([0, 1, 1, 0, 2, 0.5, "yes", None, "1", float("nan"), True]) if rng.random() < 0.03
              else i % 2 for i in range(16)]
    rows = [random_row(rng, label, mutate=0.02) for label in labels]
    data = write_lines(tmp_path / "labels.jsonl", random_lines(rng, rows, broken=0.05))
    argv = ["calibrate", str(data), *CRITIC, "--optimizer", "none", "--calibrator", rng.choice(["platt", "stacked"]),
            "--n-train", rng.choice(["4", "6", "1"]), "--n-test", rng.choice(["4", "6"]),
            "--label-kind", rng.choice(["binary", "binary", "ordinal", "continuous"]), "--no-mlflow", "--no-report",
            "--n-bootstrap", "20", "--out", str(tmp_path / "c")]
    with dspy.context(lm=lm):
        code, out, err = run_cli(argv, capsys)
    assert code in (0, 2), f"calibrate: exit {code}\n{err[-1500:]}"
    if code == 2:
        assert "error:" in err and "Traceback" not in err
    else:
        assert "| scorer" in out and np.isfinite(json.loads((tmp_path / "c" / "calibration_run.json").read_text())
                                                 ["agreement"]["judge as shipped"]["n"])


def test_offline_litellm_uses_its_bundled_price_table():
    """Audit: offline, LiteLLM spent ~8 s retrying a download of its price table."""
    import subprocess

    code = ("import judges, os, litellm; print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'], len(litellm.model_cost) > 100)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "True"], done.stderr[-1000:]
    assert "fetch" not in done.stderr.lower()
