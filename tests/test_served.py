"""Served LMs under faults and load: ServedLM's retries, limits and accounting against a scripted
OpenAI-compatible endpoint (tests/servers.py: MockOpenAI) behind a fault-injecting proxy (FaultProxy).
The real llama.cpp server is exercised in tests/test_served_llama.py."""

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

from judges import AspectCritic, EvaluationDataset, evaluate
from judges.lm.served import (
    EmptyCompletionError,
    PermanentLMError,
    RetryBudgetExhausted,
    ServedLM,
    forget_endpoint_limits,
)
from judges.run.result import RunStopped

sys.path.insert(0, str(Path(__file__).parent))
from servers import FAULTS, GARBAGE, FaultProxy, MockOpenAI, asked_fields  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_limits():
    forget_endpoint_limits()  # limits are per endpoint and process; every test starts with new ports anyway
    yield
    forget_endpoint_limits()


def served(url, **kwargs):
    """A ServedLM for these tests. Its 10 s timeout is one no ordinary reply outlasts, even on a loaded machine;
    a test whose subject is a timeout passes its own short one."""
    options = dict(api_key="test-key", cache=False, backoff=0.01, max_backoff=0.2, request_timeout=10.0)
    return ServedLM("openai/mock", api_base=url + "/v1", **{**options, **kwargs})


def critic(lm):
    return AspectCritic(name="good", definition="Is it good?", lm=lm)


def request(text):
    """A call in DSPy's request API (``dspy.lm15``), the one DSPy 3.5 keeps, not ``messages=`` dictionaries."""
    from dspy.lm15 import Message, Request

    return Request(model="openai/mock", messages=(Message.user(text),))


def items(n):
    return EvaluationDataset([{"response": f"answer number {i}"} for i in range(n)])


def test_twenty_percent_faults_over_a_hundred_items_every_item_accounted_for(tmp_path, capsys):
    """429 with Retry-After, 500/503, resets, slow replies, cut bodies, non-JSON 200s and empty completions at a
    seeded 20%: the run finishes, every item is scored, nothing is lost or counted twice, and the run's LM
    calls and tokens equal the completions the proxy delivered intact."""
    run_file = tmp_path / "run.jsonl"
    with MockOpenAI(latency=0.0) as mock, FaultProxy(mock.url, rate=0.2, seed=7, slow_seconds=5.0) as proxy:
        lm = served(proxy.url, request_timeout=3.0)  # the slow faults outlast it; an ordinary reply does not
        result = evaluate(items(100), [critic(lm)], num_threads=8, run_file=run_file, progress=False)
    counts = proxy.counts
    assert all(counts[f"fault.{kind}"] > 0 for kind in FAULTS), counts
    records = [r for r in _lines(run_file) if "call" not in r]
    assert sorted(r["sample"] for r in records) == list(range(100))  # each item exactly once
    # scored, or (rarely: six faults in a row) recorded with the last transient error after 5 retries
    assert all(r["score"] is not None or r["error"].startswith(TRANSIENT_NAMES) for r in records)
    assert len(result.failures) <= 2
    summary = result.summary()["good"]
    assert summary["lm_calls"] == counts["delivered"]
    assert summary["input_tokens"] == counts["prompt_tokens"]
    assert summary["output_tokens"] == counts["completion_tokens"]
    stats = lm.limits.stats
    assert stats["retries"] >= sum(counts[f"fault.{k}"] for k in FAULTS) - counts["fault.empty_completion"]
    assert stats["failed.EmptyCompletionError"] == counts["delivered.empty_completion"] > 0
    with capsys.disabled():
        print(f"\nproxy: {dict(counts)}\nServedLM: {dict(stats)}; recorded failures {len(result.failures)}")


def test_every_answered_call_is_counted_whether_its_item_scored_or_failed(tmp_path):
    """Replies that arrive but do not parse fail their item; the calls and tokens they cost are still in the
    record and the summary, which then equal what the server delivered."""
    from judges import AnswerAccuracy

    with MockOpenAI(latency=0.0) as mock, FaultProxy(mock.url, rate=0.4, seed=3, kinds=(GARBAGE,)) as proxy:
        lm = served(proxy.url)
        rows = [{"user_input": f"q{i}?", "response": f"answer {i}", "reference": f"answer {i}"} for i in range(12)]
        result = evaluate(rows, [critic(lm), AnswerAccuracy(lm=lm)], num_threads=3, progress=False,
                          run_file=tmp_path / "run.jsonl")
    counts, summary = proxy.counts, result.summary()
    assert counts[f"fault.{GARBAGE}"] > 0 and result.failures  # some items did fail after the LM answered
    failed = [r for r in result.records if r.get("error")]
    assert all(r["lm_calls"] > 0 and r["usage"] for r in failed)
    assert sum(summary[name]["lm_calls"] for name in ("good", "answer_accuracy")) == counts["delivered"]
    assert sum(summary[n]["input_tokens"] for n in ("good", "answer_accuracy")) == counts["prompt_tokens"]
    assert sum(summary[n]["output_tokens"] for n in ("good", "answer_accuracy")) == counts["completion_tokens"]
    written = _lines(tmp_path / "run.jsonl")
    assert sum(r.get("lm_calls", 0) for r in written) == counts["delivered"]  # the run file carries it too
    assert sum("call" in r for r in written) == counts["delivered"]  # once in its record, once as a call line


def test_a_reply_the_client_stopped_waiting_for_is_not_counted_as_delivered(tmp_path):
    """On a loaded machine an ordinary reply can come later than the client's timeout: the client gives up and
    retries, and the reply it no longer waits for is not an LM call. (A CI run once counted such a reply as
    delivered: 103 delivered against 102 calls.) One item's first reply here is held past the timeout."""
    held = threading.Event()

    def late_once(prompt):
        if "answer number 3" in prompt and not held.is_set():
            held.set()
            return 1.6
        return 0.0

    with MockOpenAI(latency=0.0, extra=late_once) as mock, FaultProxy(mock.url, rate=0.0) as proxy:
        lm = served(proxy.url, request_timeout=1.0)
        result = evaluate(items(6), [critic(lm)], num_threads=2, progress=False, run_file=tmp_path / "run.jsonl")
        deadline = time.monotonic() + 10  # the held reply comes after the run: wait (bounded) for the proxy to see it
        while proxy.counts["delivered"] + proxy.counts["client_gone"] < proxy.counts["requests"]:
            assert time.monotonic() < deadline, dict(proxy.counts)
            time.sleep(0.05)
    counts, summary = proxy.counts, result.summary()["good"]
    assert not result.failures and lm.limits.stats["retries"] >= 1
    # at least the held reply (a stalled machine can make another one late too)
    assert counts["client_gone"] >= 1 and mock.counts["requests"] == counts["delivered"] + counts["client_gone"]
    assert summary["lm_calls"] == counts["delivered"] == 6
    assert summary["input_tokens"] == counts["prompt_tokens"]


TRANSIENT_NAMES = ("LMRateLimitError", "LMServerError", "LMTransportError", "LMProviderError", "EmptyCompletionError")


def test_backoff_is_jittered_and_never_sooner_than_retry_after():
    lm = served("http://127.0.0.1:9", backoff=1.0, max_backoff=30.0)

    class Limited(Exception):
        retry_after = 2.0

    delays = [lm.delay(Limited(), 0) for _ in range(50)]
    assert min(delays) >= 2.0 and len(set(delays)) > 1
    plain = [lm.delay(RuntimeError(), 3) for _ in range(50)]  # 8 s step: jitter between half and all of it
    assert 4.0 <= min(plain) and max(plain) <= 8.0 and len(set(plain)) > 1


def test_retry_after_is_honoured_end_to_end():
    with MockOpenAI(latency=0.0) as mock, FaultProxy(mock.url, rate=0.0, schedule={1: "rate_limited"},
                                                     retry_after=0.6) as proxy:
        start = time.monotonic()
        critic(served(proxy.url)).score({"response": "x"})
        assert time.monotonic() - start >= 0.6


def test_the_retry_budget_stops_hammering_a_failing_provider():
    with MockOpenAI(latency=0.0) as mock, FaultProxy(mock.url, rate=1.0, kinds=("server_error",)) as proxy:
        lm = served(proxy.url, retries=10, min_retries=5, retry_budget=0.1)
        result = evaluate(items(8), [critic(lm)], num_threads=2, progress=False)
    assert len(result.failures) == 8
    assert any("RetryBudgetExhausted" in error for _, _, error in result.failures)
    assert lm.limits.stats["retries"] <= 5  # 5 + 0.1 x 0 successful calls


def test_a_permanent_refusal_stops_the_run_with_one_message_and_a_rerun_resumes(tmp_path):
    run_file = tmp_path / "run.jsonl"
    with MockOpenAI(latency=0.05) as mock:
        with FaultProxy(mock.url, rate=0.0, schedule={6: "unauthorized"}) as proxy:
            with pytest.raises(RunStopped, match="LMAuthError") as stopped:
                evaluate(items(30), [critic(served(proxy.url))], num_threads=2, run_file=run_file, progress=False)
            assert proxy.counts["requests"] <= 8  # stopped early: the one in flight finished, nothing new started
        done = sum("call" not in r for r in _lines(run_file))
        assert 0 < done < 30 and stopped.value.result.failures == []  # the refused item is not recorded
        forget_endpoint_limits()
        with FaultProxy(mock.url, rate=0.0) as proxy:
            result = evaluate(items(30), [critic(served(proxy.url))], num_threads=2, run_file=run_file, progress=False)
            assert proxy.counts["requests"] == 30 - done  # resumed where it stopped
    assert result.failures == [] and len(result.records) == 30
    with MockOpenAI(latency=0.0) as mock, FaultProxy(mock.url, rate=0.0, schedule={1: "bad_request"}) as proxy:
        with pytest.raises(PermanentLMError, match="LMInvalidRequestError"):
            served(proxy.url)(request("hi"))
        assert proxy.counts["requests"] == 1  # not retried


def test_a_served_lm_answers_dspys_request_api_without_the_deprecated_messages_argument():
    """What keeps working across DSPy 3.4 and 3.5: a Request in, an lm15.Response out, no DeprecationWarning
    from DSPy about messages=; a plain prompt string too. (DSPy 3.5 is not on this machine's package index, so
    this is checked on 3.4's API only.)"""
    import warnings

    with MockOpenAI(latency=0.0) as mock:
        lm = served(mock.url)
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            response = lm(request("hi"))
            assert isinstance(response.text, str) and response.text
            assert isinstance(lm("hi")[0], (str, dict))
            assert critic(lm).score({"response": "fine"}).score in (0.0, 1.0)  # DSPy's adapter path, unwarned


def test_max_concurrency_and_max_rps_hold_per_endpoint():
    with MockOpenAI(latency=0.1) as mock:
        lm = served(mock.url, max_concurrency=3)
        evaluate(items(24), [critic(lm)], num_threads=12, progress=False)
        assert mock.counts["max_in_flight"] == 3
    forget_endpoint_limits()
    with MockOpenAI(latency=0.0) as mock:
        lm = served(mock.url, max_rps=20)
        evaluate(items(20), [critic(lm)], num_threads=8, progress=False)
        gaps = [b - a for a, b in zip(mock.starts, mock.starts[1:])]
        # arrivals at the server jitter around the client's 50 ms spacing: the median gap, not the smallest
        assert mock.starts[-1] - mock.starts[0] >= 19 / 20 * 0.9 and sorted(gaps)[len(gaps) // 2] >= 0.04


def test_an_empty_completion_is_retried_without_dspys_cache():
    with MockOpenAI(latency=0.0) as mock, FaultProxy(mock.url, rate=0.0, schedule={1: "empty_completion"}) as proxy:
        lm = served(proxy.url, cache=True)
        assert critic(lm).score({"response": f"fresh {time.time_ns()}"}).score in (0.0, 1.0)
        assert lm.limits.stats["failed.EmptyCompletionError"] == 1
    with MockOpenAI(latency=0.0) as mock, FaultProxy(mock.url, rate=1.0, kinds=("empty_completion",)) as proxy:
        with pytest.raises((EmptyCompletionError, RetryBudgetExhausted)):
            served(proxy.url, retries=2)(request("hi"))


def test_sigkill_mid_run_then_rerun_gives_the_table_of_an_uninterrupted_run(tmp_path):
    """Through faults, a run killed with SIGKILL and rerun ends with the same scores as one never killed."""
    with MockOpenAI(latency=0.02) as mock, FaultProxy(mock.url, rate=0.2, seed=3, slow_seconds=3.0) as proxy:
        script = tmp_path / "run.py"
        script.write_text(textwrap.dedent(f"""
            import sys, json
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from judges import AspectCritic, EvaluationDataset, Faithfulness, evaluate
            from judges import ServedLM
            lm = ServedLM("openai/mock", api_base={proxy.url + "/v1"!r}, api_key="k", cache=False, backoff=0.01,
                          max_backoff=0.2, request_timeout=1.0)
            data = EvaluationDataset([{{"response": f"answer number {{i}}", "retrieved_contexts": ["c"]}}
                                      for i in range(40)])
            result = evaluate(data, [AspectCritic(name="good", definition="Is it good?", lm=lm), Faithfulness(lm=lm)],
                              num_threads=4, run_file=sys.argv[1], progress=False)
            print(json.dumps(result.to_pandas().to_dict()))
        """))
        killed = tmp_path / "killed.jsonl"
        process = subprocess.Popen([sys.executable, str(script), str(killed)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sum("score" in r for r in _lines(killed)) < 20:
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        partial = sum("score" in r for r in _lines(killed))
        assert 0 < partial < 80
        resumed = subprocess.run([sys.executable, str(script), str(killed)], capture_output=True, text=True, timeout=300)
        whole = subprocess.run([sys.executable, str(script), str(tmp_path / "whole.jsonl")], capture_output=True,
                               text=True, timeout=300)
    assert resumed.returncode == 0 and whole.returncode == 0, resumed.stderr[-2000:] + whole.stderr[-2000:]
    assert json.loads(resumed.stdout.splitlines()[-1]) == json.loads(whole.stdout.splitlines()[-1])
    keys = [(r["sample"], r["metric"]) for r in _lines(killed) if "call" not in r]
    assert len(keys) == len(set(keys))  # the line cut by the kill was dropped on resume, its item done once
    assert set(keys) == {(i, m) for i in range(40) for m in ("good", "faithfulness")}


def test_the_key_is_read_from_its_variable_and_never_shown(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "sk-secret-value-123")
    lm = ServedLM("openai/mock", api_base="http://127.0.0.1:9/v1", api_key_env="JUDGE_KEY")
    assert "sk-secret" not in repr(lm) and lm.kwargs["api_key"] == "sk-secret-value-123"
    with pytest.raises(ValueError, match="NOPE_KEY .* is not set"):
        ServedLM("openai/mock", api_key_env="NOPE_KEY")


def test_a_self_hosted_server_gets_max_tokens_by_the_name_it_obeys():
    """DSPy sends max_completion_tokens, which llama.cpp's server ignores: a 135M model then rambled for
    4,000 tokens (275 s) per call. With an api_base, max_tokens goes in the body as well."""
    bodies = []
    with MockOpenAI(latency=0.0) as mock:
        original = mock.handler._body

        def keep(handler):
            body = original(handler)
            bodies.append(json.loads(body))
            return body

        mock.handler._body = keep
        try:
            served(mock.url, max_tokens=77)("hi")
        finally:
            mock.handler._body = original
    assert bodies[0]["max_tokens"] == 77


def _lines(path):
    """A run file's lines after the header, records and call lines alike; a line cut by a kill is left out."""
    out = []
    for line in path.read_text().splitlines()[1:] if path.exists() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def _held_verdicts(sample):
    """MockOpenAI ``extra``: the verdict step of ``sample`` (its context is in the prompt) is held."""
    return lambda prompt: (math.inf if f"context {sample}" in prompt and "verdicts" in asked_fields(prompt) else 0.0)


def test_calls_of_an_item_in_flight_at_a_kill_are_counted_when_the_run_resumes(tmp_path):
    """Sample 3's claims were extracted (a paid call) and its verdict call was in flight when the run was
    SIGKILLed: no record holds that paid call, the run file's call line does, and the resumed run's summary
    counts it. Calls and tokens then equal what the server answered over both runs."""
    run_file = tmp_path / "run.jsonl"
    with MockOpenAI(latency=0.0, extra=_held_verdicts(3)) as mock:
        script = tmp_path / "run.py"
        script.write_text(textwrap.dedent(f"""
            import json, sys
            from judges import EvaluationDataset, Faithfulness, ServedLM, evaluate
            lm = ServedLM("openai/mock", api_base={mock.url + "/v1"!r}, api_key="k", cache=False, request_timeout=120)
            data = [{{"response": f"answer number {{i}}", "retrieved_contexts": [f"context {{i}}"]}} for i in range(6)]
            result = evaluate(data, [Faithfulness(lm=lm)], num_threads=2, run_file=sys.argv[1], progress=False)
            print(json.dumps(result.summary()["faithfulness"]))
        """))
        process = subprocess.Popen([sys.executable, str(script), str(run_file)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            lines = _lines(run_file)
            if ({r["sample"] for r in lines if "score" in r} == {0, 1, 2, 4, 5}
                    and any(r["call"]["sample"] == 3 for r in lines if "call" in r)):
                break
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        assert {r["sample"] for r in _lines(run_file) if "score" in r} == {0, 1, 2, 4, 5}
        mock.release()  # the held verdict call is never answered; the rerun's is
        resumed = subprocess.run([sys.executable, str(script), str(run_file)], capture_output=True, text=True,
                                 timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads(resumed.stdout.splitlines()[-1])
    assert mock.counts["released"] == 1
    assert summary["lm_calls"] == mock.counts["requests"] == 6 * 2 + 1
    assert summary["unrecorded_calls"] == 1  # the claims of the killed attempt at sample 3
    assert summary["input_tokens"] == mock.counts["prompt_tokens"]
    assert summary["output_tokens"] == mock.counts["completion_tokens"]


def test_calls_answered_after_an_item_timed_out_are_counted():
    """Sample 0's verdict call outlives the item's timeout: the item is recorded as timed out and abandoned,
    the call still answers while the run lasts, and the summary counts both of its calls."""
    from judges import Faithfulness

    with MockOpenAI(latency=0.05, extra=lambda p: 2.5 if "context 0" in p and "verdicts" in asked_fields(p) else 0.0) as mock:
        rows = [{"response": f"answer number {i}", "retrieved_contexts": [f"context {i}"]} for i in range(25)]
        result = evaluate(rows, [Faithfulness(lm=served(mock.url, request_timeout=30))], num_threads=1, timeout=2.0,
                          progress=False)
    summary = result.summary()["faithfulness"]
    assert result.records[0]["error"].startswith("TimeoutError") and len(result.failures) == 1
    assert summary["unrecorded_calls"] == 2
    assert summary["lm_calls"] == mock.counts["requests"] == 25 * 2
    assert summary["input_tokens"] == mock.counts["prompt_tokens"]


def test_the_attempt_a_retry_replaced_is_still_counted(tmp_path):
    """An item fails after the LM answered (garbage), a ``retry_failed`` rerun scores it and replaces its
    record: the failed attempt's calls stay in the bill."""
    run_file = tmp_path / "run.jsonl"
    with MockOpenAI(latency=0.0) as mock, FaultProxy(mock.url, rate=0.0, schedule={1: GARBAGE}) as proxy:
        lm = served(proxy.url)
        first = evaluate(items(3), [critic(lm)], num_threads=1, run_file=run_file, progress=False)
        assert len(first.failures) == 1
        second = evaluate(items(3), [critic(lm)], num_threads=1, run_file=run_file, retry_failed=True, progress=False)
    summary = second.summary()["good"]
    assert not second.failures
    assert summary["lm_calls"] == proxy.counts["delivered"] > 3
    assert summary["unrecorded_calls"] == first.summary()["good"]["lm_calls"] - 2
    assert summary["input_tokens"] == proxy.counts["prompt_tokens"]


def test_dspys_cache_keeps_each_endpoints_answers_apart():
    """DSPy's disk cache leaves ``api_base`` out of its key: one server's answers came back for another."""
    prompt = f"same prompt {time.time_ns()}"
    with MockOpenAI(latency=0.0) as first, MockOpenAI(latency=0.0) as second:
        for api in (request(prompt), prompt):  # DSPy's request API and a plain prompt
            served(first.url, cache=True)(api)
            served(first.url, cache=True)(api)  # the same endpoint: from the cache
            served(second.url, cache=True)(api)  # another endpoint, the same model string: asked
        assert first.counts["requests"] == 2 and second.counts["requests"] == 2
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # DSPy's "rollout_id has no effect at temperature 0" is not ours
            served(second.url, cache=True, temperature=0.0)(request(prompt + " again"))
