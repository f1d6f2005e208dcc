"""Metrics a DSPy optimizer can lean on: a program that answers nothing on a third of the items runs through
`dspy.Evaluate` and `BootstrapFewShot` with a metric of every family without one error; the silent items
score the floor, say so in the feedback and are counted; a misconfigured field map is still one clear
error before any judge LM call. LLM judges run on a scripted LM."""

import json
import re
import sys
from pathlib import Path

import dspy
import pytest

from judges import (
    AgentGoalAccuracyWithoutReference,
    AnswerAccuracy,
    AspectCritic,
    BleuScore,
    ChrfScore,
    DataCompyScore,
    ExactMatch,
    Faithfulness,
    LLMSQLEquivalence,
    MetricConfigurationError,
    NonLLMContextRecall,
    NonLLMStringSimilarity,
    RougeScore,
    StringPresence,
    ToolCallAccuracy,
    ToolCallF1,
)
from judges.data.samples import AIMessage, HumanMessage, ToolCall

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402

COUNTRIES = ["France", "Japan", "Italy", "Spain", "Peru", "Chile", "Kenya", "Egypt", "Chad"]
CAPITALS = ["Paris", "Tokyo", "Rome", "Madrid", "Lima", "Santiago", "Nairobi", "Cairo", "N'Djamena"]


def program_lm():
    """The program's LM: answers nothing ("") for every third country, else the capital."""

    def respond(prompt):
        question = prompt.split("[[ ## question ## ]]")[-1]
        i = next(i for i, c in enumerate(COUNTRIES) if c in question)
        return {"answer": "" if i % 3 == 0 else CAPITALS[i]}

    return scripted_lm(respond)


class Program(dspy.Module):
    """A RAG-ish agent: an answer, the contexts it used and its conversation with a tool call; all empty
    when the LM answered nothing."""

    def __init__(self):
        super().__init__()
        self.answer = dspy.Predict("question -> answer")

    def forward(self, question):
        answer = self.answer(question=question).answer or ""
        silent = not answer.strip()
        messages = [] if silent else [HumanMessage(content=question), AIMessage(
            content=answer, tool_calls=[ToolCall(name="capital", args={"city": answer})])]
        table = "" if silent else f"city\n{answer}"
        return dspy.Prediction(answer=answer, contexts=[] if silent else [answer], messages=messages, table=table,
                               sql="" if silent else "SELECT name FROM city")


def devset():
    return [dspy.Example(question=f"What is the capital of {c}?", answer=a, reference_contexts=[a],
                         reference_tool_calls=[ToolCall(name="capital", args={"city": a})], table=f"city\n{a}",
                         sql="SELECT name FROM city", schema=["table city: name TEXT"]).with_inputs("question")
            for c, a in zip(COUNTRIES, CAPITALS)]


def judge_lm():
    """Answers any judge step: reads the output fields the prompt asks for and gives a passing value."""
    canned = {"claims": ["the capital is named"], "reason": "scripted", "verdict": True, "rating": 4,
              "equivalent": True, "reference_explanation": "r", "candidate_explanation": "c", "user_goal": "know",
              "outcome": "knows", "achieved": True}

    def respond(prompt):
        asked = re.findall(r"`\[\[ ## (\w+) ## \]\]`", prompt.split("Respond with the corresponding output fields")[-1])
        out = {}
        for name in asked:
            if name == "verdicts":
                claims = re.findall(r'"([^"]+)"', prompt.split("[[ ## claims ## ]]")[-1].split("[[")[0])
                out[name] = json.dumps([{"claim": c, "reason": "r", "supported": True} for c in claims])
            elif name in canned:
                value = canned[name]
                out[name] = json.dumps(value) if isinstance(value, list) else str(value)
        return out

    return scripted_lm(respond)


ANSWER = {"response": "pred.answer", "reference": "example.answer"}
FAMILIES = {
    "text: exact_match": (ExactMatch(), ANSWER),
    "text: rouge": (RougeScore(), ANSWER),
    "text: bleu": (BleuScore(), ANSWER),
    "text: chrf": (ChrfScore(), ANSWER),
    "text: string presence": (StringPresence(), ANSWER),
    "text: string similarity": (NonLLMStringSimilarity(), ANSWER),
    "retrieval: context recall": (NonLLMContextRecall(), {"retrieved_contexts": "pred.contexts",
                                                           "reference_contexts": "example.reference_contexts"}),
    "tools: tool call accuracy": (ToolCallAccuracy(), {"user_input": "pred.messages"}),
    "tools: tool call f1": (ToolCallF1(), {"user_input": "pred.messages"}),
    "domain: datacompy": (DataCompyScore(), {"response": "pred.table", "reference": "example.table"}),
    "domain: sql": (LLMSQLEquivalence(lm=judge_lm(), execute=False),
                    {"response": "pred.sql", "reference": "example.sql", "reference_contexts": "example.schema"}),
    "rag: faithfulness": (Faithfulness(lm=judge_lm()), {"response": "pred.answer",
                                                         "retrieved_contexts": "example.reference_contexts"}),
    "dual judge: answer accuracy": (AnswerAccuracy(lm=judge_lm()), {**ANSWER, "user_input": "example.question"}),
    "custom: aspect critic": (AspectCritic(name="named", definition="Does it name a city?", lm=judge_lm()),
                              {"response": "pred.answer"}),
    "agent: goal accuracy": (AgentGoalAccuracyWithoutReference(lm=judge_lm()), {"user_input": "pred.messages"}),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_silent_program_scores_the_floor_inside_evaluate_and_bootstrap(family):
    judge, field_map = FAMILIES[family]
    metric = judge.as_metric(field_map=field_map)
    program = Program()
    with dspy.context(lm=program_lm()):
        result = dspy.Evaluate(devset=devset(), metric=metric, num_threads=2, max_errors=0,
                               display_progress=False)(program)
        scores = [score for _, _, score in result.results]
        assert metric.empty_outputs == 3  # the silent third, counted
        assert [scores[i] for i in (0, 3, 6)] == [judge.output_floor] * 3
        assert result.score > 0  # the answered items were scored (by the metric's own rule)
        compiled = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=2, max_labeled_demos=0,
                                         max_errors=0).compile(program, trainset=devset())
    assert all(d.answer for d in compiled.answer.demos)  # no silent answer became a demo
    with_feedback = judge.as_metric(field_map=field_map, feedback=True)
    with dspy.context(lm=program_lm()):
        out = with_feedback(devset()[0], program(question=devset()[0].question), None, "answer", None)
    assert out.score == judge.output_floor and "is empty" in out.feedback


def test_a_field_the_program_never_produces_is_one_clear_error_before_any_lm_call():
    lm = judge_lm()
    metric = Faithfulness(lm=lm).as_metric(field_map={"response": "pred.summary"})
    with dspy.context(lm=program_lm()):
        prediction = Program()(question=devset()[1].question)
    with pytest.raises(MetricConfigurationError,
                       match="'response': not found: looked at pred.summary; the program never produces it"):
        metric(devset()[1], prediction)
    assert lm.engine.calls == 0
