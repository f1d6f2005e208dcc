"""Loaders of the real human-labelled sets, on small slices."""

import pytest

from calibration.datasets import LabelledSet, load_begin, load_evouna
from judges import EvaluationDataset, Faithfulness, SingleTurnSample


def test_begin_slice_maps_fields_and_labels():
    data = load_begin(parts=("wow",), limit=20)
    assert len(data) == 20 and isinstance(data.dataset, EvaluationDataset)
    sample = data.dataset[0]
    assert sample.user_input and sample.response and len(sample.retrieved_contexts) == 1
    assert set(data.labels) <= {0, 1} and data.kind == "binary"
    assert all(m["begin_label"] in ("Fully attributable", "Not fully attributable", "Generic") for m in data.meta)
    Faithfulness().validate_dataset(data.dataset)  # every sample carries what faithfulness needs
    with pytest.raises(ValueError, match="part"):
        load_begin(parts=("nope",))


def test_evouna_slice_skips_unjudged_and_can_attach_a_context():
    data = load_evouna(systems=("fid", "gpt4"), limit=30, context_system="chatgpt")
    assert len(data) == 30
    assert all(s.reference and s.response and s.retrieved_contexts for s in data.dataset)
    assert set(data.labels) <= {0, 1} and {m["system"] for m in data.meta} <= {"fid", "gpt4"}
    assert "/" not in data.dataset[0].reference or " / " in data.dataset[0].reference


def test_labelled_set_checks_lengths_and_subsets():
    ds = EvaluationDataset([SingleTurnSample(response="a"), SingleTurnSample(response="b")])
    with pytest.raises(ValueError, match="2 samples but 1 labels"):
        LabelledSet("x", ds, [1])
    sub = LabelledSet("x", ds, [1, 0]).subset([1])
    assert sub.labels == [0] and sub.dataset[0].response == "b"


def test_tau_bench_trajectories_load_as_multi_turn_samples_and_run_through_agent_metrics():
    from dspy.utils import DummyLM

    from calibration.datasets import load_tau_bench
    from judges import AgentGoalAccuracyWithReference, MultiTurnSample, ToolCallAccuracy, ToolCallF1

    data = load_tau_bench(limit=8)
    assert len(data) == 8 and data.dataset.sample_type is MultiTurnSample
    sample = data.dataset[0]
    assert sample.reference and sample.reference_tool_calls and sample.tool_calls()
    assert set(data.labels) <= {0, 1}
    for metric in (ToolCallAccuracy(), ToolCallF1()):
        scores = [metric.score(s).score for s in data.dataset]
        assert all(0.0 <= v <= 1.0 for v in scores)
    lm = DummyLM([{"outcome": "booked"}, {"reason": "r", "achieved": True}])
    judge = AgentGoalAccuracyWithReference(lm=lm, max_message_chars=100)
    assert judge.score(sample).score == 1.0
    prompt = lm.history[0]["messages"][-1]["content"]
    assert "[...]" in prompt and "get_user_details" in prompt
