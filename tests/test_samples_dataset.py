import json

import dspy
import pandas as pd
import pytest

from judges import (
    AIMessage,
    EvaluationDataset,
    HumanMessage,
    MultiTurnSample,
    SampleValidationError,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
)

SINGLE_ROWS = [
    {
        "user_input": "埃菲尔铁塔在哪里？",
        "response": "埃菲尔铁塔位于巴黎。",
        "retrieved_contexts": ["埃菲尔铁塔位于巴黎。", "巴黎是法国的首都。"],
        "reference": "埃菲尔铁塔位于巴黎。",
        "retrieved_context_ids": ["d1", "d2"],
        "rubrics": {"score1_description": "wrong", "score5_description": "right"},
    },
    {
        "user_input": "アインシュタインはいつ生まれましたか？",
        "response": "1879年3月14日です。",
        "retrieved_contexts": ["アルベルト・アインシュタイン（1879年3月14日生まれ）は理論物理学者。"],
        "reference_contexts": ["1879年3月14日生まれ"],
    },
]


def conversation():
    return MultiTurnSample(
        user_input=[
            HumanMessage(content="What's the weather like in New York right now?"),
            AIMessage(
                content="Let me check.",
                tool_calls=[ToolCall(name="weather_check", args={"location": "New York"})],
            ),
            ToolMessage(content="75°F, partly cloudy."),
            AIMessage(content="It's 75°F and partly cloudy in New York."),
            HumanMessage(content="Thanks!"),
        ],
        reference_tool_calls=[ToolCall(name="weather_check", args={"location": "New York"})],
        reference_topics=["weather"],
        reference="Reports the weather in New York",
    )


def test_single_turn_rejects_wrong_type_naming_the_field():
    with pytest.raises(SampleValidationError) as err:
        SingleTurnSample.parse({"user_input": "q", "retrieved_contexts": "not a list"})
    assert "retrieved_contexts" in str(err.value)
    assert err.value.problems[0][1] == "retrieved_contexts"


def test_unknown_field_is_named():
    with pytest.raises(SampleValidationError, match="reponse"):
        SingleTurnSample.parse({"user_input": "q", "reponse": "typo"})


def test_tool_message_needs_a_preceding_tool_call():
    with pytest.raises(SampleValidationError, match="ToolMessage"):
        MultiTurnSample.parse({"user_input": [{"type": "human", "content": "hi"}, {"type": "tool", "content": "x"}]})


def test_multi_turn_helpers():
    sample = conversation()
    assert [c.name for c in sample.tool_calls()] == ["weather_check"]
    text = sample.pretty_repr()
    assert "Human: What's the weather" in text and 'weather_check({"location": "New York"})' in text
    assert len(sample.human_messages()) == 2


@pytest.mark.parametrize("fmt", ["list", "pandas", "hf", "jsonl", "csv", "examples"])
def test_single_turn_round_trip(fmt, tmp_path):
    ds = EvaluationDataset.from_list(SINGLE_ROWS)
    back = _round_trip(ds, fmt, tmp_path)
    assert back == ds
    assert back.sample_type is SingleTurnSample


@pytest.mark.parametrize("fmt", ["list", "pandas", "hf", "jsonl", "csv", "examples"])
def test_multi_turn_round_trip(fmt, tmp_path):
    ds = EvaluationDataset([conversation(), conversation()])
    back = _round_trip(ds, fmt, tmp_path)
    assert back == ds
    assert back.sample_type is MultiTurnSample


def _round_trip(ds, fmt, tmp_path):
    if fmt == "list":
        return EvaluationDataset.from_list(ds.to_list())
    if fmt == "pandas":
        return EvaluationDataset.from_pandas(ds.to_pandas())
    if fmt == "hf":
        return EvaluationDataset.from_hf_dataset(ds.to_hf_dataset())
    if fmt == "jsonl":
        return EvaluationDataset.from_jsonl(ds.to_jsonl(tmp_path / "d.jsonl"))
    if fmt == "csv":
        return EvaluationDataset.from_csv(ds.to_csv(tmp_path / "d.csv"))
    if fmt == "examples":
        return EvaluationDataset.from_examples(ds.to_examples())
    raise AssertionError(fmt)


def test_legacy_columns_are_mapped():
    frame = pd.DataFrame(
        {
            "question": ["Where is the Eiffel Tower?"],
            "answer": ["Paris."],
            "contexts": [["The Eiffel Tower is in Paris."]],
            "ground_truths": [["It is in Paris."]],
        }
    )
    sample = EvaluationDataset.from_pandas(frame)[0]
    assert sample.user_input == "Where is the Eiffel Tower?"
    assert sample.response == "Paris."
    assert sample.retrieved_contexts == ["The Eiffel Tower is in Paris."]
    assert sample.reference == "It is in Paris."


def test_legacy_and_new_name_together_is_ambiguous():
    with pytest.raises(SampleValidationError, match="question"):
        EvaluationDataset([{"question": "a", "user_input": "b"}])


def test_dataset_reports_every_bad_row_with_its_index():
    rows = [{"user_input": "ok"}, {"user_input": 3}, {"user_input": "x", "retrieved_contexts": 7}]
    with pytest.raises(SampleValidationError) as err:
        EvaluationDataset(rows)
    assert [(i, f) for i, f, _ in err.value.problems] == [(1, "user_input"), (2, "retrieved_contexts")]
    assert "sample 2, field 'retrieved_contexts'" in str(err.value)
    # a plain text where a list of texts goes is that one text (a CSV knowledge column), counted once per field
    plain = EvaluationDataset([{"response": "a", "retrieved_contexts": "one passage"}] * 3)
    assert plain[0].retrieved_contexts == ["one passage"] and plain.plain_text_lists == {"retrieved_contexts": 3}


def test_dataset_must_be_homogeneous():
    with pytest.raises(SampleValidationError, match="holds SingleTurnSamples"):
        EvaluationDataset([SingleTurnSample(user_input="a"), conversation()])


def test_malformed_jsonl_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"user_input": "a"}\n{not json}\n', encoding="utf-8")
    with pytest.raises(SampleValidationError, match=r"bad.jsonl:2"):
        EvaluationDataset.from_jsonl(path)


def test_csv_cells_hold_json_for_lists(tmp_path):
    path = EvaluationDataset.from_list(SINGLE_ROWS).to_csv(tmp_path / "d.csv")
    frame = pd.read_csv(path)
    assert json.loads(frame.loc[0, "retrieved_contexts"]) == SINGLE_ROWS[0]["retrieved_contexts"]


def test_examples_mark_inputs():
    examples = EvaluationDataset.from_list(SINGLE_ROWS).to_examples()
    assert isinstance(examples[0], dspy.Example)
    assert set(examples[0].inputs().keys()) == {"user_input"}
    assert "reference" in examples[0].labels().keys()
    custom = EvaluationDataset.from_list(SINGLE_ROWS).to_examples(input_keys=("user_input", "retrieved_contexts"))
    assert set(custom[0].inputs().keys()) == {"user_input", "retrieved_contexts"}


def test_slicing_and_features():
    ds = EvaluationDataset.from_list(SINGLE_ROWS)
    assert len(ds[:1]) == 1 and isinstance(ds[:1], EvaluationDataset)
    assert "reference_contexts" in ds.features() and "rubrics" in ds.features()
