"""LM and embedder resolution and the engine's parts, without running any model."""

import json
import os

import dspy
import numpy as np
import pytest
from dspy.utils import DummyLM

from judges.lm.embeddings import Embedder, resolve_embedder
from judges.lm.engine import LlamaCppEngine, weight_repacking
from judges.lm.files import (
    embedded_embedder_path,
    embedded_gguf_path,
    embedded_model_file,
    reencoded_gguf,
)
from judges.lm.resolve import (
    is_local_lm,
    judge_context,
    local_lm,
    resolve_adapter,
    resolve_lm,
)
from judges.lm.sampling import GreedyGrammarSampler, PromptLookup
from judges.lm.schemas import bounded_schema, output_constraints
from judges.lm.threads import DecodeThreads, runnable_elsewhere, usable_cores


def test_embedded_files_are_found_inside_their_packages():
    assert embedded_gguf_path().suffix == ".gguf"
    assert (embedded_embedder_path() / "modules.json").exists()


def test_litellm_strings_go_to_dspy_lm_unchanged():
    lm = resolve_lm("openai/gpt-4o-mini")
    assert isinstance(lm, dspy.LM) and lm.model == "openai/gpt-4o-mini"
    assert not is_local_lm(lm)
    assert resolve_adapter(lm) is None  # DSPy's default adapter, as for any LM


def test_embedded_and_gguf_strings_use_the_in_process_engine():
    lm = resolve_lm("embedded")
    assert is_local_lm(lm) and lm.model == "llamacpp/smollm2-135m-instruct-q8_0"
    assert isinstance(resolve_adapter(lm), dspy.JSONAdapter)
    by_path = resolve_lm(str(embedded_model_file()))
    assert is_local_lm(by_path) and by_path.engine is lm.engine  # one loaded model per file per process
    shipped = resolve_lm(str(embedded_gguf_path()))  # a file named by path runs as it is
    assert shipped.engine.model_path == str(embedded_gguf_path().resolve()) and shipped.engine is not lm.engine
    with pytest.raises(FileNotFoundError):
        LlamaCppEngine("/nonexistent/model.gguf")


def test_none_prefers_the_configured_lm():
    scripted = DummyLM([{"answer": "x"}])
    with dspy.context(lm=scripted):
        assert resolve_lm(None) is scripted
        with judge_context() as lm:
            assert lm is scripted
    with pytest.raises(TypeError, match="lm must be"):
        resolve_lm(42)


def test_the_embedded_model_is_re_encoded_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DSPY_JUDGES_CACHE", str(tmp_path / "cache"))
    first = embedded_model_file()
    assert first.parent == tmp_path / "cache" and ".q8_0." in first.name and first.stat().st_size > 100e6
    made = first.stat().st_mtime_ns
    assert embedded_model_file() == first and first.stat().st_mtime_ns == made  # reused, not made again
    assert list((tmp_path / "cache").iterdir()) == [first]  # no partial file left beside it
    assert embedded_model_file("as-is") == embedded_gguf_path()
    lm = local_lm(weights="as-is")
    assert lm.model == "llamacpp/smollm2-135m-instruct" and lm.engine.model_path == str(embedded_gguf_path().resolve())
    with pytest.raises(ValueError, match="weights='q5'"):
        reencoded_gguf(embedded_gguf_path(), "q5")


def test_an_unwritable_cache_runs_the_shipped_weights_and_says_why(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("DSPY_JUDGES_CACHE", str(tmp_path / "a-file" / "cache"))
    with pytest.warns(RuntimeWarning, match="runs as shipped.*re-encoding it as q8_0"):
        assert embedded_model_file() == embedded_gguf_path()
    with pytest.warns(RuntimeWarning):
        assert local_lm(n_ctx=1024).model == "llamacpp/smollm2-135m-instruct"  # the name says which weights ran


def test_engine_state_round_trips():
    engine = LlamaCppEngine(embedded_gguf_path(), n_ctx=2048, max_items=8)
    again = LlamaCppEngine.load_state(engine.dump_state())
    assert again.dump_state() == engine.dump_state()
    with pytest.raises(ValueError, match="model_path"):
        LlamaCppEngine.load_state({"n_ctx": 10})
    assert local_lm(n_ctx=2048).engine.n_ctx == 2048
    drafted = local_lm(draft_tokens=7)
    assert drafted.engine.draft_tokens == 7 and drafted.model.endswith("-q8_0-draft7")
    assert local_lm().engine.draft_tokens == 0 and drafted.engine is not local_lm().engine
    with pytest.raises(ValueError, match="draft_tokens"):
        LlamaCppEngine(embedded_gguf_path(), draft_tokens=512)
    assert LlamaCppEngine.load_state({**engine.dump_state(), "repack_weights": False}).repack_weights is False
    with pytest.raises(ValueError, match="repack_weights"):
        LlamaCppEngine(embedded_gguf_path(), repack_weights="no")


def test_weight_repacking_is_off_where_the_cpu_offers_amx_and_restored_after(monkeypatch):
    """llama.cpp's AMX repacked weights crash the first prompt batch on an AMX VM here (issue 20824), and
    llama-cpp-python's Llama has no argument for it: the block sets it on the defaults Llama starts from."""
    import llama_cpp.llama_cpp as bindings

    from judges.lm import engine as engine_module

    original = bindings.llama_model_default_params
    assert original().use_extra_bufts is True  # llama.cpp's default
    with weight_repacking(False):
        assert bindings.llama_model_default_params().use_extra_bufts is False
    assert bindings.llama_model_default_params is original
    with pytest.raises(RuntimeError), weight_repacking(False):
        raise RuntimeError("a failed load")
    assert bindings.llama_model_default_params is original
    for amx, repacked in ((True, False), (False, True)):
        monkeypatch.setattr(engine_module, "cpu_offers_amx", lambda amx=amx: amx)
        with weight_repacking():
            assert bindings.llama_model_default_params().use_extra_bufts is repacked
        with weight_repacking(True):
            assert bindings.llama_model_default_params().use_extra_bufts is True


def test_bounded_schema_caps_strings_arrays_and_ranged_integers():
    schema = {
        "type": "object",
        "properties": {
            "reason": {"type": "string"},
            "label": {"type": "string", "enum": ["a", "b"]},
            "claims": {"type": "array", "items": {"type": "string"}},
            "score": {"type": "integer", "minimum": 0, "maximum": 4},
            "count": {"type": "integer"},
        },
        "$defs": {"V": {"type": "object", "properties": {"why": {"type": "string", "maxLength": 50}}}},
    }
    out = bounded_schema(schema, max_string_chars=100, max_items=5)
    props = out["properties"]
    assert props["reason"]["maxLength"] == 100
    assert "maxLength" not in props["label"]
    assert props["claims"]["maxItems"] == 5 and props["claims"]["items"]["maxLength"] == 100
    assert props["score"]["enum"] == [0, 1, 2, 3, 4] and "minimum" not in props["score"]
    assert props["count"] == {"type": "integer"}
    assert out["$defs"]["V"]["properties"]["why"]["maxLength"] == 50  # a tighter bound of its own stays
    tight = bounded_schema(schema, max_string_chars=20, max_items=2)
    assert tight["$defs"]["V"]["properties"]["why"]["maxLength"] == 20  # the fallback tightens it too
    assert schema["properties"]["reason"] == {"type": "string"}  # the input is not modified


def test_output_constraints_nest_and_reset():
    from judges.lm.schemas import current_output_constraints

    with output_constraints(verdicts={"maxItems": 2}):
        with output_constraints(questions={"minItems": 3}):
            assert set(current_output_constraints()) == {"verdicts", "questions"}
        assert set(current_output_constraints()) == {"verdicts"}
    assert current_output_constraints() == {}


def test_embedder_wraps_callables_and_encoders_with_unit_norm_batches():
    calls = []

    def encode(texts):
        calls.append(len(texts))
        return np.array([[len(t), 1.0] for t in texts])

    embedder = Embedder(encode, name="fake", batch_size=2)
    vectors = embedder.embed(["a", "bb", "ccc"])
    assert calls == [2, 1]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert embedder.similarity(["a"], ["a", "bb"]).shape == (1, 2)
    # a float32 unit vector dotted with itself can come out at 1.0000001; similarity stays in [-1, 1]
    rounding = np.random.default_rng(0).normal(size=(4, 384)).astype(np.float32)
    rounding /= np.linalg.norm(rounding, axis=1, keepdims=True)
    assert (rounding[3] @ rounding[3]) > 1.0
    same = Embedder(lambda texts: rounding[[3] * len(texts)], name="rounding")
    assert same.similarity(["x"], ["x"])[0, 0] == 1.0

    class Encoder:
        def encode(self, texts):
            return np.ones((len(texts), 3))

    assert resolve_embedder(Encoder()).embed(["x"]).shape == (1, 3)
    assert resolve_embedder(encode).name == "encode"
    assert resolve_embedder(embedder) is embedder
    with pytest.raises(TypeError, match="embeddings must be"):
        resolve_embedder(3.5)


def test_engine_regenerates_a_truncated_json_answer_under_tighter_bounds():
    from dspy.lm15 import Config, Message, Request

    engine = LlamaCppEngine(embedded_gguf_path(), max_string_chars=400, max_items=16)

    class FakeLlama:
        def __init__(self):
            self.grammars = []

        def create_chat_completion(self, grammar=None, **kwargs):
            self.grammars.append(grammar)
            finish = "length" if len(self.grammars) == 1 else "stop"
            text = '{"claims": ["a long cut-off' if finish == "length" else '{"claims": ["short"]}'
            return {"choices": [{"message": {"content": text}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 100 if finish == "length" else 7}}

    fake = FakeLlama()
    engine._context = lambda logprobs=False, family="": fake  # no model is loaded
    schema = {"type": "object", "properties": {"claims": {"type": "array", "items": {"type": "string"}}}}
    request = Request(model="x", messages=(Message.user("hi"),),
                      config=Config(max_tokens=100, response_format={"type": "json_schema", "schema": schema, "name": "o"}))
    response = engine.complete(request)
    assert len(fake.grammars) == 2 and fake.grammars[0] is not fake.grammars[1]
    assert response.text == '{"claims": ["short"]}' and response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 107)
    tiny = Request(model="x", messages=(Message.user("hi"),),
                   config=Config(max_tokens=8, response_format={"type": "json_schema", "schema": schema, "name": "o"}))
    fake.grammars.clear()
    assert engine.complete(tiny).finish_reason == "length" and len(fake.grammars) == 1  # small budgets: no retry


def test_bounds_never_contradict_minimums():
    out = bounded_schema({"type": "array", "minItems": 20, "items": {"type": "string", "minLength": 50}}, 10, 4)
    assert out["maxItems"] == 20 and out["items"]["maxLength"] == 50
    exact = bounded_schema({"type": "array", "minItems": 20, "maxItems": 20}, 10, 4)
    assert exact["maxItems"] == 20  # an exact count (one verdict per claim) is never cut


def test_salvage_closes_a_cut_off_answer_and_drops_the_unfinished_item():
    from judges.lm.schemas import salvage_json

    schema = {
        "type": "object", "required": ["verdicts"],
        "properties": {"verdicts": {"type": "array", "items": {"$ref": "#/$defs/V"}}},
        "$defs": {"V": {"type": "object", "required": ["claim", "supported"],
                        "properties": {"claim": {"type": "string"}, "supported": {"type": "boolean"}}}},
    }
    cut = '{"verdicts": [{"claim": "a", "supported": true}, {"claim": "b", "supported": false}, {"claim": "c", "reas'
    assert json.loads(salvage_json(cut, schema)) == {"verdicts": [{"claim": "a", "supported": True},
                                                                  {"claim": "b", "supported": False}]}
    two_fields = {"type": "object", "required": ["reason", "verdict"],
                  "properties": {"reason": {"type": "string"}, "verdict": {"type": "boolean"}}}
    assert salvage_json('{"reason": "it goes on and on', two_fields) is None  # a required field never came


def test_decode_threads_drop_to_one_while_the_cores_are_shared_and_come_back():
    others = {"running": 0}
    governor = DecodeThreads(2, probe_steps=2, first_interval=8, max_interval=32, others_running=lambda: others["running"])
    cost = {2: 0.008, 1: 0.013}  # seconds per decode step alone (measured here: 8 and 13 ms)
    used: list[int] = []

    def run(steps):
        for _ in range(steps):
            threads = governor.threads()
            used.append(threads)
            governor.record(threads, cost[threads])

    run(100)
    assert governor.best == 2 and governor.switches == 0
    assert used.count(1) == 8  # tries of one thread after 8, 16, 32 and 32 steps, two steps each
    cost[2] = 0.2  # one spike alone triggers a try, which loses: no switch
    run(1)
    cost[2] = 0.008
    run(20)
    assert governor.best == 2 and governor.switches == 0
    cost.update({2: 0.332, 1: 0.022})  # a program using both cores arrives (measured: 332 and 22 ms)
    others["running"] = 2
    used.clear()
    run(60)
    assert governor.best == 1 and used[:15].count(2) == 5  # switched once slow steps were most of the last 9
    assert used.count(2) == 7 and governor.costly_up  # one try of two threads (two steps), 15x slower:
    assert 2 not in used[-30:]  # no more tries while the program runs
    cost.update({2: 0.008, 1: 0.013})  # it leaves
    others["running"] = 0
    run(100)
    assert governor.best == 2 and governor.switches == 2
    assert DecodeThreads(1).threads() == 1  # one core: nothing to choose
    assert runnable_elsewhere() is None or runnable_elsewhere() >= 0


def test_thread_counts_follow_the_cores_the_process_may_use():
    """A process pinned to one core (taskset, a container's cpuset, a test worker) computes with one thread:
    llama.cpp's default, ONNX Runtime's sessions and torch training all read ``usable_cores``."""
    import subprocess
    import sys

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    assert usable_cores() == len(os.sched_getaffinity(0))
    script = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
              "from judges.lm.threads import usable_cores\n"
              "from judges.lm.engine import LlamaCppEngine\n"
              "from judges.lm.files import embedded_gguf_path\n"
              "print(usable_cores(), LlamaCppEngine(embedded_gguf_path()).n_threads)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["1", "1"]


def test_grammar_tiers_pick_the_token_testing_the_whole_vocabulary_picks():
    """When the best token is rejected, GreedyGrammarSampler tests the 64 and then 1,024 best tokens before
    the whole vocabulary: the same token (the highest logit allowed, the lowest id among equals) whichever
    tier finds it, including ties inside a tier and at its edge."""
    from llama_cpp import Llama, LlamaGrammar

    llama = Llama(model_path=str(embedded_gguf_path()), vocab_only=True, verbose=False)  # the tokenizer only
    n_vocab = llama.n_vocab()
    schema = {"type": "object", "properties": {"supported": {"type": "boolean"}}, "required": ["supported"]}
    sampler = GreedyGrammarSampler(llama._model.vocab, LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False),
                                   n_vocab)

    def whole_vocabulary(logits):
        sampler._all_view["logit"] = logits
        sampler._allowed(sampler._all, n_vocab)
        return int(np.argmax(sampler._all_view["logit"]))

    sampler._all_view["logit"] = 0.0
    sampler._allowed(sampler._all, n_vocab)
    allowed = np.flatnonzero(sampler._all_view["logit"] > -np.inf)
    assert 0 < allowed.size < 100  # an object must open: a few tokens of 49,152
    rng = np.random.default_rng(0)
    for rank in (3, 40, 300, 900, 5000, 30000):
        logits = rng.normal(size=n_vocab).astype(np.float32)
        order = np.argsort(-logits)
        logits[allowed] = logits[order[rank]] - 1e-3 * np.arange(1, allowed.size + 1)  # best allowed: ~rank
        full_checks = sampler.full_checks
        assert sampler._best_allowed(logits) == whole_vocabulary(logits) == allowed[0]
        assert (sampler.full_checks > full_checks) == (rank > 1024), rank  # the tiers found it when they hold it
    logits = np.zeros(n_vocab, dtype=np.float32)  # every token ties: a tier cannot know the lowest id
    assert sampler._best_allowed(logits) == whole_vocabulary(logits) == allowed.min()
    logits[allowed[-2:]] = 5.0  # two allowed tokens tie at the top: the lower id
    assert sampler._best_allowed(logits) == whole_vocabulary(logits) == allowed[-2]
    logits[:] = -1.0  # 63 rejected tokens on top, then two allowed ones tied for the tier's last place
    logits[np.setdiff1d(np.arange(n_vocab), allowed)[:63]] = 1.0
    logits[allowed[:2]] = 0.0  # (here NumPy's partition puts the higher id in the tier, the lower outside)
    assert sampler._best_allowed(logits) == whole_vocabulary(logits) == allowed[0]


def test_prompt_lookup_drafts_what_followed_the_latest_longest_match():
    lookup = PromptLookup(max_tokens=3, min_match=2, max_match=4)
    #                     0  1  2  3  4  5  6  7  8  9 10 11 12
    assert lookup([5, 1, 2, 9, 9, 1, 2, 7, 8, 6, 3, 1, 2]).tolist() == [7, 8, 6]  # [1, 2]: the later match
    assert lookup([1, 2, 3, 4, 0, 0, 9, 3, 4, 5, 6, 2, 3, 4]).tolist() == [0, 0, 9]  # [2, 3, 4] beats a later [3, 4]
    assert lookup([1, 2, 3, 1, 2]).tolist() == [3, 1, 2]
    assert lookup([1, 2, 3, 4, 5]).size == 0 and lookup([7]).size == 0  # no match of 2 tokens
    assert lookup([4, 4, 4]).tolist() == [4]  # the match may overlap the tail; something must follow it
    for bad in (dict(max_tokens=0), dict(min_match=True), dict(min_match=3, max_match=2)):
        with pytest.raises(ValueError, match="PromptLookup"):
            PromptLookup(**bad)
