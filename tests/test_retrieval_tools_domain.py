import pytest

from judges import (
    AIMessage,
    DataCompyScore,
    HumanMessage,
    IDBasedContextPrecision,
    IDBasedContextRecall,
    MultiTurnSample,
    NonLLMContextPrecisionWithReference,
    NonLLMContextRecall,
    NonLLMStringSimilarity,
    SampleValidationError,
    SingleTurnSample,
    ToolCall,
    ToolCallAccuracy,
    ToolCallF1,
    ToolMessage,
    average_precision,
)


def test_average_precision():
    assert average_precision([1, 1, 1]) == 1.0
    assert average_precision([0, 1]) == pytest.approx(0.5)
    assert average_precision([1, 0, 1]) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision([0, 0]) == 0.0
    assert average_precision([0.5, 1.0]) == pytest.approx((0.5 * 0.5 + 1.5 / 2 * 1.0) / 1.5)


def test_non_llm_context_recall_seed_example():
    sample = SingleTurnSample(
        retrieved_contexts=["巴黎是法国的首都。"],
        reference_contexts=["巴黎是法国的首都。", "埃菲尔铁塔是巴黎最著名的地标之一。"],
    )
    result = NonLLMContextRecall().score(sample)
    assert result.score == 0.5
    assert result.retrieved == [True, False]


def test_non_llm_context_precision():
    sample = SingleTurnSample(
        retrieved_contexts=["unrelated text about cooking pasta", "The Eiffel Tower is in Paris."],
        reference_contexts=["The Eiffel Tower is in Paris, France."],
    )
    result = NonLLMContextPrecisionWithReference().score(sample)
    assert result.relevant == [False, True]
    assert result.score == pytest.approx(0.5)
    assert NonLLMContextPrecisionWithReference(threshold=0.99).score(sample).score == 0.0
    with pytest.raises(ValueError, match="threshold"):
        NonLLMContextRecall(threshold=2)


def test_id_based_context_metrics():
    sample = SingleTurnSample(retrieved_context_ids=["a", 1, "c", "c"], reference_context_ids=["1", "c", "d", "e"])
    assert IDBasedContextPrecision().score(sample).score == pytest.approx(2 / 3)
    assert IDBasedContextRecall().score(sample).score == pytest.approx(2 / 4)
    with pytest.raises(SampleValidationError, match="reference_context_ids"):
        IDBasedContextRecall().score(SingleTurnSample(retrieved_context_ids=["a"]))


def agent(calls, reference):
    messages = [HumanMessage(content="纽约现在的天气怎么样？")]
    for call in calls:
        messages += [AIMessage(content="", tool_calls=[call]), ToolMessage(content="ok")]
    messages.append(AIMessage(content="done"))
    return MultiTurnSample(user_input=messages, reference_tool_calls=reference)


WEATHER = ToolCall(name="weather_check", args={"location": "纽约"})
CONVERT = ToolCall(name="temperature_conversion", args={"temperature_fahrenheit": 75})


def test_tool_call_accuracy_seed_weather_example():
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="纽约现在的天气怎么样？"),
            AIMessage(content="纽约目前的温度是75°F，部分多云。", tool_calls=[WEATHER]),
            HumanMessage(content="你能把它转换成摄氏度吗？"),
            AIMessage(content="让我帮你转换成摄氏度。", tool_calls=[CONVERT]),
            ToolMessage(content="75°F约为23.9°C。"),
            AIMessage(content="75°F约为23.9°C。"),
        ],
        reference_tool_calls=[WEATHER, CONVERT],
    )
    assert ToolCallAccuracy().score(sample).score == 1.0
    assert ToolCallF1().score(sample).score == 1.0


def test_tool_call_accuracy_reorder_missing_extra_mismatch():
    reordered = agent([CONVERT, WEATHER], [WEATHER, CONVERT])
    assert ToolCallAccuracy().score(reordered).score == pytest.approx(0.5)
    assert ToolCallAccuracy(strict_order=False).score(reordered).score == 1.0
    assert ToolCallF1().score(reordered).score == 1.0

    missing = agent([WEATHER], [WEATHER, CONVERT])
    result = ToolCallAccuracy().score(missing)
    assert result.score == pytest.approx(0.5) and result.missing == [1]

    extra = agent([WEATHER, CONVERT, WEATHER], [WEATHER, CONVERT])
    result = ToolCallAccuracy().score(extra)
    assert result.score == pytest.approx(2 / 3) and result.extra == [2]
    assert ToolCallF1().score(extra).score == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))

    wrong_name = agent([ToolCall(name="weather_lookup", args={"location": "纽约"})], [WEATHER])
    assert ToolCallAccuracy().score(wrong_name).score == 0.0

    wrong_arg = agent([ToolCall(name="weather_check", args={"location": "北京"})], [WEATHER])
    assert ToolCallAccuracy().score(wrong_arg).score == 0.0
    assert "differing arguments" in ToolCallAccuracy().feedback(ToolCallAccuracy().score(wrong_arg))

    extra_arg = agent([ToolCall(name="weather_check", args={"location": "纽约", "unit": "C"})], [WEATHER])
    assert ToolCallAccuracy().score(extra_arg).score == pytest.approx(0.5)

    as_text = agent([ToolCall(name="temperature_conversion", args={"temperature_fahrenheit": "75"})], [CONVERT])
    assert ToolCallAccuracy().score(as_text).score == 1.0


def test_a_number_is_the_same_argument_in_any_of_its_forms_and_a_list_is_not_its_text():
    def pair(predicted, reference):
        return agent([ToolCall(name="f", args={"x": predicted})], [ToolCall(name="f", args={"x": reference})])

    import numpy as np

    for predicted, reference in ((1, 1.0), (1.0, "1"), ("1.50", 1.5), ("1e2", 100), (np.float64(1.0), 1)):
        assert ToolCallF1().score(pair(predicted, reference)).score == 1.0, (predicted, reference)
        assert ToolCallAccuracy().score(pair(predicted, reference)).score == 1.0, (predicted, reference)
    for predicted, reference in ((True, 1), (1.5, 1), (["a"], "['a']"), ("1e999999", "1e999998"),
                                 ("123456789012345678901234567891", "123456789012345678901234567892")):  # long ids
        assert ToolCallF1().score(pair(predicted, reference)).score == 0.0, (predicted, reference)
        assert ToolCallAccuracy().score(pair(predicted, reference)).score == 0.0, (predicted, reference)


def test_tool_call_accuracy_pluggable_argument_comparison():
    close = agent([ToolCall(name="weather_check", args={"location": "New York City"})],
                  [ToolCall(name="weather_check", args={"location": "New York"})])
    assert ToolCallAccuracy().score(close).score == 0.0
    fuzzy = ToolCallAccuracy(arg_comparison=NonLLMStringSimilarity()).score(close).score
    assert fuzzy == pytest.approx(1 - 5 / 13)
    custom = ToolCallAccuracy(arg_comparison=lambda a, b: float(a.startswith(b))).score(close).score
    assert custom == 1.0


def test_tool_call_empty_lists():
    none_made = MultiTurnSample(user_input=[HumanMessage(content="hi"), AIMessage(content="hello")], reference_tool_calls=[])
    assert ToolCallAccuracy().score(none_made).score == 1.0
    assert ToolCallF1().score(none_made).score == 1.0
    assert ToolCallAccuracy().score(agent([WEATHER], [])).score == 0.0
    with pytest.raises(SampleValidationError, match="reference_tool_calls"):
        ToolCallAccuracy().score(MultiTurnSample(user_input=[HumanMessage(content="hi")]))


DATA1 = "acct_id,dollar_amt,name\n10000001234,123.45,George\n10000001235,0.45,Michael\n"
DATA2 = "acct_id,dollar_amt,name\n10000001234,123.4,George\n10000001235,0.45,Michael\n"


def test_datacompy_seed_example():
    sample = SingleTurnSample(response=DATA1, reference=DATA2)
    assert DataCompyScore(mode="row", metric="f1").score(sample).score == pytest.approx(0.5)
    assert DataCompyScore(mode="column", metric="recall").score(sample).score == pytest.approx(2 / 3)
    assert DataCompyScore(mode="row", abs_tol=0.1).score(sample).score == 1.0
    extra_row = SingleTurnSample(response=DATA1 + "10000001236,5.0,Ann\n", reference=DATA1)
    result = DataCompyScore(mode="row", metric="precision").score(extra_row)
    assert result.score == pytest.approx(2 / 3) and result.recall == 1.0


def test_datacompy_malformed_csv_is_a_clear_error_in_the_reference_and_a_bad_answer_in_the_response():
    bad = SingleTurnSample(response='a,b\n1,"unterminated\n', reference=DATA2)
    result = DataCompyScore().score(bad)
    assert result.score == 0.0 and "is not a CSV table" in result.not_a_table
    with pytest.raises(SampleValidationError, match="field 'reference': is not a CSV table"):
        DataCompyScore().score(SingleTurnSample(response=DATA2, reference='a,b\n1,"unterminated\n'))
    with pytest.raises(ValueError, match="mode"):
        DataCompyScore(mode="cell")
