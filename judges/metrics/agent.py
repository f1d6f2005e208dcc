"""Agent judges on multi-turn conversations (``MultiTurnSample``).

TopicAdherenceScore classifies every user query, in one call, as on/off the reference topics and as
answered or refused by the agent; then, over the queries,

    precision = answered-on-topic / (answered-on-topic + answered-off-topic)
    recall    = answered-on-topic / (answered-on-topic + refused-on-topic)

(the seed's science example: precision 2/3, recall 1). A ratio whose denominator is 0 scores 0.0 with an
``undefined_reason``.

Tool results can be long (tau-bench's run to kilobytes of JSON): the goal judges cut each message to
``max_message_chars`` (default 400) before the conversation goes into the prompt.

AgentGoalAccuracyWithReference infers the outcome the conversation reached and compares it with the
reference outcome; AgentGoalAccuracyWithoutReference infers both the user's goal and the outcome from the
conversation and compares them. Both are binary.

Must not run the agent: it judges recorded conversations.
"""

from __future__ import annotations

from typing import Any, ClassVar

import dspy
import pydantic

from judges.data.samples import HumanMessage, MultiTurnSample
from judges.lm.schemas import output_constraints
from judges.metrics.base import Judge


class QueryVerdict(pydantic.BaseModel):
    query: str = pydantic.Field(max_length=300)
    on_topic: bool
    answered: bool


class ClassifyQueries(dspy.Signature):
    """For each numbered user query, decide whether it belongs to the allowed topics (on_topic) and
    whether the assistant actually answered it (answered) rather than declining or redirecting. Give one
    verdict per query, in order, copying the query."""

    topics: list[str] = dspy.InputField(desc="the topics the assistant should stay within")
    exchanges: str = dspy.InputField(desc="numbered user queries, each with the assistant's reply")
    verdicts: list[QueryVerdict] = dspy.OutputField()


class InferOutcome(dspy.Signature):
    """Read the conversation between a user, an AI agent and its tools. State in one or two sentences the
    end state the conversation actually reached (what was done, booked, changed or answered)."""

    conversation: str = dspy.InputField()
    outcome: str = dspy.OutputField()


class InferGoalAndOutcome(dspy.Signature):
    """Read the conversation between a user, an AI agent and its tools. State the goal the user wanted to
    achieve, and the end state the conversation actually reached."""

    conversation: str = dspy.InputField()
    user_goal: str = dspy.OutputField()
    outcome: str = dspy.OutputField()


class CompareOutcome(dspy.Signature):
    """Decide whether the achieved outcome fulfils the desired outcome."""

    desired_outcome: str = dspy.InputField()
    achieved_outcome: str = dspy.InputField()
    reason: str = dspy.OutputField()
    achieved: bool = dspy.OutputField()


def user_exchanges(sample: MultiTurnSample) -> list[tuple[str, str]]:
    """(user query, everything the agent said and its tools returned until the next query)."""
    exchanges: list[tuple[str, list[str]]] = []
    for message in sample.user_input:
        if isinstance(message, HumanMessage):
            exchanges.append((message.content, []))
        elif exchanges:
            exchanges[-1][1].append(message.pretty_repr())
    return [(query, "\n".join(replies)) for query, replies in exchanges]


class TopicAdherenceScore(Judge):
    """Precision, recall or F1 of the agent answering on-topic queries and declining off-topic ones."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "reference_topics")
    sample_type: ClassVar[type] = MultiTurnSample

    def __init__(self, *, lm: Any = None, mode: str = "precision", adapter: Any = None):
        if mode not in ("precision", "recall", "f1"):
            raise ValueError(f"topic_adherence_score: mode={mode!r} is not one of ['f1', 'precision', 'recall']")
        super().__init__(lm=lm, adapter=adapter)
        self.mode = mode
        self.classify_queries = dspy.Predict(ClassifyQueries)

    def forward(self, user_input: list, reference_topics: list[str]):
        exchanges = user_exchanges(MultiTurnSample(user_input=user_input))
        text = "\n\n".join(f"{i + 1}. User: {q}\n{r or 'AI: (no reply)'}" for i, (q, r) in enumerate(exchanges))
        with output_constraints(verdicts={"minItems": len(exchanges), "maxItems": len(exchanges)}):
            verdicts = list(self.classify_queries(topics=reference_topics, exchanges=text).verdicts)
        verdicts = (verdicts + [None] * len(exchanges))[: len(exchanges)]
        rows = [{"query": q, "on_topic": bool(v and v.on_topic), "answered": bool(v and v.answered),
                 "verdict_missing": v is None} for (q, _), v in zip(exchanges, verdicts)]
        tp = sum(r["on_topic"] and r["answered"] for r in rows)
        fp = sum(not r["on_topic"] and r["answered"] for r in rows)
        fn = sum(r["on_topic"] and not r["answered"] for r in rows)
        precision = tp / (tp + fp) if tp + fp else None
        recall = tp / (tp + fn) if tp + fn else None
        if self.mode == "precision":
            value = precision
        elif self.mode == "recall":
            value = recall
        else:
            value = None if precision is None or recall is None else (
                2 * precision * recall / (precision + recall) if precision + recall else 0.0)
        result = dspy.Prediction(score=value if value is not None else 0.0, precision=precision, recall=recall,
                                 queries=rows)
        if value is None:
            result["undefined_reason"] = f"no query counts towards {self.mode} (answered or on-topic)"
        return result

    def feedback(self, result: dspy.Prediction) -> str:
        off = [r["query"] for r in result.queries if r["answered"] and not r["on_topic"]]
        refused = [r["query"] for r in result.queries if r["on_topic"] and not r["answered"]]
        text = f"topic adherence ({self.mode}) = {result.score:.2f}"
        if off:
            text += "; answered off-topic: " + " | ".join(off)
        if refused:
            text += "; refused on-topic: " + " | ".join(refused)
        return text


class AgentGoalAccuracyWithReference(Judge):
    """1.0 when the outcome the conversation reached matches the reference outcome."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "reference")
    sample_type: ClassVar[type] = MultiTurnSample

    def __init__(self, *, lm: Any = None, max_message_chars: int | None = 400, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        self.max_message_chars = max_message_chars
        self.infer_outcome = dspy.Predict(InferOutcome)
        self.compare_outcome = dspy.Predict(CompareOutcome)

    def forward(self, user_input: list, reference: str):
        conversation = MultiTurnSample(user_input=user_input).pretty_repr(self.max_message_chars)
        outcome = self.infer_outcome(conversation=conversation).outcome
        verdict = self.compare_outcome(desired_outcome=reference, achieved_outcome=outcome)
        return dspy.Prediction(score=float(bool(verdict.achieved)), outcome=outcome, reason=verdict.reason)

    def feedback(self, result: dspy.Prediction) -> str:
        return f"goal {'achieved' if result.score else 'not achieved'}: outcome '{result.outcome}'; {result.reason}"


class AgentGoalAccuracyWithoutReference(Judge):
    """1.0 when the outcome the conversation reached fulfils the goal the user expressed in it."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input",)
    sample_type: ClassVar[type] = MultiTurnSample

    def __init__(self, *, lm: Any = None, max_message_chars: int | None = 400, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        self.max_message_chars = max_message_chars
        self.infer_goal_and_outcome = dspy.Predict(InferGoalAndOutcome)
        self.compare_outcome = dspy.Predict(CompareOutcome)

    def forward(self, user_input: list):
        conversation = MultiTurnSample(user_input=user_input).pretty_repr(self.max_message_chars)
        inferred = self.infer_goal_and_outcome(conversation=conversation)
        verdict = self.compare_outcome(desired_outcome=inferred.user_goal, achieved_outcome=inferred.outcome)
        return dspy.Prediction(score=float(bool(verdict.achieved)), user_goal=inferred.user_goal,
                               outcome=inferred.outcome, reason=verdict.reason)

    feedback = AgentGoalAccuracyWithReference.feedback

