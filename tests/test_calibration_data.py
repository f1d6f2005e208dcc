"""Loaders of the real human-labelled sets, on small slices."""

import pytest

from calibration.data.labelled import LabelledSet
from calibration.data.loaders import load_begin, load_evouna
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

    from calibration.data.loaders import load_tau_bench
    from judges import (
        AgentGoalAccuracyWithReference,
        MultiTurnSample,
        ToolCallAccuracy,
        ToolCallF1,
    )

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


def test_summeval_and_cranfield_slices():
    from calibration.data.loaders import load_cranfield, load_summeval

    summ = load_summeval(aspect="relevance", limit=10)
    assert len(summ) == 10 and summ.kind == "continuous" and all(1 <= v <= 5 for v in summ.labels)
    assert summ.dataset[0].reference_contexts and summ.dataset[0].response
    with pytest.raises(ValueError, match="aspect"):
        load_summeval(aspect="style")
    cran = load_cranfield(limit=30)
    assert len(cran) == 30 and cran.kind == "ordinal" and set(cran.labels) <= {0, 1, 2, 3, 4}
    assert cran.dataset[0].user_input.startswith("what similarity laws")
    assert cran.meta[0] == {"query": 1, "doc": "184", "grade": 2} and cran.labels[0] == 3


def test_stratified_split_and_k_fold_are_seeded():
    from calibration.data.labelled import k_fold, split

    data = load_begin(parts=("wow",), limit=200)
    a, b = split(data, seed=1), split(data, seed=1)
    assert [s.response for s in a.test.dataset] == [s.response for s in b.test.dataset]
    assert len(a.train) + len(a.dev) + len(a.test) == 200
    rate = sum(data.labels) / len(data)
    for part in (a.train, a.dev, a.test):
        assert abs(sum(part.labels) / len(part) - rate) < 0.05  # stratified
    folds = k_fold(load_begin(parts=("wow",), limit=50), k=5)
    assert len(folds) == 5 and all(len(test) == 10 for _, test in folds)
    held_out = sorted(s.response for _, test in folds for s in test.dataset)
    assert held_out == sorted(s.response for s in load_begin(parts=("wow",), limit=50).dataset)


def test_labelled_set_from_records_jsonl_csv_pandas_hf(tmp_path):
    import pandas as pd

    rows = [{"user_input": "q1", "response": "a1", "label": 1}, {"user_input": "q2", "response": "a2", "label": "false"}]
    data = LabelledSet.from_records(rows)
    assert data.labels == [1, 0] and data.dataset[1].response == "a2"
    pd.DataFrame(rows).to_csv(tmp_path / "l.csv", index=False)
    assert LabelledSet.from_csv(tmp_path / "l.csv").labels == [1, 0]
    (tmp_path / "l.jsonl").write_text("\n".join(__import__("json").dumps(r) for r in rows))
    assert LabelledSet.from_jsonl(tmp_path / "l.jsonl").labels == [1, 0]
    assert LabelledSet.from_pandas(pd.DataFrame(rows)).labels == [1, 0]
    from datasets import Dataset

    assert LabelledSet.from_hf_dataset(Dataset.from_list([{**r, "label": str(r["label"])} for r in rows])).labels == [1, 0]
    with pytest.raises(ValueError, match="row 1 has no 'label'"):
        LabelledSet.from_records([{"response": "a", "label": 1}, {"response": "b"}])
    with pytest.raises(ValueError, match="not a number"):
        LabelledSet.from_records([{"response": "a", "label": "maybe"}])


def test_bundled_begin_slice_and_balanced_sample():
    from calibration.data.labelled import balanced_sample
    from calibration.data.loaders import load_begin_slice

    data = load_begin_slice()
    assert len(data) == 60 and sum(data.labels) == 30 and data.kind == "binary"
    assert all(s.response and s.retrieved_contexts for s in data.dataset)
    picked = balanced_sample(data, 21, seed=1)
    assert len(picked) == 21 and sum(picked.labels) in (10, 11)
    assert balanced_sample(data, 21, seed=1).dataset.to_list() == picked.dataset.to_list()  # seeded
    few_positives = data.subset([i for i, y in enumerate(data.labels) if y == 0] + [data.labels.index(1)])
    assert sum(balanced_sample(few_positives, 20).labels) == 1  # takes what the set has, fills with the other label
    with pytest.raises(ValueError, match="has 31"):
        balanced_sample(few_positives, 40)
