"""dspy-judges: evaluation metrics as DSPy programs you can compile against human labels.

Every metric shares one contract (``score``, ``ascore``, ``as_metric``, ``required_fields``). The rooms:

    judges.data      samples, datasets, language handling
    judges.lm        the models judges run on: embedded, in-process GGUF, served; embedders
    judges.metrics   the metric contract and the metric families
    judges.run       evaluate(): backends, run files, accounting

Every public name is importable from here (``from judges import Faithfulness, evaluate``).

Must not hold code of its own: it only re-exports the rooms' public names.
"""

from judges.data import (
    LEGACY_COLUMNS,
    AIMessage,
    EvaluationDataset,
    HumanMessage,
    MultiTurnSample,
    SampleValidationError,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
)
from judges.lm import (
    Embedder,
    JudgeLMWarning,
    LlamaCppEngine,
    PermanentLMError,
    ServedLM,
    Verifier,
    VerifierError,
    configure_judges,
    embedded_embedder_path,
    embedded_gguf_path,
    embedded_model_file,
    judges_context,
    local_lm,
    resolve_embedder,
    resolve_lm,
    resolve_verifier,
)
from judges.metrics import (
    AgentGoalAccuracyWithoutReference,
    AgentGoalAccuracyWithReference,
    AnswerAccuracy,
    AnswerCorrectness,
    AnswerRelevancy,
    AspectCritic,
    BleuScore,
    ChrfScore,
    CombinedMetric,
    ContextEntityRecall,
    ContextPrecision,
    ContextRecall,
    ContextRelevance,
    ContextRelevancy,
    ContextUtilization,
    DataCompyScore,
    DegradedJudgmentError,
    DistanceMeasure,
    EmbeddingAlignment,
    ExactMatch,
    ExportedMetric,
    FactualCorrectness,
    Faithfulness,
    FaithfulnesswithHHEM,
    FaithfulnessWithVerifier,
    FieldResolver,
    IDBasedContextPrecision,
    IDBasedContextRecall,
    InputTooLargeError,
    InstanceRubrics,
    Judge,
    JudgeOutputError,
    JudgeUnavailableError,
    LLMContextPrecisionWithoutReference,
    LLMContextPrecisionWithReference,
    LLMContextRecall,
    LLMSQLEquivalence,
    Metric,
    MetricConfigurationError,
    MetricScore,
    MetricStop,
    NoiseSensitivity,
    NonLLMContextPrecisionWithReference,
    NonLLMContextRecall,
    NonLLMStringSimilarity,
    NovelBigramSupport,
    QuotedSpansAlignment,
    ResponseGroundedness,
    ResponseRelevancy,
    RougeScore,
    RubricsScore,
    SemanticSimilarity,
    SimpleCriteriaScore,
    StringPresence,
    SummarizationScore,
    ToolCallAccuracy,
    ToolCallF1,
    TopicAdherenceScore,
    UnsupportedSpecifics,
    WeakestSentenceSupport,
    average_precision,
)
from judges.run import DatasetValidationError, EvaluationResult, RunStopped, evaluate

__version__ = "0.1.0"

__all__ = [
    "AgentGoalAccuracyWithoutReference", "AgentGoalAccuracyWithReference", "AIMessage", "AnswerAccuracy",
    "AnswerCorrectness", "AnswerRelevancy", "AspectCritic", "average_precision", "BleuScore", "ChrfScore",
    "CombinedMetric", "configure_judges", "ContextEntityRecall", "ContextPrecision", "ContextRecall",
    "ContextRelevance", "ContextRelevancy", "ContextUtilization", "DataCompyScore", "DatasetValidationError",
    "DegradedJudgmentError", "DistanceMeasure", "embedded_embedder_path", "embedded_gguf_path",
    "embedded_model_file", "Embedder", "EmbeddingAlignment", "evaluate", "EvaluationDataset", "EvaluationResult",
    "ExactMatch", "FactualCorrectness", "Faithfulness", "FaithfulnesswithHHEM", "FaithfulnessWithVerifier",
    "FieldResolver", "HumanMessage", "IDBasedContextPrecision", "IDBasedContextRecall", "InputTooLargeError",
    "InstanceRubrics", "Judge", "JudgeLMWarning", "JudgeOutputError", "judges_context", "LEGACY_COLUMNS",
    "LlamaCppEngine", "LLMContextPrecisionWithoutReference", "LLMContextPrecisionWithReference", "LLMContextRecall",
    "LLMSQLEquivalence", "local_lm", "Metric", "MetricConfigurationError", "MetricScore", "MetricStop", "ExportedMetric",
    "JudgeUnavailableError", "MultiTurnSample",
    "NoiseSensitivity", "NonLLMContextPrecisionWithReference", "NonLLMContextRecall", "NonLLMStringSimilarity",
    "NovelBigramSupport", "PermanentLMError", "QuotedSpansAlignment", "resolve_embedder", "resolve_lm",
    "resolve_verifier", "ResponseGroundedness", "ResponseRelevancy", "RougeScore", "RubricsScore", "RunStopped",
    "SampleValidationError", "SemanticSimilarity", "ServedLM", "SimpleCriteriaScore", "SingleTurnSample",
    "StringPresence", "SummarizationScore", "ToolCall", "ToolCallAccuracy", "ToolCallF1", "ToolMessage",
    "TopicAdherenceScore", "UnsupportedSpecifics", "Verifier", "VerifierError", "WeakestSentenceSupport"
]
