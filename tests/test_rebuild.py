"""Settings that survive a rebuild: every exported metric rebuilt from its ``get_params()`` (as resume, the
worker processes and any distributed backend do) is the same metric. Audit: NonLLMContextPrecision/Recall
dropped ``distance_measure``, so a rebuilt metric silently reverted to Levenshtein."""

import inspect

import pytest

from judges import AIMessage, HumanMessage, MultiTurnSample, SingleTurnSample, ToolCall
from judges.metrics.catalogue import metric_classes
from judges.metrics.text import NonLLMStringSimilarity

#: Constructor settings that are runtime resources, not settings: documented as left out of get_params().
RUNTIME = {"lm", "adapter", "embeddings"}
#: Settings for the classes that cannot be built without them, and non-default settings worth a rebuild.
CONFIGS = {
    "aspect_critic": [{"name": "polite", "definition": "Is it polite?", "strictness": 3}],
    "simple_criteria_score": [{"name": "clear", "definition": "How clear is it?"}],
    "non_llm_context_precision_with_reference": [{"threshold": 0.6, "distance_measure": "jaro"}],
    "non_llm_context_recall": [{"threshold": 0.6, "distance_measure": "jaro_winkler"}],
    "non_llm_string_similarity": [{"distance_measure": "hamming", "max_length": 1000}],
    "rouge_score": [{"rouge_type": "rouge1", "mode": "recall", "use_stemmer": False, "max_lcs_cells": 99}],
    "bleu_score": [{"tokenize": "char", "effective_order": False, "lowercase": True}],
    "chrf_score": [{"char_order": 4, "word_order": 2, "beta": 1}],
    "exact_match": [{"ignore_case": True, "strip": True}],
    "string_presence": [{"ignore_case": True}],
    "tool_call_accuracy": [{"strict_order": False, "arg_comparison": NonLLMStringSimilarity(distance_measure="jaro")}],
    "data_compy_score": [{"mode": "columns", "metric": "recall", "abs_tol": 0.1}],
}
SINGLE = [
    SingleTurnSample(user_input="q", response="The cats sat on the mat.", reference="A cat sat on a mat.",
                     retrieved_contexts=["abcdef", "cats sat"], reference_contexts=["abcxyz", "a cat sat"],
                     retrieved_context_ids=["1", "2"], reference_context_ids=["2", "3"]),
    SingleTurnSample(user_input="q", response="id,x\n1,a\n2,b", reference="id,x\n1,a\n2,c",
                     retrieved_contexts=["x"], reference_contexts=["y"], retrieved_context_ids=["1"],
                     reference_context_ids=["1"]),
]
MULTI = [MultiTurnSample(user_input=[HumanMessage(content="weather?"), AIMessage(content="", tool_calls=[
    ToolCall(name="weather", args={"city": "Paris", "unit": "c"}), ToolCall(name="news", args={"q": "x"})])],
    reference_tool_calls=[ToolCall(name="news", args={"q": "x"}), ToolCall(name="weather", args={"city": "Pariss"})])]


def configurations():
    for name, cls in metric_classes().items():
        for config in CONFIGS.get(name, []) + ([{}] if name not in ("aspect_critic", "simple_criteria_score") else []):
            yield pytest.param(cls, config, id=f"{name}{'-' + '-'.join(config) if config else ''}")


@pytest.mark.parametrize("cls, config", configurations())
def test_a_metric_rebuilt_from_its_params_is_the_same_metric(cls, config):
    metric = cls(**config)
    params = metric.get_params()
    settings = {n for n, p in inspect.signature(cls.__init__).parameters.items()
                if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    # a setting added later is left out while it holds its default, which is how judges scored before it existed
    later = {n for n, before in cls.saved_before.items()
             if getattr(metric, n, None) == before == inspect.signature(cls.__init__).parameters[n].default}
    assert set(params) == settings - RUNTIME - later, \
        f"{cls.__name__}.get_params() misses {settings - RUNTIME - later - set(params)}"
    rebuilt = cls(**params)
    assert rebuilt.get_params() == params
    if metric.needs_lm:  # the same prompts: the same instructions and fields at every step
        steps = {n: (p.signature.instructions, list(p.signature.fields)) for n, p in metric.named_predictors()}
        assert steps == {n: (p.signature.instructions, list(p.signature.fields)) for n, p in rebuilt.named_predictors()}
        return
    if metric.needs_embeddings:
        return
    samples = MULTI if cls.sample_type is MultiTurnSample else SINGLE
    for sample in samples:
        if metric.sample_type is SingleTurnSample and sample.missing_fields(metric.required_fields, metric.allow_empty):
            continue
        assert outcome(metric, sample) == outcome(rebuilt, sample)


def outcome(metric, sample):
    """The metric's result on ``sample`` as plain data, or its error (a non-CSV text for DataCompyScore)."""
    try:
        return dict(metric.score(sample).items())
    except ValueError as err:
        return f"{type(err).__name__}: {err}"


def test_the_audited_case_scores_the_same_after_a_rebuild():
    from judges import NonLLMContextPrecisionWithReference

    sample = SingleTurnSample(retrieved_contexts=["abcdef"], reference_contexts=["abcxyz"])
    metric = NonLLMContextPrecisionWithReference(threshold=0.6, distance_measure="jaro")
    assert metric.score(sample).score == 1.0
    assert type(metric)(**metric.get_params()).score(sample).score == 1.0  # was 0.0: reverted to Levenshtein


def test_a_function_as_arg_comparison_fails_loudly_on_rebuild():
    from judges import ToolCallAccuracy

    params = ToolCallAccuracy(arg_comparison=lambda a, b: 1.0).get_params()
    assert params["arg_comparison"].endswith("<lambda>")
    with pytest.raises(ValueError, match="cannot be rebuilt from its name"):
        ToolCallAccuracy(**params)
