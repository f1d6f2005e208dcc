"""The served path against a real OpenAI-compatible server: llama-cpp-python's server on 127.0.0.1 (the
`llama_server` fixture) serving the embedded SmolLM2-135M, standing in for any hosted LM. Every judge family
scores through `openai/<served name>` with the server's API base; the CLI runs evaluate and calibrate against
it with the key read from a variable and never shown; a fault proxy sits in front of it."""

import json
import re
import sys
from pathlib import Path

import dspy
import pytest

from judges import (
    AgentGoalAccuracyWithoutReference,
    AIMessage,
    AnswerAccuracy,
    AspectCritic,
    EvaluationDataset,
    Faithfulness,
    HumanMessage,
    LLMSQLEquivalence,
    MultiTurnSample,
    SingleTurnSample,
    evaluate,
)
from judges.lm.served import ServedLM, forget_endpoint_limits
from judges_app.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from servers import FaultProxy  # noqa: E402

# One llama.cpp server for the file: its tests share one test process (pytest-xdist's loadgroup).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("llama_server")]

RAG = SingleTurnSample(user_input="When was the first Super Bowl?", response="The first Super Bowl was on Jan 15, 1967.",
                       retrieved_contexts=["The First AFL-NFL World Championship Game was played on January 15, 1967."],
                       reference="January 15, 1967")
AGENT = MultiTurnSample(user_input=[HumanMessage(content="Book me a table for two at 7pm."),
                                    AIMessage(content="Done: a table for two at 7pm is booked.")])
SQL = SingleTurnSample(response="SELECT name FROM users WHERE age > 30", reference="SELECT name FROM users WHERE age >= 31",
                       reference_contexts=["table users: name TEXT, age INT"])
FAMILIES = {
    "rag": (lambda lm, ad: Faithfulness(lm=lm, adapter=ad), RAG),
    "dual_judge": (lambda lm, ad: AnswerAccuracy(lm=lm, adapter=ad), RAG),
    "custom": (lambda lm, ad: AspectCritic(name="polite", definition="Is the response polite?", lm=lm, adapter=ad), RAG),
    "agent": (lambda lm, ad: AgentGoalAccuracyWithoutReference(lm=lm, adapter=ad), AGENT),
    "domain": (lambda lm, ad: LLMSQLEquivalence(lm=lm, adapter=ad), SQL),
}


def served(server, **kwargs):
    return ServedLM(server.model, api_base=server.api_base, api_key="none", **{"max_tokens": 384, **kwargs})


@pytest.mark.long(why='every judge family through a real llama.cpp server, and two adapters without a grammar')
def test_every_judge_family_scores_through_the_server(llama_server, capsys):
    """With the server constraining answers to the output schema (llama.cpp's json_object + schema), every
    family scores. Without a grammar (ChatAdapter, JSONAdapter; one family, 128 tokens an answer: the 135M
    model rambles to its token limit and DSPy retries) its parse failures are counted and reported, not
    asserted away: benchmarks/served_parse_rates.py measures the rates of every family."""
    outcomes = {}
    for family, (make, sample) in FAMILIES.items():
        adapters = [("json_object schema", {"response_schema": "json_object"}, None)]
        if family == "custom":
            adapters += [("ChatAdapter", {"max_tokens": 128}, dspy.ChatAdapter()),
                         ("JSONAdapter", {"max_tokens": 128}, dspy.JSONAdapter())]
        for label, lm_options, adapter in adapters:
            lm = served(llama_server, cache=False, **lm_options)
            try:
                result = make(lm, adapter).score(sample)
                outcomes[(family, label)] = f"scored {result.score:.2f}"
            except Exception as err:  # noqa: BLE001 - a parse failure is an outcome to count here
                outcomes[(family, label)] = f"parse failure ({type(err).__name__})"
            if label == "json_object schema":
                assert outcomes[(family, label)].startswith("scored"), (family, outcomes[(family, label)])
            assert lm.history and all(entry["usage"] for entry in lm.history)  # every call went over HTTP, with usage
    with capsys.disabled():
        print("\nserved SmolLM2-135M, one sample per family:")
        for (family, label), outcome in outcomes.items():
            print(f"  {family:<11} {label:<19} {outcome}")


@pytest.mark.long(why='12 items through a fault proxy; a slow fault waits out its 15 s request timeout')
def test_faults_in_front_of_the_real_server(llama_server):
    forget_endpoint_limits()
    data = EvaluationDataset([{"response": f"Thank you so much, answer {i} is on its way."} for i in range(12)])
    with FaultProxy(llama_server.url, rate=0.2, seed=5, slow_seconds=20.0) as proxy:  # slow: over the timeout
        lm = ServedLM(llama_server.model, api_base=proxy.url + "/v1", api_key="none", cache=False, max_tokens=256,
                      response_schema="json_object", backoff=0.05, max_backoff=0.5, request_timeout=15.0)
        judge = AspectCritic(name="polite", definition="Is the response polite?", lm=lm)
        result = evaluate(data, [judge], num_threads=2, progress=False)
    assert len(result.records) == 12 and all(r["score"] is not None or r["error"] for r in result.records)
    assert sum(proxy.counts[k] for k in proxy.counts if k.startswith("fault.")) > 0
    summary = result.summary()["polite"]
    assert summary["lm_calls"] == proxy.counts["delivered"]
    assert summary["input_tokens"] == proxy.counts["prompt_tokens"]


@pytest.mark.long(why='evaluate and calibrate against the real server, with MLflow, then every file searched for the key')
@pytest.mark.usefixtures("mlflow_store")  # logs to tmp_path/runs/mlflow.db
def test_cli_evaluate_and_calibrate_against_the_server_never_show_the_key(llama_server, tmp_path, capsys, monkeypatch):
    secret = "sk-test-0d1e2f3a4b5c"
    monkeypatch.setenv("JUDGE_API_KEY", secret)
    forget_endpoint_limits()
    rows = [{"user_input": "q", "response": f"Thanks a lot, here is answer {i}." if i % 2 else f"answer {i}. whatever.",
             "retrieved_contexts": ["c"], "label": i % 2} for i in range(8)]
    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    served_options = ["--lm", llama_server.model, "--api-base", llama_server.api_base, "--api-key-env", "JUDGE_API_KEY",
                      "--response-schema", "json_object", "--runs-dir", str(tmp_path / "runs")]
    unlabelled = tmp_path / "data.jsonl"
    unlabelled.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "label"}) + "\n" for r in rows[:3]))
    assert main(["evaluate", str(unlabelled), "-m", 'aspect_critic:{"name": "polite", "definition": "Is it polite?"}',
                 "--out", str(tmp_path / "e"), *served_options]) == 0
    evaluated = capsys.readouterr()
    assert re.search(r"polite\s+\d\.\d{3}", evaluated.out)
    assert main(["calibrate", str(data), "--judge", "aspect_critic",
                 "--judge-params", '{"name": "polite", "definition": "Is it polite?"}', "--optimizer", "none",
                 "--calibrator", "platt", "--n-train", "4", "--n-test", "4", "--n-bootstrap", "50",
                 "--out", str(tmp_path / "c"), *served_options]) == 0
    calibrated = capsys.readouterr()
    assert "judge as shipped" in calibrated.out
    for text in (evaluated.out, evaluated.err, calibrated.out, calibrated.err):
        assert secret not in text
    stored = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()] + [p for p in tmp_path.rglob("*.json*")]
    assert any(p.name == "mlflow.db" for p in stored)  # MLflow (params, DSPy traces) is among what was checked
    assert not any(secret.encode() in p.read_bytes() for p in stored), "the key reached a file"
