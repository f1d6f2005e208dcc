"""Answer alternatives: a reference may list several acceptable answers ("June Carter Cash", "June Cash"),
and every reference-based metric uses the best of them; LLM judges see them listed as such. Importing
"a/b/c" files splits only with an explicit separator ("9/11" and "UN/LOCODE" stay whole by default)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from calibration.data.labelled import LabelledSet
from calibration.fitting.signals import reference_token_recall
from judges import (
    AnswerAccuracy,
    AnswerCorrectness,
    BleuScore,
    ChrfScore,
    DataCompyScore,
    EvaluationDataset,
    ExactMatch,
    LLMContextRecall,
    LLMSQLEquivalence,
    NonLLMStringSimilarity,
    RougeScore,
    SemanticSimilarity,
    SingleTurnSample,
    StringPresence,
)

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402

ALIASES = ["June Carter Cash", "June Cash", "June Carter"]


def sample(response, reference=ALIASES, **extra):
    return SingleTurnSample(response=response, reference=reference, **extra)


@pytest.mark.parametrize("metric, response, expected", [
    (ExactMatch(), "June Cash", 1.0),
    (StringPresence(), "It was June Carter, Johnny's wife.", 1.0),
    (NonLLMStringSimilarity(), "June Cash", 1.0),
    (RougeScore(), "June Cash", 1.0),
    (BleuScore(), "June Cash", 1.0),
    (ChrfScore(), "June Cash", 1.0),
])
def test_text_metrics_score_against_the_best_alternative(metric, response, expected):
    result = metric.score(sample(response))
    assert result.score == pytest.approx(expected)
    single = metric.score(sample(response, reference=" / ".join(ALIASES)))  # the old one-string convention
    assert single.score < expected


def test_the_winner_is_named_and_one_alternative_is_the_string():
    result = ExactMatch().score(sample("June Cash"))
    assert result.matched_reference == "June Cash"
    assert SingleTurnSample(reference=["only"]).reference == "only"
    assert "matched_reference" not in ExactMatch().score(sample("x", reference="x"))


def test_reference_token_recall_takes_the_best_alternative_and_no_longer_splits_on_slashes():
    assert reference_token_recall(sample("It was June Cash.")) == 1.0
    assert reference_token_recall(sample("9/11 happened", reference="9/11")) == 1.0
    assert reference_token_recall(sample("Wilhelm Röntgen", reference="Röntgen / X")) == 0.5  # plain text now


def test_semantic_similarity_takes_the_closest_alternative():
    def embed(texts):
        return np.array([[1.0, 0.0] if "Cash" in t and "Carter" not in t else [0.0, 1.0] for t in texts])

    result = SemanticSimilarity(embeddings=embed).score(sample("June Cash"))
    assert result.score == pytest.approx(1.0) and result.matched_reference == "June Cash"


def test_a_separator_is_opt_in_when_importing(tmp_path):
    rows = [{"response": "r", "reference": "June Carter Cash/June Cash"}, {"response": "r", "reference": "9/11"}]
    plain = EvaluationDataset.from_list(rows)
    assert [s.reference for s in plain] == ["June Carter Cash/June Cash", "9/11"]
    split = EvaluationDataset.from_list(rows, reference_separator="/")
    assert split[0].reference == ["June Carter Cash", "June Cash"] and split[1].reference == ["9", "11"]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps({**r, "label": 1}) + "\n" for r in rows))
    assert LabelledSet.from_jsonl(path, reference_separator="/").dataset[0].reference == ["June Carter Cash", "June Cash"]


def test_alternatives_round_trip_through_every_format(tmp_path):
    data = EvaluationDataset([sample("June Cash"), sample("x", reference="one answer")])
    assert EvaluationDataset.from_csv(data.to_csv(tmp_path / "d.csv")) == data
    assert EvaluationDataset.from_jsonl(data.to_jsonl(tmp_path / "d.jsonl")) == data
    assert EvaluationDataset.from_hf_dataset(data.to_hf_dataset()) == data
    assert EvaluationDataset.from_pandas(data.to_pandas()) == data


def test_llm_judges_see_the_alternatives_listed_or_the_closest_one():
    prompts = []

    def respond(prompt):
        prompts.append(prompt)
        if "rating" in prompt.split("Respond with")[-1]:
            return {"rating": "4"}
        if "verdicts" in prompt.split("Respond with")[-1]:
            return {"verdicts": '[{"claim": "c", "reason": "r", "supported": true}]'}
        return {"claims": '["c"]'}

    many = sample("June Cash", reference=ALIASES + [f"alias {i}" for i in range(30)], user_input="Who?",
                  retrieved_contexts=["June Carter sang."])
    AnswerAccuracy(lm=scripted_lm(respond)).score(many)
    shown = prompts[0]
    assert "Any of these acceptable answers: (1) June Carter Cash; (2) June Cash" in shown
    assert "(and 13 more)" in shown and "alias 29" not in shown  # capped at 20 in a prompt
    prompts.clear()
    AnswerCorrectness(lm=scripted_lm(respond), weights=(1.0, 0.0)).score(many)
    assert any("[[ ## text ## ]]\nJune Cash" in p for p in prompts)  # the closest alternative is decomposed
    prompts.clear()
    LLMContextRecall(lm=scripted_lm(respond)).score(many)
    assert any("[[ ## text ## ]]\nJune Carter\n" in p for p in prompts)  # the one the contexts cover best


def test_sql_and_tables_agree_with_any_alternative():
    schema = ["table users: name TEXT, age INT"]
    judge = LLMSQLEquivalence(lm=scripted_lm(lambda p: {"reference_explanation": "r", "candidate_explanation": "c",
                                                          "equivalent": "False"}))
    result = judge.score(SingleTurnSample(response="SELECT name FROM users WHERE age >= 31", reference_contexts=schema,
                                          reference=["SELECT name FROM users", "SELECT name FROM users WHERE age > 30"]))
    assert result.execution_equivalent is True
    tables = DataCompyScore().score(SingleTurnSample(response="id,x\n1,a", reference=["id,x\n1,b", "id,x\n1,a"]))
    assert tables.score == 1.0 and tables.matched_reference == 1
