"""Exported metric functions inside real DSPy machinery: Evaluate and BootstrapFewShot, on scripted LMs."""

import sys
from pathlib import Path

import dspy
import pytest

from judges import ExactMatch, Faithfulness, MetricConfigurationError

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Spain": "Madrid", "Peru": "Lima", "Chile": "Santiago"}


def qa_lm(correct):
    """The program's LM: answers the capital for countries in `correct`, a wrong city otherwise."""

    def respond(prompt):
        country = next(c for c in CAPITALS if f"capital of {c}" in prompt.split("[[ ## question ## ]]")[-1])
        return {"answer": CAPITALS[country] if country in correct else "Springfield"}

    return scripted_lm(respond)


def devset():
    return [dspy.Example(question=f"What is the capital of {c}?", answer=a).with_inputs("question")
            for c, a in CAPITALS.items()]


def test_metric_inside_dspy_evaluate_with_threads():
    metric = ExactMatch().as_metric(field_map={"response": "pred.answer", "reference": "example.answer"})
    program = dspy.Predict("question -> answer")
    with dspy.context(lm=qa_lm(correct={"France", "Japan", "Italy"})):
        result = dspy.Evaluate(devset=devset(), metric=metric, num_threads=4, display_progress=True)(program)
    assert result.score == pytest.approx(50.0)


def test_llm_judge_metric_uses_its_own_lm_inside_evaluate():
    # The judge's LM is separate from the program's: the program answers, the judge checks faithfulness.
    def judge_respond(prompt):
        if "[[ ## claims ## ]]" in prompt and "verdicts" in prompt.split("[[ ## claims ## ]]")[0]:
            supported = "Springfield" not in prompt.split("[[ ## claims ## ]]")[-1]
            claim = prompt.split("[[ ## claims ## ]]")[-1].split('"')[1]
            return {"verdicts": f'[{{"claim": "{claim}", "reason": "r", "supported": {str(supported).lower()}}}]'}
        answer = prompt.split("[[ ## text ## ]]")[-1].strip().split("\n")[0]
        return {"claims": f'["{answer}"]'}

    judge = Faithfulness(lm=scripted_lm(judge_respond))
    metric = judge.as_metric(field_map={"response": "pred.answer", "retrieved_contexts": "example.answer"})
    program = dspy.Predict("question -> answer")
    with dspy.context(lm=qa_lm(correct={"France", "Japan"})):
        result = dspy.Evaluate(devset=devset(), metric=metric, num_threads=4, display_progress=False)(program)
    assert result.score == pytest.approx(100 * 2 / 6, abs=0.01)  # DSPy rounds to 2 decimals
    feedback = judge.as_metric(feedback=True, field_map={"response": "pred.answer", "retrieved_contexts": "example.answer"})
    with dspy.context(lm=qa_lm(correct=set())):
        out = feedback(devset()[0], program(question=devset()[0].question), None, "predict", None)
    assert out.score == 0.0 and "Springfield" in out.feedback


def test_bootstrap_fewshot_compiles_with_the_exported_metric():
    metric = ExactMatch().as_metric(field_map={"response": "pred.answer", "reference": "example.answer"})
    calls = []

    def strict(example, pred, trace=None):
        value = metric(example, pred, trace)
        calls.append((trace is None, value))
        return value

    program = dspy.Predict("question -> answer")
    with dspy.context(lm=qa_lm(correct={"France", "Japan", "Italy", "Spain"})):
        compiled = dspy.BootstrapFewShot(metric=strict, max_bootstrapped_demos=2, max_labeled_demos=0).compile(
            program, trainset=devset())
    demos = compiled.demos
    assert 1 <= len(demos) <= 2
    assert all(d.answer in CAPITALS.values() for d in demos)  # only demos the metric accepted
    # While bootstrapping the value is the score, true only at the threshold (ExactMatch: 1.0 or 0.0).
    assert all(bool(v) == (v >= 0.5) for traced, v in calls if not traced)


def test_field_map_error_names_what_was_tried():
    metric = Faithfulness().as_metric()
    with pytest.raises(MetricConfigurationError,
                       match=r"retrieved_contexts': not found: looked at pred.retrieved_contexts, pred.contexts"):
        metric(dspy.Example(question="q"), dspy.Prediction(answer="a"))
