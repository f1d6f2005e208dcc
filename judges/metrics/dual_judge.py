"""Dual-judge metrics (NVIDIA's, as in Ragas): two differently worded judge prompts rate the same thing on
a small scale; each rating is normalised to [0, 1] and the two are averaged. If only one rating is valid
(parsed and on the scale) it is used alone and the result says so in ``degraded`` (``evaluate`` counts
such items and can fail them: ``on_degraded``); if neither is, the sample fails with ``JudgeOutputError``
rather than getting a made-up score. Each prompt is its own predictor (``judge_a``, ``judge_b``), so each
can be compiled.

  AnswerAccuracy        response vs reference, ratings 0/2/4 (the second judge sees the two answers swapped)
  ContextRelevance      retrieved contexts vs user input, ratings 0/1/2
  ResponseGroundedness  response vs retrieved contexts, ratings 0/1/2; or, with ``verifier=``, no LM:
                        the trained verifier checks each response sentence and rates 2 (all supported),
                        1 (some) or 0 (none)

Must not call an LM beyond its two judges' steps.
"""

from __future__ import annotations

from typing import Any, ClassVar

import dspy
from dspy.utils.exceptions import AdapterParseError

from judges.lm.schemas import output_constraints
from judges.metrics.base import Judge
from judges.metrics.rag.verified import (
    VerifierStep,
    sentence_claims,
    unsupported_feedback,
)


class JudgeOutputError(ValueError):
    """No judge of a multi-judge metric produced a valid rating for a sample."""


class AnswerAccuracyJudgeA(dspy.Signature):
    """You rate a user answer against a reference answer that fully answers the question. Say 4 if the user
    answer is fully contained in and equivalent to the reference in all terms, topics, numbers, dates and
    units. Say 2 if it is partially contained and almost equivalent. Say 0 if it is not contained or not
    accurate. Rate 4, 2 or 0 only."""

    question: str = dspy.InputField()
    user_answer: str = dspy.InputField()
    reference_answer: str = dspy.InputField()
    rating: int = dspy.OutputField(desc="4, 2 or 0")


class AnswerAccuracyJudgeB(dspy.Signature):
    """Compare the reference answer with the user answer to the question. A rating of 4 means the reference
    answer says exactly what the user answer says; 2 means they partly agree; 0 means they disagree or the
    user answer is not relevant. Rate 4, 2 or 0 only."""

    question: str = dspy.InputField()
    reference_answer: str = dspy.InputField(desc="shown first on purpose: the roles are swapped")
    user_answer: str = dspy.InputField()
    rating: int = dspy.OutputField(desc="4, 2 or 0")


class ContextRelevanceJudgeA(dspy.Signature):
    """Rate how relevant the context is to the question: 0 if it contains no information that helps
    answer the question, 1 if it partially answers it, 2 if it fully answers it. Rate 0, 1 or 2 only."""

    question: str = dspy.InputField()
    context: str = dspy.InputField()
    rating: int = dspy.OutputField(desc="0, 1 or 2")


class ContextRelevanceJudgeB(dspy.Signature):
    """Does the context give what is needed to answer the question? 2: yes, completely; 1: only some of
    it; 0: nothing relevant. Rate 0, 1 or 2 only."""

    context: str = dspy.InputField()
    question: str = dspy.InputField()
    rating: int = dspy.OutputField(desc="0, 1 or 2")


class ResponseGroundednessJudgeA(dspy.Signature):
    """Rate how well the response is grounded in the context: 2 if every statement of the response can be
    found in or inferred from the context, 1 if only some statements can, 0 if none can or the response is
    unrelated to the context. Rate 0, 1 or 2 only."""

    context: str = dspy.InputField()
    response: str = dspy.InputField()
    rating: int = dspy.OutputField(desc="0, 1 or 2")


class ResponseGroundednessJudgeB(dspy.Signature):
    """Check the response sentence by sentence against the context. 2: all of it is supported by the
    context; 1: part of it is supported; 0: it is not supported. Rate 0, 1 or 2 only."""

    response: str = dspy.InputField()
    context: str = dspy.InputField()
    rating: int = dspy.OutputField(desc="0, 1 or 2")


class _DualJudge(Judge):
    scale: ClassVar[tuple[int, ...]]

    def label_demo(self, inputs: dict[str, Any], label: float) -> dict[str, Any]:
        # Both judges' signatures share their field names, so one demo serves judge_a and judge_b.
        rating = min(self.scale, key=lambda level: abs(level / max(self.scale) - label))
        return {**self._step_inputs(**inputs), "rating": rating}

    def forward(self, **inputs):
        return self._ratings(**self._step_inputs(**inputs))

    def _ratings(self, **inputs) -> dspy.Prediction:
        ratings: list[int | None] = []
        problems: list[str] = []
        for name, predictor in (("judge_a", self.judge_a), ("judge_b", self.judge_b)):
            try:
                with output_constraints(rating={"enum": list(self.scale)}):
                    rating = int(predictor(**inputs).rating)
            except (AdapterParseError, ValueError, TypeError) as err:
                rating, why = None, f"{type(err).__name__}: {str(err)[:200]}"
            else:
                why = f"rating {rating} is not on {list(self.scale)}"
            ratings.append(rating if rating in self.scale else None)
            if ratings[-1] is None:
                problems.append(f"{name} gave no rating ({why})")
        valid = [r / max(self.scale) for r in ratings if r is not None]
        if not valid:
            raise JudgeOutputError(f"{self.name}: neither judge gave a rating in {list(self.scale)} (got {ratings})")
        if problems:  # scored from one judge where two were designed: say so (evaluate counts it)
            other = "judge_b" if ratings[0] is None else "judge_a"
            return dspy.Prediction(score=valid[0], ratings=ratings,
                                   degraded=f"{problems[0]}; scored from {other} alone")
        return dspy.Prediction(score=sum(valid) / len(valid), ratings=ratings)

    def feedback(self, result: dspy.Prediction) -> str:
        return f"{self.name} = {result.score:.2f} (judge ratings {result.ratings} on {list(self.scale)})"


class AnswerAccuracy(_DualJudge):
    """How well the response agrees with the reference, by two judges rating 0/2/4."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response", "reference")
    scale = (0, 2, 4)

    def __init__(self, *, lm: Any = None, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        self.judge_a = dspy.Predict(AnswerAccuracyJudgeA)
        self.judge_b = dspy.Predict(AnswerAccuracyJudgeB)

    def forward(self, user_input: str, response: str, reference: str):
        return super().forward(user_input=user_input, response=response, reference=reference)

    def _step_inputs(self, user_input: str, response: str, reference: str) -> dict[str, Any]:
        return dict(question=user_input, user_answer=response, reference_answer=reference)


class ContextRelevance(_DualJudge):
    """How relevant the retrieved contexts are to the user input, by two judges rating 0/1/2."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "retrieved_contexts")
    scale = (0, 1, 2)

    def __init__(self, *, lm: Any = None, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        self.judge_a = dspy.Predict(ContextRelevanceJudgeA)
        self.judge_b = dspy.Predict(ContextRelevanceJudgeB)

    def forward(self, user_input: str, retrieved_contexts: list[str]):
        return super().forward(user_input=user_input, retrieved_contexts=retrieved_contexts)

    def _step_inputs(self, user_input: str, retrieved_contexts: list[str]) -> dict[str, Any]:
        return dict(question=user_input, context="\n\n".join(retrieved_contexts))


class ResponseGroundedness(VerifierStep, _DualJudge):
    """How well the response is grounded in the retrieved contexts, by two judges rating 0/1/2.

    ``verifier="embedded"`` (or a model folder, see ``judges.lm.verifier``) replaces the two LM judges with
    the verifier, run offline: each response sentence takes its best evidence chunk, P >= ``threshold``
    counts as supported, and the rating is 2 if every sentence is supported, 0 if none is, else 1 (the
    judges' scale, so scores stay comparable). Text outside the verifier's language scores 0.0 with
    ``out_of_language`` and ``undefined_reason``, as in FaithfulnessWithVerifier."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "retrieved_contexts")
    scale = (0, 1, 2)

    def __init__(self, *, lm: Any = None, adapter: Any = None, verifier: str | None = None,
                 supported_label: str | int | None = None, threshold: float = 0.5):
        super().__init__(lm=lm, adapter=adapter)
        self._set_verifier(verifier, supported_label, threshold)
        self.needs_lm = verifier is None
        self.needs_verifier = verifier is not None
        self.judge_a = dspy.Predict(ResponseGroundednessJudgeA)
        self.judge_b = dspy.Predict(ResponseGroundednessJudgeB)

    def _score(self, sample) -> dspy.Prediction:
        if self.verifier is None or not (sample.response or "").strip():
            return super()._score(sample)
        return self(**self._forward_inputs(sample))  # no LM: the verifier alone

    def forward(self, response: str, retrieved_contexts: list[str]):
        if self.verifier is None:
            return super().forward(response=response, retrieved_contexts=retrieved_contexts)
        verifier = self.verifier_for_text([response, *retrieved_contexts])
        if isinstance(verifier, dict):
            return dspy.Prediction(score=0.0, ratings=[], verdicts=[], **verifier)
        checked = self.verify_claims(verifier, sentence_claims(response), retrieved_contexts)
        supported = sum(row["supported"] for row in checked["verdicts"])
        rating = 2 if supported == len(checked["verdicts"]) else 1 if supported else 0
        return dspy.Prediction(score=rating / 2, ratings=[rating], **checked)

    def feedback(self, result: dspy.Prediction) -> str:
        if self.verifier is None:
            return super().feedback(result)
        text = f"{self.name} = {result.score:.2f}"
        if result.get("undefined_reason"):
            return f"{text} ({result.undefined_reason})"
        return (f"{text} (verifier rating {result.ratings[0]} on [0, 1, 2])" + unsupported_feedback(result.verdicts)
                + f"; weakest sentence P={result.weakest:.2f}")

    def _step_inputs(self, response: str, retrieved_contexts: list[str]) -> dict[str, Any]:
        return dict(response=response, context="\n\n".join(retrieved_contexts))
