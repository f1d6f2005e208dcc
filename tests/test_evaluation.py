import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import ClassVar

import dspy
import pytest
from dspy.utils import DummyLM

from judges import (
    BleuScore,
    EvaluationDataset,
    ExactMatch,
    Faithfulness,
    InputTooLargeError,
    Judge,
    Metric,
    NonLLMStringSimilarity,
    RougeScore,
)
from judges.run.evaluate import DatasetValidationError, evaluate
from judges.run.run_file import read_run_records

sys.path.insert(0, str(Path(__file__).parent))
from _evaluation_helpers import SlowLength, samples  # noqa: E402
from scripted import scripted_lm  # noqa: E402


def rows(n=6):
    return [
        {"user_input": f"q{i}", "response": f"answer {i}", "reference": f"answer {i if i % 2 else i + 1}",
         "retrieved_contexts": [f"context {i}"]}
        for i in range(n)
    ]


class Polite(dspy.Signature):
    """Is the response polite?"""

    response: str = dspy.InputField()
    polite: bool = dspy.OutputField()


class PolitenessJudge(Judge):
    required_fields = ("response",)

    def __init__(self, *, lm=None):
        super().__init__(lm=lm)
        self.judge = dspy.Predict(Polite)

    def forward(self, response):
        return dspy.Prediction(score=float(self.judge(response=response).polite))


def test_evaluate_many_metrics_with_threads_and_accounting(tmp_path):
    lm = scripted_lm(lambda prompt: {"polite": "True" if "answer 1" in prompt else "False"})
    judge = PolitenessJudge(lm=lm)
    result = evaluate(EvaluationDataset(rows()), [ExactMatch(), RougeScore(), judge], num_threads=4,
                      price_table={"scripted/test": {"input": 1.0, "output": 2.0}}, progress=False)
    summary = result.summary()
    assert summary["exact_match"]["mean"] == pytest.approx(0.5)
    assert summary["politeness_judge"]["mean"] == pytest.approx(1 / 6)
    assert summary["politeness_judge"]["lm_calls"] == 6
    tokens_in, tokens_out = summary["politeness_judge"]["input_tokens"], summary["politeness_judge"]["output_tokens"]
    assert tokens_in > 0 and tokens_out > 0
    assert summary["politeness_judge"]["cost"] == pytest.approx(tokens_in / 1e6 * 1.0 + tokens_out / 1e6 * 2.0)
    assert summary["exact_match"]["cost"] == 0.0 and summary["exact_match"]["lm_calls"] == 0
    assert summary["rouge_score"]["latency_p95"] >= summary["rouge_score"]["latency_p50"] >= 0
    assert summary["_overall"]["samples"] == 6 and summary["_overall"]["samples_per_second"] > 0
    frame = result.to_pandas()
    assert list(frame.columns) == ["exact_match", "rouge_score", "politeness_judge"] and len(frame) == 6
    lines = result.to_jsonl(tmp_path / "r.jsonl").read_text().splitlines()
    assert len(lines) == 18 and "details" in json.loads(lines[1])
    assert result.to_csv(tmp_path / "r.csv").exists()
    assert "exact_match=0.500" in repr(result)


def test_every_problem_is_reported_before_any_lm_call():
    lm = DummyLM([])
    data = EvaluationDataset([{"user_input": "q", "response": "a"}, {"user_input": "q"}])
    with pytest.raises(DatasetValidationError) as err:
        evaluate(data, [Faithfulness(lm=lm), ExactMatch()], progress=False)
    text = str(err.value)
    assert "faithfulness: sample 0, sample 1, field 'retrieved_contexts'" in text  # the same problem once
    assert "faithfulness: sample 1, field 'response'" in text
    assert "exact_match: sample 0, sample 1, field 'reference'" in text
    assert lm.history == []


class Flaky(Metric):
    """Fails on chosen responses, and raises a transient LM error on its first `transient` attempts."""

    required_fields: ClassVar[tuple[str, ...]] = ("response",)
    needs_lm: ClassVar[bool] = True  # retries apply to metrics that call an LM

    def __init__(self, fail_on=(), transient=0):
        self.fail_on, self.transient, self.attempts = set(fail_on), transient, 0

    def _score(self, sample):
        from dspy.utils.exceptions import LMRateLimitError

        self.attempts += 1
        if self.attempts <= self.transient:
            raise LMRateLimitError("slow down")
        if sample.response in self.fail_on:
            raise RuntimeError(f"cannot score {sample.response}")
        return dspy.Prediction(score=1.0)


def test_failures_are_recorded_and_strict_raises():
    data = EvaluationDataset(rows(4))
    result = evaluate(data, [Flaky(fail_on={"answer 2"})], num_threads=2, progress=False)
    assert result.failures == [(2, "flaky", "RuntimeError: cannot score answer 2")]
    assert result.summary()["flaky"]["failures"] == 1 and result.summary()["flaky"]["mean"] == 1.0
    assert "flaky__error" in result.to_pandas().columns
    with pytest.raises(RuntimeError, match="cannot score"):
        evaluate(data, [Flaky(fail_on={"answer 2"})], num_threads=1, strict=True, progress=False)


def test_transient_errors_are_retried_with_backoff():
    flaky = Flaky(transient=2)
    result = evaluate(EvaluationDataset(rows(1)), [flaky], num_threads=1, backoff=0.0, progress=False)
    assert result.failures == [] and flaky.attempts == 3
    result = evaluate(EvaluationDataset(rows(1)), [Flaky(transient=5)], num_threads=1, retries=1, backoff=0.0,
                      progress=False)
    assert "LMRateLimitError" in result.failures[0][2]


def test_per_task_timeout():
    result = evaluate(EvaluationDataset(samples(2)), [SlowLength(delay=2.0)], num_threads=2, timeout=0.3,
                      progress=False)
    assert len(result.failures) == 2 and "TimeoutError" in result.failures[0][2]


def test_a_workers_first_use_imports_are_not_counted_against_the_item():
    """A 3-character ROUGE-L item timed out at 1 s in a fresh worker: importing rouge_score (about 1 s here)
    was counted as the item's time. The worker now builds the metric and imports what it needs first."""
    data = EvaluationDataset([{"response": "abc", "reference": "abc"}])
    for backend in ("threads", "processes"):  # threads + timeout also sends it to a worker process
        result = evaluate(data, [RougeScore(), BleuScore()], timeout=0.5, backend=backend, num_threads=1,
                          progress=False)
        assert result.failures == [] and result.scores("rouge_score") == [1.0], (backend, result.failures)


def test_a_timeout_stops_a_cpu_bound_item_and_the_next_item_still_runs():
    """Audit: a Levenshtein item on a 2 MB pair ran 160 s under --timeout 5 and was recorded as a success, and
    the trivial item after a timed-out one was recorded as TimeoutError without running. CPU-bound metrics
    now run in a killable worker process, and an item's clock starts when it starts."""
    import random

    rng = random.Random(0)
    big = "".join(rng.choice("abcdefgh ") for _ in range(1_000_000))
    data = EvaluationDataset([{"response": big, "reference": big[::-1]}, {"response": "a", "reference": "a"}])
    start = time.monotonic()
    result = evaluate(data, [NonLLMStringSimilarity(max_length=5_000_000)], num_threads=1, timeout=2,
                      progress=False)
    assert time.monotonic() - start < 30  # ~45 s of Levenshtein was stopped at 2 s (+ worker start-ups)
    assert result.failures == [(0, "non_llm_string_similarity",
                                "TimeoutError: no result after 2 s (the worker process was killed)")]
    assert result.records[1]["score"] == 1.0


def test_quadratic_metrics_refuse_inputs_beyond_their_documented_size():
    """ROUGE-L on a 2 MB pair took 9.6 GB: beyond max_lcs_cells / max_length the item is a named failure."""
    long_text = " ".join(f"w{i % 5000}" for i in range(12_000))  # ~60 KB, 12,000 tokens
    data = EvaluationDataset([{"response": long_text, "reference": long_text}, {"response": "a b", "reference": "a b"}])
    start = time.monotonic()
    result = evaluate(data, [RougeScore(), NonLLMStringSimilarity(max_length=10_000)], progress=False)
    assert time.monotonic() - start < 10
    reasons = {metric: error for _, metric, error in result.failures}
    assert reasons["rouge_score"].startswith("InputTooLargeError: rouge_score: ROUGE-L on 144,000,000 token pairs")
    assert reasons["non_llm_string_similarity"].startswith("InputTooLargeError")
    assert [r["score"] for r in result.records[2:]] == [1.0, 1.0]
    assert RougeScore(rouge_type="rouge1").score(data[0]).score == 1.0  # linear: no guard
    with pytest.raises(ValueError, match="max_lcs_cells must be a positive int"):
        RougeScore(max_lcs_cells=0)


def test_context_metrics_comparing_every_pair_refuse_beyond_max_pairs():
    from judges import NonLLMContextPrecisionWithReference, NonLLMContextRecall

    many = [f"context number {i}" for i in range(1_001)]
    sample = {"retrieved_contexts": many, "reference_contexts": many[:1_000]}
    for metric in (NonLLMContextPrecisionWithReference(), NonLLMContextRecall()):
        start = time.monotonic()
        with pytest.raises(InputTooLargeError, match=rf"{metric.name}: 1,00[01] x 1,00[01] contexts is over max_pairs=1,000,000"):
            metric.score(sample)
        assert time.monotonic() - start < 1
        assert type(metric)(max_pairs=2_000_000).score({"retrieved_contexts": many[:3], "reference_contexts": many[:3]}).score == 1.0
    with pytest.raises(ValueError, match="max_pairs must be a positive int"):
        NonLLMContextRecall(max_pairs=0)


def test_an_abandoned_llm_call_does_not_keep_the_process_alive(tmp_path):
    """Audit: the process lingered ~60 s after printing. A timed-out LM call is abandoned on a daemon thread."""
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from scripted import scripted_lm
        from test_evaluation import PolitenessJudge
        from judges import evaluate
        lm = scripted_lm(lambda prompt: time.sleep(60) or {{"polite": "True"}})
        result = evaluate([{{"response": "hello"}}], [PolitenessJudge(lm=lm)], timeout=1, progress=False)
        print(result.failures, flush=True)
    """))
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TimeoutError: no result after 1 s (the call was abandoned)" in done.stdout
    assert time.monotonic() - start < 40  # imports + 1 s, not the 60 s the call would take


class Outage(Metric):
    """Fails while its class attribute ``down`` is set (an outage that ends), else scores 1."""

    required_fields: ClassVar[tuple[str, ...]] = ("response",)
    down = True

    def _score(self, sample):
        if type(self).down and sample.response.endswith("2"):
            raise ConnectionRefusedError("provider down")
        return dspy.Prediction(score=1.0)


def test_retry_failed_reruns_recorded_failures_only(tmp_path):
    """Failed records count as finished, so a rerun never retried them; retry_failed=True does."""
    run_file, data = tmp_path / "run.jsonl", EvaluationDataset(rows(4))
    Outage.down = True
    first = evaluate(data, [Outage(), ExactMatch()], run_file=run_file, progress=False)
    assert [f[:2] for f in first.failures] == [(2, "outage")]
    Outage.down = False
    assert evaluate(data, [Outage(), ExactMatch()], run_file=run_file, progress=False).failures == first.failures
    lines = len(run_file.read_text().splitlines())
    retried = evaluate(data, [Outage(), ExactMatch()], run_file=run_file, retry_failed=True, progress=False)
    assert retried.failures == [] and retried.records[4]["score"] == 1.0
    assert len(run_file.read_text().splitlines()) == lines + 1  # only the failed item ran again


def test_lm_argument_reaches_judges_without_their_own_lm():
    lm = scripted_lm(lambda prompt: {"polite": "True"})
    result = evaluate(EvaluationDataset(rows(3)), [PolitenessJudge()], lm=lm, num_threads=2, progress=False)
    assert result.summary()["politeness_judge"]["mean"] == 1.0
    assert lm.engine.calls == 3


def test_duplicate_metric_names_are_refused_and_an_alias_tells_them_apart(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"share the name.*metric.named\('...'\) \(CLI: -m ALIAS=NAME"):
        evaluate(EvaluationDataset(rows(1)), [ExactMatch(), ExactMatch(ignore_case=True)], progress=False)
    data = EvaluationDataset([{"response": "Paris", "reference": "paris"}])
    for backend in ("threads", "processes"):
        result = evaluate(data, [ExactMatch(), ExactMatch(ignore_case=True).named("exact_match_any_case")],
                          progress=False, backend=backend)
        assert result.scores("exact_match") == [0.0] and result.scores("exact_match_any_case") == [1.0], backend
    assert ExactMatch().named("em").get_params() == ExactMatch().get_params()
    from calibration.fitting.compiled import CompiledJudge

    assert CompiledJudge(Faithfulness()).named("faithful_a").name == "faithful_a"
    with pytest.raises(ValueError, match="alias 'a b' must be"):
        ExactMatch().named("a b")
    from judges_app.cli import main

    path = tmp_path / "d.jsonl"
    data.to_jsonl(path)
    code = main(["evaluate", str(path), "-m", "exact_match", "-m", 'any_case=exact_match:{"ignore_case": true}',
                 "--no-mlflow", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 0 and re.search(r"any_case\s+1\.000", printed) and re.search(r"exact_match\s+0\.000", printed)


def test_run_file_resume_skips_finished_work_and_refuses_other_runs(tmp_path):
    run = tmp_path / "run.jsonl"
    data = EvaluationDataset(samples(6))
    SlowLength.calls = 0
    first = evaluate(data, [SlowLength(delay=0)], run_file=run, progress=False)
    assert SlowLength.calls == 6
    again = evaluate(data, [SlowLength(delay=0)], run_file=run, progress=False)
    assert SlowLength.calls == 6  # nothing redone
    assert again.scores("slow_length") == first.scores("slow_length")
    with pytest.raises(ValueError, match="other samples"):
        evaluate(EvaluationDataset(samples(5)), [SlowLength(delay=0)], run_file=run, progress=False)
    with pytest.raises(ValueError, match="other metrics"):
        evaluate(data, [SlowLength(delay=0.01)], run_file=run, progress=False)


def test_a_cut_last_line_is_dropped_and_redone_and_a_corrupt_middle_line_is_named(tmp_path):
    run = tmp_path / "run.jsonl"
    data = EvaluationDataset(samples(4))
    evaluate(data, [SlowLength(delay=0)], run_file=run, progress=False)
    lines = run.read_text().splitlines()
    run.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:10])  # as a kill mid-write leaves it
    header, records = read_run_records(run)
    assert header["metrics"] and len(records) == 3
    SlowLength.calls = 0
    resumed = evaluate(data, [SlowLength(delay=0)], run_file=run, progress=False)
    assert SlowLength.calls == 1 and len(resumed.scores("slow_length")) == 4
    assert all(json.loads(line) for line in run.read_text().splitlines())  # the cut line is gone, not buried
    lines = run.read_text().splitlines()
    run.write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r"run\.jsonl: line 2 is not JSON.*new run file"):
        evaluate(data, [SlowLength(delay=0)], run_file=run, progress=False)


def test_sigkill_mid_run_then_resume_loses_nothing_and_matches_an_uninterrupted_run(tmp_path):
    run = tmp_path / "killed.jsonl"
    n = 40
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from _evaluation_helpers import SlowLength, samples
        from judges import evaluate
        evaluate(samples({n}), [SlowLength(delay=0.1)], num_threads=1, run_file={str(run)!r}, progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parents[1])
    deadline = time.time() + 60
    while time.time() < deadline:
        if run.exists() and len(run.read_text().splitlines()) >= 1 + 8:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished_before = [json.loads(line) for line in run.read_text().splitlines()[1:] if line.endswith("}")]
    assert 8 <= len(finished_before) < n

    SlowLength.calls = 0
    resumed = evaluate(samples(n), [SlowLength(delay=0.1)], run_file=run, num_threads=4, progress=False)
    assert SlowLength.calls <= n - len(finished_before) + 1  # at most the line being written is redone
    assert SlowLength.calls >= n - len(finished_before) - 1
    reference = evaluate(samples(n), [SlowLength(delay=0)], num_threads=2, progress=False)
    assert resumed.scores("slow_length") == reference.scores("slow_length")
    assert resumed.to_pandas().equals(reference.to_pandas())
    for record in finished_before:  # every finished sample survived as written
        assert resumed.records[record["sample"]]["score"] == record["score"]


def test_the_processes_backend_gives_the_thread_pools_records():
    """backend="processes": metrics without an LM in child processes, an LLM judge still in threads; every
    record the same as the thread pool's but for its latency."""
    lm = scripted_lm(lambda prompt: {"polite": "True" if "answer 1" in prompt else "False"})
    metrics = [ExactMatch(), RougeScore(), PolitenessJudge(lm=lm)]
    threads = evaluate(EvaluationDataset(rows(12)), metrics, num_threads=2, progress=False)
    processes = evaluate(EvaluationDataset(rows(12)), metrics, num_threads=2, backend="processes", progress=False)

    def comparable(result):
        return [{k: v for k, v in r.items() if k not in ("latency_s", "run")} for r in result.records]

    assert comparable(processes) == comparable(threads)
    with pytest.raises(ValueError, match=r"backend='fibres' is not one of \['threads', 'processes', 'ray'\]"):
        evaluate(EvaluationDataset(rows(2)), [ExactMatch()], backend="fibres", progress=False)


def test_each_record_reaches_the_run_file_when_its_item_finishes_not_when_its_chunk_does(tmp_path):
    """Items of metrics without an LM go to the threads in chunks (12 here); a finished item's record is
    written at once all the same, so a kill loses no finished item."""
    import threading

    run = tmp_path / "run.jsonl"
    worker = threading.Thread(target=evaluate, args=(samples(100), [SlowLength(delay=0.05)]),
                              kwargs={"num_threads": 1, "run_file": run, "progress": False})
    worker.start()
    seen = set()
    while worker.is_alive():
        if run.exists():
            seen.add(len(run.read_text().splitlines()) - 1)
        time.sleep(0.01)
    worker.join()
    assert len(read_run_records(run)[1]) == 100
    assert {1, 2, 3} & seen and len(seen & set(range(1, 12))) >= 5, sorted(seen)[:20]


def test_an_lm_call_answered_while_ctrl_c_stops_the_run_is_recorded_and_counted_on_resume(tmp_path, monkeypatch):
    """Audit: SIGINT during a run over an LM, the call in flight answered after it: the run waits (bounded) for
    the item, writes its call and record, then stops; the resumed run redoes nothing and counts every call."""
    import threading

    import judges.run.threads as threads

    started, release, draining, calls = threading.Event(), threading.Event(), threading.Event(), []
    drain = threads._Pool.drain

    def noticed(pool, grace):  # the driver has taken the interrupt: only now does the LM answer
        draining.set()
        return drain(pool, grace)

    def respond(prompt):
        calls.append(prompt)
        if len(calls) == 3:  # the call in flight at the interrupt
            started.set()
            assert release.wait(10)
        return {"polite": "True"}

    def interrupt():
        assert started.wait(10)
        os.kill(os.getpid(), signal.SIGINT)
        draining.wait(10)
        release.set()  # the LM answers after the interrupt

    run = tmp_path / "run.jsonl"
    data = EvaluationDataset(rows(6))
    monkeypatch.setattr(threads._Pool, "drain", noticed)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's Ctrl-C, as a user's run has (put back after)
    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        evaluate(data, [PolitenessJudge(lm=scripted_lm(respond))], run_file=run, num_threads=1, progress=False)
    header, records = read_run_records(run)
    assert len(calls) == 3 and sorted(r["sample"] for r in records) == [0, 1, 2]  # the one in flight too
    resumed = evaluate(data, [PolitenessJudge(lm=scripted_lm(respond))], run_file=run, progress=False)
    summary = resumed.summary()["politeness_judge"]
    assert len(calls) == 6 and summary["lm_calls"] == 6 and not summary.get("unrecorded_calls")


@pytest.mark.parametrize("signals", [1, 2])
def test_an_interrupt_waits_the_grace_it_says_once_and_a_second_one_stops_the_wait(monkeypatch, signals):
    """Audit: with an LM that never answers, Ctrl-C waited its 30 s grace twice (61 s), and a second Ctrl-C
    started the wait again. Now the run waits once, and a second signal during the wait ends it."""
    import threading

    import judges.run.threads as threads

    hung, waits, drain = threading.Event(), [], threads._Pool.drain
    monkeypatch.setattr(threads, "INTERRUPT_GRACE", 1.0 if signals == 1 else 30.0)

    def counted(pool, grace):
        waits.append(grace)
        if signals == 2:
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()  # the second Ctrl-C, mid-wait
        return drain(pool, grace)

    def respond(prompt):
        hung.set()
        threading.Event().wait(60)  # an LM that does not answer within the test
        return {"polite": "True"}

    monkeypatch.setattr(threads._Pool, "drain", counted)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=lambda: hung.wait(10) and os.kill(os.getpid(), signal.SIGINT), daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        evaluate(EvaluationDataset(rows(2)), [PolitenessJudge(lm=scripted_lm(respond))], num_threads=1,
                 progress=False)
    assert len(waits) == 1  # one grace period, never two
