"""judges_app.tracking: runs, params, metrics, artifacts, DSPy traces and compiled-judge models in MLflow, on a
SQLite store under a temporary folder (one per module: creating the tables takes seconds) and on a real
``mlflow server``. Nothing here writes to the repository's ./runs."""

import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no usage reports from a test run

import mlflow  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from calibration.agreement.stats import AgreementReport  # noqa: E402
from calibration.data.labelled import LabelledSet  # noqa: E402
from calibration.fitting.compiled import CompiledJudge  # noqa: E402
from calibration.fitting.fit import fit  # noqa: E402
from judges import AspectCritic, ExactMatch, SingleTurnSample, evaluate  # noqa: E402
from judges_app.tracking import (  # noqa: E402
    data_hash,
    default_tracking_uri,
    flatten_params,
    load_compiled_judge,
    log_agreement,
    log_compiled_judge,
    log_evaluation,
    metric_key,
    tracked_run,
)

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402

ROWS = [{"response": "a", "reference": "a"}, {"response": "b", "reference": "c"},
        {"response": "same", "reference": "same"}, {"response": "x", "reference": "y"}]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("mlflow_store")


@pytest.fixture(autouse=True)
def clean_mlflow(monkeypatch):
    """No tracking URI from outside; afterwards no run, no autolog, no URI left behind."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.dspy.autolog(disable=True, silent=True)
    mlflow.set_tracking_uri(None)


def client(store) -> mlflow.MlflowClient:
    return mlflow.MlflowClient(default_tracking_uri(store))


def good_lm():
    """Says the response has the aspect when it contains "good"."""
    return scripted_lm(lambda prompt: {"reason": "scripted",
                                       "verdict": str("good" in prompt.split("[[ ## response ## ]]")[-1][:40])})


def test_helpers_keys_params_and_hash(tmp_path, monkeypatch):
    assert metric_key("baseline: token overlap") == "baseline_ token overlap"
    assert metric_key("a//b/../c/") == "a/b/__/c" and metric_key("忠实度.mean") == "忠实度.mean"
    with pytest.raises(ValueError, match="non-empty"):
        metric_key(" ")
    assert flatten_params({"fit": {"optimizer": None, "k": 3, "features": ["a", "b"]}, "x": "y" * 7000}) == {
        "fit.optimizer": "None", "fit.k": "3", "fit.features": '["a", "b"]', "x": "y" * 5997 + "..."}
    samples = [SingleTurnSample(response="a"), {"response": "b"}]
    assert data_hash(samples) == data_hash([{"response": "a"}, {"response": "b"}]) != data_hash(samples[::-1])
    assert len(data_hash(samples)) == 16
    with pytest.raises(TypeError, match="iterable of items"):
        data_hash("abc")
    with pytest.raises(TypeError, match="cannot hash a object"):
        data_hash([object()])
    assert default_tracking_uri(tmp_path / "r") == f"sqlite:///{tmp_path / 'r' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://example:5000")
    assert default_tracking_uri(tmp_path) == "http://example:5000"


def test_tracked_run_on_the_default_sqlite_store(store):
    before = mlflow.get_tracking_uri()
    with tracked_run("unit", "ok", params={"fit": {"optimizer": "bootstrap", "k": 2}, "seed": 0},
                     tags={"stage": "test"}, run_dir=store, autolog=False) as run:
        mlflow.log_metric("accuracy", 0.75)
        mlflow.log_text("hello", "note.txt")
    assert mlflow.get_tracking_uri() == before and "MLFLOW_TRACKING_URI" not in os.environ
    assert (store / "mlflow.db").is_file()
    got = client(store).get_run(run.info.run_id)
    assert got.info.status == "FINISHED" and got.info.run_name == "ok"
    assert got.data.params == {"fit.optimizer": "bootstrap", "fit.k": "2", "seed": "0"}
    assert got.data.metrics == {"accuracy": 0.75} and got.data.tags["stage"] == "test"
    assert got.info.artifact_uri.startswith(str(store / "mlartifacts" / "unit"))  # not ./mlruns
    assert (store / "mlartifacts" / "unit" / run.info.run_id / "artifacts" / "note.txt").is_file()

    with pytest.raises(ZeroDivisionError):
        with tracked_run("unit", "broken", run_dir=store, autolog=False) as failed:
            1 / 0
    assert client(store).get_run(failed.info.run_id).info.status == "FAILED"
    assert mlflow.active_run() is None
    with pytest.raises(ValueError, match="non-empty"):
        with tracked_run("", run_dir=store):
            pass


def test_log_evaluation_of_a_real_evaluate_run(store):
    result = evaluate(ROWS, [ExactMatch()], progress=False)
    with pytest.raises(RuntimeError, match="no active MLflow run"):
        log_evaluation(result)
    with tracked_run("unit", "evaluate", params={"data": data_hash(ROWS)}, run_dir=store, autolog=False) as run:
        log_evaluation(result)
        log_evaluation(result, prefix="again: 2")
    c = client(store)
    metrics = c.get_run(run.info.run_id).data.metrics
    assert metrics["exact_match.mean"] == 0.5 and metrics["exact_match.std"] == 0.5
    assert metrics["exact_match.failures"] == 0 and metrics["failures"] == 0 and metrics["wall_seconds"] > 0
    assert {"exact_match.latency_p50", "exact_match.latency_p95", "samples_per_second"} <= set(metrics)
    assert metrics["again_ 2.exact_match.mean"] == 0.5
    listed = [a.path for a in c.list_artifacts(run.info.run_id, "evaluation")]
    assert listed == ["evaluation/records.jsonl", "evaluation/summary.json"]
    assert [a.path for a in c.list_artifacts(run.info.run_id, "again_2")] == ["again_2/records.jsonl",
                                                                              "again_2/summary.json"]
    text = Path(c.download_artifacts(run.info.run_id, "evaluation/records.jsonl")).read_text()
    assert len(text.splitlines()) == 4 and '"exact_match"' in text


def test_log_agreement_skips_undefined_values(store):
    report = AgreementReport("binary", 4, {"accuracy": {"value": 0.75, "low": 0.5, "high": 1.0},
                                           "roc_auc": {"value": None, "low": None, "high": None},
                                           "pearson": {"value": 0.2, "low": None, "high": 0.9}})
    with tracked_run("unit", "agreement", run_dir=store, autolog=False) as run:
        log_agreement(report, "baseline: token overlap")
        with pytest.raises(TypeError, match="AgreementReport"):
            log_agreement({"accuracy": 1.0}, "x")
    got = client(store).get_run(run.info.run_id).data.metrics
    assert got == {"baseline_ token overlap.n": 4, "baseline_ token overlap.accuracy": 0.75,
                   "baseline_ token overlap.accuracy.ci_low": 0.5, "baseline_ token overlap.accuracy.ci_high": 1.0,
                   "baseline_ token overlap.pearson": 0.2, "baseline_ token overlap.pearson.ci_high": 0.9}
    assert [a.path for a in client(store).list_artifacts(run.info.run_id, "agreement")] == [
        "agreement/baseline_token_overlap.json"]


def test_autolog_records_dspy_traces_of_the_run(store):
    import dspy

    judge = AspectCritic(name="politeness", definition="Is it polite?", lm=good_lm())
    usage_before, callbacks_before = dspy.settings.track_usage, list(dspy.settings.callbacks)
    with tracked_run("traced", "judge", run_dir=store) as run:
        assert judge.score({"response": "a good answer"}).score == 1.0
        evaluate([{"response": "good"}, {"response": "bad"}], [judge], num_threads=2, progress=False)
    assert dspy.settings.track_usage == usage_before and dspy.settings.callbacks == callbacks_before  # undone
    with tracked_run("traced", "judge", run_dir=store):  # search from inside: same store
        traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id,
                                      return_type="list")
    assert len(traces) == 3  # one direct call, two from evaluate's worker threads
    spans = [s.name for s in traces[0].data.spans]
    assert "AspectCritic.forward" in spans and "LM.__call__" in spans
    judge.score({"response": "after the run"})  # autolog is off again: no new trace anywhere
    with tracked_run("traced", "check", run_dir=store, autolog=False):
        assert len(mlflow.search_traces(locations=[run.info.experiment_id], return_type="list")) == 3

    from mlflow.utils.autologging_utils import autologging_is_disabled

    mlflow.dspy.autolog(silent=True)  # switched on by the user: left on
    with tracked_run("traced", "user autolog", run_dir=store) as user_run:
        judge.score({"response": "good"})
    assert not autologging_is_disabled("dspy")
    with tracked_run("traced", "check", run_dir=store, autolog=False):
        assert len(mlflow.search_traces(locations=[run.info.experiment_id], run_id=user_run.info.run_id,
                                        return_type="list")) == 1


def test_compiled_judge_model_round_trip(store, caplog):
    lm = good_lm()
    rows = [{"response": f"item {i}: {'good' if i % 2 else 'bad'}", "label": i % 2} for i in range(8)]
    compiled = fit(AspectCritic(name="good", definition="Is the item good?", lm=lm),
                   LabelledSet.from_records(rows, name="tiny"), optimizer=None, calibrator="platt")
    with pytest.raises(TypeError, match="CompiledJudge"):
        with tracked_run("models", "wrong", run_dir=store, autolog=False):
            log_compiled_judge(compiled.judge)
    with tracked_run("models", "fit", run_dir=store, autolog=False) as run, caplog.at_level(logging.WARNING):
        info = log_compiled_judge(compiled)
    assert "compiled_judge.json" in [a.path for a in client(store).list_artifacts(run.info.run_id)]
    assert "Failed to infer model signature" not in caplog.text  # the judge's fields give it
    inputs = {spec.name: spec.required for spec in info.signature.inputs.inputs}
    assert inputs["response"] and not inputs["user_input"]

    loaded = load_compiled_judge(info.model_uri, lm=lm, run_dir=store)
    assert isinstance(loaded, CompiledJudge) and loaded.to_dict() == compiled.to_dict()
    samples = [{"response": r["response"]} for r in rows[:4]]
    expected = [compiled.score(s).score for s in samples]
    assert [loaded.score(s).score for s in samples] == expected and expected[0] < 0.5 < expected[1]

    mlflow.set_tracking_uri(default_tracking_uri(store))  # as a user with the store configured would
    model = mlflow.pyfunc.load_model(info.model_uri, model_config={"judge_lm": lm})
    assert model.predict(pd.DataFrame(samples)) == pytest.approx(expected)
    assert model.unwrap_python_model().compiled.to_dict() == compiled.to_dict()
    with tracked_run("models", "other", run_dir=store, autolog=False):
        other = mlflow.pyfunc.log_model(name="plain", python_model=Echo(), pip_requirements=[])
    with pytest.raises(ValueError, match="not a compiled judge model"):
        load_compiled_judge(other.model_uri, run_dir=store)


class Echo(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input: pd.DataFrame, params=None):
        return model_input


@pytest.mark.xdist_group("mlflow_server")
def test_tracked_run_against_a_real_tracking_server(mlflow_server, monkeypatch, tmp_path):
    url, folder = mlflow_server.url, mlflow_server.folder  # the session's server (tests/conftest.py)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    result = evaluate(ROWS, [ExactMatch()], progress=False)
    with tracked_run("served-run", "remote", params={"data": {"rows": len(ROWS)}}, run_dir=tmp_path / "unused",
                     autolog=False) as run:
        log_evaluation(result)
    assert os.environ["MLFLOW_TRACKING_URI"] == url and not (tmp_path / "unused" / "mlflow.db").exists()
    remote = mlflow.MlflowClient(tracking_uri=url)
    got = remote.get_run(run.info.run_id)
    assert got.info.status == "FINISHED" and got.data.params == {"data.rows": "4"}
    assert got.data.metrics["exact_match.mean"] == 0.5
    assert got.info.artifact_uri.startswith("mlflow-artifacts:/")
    assert [a.path for a in remote.list_artifacts(run.info.run_id, "evaluation")] == [
        "evaluation/records.jsonl", "evaluation/summary.json"]
    assert list((folder / "artifacts").rglob("records.jsonl"))  # proxied into --artifacts-destination
