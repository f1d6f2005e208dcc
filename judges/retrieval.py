"""Retrieval metrics without an LM: compare retrieved contexts with reference contexts by string
similarity, or retrieved context IDs with reference IDs. ``average_precision`` is shared with the LLM
context-precision judges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import dspy

from judges.base import Metric
from judges.text import DistanceMeasure, NonLLMStringSimilarity


def average_precision(relevant: Sequence[bool | float]) -> float:
    """Average precision over ranks: mean of precision@k at each relevant rank k.

    ``relevant[k]`` is the verdict for the chunk at rank k+1 (1/0 or a probability). With no relevant
    chunk the result is 0.0 (nothing useful was retrieved), never NaN.
    """
    verdicts = [float(v) for v in relevant]
    total = sum(verdicts)
    if total == 0:
        return 0.0
    hits = 0.0
    score = 0.0
    for k, verdict in enumerate(verdicts, start=1):
        hits += verdict
        score += (hits / k) * verdict
    return score / total


class _StringMatchedContexts(Metric):
    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_contexts", "reference_contexts")

    def __init__(
        self,
        *,
        threshold: float = 0.5,
        distance_measure: DistanceMeasure | str = DistanceMeasure.LEVENSHTEIN,
    ):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"{self.name}: threshold must be in [0, 1], got {threshold!r}")
        self.threshold = threshold
        self.string_similarity = NonLLMStringSimilarity(distance_measure=distance_measure)

    def _best_matches(self, items: Sequence[str], against: Sequence[str]) -> list[float]:
        return [max(self.string_similarity.similarity(item, other) for other in against) for item in items]


class NonLLMContextPrecisionWithReference(_StringMatchedContexts):
    """Average precision of the retrieved contexts, where a retrieved context counts as relevant when
    its best string similarity to any reference context reaches ``threshold`` (default 0.5)."""

    def _score(self, sample) -> dspy.Prediction:
        best = self._best_matches(sample.retrieved_contexts, sample.reference_contexts)
        relevant = [s >= self.threshold for s in best]
        return dspy.Prediction(score=average_precision(relevant), relevant=relevant, similarities=best)


class NonLLMContextRecall(_StringMatchedContexts):
    """Share of reference contexts that some retrieved context matches (string similarity >=
    ``threshold``, default 0.5)."""

    def _score(self, sample) -> dspy.Prediction:
        best = self._best_matches(sample.reference_contexts, sample.retrieved_contexts)
        retrieved = [s >= self.threshold for s in best]
        return dspy.Prediction(score=sum(retrieved) / len(retrieved), retrieved=retrieved, similarities=best)


def _id_sets(sample) -> tuple[set[str], set[str]]:
    # IDs may be ints in one list and strings in the other: compare their text.
    return {str(i) for i in sample.retrieved_context_ids}, {str(i) for i in sample.reference_context_ids}


class IDBasedContextPrecision(Metric):
    """Share of (distinct) retrieved context IDs that are reference context IDs."""

    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_context_ids", "reference_context_ids")

    def _score(self, sample) -> dspy.Prediction:
        retrieved, reference = _id_sets(sample)
        hits = retrieved & reference
        return dspy.Prediction(score=len(hits) / len(retrieved), matched_ids=sorted(hits))


class IDBasedContextRecall(Metric):
    """Share of (distinct) reference context IDs that were retrieved."""

    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_context_ids", "reference_context_ids")

    def _score(self, sample) -> dspy.Prediction:
        retrieved, reference = _id_sets(sample)
        hits = retrieved & reference
        return dspy.Prediction(score=len(hits) / len(reference), matched_ids=sorted(hits))
