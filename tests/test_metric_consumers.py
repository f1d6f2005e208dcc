"""One exported metric read right by every DSPy consumer, and no judge failure read as a score.

Through the real DSPy classes with scripted program and judge LMs: a judge whose LM cannot judge (no key, a
dead endpoint) or a degraded judgment under ``on_degraded="fail"`` stops Evaluate, GEPA and SIMBA with one
message and cancels the program calls still queued; ``judges_context`` holds in DSPy's worker threads;
SIMBA, ``dspy.Refine`` and ``dspy.BestOfN`` read the score and pass the feedback on; GEPA gets per-step
feedback and a combined metric's parts as objective scores; the cache follows the judge's LM and compiled
state; a judge is its own default metric; an exported metric pickles and resets."""

import json
import logging
import pickle
import sys
import threading
import time
import warnings
from pathlib import Path

import dspy
import orjson
import pytest

from judges import (
    CombinedMetric,
    DegradedJudgmentError,
    ExactMatch,
    Faithfulness,
    JudgeLMWarning,
    JudgeUnavailableError,
    MetricConfigurationError,
    MetricScore,
    MetricStop,
    NonLLMStringSimilarity,
    StringPresence,
    configure_judges,
    judges_context,
)
from judges.lm.served import ServedLM

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402
from test_metrics_in_optimizers import (  # noqa: E402
    ANSWERS,
    FIELDS,
    Reflections,
    no_verdict_judge,
    program_lm,
    similarity,
    trainset,
)
from test_optimizers import placeholder_fields  # noqa: E402

GROUNDED = {"response": "pred.answer", "retrieved_contexts": "example.answer"}


def judge_lm(supported=True):
    """A judge LM that extracts the answer as one claim and gives it one verdict."""

    def respond(prompt):
        asked = prompt.split("Your output fields are:")[-1]
        if "`verdicts`" in asked:
            return {"verdicts": json.dumps([{"claim": "c", "reason": "scripted", "supported": supported}])}
        if "`claims`" in asked:
            return {"claims": json.dumps([prompt.split("[[ ## text ## ]]")[-1].strip().split("\n")[0]])}
        return placeholder_fields(prompt)

    return scripted_lm(respond)


class CountingProgram:
    """A program LM that counts its calls and takes a little time per call (so a pool has a queue)."""

    def __init__(self, delay=0.05):
        self.calls, self.other_calls, self.delay, self._lock = 0, 0, delay, threading.Lock()
        self.lm = scripted_lm(self.respond)

    def respond(self, prompt):
        asks_answer = "`answer`" in prompt.split("Your output fields are:")[-1][:200]
        with self._lock:  # a judge that borrows this LM is counted apart from the program
            self.calls += asks_answer
            self.other_calls += not asks_answer
        time.sleep(self.delay)
        return {"answer": "Paris"} if asks_answer else placeholder_fields(prompt)


def devset(n=20):
    return [dspy.Example(question=f"Question {i}?", answer="Paris is the capital of France.").with_inputs("question")
            for i in range(n)]


def dead_endpoint_lm():
    """A served LM at a port nothing listens on, no retries: it cannot be reached."""
    return ServedLM("openai/judge", api_base="http://127.0.0.1:9/v1", api_key="test", retries=0,
                    request_timeout=2.0)


# --- 1 and 6: a judge that cannot judge stops the run, and the queued program calls are cancelled ----------

@pytest.mark.parametrize("threads", [1, 4])
def test_a_judge_without_a_key_stops_evaluate_and_cancels_the_queued_program_calls(monkeypatch, threads):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    program = CountingProgram(delay=0.2)  # DSPy submits every item before the first can fail
    metric = Faithfulness().as_metric(field_map=GROUNDED)
    configure_judges(lm="openai/gpt-4o-mini")
    try:
        with dspy.context(lm=program.lm), pytest.raises(JudgeUnavailableError) as stopped:
            dspy.Evaluate(devset=devset(), metric=metric, num_threads=threads, display_progress=False)(
                dspy.Predict("question -> answer"))
        calls_at_stop = program.calls
    finally:
        configure_judges(lm=None)  # the items still in flight would now borrow the program's LM, if judged
    time.sleep(3 * program.delay + 0.2)
    message = str(stopped.value)
    assert message.startswith("faithfulness: its LM openai/gpt-4o-mini cannot judge")
    assert "API key" in message and isinstance(stopped.value, MetricStop)
    # the items in flight, not the 20 queued; none starts after the stop, and no judge borrows the program LM
    assert calls_at_stop <= program.calls <= threads < len(devset()) and program.other_calls == 0
    if threads == 1:
        assert program.calls == 1


def test_a_dead_judge_endpoint_stops_gepa_instead_of_scoring_zero():
    reflections = Reflections()
    metric = Faithfulness(lm=dead_endpoint_lm()).as_metric(field_map=GROUNDED)
    with dspy.context(lm=program_lm()), pytest.raises(JudgeUnavailableError, match="after its retries"):
        dspy.GEPA(metric=metric, reflection_lm=reflections.lm, max_metric_calls=20, num_threads=1,
                  reflection_minibatch_size=2, seed=0).compile(dspy.Predict("question -> answer"),
                                                               trainset=trainset()[:4], valset=trainset()[:4])
    assert not reflections.prompts  # it never went on to reflect on zeros


def test_a_degraded_judgment_under_fail_stops_evaluate_and_simba():
    metric = Faithfulness(lm=no_verdict_judge()).as_metric(field_map=GROUNDED, on_degraded="fail")
    with dspy.context(lm=program_lm()):
        with pytest.raises(DegradedJudgmentError, match="verify: no verdict"):
            dspy.Evaluate(devset=trainset(), metric=metric, num_threads=2, display_progress=False)(
                dspy.Predict("question -> answer"))
        with pytest.raises(DegradedJudgmentError):
            dspy.SIMBA(metric=metric, bsize=4, max_steps=1, num_candidates=2, max_demos=1, num_threads=1).compile(
                dspy.Predict("question -> answer"), trainset=trainset())


@pytest.mark.integration
def test_an_answer_in_a_language_the_verifier_does_not_cover_is_degraded():
    from judges import FaithfulnessWithVerifier

    judge = FaithfulnessWithVerifier()
    example = dspy.Example(answer="巴黎是法国的首都。")
    pred = dspy.Prediction(answer="巴黎是法国的首都。")
    metric = judge.as_metric(field_map=GROUNDED)
    value = metric(example, pred)
    assert metric.degraded == 1 and value.degraded and "does not cover" in value.feedback
    with pytest.raises(DegradedJudgmentError, match="does not cover"):
        judge.as_metric(field_map=GROUNDED, on_degraded="fail")(example, pred)


def test_an_item_failure_of_the_judge_stays_an_item_failure():
    def too_long(prompt):
        from dspy.lm15 import ContextLengthError

        raise ContextLengthError("this prompt is too long for the model")

    metric = Faithfulness(lm=scripted_lm(too_long)).as_metric(field_map=GROUNDED)
    with pytest.raises(Exception, match="too long") as failed:
        metric(trainset()[0], dspy.Prediction(answer="Paris"))
    assert not isinstance(failed.value, MetricStop)


# --- 2: judges_context in DSPy's worker threads ---------------------------------------------------------

def test_judges_context_holds_in_evaluate_s_worker_threads():
    program = CountingProgram(delay=0)
    judge = judge_lm(supported=True)
    metric = Faithfulness().as_metric(field_map=GROUNDED)
    with dspy.context(lm=program.lm), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with judges_context(lm=judge):
            result = dspy.Evaluate(devset=devset(8), metric=metric, num_threads=4, display_progress=False)(
                dspy.Predict("question -> answer"))
    assert result.score == 100.0 and judge.engine.calls == 16  # two steps an item, on the judge's LM
    assert not [w for w in caught if issubclass(w.category, JudgeLMWarning)]


def test_the_borrowing_warning_names_an_open_judges_context_the_call_runs_outside():
    program = scripted_lm(lambda prompt: {"claims": '["Paris is the capital."]', "verdicts": json.dumps(
        [{"claim": "Paris is the capital.", "reason": "r", "supported": True}])})
    sample = {"response": "Paris is the capital.", "retrieved_contexts": ["Paris is the capital of France."]}
    caught = []

    def outside():  # a plain thread: neither DSPy's nor a copy of the block's context
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with dspy.context(lm=program):
                Faithfulness().named("outside_judge").score(sample)
        caught.extend(seen)

    with judges_context(lm="openai/gpt-4o-mini"):
        thread = threading.Thread(target=outside)
        thread.start()
        thread.join()
    message = " ".join(str(w.message) for w in caught if issubclass(w.category, JudgeLMWarning))
    assert "a judges_context(lm=...) block is open for 'openai/gpt-4o-mini'" in message


# --- 3 and 4: SIMBA, Refine and BestOfN ---------------------------------------------------------------

def alternating_lm():
    """The program answers every third call misspelled, so that SIMBA's two samples of an item can differ."""
    calls = []

    def respond(prompt):
        if "[[ ## question ## ]]" in prompt and "`answer`" in prompt.split("Your output fields are:")[-1][:200]:
            calls.append(1)
            country = next(c for c in ANSWERS if c in prompt.split("[[ ## question ## ]]")[-1])
            capital = ANSWERS[country][0]
            return {"answer": capital + "x" if len(calls) % 3 == 0 else capital}
        return placeholder_fields(prompt)

    return scripted_lm(respond)


def test_simba_reads_the_score_and_passes_the_feedback_to_its_advice():
    advisor = Reflections()  # SIMBA's prompt model: it records what it is asked
    metric = similarity()
    with dspy.context(lm=alternating_lm()):
        dspy.SIMBA(metric=metric, bsize=8, max_steps=1, num_candidates=2, max_demos=0, num_threads=1,
                   prompt_model=advisor.lm).compile(dspy.Predict("question -> answer"), trainset=trainset())
    advice = [p for p in advisor.prompts if "worse_reward_info" in p]
    assert advice, "SIMBA never asked for advice"
    text = "\n".join(advice)
    assert "non-serializable" not in text and "non_llm_string_similarity = 0." in text


def test_simba_scores_an_item_whose_program_raised_as_no_prediction():
    def flaky(prompt):
        if "Chile" in prompt and "`answer`" in prompt.split("Your output fields are:")[-1][:200]:
            raise TimeoutError("the tool timed out")
        return program_lm().engine.respond(prompt)

    metric = similarity()
    with dspy.context(lm=scripted_lm(flaky)):
        dspy.SIMBA(metric=metric, bsize=8, max_steps=1, num_candidates=2, max_demos=1, num_threads=1).compile(
            dspy.Predict("question -> answer"), trainset=trainset())
    assert metric.no_prediction > 0
    value = metric(trainset()[0], None)
    assert value == 0.0 and "no prediction" in value.feedback


def test_refine_and_best_of_n_read_the_reward_and_refine_sees_the_feedback():
    advisor_prompts = []
    answers = iter(["Tokyoo", "Tokyo", "Tokyo"])

    def respond(prompt):
        asked = prompt.split("Your output fields are:")[-1][:300]
        if "`answer`" in asked:
            return {"answer": next(answers)}
        advisor_prompts.append(prompt)
        return placeholder_fields(prompt)

    metric = NonLLMStringSimilarity().as_metric(threshold=0.9, field_map={"response": "pred.answer",
                                                                           "reference": "example.reference"})

    def reward(args, pred):  # Refine's reward_fn(args, pred): the reference is the reward function's own
        return metric({**args, "reference": "Tokyo"}, pred)

    with dspy.context(lm=scripted_lm(respond)):
        best = dspy.Refine(dspy.Predict("question -> answer"), N=3, reward_fn=reward, threshold=0.9)(
            question="What is the capital of Japan?")
    assert best.answer == "Tokyo"
    reflected = "\n".join(advisor_prompts)
    assert "non-serializable" not in reflected and "non_llm_string_similarity = 0.833" in reflected
    answers = iter(["Tokyoo", "Tokyo", "Tokyo"])
    with dspy.context(lm=scripted_lm(respond)):
        best = dspy.BestOfN(dspy.Predict("question -> answer"), N=3, reward_fn=reward, threshold=0.9)(
            question="What is the capital of Japan?")
    assert best.answer == "Tokyo"


def test_the_returned_value_serialises_and_reads_as_a_number_and_a_verdict():
    value = similarity()(trainset()[1], dspy.Prediction(answer="Tokyoo"))
    assert isinstance(value, dspy.Prediction) and isinstance(value, MetricScore)
    as_json = json.loads(json.dumps(value))
    assert as_json == json.loads(orjson.dumps(value)) and as_json["score"] == pytest.approx(5 / 6)
    assert as_json["passed"] is False and "0.83" in as_json["feedback"]
    again = pickle.loads(pickle.dumps(value))
    assert again == value and again.feedback == value.feedback and not again
    assert value == pytest.approx(5 / 6) and round(value, 2) == 0.83 and 0 + value + 1 == pytest.approx(11 / 6)
    assert value < 0.9 <= value + 0.1 and f"{value:.2f}" == "0.83" and float(value) == pytest.approx(5 / 6)
    value["score"] = 0.95  # GEPA writes back into the mapping; the verdict follows
    assert value and value.passed and json.loads(orjson.dumps(value))["passed"] is True


# --- GEPA: per-step feedback and objective scores --------------------------------------------------------

class TwoSteps(dspy.Module):
    def __init__(self):
        super().__init__()
        self.rewrite = dspy.Predict("question -> query")
        self.answer = dspy.Predict("query -> answer")

    def forward(self, question):
        return self.answer(query=self.rewrite(question=question).query)


def two_step_lm():
    def respond(prompt):
        asked = prompt.split("Your output fields are:")[-1][:200]
        if "`query`" in asked:
            return {"query": "capital lookup"}
        if "`answer`" in asked:
            return {"answer": "Paris"}
        return placeholder_fields(prompt)

    return scripted_lm(respond)


def test_gepa_gets_feedback_for_the_step_it_names_and_a_combined_metric_s_parts_as_objectives():
    reflections = Reflections()
    combined = CombinedMetric({"spelling": NonLLMStringSimilarity(), "present": StringPresence()},
                              rule="mean").as_metric(threshold=0.9, field_map=FIELDS)
    with dspy.context(lm=two_step_lm()):
        result = dspy.GEPA(metric=combined, reflection_lm=reflections.lm, max_metric_calls=40, num_threads=1,
                           reflection_minibatch_size=3, seed=0, track_stats=True).compile(
            TwoSteps(), trainset=trainset()[:4], valset=trainset()[:4])
    reflected = "\n".join(reflections.prompts)
    assert "Step 'answer' wrote what the judge read: the response (its output 'answer')" in reflected
    assert "Step 'rewrite' wrote none of the fields the judge read" in reflected
    subscores = result.detailed_results.val_aggregate_subscores
    assert subscores and set(subscores[0]) == {"spelling", "present"}
    value = combined(trainset()[0], dspy.Prediction(answer="Paris"), None, "rewrite",
                     [(None, {"question": "q"}, dspy.Prediction(query="capital lookup"))])
    assert value.feedback.startswith("Step 'rewrite' wrote none of the fields the judge read (response, reference)")
    assert value.objective_scores == {"spelling": 1.0, "present": 1.0}


# --- 5: the cache follows the judge -----------------------------------------------------------------------

def test_the_cache_judges_again_after_the_judge_s_lm_or_compiled_state_changes():
    metric = Faithfulness().as_metric(field_map=GROUNDED)
    example, pred = trainset()[0], dspy.Prediction(answer="Paris")
    with judges_context(lm=judge_lm(supported=True)):
        assert metric(example, pred) == 1.0 and metric(example, pred) == 1.0
    assert metric.repeats == 1
    with judges_context(lm=judge_lm(supported=False)):
        assert metric(example, pred) == 0.0  # another LM: judged again
        metric.judge.verify.demos = [dspy.Example(claims="[]", context="c", verdicts="[]")]
        assert metric(example, pred) == 0.0 and metric.repeats == 1  # recompiled: judged again
    metric.reset()
    assert (metric.repeats, metric.degraded, metric.empty_outputs, metric.no_prediction) == (0, 0, 0, 0)


def test_an_lm_freed_and_another_made_never_share_a_cache_key():
    """``id()`` is handed to a new object once the old one is freed: keyed on it, a judge given a new LM
    returned the old LM's verdicts (seen once in a full run). Each LM keeps a number of its own."""
    import gc

    from judges.lm.resolve import judging_lm_key

    keys = []
    for _ in range(20):
        lm = judge_lm()
        keys.append(judging_lm_key(lm))
        del lm
        gc.collect()
    assert len(set(keys)) == 20
    lm = judge_lm()
    assert judging_lm_key(lm) == judging_lm_key(lm) != judging_lm_key(lm.copy(temperature=0.7))


# --- 7: smaller -----------------------------------------------------------------------------------------

def test_a_judge_is_its_own_default_metric_in_evaluate():
    judge = Faithfulness(lm=judge_lm(supported=True))
    dev = [dspy.Example(question=f"Q{i}?", retrieved_contexts=["Paris is the capital of France."]).with_inputs(
        "question") for i in range(4)]
    with dspy.context(lm=scripted_lm(lambda prompt: {"response": "Paris is the capital."})):
        result = dspy.Evaluate(devset=dev, metric=judge, num_threads=2, display_progress=False)(
            dspy.Predict("question -> response"))
    assert result.score == 100.0 and all(isinstance(s, MetricScore) and s.feedback for *_, s in result.results)
    copied = judge.deepcopy()
    assert copied(dev[0], dspy.Prediction(response="Paris is the capital.")) == 1.0
    assert copied.__dict__["_default_metric"].judge is copied


def test_an_exported_metric_pickles_and_keeps_its_settings():
    metric = ExactMatch().as_metric(threshold=1.0, field_map=FIELDS)
    metric(trainset()[0], dspy.Prediction(answer="Paris"))
    again = pickle.loads(pickle.dumps(metric))
    assert type(again).__name__ == "exact_match" and again.threshold == 1.0 and again.repeats == 0
    assert again(trainset()[0], dspy.Prediction(answer="Paris")) == 1.0
    for metric in (similarity(), CombinedMetric([ExactMatch(), NonLLMStringSimilarity()]).as_metric(field_map=FIELDS)):
        assert pickle.loads(pickle.dumps(metric))(trainset()[0], dspy.Prediction(answer="Paris")) == 1.0


def test_a_combined_metric_s_degraded_note_stands_on_its_own_line():
    combined = CombinedMetric({"grounded": Faithfulness(lm=no_verdict_judge()), "present": StringPresence()},
                              rule="mean").as_metric(field_map={**GROUNDED, "reference": "example.answer"})
    value = combined(trainset()[0], dspy.Prediction(answer="Paris"))
    last = value.feedback.splitlines()[-1]
    assert last.startswith("The judgment is degraded (grounded: verify: no verdict")
    assert not value.feedback.splitlines()[-2].endswith("degraded")


def test_errors_point_where_the_field_is_and_a_single_metric_combination_is_refused_briefly():
    metric = ExactMatch().as_metric()
    with pytest.raises(MetricConfigurationError, match=r"field_map=\{'reference': 'example.<attribute>'\}"):
        metric(dspy.Example(question="q"), dspy.Prediction(response="a"))
    with pytest.raises(MetricConfigurationError, match=r"field_map=\{'response': 'pred.<attribute>'\}"):
        metric(dspy.Example(reference="a"), dspy.Prediction(summary="a"))
    with pytest.raises(ValueError) as refused:
        CombinedMetric([Faithfulness()])
    assert "got 1 (faithfulness)" in str(refused.value) and len(str(refused.value)) < 300


def test_a_configuration_error_is_logged_once_and_cancels_the_queue(caplog):
    program = CountingProgram(delay=0.2)  # DSPy submits every item before the first can fail
    metric = similarity(field_map={"response": "pred.summary", "reference": "example.answer"})
    with dspy.context(lm=program.lm), caplog.at_level(logging.ERROR):
        with pytest.raises(MetricConfigurationError):
            dspy.Evaluate(devset=devset(), metric=metric, num_threads=4, display_progress=False)(
                dspy.Predict("question -> answer"))
    time.sleep(3 * program.delay + 0.2)
    assert program.calls <= 4 and "Execution cancelled" not in caplog.text


def test_a_lower_is_better_metric_gives_dspy_one_minus_its_score_and_silence_its_worst():
    """Noise sensitivity: lower is better. An empty answer is its worst (1.0), never its best, and DSPy's
    optimizers, which maximise, get 1 - score."""
    from judges import NoiseSensitivity

    judge = NoiseSensitivity(lm=scripted_lm(placeholder_fields))
    assert judge.lower_is_better and judge.output_floor == 1.0
    empty = judge.score({"user_input": "q", "response": "", "reference": "r", "retrieved_contexts": ["c"]})
    assert empty.score == 1.0
    metric = judge.as_metric()
    value = metric(dspy.Example(user_input="q", reference="r", retrieved_contexts=["c"]), dspy.Prediction(response=""))
    assert float(value) == 0.0 and value.feedback.startswith("1 - noise_sensitivity (lower is better) = 0.000.")
