"""RAG judges of the answer: is the response grounded, relevant, correct against the reference?

Scores (a judge never returns NaN; an undefined case gets 0.0 and an ``undefined_reason``, so
``evaluate()`` can count it apart):
  Faithfulness        supported claims / claims                  (never: falls back to sentences or, with
                      fallback_claims="checkable", to checkable units; none of those: unclaimed_score)
  ResponseRelevancy   mean cos(user_input, generated question); 0 if noncommittal   no question generated
  NoiseSensitivity    incorrect response claims backed by (ir)relevant contexts / response claims   (never)
  AnswerCorrectness   (w1 * F1(TP, FP, FN) + w2 * similarity) / (w1 + w2)       (never)
  FactualCorrectness  precision / recall / F1 of claims, both directions         (never)
  SemanticSimilarity  cos(response, reference), clipped at 0                     (never)

Owns: Faithfulness, ResponseRelevancy, NoiseSensitivity, SemanticSimilarity, AnswerCorrectness,
FactualCorrectness. Must not define the claim steps (``judges.metrics.rag.claims``).

The claim judges take ``fallback_claims`` and ``unclaimed_score`` (``judges.metrics.rag.claims``). The policy
applies to every text a judge breaks into claims, the reference too: in dialogue data a reference is a reply
as well, and its greetings would otherwise count as facts the response missed (``reference_set_aside`` lists
what its fallback set aside). ``unclaimed_score`` stands in for a share over no claim: Faithfulness's and
NoiseSensitivity's when the response has none (no reference claim or verify call is then needed),
FactualCorrectness's precision (response) or recall (reference), and AnswerCorrectness's F1 only when neither
text has a claim: a reference's facts the response lacks still make its F1 0. Its default is each judge's
floor: 0.0, and 1.0 for NoiseSensitivity, where lower is better, so talk alone is never rewarded as a reply
without an incorrect claim.
"""

from __future__ import annotations

from typing import Any, ClassVar

import dspy
import numpy as np

from judges.data.language import tokenize
from judges.lm.schemas import output_constraints
from judges.metrics.base import Judge, Metric
from judges.metrics.grounding import token_support
from judges.metrics.rag.claims import (
    ClaimJudge,
    EmbeddingsMixin,
    join_contexts,
    set_aside_feedback,
    unclaimed_feedback,
)


class GenerateQuestion(dspy.Signature):
    """Write questions that the response answers, in the response's language. Mark the response
    noncommittal if it is evasive or vague ("I don't know", "I'm not sure")."""

    response: str = dspy.InputField()
    count: int = dspy.InputField(desc="how many questions to write")
    questions: list[str] = dspy.OutputField()
    noncommittal: bool = dspy.OutputField()


class Faithfulness(ClaimJudge):
    """Share of the response's claims that the retrieved contexts support."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "retrieved_contexts")

    def forward(self, response: str, retrieved_contexts: list[str], user_input: str | None = None):
        return self.supported_result(self.claims_of(response, user_input), join_contexts(retrieved_contexts))

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


class ResponseRelevancy(EmbeddingsMixin, Judge):
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


class NoiseSensitivity(ClaimJudge):
    """Share of the response's claims that are incorrect (not supported by the reference) yet backed by
    a relevant context (``mode="relevant"``) or only by irrelevant ones (``mode="irrelevant"``). A context
    is relevant when it supports at least one reference claim. Lower is better. With reference
    alternatives, the one the response covers best is decomposed."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "response", "reference", "retrieved_contexts")
    reference_view: ClassVar[str] = "closest_to_response"
    lower_is_better: ClassVar[bool] = True
    output_floor: ClassVar[float] = 1.0  # an answer of nothing is the worst, not the best, noise sensitivity

    #: A reply with nothing checkable scores the floor by default, as an empty one does: it is not rewarded
    #: as a reply without an incorrect claim (lower is better here).
    saved_before: ClassVar[dict[str, Any]] = {"fallback_claims": "sentences", "unclaimed_score": 1.0}

    def __init__(self, *, lm: Any = None, mode: str = "relevant", adapter: Any = None, use_logprobs: bool = False,
                 fallback_claims: str = "sentences", unclaimed_score: float = 1.0):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs, fallback_claims=fallback_claims,
                         unclaimed_score=unclaimed_score)
        if mode not in ("relevant", "irrelevant"):
            raise ValueError(f"noise_sensitivity: mode={mode!r} is not one of ['irrelevant', 'relevant']")
        self.mode = mode

    def forward(self, user_input: str, response: str, reference: str, retrieved_contexts: list[str]):
        response_found = self.claims_of(response, user_input)
        response_claims = response_found.claims
        if response_found.unclaimed:  # no claim, so none incorrect: nothing to verify
            return dspy.Prediction(score=self.unclaimed_score, response_claims=[], reference_claims=[], correct=[],
                                   relevant_contexts=[], incorrect_claims=[], nothing_checkable=True,
                                   **response_found.fields())
        reference_found = self.claims_of(reference, user_input)
        reference_claims = reference_found.claims
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
            **response_found.fields(), **reference_found.fields("reference_"),
        )

    def feedback(self, result: dspy.Prediction) -> str:
        text = f"noise sensitivity ({self.mode}) = {result.score:.2f}"
        if result.get("nothing_checkable"):
            text += unclaimed_feedback(self.unclaimed_score)
        if result.incorrect_claims:
            text += "; incorrect claims taken from retrieved contexts: " + " | ".join(result.incorrect_claims)
        return text + set_aside_feedback(result)


class SemanticSimilarity(EmbeddingsMixin, Metric):
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


class AnswerCorrectness(EmbeddingsMixin, ClaimJudge):
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
        fallback_claims: str = "sentences",
        unclaimed_score: float = 0.0,
    ):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs, fallback_claims=fallback_claims,
                         unclaimed_score=unclaimed_score)
        if len(weights) != 2 or any(w < 0 for w in weights) or sum(weights) == 0:
            raise ValueError(f"answer_correctness: weights must be two non-negative numbers, not both 0; got {weights!r}")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(f"answer_correctness: threshold must be in [0, 1], got {threshold!r}")
        self.weights = tuple(float(w) for w in weights)
        self.threshold = threshold
        self._init_embeddings(embeddings)

    def forward(self, user_input: str, response: str, reference: str):
        response_found, reference_found = self.claims_of(response, user_input), self.claims_of(reference, user_input)
        precision_rows, _ = self.verify_claims(response_found.claims, reference)  # no call for no claim
        recall_rows, _ = self.verify_claims(reference_found.claims, response)
        tp = [r["claim"] for r in precision_rows if r["supported"]]
        fp = [r["claim"] for r in precision_rows if not r["supported"]]
        fn = [r["claim"] for r in recall_rows if not r["supported"]]
        unclaimed = response_found.unclaimed and reference_found.unclaimed
        f1 = self.unclaimed_score if unclaimed else f1_from_counts(len(tp), len(fp), len(fn))
        w_fact, w_sim = self.weights
        similarity = max(float(self.embedder.similarity([response], [reference])[0, 0]), 0.0) if w_sim else 0.0
        raw = (w_fact * f1 + w_sim * similarity) / (w_fact + w_sim)
        score = float(raw >= self.threshold) if self.threshold is not None else raw
        return dspy.Prediction(score=score, raw_score=raw, f1=f1, similarity=similarity, tp=tp, fp=fp, fn=fn,
                               verdicts=precision_rows, **({"nothing_checkable": True} if unclaimed else {}),
                               **response_found.fields(), **reference_found.fields("reference_"))

    def feedback(self, result: dspy.Prediction) -> str:
        text = f"answer correctness = {result.score:.2f} (F1 {result.f1:.2f}, similarity {result.similarity:.2f})"
        if result.get("nothing_checkable"):
            text += unclaimed_feedback(self.unclaimed_score, ["F1"])
        if result.fp:
            text += "; claims the reference does not support: " + " | ".join(result.fp)
        if result.fn:
            text += "; reference facts missing: " + " | ".join(result.fn)
        return text + set_aside_feedback(result)


_ATOMICITY = {"low": "Keep closely related facts together in one claim.",
              "high": "Split into the smallest possible facts, one per claim."}
_COVERAGE = {"low": "Keep only the main facts.", "high": "Keep every detail: names, dates, numbers, qualifiers."}


class FactualCorrectness(ClaimJudge):
    """Precision, recall or F1 of claims between response and reference: precision = response claims the
    reference supports / response claims; recall = reference claims the response supports / reference
    claims. ``atomicity`` and ``coverage`` ("low"/"high") set how finely texts are decomposed. With
    reference alternatives, the one the response covers best is the reference."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference")
    reference_view: ClassVar[str] = "closest_to_response"

    def __init__(self, *, lm: Any = None, mode: str = "f1", atomicity: str = "low", coverage: str = "low",
                 adapter: Any = None, use_logprobs: bool = False, fallback_claims: str = "sentences",
                 unclaimed_score: float = 0.0):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs, fallback_claims=fallback_claims,
                         unclaimed_score=unclaimed_score)
        for name, value, allowed in (("mode", mode, ("precision", "recall", "f1")),
                                     ("atomicity", atomicity, ("low", "high")),
                                     ("coverage", coverage, ("low", "high"))):
            if value not in allowed:
                raise ValueError(f"factual_correctness: {name}={value!r} is not one of {sorted(allowed)}")
        self.mode, self.atomicity, self.coverage = mode, atomicity, coverage

    def _share(self, share: str, text: str, against: str, result: dict[str, Any]) -> float:
        """Precision (``text`` the response) or recall (the reference): the share of ``text``'s claims that
        ``against`` supports, with its verdicts and set-aside units put in ``result``; ``unclaimed_score`` (named
        in ``unclaimed_shares``) when the text has nothing checkable."""
        found = self.claims_of(text, question=f"{_ATOMICITY[self.atomicity]} {_COVERAGE[self.coverage]}")
        rows, _ = self.verify_claims(found.claims, against)
        recall = share == "recall"
        result.update({f"{'reference' if recall else 'response'}_verdicts": rows,
                       **found.fields("reference_" if recall else "")})
        if found.unclaimed:
            result.setdefault("unclaimed_shares", []).append(share)
            return self.unclaimed_score
        return self.supported_share(rows)

    def forward(self, response: str, reference: str):
        result: dict[str, Any] = {}
        precision = recall = None
        if self.mode in ("precision", "f1"):
            precision = self._share("precision", response, reference, result)
        if self.mode in ("recall", "f1"):
            recall = self._share("recall", reference, response, result)
        if self.mode == "precision":
            score = precision
        elif self.mode == "recall":
            score = recall
        else:
            score = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        if result.get("unclaimed_shares"):
            result["nothing_checkable"] = True
        return dspy.Prediction(score=float(score), precision=precision, recall=recall,
                               verdicts=result.get("response_verdicts", []), **result)
