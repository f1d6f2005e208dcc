"""evaluate(backend="ray") on a local Ray instance on this machine: 100,000 rows of non-LLM metrics, an LLM
judge through a served endpoint (the concurrency limit holds across workers), resume from a cut run file,
a permanent refusal, and what cannot travel to workers. One Ray instance for the module, stopped at its end."""

import json
import os
import sys
from pathlib import Path

import dspy
import pytest

from judges import (
    AspectCritic,
    EvaluationDataset,
    ExactMatch,
    Faithfulness,
    NonLLMStringSimilarity,
    SingleTurnSample,
    StringPresence,
    evaluate,
)
from judges.lm.served import ServedLM, forget_endpoint_limits
from judges.run.result import RunStopped

sys.path.insert(0, str(Path(__file__).parent))
from servers import FaultProxy, MockOpenAI  # noqa: E402

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray is imported: 127.0.0.1 only
ray = pytest.importorskip("ray")
KEY = "JUDGES_TEST_RAY_KEY"
# One Ray instance for the file: its tests share one test process (pytest-xdist's loadgroup).
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    os.environ[KEY] = "test-key"  # set before the workers start: they read the key from their environment
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def fresh_limits():
    forget_endpoint_limits()
    yield
    forget_endpoint_limits()


def served(url, **kwargs):
    options = dict(api_key_env=KEY, cache=False, backoff=0.01, max_backoff=0.2, request_timeout=10.0)  # outlasts stalls
    return ServedLM("openai/mock", api_base=url + "/v1", **{**options, **kwargs})


def rag_items(n):
    return EvaluationDataset([{"user_input": f"question {i}", "response": f"The answer is {i}. It is blue.",
                               "retrieved_contexts": [f"The answer is {i}."]} for i in range(n)])


def table(result):
    return [(r["sample"], r["metric"], r["score"], r.get("error")) for r in result.records]


def test_a_hundred_thousand_rows_of_non_llm_metrics_give_the_thread_pools_records(tmp_path):
    rows = [SingleTurnSample(response=f"answer {i % 7} of {i % 3}", reference=f"answer {i % 5}")
            for i in range(100_000)]
    metrics = [ExactMatch(), StringPresence(), NonLLMStringSimilarity()]
    run_file = tmp_path / "run.jsonl"
    on_ray = evaluate(rows, metrics, backend="ray", run_file=run_file, progress=False)
    assert len(on_ray.records) == 300_000 and on_ray.failures == []
    assert len(run_file.read_text().splitlines()) == 300_001  # header + every item, streamed as it came
    in_threads = evaluate(rows[:3000], metrics, progress=False)
    assert [(r["sample"], r["metric"], r["score"], r["details"]) for r in on_ray.records[:9000]] == \
        [(r["sample"], r["metric"], r["score"], r["details"]) for r in in_threads.records]


def test_an_llm_judge_through_a_served_endpoint_keeps_its_concurrency_limit_across_workers(tmp_path):
    data = rag_items(50)
    with MockOpenAI(latency=0.1) as mock:
        on_ray = evaluate(data, [Faithfulness()], lm=served(mock.url, max_concurrency=3), num_threads=16,
                          backend="ray", progress=False)
        assert mock.counts["max_in_flight"] <= 3  # two actors, three LM items in flight at most, in all
        assert mock.counts["requests"] == sum(r["lm_calls"] for r in on_ray.records) == 100  # claims + verdicts
        assert on_ray.summary()["faithfulness"]["input_tokens"] == mock.counts["prompt_tokens"]
    forget_endpoint_limits()
    with MockOpenAI(latency=0.0) as mock:
        in_threads = evaluate(data, [Faithfulness()], lm=served(mock.url), num_threads=4, progress=False)
    assert table(on_ray) == table(in_threads) and on_ray.failures == []


def test_a_run_file_cut_short_resumes_on_ray_with_the_same_table(tmp_path):
    data, run_file = rag_items(30), tmp_path / "run.jsonl"
    with MockOpenAI(latency=0.0) as mock:
        whole = evaluate(data, [Faithfulness()], lm=served(mock.url), backend="ray", run_file=run_file, progress=False)
        lines = run_file.read_text().splitlines(keepends=True)
        records = [line for line in lines[1:] if not line.startswith('{"call"')]
        run_file.write_text("".join([lines[0], *records[:12]]))  # the header and 12 items: as if killed there
        before = mock.counts["requests"]
        resumed = evaluate(data, [Faithfulness()], lm=served(mock.url), backend="ray", run_file=run_file,
                           progress=False)
        assert mock.counts["requests"] - before == 2 * 18  # only the 18 missing items ran
    assert table(resumed) == table(whole)


def test_a_permanent_refusal_on_a_worker_stops_the_run(tmp_path):
    with MockOpenAI(latency=0.02) as mock, FaultProxy(mock.url, rate=0.0, schedule={5: "unauthorized"}) as proxy:
        with pytest.raises(RunStopped, match="LMAuthError") as stopped:
            evaluate(rag_items(40), [AspectCritic(name="good", definition="Is it good?")], lm=served(proxy.url),
                     num_threads=2, backend="ray", run_file=tmp_path / "run.jsonl", progress=False)
        assert proxy.counts["requests"] < 12
    assert stopped.value.result.failures == []
    assert 0 < len(stopped.value.result.records) < 40


def test_what_cannot_travel_to_workers_is_refused_before_any_work(tmp_path):
    data = rag_items(2)
    with pytest.raises(ValueError, match="cannot be rebuilt on Ray workers"):
        evaluate(data, [Faithfulness()], lm=dspy.LM("openai/x", api_key="k"), backend="ray", progress=False)
    with pytest.raises(ValueError, match="cannot be sent to other processes"):
        evaluate(data, [Faithfulness()], lm=ServedLM("openai/x", api_key="k"), backend="ray", progress=False)

    class Handmade(ExactMatch):  # neither a catalogue class nor one that saves itself as JSON
        pass

    with pytest.raises(ValueError, match="neither a catalogue metric class nor a metric that saves itself"):
        evaluate([{"response": "a", "reference": "a"}], [Handmade()], backend="ray", progress=False)
    with pytest.raises(ValueError, match="backend="):
        evaluate(data, [ExactMatch()], backend="dask", progress=False)


def test_a_calibrated_compiled_judge_travels_as_its_json():
    from calibration.fitting.calibrators import Calibrator
    from calibration.fitting.compiled import CompiledJudge

    calibrator = Calibrator("platt", binary=True).fit([0.0, 0.2, 0.4, 0.6, 0.8, 1.0] * 2, [0, 0, 0, 1, 1, 1] * 2)
    compiled = CompiledJudge(Faithfulness(), calibrator)
    data = rag_items(12)
    with MockOpenAI(latency=0.0) as mock:
        on_ray = evaluate(data, [compiled], lm=served(mock.url), backend="ray", progress=False)
        in_threads = evaluate(data, [compiled], lm=served(mock.url), progress=False)
    assert on_ray.failures == [] and table(on_ray) == table(in_threads)
    raw = [r["details"]["raw_score"] for r in on_ray.records]
    assert [r["score"] for r in on_ray.records] == pytest.approx(list(calibrator.predict(raw)))
    assert any(r["score"] != raw_score for r, raw_score in zip(on_ray.records, raw))  # calibrated, not raw


def test_an_item_over_its_timeout_on_a_worker_is_recorded_and_the_run_goes_on(tmp_path):
    data = EvaluationDataset([{"user_input": f"q{i}", "response": f"a{i}", "reference": f"a{i % 2}",
                               "retrieved_contexts": [f"a{i}"]} for i in range(4)])
    with MockOpenAI(latency=1.5) as mock:
        result = evaluate(data, [Faithfulness(), ExactMatch()], lm=served(mock.url, request_timeout=5.0),
                          backend="ray", timeout=0.5, progress=False)
    by_metric = {name: [r for r in result.records if r["metric"] == name] for name in ("faithfulness", "exact_match")}
    assert all(r["score"] is None and r["error"].startswith("TimeoutError: no result after 0.5 s")
               for r in by_metric["faithfulness"])
    assert [r["score"] for r in by_metric["exact_match"]] == [1.0, 1.0, 0.0, 0.0]


def test_calls_answered_after_an_item_timed_out_on_a_worker_are_counted():
    """Sample 0's verdict call outlives its item's timeout on an actor: the calls it is paid for come back with
    the actor's next reply, and the summary counts them while no record holds them."""
    from servers import asked_fields

    slow = lambda prompt: 2.5 if "answer is 0." in prompt and "verdicts" in asked_fields(prompt) else 0.0  # noqa: E731
    with MockOpenAI(latency=0.05, extra=slow) as mock:
        result = evaluate(rag_items(40), [Faithfulness()], lm=served(mock.url, request_timeout=10.0), num_threads=2,
                          backend="ray", timeout=2.0, progress=False)
    summary = result.summary()["faithfulness"]
    assert result.records[0]["error"].startswith("TimeoutError") and len(result.failures) == 1
    assert summary["unrecorded_calls"] == 2
    assert summary["lm_calls"] == mock.counts["requests"] == 80


def test_the_cli_runs_on_ray(tmp_path, capsys):
    from judges_app.cli import main

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"response": f"a{i}", "reference": f"a{i % 2}"}) + "\n" for i in range(20)))
    assert main(["evaluate", str(data), "-m", "exact_match", "--backend", "ray", "--out", str(tmp_path / "out"),
                 "--no-mlflow"]) == 0
    assert "exact_match" in capsys.readouterr().out
    scores = (tmp_path / "out" / "scores.csv").read_text().splitlines()
    assert len(scores) == 21
