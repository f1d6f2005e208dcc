"""Domain metrics: summaries, SQL queries, tables; the family's public names.

Must not hold code of its own.
"""

from judges.metrics.domain.sql import LLMSQLEquivalence
from judges.metrics.domain.summarization import SummarizationScore
from judges.metrics.domain.tables import DataCompyScore

__all__ = ["DataCompyScore", "LLMSQLEquivalence", "SummarizationScore"]
