"""RAG judges: each a ``dspy.Module`` of named, separately compilable steps (``named_predictors()``).

Shared steps:
  * ``extract_claims`` (:class:`ExtractClaims`): text -> short standalone claims. If it returns none, the
    text's sentences (``judges.language.split_sentences``) are used instead and ``claims_source`` says so.
  * ``verify`` (:class:`VerifyClaims`): all claims against one text in a single call -> a verdict per
    claim. Verdicts are matched to claims by their copied text (position as a fallback); a claim left
    without a verdict counts as not supported and is listed in ``unverified``.

Scores and their undefined cases (a judge never returns NaN; an undefined case gets the value below and
an ``undefined_reason``, so ``evaluate()`` can count it apart):
  =============================  =========================================================  ===============
  metric                         score                                                      undefined -> 0.0
  =============================  =========================================================  ===============
  Faithfulness                   supported claims / claims                                  (never: falls back to sentences)
  ResponseRelevancy              mean cos(user_input, generated question); 0 if noncommittal no question generated
  LLMContextPrecisionWith/       average precision of per-chunk usefulness verdicts          (never)
  WithoutReference
  LLMContextRecall               reference claims attributed to the contexts / claims        (never)
  ContextEntityRecall            |entities(contexts) & entities(reference)| / |entities(reference)|  no entity in reference
  NoiseSensitivity               incorrect response claims backed by (ir)relevant contexts   (never)
                                 / response claims
  AnswerCorrectness              (w1 * F1(TP, FP, FN) + w2 * similarity) / (w1 + w2)        (never)
  FactualCorrectness             precision / recall / F1 of claims, both directions          (never)
  SemanticSimilarity             cos(response, reference), clipped at 0                       (never)
  ContextRelevancy               extracted context sentences / context sentences             (never)
  =============================  =========================================================  ===============
"""

from __future__ import annotations

from typing import Any, ClassVar

import dspy
import numpy as np
import pydantic

from judges.base import Judge, Metric, verdict_probabilities
from judges.grounding import token_support
from judges.language import split_sentences, tokenize
from judges.models import output_constraints, resolve_embedder
from judges.retrieval import average_precision


# --------------------------------------------------------------------------------------------------
# Signatures: the docstring is the instruction; fields are typed with a short desc.
# --------------------------------------------------------------------------------------------------
class ExtractClaims(dspy.Signature):
    """Break the text into short, standalone factual claims. Each claim states exactly one fact from the
    text, names what pronouns refer to, and is written in the text's language. Add nothing the text does
    not say."""

    question: str = dspy.InputField(desc="what the text answers; may be empty")
    text: str = dspy.InputField()
    claims: list[str] = dspy.OutputField(desc="one fact per item, in order")


class ClaimVerdict(pydantic.BaseModel):
    claim: str = pydantic.Field(max_length=300)
    reason: str = pydantic.Field(max_length=200)
    supported: bool


class VerifyClaims(dspy.Signature):
    """For each claim, decide whether it can be directly inferred from the context. A claim is not
    supported if the context does not state it or states something different (another date, name or
    number). Give one verdict per claim, in the claims' order, copying the claim."""

    context: str = dspy.InputField()
    claims: list[str] = dspy.InputField()
    verdicts: list[ClaimVerdict] = dspy.OutputField()


class GenerateQuestion(dspy.Signature):
    """Write questions that the response answers, in the response's language. Mark the response
    noncommittal if it is evasive or vague ("I don't know", "I'm not sure")."""

    response: str = dspy.InputField()
    count: int = dspy.InputField(desc="how many questions to write")
    questions: list[str] = dspy.OutputField()
    noncommittal: bool = dspy.OutputField()


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


# --------------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------------
def join_contexts(contexts: list[str]) -> str:
    return "\n\n".join(contexts)


def _normalise(text: str) -> str:
    return " ".join(text.casefold().split())


def align_verdicts(
    claims: list[str], verdicts: list[Any], probabilities: list[float] | None = None
) -> tuple[list[dict[str, Any]], list[int]]:
    """Pair each claim with its verdict: by the copied claim text when it matches, else by position.

    Returns ``(rows, unverified)`` where ``rows[i] = {"claim", "supported", "reason"}`` (plus
    ``"probability"`` when ``probabilities[j]`` gives P(supported) for verdict j) and ``unverified`` lists
    the claims no verdict covered (they count as not supported).
    """
    from rapidfuzz.distance import Levenshtein

    remaining = list(range(len(verdicts)))
    assigned: dict[int, int] = {}
    for i, claim in enumerate(claims):
        best, best_sim = None, 0.0
        for j in remaining:
            sim = Levenshtein.normalized_similarity(_normalise(claim), _normalise(verdicts[j].claim))
            if sim > best_sim:
                best, best_sim = j, sim
        if best is not None and best_sim >= 0.8:
            assigned[i] = best
            remaining.remove(best)
    for i in range(len(claims)):  # positional fallback for the rest
        if i not in assigned and i in remaining:
            assigned[i] = i
            remaining.remove(i)
    rows, unverified = [], []
    for i, claim in enumerate(claims):
        j = assigned.get(i)
        if j is None:
            unverified.append(i)
            rows.append({"claim": claim, "supported": False, "reason": "no verdict was returned for this claim"})
            continue
        row = {"claim": claim, "supported": bool(verdicts[j].supported), "reason": verdicts[j].reason}
        if probabilities is not None:
            row["probability"] = float(probabilities[j])
        rows.append(row)
    return rows, unverified


class _ClaimJudge(Judge):
    """Judges built from ``extract_claims`` and ``verify`` share these two steps."""

    def __init__(self, *, lm: Any = None, adapter: Any = None, use_logprobs: bool = False):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs)
        self.extract_claims = dspy.Predict(ExtractClaims)
        self.verify = dspy.Predict(VerifyClaims)

    def claims_of(self, text: str, question: str | None = None) -> tuple[list[str], str]:
        sentences = split_sentences(text)
        # A claim list longer than a few per sentence is a small model repeating itself.
        with output_constraints(claims={"maxItems": min(16, 3 * max(len(sentences), 1))}):
            extracted = self.extract_claims(question=question or "", text=text).claims
        claims = list(dict.fromkeys(c.strip() for c in extracted if c and c.strip()))
        if claims:
            return claims, "extracted"
        return sentences, "sentences"

    def verify_claims(self, claims: list[str], context: str) -> tuple[list[dict[str, Any]], list[int]]:
        if not claims:
            return [], []
        with output_constraints(verdicts={"minItems": len(claims), "maxItems": len(claims)}):
            out = self.verify(context=context, claims=claims, config=self.verdict_config())
        verdicts = list(out.verdicts)
        probabilities = verdict_probabilities(out.get("logprobs"), "supported") if self.use_logprobs else None
        return align_verdicts(claims, verdicts, probabilities if probabilities and len(probabilities) == len(verdicts) else None)

    @staticmethod
    def supported_share(rows: list[dict[str, Any]]) -> float:
        """Mean support: P(supported) where log-probabilities gave one, else the 0/1 verdict."""
        return sum(r.get("probability", r["supported"]) for r in rows) / len(rows) if rows else 0.0

    def feedback(self, result: dspy.Prediction) -> str:
        unsupported = [r["claim"] for r in result.get("verdicts", []) if not r["supported"]]
        text = f"{self.name} = {result.score:.2f}"
        if unsupported:
            text += "; claims not supported: " + " | ".join(unsupported)
        return text


class _EmbeddingsMixin:
    needs_embeddings: ClassVar[bool] = True

    def _init_embeddings(self, embeddings: Any) -> None:
        self.embeddings = embeddings
        self._embedder = None

    @property
    def embedder(self):
        if self.embeddings is None:  # the default may change per run (evaluate(embeddings=...))
            return resolve_embedder(None)
        if self._embedder is None:
            self._embedder = resolve_embedder(self.embeddings)
        return self._embedder


# --------------------------------------------------------------------------------------------------
# Faithfulness
# --------------------------------------------------------------------------------------------------
class Faithfulness(_ClaimJudge):
    """Share of the response's claims that the retrieved contexts support."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "retrieved_contexts")

    def forward(self, response: str, retrieved_contexts: list[str], user_input: str | None = None):
        claims, source = self.claims_of(response, user_input)
        rows, unverified = self.verify_claims(claims, join_contexts(retrieved_contexts))
        return dspy.Prediction(score=self.supported_share(rows), claims=claims, claims_source=source,
                               verdicts=rows, unverified=unverified)

    def label_consistent_demos(self, inputs: dict[str, Any], steps: dict[str, dict[str, Any]],
                               label: float) -> dict[str, dict[str, Any]]:
        """The ``verify`` step's run with its verdicts changed so that the supported share is the person's
        label: the claims kept supported are those the judge supported, then those sharing most words with
        the context; the claims themselves are left as extracted (people labelled the response, not them)."""
        verify = steps.get("verify")
        verdicts = [dict(v) for v in (verify or {}).get("verdicts") or [] if isinstance(v, dict)]
        if not verdicts or any(not {"claim", "supported"} <= set(v) for v in verdicts):
            return {}
        evidence = set(tokenize(verify.get("context") or ""))
        order = sorted(range(len(verdicts)), key=lambda i: (not verdicts[i]["supported"],
                                                             -token_support(str(verdicts[i]["claim"]), evidence), i))
        supported = set(order[:int(round(label * len(verdicts)))])
        for i, verdict in enumerate(verdicts):
            if bool(verdict["supported"]) != (i in supported):
                verdict["supported"] = i in supported
                verdict["reason"] = ("A person found this in the context." if i in supported
                                     else "A person found that the context does not state this.")
        return {"verify": {**verify, "verdicts": verdicts}}


# --------------------------------------------------------------------------------------------------
# Response relevancy
# --------------------------------------------------------------------------------------------------
class ResponseRelevancy(_EmbeddingsMixin, Judge):
    """Mean cosine similarity between the user input and questions generated from the response;
    0 when the response is noncommittal."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response")

    def __init__(self, *, lm: Any = None, embeddings: Any = None, n_questions: int = 3, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        if not isinstance(n_questions, int) or n_questions < 1:
            raise ValueError(f"response_relevancy: n_questions must be a positive int, got {n_questions!r}")
        self.n_questions = n_questions
        self._init_embeddings(embeddings)
        self.generate_questions = dspy.Predict(GenerateQuestion)

    def forward(self, user_input: str, response: str):
        with output_constraints(questions={"minItems": self.n_questions, "maxItems": self.n_questions}):
            out = self.generate_questions(response=response, count=self.n_questions)
        questions = [q.strip() for q in out.questions if q and q.strip()][: self.n_questions]
        if not questions:
            return dspy.Prediction(score=0.0, questions=[], noncommittal=bool(out.noncommittal), similarities=[],
                                   undefined_reason="no question was generated from the response")
        similarities = [float(s) for s in self.embedder.similarity([user_input], questions)[0]]
        mean = float(np.mean(similarities))
        score = 0.0 if out.noncommittal else max(mean, 0.0)
        return dspy.Prediction(score=score, questions=questions, noncommittal=bool(out.noncommittal),
                               similarities=similarities)


AnswerRelevancy = ResponseRelevancy


# --------------------------------------------------------------------------------------------------
# Context precision (with reference) and context utilization (without reference)
# --------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------
# Context recall
# --------------------------------------------------------------------------------------------------
class LLMContextRecall(_ClaimJudge):
    """Share of the reference's claims that can be attributed to the retrieved contexts. With reference
    alternatives, the one the contexts cover best is decomposed."""

    required_fields: ClassVar[tuple[str, ...]] = ("retrieved_contexts", "reference")
    reference_view: ClassVar[str] = "closest_to_contexts"

    def forward(self, retrieved_contexts: list[str], reference: str, user_input: str | None = None):
        claims, source = self.claims_of(reference, user_input)
        rows, unverified = self.verify_claims(claims, join_contexts(retrieved_contexts))
        return dspy.Prediction(score=self.supported_share(rows), claims=claims, claims_source=source,
                               verdicts=rows, unverified=unverified)


ContextRecall = LLMContextRecall


# --------------------------------------------------------------------------------------------------
# Context entity recall
# --------------------------------------------------------------------------------------------------
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
            key = _normalise(entity)
            if key:
                seen.setdefault(key, entity.strip())
        return list(seen.values())

    def forward(self, retrieved_contexts: list[str], reference: str):
        reference_entities = self._entities(reference)
        context_entities = self._entities(join_contexts(retrieved_contexts))
        context_keys = {_normalise(e) for e in context_entities}
        recalled = [e for e in reference_entities if _normalise(e) in context_keys]
        result = dspy.Prediction(
            score=len(recalled) / len(reference_entities) if reference_entities else 0.0,
            reference_entities=reference_entities,
            context_entities=context_entities,
            recalled_entities=recalled,
        )
        if not reference_entities:
            result["undefined_reason"] = "no entity was found in the reference"
        return result


# --------------------------------------------------------------------------------------------------
# Noise sensitivity
# --------------------------------------------------------------------------------------------------
class NoiseSensitivity(_ClaimJudge):
    """Share of the response's claims that are incorrect (not supported by the reference) yet backed by
    a relevant context (``mode="relevant"``) or only by irrelevant ones (``mode="irrelevant"``). A context
    is relevant when it supports at least one reference claim. Lower is better. With reference
    alternatives, the one the response covers best is decomposed."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response", "reference", "retrieved_contexts")
    reference_view: ClassVar[str] = "closest_to_response"

    def __init__(self, *, lm: Any = None, mode: str = "relevant", adapter: Any = None, use_logprobs: bool = False):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs)
        if mode not in ("relevant", "irrelevant"):
            raise ValueError(f"noise_sensitivity: mode={mode!r} is not one of ['irrelevant', 'relevant']")
        self.mode = mode

    def forward(self, user_input: str, response: str, reference: str, retrieved_contexts: list[str]):
        response_claims, _ = self.claims_of(response, user_input)
        reference_claims, _ = self.claims_of(reference, user_input)
        correct_rows, _ = self.verify_claims(response_claims, reference)
        correct = np.array([r["supported"] for r in correct_rows], dtype=bool)
        relevant_context, backs = [], []
        for context in retrieved_contexts:
            ref_rows, _ = self.verify_claims(reference_claims, context)
            resp_rows, _ = self.verify_claims(response_claims, context)
            relevant_context.append(any(r["supported"] for r in ref_rows))
            backs.append([r["supported"] for r in resp_rows])
        backs_arr = np.array(backs, dtype=bool).reshape(len(retrieved_contexts), len(response_claims))
        relevant = np.array(relevant_context, dtype=bool)
        by_relevant = backs_arr[relevant].any(axis=0) if relevant.any() else np.zeros(len(response_claims), bool)
        by_irrelevant = backs_arr[~relevant].any(axis=0) if (~relevant).any() else np.zeros(len(response_claims), bool)
        by_irrelevant &= ~by_relevant
        counted = (by_relevant if self.mode == "relevant" else by_irrelevant) & ~correct
        return dspy.Prediction(
            score=float(counted.mean()) if len(counted) else 0.0,
            response_claims=response_claims,
            reference_claims=reference_claims,
            correct=correct.tolist(),
            relevant_contexts=relevant_context,
            incorrect_claims=[c for c, bad in zip(response_claims, counted) if bad],
        )

    def feedback(self, result: dspy.Prediction) -> str:
        text = f"noise sensitivity ({self.mode}) = {result.score:.2f}"
        if result.incorrect_claims:
            text += "; incorrect claims taken from retrieved contexts: " + " | ".join(result.incorrect_claims)
        return text


# --------------------------------------------------------------------------------------------------
# Semantic similarity, answer correctness, factual correctness
# --------------------------------------------------------------------------------------------------
class SemanticSimilarity(_EmbeddingsMixin, Metric):
    """Cosine similarity of the response's and the reference's embeddings (negative values clip to 0);
    with ``threshold`` the score is 1.0 at or above it, else 0.0. With reference alternatives, the most
    similar one counts (``matched_reference``)."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference")

    def __init__(self, *, embeddings: Any = None, threshold: float | None = None):
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(f"semantic_similarity: threshold must be in [0, 1], got {threshold!r}")
        self.threshold = threshold
        self._init_embeddings(embeddings)

    def similarity(self, response: str, reference: str | list[str]) -> float:
        """The cosine of ``response`` with ``reference``, or with the closest of several alternatives."""
        references = [reference] if isinstance(reference, str) else list(reference)
        return float(self.embedder.similarity([response], references).max())

    def _score(self, sample) -> dspy.Prediction:
        alternatives = sample.reference_alternatives()
        cosines = self.embedder.similarity([sample.response], alternatives)[0]
        cosine = float(cosines.max())
        score = max(cosine, 0.0)
        if self.threshold is not None:
            score = float(score >= self.threshold)
        out = dspy.Prediction(score=score, cosine=cosine)
        if len(alternatives) > 1:
            out["matched_reference"] = alternatives[int(cosines.argmax())]
        return out


def f1_from_counts(tp: int, fp: int, fn: int) -> float:
    """TP / (TP + (FP + FN) / 2); 0.0 when there is no true positive."""
    return tp / (tp + 0.5 * (fp + fn)) if tp else 0.0


class AnswerCorrectness(_EmbeddingsMixin, _ClaimJudge):
    """Weighted mean of the factual F1 between response and reference claims and their semantic
    similarity. TP: response claims the reference supports; FP: response claims it does not; FN:
    reference claims the response does not cover. Default weights 0.75 / 0.25. With ``threshold`` the
    score becomes 1.0 at or above it, else 0.0 (the unthresholded value stays in ``raw_score``). With
    reference alternatives, the one the response covers best is the reference."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response", "reference")
    reference_view: ClassVar[str] = "closest_to_response"

    def __init__(
        self,
        *,
        lm: Any = None,
        embeddings: Any = None,
        weights: tuple[float, float] = (0.75, 0.25),
        threshold: float | None = None,
        adapter: Any = None,
        use_logprobs: bool = False,
    ):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs)
        if len(weights) != 2 or any(w < 0 for w in weights) or sum(weights) == 0:
            raise ValueError(f"answer_correctness: weights must be two non-negative numbers, not both 0; got {weights!r}")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(f"answer_correctness: threshold must be in [0, 1], got {threshold!r}")
        self.weights = tuple(float(w) for w in weights)
        self.threshold = threshold
        self._init_embeddings(embeddings)

    def forward(self, user_input: str, response: str, reference: str):
        response_claims, _ = self.claims_of(response, user_input)
        reference_claims, _ = self.claims_of(reference, user_input)
        precision_rows, _ = self.verify_claims(response_claims, reference)
        recall_rows, _ = self.verify_claims(reference_claims, response)
        tp = [r["claim"] for r in precision_rows if r["supported"]]
        fp = [r["claim"] for r in precision_rows if not r["supported"]]
        fn = [r["claim"] for r in recall_rows if not r["supported"]]
        f1 = f1_from_counts(len(tp), len(fp), len(fn))
        w_fact, w_sim = self.weights
        similarity = max(float(self.embedder.similarity([response], [reference])[0, 0]), 0.0) if w_sim else 0.0
        raw = (w_fact * f1 + w_sim * similarity) / (w_fact + w_sim)
        score = float(raw >= self.threshold) if self.threshold is not None else raw
        return dspy.Prediction(score=score, raw_score=raw, f1=f1, similarity=similarity, tp=tp, fp=fp, fn=fn,
                               verdicts=precision_rows)

    def feedback(self, result: dspy.Prediction) -> str:
        text = f"answer correctness = {result.score:.2f} (F1 {result.f1:.2f}, similarity {result.similarity:.2f})"
        if result.fp:
            text += "; claims the reference does not support: " + " | ".join(result.fp)
        if result.fn:
            text += "; reference facts missing: " + " | ".join(result.fn)
        return text


_ATOMICITY = {"low": "Keep closely related facts together in one claim.",
              "high": "Split into the smallest possible facts, one per claim."}
_COVERAGE = {"low": "Keep only the main facts.", "high": "Keep every detail: names, dates, numbers, qualifiers."}


class FactualCorrectness(_ClaimJudge):
    """Precision, recall or F1 of claims between response and reference: precision = response claims the
    reference supports / response claims; recall = reference claims the response supports / reference
    claims. ``atomicity`` and ``coverage`` ("low"/"high") set how finely texts are decomposed. With
    reference alternatives, the one the response covers best is the reference."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference")
    reference_view: ClassVar[str] = "closest_to_response"

    def __init__(self, *, lm: Any = None, mode: str = "f1", atomicity: str = "low", coverage: str = "low",
                 adapter: Any = None, use_logprobs: bool = False):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs)
        for name, value, allowed in (("mode", mode, ("precision", "recall", "f1")),
                                     ("atomicity", atomicity, ("low", "high")),
                                     ("coverage", coverage, ("low", "high"))):
            if value not in allowed:
                raise ValueError(f"factual_correctness: {name}={value!r} is not one of {sorted(allowed)}")
        self.mode, self.atomicity, self.coverage = mode, atomicity, coverage

    def _decompose(self, text: str) -> list[str]:
        guide = f"{_ATOMICITY[self.atomicity]} {_COVERAGE[self.coverage]}"
        claims, _ = self.claims_of(text, question=guide)
        return claims

    def forward(self, response: str, reference: str):
        result: dict[str, Any] = {}
        precision = recall = None
        if self.mode in ("precision", "f1"):
            rows, _ = self.verify_claims(self._decompose(response), reference)
            precision = self.supported_share(rows)
            result["response_verdicts"] = rows
        if self.mode in ("recall", "f1"):
            rows, _ = self.verify_claims(self._decompose(reference), response)
            recall = self.supported_share(rows)
            result["reference_verdicts"] = rows
        if self.mode == "precision":
            score = precision
        elif self.mode == "recall":
            score = recall
        else:
            score = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return dspy.Prediction(score=float(score), precision=precision, recall=recall,
                               verdicts=result.get("response_verdicts", []), **result)


# --------------------------------------------------------------------------------------------------
# Context relevancy (the older sentence-extraction variant)
# --------------------------------------------------------------------------------------------------
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
            scores = [Levenshtein.normalized_similarity(_normalise(sentence), _normalise(c)) for c in context_sentences]
            if scores and max(scores) >= 0.8:
                matched.add(int(np.argmax(scores)))
        return dspy.Prediction(
            score=len(matched) / len(context_sentences) if context_sentences else 0.0,
            relevant_sentences=[context_sentences[i] for i in sorted(matched)],
            context_sentences=context_sentences,
        )
