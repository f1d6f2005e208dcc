import asyncio

import dspy
import pytest
from dspy.utils import DummyLM

from judges import Judge, Metric, MetricConfigurationError, SampleValidationError, SingleTurnSample


class ResponseLength(Metric):
    """A deterministic test metric: 1.0 when the response has at most `limit` characters."""

    required_fields = ("response",)

    def __init__(self, limit: int = 10):
        self.limit = limit

    def _score(self, sample):
        return dspy.Prediction(score=float(len(sample.response) <= self.limit))


class Polite(dspy.Signature):
    """Is the response polite?"""

    response: str = dspy.InputField()
    polite: bool = dspy.OutputField()


class PolitenessJudge(Judge):
    required_fields = ("response",)

    def __init__(self, lm=None):
        super().__init__(lm=lm)
        self.judge = dspy.Predict(Polite)

    def forward(self, response):
        verdict = self.judge(response=response)
        return dspy.Prediction(score=float(verdict.polite), polite=verdict.polite)


def test_required_fields_is_a_class_attribute():
    assert ResponseLength.required_fields == ("response",)
    assert PolitenessJudge.required_fields == ("response",)


def test_score_returns_prediction_and_accepts_dicts():
    result = ResponseLength().score({"response": "short"})
    assert isinstance(result, dspy.Prediction) and result.score == 1.0
    assert ResponseLength(limit=2).score(SingleTurnSample(response="longer")).score == 0.0


def test_missing_field_names_metric_and_field():
    with pytest.raises(SampleValidationError) as err:
        ResponseLength().score(SingleTurnSample(user_input="q"))
    assert "response_length" in str(err.value) and "'response'" in str(err.value)


def test_validate_dataset_lists_every_problem():
    samples = [SingleTurnSample(response="a"), SingleTurnSample(user_input="b"), SingleTurnSample(response="")]
    with pytest.raises(SampleValidationError) as err:
        ResponseLength().validate_dataset(samples)
    assert [p[0] for p in err.value.problems] == [1, 2]


def test_wrong_sample_type_is_clear():
    with pytest.raises(SampleValidationError, match="expected a SingleTurnSample"):
        ResponseLength().score(["not", "a", "sample"])


def test_ascore_matches_score():
    assert asyncio.run(ResponseLength().ascore({"response": "abc"})).score == 1.0


def test_judge_runs_on_scripted_lm_and_no_lm_call_when_invalid():
    lm = DummyLM([{"polite": "True"}])
    judge = PolitenessJudge(lm=lm)
    assert [name for name, _ in judge.named_predictors()] == ["judge"]
    assert judge.score({"response": "Thank you!"}).score == 1.0
    with pytest.raises(SampleValidationError):
        judge.score({"user_input": "no response"})
    assert len(lm.history) == 1


def test_as_metric_one_value_a_number_true_at_the_threshold_with_feedback_and_field_map():
    metric = ResponseLength(limit=5).as_metric(threshold=0.5)
    example = dspy.Example(question="q").with_inputs("question")
    good = metric(example, dspy.Prediction(answer="abc"))
    assert good == 1.0 and bool(good) and "response_length" in good.feedback
    bad = metric(example, dspy.Prediction(answer="abcdefgh"), trace=[])
    assert bad == 0.0 and not bad and bad.score == 0.0 and bad["score"] == 0.0
    # GEPA's extra arguments are accepted, and the same value carries its feedback.
    assert metric(example, dspy.Prediction(answer="abc"), None, "pred", []) == 1.0
    fb = ResponseLength().as_metric(feedback=True)(example, dspy.Prediction(answer="abc"))
    assert fb.score == 1.0 and "response_length" in fb["feedback"]
    mapped = ResponseLength(limit=5).as_metric(field_map={"response": "pred.summary"})
    assert mapped(example, dspy.Prediction(summary="ok")) == 1.0
    with pytest.raises(MetricConfigurationError, match="response"):
        mapped(example, dspy.Prediction(answer="ok"))


def test_field_map_rejects_unknown_fields():
    with pytest.raises(ValueError, match="not a SingleTurnSample field"):
        ResponseLength().as_metric(field_map={"answer": "pred.answer"})


def test_demo_runs_text_metrics_and_rejects_unknown_metrics(capsys):
    from judges_app import demo

    assert demo.main(["--metrics", "rouge_score,bleu_score"]) == 0
    out = capsys.readouterr().out
    assert "mean" in out and "rouge_score" in out
    with pytest.raises(SystemExit):
        demo.main(["--metrics", "nope"])


def test_demo_reports_invalid_samples(tmp_path, capsys):
    from judges_app import demo

    path = tmp_path / "bad.jsonl"
    path.write_text('{"user_input": "q", "response": "r"}\n', encoding="utf-8")
    assert demo.main(["--samples", str(path), "--metrics", "rouge_score"]) == 2
    assert "field 'reference'" in capsys.readouterr().err


def test_every_metric_explains_a_result_it_could_not_define():
    """An empty response scores the floor with no step run, so the steps' fields are absent; 16 judges'
    feedback raised AttributeError on such a result (calibrate's disagreement list, label, MLflow)."""
    from judges.metrics.catalogue import metric_classes
    from judges_app.cli.common import required_params

    floor = dspy.Prediction(score=0.0, undefined_reason="the response is empty")
    for cls in set(metric_classes().values()):
        kwargs = {name: {"score1_description": "bad", "score2_description": "good"} if name == "rubrics" else "x"
                  for name in required_params(cls)}
        metric = cls(**kwargs)
        assert metric.explain(floor) == f"{metric.name} = 0.00 (the response is empty)", cls
