"""Our judges inside MLflow 3 GenAI: scorers in mlflow.genai.evaluate, labels read from human feedback on
traces, labels written back, `calibrate --from-mlflow`, and an MLflow alignment optimizer. Real tracking
stores (SQLite, and one `mlflow server`), traces made by tracing a function, feedback logged with MLflow's API."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: before dspy imports litellm (as judges sets it)
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # a trace is in the store when the call returns

import json  # noqa: E402
import re
import sys
import time
import types
from pathlib import Path

import dspy
import mlflow
import numpy as np
import pytest
from mlflow.entities import AssessmentSource, Document, SpanType
from mlflow.genai.judges import make_judge
from mlflow.genai.judges.optimizers.memalign import MemAlignOptimizer
from mlflow.genai.scorers import ResponseLength

from calibration.fitting.calibrators import Calibrator
from calibration.fitting.compiled import CompiledJudge
from judges import AspectCritic, ExactMatch, Faithfulness, NonLLMStringSimilarity
from judges.lm import embeddings
from judges_app.cli import main
from judges_app.mlflow_align import CalibratedMlflowJudge, DspyJudgesAligner
from judges_app.mlflow_labels import JUDGE_TRACE, MlflowSourceError, export_pool, labels_from_mlflow
from judges_app.mlflow_fields import sample_fields
from judges_app.mlflow_scorers import as_mlflow_scorer
from judges_app.tracking import load_compiled_judge, log_compiled_judge

sys.path.insert(0, str(Path(__file__).parent))
from mlflow_server import free_port  # noqa: E402
from scripted import scripted_lm  # noqa: E402
from servers import MockOpenAI, completion  # noqa: E402

HUMAN = "HUMAN"


# --- the app that is traced, and its store ---------------------------------------------------------------
@mlflow.trace(span_type=SpanType.RETRIEVER)
def retrieve(question: str) -> list[Document]:
    return [Document(page_content=f"Notes on {question}", metadata={"doc_uri": "notes"})]


@mlflow.trace
def app(question: str, answer: str | None, documents: bool = True) -> str | None:
    if documents:
        retrieve(question)
    return answer


def traced(question: str, answer: str | None, *, expected: str | None = None, feedback=None, name: str = "good",
           rationale: str | None = None, source: str = HUMAN, documents: bool = True) -> str:
    """Trace one call of the app (its retriever too unless ``documents=False``), then log its expectation and
    a person's feedback with MLflow's API."""
    app(question, answer, documents)
    trace_id = mlflow.get_last_active_trace_id()
    if expected is not None:
        mlflow.log_expectation(trace_id=trace_id, name="expected_response", value=expected)
    if feedback is not None:
        mlflow.log_feedback(trace_id=trace_id, name=name, value=feedback, rationale=rationale,
                            source=AssessmentSource(source_type=source, source_id="ana"))
    return trace_id


@pytest.fixture
def store(mlflow_store, monkeypatch):
    uri = f"sqlite:///{mlflow_store}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    yield uri
    mlflow.set_tracking_uri(None)


def experiment(name: str) -> str:
    return mlflow.set_experiment(name).experiment_id


def all_traces(name: str):
    return mlflow.search_traces(locations=[mlflow.get_experiment_by_name(name).experiment_id], return_type="list")


def verdict_lm():
    """AspectCritic's verdict: "good" in the last response shown (demos or not)."""

    def respond(prompt):
        responses = re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt)
        return {"reason": "scripted", "verdict": str("good" in responses[-1])}

    return scripted_lm(respond)


def yes_lm():
    """Says yes to everything unless the prompt carries demos; then it reads "good" in the response."""

    def respond(prompt):
        responses = [r for r in re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt) if r != "{response}"]
        return {"reason": "scripted", "verdict": str(("good" in responses[-1]) if len(responses) > 1 else True)}

    return scripted_lm(respond)


def critic(lm=None):
    return AspectCritic(name="good", definition="Does the response say the item is good?", lm=lm)


def labelled_items(n: int):
    """(question, answer, label): even items bad, odd good."""
    return [(f"item {i}?", f"item {i} is {'good' if i % 2 else 'bad'}", i % 2) for i in range(n)]


# --- MLflow's fields as our samples ------------------------------------------------------------------------
def test_sample_fields_read_mlflow_shapes():
    assert sample_fields("Why?", "Because.") == {"user_input": "Why?", "response": "Because."}
    messages = {"messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                             {"role": "user", "content": "last"}]}
    choices = {"choices": [{"message": {"role": "assistant", "content": "Paris"}}]}
    assert sample_fields(messages, choices) == {"user_input": "last", "response": "Paris"}
    got = sample_fields({"query": "q"}, {"answer": "a"}, {"expected_facts": ["f1", "f2"],
                                                          "retrieved_context": [{"page_content": "doc"}]})
    assert got == {"user_input": "q", "response": "a", "reference": "f1; f2", "retrieved_contexts": ["doc"]}
    assert sample_fields({"other": 1}, {"nothing": "here"}) == {}
    assert sample_fields(None, "x", {"expected_response": "x", "expected_facts": ["ignored"]})["reference"] == "x"


# --- scorers ---------------------------------------------------------------------------------------------
def fitted_compiled(lm) -> CompiledJudge:
    """An AspectCritic with a Platt calibrator fitted on its own 0/1 scores."""
    calibrator = Calibrator("platt", binary=True).fit([0, 0, 1, 1, 0, 1], [0, 0, 1, 1, 1, 1])
    return CompiledJudge(critic(lm), calibrator)


def test_scorer_feedback_metadata_and_missing_fields(tmp_path):
    exact = as_mlflow_scorer(ExactMatch())
    fb = exact.run(inputs={"question": "q"}, outputs={"response": "Paris"}, expectations={"expected_response": "Paris"})
    assert fb.name == "exact" and fb.value == 1.0 and fb.rationale == "exact_match = 1.000"
    missing = exact.run(inputs={"question": "q"}, outputs="Paris")
    assert missing.value is None and "reference" in missing.error.error_message
    assert missing.error.error_code == "MISSING_FIELD"

    lm = verdict_lm()
    compiled = fitted_compiled(lm)
    scorer = as_mlflow_scorer(compiled)
    fb = scorer.run(inputs="Is it?", outputs="the item is good")
    calibrated = compiled.score({"user_input": "Is it?", "response": "the item is good"}).score
    assert float(fb.metadata["raw_value"]) == calibrated and fb.value == round(calibrated, 3)
    assert 0 < fb.value < 1 and fb.rationale.startswith(f"good = {calibrated:.2f}, calibrated (platt on judge score)")
    assert "from the judge's own score 1.00. The judge: good: yes" in fb.rationale  # what decided the score
    assert fb.metadata["checksum"] == compiled.to_dict()["checksum"] == scorer.metric_spec["checksum"]
    assert fb.metadata["judge_lm"] == "scripted/test" and float(fb.metadata["raw_score"]) == 1.0
    assert float(fb.metadata["calibrated_probability"]) == calibrated
    calls = lm.engine.calls
    empty = scorer.run(inputs="Is it?", outputs="")  # an empty answer is a bad one: the floor, and why
    floor = float(compiled.calibrator.predict([0.0])[0])
    assert float(empty.metadata["raw_value"]) == pytest.approx(floor) and empty.value == round(floor, 3)
    assert "the response is empty" in empty.metadata["undefined_reason"] and float(empty.metadata["raw_score"]) == 0
    assert lm.engine.calls == calls  # no LM call for it
    absent = scorer.run(inputs="Is it?", outputs={"unknown": "shape"})
    assert absent.error.error_code == "MISSING_FIELD" and "field 'response'" in absent.error.error_message
    from_file = as_mlflow_scorer(compiled.save(tmp_path / "compiled.json"), lm=lm)
    assert from_file.run(outputs="the item is bad").metadata["raw_value"] == \
        scorer.run(outputs="the item is bad").metadata["raw_value"]
    with pytest.raises(ValueError, match="neither a compiled judge file nor a model URI"):
        as_mlflow_scorer(str(tmp_path / "nope.json"))
    with pytest.raises(TypeError, match="got int"):
        as_mlflow_scorer(3)


def test_evaluate_runs_our_scorers_beside_a_builtin_in_one_run(store):
    experiment("evaluate")
    traced("capital of France?", "Paris", expected="Paris")
    traced("capital of Italy?", "Milan", expected="Rome")
    no_reference = traced("capital of Spain?", "Madrid")
    scorers = [as_mlflow_scorer(ExactMatch()), as_mlflow_scorer(critic(verdict_lm())),
               ResponseLength(max_length=100)]
    result = mlflow.genai.evaluate(data=all_traces("evaluate"), scorers=scorers)
    frame = result.result_df.set_index("trace_id")
    assert frame.loc[no_reference, "response_length/value"] == "yes"  # the built-in scored every row
    exact = frame["exact/value"].drop(no_reference).sort_values().tolist()
    assert exact == [0.0, 1.0] and frame["good/value"].tolist() == [0.0, 0.0, 0.0]
    assert result.metrics["exact/mean"] == 0.5 and "response_length/mean" in result.metrics
    logged = mlflow.get_trace(no_reference).info.assessments
    error = next(a for a in logged if a.name == "exact")
    assert error.value is None and "field 'reference'" in error.error.error_message
    assert {a.name for a in logged} >= {"exact", "good", "response_length"}
    scored = next(a for a in mlflow.get_trace(frame.index[0]).info.assessments if a.name == "good")
    assert scored.metadata["judge_lm"] == "scripted/test" and scored.rationale.startswith("good: no")
    assert scored.metadata["mlflow.assessment.scorerDigest"].startswith("sha256:")  # MLflow hashed its definition


# --- labels from MLflow ------------------------------------------------------------------------------------
def test_labels_from_mlflow_reads_the_latest_human_feedback_and_counts_what_it_skips(store):
    experiment("labels")
    ids = [traced("q0", "a0", feedback=True, rationale="right"), traced("q1", "a1", feedback="Fail"),
           traced("q2", "a2", feedback=1), traced("q3", "a3", feedback="pass", source="LLM_JUDGE")]
    no_output = traced("q4", None, feedback=True)
    mlflow.log_feedback(trace_id=ids[0], name="good", value="no", source=AssessmentSource(HUMAN, "bo"))  # later
    data, report = labels_from_mlflow("labels", assessment="good")
    by_trace = {m["trace_id"]: (label, data.rationale(i)) for i, (label, m) in enumerate(zip(data.labels, data.meta))}
    assert by_trace == {ids[0]: (0, None), ids[1]: (0, None), ids[2]: (1, None)}
    contexts = {m["trace_id"]: s.retrieved_contexts for s, m in zip(data.dataset, data.meta)}
    assert contexts == {ids[0]: ["Notes on q0"], ids[1]: ["Notes on q1"], ids[2]: ["Notes on q2"]}
    assert report.traces == 5 and report.labelled == 3
    assert report.without_feedback == [ids[3]] and report.skipped == {"no response": [no_output]}
    assert "1 skipped: no response" in report.summary()
    only, _ = labels_from_mlflow("labels", assessment="good", filter_string=f"trace.request_id = '{ids[2]}'")
    assert len(only) == 1 and only.labels == [1]


def test_labels_from_mlflow_errors_name_the_trace_the_value_or_the_address(store):
    experiment("bad")
    traced("q0", "a0", feedback=True)
    odd = traced("q1", "a1", feedback="maybe")
    with pytest.raises(MlflowSourceError, match=f"trace {odd}: human feedback value 'maybe'"):
        labels_from_mlflow("bad", assessment="good")
    experiment("numbers")
    three = traced("q", "a", feedback=3)
    with pytest.raises(MlflowSourceError, match=f"trace {three}: label 3 is not 0 or 1"):
        labels_from_mlflow("numbers", assessment="good")
    with pytest.raises(MlflowSourceError, match="no active MLflow experiment 'nope'"):
        labels_from_mlflow("nope", assessment="good")
    with pytest.raises(MlflowSourceError, match="no trace has usable human feedback"):
        labels_from_mlflow("bad", assessment="absent")
    start = time.monotonic()
    with pytest.raises(MlflowSourceError, match="does not answer"):
        labels_from_mlflow("bad", assessment="good", tracking_uri=f"http://127.0.0.1:{free_port()}")
    assert time.monotonic() - start < 10


# --- the CLI: calibrate --from-mlflow, label --to-mlflow -----------------------------------------------------
def test_calibrate_from_mlflow_then_log_and_score_again(store, tmp_path, capsys):
    experiment("app")
    for question, answer, label in labelled_items(20):  # no documents: no context baselines (embedder, verifier)
        traced(question, answer, feedback=bool(label), documents=False)
    traced("no answer?", None, feedback=True, documents=False)
    out = tmp_path / "runs" / "calibrate" / "mlflow-app-good-good"  # the default --out, as the README says
    argv = ["calibrate", "--from-mlflow", "app", "--assessment", "good", "--judge", "aspect_critic",
            "--judge-params", '{"name": "good", "definition": "Does the response say the item is good?"}',
            "--optimizer", "labeled", "--calibrator", "platt", "--n-train", "8", "--n-test", "12",
            "--max-demos", "2", "--n-bootstrap", "50", "--no-report", "--no-mlflow",
            "--runs-dir", str(tmp_path / "runs")]
    with dspy.context(lm=yes_lm()):
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "21 traces read, 20 labelled; 0 without the feedback; 1 skipped: no response" in printed
    compiled = CompiledJudge.load(out / "compiled_good_labeled.json", lm=yes_lm())
    with mlflow.start_run():
        model_uri = log_compiled_judge(compiled, name="good_judge").model_uri
    scorer = as_mlflow_scorer(model_uri, lm=yes_lm())
    traces = all_traces("app")[:6]
    result = mlflow.genai.evaluate(data=traces, scorers=[scorer])
    scores = result.result_df.set_index("trace_id")["good_cal/value"]  # beside the people's "good"
    answers = {t.info.trace_id: root(t).outputs for t in traces}
    assert [t for t, answer in answers.items() if answer is None] == scores[scores.isna()].index.tolist() != []
    good = [scores[t] for t, answer in answers.items() if answer and "good" in answer]
    bad = [scores[t] for t, answer in answers.items() if answer and "bad" in answer]
    assert good and bad and min(good) > max(bad)  # the compiled judge's demos taught it


def test_calibrate_from_mlflow_calibrates_the_verifier_judge_on_a_split_that_fits_what_it_found(store, tmp_path,
                                                                                                 capsys):
    """A judge without an LM step calibrates from MLflow too (optimizer none by default), and with no --n-train /
    --n-test the split takes what was found: 21 labelled traces, 14 to train and 7 to test."""
    experiment("grounded")
    for question, answer, label in labelled_items(21):
        traced(question, answer, feedback=bool(label))
    out = tmp_path / "cal"
    assert main(["calibrate", "--from-mlflow", "grounded", "--assessment", "good", "--judge",
                 "faithfulness_with_verifier", "--calibrator", "platt", "--n-bootstrap", "50", "--no-report",
                 "--no-mlflow", "--out", str(out), "--runs-dir", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    assert "train 14, test 7 (held out); judge faithfulness_with_verifier (no LM); optimizers ['none']" in printed
    assert (out / "compiled_faithfulness_with_verifier_none.json").is_file()


def test_calibrate_from_mlflow_errors_exit_2_and_write_nothing(store, tmp_path, capsys, monkeypatch):
    experiment("wrong")
    for question, answer, label in labelled_items(6):
        traced(question, answer, feedback={"score": label})
    out = tmp_path / "cal"
    base = ["--assessment", "good", "--judge", "aspect_critic", "--judge-params",
            '{"name": "good", "definition": "good?"}', "--out", str(out), "--runs-dir", str(tmp_path / "runs")]
    assert main(["calibrate", "--from-mlflow", "wrong", *base]) == 2
    assert "is not a binary label" in capsys.readouterr().err
    assert main(["calibrate", "--from-mlflow", "missing", *base]) == 2
    assert "no active MLflow experiment 'missing'" in capsys.readouterr().err
    assert main(["calibrate", "--from-mlflow", "wrong", *base[2:]]) == 2
    assert "needs --assessment" in capsys.readouterr().err
    assert main(["calibrate", *base[2:]]) == 2
    assert "or --from-mlflow EXPERIMENT" in capsys.readouterr().err
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    start = time.monotonic()
    assert main(["calibrate", "--from-mlflow", "wrong", *base]) == 2
    assert "does not answer" in capsys.readouterr().err and time.monotonic() - start < 10
    assert not out.exists() and not (tmp_path / "runs" / "calibrate").exists()


def test_label_writes_each_label_back_to_its_trace(store, tmp_path, monkeypatch, capsys):
    experiment("pool")
    ids = [traced(f"q{i}", f"answer {i}", expected="answer 0") for i in range(3)]
    traced("q?", None)
    pool, out = tmp_path / "pool.jsonl", tmp_path / "labels.jsonl"
    report = export_pool("pool", pool, required_fields=("response", "reference"))
    assert report.pooled == 3 and report.labelled == 0 and report.n_skipped == 1
    assert report.summary().startswith("4 traces read, 3 written to the pool;") and "labelled" not in report.summary()
    answers = iter(["1", "looks right", "0", "", "q"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    argv = ["label", str(pool), "--judge", "exact_match", "--budget", "3", "--out", str(out), "--diversity", "0",
            "--to-mlflow", "--labeller", "ana", "--runs-dir", str(tmp_path / "runs")]
    assert main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["label"] for r in rows] == [1, 0] and "trace_id" not in rows[0]  # calibrate reads the file as is
    # people's labels go by human_<judge>, never the judge's own column, and as booleans (MLflow's own UI's way)
    data, skipped = labels_from_mlflow("pool", assessment="human_exact_match",
                                       required_fields=("response", "reference"))
    assert sorted(zip(data.dataset.to_list(), data.labels), key=str) == sorted(
        [({k: v for k, v in r.items() if k not in ("label", "rationale")}, r["label"]) for r in rows], key=str)
    assessments = [a for t in ids for a in mlflow.get_trace(t).info.assessments]
    feedback = [a for a in assessments if a.name == "human_exact_match"]
    assert not [a for a in assessments if a.name in ("exact", "exact_match")]
    assert {(a.source.source_type, a.source.source_id) for a in feedback} == {(HUMAN, "ana")}
    assert sorted(a.value for a in feedback) == [False, True]
    assert "looks right" in {a.rationale for a in feedback} and len(skipped.without_feedback) == 2
    capsys.readouterr()
    for taken in ("exact_match", "exact", "exact_cal", "faithfulness", "faith_vrf_cal"):
        assert main([*argv, "--out", str(tmp_path / "l0.jsonl"), "--assessment", taken]) == 2
        assert "is a name our judges write their values under" in capsys.readouterr().err
    assert not (tmp_path / "l0.jsonl").exists()
    assert main([*argv[:8], "--to-mlflow"]) == 2
    assert "needs --labeller" in capsys.readouterr().err
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"response": "a", "reference": "a"}) + "\n")
    assert main(["label", str(plain), "--judge", "exact_match", "--budget", "1", "--out", str(tmp_path / "l2.jsonl"),
                 "--to-mlflow", "--labeller", "ana"]) == 2
    assert "has no 'trace_id'" in capsys.readouterr().err and not (tmp_path / "l2.jsonl").exists()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    elsewhere = tmp_path / "l3.jsonl"
    assert main([*argv[:7], str(elsewhere), *argv[8:]]) == 2
    assert "does not answer" in capsys.readouterr().err and not elsewhere.exists()


# --- an MLflow judge aligned with our method, beside MLflow's default (MemAlign) ----------------------------------
class JudgeMock(MockOpenAI):
    """The OpenAI-compatible mock answering MLflow's judge like ``yes_lm``: yes to everything, unless the prompt
    shows example judgements (MemAlign's memory), then "good" in the output shown; guideline distillation gets
    no guidelines; embeddings are the mock's hash vectors."""

    class handler(MockOpenAI.handler):
        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path.rstrip("/").endswith("/embeddings"):
                return self._embeddings(self.server.owner, request)
            prompt = "\n".join(str(m.get("content") or "") for m in request.get("messages", []))
            if "distill a set of guidelines" in prompt:
                text = json.dumps({"guidelines": []})
            else:  # the judge's own call: {result, rationale}
                shown = re.findall(r'outputs: "(.*)"', prompt)[-1]
                result = ("good" in shown) if "Example Judgements" in prompt else True
                text = json.dumps({"result": result, "rationale": "scripted"})
            self._send(200, json.dumps(completion("mock", text, len(prompt.split()))).encode())


def good_judge_on(mock, monkeypatch):
    """MLflow's ``make_judge`` "good" on the model ``openai:/mock``, with OpenAI's settings pointing at ``mock``."""
    for variable in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.setenv(variable, mock.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    return make_judge(name="good", instructions="Does {{ outputs }} say the item is good?", feedback_value_type=bool,
                      model="openai:/mock")


def root(trace):
    return next(span for span in trace.data.spans if span.parent_id is None)


def agreement(judge, traces) -> float:
    """Mean 1 - |score - label| of ``judge`` on ``traces`` (label: "good" in the answer, as people said)."""
    scores = [float(judge(inputs=root(t).inputs, outputs=root(t).outputs).value) for t in traces]
    return float(np.mean([1 - abs(s - ("good" in root(t).outputs)) for s, t in zip(scores, traces)]))


def test_mlflow_judge_aligned_with_our_method_and_with_memalign(store, monkeypatch):
    experiment("align")
    for question, answer, label in labelled_items(20):
        traced(question, answer, feedback="yes" if label else "no", documents=False)
    traces = sorted(all_traces("align"), key=lambda t: root(t).inputs["question"])
    train, test = [t for i, t in enumerate(traces) if i % 5], traces[::5]  # 16 to align on, 4 held out
    with JudgeMock(latency=0) as mock:
        judge = good_judge_on(mock, monkeypatch)
        ours = judge.align(train, optimizer=DspyJudgesAligner(lm=yes_lm(), optimizer="labeled", calibrator="platt",
                                                              max_demos=2))
        memalign = judge.align(train, optimizer=MemAlignOptimizer(reflection_lm="openai:/mock",
                                                                  embedding_model="openai:/mock", embedding_dim=16))
        numbers = {"mlflow judge, not aligned": agreement(judge, test), "dspy-judges (labeled + platt)":
                   agreement(ours, test), "MLflow default (MemAlign)": agreement(memalign, test)}
        assert isinstance(memalign(outputs="item 3 is good").value, bool)
    print("agreement with people on 4 held-out traces: " + "; ".join(f"{k} {v:.3f}" for k, v in numbers.items()))
    assert isinstance(ours, CalibratedMlflowJudge) and ours.name == "good_aln" and memalign.name == "good"
    assert ours.compiled.report["optimizer"] == "labeled" and ours.alignment_report.labelled == 16
    assert isinstance(ours(outputs="item 3 is good").value, float)  # our judge needs no MLflow model
    mlflow.genai.evaluate(data=test, scorers=[ours])  # its column is its own; the people's "good" stays theirs
    logged = [a for a in mlflow.get_trace(test[0].info.trace_id).info.assessments if a.name.startswith("good")]
    assert sorted((a.name, a.source.source_type) for a in logged) == [("good", HUMAN), ("good_aln", "LLM_JUDGE")]
    assert numbers["mlflow judge, not aligned"] == 0.5  # yes to all; 2 of the 4 held-out items are bad
    assert all(0 <= v <= 1 for v in numbers.values())
    # the aligned judges learnt from the labels (the scripted LM reads its demos): both above the unaligned 0.5
    assert numbers["dspy-judges (labeled + platt)"] > 0.5 and numbers["MLflow default (MemAlign)"] > 0.5


# --- a real tracking server (the session's, tests/conftest.py) ------------------------------------------------
@pytest.mark.xdist_group("mlflow_server")
def test_scores_and_labels_on_a_tracking_server(mlflow_server, monkeypatch):
    url = mlflow_server.url
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    mlflow.set_tracking_uri(url)
    try:
        experiment("served")
        ids = [traced(f"q{i}", f"a{i}", expected="a0", feedback=bool(i % 2)) for i in range(4)]
        result = mlflow.genai.evaluate(data=all_traces("served"), scorers=[as_mlflow_scorer(ExactMatch())])
        assert sorted(result.result_df["exact/value"]) == [0.0, 0.0, 0.0, 1.0]
        data, report = labels_from_mlflow("served", assessment="good", tracking_uri=url,
                                          required_fields=("response", "reference"))
        assert dict(zip((m["trace_id"] for m in data.meta), data.labels)) == {t: i % 2 for i, t in enumerate(ids)}
        assert data.source == url and report.n_skipped == 0
    finally:
        mlflow.set_tracking_uri(None)


# --- MLflow without surprises: names, rationales, a dead server, no judge traces, rounding, one embedder load ---
def test_feedback_names_are_distinct_and_their_source_names_the_judge_and_its_model(store, tmp_path):
    experiment("names")
    trace_id = traced("Is it?", "the item is good", expected="the item is good", feedback=True, name="approved")
    lm = verdict_lm()
    compiled = fitted_compiled(lm)
    scorers = [as_mlflow_scorer(critic(lm)), as_mlflow_scorer(compiled),
               as_mlflow_scorer(compiled.save(tmp_path / "compiled.json"), lm=lm, name="mine"),
               as_mlflow_scorer(CompiledJudge(critic(lm))), as_mlflow_scorer(ExactMatch())]
    assert [s.name for s in scorers] == ["good", "good_cal", "mine", "good_opt", "exact"]
    result = mlflow.genai.evaluate(data=all_traces("names"), scorers=scorers)
    assert {f"{s.name}/value" for s in scorers} <= set(result.result_df.columns)
    sources = {a.name: (a.source.source_type, a.source.source_id) for a in mlflow.get_trace(trace_id).info.assessments
               if a.name != "expected_response"}
    # as MLflow's own judges: the model URI for an LLM judge, the name for code; the judge in metadata
    assert sources == {"approved": (HUMAN, "ana"), "good": ("LLM_JUDGE", "scripted:/test"),
                       "good_cal": ("LLM_JUDGE", "scripted:/test"), "mine": ("LLM_JUDGE", "scripted:/test"),
                       "good_opt": ("LLM_JUDGE", "scripted:/test"), "exact": ("CODE", "exact")}
    judges = {a.name: a.metadata.get("judge") for a in mlflow.get_trace(trace_id).info.assessments
              if a.source.source_type != HUMAN and a.name != "expected_response"}
    assert judges == {"good": "good", "good_cal": "good", "mine": "good", "good_opt": "good",
                      "exact": "exact_match"}
    missing = scorers[1].run(outputs={"unknown": "shape"})  # an error Feedback says where it came from too
    assert missing.error is not None and missing.source.source_id == "scripted:/test"
    aligned = CalibratedMlflowJudge(compiled)
    fb = aligned(outputs="the item is good")
    assert aligned.name == fb.name == "good_aln" and fb.source.source_id == "scripted:/test"
    with pytest.raises(ValueError, match="feedback name 'good' is the name of the human label \\(assessment 'good'\\)"):
        CalibratedMlflowJudge(compiled, name="good", assessment="good")
    judge = make_judge(name="good", instructions="Does {{ outputs }} say the item is good?", feedback_value_type=bool,
                       model="openai:/unused")
    with pytest.raises(ValueError, match="feedback name 'good' is the name of the human label"):
        judge.align([], optimizer=DspyJudgesAligner(lm=lm, name="good"))  # refused before any trace is read


def test_a_calibrated_judges_rationale_reads_its_raw_result_and_names_the_calibrator():
    lm = scripted_lm(lambda prompt: {"reason": "scripted", "verdict": "False"})  # the judge says no
    calibrator = Calibrator("platt", binary=True).fit([0, 0, 1, 1, 0, 1], [0, 1, 1, 1, 0, 1])  # a "no" is ~0.5
    compiled = CompiledJudge(critic(lm), calibrator)
    fb = as_mlflow_scorer(compiled).run(inputs="Is it?", outputs="the item is bad")
    value = float(fb.metadata["raw_value"])
    assert 0.3 < value < 0.7 and float(fb.metadata["raw_score"]) == 0.0
    assert fb.rationale == (f"good = {value:.2f}, calibrated (platt on judge score) from the judge's own score 0.00. "
                            "The judge: good: no (0/1 votes); scripted")  # not "good: yes (0/1 votes)"
    assert CalibratedMlflowJudge(compiled)(inputs="Is it?", outputs="the item is bad").rationale == fb.rationale
    empty = as_mlflow_scorer(compiled).run(inputs="Is it?", outputs="")
    assert empty.rationale == (f"good = {float(empty.metadata['raw_value']):.2f}, calibrated (platt on judge score) "
                               "from the judge's own score 0.00. The judge: good = 0.00 (the response is empty: "
                               "nothing to judge; scored the floor without an LM call)")


def test_a_model_uri_on_a_server_that_is_down_fails_at_once_naming_it(monkeypatch, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", dead)
    for uri in ("models:/good_judge/1", "runs:/0123456789abcdef/good_judge"):
        start = time.monotonic()
        with pytest.raises(MlflowSourceError, match=f"cannot load {re.escape(uri)}: the MLflow tracking server "
                                                    f"{re.escape(dead)} does not answer"):
            as_mlflow_scorer(uri, lm=yes_lm())
        assert time.monotonic() - start < 10  # MLflow's own retries would take minutes
        start = time.monotonic()
        with pytest.raises(MlflowSourceError, match=f"the MLflow tracking server {re.escape(dead)} does not answer"):
            load_compiled_judge(uri, lm=yes_lm())  # the same check, wherever MLflow is pointed at a store
        assert time.monotonic() - start < 10
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///" + str(tmp_path / "m.db"))
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", dead)
    with pytest.raises(MlflowSourceError, match=f"{re.escape(dead)} does not answer"):
        load_compiled_judge("models:/good_judge/1")


@pytest.fixture
def dspy_autolog():
    """DSPy autologging on (as a user's app may have it), off afterwards with DSPy's usage tracking restored."""
    usage = dspy.settings.track_usage
    mlflow.dspy.autolog(silent=True)
    yield
    mlflow.dspy.autolog(disable=True, silent=True)
    dspy.settings.configure(track_usage=usage)


def test_judge_calls_never_become_the_apps_traces(store, monkeypatch, dspy_autolog):
    experiment("traced-app")
    for i in range(3):
        traced(f"q{i}", f"item {i} is good", documents=False)
    # MLflow deletes stray traces after an evaluate: keep them, to see what the scorers themselves wrote
    monkeypatch.setattr("mlflow.genai.evaluation.harness.clean_up_extra_traces", lambda *args, **kwargs: None)
    lm = verdict_lm()
    compiled = fitted_compiled(lm)
    result = mlflow.genai.evaluate(data=all_traces("traced-app"), scorers=[as_mlflow_scorer(critic(lm)),
                                                                          as_mlflow_scorer(compiled)])
    assert result.result_df["good/value"].tolist() == [1.0, 1.0, 1.0]
    as_mlflow_scorer(critic(lm)).run(inputs="q", outputs="the item is good")  # outside evaluate too
    CalibratedMlflowJudge(compiled)(outputs="the item is good")
    assert lm.engine.calls == 8  # the judges judged
    app("q3", "item 3 is good", False)  # and the app is still traced afterwards
    traces = all_traces("traced-app")
    assert len(traces) == 4 and {root(t).name for t in traces} == {"app"}


def test_labels_and_pools_skip_a_judges_own_traces(store, tmp_path, dspy_autolog):
    experiment("mixed")
    ids = [traced(f"q{i}", f"item {i} is good", feedback=bool(i)) for i in range(2)]
    critic(verdict_lm()).score({"user_input": "q", "response": "the item is good"})  # a bare judge call: traced
    judged = next(t for t in all_traces("mixed") if t.info.trace_id not in ids)
    assert root(judged).name == "AspectCritic.forward"
    scorer_trace = traced("q2", "item 2 is good", feedback=True)
    mlflow.set_trace_tag(scorer_trace, "mlflow.trace.sourceScorer", "good")  # MLflow's mark of a scorer's trace
    data, report = labels_from_mlflow("mixed", assessment="good")
    skipped = sorted([judged.info.trace_id, scorer_trace])
    assert report.traces == 4 and report.without_feedback == []
    assert sorted(m["trace_id"] for m in data.meta) == sorted(ids)
    assert {reason: sorted(found) for reason, found in report.skipped.items()} == {JUDGE_TRACE: skipped}
    pool = export_pool("mixed", tmp_path / "pool.jsonl")
    assert pool.pooled == 2 and {reason: sorted(found) for reason, found in pool.skipped.items()} == {
        JUDGE_TRACE: skipped}


def test_feedback_values_are_rounded_and_the_exact_value_kept_in_metadata(store):
    experiment("rounded")
    trace_id = traced("capital?", "Paris", expected="Paris, France")
    metric = NonLLMStringSimilarity()
    exact = metric.score({"response": "Paris", "reference": "Paris, France"}).score
    assert exact != round(exact, 3)
    result = mlflow.genai.evaluate(data=all_traces("rounded"), scorers=[as_mlflow_scorer(metric)])
    assert result.result_df["nollm_sim/value"].tolist() == [round(exact, 3)]
    logged = next(a for a in mlflow.get_trace(trace_id).info.assessments if a.name == "nollm_sim")
    assert logged.value == round(exact, 3) and float(logged.metadata["raw_value"]) == exact
    assert float(logged.metadata["raw_score"]) == exact  # the metric's own score: nothing calibrated it


class CountingSentenceTransformer:
    """A stand-in sentence-transformers model that counts how often it is built (slowly, as the real one is)
    and embeds by hashing words."""

    built = 0

    def __init__(self, path, device=None):
        type(self).built += 1
        time.sleep(0.5)

    def encode(self, texts, output_value=None, **kwargs):
        rows = [texts] if isinstance(texts, str) else texts
        words = [["[CLS]", *text.split(), "[SEP]"] for text in rows]
        tokens = [np.eye(16, dtype=np.float32)[[sum(map(ord, w)) % 16 for w in each]] for each in words]
        if output_value == "token_embeddings":
            return tokens[0] if isinstance(texts, str) else tokens
        return np.stack([t[1:-1].sum(axis=0) for t in tokens])


def test_a_calibrated_judge_loads_the_embedder_once_in_an_evaluate(store, monkeypatch):
    experiment("embedded")
    for i in range(6):
        traced(f"item {i}?", f"item {i} is good")
    stand_in = types.ModuleType("sentence_transformers")
    stand_in.SentenceTransformer = CountingSentenceTransformer
    monkeypatch.setitem(sys.modules, "sentence_transformers", stand_in)
    monkeypatch.setattr(CountingSentenceTransformer, "built", 0)
    calibrator = Calibrator.from_dict({"kind": "stacked", "binary": True, "features": ["embedding_similarity"],
                                       "params": {"mean": [0.5, 0.5], "scale": [0.5, 0.5], "coef": [1.0, 1.0],
                                                  "intercept": -1.0}})
    compiled = CompiledJudge(critic(verdict_lm()), calibrator)
    monkeypatch.setattr(embeddings, "_onnx_runner", lambda path, batch_size: None)  # the sentence-transformers path
    loaded = (embeddings._load_sentence_transformer, embeddings._folder_embedder)
    for cache in loaded:
        cache.cache_clear()  # no model loaded yet in this process
    try:
        result = mlflow.genai.evaluate(data=all_traces("embedded"), scorers=[as_mlflow_scorer(compiled)])
    finally:
        for cache in loaded:
            cache.cache_clear()  # the stand-in stays out of later tests
    assert result.result_df["good_cal/value"].notna().all()
    assert CountingSentenceTransformer.built == 1  # rows score in parallel threads; one model for them all


def test_the_aligner_judges_with_the_mlflow_judge_s_model_and_mlflow_model_uris_are_lms(store, monkeypatch):
    """Without ``lm=`` the aligner judges with the MLflow judge's own model (``openai:/mock``, read as LiteLLM's
    ``openai/mock``), as MLflow's aligners do, not with the embedded SmolLM2; an MLflow model URI is an LM."""
    from judges.lm.resolve import resolve_lm
    from judges.lm.served import litellm_model

    assert litellm_model("openai:/gpt-4o-mini") == "openai/gpt-4o-mini" and resolve_lm("openai:/m").model == "openai/m"
    assert litellm_model("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    experiment("align-model")
    for question, answer, label in labelled_items(8):
        traced(question, answer, feedback="yes" if label else "no", documents=False)
    with MockOpenAI(latency=0) as mock:
        judge = good_judge_on(mock, monkeypatch)
        aligned = judge.align(all_traces("align-model"), optimizer=DspyJudgesAligner(optimizer=None,
                                                                                      calibrator="platt"))
    assert aligned.compiled.report["lm"] == "openai/mock"  # (its answers may come from DSPy's disk cache)


def test_a_calibrated_judge_that_dropped_the_judge_s_score_says_so_in_rationale_and_metadata():
    """Two such columns hold cheap signals, not two judges: the rationale and the metadata say it."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 200)
    blind = Calibrator("stacked", binary=True, features=["claim_count"]).fit(
        rng.random(200), labels, (labels + rng.normal(0, 0.1, 200))[:, None])
    assert not blind.use_raw
    lm = scripted_lm(lambda prompt: {"reason": "scripted", "verdict": "True"})
    fb = as_mlflow_scorer(CompiledJudge(critic(lm), blind)).run(inputs="Is it?", outputs="the item is good")
    assert fb.metadata["judge_score_used"] == "false" and fb.metadata["calibrator"] == "stacked on claim_count"
    assert "from cheap signals only (claim_count; stacked on claim_count)" in fb.rationale
    assert "does not use the judge's own score" in fb.rationale and "from the judge's own score" not in fb.rationale
    kept = as_mlflow_scorer(CompiledJudge(critic(lm), Calibrator("platt", binary=True).fit(
        [0, 0, 1, 1, 0, 1], [0, 1, 1, 1, 0, 1]))).run(inputs="Is it?", outputs="the item is good")
    assert kept.metadata["judge_score_used"] == "true"


def test_feedback_names_are_short_and_distinct():
    """Every catalogue name's raw, calibrated, optimised and aligned Feedback names are distinct, their stems at
    most ``STEM_CHARS`` long (tests/test_mlflow_ui.py renders them in MLflow's UI); a long name of one's own is cut."""
    from judges.metrics.catalogue import metric_classes
    from judges_app.mlflow_scorers import ALIGNED, CALIBRATED, COMPILED, FEEDBACK_NAMES, STEM_CHARS, short_name

    catalogue = sorted(metric_classes())
    names = [short_name(n, mark) for n in catalogue for mark in ("", CALIBRATED, COMPILED, ALIGNED)]
    assert len(set(names)) == len(names) == 4 * len(catalogue)
    assert max(len(short_name(n)) for n in catalogue) <= STEM_CHARS
    assert set(FEEDBACK_NAMES) <= set(catalogue)  # no entry for a judge that is not there
    assert short_name("faithfulness_with_verifier") == "faith_vrf"
    assert short_name("faithfulness_with_verifier", CALIBRATED) == "faith_vrf_cal"
    assert short_name("is_the_answer_polite_enough", CALIBRATED) == "is_the_ans_cal"


def test_threshold_gives_pass_fail_feedback_aggregations_pass_and_register_says_what_works(store, tmp_path,
                                                                                          monkeypatch):
    experiment("pass-fail")
    for i in range(4):
        traced(f"q{i}", f"a{i}", expected="a0" if i else "a0")
    scorer = as_mlflow_scorer(ExactMatch(), threshold=0.5, aggregations=["mean"])
    fb = scorer.run(inputs={"question": "q"}, outputs="a0", expectations={"expected_response": "a0"})
    assert fb.value == "yes" and fb.metadata["score"] == "1.0" and fb.metadata["threshold"] == "0.5"
    result = mlflow.genai.evaluate(data=all_traces("pass-fail"), scorers=[scorer])
    assert sorted(result.result_df["exact/value"]) == ["no", "no", "no", "yes"]
    assert any(key.startswith("exact/") for key in result.metrics)
    with pytest.raises(ValueError, match=r"threshold must be a number in \[0, 1\]"):
        as_mlflow_scorer(ExactMatch(), threshold=2)
    with pytest.raises(TypeError, match="Register a @scorer function that builds this scorer"):
        scorer.register(name="exact_match")
    # the documented recipe: a @scorer function that builds our scorer in its body, registered and loaded back
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS", "true")
    from mlflow.genai.scorers import get_scorer

    from monitoring_scorer import exact_match_monitor

    exact_match_monitor.register(name="exact_match_monitor")
    loaded = get_scorer(name="exact_match_monitor")
    assert loaded(inputs={"question": "q"}, outputs="a0", expectations={"expected_response": "a0"}).value == "yes"


def test_a_missing_retriever_says_the_two_ways_to_give_the_documents(store):
    fb = as_mlflow_scorer(Faithfulness(lm=yes_lm())).run(inputs={"question": "q"}, outputs="an answer")
    assert fb.error.error_code == "MISSING_FIELD"
    assert 'a RETRIEVER span in the trace (@mlflow.trace(span_type="RETRIEVER")' in fb.error.error_message
    assert "expectations['retrieved_context']" in fb.error.error_message
