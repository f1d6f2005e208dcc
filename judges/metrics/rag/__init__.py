"""RAG metrics (LLM judges, and embedding similarity): the family's public names.

``claims`` holds the steps they share (claim extraction and verification), ``answer`` the judges of the
response, ``context`` the judges of the retrieval, ``verified`` faithfulness checked by a trained verifier. Names follow Ragas, aliases included.

Must not hold code of its own.
"""

from judges.metrics.rag.answer import (
    AnswerCorrectness,
    AnswerRelevancy,
    FactualCorrectness,
    Faithfulness,
    NoiseSensitivity,
    ResponseRelevancy,
    SemanticSimilarity,
)
from judges.metrics.rag.context import (
    ContextEntityRecall,
    ContextPrecision,
    ContextRecall,
    ContextRelevancy,
    ContextUtilization,
    LLMContextPrecisionWithoutReference,
    LLMContextPrecisionWithReference,
    LLMContextRecall,
)
from judges.metrics.rag.verified import FaithfulnesswithHHEM, FaithfulnessWithVerifier

__all__ = [
    "AnswerCorrectness", "AnswerRelevancy", "ContextEntityRecall", "ContextPrecision", "ContextRecall",
    "ContextRelevancy", "ContextUtilization", "FactualCorrectness", "Faithfulness", "FaithfulnessWithVerifier", "FaithfulnesswithHHEM",
    "LLMContextPrecisionWithReference", "LLMContextPrecisionWithoutReference", "LLMContextRecall",
    "NoiseSensitivity", "ResponseRelevancy", "SemanticSimilarity",
]
