"""dspy-judges: evaluation metrics as DSPy programs you can compile against human labels.

Every metric shares one contract (``score``, ``ascore``, ``as_metric``, ``required_fields``); see
``judges.base``. Samples and datasets live in ``judges.samples`` and ``judges.dataset``; which LM and
embedder a judge uses is decided in ``judges.models``.
"""

from judges.agent import AgentGoalAccuracyWithoutReference, AgentGoalAccuracyWithReference, TopicAdherenceScore
from judges.base import FieldResolver, Judge, Metric
from judges.custom import AspectCritic, InstanceRubrics, RubricsScore, SimpleCriteriaScore
from judges.dataset import LEGACY_COLUMNS, EvaluationDataset
from judges.domain import DataCompyScore, LLMSQLEquivalence, SummarizationScore
from judges.dual_judge import AnswerAccuracy, ContextRelevance, JudgeOutputError, ResponseGroundedness
from judges.evaluation import DatasetValidationError, EvaluationResult, evaluate
from judges.grounding import EmbeddingAlignment, NovelBigramSupport, UnsupportedSpecifics, WeakestSentenceSupport
from judges.models import (
    Embedder,
    LlamaCppEngine,
    embedded_embedder_path,
    embedded_gguf_path,
    embedded_model_file,
    local_lm,
    resolve_embedder,
    resolve_lm,
)
from judges.rag import (
    AnswerCorrectness,
    AnswerRelevancy,
    ContextEntityRecall,
    ContextPrecision,
    ContextRecall,
    ContextRelevancy,
    ContextUtilization,
    FactualCorrectness,
    Faithfulness,
    LLMContextPrecisionWithoutReference,
    LLMContextPrecisionWithReference,
    LLMContextRecall,
    NoiseSensitivity,
    ResponseRelevancy,
    SemanticSimilarity,
)
from judges.retrieval import (
    IDBasedContextPrecision,
    IDBasedContextRecall,
    NonLLMContextPrecisionWithReference,
    NonLLMContextRecall,
    QuotedSpansAlignment,
    average_precision,
)
from judges.samples import (
    AIMessage,
    HumanMessage,
    MultiTurnSample,
    SampleValidationError,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
)
from judges.text import (
    BleuScore,
    ChrfScore,
    DistanceMeasure,
    ExactMatch,
    NonLLMStringSimilarity,
    RougeScore,
    StringPresence,
)
from judges.tools import ToolCallAccuracy, ToolCallF1

__version__ = "0.1.0"

__all__ = [
    "DatasetValidationError",
    "EvaluationResult",
    "evaluate",
    "EmbeddingAlignment",
    "NovelBigramSupport",
    "UnsupportedSpecifics",
    "WeakestSentenceSupport",
    "AIMessage",
    "AgentGoalAccuracyWithReference",
    "AgentGoalAccuracyWithoutReference",
    "AnswerAccuracy",
    "AspectCritic",
    "ContextRelevance",
    "InstanceRubrics",
    "JudgeOutputError",
    "LLMSQLEquivalence",
    "ResponseGroundedness",
    "RubricsScore",
    "SimpleCriteriaScore",
    "SummarizationScore",
    "TopicAdherenceScore",
    "AnswerCorrectness",
    "AnswerRelevancy",
    "ContextEntityRecall",
    "ContextPrecision",
    "ContextRecall",
    "ContextRelevancy",
    "ContextUtilization",
    "FactualCorrectness",
    "Faithfulness",
    "LLMContextPrecisionWithReference",
    "LLMContextPrecisionWithoutReference",
    "LLMContextRecall",
    "NoiseSensitivity",
    "ResponseRelevancy",
    "SemanticSimilarity",
    "BleuScore",
    "ChrfScore",
    "DataCompyScore",
    "DistanceMeasure",
    "ExactMatch",
    "IDBasedContextPrecision",
    "IDBasedContextRecall",
    "NonLLMContextPrecisionWithReference",
    "NonLLMContextRecall",
    "NonLLMStringSimilarity",
    "QuotedSpansAlignment",
    "RougeScore",
    "StringPresence",
    "ToolCallAccuracy",
    "ToolCallF1",
    "average_precision",
    "Embedder",
    "EvaluationDataset",
    "FieldResolver",
    "HumanMessage",
    "Judge",
    "LEGACY_COLUMNS",
    "LlamaCppEngine",
    "Metric",
    "MultiTurnSample",
    "SampleValidationError",
    "SingleTurnSample",
    "ToolCall",
    "ToolMessage",
    "embedded_embedder_path",
    "embedded_gguf_path",
    "embedded_model_file",
    "local_lm",
    "resolve_embedder",
    "resolve_lm",
]
