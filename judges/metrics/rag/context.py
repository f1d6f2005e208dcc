"""RAG judges of the retrieval: were the retrieved contexts useful, complete, relevant?

Owns: LLMContextPrecisionWithReference (= ContextPrecision), LLMContextPrecisionWithoutReference
(= ContextUtilization), LLMContextRecall (= ContextRecall), ContextEntityRecall, ContextRelevancy, and
their step signatures. Must not define the claim steps (``judges.metrics.rag.claims``).

Scores (a judge never returns NaN; an undefined case gets 0.0 and an ``undefined_reason``):
  LLMContextPrecisionWith/WithoutReference  average precision of per-chunk usefulness verdicts   (never undefined)
  LLMContextRecall      reference claims attributed to the contexts / claims                    (never undefined;
                        nothing checkable with fallback_claims="checkable": unclaimed_score)
  ContextEntityRecall   |entities(contexts) & entities(reference)| / |entities(reference)|      no entity in reference
  ContextRelevancy      extracted context sentences / context sentences                         (never undefined)
"""

from __future__ import annotations

from typing import Any, ClassVar

import dspy
import numpy as np

from judges.data.language import split_sentences
from judges.metrics.base import Judge
from judges.metrics.logprobs import verdict_probabilities
from judges.metrics.rag.claims import ClaimJudge, join_contexts, normalised
from judges.metrics.retrieval import average_precision


class JudgeContextUsefulness(dspy.Signature):
    """Decide whether the context was useful in arriving at the given answer to the question."""

    question: str = dspy.InputField()
    context: str = dspy.InputField()
    answer: str = dspy.InputField()
    reason: str = dspy.OutputField()
    useful: bool = dspy.OutputField()


class ExtractEntities(dspy.Signature):
    """List the named entities in the text: people, places, organisations, works, dates and numbers.
    Copy each entity exactly as written in the text, once."""

    text: str = dspy.InputField()
    entities: list[str] = dspy.OutputField()


class ExtractRelevantSentences(dspy.Signature):
    """Copy, without changing them, the sentences of the context that are needed to answer the question.
    Return an empty list if the context cannot answer it."""

    question: str = dspy.InputField()
    context: str = dspy.InputField()
    sentences: list[str] = dspy.OutputField()


class _ContextPrecision(Judge):
    answer_field: ClassVar[str] = "reference"

    def __init__(self, *, lm: Any = None, adapter: Any = None, use_logprobs: bool = False):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs)
        self.judge_usefulness = dspy.Predict(JudgeContextUsefulness)

    def _precision(self, question: str, contexts: list[str], answer: str) -> dspy.Prediction:
        verdicts = [self.judge_usefulness(question=question, context=c, answer=answer, config=self.verdict_config())
                    for c in contexts]
        useful = [bool(v.useful) for v in verdicts]
        weights: list[float] = list(useful)
        if self.use_logprobs:
            probabilities = [verdict_probabilities(v.get("logprobs"), "useful") for v in verdicts]
            weights = [p[0] if p else float(u) for p, u in zip(probabilities, useful)]
        return dspy.Prediction(score=average_precision(weights), useful=useful, probabilities=weights,
                               reasons=[v.reason for v in verdicts])


class LLMContextPrecisionWithReference(_ContextPrecision):
    """Average precision of the retrieved chunks, each judged useful or not for reaching the reference."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "retrieved_contexts", "reference")

    def forward(self, user_input: str, retrieved_contexts: list[str], reference: str):
        return self._precision(user_input, retrieved_contexts, reference)


class LLMContextPrecisionWithoutReference(_ContextPrecision):
    """Average precision of the retrieved chunks, each judged useful or not for the response given."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "retrieved_contexts", "response")

    def forward(self, user_input: str, retrieved_contexts: list[str], response: str):
        return self._precision(user_input, retrieved_contexts, response)


ContextPrecision = LLMContextPrecisionWithReference
ContextUtilization = LLMContextPrecisionWithoutReference


class LLMContextRecall(ClaimJudge):
    """Share of the reference's claims that can be attributed to the retrieved contexts. With reference
    alternatives, the one the contexts cover best is decomposed. ``fallback_claims`` applies to the reference,
    the one text decomposed: with ``"checkable"``, its units set aside are ``set_aside`` and a reference with
    nothing checkable scores ``unclaimed_score``."""

    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_contexts", "reference")
    reference_view: ClassVar[str] = "closest_to_contexts"

    def forward(self, retrieved_contexts: list[str], reference: str, user_input: str | None = None):
        return self.supported_result(self.claims_of(reference, user_input), join_contexts(retrieved_contexts))


ContextRecall = LLMContextRecall


class ContextEntityRecall(Judge):
    """Share of the reference's entities that also occur among the retrieved contexts' entities. With
    reference alternatives, the one the contexts cover best is used."""

    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_contexts", "reference")
    reference_view: ClassVar[str] = "closest_to_contexts"

    def __init__(self, *, lm: Any = None, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        self.extract_entities = dspy.Predict(ExtractEntities)

    def _entities(self, text: str) -> list[str]:
        seen: dict[str, str] = {}
        for entity in self.extract_entities(text=text).entities:
            key = normalised(entity)
            if key:
                seen.setdefault(key, entity.strip())
        return list(seen.values())

    def forward(self, retrieved_contexts: list[str], reference: str):
        reference_entities = self._entities(reference)
        context_entities = self._entities(join_contexts(retrieved_contexts))
        context_keys = {normalised(e) for e in context_entities}
        recalled = [e for e in reference_entities if normalised(e) in context_keys]
        result = dspy.Prediction(
            score=len(recalled) / len(reference_entities) if reference_entities else 0.0,
            reference_entities=reference_entities,
            context_entities=context_entities,
            recalled_entities=recalled,
        )
        if not reference_entities:
            result["undefined_reason"] = "no entity was found in the reference"
        return result


class ContextRelevancy(Judge):
    """Share of the retrieved contexts' sentences that are needed to answer the question. Extracted
    sentences count only when they match a context sentence (string similarity >= 0.8), each once."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "retrieved_contexts")

    def __init__(self, *, lm: Any = None, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        self.extract_sentences = dspy.Predict(ExtractRelevantSentences)

    def forward(self, user_input: str, retrieved_contexts: list[str]):
        from rapidfuzz.distance import Levenshtein

        context_sentences = [s for c in retrieved_contexts for s in split_sentences(c)]
        extracted = self.extract_sentences(question=user_input, context=join_contexts(retrieved_contexts)).sentences
        matched: set[int] = set()
        for sentence in extracted:
            scores = [Levenshtein.normalized_similarity(normalised(sentence), normalised(c)) for c in context_sentences]
            if scores and max(scores) >= 0.8:
                matched.add(int(np.argmax(scores)))
        return dspy.Prediction(
            score=len(matched) / len(context_sentences) if context_sentences else 0.0,
            relevant_sentences=[context_sentences[i] for i in sorted(matched)],
            context_sentences=context_sentences,
        )
