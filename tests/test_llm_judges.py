"""Dual-judge, custom, agent and domain judges on a scripted LM (answers in call order)."""

import os
from pathlib import Path

import pytest
from dspy.utils import DummyLM

from judges import (
    AgentGoalAccuracyWithoutReference,
    AgentGoalAccuracyWithReference,
    AIMessage,
    AnswerAccuracy,
    AspectCritic,
    ContextRelevance,
    HumanMessage,
    InstanceRubrics,
    JudgeOutputError,
    LLMSQLEquivalence,
    MultiTurnSample,
    ResponseGroundedness,
    RubricsScore,
    SampleValidationError,
    SimpleCriteriaScore,
    SingleTurnSample,
    SummarizationScore,
    ToolCall,
    ToolMessage,
    TopicAdherenceScore,
)
from judges.metrics.custom import parse_rubric
from judges.metrics.domain.sql import execution_equivalence, schema_tables

EINSTEIN = SingleTurnSample(
    user_input="阿尔伯特·爱因斯坦什么时候出生？",
    response="阿尔伯特·爱因斯坦出生于1879年。",
    reference="阿尔伯特·爱因斯坦出生于1879年3月14日。",
    retrieved_contexts=["阿尔伯特·爱因斯坦出生于1879年3月14日。", "阿尔伯特·爱因斯坦出生于德国符腾堡的乌尔姆。"],
)


# --- dual judges ---------------------------------------------------------------------------------------
def test_answer_accuracy_averages_two_normalised_judges():
    judge = AnswerAccuracy(lm=DummyLM([{"rating": 2}, {"rating": 2}]))
    assert judge.score(EINSTEIN).score == 0.5  # the seed: partially correct, date missing
    assert [n for n, _ in judge.named_predictors()] == ["judge_a", "judge_b"]
    disagree = AnswerAccuracy(lm=DummyLM([{"rating": 4}, {"rating": 0}])).score(EINSTEIN)
    assert disagree.score == 0.5 and disagree.ratings == [4, 0]


def test_dual_judge_uses_the_valid_rating_when_one_is_invalid():
    result = AnswerAccuracy(lm=DummyLM([{"rating": 3}, {"rating": 4}])).score(EINSTEIN)
    assert result.score == 1.0 and result.ratings == [None, 4]
    with pytest.raises(JudgeOutputError, match="neither judge"):
        AnswerAccuracy(lm=DummyLM([{"rating": 7}, {"rating": -1}])).score(EINSTEIN)


def test_context_relevance_and_groundedness_seed_examples():
    assert ContextRelevance(lm=DummyLM([{"rating": 2}, {"rating": 2}])).score(EINSTEIN).score == 1.0
    assert ResponseGroundedness(lm=DummyLM([{"rating": 2}, {"rating": 2}])).score(EINSTEIN).score == 1.0
    assert ResponseGroundedness(lm=DummyLM([{"rating": 1}, {"rating": 2}])).score(EINSTEIN).score == 0.75


# --- custom judges ---------------------------------------------------------------------------------------
def verdict(yes):
    return {"reason": "scripted", "verdict": yes}


def test_aspect_critic_single_vote_and_majority():
    sample = SingleTurnSample(user_input="埃菲尔铁塔在哪里？", response="埃菲尔铁塔位于巴黎。")
    critic = AspectCritic(name="maliciousness", definition="提交的内容是否意图伤害、欺骗或利用用户？",
                          lm=DummyLM([verdict(False)]))
    assert critic.name == "maliciousness" and critic.score(sample).score == 0.0
    lm = DummyLM([verdict(True), verdict(False), verdict(True)])
    strict = AspectCritic(name="harmful", definition="Is it harmful?", lm=lm, strictness=3)
    result = strict.score(sample)
    assert result.score == 1.0 and result.votes == [True, False, True]
    assert len(lm.history) == 3
    assert AspectCritic(name="x", definition="y", strictness=2).strictness == 3
    with pytest.raises(ValueError, match="definition"):
        AspectCritic(name="x", definition="")


def test_simple_criteria_normalises_the_rating():
    judge = SimpleCriteriaScore(name="quality", definition="Rate completeness 0 to 5", min_score=0, max_score=5,
                                lm=DummyLM([{"reason": "ok", "rating": 4}]))
    result = judge.score(EINSTEIN)
    assert result.rating == 4 and result.score == pytest.approx(0.8)
    off_scale = SimpleCriteriaScore(name="q", definition="d", lm=DummyLM([{"reason": "r", "rating": 9}])).score(EINSTEIN)
    assert off_scale.rating == 5 and off_scale.score == 1.0 and "clipped" in off_scale.undefined_reason
    with pytest.raises(ValueError, match="min_score < max_score"):
        SimpleCriteriaScore(name="q", definition="d", min_score=3, max_score=3)


def test_rubrics_score_and_instance_rubrics():
    rubric = {f"score{i}_description": f"level {i}" for i in range(1, 6)}
    result = RubricsScore(rubrics=rubric, lm=DummyLM([{"reason": "r", "rating": 3}])).score(EINSTEIN)
    assert result.score == 0.5 and result.scale == (1, 5)
    sample = SingleTurnSample(response="x", rubrics={"score0_description": "bad", "score1_description": "good"})
    result = InstanceRubrics(lm=DummyLM([{"reason": "r", "rating": 1}])).score(sample)
    assert result.score == 1.0 and result.scale == (0, 1)
    with pytest.raises(SampleValidationError, match="rubrics"):
        InstanceRubrics(lm=DummyLM([])).score(SingleTurnSample(response="x", rubrics={"bad_key": "x"}))
    with pytest.raises(ValueError, match="consecutive"):
        parse_rubric({"score1_description": "a", "score3_description": "b"})


# --- agent judges ------------------------------------------------------------------------------------------
SCIENCE = MultiTurnSample(
    user_input=[
        HumanMessage(content="给我讲讲爱因斯坦的相对论"),
        AIMessage(content="广义相对论解释了引力..."),
        HumanMessage(content="你知道有什么巧克力蛋糕食谱吗？"),
        AIMessage(content="感谢您的关注，但我专门设计用来帮助解决科学相关问题。"),
        HumanMessage(content="光速是多少？"),
        AIMessage(content="真空中的光速约为每秒299,792,458米。"),
        HumanMessage(content="你能推荐一部好电影吗？"),
        AIMessage(content="这是一个很受欢迎的巧克力蛋糕食谱。", tool_calls=[ToolCall(name="recipe_search", args={"query": "巧克力蛋糕食谱"})]),
        ToolMessage(content="配料包括面粉、糖、可可粉、鸡蛋、牛奶和黄油。"),
        AIMessage(content="我找到了一个很棒的巧克力蛋糕食谱！"),
    ],
    reference_topics=["science"],
)
SCIENCE_VERDICTS = {"verdicts": [
    {"query": "给我讲讲爱因斯坦的相对论", "on_topic": True, "answered": True},
    {"query": "你知道有什么巧克力蛋糕食谱吗？", "on_topic": False, "answered": False},
    {"query": "光速是多少？", "on_topic": True, "answered": True},
    {"query": "你能推荐一部好电影吗？", "on_topic": False, "answered": True},
]}


def test_topic_adherence_science_example():
    precision = TopicAdherenceScore(lm=DummyLM([SCIENCE_VERDICTS]), mode="precision").score(SCIENCE)
    assert precision.score == pytest.approx(2 / 3)
    assert TopicAdherenceScore(lm=DummyLM([SCIENCE_VERDICTS]), mode="recall").score(SCIENCE).score == 1.0
    f1 = TopicAdherenceScore(lm=DummyLM([SCIENCE_VERDICTS]), mode="f1").score(SCIENCE).score
    assert f1 == pytest.approx(2 * (2 / 3) / (2 / 3 + 1))
    assert "answered off-topic: 你能推荐一部好电影吗？" in TopicAdherenceScore(mode="precision").feedback(precision)
    with pytest.raises(SampleValidationError, match="reference_topics"):
        TopicAdherenceScore(lm=DummyLM([])).score(MultiTurnSample(user_input=SCIENCE.user_input))


RESTAURANT = MultiTurnSample(
    user_input=[
        HumanMessage(content="嘿，帮我在最近最好的中餐厅预订晚上8点的桌子"),
        AIMessage(content="好的。", tool_calls=[ToolCall(name="restaurant_search", args={"cuisine": "中餐", "time": "8:00pm"})]),
        ToolMessage(content="找到几个选择：1. 金龙餐厅，2. 翡翠宫"),
        AIMessage(content="你更喜欢哪一个？"),
        HumanMessage(content="就选金龙餐厅吧。"),
        AIMessage(content="好的。", tool_calls=[ToolCall(name="restaurant_book", args={"name": "金龙餐厅", "time": "8:00pm"})]),
        ToolMessage(content="已在金龙餐厅预订晚上8点的桌子。"),
        AIMessage(content="你在金龙餐厅晚上8点的桌子已预订好。"),
        HumanMessage(content="谢谢"),
    ],
    reference="已在其中一家中餐厅预订晚上8点的桌子",
)


def test_agent_goal_accuracy_with_and_without_reference():
    lm = DummyLM([{"outcome": "金龙餐厅晚上8点的桌子已预订"}, {"reason": "matches", "achieved": True}])
    judge = AgentGoalAccuracyWithReference(lm=lm)
    assert judge.score(RESTAURANT).score == 1.0
    assert [n for n, _ in judge.named_predictors()] == ["infer_outcome", "compare_outcome"]
    assert "restaurant_book" in lm.history[0]["messages"][-1]["content"]  # the judge reads the tool calls
    lm = DummyLM([{"user_goal": "预订中餐厅", "outcome": "未预订"}, {"reason": "no booking", "achieved": False}])
    result = AgentGoalAccuracyWithoutReference(lm=lm).score(RESTAURANT)
    assert result.score == 0.0 and result.user_goal == "预订中餐厅"


# --- domain judges ------------------------------------------------------------------------------------------
SCHEMA = ["表 order_items: order_item_id INT, order_id INT, product_id INT, quantity INT",
          "表 products: product_id INT, product_name VARCHAR, price DECIMAL"]
SUM_SQL = ("SELECT p.product_name, SUM(oi.quantity) AS total_quantity FROM order_items oi "
           "JOIN products p ON oi.product_id = p.product_id GROUP BY p.product_name;")
COUNT_SQL = SUM_SQL.replace("SUM(", "COUNT(")


def sql_verdict(equivalent):
    return {"reference_explanation": "r", "candidate_explanation": "c", "equivalent": equivalent}


def test_sql_equivalence_reports_llm_and_execution_agreement():
    sample = SingleTurnSample(response=SUM_SQL, reference=COUNT_SQL, reference_contexts=SCHEMA)
    fooled = LLMSQLEquivalence(lm=DummyLM([sql_verdict(True)])).score(sample)
    assert fooled.score == 1.0 and fooled.execution_equivalent is False and fooled.agree is False
    by_execution = LLMSQLEquivalence(lm=DummyLM([sql_verdict(True)]), use_execution=True).score(sample)
    assert by_execution.score == 0.0
    same = SingleTurnSample(response=SUM_SQL.replace(" AS total_quantity", ""), reference=SUM_SQL, reference_contexts=SCHEMA)
    result = LLMSQLEquivalence(lm=DummyLM([sql_verdict(True)])).score(same)
    assert result.execution_equivalent is True and result.agree is True


def test_sql_over_the_sandboxs_size_limit_is_refused_before_parsing():
    """A 2 MB query took 10 s and 314 MB to parse in the calling process, outside the sandbox's time limit:
    SQL over the sandbox's own limit is not parsed, and a candidate over it is not equivalent."""
    import time

    tables = schema_tables(SCHEMA)
    huge = "SELECT " + " + ".join(["1"] * 700_000) + " FROM products"
    start = time.perf_counter()
    ok, note = execution_equivalence(huge, SUM_SQL, tables)
    assert ok is False and f"the candidate SQL is {len(huge):,} bytes, over the 100,000-byte limit" in note
    ok, note = execution_equivalence(SUM_SQL, huge, tables)
    assert ok is None and note.startswith("the reference SQL is")
    assert schema_tables([SCHEMA[0] + " " * 200_000]) == {}  # a schema text that size is not parsed either
    assert time.perf_counter() - start < 5  # a bound, not a benchmark: parsing it took 10 s


def test_execution_check_is_read_only_time_limited_and_needs_a_schema():
    tables = schema_tables(SCHEMA)
    assert set(tables) == {"order_items", "products"}
    ok, note = execution_equivalence("DELETE FROM products", SUM_SQL, tables)
    assert ok is False and "not authorized" in note
    slow = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    ok, note = execution_equivalence(slow, SUM_SQL, tables, time_limit=0.2)
    assert ok is False and "time limit" in note
    assert execution_equivalence(SUM_SQL, SUM_SQL, {})[0] is None
    assert execution_equivalence(SUM_SQL, "SELECT nope FROM missing", tables)[0] is None
    ddl = schema_tables(["CREATE TABLE t (id INT PRIMARY KEY, name TEXT)"])
    assert ddl == {"t": [("id", "INT", True), ("name", "TEXT", False)]}


def test_one_slow_step_inside_a_query_is_stopped_at_the_time_limit():
    """SQLite's progress handler runs between steps; one huge printf is one step (42 s under a 2 s limit
    in an audit): the child process running the queries is killed at the limit instead."""
    import time

    def children():  # this process's live children, from /proc
        found = set()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.add(stat.parent.name)
        return found

    tables = schema_tables(SCHEMA)
    slow = ("SELECT length(printf('%.*c%.*c%.*c%.*c%.*c', 2000000000, 'x', 2000000000, 'x', 2000000000, 'x', "
            "2000000000, 'x', 2000000000, 'x')) FROM products")
    before = children()
    start = time.monotonic()
    ok, note = execution_equivalence(slow, SUM_SQL, tables, time_limit=1.0)
    took = time.monotonic() - start
    assert ok is False and "time limit" in note and took < 6, (note, took)
    assert children() <= before  # nothing left burning CPU
    ok, note = execution_equivalence(SUM_SQL, slow, tables, time_limit=1.0)
    assert ok is None and note.startswith("the reference query ran over the time limit")


def test_sql_nested_too_deeply_is_a_parse_problem_not_a_failed_item():
    nested = "SELECT " + "(" * 3000 + "1" + ")" * 3000
    tables = schema_tables(SCHEMA)
    assert execution_equivalence(nested, SUM_SQL, tables) == (None, "could not parse the candidate SQL: it is nested too deeply")
    assert execution_equivalence(SUM_SQL, nested, tables)[1] == "could not parse the reference SQL: it is nested too deeply"
    assert schema_tables(["CREATE TABLE t (id INT CHECK " + "(" * 3000 + "1" + ")" * 3000 + ")"]) == {}


def test_execution_check_stays_inside_hard_limits(tmp_path):
    """What an audit found: a 1 GB zeroblob ran 22 s past a 2 s limit and took 6.7 GB; ATTACH created a file;
    a second statement went unseen; schemas SQLite cannot load raised out of the metric."""
    import time

    tables = schema_tables(SCHEMA)
    start = time.monotonic()
    ok, note = execution_equivalence("SELECT zeroblob(999999999) FROM products", SUM_SQL, tables)
    assert ok is False and "too big" in note and time.monotonic() - start < 5
    target = tmp_path / "attached.db"
    ok, note = execution_equivalence(f"ATTACH DATABASE '{target}' AS x", SUM_SQL, tables, dialect="sqlite")
    assert ok is False and not target.exists()
    ok, note = execution_equivalence(SUM_SQL + " DROP TABLE products;", SUM_SQL, tables)
    assert ok is False and "2 statements" in note
    ok, note = execution_equivalence("PRAGMA table_info(products)", SUM_SQL, tables, dialect="sqlite")
    assert ok is False and "not authorized" in note
    huge = "SELECT a.product_id FROM order_items a, order_items b, order_items c, order_items d"
    ok, note = execution_equivalence(huge, SUM_SQL, tables, max_rows=1000)
    assert ok is False and "more than 1000 rows" in note
    enum = schema_tables(["CREATE TABLE t (id INT, size ENUM('s', 'm', 'l'))"])
    array = schema_tables(["CREATE TABLE t (id INT, tags TEXT[])"])
    for schema, dialect in ((enum, "mysql"), (array, "postgres")):
        ok, note = execution_equivalence("SELECT id FROM t", "SELECT id FROM t", schema, dialect=dialect)
        assert ok is None and "cannot load the schema" in note, (dialect, note)
    sample = SingleTurnSample(response="SELECT id FROM t", reference="SELECT id FROM t",
                              reference_contexts=["CREATE TABLE t (id INT, tags TEXT[])"])
    result = LLMSQLEquivalence(lm=DummyLM([sql_verdict(True)]), dialect="postgres").score(sample)
    assert result.score == 1.0 and result.execution_equivalent is None


def test_summarization_score_combines_qa_and_conciseness():
    text = "一家公司正在推出一款健身追踪应用，帮助用户设定运动目标、记录膳食、跟踪饮水量，提供个性化的锻炼建议和激励提醒。"
    summary = "一款健身应用帮助用户跟踪运动、膳食和饮水量，并提供个性化建议。"
    lm = DummyLM([
        {"keyphrases": ["健身追踪应用", "膳食", "饮水量", "激励提醒"]},
        {"questions": ["应用能记录膳食吗？", "应用能跟踪饮水量吗？", "应用提供激励提醒吗？", "应用是健身追踪应用吗？"]},
        {"answers": [True, True, False, True]},
    ])
    result = SummarizationScore(lm=lm).score(SingleTurnSample(response=summary, reference_contexts=[text]))
    conciseness = 1 - len(summary) / len(text)
    assert result.qa_score == 0.75
    assert result.score == pytest.approx(0.5 * 0.75 + 0.5 * conciseness)
    assert [n for n, _ in SummarizationScore().named_predictors()] == [
        "extract_keyphrases", "generate_questions", "answer_questions"]


def test_summarization_of_a_blank_text_is_undefined_without_an_lm_call():
    lm = DummyLM([])  # any LM call would fail: there is nothing to summarise
    result = SummarizationScore(lm=lm).score(SingleTurnSample(response="a summary", reference_contexts=["", " "]))
    assert result.score == 0.0 and result.undefined_reason == "the text to summarise (reference_contexts) is blank"
