"""One exported metric inside every DSPy optimizer, never misleading it: BootstrapFewShot, random search and
MIPROv2 keep no demo scored under the threshold (with and without ``feedback=True``); BootstrapFinetune's
trace filter reads the threshold too; SIMBA and Evaluate get the score as a number; GEPA's reflection prompt
carries our feedback text, a degraded judgment is visible there and counted, and repeated predictions are
judged once; a combined metric bootstraps on its product. The program and judge LMs are scripted."""

import json
import logging
import re
import sys
import warnings
from pathlib import Path

import dspy
import pytest

from judges import (
    CombinedMetric,
    ExactMatch,
    Faithfulness,
    JudgeLMWarning,
    MetricConfigurationError,
    NonLLMStringSimilarity,
    configure_judges,
    judges_context,
)

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402
from test_optimizers import placeholder_fields  # noqa: E402

#: country -> (the capital, what the program answers): exact, one letter off (similarity 0.83), or wrong.
ANSWERS = {"France": ("Paris", "Paris"), "Japan": ("Tokyo", "Tokyoo"), "Italy": ("Rome", "Rome"),
           "Spain": ("Madrid", "Madridd"), "Peru": ("Lima", "Lima"), "Chile": ("Santiago", "Lima"),
           "Kenya": ("Nairobi", "Nairobi"), "Egypt": ("Cairo", "Cairoo")}
FIELDS = {"response": "pred.answer", "reference": "example.answer"}


def program_lm():
    """Answers the program's step from ``ANSWERS``; any other prompt (an optimizer's own steps) with
    type-correct placeholders."""

    def respond(prompt):
        if "[[ ## question ## ]]" in prompt and "`answer`" in prompt.split("Your output fields are:")[-1][:200]:
            question = prompt.split("[[ ## question ## ]]")[-1]
            country = next(c for c in ANSWERS if c in question)
            return {"answer": ANSWERS[country][1]}
        return placeholder_fields(prompt)

    return scripted_lm(respond)


def trainset():
    return [dspy.Example(question=f"What is the capital of {c}?", answer=a).with_inputs("question")
            for c, (a, _) in ANSWERS.items()]


def similarity(threshold=0.9, **options):
    return NonLLMStringSimilarity().as_metric(threshold=threshold, **{"field_map": FIELDS, **options})


def demos_of(program):
    return [demo for _, predictor in program.named_predictors() for demo in predictor.demos]


@pytest.mark.parametrize("feedback", [None, True])
def test_bootstrap_fewshot_keeps_no_demo_under_the_threshold(feedback):
    metric = similarity(feedback=feedback)
    with dspy.context(lm=program_lm()):
        compiled = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=8, max_labeled_demos=0,
                                         max_rounds=1).compile(dspy.Predict("question -> answer"), trainset=trainset())
    answers = sorted(d.answer for d in demos_of(compiled))
    assert answers == ["Lima", "Nairobi", "Paris", "Rome"]  # never "Tokyoo" (0.83) nor Chile's "Lima" (0.25)
    value = metric(trainset()[1], dspy.Prediction(answer="Tokyoo"), trace=[])
    assert value == pytest.approx(5 / 6) and not value and value.feedback  # a number, false, with its reasons


def test_random_search_and_mipro_keep_no_demo_under_the_threshold():
    metric = similarity()
    with dspy.context(lm=program_lm()):
        searched = dspy.BootstrapFewShotWithRandomSearch(
            metric=metric, max_bootstrapped_demos=4, max_labeled_demos=0, num_candidate_programs=2,
            num_threads=1).compile(dspy.Predict("question -> answer"), trainset=trainset())
        mipro = dspy.MIPROv2(metric=metric, auto="light", task_model=dspy.settings.lm, prompt_model=dspy.settings.lm,
                             max_bootstrapped_demos=3, max_labeled_demos=0, num_threads=1, verbose=False, seed=0)
        bootstrapped, real = [], mipro._bootstrap_fewshot_examples  # every demo set MIPROv2 chooses among
        mipro._bootstrap_fewshot_examples = lambda *a, **k: bootstrapped.append(sets := real(*a, **k)) or sets
        mipro.compile(dspy.Predict("question -> answer"), trainset=trainset() * 3, valset=trainset())
    kept = [demo for candidate in searched.candidate_programs for demo in demos_of(candidate["program"])]
    assert kept and {d.answer for d in kept} <= {"Lima", "Nairobi", "Paris", "Rome"}
    candidates = [demo for sets in bootstrapped[0].values() for demos in sets for demo in demos]
    assert candidates and {d.answer for d in candidates} <= {"Lima", "Nairobi", "Paris", "Rome"}


def test_bootstrap_finetune_trace_filter_and_simba_read_the_threshold_and_the_number():
    from dspy.teleprompt.bootstrap_trace import bootstrap_trace_data

    metric = similarity()
    program = dspy.Predict("question -> answer")
    with dspy.context(lm=program_lm()):
        data = bootstrap_trace_data(program, trainset(), metric=metric, num_threads=1)
        # BootstrapFinetune keeps ``[d for d in data if d["score"]]``: the threshold, not "any score above 0"
        kept = sorted(d["prediction"].answer for d in data if d["score"])
        assert kept == ["Lima", "Nairobi", "Paris", "Rome"]
        assert all(bool(d["score"]) == (float(d["score"]) >= 0.9) for d in data) and len(data) == 8
        simba = dspy.SIMBA(metric=metric, bsize=4, max_steps=1, num_candidates=2, max_demos=2, num_threads=1)
        simba.compile(program, trainset=trainset())  # SIMBA's buckets read the numbers (float(o["score"]))


class Reflections:
    """A reflection LM that records every prompt GEPA sends it and proposes a placeholder instruction."""

    def __init__(self):
        self.prompts = []
        self.lm = scripted_lm(self.respond)

    def respond(self, prompt):
        self.prompts.append(prompt)
        return placeholder_fields(prompt)


def test_gepa_reflects_on_our_feedback_and_judges_each_prediction_once(caplog):
    reflections = Reflections()
    metric = similarity()
    with dspy.context(lm=program_lm()), caplog.at_level(logging.WARNING):
        dspy.GEPA(metric=metric, reflection_lm=reflections.lm, max_metric_calls=40, num_threads=1,
                  reflection_minibatch_size=3, seed=0).compile(dspy.Predict("question -> answer"),
                                                               trainset=trainset(), valset=trainset())
    assert reflections.prompts, "GEPA never reflected"
    reflected = "\n".join(reflections.prompts)
    assert "non_llm_string_similarity = 0.83" in reflected and "This trajectory got a score of" not in reflected
    assert "different from the overall metric score" not in caplog.text  # the feedback call reads the same score
    assert metric.repeats > 0  # GEPA scores unchanged predictions again: served from the metric's memory


def no_verdict_judge():
    """A judge LM that extracts one claim and returns no verdict for it (a degraded judgment)."""

    def respond(prompt):
        asked = prompt.split("Your output fields are:")[-1]
        if "`verdicts`" in asked:
            return {"verdicts": "[]"}
        if "`claims`" in asked:
            answer = prompt.split("[[ ## text ## ]]")[-1].strip().split("\n")[0]
            return {"claims": json.dumps([answer])}
        return placeholder_fields(prompt)

    return scripted_lm(respond)


def test_a_degraded_judgment_reaches_gepa_s_reflection_is_counted_and_can_fail():
    reflections = Reflections()
    judge = Faithfulness(lm=no_verdict_judge())
    metric = judge.as_metric(field_map={"response": "pred.answer", "retrieved_contexts": "example.answer"})
    with dspy.context(lm=program_lm()):
        dspy.GEPA(metric=metric, reflection_lm=reflections.lm, max_metric_calls=24, num_threads=1,
                  reflection_minibatch_size=2, seed=0).compile(dspy.Predict("question -> answer"),
                                                               trainset=trainset()[:4], valset=trainset()[:4])
    assert metric.degraded > 0
    assert "The judgment is degraded (verify: no verdict for 1 of 1 claims" in "\n".join(reflections.prompts)
    assert "the score may reflect the judge (scripted/test) failing" in "\n".join(reflections.prompts)
    strict = judge.as_metric(field_map={"response": "pred.answer", "retrieved_contexts": "example.answer"},
                             on_degraded="fail")
    from judges import DegradedJudgmentError

    with pytest.raises(DegradedJudgmentError, match="verify: no verdict"):
        strict(trainset()[0], dspy.Prediction(answer="Paris"))


def test_a_combined_metric_bootstraps_on_its_product_and_merges_the_feedback():
    a = NonLLMStringSimilarity().named("spelling")
    b = NonLLMStringSimilarity(distance_measure="hamming").named("letters")
    combined = CombinedMetric([a, b], rule="product").as_metric(threshold=0.75, field_map=FIELDS)

    def by_hand(example, pred, trace=None):  # what users wrote before CombinedMetric
        return (a.as_metric(threshold=0.75, field_map=FIELDS)(example, pred, trace)
                * b.as_metric(threshold=0.75, field_map=FIELDS)(example, pred, trace))

    value = combined(trainset()[1], dspy.Prediction(answer="Tokyoo"), trace=[])
    assert value == pytest.approx(5 / 6 * 5 / 6) and not value  # each part passes 0.75, the product does not
    assert "spelling 0.83" in value.feedback and "- letters:" in value.feedback
    assert by_hand(trainset()[1], dspy.Prediction(answer="Tokyoo"), []) > 0  # a product of two parts: truthy
    with dspy.context(lm=program_lm()):
        compiled = dspy.BootstrapFewShot(metric=combined, max_bootstrapped_demos=8, max_labeled_demos=0,
                                         max_rounds=1).compile(dspy.Predict("question -> answer"), trainset=trainset())
    assert sorted(d.answer for d in demos_of(compiled)) == ["Lima", "Nairobi", "Paris", "Rome"]
    for bad in ({"rule": "median"}, {"rule": "product", "weights": [1, 2]}, {"weights": [1, -1]}):
        with pytest.raises(ValueError, match="combined metric"):
            CombinedMetric([a, b], **bad)


def test_a_judge_without_its_own_lm_warns_once_and_records_the_lm_that_judged():
    program = scripted_lm(lambda prompt: {"claims": '["Paris is the capital."]', "verdicts": json.dumps(
        [{"claim": "Paris is the capital.", "reason": "r", "supported": True}])})
    sample = {"response": "Paris is the capital.", "retrieved_contexts": ["Paris is the capital of France."]}
    with dspy.context(lm=program), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = Faithfulness().score(sample), Faithfulness().score(sample)
    borrowed = [w for w in caught if issubclass(w.category, JudgeLMWarning)]
    assert len(borrowed) == 1 and "faithfulness has no LM of its own" in str(borrowed[0].message)
    assert first.judge_lm == second.judge_lm == "scripted/test"
    judge_lm = scripted_lm(lambda prompt: {"claims": '["Paris is the capital."]', "verdicts": json.dumps(
        [{"claim": "Paris is the capital.", "reason": "r", "supported": False}])})
    with dspy.context(lm=program), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with judges_context(lm=judge_lm):
            assert Faithfulness().score(sample).score == 0.0  # the judges' own LM, not the program's
        configure_judges(lm=judge_lm)
        try:
            assert Faithfulness().score(sample).score == 0.0
        finally:
            configure_judges(lm=None)
    assert not [w for w in caught if issubclass(w.category, JudgeLMWarning)]
    assert judge_lm.engine.calls == 4 and program.engine.calls == 4


@pytest.mark.parametrize("bad, message", [
    ({"threshold": 1.5}, "threshold must be a number in \\[0, 1\\]"), ({"threshold": "high"}, "threshold"),
    ({"threshold": True}, "threshold"), ({"on_degraded": "ignore"}, "on_degraded"), ({"feedback": "yes"}, "feedback"),
    ({"field_map": ["pred.answer"]}, "field_map must be a mapping"),
])
def test_bad_parameters_are_refused_when_the_metric_is_made(bad, message):
    with pytest.raises(ValueError, match=f"non_llm_string_similarity: as_metric {message}|{message}"):
        NonLLMStringSimilarity().as_metric(**bad)


def test_typed_outputs_are_scored_by_the_documented_rule():
    exact = ExactMatch().as_metric(field_map=FIELDS)
    assert exact(dspy.Example(answer="42"), dspy.Prediction(answer=42)) == 1.0
    assert exact(dspy.Example(answer="3"), dspy.Prediction(answer=3.0)) == 1.0
    assert exact(dspy.Example(answer="0.5"), dspy.Prediction(answer=0.5)) == 1.0
    assert exact(dspy.Example(answer="True"), dspy.Prediction(answer=True)) == 1.0
    assert exact(dspy.Example(answer="Paris\nRome"), dspy.Prediction(answer=["Paris", "Rome"])) == 1.0
    assert exact(dspy.Example(answer=["Lyon", 7]), dspy.Prediction(answer="7")) == 1.0  # alternatives
    assert exact(dspy.Example(answer="{\"city\":\"Paris\"}"), dspy.Prediction(answer={"city": "Paris"})) == 1.0


def test_a_field_the_program_never_produces_stops_evaluate_with_one_clear_error(caplog):
    metric = similarity(field_map={"response": "pred.summary", "reference": "example.answer"})
    with dspy.context(lm=program_lm()), caplog.at_level(logging.ERROR):
        with pytest.raises(MetricConfigurationError, match=r"'response': not found: looked at pred.summary"):
            dspy.Evaluate(devset=trainset(), metric=metric, num_threads=2, display_progress=False)(
                dspy.Predict("question -> answer"))
    assert "Execution cancelled" not in caplog.text and len(re.findall("not found", caplog.text)) <= 1
