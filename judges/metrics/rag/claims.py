"""The claim steps RAG judges share, and the helpers that turn their answers into scores.

  * ``extract_claims`` (:class:`ExtractClaims`): text -> short standalone claims. If it returns none, the
    judge's ``fallback_claims`` policy gives them and ``claims_source`` says which: ``"sentences"`` (the
    default) the text's sentences (``judges.data.language.split_sentences``); ``"checkable"`` the claims of
    its checkable sentences (``judges.data.claim_units``), the others listed in ``set_aside`` with their kind;
    ``"checkable-learned"`` the same with talk decided by a learned sentence classifier (``judges.lm.talk``).
    A dialogue reply's greetings, questions, backchannels, opinions and own experiences are no facts, and
    judged as claims they would pull a faithful reply down. A text left with no claim is ``nothing_checkable``
    and its share of supported claims is ``unclaimed_score`` (validated in [0, 1]), with no verify call.
  * ``verify`` (:class:`VerifyClaims`): all claims against one text in a single call -> a verdict per
    claim. Verdicts are matched to claims by their copied text (position as a fallback); a claim left
    without a verdict counts as not supported and is listed in ``unverified``. Each claim not supported
    is given the sentence of that text sharing most of its words (``evidence``) and, where that sentence
    says one detail of it differently, the claim as the sentence puts it (``contrast``,
    ``judges.data.contrasts``): the feedback shows both, for a person or a reflection LM to act on.

Owns: those two signatures, ``ClaimJudge`` (the base of every judge built from them), ``align_verdicts``,
``EmbeddingsMixin``, and the checks and feedback of ``unclaimed_score`` and ``set_aside`` (shared with
``judges.metrics.rag.verified``). Must not define a metric of the catalogue (``answer`` and ``context`` do).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import dspy
import pydantic

from judges.data.claim_units import checkable_claims
from judges.data.contrasts import contrasts
from judges.data.language import split_sentences
from judges.lm.embeddings import resolve_embedder
from judges.lm.schemas import output_constraints
from judges.lm.talk import shipped_talk_classifier, talk_identity
from judges.lm.verifier.units import best_sentence
from judges.metrics.base import Judge
from judges.metrics.logprobs import verdict_probabilities


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


def join_contexts(contexts: list[str]) -> str:
    return "\n\n".join(contexts)



def normalised(text: str) -> str:
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
            sim = Levenshtein.normalized_similarity(normalised(claim), normalised(verdicts[j].claim))
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


#: What the claims of a text are when the ``extract_claims`` step returns none (see the module docstring).
FALLBACK_CLAIMS = ("sentences", "checkable", "checkable-learned")
#: The claim sources that set units aside: the rules decide talk, or the learned classifier does.
CHECKABLE_SOURCES = ("checkable", "checkable-learned")


def units_checked(text: str, source: str, questions: str = "classifier") -> tuple[list[str], list[dict[str, str]]]:
    """``checkable_claims`` of ``text`` with talk decided as ``source`` (``CHECKABLE_SOURCES``) says: by the
    rules, or by the shipped talk classifier (``judges.lm.talk``), which decides questions alone or with the
    rules as ``questions`` says (``judges.data.claim_units.QUESTIONS``)."""
    if source == "checkable-learned":
        return checkable_claims(text, shipped_talk_classifier().checkable, questions)
    return checkable_claims(text)


def checked_unclaimed_score(owner: str, value: Any) -> float:
    """``value`` as the score of a text with nothing checkable: a number in [0, 1], else ValueError naming
    ``owner`` and the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{owner}: unclaimed_score must be in [0, 1], got {value!r}")
    return float(value)


class Claims(NamedTuple):
    claims: list[str]
    source: str  #: "extracted", "sentences", "checkable" or "checkable-learned"
    set_aside: list[dict[str, str]]  #: the units the "checkable" fallback left unchecked: {"sentence", "kind"}

    @property
    def unclaimed(self) -> bool:
        """The checkable fallback found nothing to check (``nothing_checkable``)."""
        return self.source in CHECKABLE_SOURCES and not self.claims

    def fields(self, prefix: str = "") -> dict[str, Any]:
        """``{prefix + "set_aside": ...}`` when the checkable fallback gave the claims, else {} (a result is as
        it always was when the LM's claims or the sentences are judged)."""
        return {prefix + "set_aside": self.set_aside} if self.source in CHECKABLE_SOURCES else {}


class ClaimJudge(Judge):
    """Judges built from ``extract_claims`` and ``verify`` share these two steps, and the policy for a text
    of which the LM extracts no claim (``fallback_claims``, ``unclaimed_score``: the module docstring)."""

    #: Judges saved before the policy existed fell back to the sentences.
    saved_before: ClassVar[dict[str, Any]] = {"fallback_claims": "sentences", "unclaimed_score": 0.0}

    def __init__(self, *, lm: Any = None, adapter: Any = None, use_logprobs: bool = False,
                 fallback_claims: str = "sentences", unclaimed_score: float = 0.0):
        super().__init__(lm=lm, adapter=adapter, use_logprobs=use_logprobs)
        if fallback_claims not in FALLBACK_CLAIMS:
            raise ValueError(f"{self.name}: fallback_claims={fallback_claims!r} is not one of {list(FALLBACK_CLAIMS)}")
        self.fallback_claims = fallback_claims
        self.unclaimed_score = checked_unclaimed_score(self.name, unclaimed_score)
        self.extract_claims = dspy.Predict(ExtractClaims)
        self.verify = dspy.Predict(VerifyClaims)

    def model_identity(self) -> dict[str, Any]:
        """The learned talk classifier's weights, when the fallback uses it (a run file then refuses to resume
        with other weights)."""
        identity = super().model_identity()
        if self.fallback_claims == "checkable-learned":
            identity["talk_classifier"] = talk_identity()
        return identity

    def claims_of(self, text: str, question: str | None = None) -> Claims:
        sentences = split_sentences(text)
        # A claim list longer than a few per sentence is a small model repeating itself.
        with output_constraints(claims={"maxItems": min(16, 3 * max(len(sentences), 1))}):
            extracted = self.extract_claims(question=question or "", text=text).claims
        claims = list(dict.fromkeys(c.strip() for c in extracted if c and c.strip()))
        if claims:
            return Claims(claims, "extracted", [])
        if self.fallback_claims in CHECKABLE_SOURCES:
            checkable, set_aside = units_checked(text, self.fallback_claims)
            return Claims(checkable, self.fallback_claims, set_aside)
        return Claims(sentences, "sentences", [])

    def supported_result(self, found: Claims, context: str) -> dspy.Prediction:
        """The share of ``found``'s claims that ``context`` supports, with the claims, their verdicts and where
        they came from; ``unclaimed_score`` without a verify call when the fallback found nothing checkable."""
        if found.unclaimed:
            return dspy.Prediction(score=self.unclaimed_score, claims=[], claims_source=found.source, verdicts=[],
                                   unverified=[], nothing_checkable=True, **found.fields())
        rows, unverified = self.verify_claims(found.claims, context)
        return dspy.Prediction(score=self.supported_share(rows), claims=found.claims, claims_source=found.source,
                               verdicts=rows, unverified=unverified, **found.fields(),
                               **self.unverified_degraded(unverified, found.claims))

    def verify_claims(self, claims: list[str], context: str) -> tuple[list[dict[str, Any]], list[int]]:
        if not claims:
            return [], []
        with output_constraints(verdicts={"minItems": len(claims), "maxItems": len(claims)}):
            out = self.verify(context=context, claims=claims, config=self.verdict_config())
        verdicts = list(out.verdicts)
        probabilities = verdict_probabilities(out.get("logprobs"), "supported") if self.use_logprobs else None
        rows, unverified = align_verdicts(
            claims, verdicts, probabilities if probabilities and len(probabilities) == len(verdicts) else None)
        sentences = split_sentences(context) or [context]
        for row in rows:
            if not row["supported"] and context.strip():
                row["evidence"] = best_sentence(context, row["claim"], sentences)
                row["contrast"] = next(iter(contrasts(row["claim"], row["evidence"])), None)
        return rows, unverified

    @staticmethod
    def unverified_degraded(unverified: list[int], claims: list[str]) -> dict[str, str]:
        """``{"degraded": why}`` when the verify step returned no verdict for some claims (they count as not
        supported, so the score comes from fewer verdicts than designed); else {}."""
        if not unverified:
            return {}
        return {"degraded": f"verify: no verdict for {len(unverified)} of {len(claims)} claims (counted as not "
                            f"supported): " + " | ".join(claims[i] for i in unverified)[:500]}

    @staticmethod
    def supported_share(rows: list[dict[str, Any]]) -> float:
        """Mean support: P(supported) where log-probabilities gave one, else the 0/1 verdict."""
        return sum(r.get("probability", r["supported"]) for r in rows) / len(rows) if rows else 0.0

    def feedback(self, result: dspy.Prediction) -> str:
        unsupported = [r for r in result.get("verdicts", []) if not r["supported"]]
        text = f"{self.name} = {result.score:.2f}"
        if result.get("nothing_checkable"):
            text += unclaimed_feedback(self.unclaimed_score, result.get("unclaimed_shares", ()))
        if unsupported:
            text += "; claims not supported: " + " | ".join(claim_feedback(r) for r in unsupported)
        return text + set_aside_feedback(result)


def unclaimed_feedback(unclaimed_score: float, shares: Any = ()) -> str:
    """What the feedback says of a result with nothing checkable; ``shares`` names the parts of the score
    (precision, recall, F1) that took ``unclaimed_score`` when not all of it did."""
    which = " and ".join(shares) + " " if shares else ""
    return f" (nothing checkable: {which}scored unclaimed_score={unclaimed_score:g})"


def set_aside_feedback(result: Any) -> str:
    """The units a checkable-claims step left unchecked (``set_aside``, and a reference's
    ``reference_set_aside``), each with its kind, as the feedback lists them; "" when there are none."""
    text = ""
    for key, where in (("set_aside", ""), ("reference_set_aside", " from the reference")):
        if result.get(key):
            text += f"; set aside{where}, not checked: " + " | ".join(
                f"{u['sentence']!r} ({u['kind']})" for u in result.get(key))
    return text


def claim_feedback(row: dict[str, Any]) -> str:
    """One unsupported claim as the feedback shows it: the claim, the judge's reason, the closest evidence
    sentence and, where that sentence puts a detail otherwise, the claim as it does."""
    notes = [f"the judge: {row['reason']}"] if row.get("reason") else []
    if row.get("evidence"):
        notes.append(f"closest evidence: {row['evidence']!r}" +
                     (f", which says {row['contrast']!r}" if row.get("contrast") else ""))
    return f"{row['claim']!r}" + (f" ({'; '.join(notes)})" if notes else "")


class EmbeddingsMixin:
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
