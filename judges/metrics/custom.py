"""Custom judges defined in a few lines: a named aspect (binary, majority vote), a free-form criterion
(integer scale), a rubric for all samples, or a rubric per sample.

    polite = AspectCritic(name="politeness", definition="Is the response polite to the user?")
    quality = SimpleCriteriaScore(name="quality", definition="Rate completeness 0 to 5.", min_score=0, max_score=5)

Every judge reads the response and, when the sample has them, the user input, the retrieved contexts and
the reference. Integer ratings are normalised to ``score`` in [0, 1]; the raw value stays in ``rating``.
With the embedded LM the rating is constrained to the scale by the grammar.

Must not hard-code a criterion: every judge here is defined by the user's words.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import dspy

from judges.data.samples import SampleValidationError
from judges.lm.schemas import output_constraints
from judges.metrics.base import Judge, checked_name


class _JudgedResponse(dspy.Signature):
    """The inputs every custom judge reads (the instruction comes from each subclass)."""

    user_input: str = dspy.InputField(desc="may be empty")
    context: str = dspy.InputField(desc="retrieved contexts; may be empty")
    reference: str = dspy.InputField(desc="reference answer; may be empty")
    response: str = dspy.InputField()


class AspectVerdict(_JudgedResponse):
    """Judge the response against the definition of the aspect. Answer true only if the response
    satisfies the definition."""

    definition: str = dspy.InputField(desc="what to check")
    reason: str = dspy.OutputField()
    verdict: bool = dspy.OutputField()


class CriteriaRating(_JudgedResponse):
    """Rate the response by the criterion, as an integer within the given scale."""

    criterion: str = dspy.InputField()
    scale: str = dspy.InputField(desc="lowest and highest allowed rating")
    reason: str = dspy.OutputField()
    rating: int = dspy.OutputField()


class RubricRating(_JudgedResponse):
    """Rate the response with the rubric: pick the score whose description fits the response best."""

    rubric: str = dspy.InputField(desc="one line per score: 'score N: description'")
    reason: str = dspy.OutputField()
    rating: int = dspy.OutputField()


def _optional_inputs(user_input: str | None, retrieved_contexts: list[str] | None, reference: str | None) -> dict[str, str]:
    return {
        "user_input": user_input or "",
        "context": "\n\n".join(retrieved_contexts or []),
        "reference": reference or "",
    }


def _check_name(metric: str, name: Any, definition: Any) -> None:
    checked_name(metric, name)
    if not isinstance(definition, str) or not definition.strip():
        raise ValueError(f"{metric}: definition must be a non-empty string")


class _NamedJudge(Judge):
    def __init__(self, name: str, *, lm: Any = None, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        self.metric_name = name

    @property
    def name(self) -> str:
        return self.alias or self.metric_name


class AspectCritic(_NamedJudge):
    """1.0 when the response has the aspect, else 0.0. With ``strictness`` k > 1 the judge votes k times
    (sampled at ``vote_temperature``, each vote its own rollout) and the majority wins; an even k is
    rounded up to the next odd number so there is no tie."""

    required_fields: ClassVar[tuple[str, ...]] = ("response",)

    def __init__(self, name: str, definition: str, *, lm: Any = None, strictness: int = 1,
                 vote_temperature: float = 0.7, adapter: Any = None):
        _check_name("aspect_critic", name, definition)
        if not isinstance(strictness, int) or strictness < 1:
            raise ValueError(f"aspect_critic: strictness must be a positive int, got {strictness!r}")
        super().__init__(name, lm=lm, adapter=adapter)
        self.definition = definition
        self.strictness = strictness + (strictness % 2 == 0)
        self.vote_temperature = vote_temperature
        self.judge_aspect = dspy.Predict(AspectVerdict)

    def _step_inputs(self, response: str, user_input: str | None = None,
                     retrieved_contexts: list[str] | None = None, reference: str | None = None) -> dict[str, Any]:
        return dict(definition=self.definition, response=response,
                    **_optional_inputs(user_input, retrieved_contexts, reference))

    def label_demo(self, inputs: dict[str, Any], label: float) -> dict[str, Any]:
        return {**self._step_inputs(**inputs), "reason": "A human rater's verdict.", "verdict": label >= 0.5}

    def forward(self, response: str, user_input: str | None = None, retrieved_contexts: list[str] | None = None,
                reference: str | None = None):
        inputs = self._step_inputs(response, user_input, retrieved_contexts, reference)
        if self.strictness == 1:
            votes = [self.judge_aspect(**inputs)]
        else:
            votes = [self.judge_aspect(**inputs, config={"temperature": self.vote_temperature, "rollout_id": i})
                     for i in range(self.strictness)]
        yes = sum(bool(v.verdict) for v in votes)
        return dspy.Prediction(score=float(yes > len(votes) / 2), votes=[bool(v.verdict) for v in votes],
                               reasons=[v.reason for v in votes])

    def feedback(self, result: dspy.Prediction) -> str:
        return f"{self.name}: {'yes' if result.score else 'no'} ({sum(result.votes)}/{len(result.votes)} votes); " + \
            " | ".join(result.reasons)


def check_scale(metric: str, low: Any, high: Any) -> tuple[int, int]:
    if not (isinstance(low, int) and isinstance(high, int)) or low >= high:
        raise ValueError(f"{metric}: need integers min_score < max_score, got {low!r}, {high!r}")
    return low, high


class _RatingJudge(_NamedJudge):
    """Shared by the integer-scale judges: constrain, validate and normalise the rating."""

    def _rate(self, predictor, low: int, high: int, **inputs) -> dspy.Prediction:
        with output_constraints(rating={"minimum": low, "maximum": high}):
            out = predictor(**inputs)
        rating = int(out.rating)
        result = dspy.Prediction(rating=min(max(rating, low), high), scale=(low, high), reason=out.reason)
        result["score"] = (result.rating - low) / (high - low)
        if rating != result.rating:
            # A real LM may still answer off the scale: clip, and say so rather than fail the sample.
            result["undefined_reason"] = f"rating {rating} was outside {low}..{high}; clipped"
        return result

    def _scale_of(self, inputs: dict[str, Any]) -> tuple[int, int]:
        return self.min_score, self.max_score

    def label_demo(self, inputs: dict[str, Any], label: float) -> dict[str, Any]:
        low, high = self._scale_of(inputs)
        return {**self._step_inputs(**inputs), "reason": "A human rater's rating.",
                "rating": int(round(low + label * (high - low)))}

    def forward(self, response: str, user_input: str | None = None, retrieved_contexts: list[str] | None = None,
                reference: str | None = None, rubrics: dict[str, str] | None = None):
        inputs = dict(response=response, user_input=user_input, retrieved_contexts=retrieved_contexts,
                      reference=reference, rubrics=rubrics)
        low, high = self._scale_of(inputs)
        return self._rate(self.rate, low, high, **self._step_inputs(**inputs))

    def feedback(self, result: dspy.Prediction) -> str:
        low, high = result.scale
        return f"{self.name}: rating {result.rating} of {low}..{high}: {result.reason}"


class SimpleCriteriaScore(_RatingJudge):
    """An integer rating of the response by a free-form criterion, on [min_score, max_score]."""

    required_fields: ClassVar[tuple[str, ...]] = ("response",)

    def __init__(self, name: str, definition: str, *, lm: Any = None, min_score: int = 0, max_score: int = 5,
                 adapter: Any = None):
        _check_name("simple_criteria_score", name, definition)
        super().__init__(name, lm=lm, adapter=adapter)
        self.min_score, self.max_score = check_scale("simple_criteria_score", min_score, max_score)
        self.definition = definition
        self.rate = dspy.Predict(CriteriaRating)

    def _step_inputs(self, response: str, user_input: str | None = None, retrieved_contexts: list[str] | None = None,
                     reference: str | None = None, rubrics: dict[str, str] | None = None) -> dict[str, Any]:
        return dict(criterion=self.definition, scale=f"{self.min_score} to {self.max_score}", response=response,
                    **_optional_inputs(user_input, retrieved_contexts, reference))


_RUBRIC_KEY = re.compile(r"^score(-?\d+)_description$")

#: Ragas' default rubric for reference-free scoring.
DEFAULT_RUBRICS = {
    "score1_description": "The response is entirely incorrect and fails to address any aspect of the user input.",
    "score2_description": "The response contains partial accuracy but includes major errors or significant omissions.",
    "score3_description": "The response is mostly accurate but lacks clarity, thoroughness, or minor details.",
    "score4_description": "The response is accurate and clear, with only minor omissions or slight inaccuracies.",
    "score5_description": "The response is completely accurate, clear, and thoroughly addresses the user input.",
}


def parse_rubric(rubrics: dict[str, str], metric: str = "rubrics_score") -> tuple[dict[int, str], int, int]:
    """``{"score1_description": ..., ...}`` -> ({1: ...}, min, max); keys must be consecutive integers."""
    if not isinstance(rubrics, dict) or not rubrics:
        raise ValueError(f"{metric}: rubrics must be a non-empty dict like {{'score1_description': '...'}}")
    levels: dict[int, str] = {}
    for key, text in rubrics.items():
        match = _RUBRIC_KEY.match(str(key))
        if not match:
            raise ValueError(f"{metric}: rubric key {key!r} is not of the form 'score<N>_description'")
        levels[int(match.group(1))] = str(text)
    low, high = min(levels), max(levels)
    if len(levels) < 2 or sorted(levels) != list(range(low, high + 1)):
        raise ValueError(f"{metric}: rubric scores must be at least two consecutive integers, got {sorted(levels)}")
    return levels, low, high


def format_rubric(levels: dict[int, str]) -> str:
    return "\n".join(f"score {level}: {text}" for level, text in sorted(levels.items()))


class RubricsScore(_RatingJudge):
    """A rating by one rubric for every sample (``score<N>_description`` keys; default 1..5)."""

    required_fields: ClassVar[tuple[str, ...]] = ("response",)

    def __init__(self, rubrics: dict[str, str] | None = None, *, lm: Any = None, name: str = "rubrics_score",
                 adapter: Any = None):
        super().__init__(name, lm=lm, adapter=adapter)
        self.rubrics = dict(rubrics or DEFAULT_RUBRICS)
        self.levels, self.min_score, self.max_score = parse_rubric(self.rubrics, name)
        self.rate = dspy.Predict(RubricRating)

    def _step_inputs(self, response: str, user_input: str | None = None, retrieved_contexts: list[str] | None = None,
                     reference: str | None = None, rubrics: dict[str, str] | None = None) -> dict[str, Any]:
        return dict(rubric=format_rubric(self.levels), response=response,
                    **_optional_inputs(user_input, retrieved_contexts, reference))


class InstanceRubrics(_RatingJudge):
    """A rating by the sample's own rubric (``sample.rubrics``), each sample on its own scale."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "rubrics")

    def __init__(self, *, lm: Any = None, name: str = "instance_rubrics", adapter: Any = None):
        super().__init__(name, lm=lm, adapter=adapter)
        self.rate = dspy.Predict(RubricRating)

    def validate_sample(self, sample: Any, index: int | None = None):
        sample = super().validate_sample(sample, index)
        try:
            parse_rubric(sample.rubrics, self.name)
        except ValueError as err:
            raise SampleValidationError([(index, "rubrics", str(err))], metric=self.name) from None
        return sample

    def _scale_of(self, inputs: dict[str, Any]) -> tuple[int, int]:
        _, low, high = parse_rubric(inputs["rubrics"], self.name)
        return low, high

    def _step_inputs(self, response: str, user_input: str | None = None, retrieved_contexts: list[str] | None = None,
                     reference: str | None = None, rubrics: dict[str, str] | None = None) -> dict[str, Any]:
        levels, _, _ = parse_rubric(rubrics, self.name)
        return dict(rubric=format_rubric(levels), response=response,
                    **_optional_inputs(user_input, retrieved_contexts, reference))
