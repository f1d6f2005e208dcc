"""What metrics read: samples (validated pydantic models), datasets of them, and language handling.

Owns: ``SingleTurnSample`` / ``MultiTurnSample`` and their messages (``samples``), ``EvaluationDataset``
and its file formats (``dataset``), tokenising and sentence splitting for en/zh/ja (``language``), English
direction words and their opposites (``opposites``). Must not score anything or call an LM.
"""

from judges.data.dataset import LEGACY_COLUMNS, EvaluationDataset
from judges.data.samples import (
    AIMessage,
    HumanMessage,
    MultiTurnSample,
    SampleValidationError,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
)

__all__ = ["AIMessage", "EvaluationDataset", "HumanMessage", "LEGACY_COLUMNS", "MultiTurnSample",
           "SampleValidationError", "SingleTurnSample", "ToolCall", "ToolMessage"]
