"""The metric library: the contract every metric shares, and the metric families, one module (or folder)
each, with the family's public names in it.

    base.py        ``Metric`` (score, ascore, as_metric, validation) and ``Judge`` (an LLM judge, a dspy.Module)
    export.py      a metric as a DSPy metric for Evaluate, every optimizer and Refine (``ExportedMetric``)
    score.py       what that metric returns (``MetricScore``) or raises to stop a run (``MetricStop``)
    fields.py      where it finds a sample's fields in DSPy's (example, pred) (``FieldResolver``)
    combined.py    several metrics as one: weighted mean, product or minimum (``CombinedMetric``)
    logprobs.py    P(verdict) from token log-probabilities (``use_logprobs=True``)
    rag/           faithfulness, relevancy, correctness, context precision / recall ... (LLM judges)
    dual_judge.py  AnswerAccuracy, ContextRelevance, ResponseGroundedness (two judges averaged, or the verifier)
    custom.py      AspectCritic, SimpleCriteriaScore, RubricsScore, InstanceRubrics
    agent.py       topic adherence, agent goal accuracy
    domain/        summaries, SQL equivalence (its execution in a killable child: sql_sandbox.py), tables
    text.py        BLEU, ROUGE, chrF, exact match, string presence and similarity
    retrieval.py   context precision / recall without an LM, quoted spans
    tools.py       tool-call accuracy and F1
    grounding.py   grounding signals without an LM (specifics, weakest sentence, bigrams, embeddings)
    catalogue.py   every metric by name

Must not run datasets (``judges.run``) or decide which LM runs (``judges.lm``).
"""

from judges.metrics.agent import (
    AgentGoalAccuracyWithoutReference,
    AgentGoalAccuracyWithReference,
    TopicAdherenceScore,
)
from judges.metrics.base import InputTooLargeError, Judge, Metric
from judges.metrics.combined import CombinedMetric
from judges.metrics.custom import (
    AspectCritic,
    InstanceRubrics,
    RubricsScore,
    SimpleCriteriaScore,
)
from judges.metrics.domain import DataCompyScore, LLMSQLEquivalence, SummarizationScore
from judges.metrics.dual_judge import (
    AnswerAccuracy,
    ContextRelevance,
    JudgeOutputError,
    ResponseGroundedness,
)
from judges.metrics.export import ExportedMetric
from judges.metrics.fields import FieldResolver
from judges.metrics.score import (
    DegradedJudgmentError,
    JudgeUnavailableError,
    MetricConfigurationError,
    MetricScore,
    MetricStop,
)
from judges.metrics.grounding import (
    EmbeddingAlignment,
    NovelBigramSupport,
    UnsupportedSpecifics,
    WeakestSentenceSupport,
)
from judges.metrics.rag import (
    AnswerCorrectness,
    AnswerRelevancy,
    ContextEntityRecall,
    ContextPrecision,
    ContextRecall,
    ContextRelevancy,
    ContextUtilization,
    FactualCorrectness,
    Faithfulness,
    FaithfulnesswithHHEM,
    FaithfulnessWithVerifier,
    LLMContextPrecisionWithoutReference,
    LLMContextPrecisionWithReference,
    LLMContextRecall,
    NoiseSensitivity,
    ResponseRelevancy,
    SemanticSimilarity,
)
from judges.metrics.retrieval import (
    IDBasedContextPrecision,
    IDBasedContextRecall,
    NonLLMContextPrecisionWithReference,
    NonLLMContextRecall,
    QuotedSpansAlignment,
    average_precision,
)
from judges.metrics.text import (
    BleuScore,
    ChrfScore,
    DistanceMeasure,
    ExactMatch,
    NonLLMStringSimilarity,
    RougeScore,
    StringPresence,
)
from judges.metrics.tools import ToolCallAccuracy, ToolCallF1

__all__ = [
    "AgentGoalAccuracyWithoutReference", "AgentGoalAccuracyWithReference", "AnswerAccuracy", "AnswerCorrectness",
    "AnswerRelevancy", "AspectCritic", "average_precision", "BleuScore", "ChrfScore", "CombinedMetric",
    "ContextEntityRecall", "ContextPrecision", "ContextRecall", "ContextRelevance", "ContextRelevancy",
    "ContextUtilization", "DataCompyScore", "DegradedJudgmentError", "DistanceMeasure", "EmbeddingAlignment",
    "ExactMatch", "FactualCorrectness", "Faithfulness", "FaithfulnesswithHHEM", "FaithfulnessWithVerifier",
    "FieldResolver", "IDBasedContextPrecision", "IDBasedContextRecall", "InputTooLargeError", "InstanceRubrics",
    "Judge", "JudgeOutputError", "LLMContextPrecisionWithoutReference", "LLMContextPrecisionWithReference",
    "LLMContextRecall", "LLMSQLEquivalence", "Metric", "MetricConfigurationError", "MetricScore", "MetricStop", "ExportedMetric",
    "JudgeUnavailableError",
    "NoiseSensitivity", "NonLLMContextPrecisionWithReference", "NonLLMContextRecall", "NonLLMStringSimilarity",
    "NovelBigramSupport", "QuotedSpansAlignment", "ResponseGroundedness", "ResponseRelevancy", "RougeScore",
    "RubricsScore", "SemanticSimilarity", "SimpleCriteriaScore", "StringPresence", "SummarizationScore",
    "ToolCallAccuracy", "ToolCallF1", "TopicAdherenceScore", "UnsupportedSpecifics", "WeakestSentenceSupport"
]
