"""Retrieval metrics without an LM: compare retrieved contexts with reference contexts by string
similarity, or retrieved context IDs with reference IDs, and check quoted spans of the response against
the retrieved contexts. ``average_precision`` is shared with the LLM context-precision judges.

Must not call an LM or an embedder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

import dspy

from judges.data.language import tokenize
from judges.metrics.base import InputTooLargeError, Metric
from judges.metrics.text import DistanceMeasure, NonLLMStringSimilarity


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
    """Every retrieved context is compared with every reference context: quadratic in their numbers, so
    beyond ``max_pairs`` comparisons (default 1,000,000, e.g. 1,000 x 1,000 contexts) the item fails with
    ``InputTooLargeError`` instead of holding the run for seconds an item (docs/reliability.md, size guards)."""

    first_use_imports: ClassVar[tuple[str, ...]] = ("rapidfuzz.distance",)

    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_contexts", "reference_contexts")
    allow_empty: ClassVar[tuple[str, ...]] = ("retrieved_contexts", "reference_contexts")

    def __init__(
        self,
        *,
        threshold: float = 0.5,
        distance_measure: DistanceMeasure | str = DistanceMeasure.LEVENSHTEIN,
        max_pairs: int = 1_000_000,
    ):
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"{self.name}: threshold must be in [0, 1], got {threshold!r}")
        if isinstance(max_pairs, bool) or not isinstance(max_pairs, int) or max_pairs < 1:
            raise ValueError(f"{self.name}: max_pairs must be a positive int, got {max_pairs!r}")
        self.threshold, self.max_pairs = threshold, max_pairs
        self.string_similarity = NonLLMStringSimilarity(distance_measure=distance_measure)
        self.distance_measure = self.string_similarity.distance_measure

    def _best_matches(self, items: Sequence[str], against: Sequence[str]) -> list[float]:
        if len(items) * len(against) > self.max_pairs:
            raise InputTooLargeError(f"{self.name}: {len(items):,} x {len(against):,} contexts is over max_pairs="
                                     f"{self.max_pairs:,} comparisons; raise it or compare fewer contexts")
        return [max(self.string_similarity.similarity(item, other) for other in against) for item in items]


class NonLLMContextPrecisionWithReference(_StringMatchedContexts):
    """Average precision of the retrieved contexts, where a retrieved context counts as relevant when
    its best string similarity to any reference context reaches ``threshold`` (``>=``, default 0.5).

    Empty: nothing retrieved scores 0.0, undefined (no precision of nothing); no reference contexts makes
    every retrieved context irrelevant (0.0, undefined: nothing to match against)."""

    def _score(self, sample) -> dspy.Prediction:
        if not sample.retrieved_contexts or not sample.reference_contexts:
            return _undefined(sample)
        best = self._best_matches(sample.retrieved_contexts, sample.reference_contexts)
        relevant = [s >= self.threshold for s in best]
        return dspy.Prediction(score=average_precision(relevant), relevant=relevant, similarities=best)


class NonLLMContextRecall(_StringMatchedContexts):
    """Share of reference contexts that some retrieved context matches (string similarity ``>=``
    ``threshold``, default 0.5; Ragas uses ``>`` here and ``>=`` for precision: we use ``>=`` for both).

    Empty: no reference contexts scores 0.0, undefined (no recall of nothing); nothing retrieved recalls
    nothing (0.0, a real score)."""

    def _score(self, sample) -> dspy.Prediction:
        if not sample.reference_contexts:
            return _undefined(sample)
        if not sample.retrieved_contexts:
            n = len(sample.reference_contexts)
            return dspy.Prediction(score=0.0, retrieved=[False] * n, similarities=[0.0] * n)
        best = self._best_matches(sample.reference_contexts, sample.retrieved_contexts)
        retrieved = [s >= self.threshold for s in best]
        return dspy.Prediction(score=sum(retrieved) / len(retrieved), retrieved=retrieved, similarities=best)


def _undefined(sample) -> dspy.Prediction:
    """0.0 with the reason, for a sample with an empty side (the retrieved or the reference list)."""
    empty = [name.replace("_", " ") for name in ("retrieved_contexts", "reference_contexts", "retrieved_context_ids",
                                                 "reference_context_ids")
             if getattr(sample, name, None) is not None and len(getattr(sample, name)) == 0]
    return dspy.Prediction(score=0.0, undefined_reason=f"no {' and no '.join(empty)}: the ratio is undefined")


def _id_sets(sample) -> tuple[set[str], set[str]]:
    # IDs may be ints in one list and strings in the other: compare their text.
    return {str(i) for i in sample.retrieved_context_ids}, {str(i) for i in sample.reference_context_ids}


class IDBasedContextPrecision(Metric):
    """Share of (distinct) retrieved context IDs that are reference context IDs. Empty: no retrieved IDs
    scores 0.0, undefined; no reference IDs with retrieved ones is 0.0 (nothing retrieved is relevant)."""

    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_context_ids", "reference_context_ids")
    allow_empty: ClassVar[tuple[str, ...]] = ("retrieved_context_ids", "reference_context_ids")

    def _score(self, sample) -> dspy.Prediction:
        if not sample.retrieved_context_ids:
            return _undefined(sample)
        retrieved, reference = _id_sets(sample)
        hits = retrieved & reference
        return dspy.Prediction(score=len(hits) / len(retrieved), matched_ids=sorted(hits))


class IDBasedContextRecall(Metric):
    """Share of (distinct) reference context IDs that were retrieved. Empty: no reference IDs scores 0.0,
    undefined; nothing retrieved with reference IDs is 0.0 (nothing recalled)."""

    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_context_ids", "reference_context_ids")
    allow_empty: ClassVar[tuple[str, ...]] = ("retrieved_context_ids", "reference_context_ids")

    def _score(self, sample) -> dspy.Prediction:
        if not sample.reference_context_ids:
            return _undefined(sample)
        retrieved, reference = _id_sets(sample)
        hits = retrieved & reference
        return dspy.Prediction(score=len(hits) / len(reference), matched_ids=sorted(hits))


#: Quotation pairs: straight and curly double quotes, curly single quotes, guillemets, CJK corner brackets,
#: and straight single quotes only at word edges (so the apostrophe of "the dog's" opens no span).
_QUOTED = re.compile(
    "\"(.+?)\"|\u201c(.+?)\u201d|\u201e(.+?)[\u201c\u201d]|\u2018(.+?)\u2019|\u00ab(.+?)\u00bb|\u300c(.+?)\u300d"
    "|\u300e(.+?)\u300f|(?<!\\w)'(.+?)'(?!\\w)", re.DOTALL)
_EDGE_PUNCTUATION = ".,;:!?\u3002\uff0c\uff01\uff1f"


def quoted_spans(text: str, min_words: int = 3) -> list[str]:
    """The spans of ``text`` inside quotation marks with at least ``min_words`` words (a CJK span counts its
    characters as words), trailing punctuation inside the quotes dropped."""
    spans = []
    for match in _QUOTED.finditer(text):
        span = next(g for g in match.groups() if g is not None).strip().strip(_EDGE_PUNCTUATION).strip()
        if len(tokenize(span)) >= min_words:
            spans.append(span)
    return spans


def _normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


class QuotedSpansAlignment(Metric):
    """Share of the response's quoted spans found verbatim in the retrieved contexts: does the response
    quote its sources, or put words in their mouth? (Ragas's ``QuotedSpansAlignment``.)

    A span is text inside quotation marks with at least ``min_span_words`` words (default 3, as Ragas;
    Chinese and Japanese characters count as words); matching is a substring test after collapsing
    whitespace and case (``casefold=True``). Unlike Ragas: quotes pair by kind (an apostrophe, as in "the
    dog's", opens no span; Ragas then loses the real quote), CJK corner brackets 「」『』 and guillemets
    count as quotes, and a stop inside the quotes ("the sky is blue.") is not part of the span.
    Empty: no quoted span in the response scores 1.0, as in Ragas (nothing was misquoted), undefined.
    """

    required_fields: ClassVar[tuple[str, ...]] = ("response", "retrieved_contexts")
    allow_empty: ClassVar[tuple[str, ...]] = ("response", "retrieved_contexts")

    def __init__(self, *, min_span_words: int = 3, casefold: bool = True):
        if isinstance(min_span_words, bool) or not isinstance(min_span_words, int) or min_span_words < 1:
            raise ValueError(f"quoted_spans_alignment: min_span_words must be a positive int, got {min_span_words!r}")
        self.min_span_words = min_span_words
        self.casefold = bool(casefold)

    def _score(self, sample) -> dspy.Prediction:
        spans = quoted_spans(sample.response, self.min_span_words)
        if not spans:
            return dspy.Prediction(score=1.0, spans=[], unmatched=[],
                                   undefined_reason="the response quotes nothing: no span to check")
        sources = " ".join(sample.retrieved_contexts)
        prepare = _normalised if self.casefold else (lambda t: re.sub(r"\s+", " ", t).strip())
        haystack = prepare(sources)
        unmatched = [span for span in spans if prepare(span) not in haystack]
        return dspy.Prediction(score=(len(spans) - len(unmatched)) / len(spans), spans=spans, unmatched=unmatched)

    def feedback(self, result: dspy.Prediction) -> str:
        if not result.unmatched:
            return f"quoted spans alignment {result.score:.2f}: every quoted span is in the sources"
        return (f"quoted spans alignment {result.score:.2f}; quoted but not in the sources: "
                + "; ".join(f"\"{s}\"" for s in result.unmatched))
