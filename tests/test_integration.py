"""The real embedded defaults: SmolLM2-135M-Instruct through llama.cpp, all-MiniLM-L6-v2 embeddings.

These check behaviour (parsing, usage, determinism, cache, limits, log-probabilities, every judge returns a
valid score with its intermediates), not judgement quality: calibration measures that.
"""

import json
import math
import time
import uuid
from typing import Literal

import dspy
import pytest

from judges import SingleTurnSample, local_lm
from judges.lm.embeddings import resolve_embedder
from judges.lm.resolve import judge_context
from judges.metrics import rag

pytestmark = pytest.mark.integration


class Verdict(dspy.Signature):
    """Decide whether the statement is supported by the context."""

    context: str = dspy.InputField()
    statement: str = dspy.InputField()
    reason: str = dspy.OutputField()
    supported: bool = dspy.OutputField()
    confidence: Literal[1, 2, 3, 4, 5] = dspy.OutputField()


CONTEXT = "Albert Einstein (born 14 March 1879 in Ulm) was a German-born theoretical physicist."


def test_structured_output_parses_and_reports_usage():
    lm = local_lm(cache=False)
    with judge_context(lm), dspy.track_usage() as usage:
        out = dspy.Predict(Verdict)(context=CONTEXT, statement="Einstein was born in 1879.")
    assert isinstance(out.supported, bool) and out.confidence in (1, 2, 3, 4, 5) and isinstance(out.reason, str)
    tokens = usage.get_total_tokens()[lm.model]
    assert tokens["prompt_tokens"] > 50 and tokens["completion_tokens"] > 3


def test_temperature_zero_is_deterministic_and_cache_hits():
    statement = f"Einstein was a physicist. ({uuid.uuid4().hex[:8]})"
    uncached = local_lm(cache=False)
    with judge_context(uncached):
        first = dspy.Predict(Verdict)(context=CONTEXT, statement=statement)
        second = dspy.Predict(Verdict)(context=CONTEXT, statement=statement)
    assert first.toDict() == second.toDict()
    cached = local_lm()
    with judge_context(cached):
        dspy.Predict(Verdict)(context=CONTEXT, statement=statement)
        start = time.perf_counter()
        again = dspy.Predict(Verdict)(context=CONTEXT, statement=statement)
        elapsed = time.perf_counter() - start
    assert again.toDict() == first.toDict()
    assert elapsed < 0.5  # served from DSPy's cache, no generation


def test_max_tokens_is_honoured():
    lm = local_lm(cache=False, max_tokens=4)
    with judge_context(lm):
        with pytest.raises(Exception):
            dspy.Predict(Verdict)(context=CONTEXT, statement="Einstein was born in 1879.")
    assert lm.history[-1]["usage"]["completion_tokens"] <= 4


def test_log_probabilities_are_returned():
    lm = local_lm(cache=False, logprobs=True, top_logprobs=5)
    with judge_context(lm):
        out = dspy.Predict(Verdict)(context=CONTEXT, statement="Einstein was born in Ulm.")
    tokens = out.logprobs["content"]
    assert tokens and all(t["logprob"] <= 0 for t in tokens)
    assert all(len(t["top_logprobs"]) <= 5 for t in tokens)


def test_embedder_ranks_a_paraphrase_above_an_unrelated_sentence():
    embedder = resolve_embedder()
    sims = embedder.similarity(["Where was Einstein born?"], ["What is Einstein's birthplace?", "I like green tea."])[0]
    assert sims[0] > sims[1]
    assert resolve_embedder() is not None and embedder.embed(["a", "b"]).shape == (2, 384)


SAMPLE = SingleTurnSample(
    user_input="When and where was Albert Einstein born?",
    response="Albert Einstein was born in Germany on 20 March 1879.",
    retrieved_contexts=[CONTEXT, "He grew up in Munich."],
    reference="Albert Einstein was born on 14 March 1879 in Ulm, Germany.",
)

JUDGES = {
    "faithfulness": (lambda lm: rag.Faithfulness(lm=lm), ["claims", "verdicts"]),
    "response_relevancy": (lambda lm: rag.ResponseRelevancy(lm=lm), ["questions", "similarities"]),
    "context_precision": (lambda lm: rag.LLMContextPrecisionWithReference(lm=lm), ["useful", "reasons"]),
    "context_utilization": (lambda lm: rag.LLMContextPrecisionWithoutReference(lm=lm), ["useful"]),
    "context_recall": (lambda lm: rag.LLMContextRecall(lm=lm), ["claims", "verdicts"]),
    "context_entity_recall": (lambda lm: rag.ContextEntityRecall(lm=lm), ["reference_entities", "context_entities"]),
    "noise_sensitivity": (lambda lm: rag.NoiseSensitivity(lm=lm), ["response_claims", "relevant_contexts"]),
    "answer_correctness": (lambda lm: rag.AnswerCorrectness(lm=lm), ["f1", "similarity", "tp", "fp", "fn"]),
    "factual_correctness": (lambda lm: rag.FactualCorrectness(lm=lm), ["precision", "recall"]),
    "context_relevancy": (lambda lm: rag.ContextRelevancy(lm=lm), ["context_sentences", "relevant_sentences"]),
}


@pytest.mark.parametrize("name", sorted(JUDGES))
def test_every_rag_judge_runs_on_the_embedded_lm(name):
    make, intermediates = JUDGES[name]
    result = make(lm=local_lm(cache=False)).score(SAMPLE)
    assert math.isfinite(result.score) and 0.0 <= result.score <= 1.0
    for key in intermediates:
        assert key in result.keys(), key


def test_semantic_similarity_on_the_embedded_embedder():
    result = rag.SemanticSimilarity().score(SAMPLE)
    assert 0.5 < result.score <= 1.0


def test_log_probabilities_give_smooth_verdicts():
    judge = rag.Faithfulness(lm=local_lm(cache=False), use_logprobs=True)
    result = judge.score(SAMPLE)
    assert all(0.0 <= row["probability"] <= 1.0 for row in result.verdicts)
    assert result.score == pytest.approx(sum(row["probability"] for row in result.verdicts) / len(result.verdicts))


def _shortest_tau_bench_run():
    from calibration.data.loaders import load_tau_bench

    data = load_tau_bench()
    return min(data.dataset, key=lambda s: len(s.pretty_repr(400)))


def _judges_for_other_families():
    from judges import (
        AgentGoalAccuracyWithoutReference,
        AgentGoalAccuracyWithReference,
        AnswerAccuracy,
        AspectCritic,
        ContextRelevance,
        InstanceRubrics,
        LLMSQLEquivalence,
        ResponseGroundedness,
        RubricsScore,
        SimpleCriteriaScore,
        SummarizationScore,
        TopicAdherenceScore,
    )

    return {
        "answer_accuracy": (AnswerAccuracy, SAMPLE),
        "context_relevance": (ContextRelevance, SAMPLE),
        "response_groundedness": (ResponseGroundedness, SAMPLE),
        "aspect_critic": (lambda lm: AspectCritic(name="concise", definition="Is the response one sentence?", lm=lm,
                                                  strictness=3), SAMPLE),
        "simple_criteria": (lambda lm: SimpleCriteriaScore(name="q", definition="Completeness", lm=lm), SAMPLE),
        "rubrics": (lambda lm: RubricsScore(lm=lm), SAMPLE),
        "instance_rubrics": (InstanceRubrics, SingleTurnSample(
            response=SAMPLE.response, rubrics={"score0_description": "wrong date", "score1_description": "right date"})),
        "topic_adherence": (lambda lm: TopicAdherenceScore(lm=lm, mode="f1"), "science"),
        "goal_with_reference": (AgentGoalAccuracyWithReference, "tau"),
        "goal_without_reference": (AgentGoalAccuracyWithoutReference, "tau"),
        "summarization": (SummarizationScore, SingleTurnSample(
            response="Einstein, a German-born physicist, was born in 1879.", reference_contexts=[CONTEXT])),
        "sql_equivalence": (LLMSQLEquivalence, SingleTurnSample(
            response="SELECT name FROM users WHERE age > 30", reference="SELECT name FROM users WHERE age >= 31",
            reference_contexts=["CREATE TABLE users (id INT PRIMARY KEY, name TEXT, age INT)"])),
    }


@pytest.mark.parametrize("name", sorted(_judges_for_other_families()))
def test_every_other_llm_judge_runs_on_the_embedded_lm(name):
    from judges import AIMessage, HumanMessage, MultiTurnSample

    make, sample = _judges_for_other_families()[name]
    if sample == "tau":
        sample = _shortest_tau_bench_run()
    elif sample == "science":
        sample = MultiTurnSample(
            user_input=[HumanMessage(content="What is the speed of light?"), AIMessage(content="About 300,000 km/s."),
                        HumanMessage(content="Any cake recipe?"), AIMessage(content="Sorry, I only answer science questions.")],
            reference_topics=["science"])
    result = make(lm=local_lm(cache=False)).score(sample)
    assert math.isfinite(result.score) and 0.0 <= result.score <= 1.0
    if name == "sql_equivalence":
        assert result.execution_equivalent is True  # age > 30 and age >= 31 agree on integers



@pytest.mark.long(why='the main job end to end: the embedded LM judges 4 turns beside the verifier judge (real LM calls)')
@pytest.mark.usefixtures("mlflow_store")  # logs to tmp_path/runs/mlflow.db
def test_cli_calibrates_the_verifier_judge_with_the_lm_judge_beside_on_the_bundled_begin_slice(tmp_path, capsys):
    """The main job, shrunk: the real verifier judge calibrated on 8 labels, measured on 4, the real embedded LM
    judge scored beside it on the same 4."""
    import json

    from calibration.agreement.record import CalibrationRun
    from judges_app.cli import main

    out = tmp_path / "cal"
    assert main(["calibrate", "begin-slice", "--judge", "faithfulness_with_verifier", "--beside", "faithfulness",
                 "--n-train", "8", "--n-test", "4", "--calibrator", "platt", "--n-bootstrap", "50", "--out", str(out),
                 "--runs-dir", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    assert "optimizers ['none']" in printed and "judge as shipped + platt calibration" in printed
    assert "beside: faithfulness" in printed and "beside: faithfulness: " in printed.split("LM use")[1]
    run = CalibrationRun.load(out / "calibration_run.json")
    assert len(run.labels) == 4 and set(run.scores) >= {"baseline: token overlap", "judge as shipped"}
    judged = [k for k in run.scores if not k.startswith("baseline")]
    assert judged == ["judge as shipped", "beside: faithfulness", "judge as shipped + platt calibration"]
    assert all(v is None or 0.0 <= v <= 1.0 for k in judged for v in run.scores[k])
    saved = json.loads((out / "compiled_faithfulness_with_verifier_none.json").read_text())
    assert saved["calibrator"]["kind"] == "platt" and (out / "report" / "index.html").is_file()
    assert "lm" not in saved["report"]  # no LM step: nothing to record
    assert "nothing was learned" in saved["report"]["calibrator"]["scores"]


BEGIN_TURNS = 3  # real decoding of this many BEGIN turns backs the engine tests below


def judge_begin_turns(name: str, **engine_settings) -> dict:
    """Faithfulness on the first BEGIN turns through a fresh llama.cpp engine at temperature 0: each item's score
    and verdicts, the raw answers, the drafted batches and the seconds it took."""
    from calibration.data.loaders import load_begin_slice
    from judges import Faithfulness
    from judges.lm.engine import LlamaCppEngine
    from judges.lm.files import embedded_model_file

    engine = LlamaCppEngine(embedded_model_file(), **engine_settings)
    lm = dspy.LM(f"llamacpp/{name}", engine=engine, temperature=0.0, max_tokens=1024, cache=False)
    start = time.perf_counter()
    results = [Faithfulness(lm=lm).score(s) for s in list(load_begin_slice().dataset)[:BEGIN_TURNS]]
    seconds = time.perf_counter() - start
    drafted = sum(llama.draft_batches for llama in engine._llamas.values())
    engine.close()
    return {"results": results, "outcomes": [(r.score, [v["supported"] for v in r.verdicts]) for r in results],
            "answers": [h["outputs"] for h in lm.history], "drafted": drafted, "seconds": seconds}


@pytest.fixture(scope="session")
def default_engine_turns():
    """The default engine's decoding of the BEGIN turns, shared by the tests that compare another engine to it
    (they run in one test process: ``xdist_group("default_engine")``)."""
    return judge_begin_turns("default")


@pytest.mark.xdist_group("default_engine")
@pytest.mark.long(why='the first llama.cpp engine judges 3 turns with Faithfulness: equal verdicts need real decoding')
def test_the_fast_engine_gives_the_same_verdicts_as_the_first_one(default_engine_turns):
    """Keeping each judge step's instructions evaluated in a context of its own, testing the grammar on the
    best token first and choosing decode threads by timing must not change an answer at temperature 0: BEGIN
    turns, Faithfulness, the first engine (one context, llama.cpp's grammar sampler, fixed threads) vs the
    default (benchmarks/engine_speed.py compares them on more turns)."""
    first = judge_begin_turns("first", prefix_contexts=1, grammar_best_first=False, adaptive_threads=False)
    assert first["outcomes"] == default_engine_turns["outcomes"]
    print(f"\n{BEGIN_TURNS} items: the first engine {first['seconds']:.1f} s, "
          f"the default {default_engine_turns['seconds']:.1f} s")


@pytest.mark.xdist_group("default_engine")
@pytest.mark.long(why='drafting is checked on real decoding of 3 turns')
def test_prompt_lookup_drafting_checks_drafts_and_keeps_most_verdicts(default_engine_turns):
    """Drafting (opt-in, not exact: batched logits differ from single steps) on BEGIN turns: drafted tokens are
    evaluated in batches, every answer still parses into verdicts, and most items keep the verdicts decoding
    token by token gives (28 of 30 in the benchmark)."""
    drafting = judge_begin_turns("drafting", draft_tokens=7)
    assert all(0.0 <= r.score <= 1.0 and r.verdicts for r in drafting["results"])
    assert default_engine_turns["drafted"] == 0 and drafting["drafted"] > 0
    same = sum(a == b for a, b in zip(default_engine_turns["outcomes"], drafting["outcomes"]))
    assert same >= BEGIN_TURNS - 1, drafting["outcomes"]
    unchanged = sum(a == b for a, b in zip(default_engine_turns["answers"], drafting["answers"]))
    print(f"\ndrafting: {drafting['drafted']} drafted batches; {same}/{BEGIN_TURNS} items with the same verdicts, "
          f"{unchanged}/{len(drafting['answers'])} answers unchanged")


@pytest.mark.long(why="decodes with llama.cpp's own grammar sampler and ours, token by token")
def test_grammar_best_first_picks_llama_cpps_tokens_testing_far_fewer():
    """GreedyGrammarSampler against llama.cpp's own chain (grammar over the whole vocabulary, then greedy):
    the same completion token for token, while the whole vocabulary is tested on a minority of steps."""
    from llama_cpp import Llama, LlamaGrammar

    from judges.lm.engine import judge_llama_class, weight_repacking
    from judges.lm.threads import usable_cores
    from judges.lm.files import embedded_gguf_path

    schema = {"type": "object", "properties": {
        "reason": {"type": "string", "maxLength": 200},
        "verdicts": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {
            "claim": {"type": "string", "maxLength": 80}, "supported": {"type": "boolean"},
            "confidence": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["claim", "supported", "confidence"]}}},
        "required": ["reason", "verdicts"]}
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    prompts = ["Context: The Eiffel Tower was completed in 1889 in Paris.\nClaims: it is in Paris; it was built in 1899.",
               "Context: 水は摂氏100度で沸騰する。\nClaims: 水は100度で沸騰する; 氷は熱い。"]
    texts = {}
    for cls in (Llama, judge_llama_class()):
        with weight_repacking():
            llama = cls(model_path=str(embedded_gguf_path()), n_ctx=1024, n_threads=usable_cores(), verbose=False)
        texts[cls] = []
        for prompt in prompts:
            out = llama.create_chat_completion(messages=[{"role": "user", "content": prompt}], temperature=0.0,
                                               max_tokens=160, grammar=grammar)
            texts[cls].append(out["choices"][0]["message"]["content"])
            if cls is not Llama:
                assert 0 < llama._sampler.tier_checks + llama._sampler.full_checks < llama._sampler.steps / 2
        llama.close()
    assert texts[Llama] == texts[judge_llama_class()]
    assert all(t.lstrip().startswith('{') for t in texts[Llama])  # grammar-shaped (may stop at max_tokens)


def test_the_re_encoded_weights_are_the_shipped_model_within_rounding():
    """The embedded model runs re-encoded as Q8_0 (faster kernels); next-token distributions over judge-like
    prompts stay those of the shipped Q4_1 file: mean KL under 0.02 nats and the same top token at least
    93% of the time (measured 0.006 and 96.6% on 3,067 BEGIN tokens; a Q4_0 re-encoding, another model
    in effect, gives 0.32 and 74%)."""
    import numpy as np
    from llama_cpp import Llama

    from calibration.data.loaders import load_begin_slice
    from judges.lm.engine import weight_repacking
    from judges.lm.threads import usable_cores
    from judges.lm.files import embedded_gguf_path, embedded_model_file

    prompts = [f"<|im_start|>user\nContext: {s.retrieved_contexts[0]}\nResponse: {s.response}\nIs the response "
               f"supported by the context?<|im_end|>\n<|im_start|>assistant\n" for s in list(load_begin_slice().dataset)[:6]]

    def log_probabilities(path):
        with weight_repacking():
            llama = Llama(model_path=str(path), n_ctx=1024, n_threads=usable_cores(), logits_all=True, verbose=False)
        rows = []
        for prompt in prompts:
            tokens = llama.tokenize(prompt.encode(), special=True)
            llama.reset()
            llama.eval(tokens)
            logits = np.array(llama.scores[: len(tokens)], dtype=np.float64)
            logits -= logits.max(axis=1, keepdims=True)
            rows.append(logits - np.log(np.exp(logits).sum(axis=1, keepdims=True)))
        llama.close()
        return np.concatenate(rows)

    shipped, reencoded = log_probabilities(embedded_gguf_path()), log_probabilities(embedded_model_file())
    kl = (np.exp(shipped) * (shipped - reencoded)).sum(axis=1)
    same_top = float(np.mean(shipped.argmax(axis=1) == reencoded.argmax(axis=1)))
    print(f"\n{len(kl)} tokens: mean KL {kl.mean():.4f}, same top token {same_top:.3f}")
    assert len(kl) > 250 and kl.mean() < 0.02 and same_top >= 0.93
