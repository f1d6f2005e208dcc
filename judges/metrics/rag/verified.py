"""Faithfulness checked by a trained verifier instead of an LM's verdicts (Ragas: ``FaithfulnesswithHHEM``).

    FaithfulnessWithVerifier().score(sample)                    # response sentences, the shipped verifier
    FaithfulnessWithVerifier(claims="lm", lm="openai/gpt-4o-mini")   # claims from the LM's extract_claims step
    FaithfulnessWithVerifier(verifier="/models/hhem", supported_label="consistent")

Claims are the response's sentences (``claims="sentences"``, no LM at all), the checkable ones among them
(``claims="checkable"``, no LM: ``judges.data.claim_units`` sets aside questions, greetings, backchannels,
opinions and the speaker's own experiences, and checks the fact inside a hedge or a presupposing question; with
``claims="checkable-learned"`` a learned sentence classifier, ``judges.lm.talk``, decides what is talk), or
what the ``extract_claims`` step returns (``claims="lm"``, as in Faithfulness). Each claim takes its best
evidence chunk (``judges.lm.verifier``); P >= ``threshold`` counts as supported. With checkable claims
a response with nothing checkable scores ``unclaimed_score`` (``nothing_checkable`` says so), and the result
lists what was set aside and why (``set_aside``).

    score              by ``aggregate``: "mean" (the default) the mean claim probability, that is the expected
                       share of supported claims (AlignScore's and SummaC's aggregation); "share" supported
                       claims / claims (Ragas's formula); "weakest" the lowest claim probability
    supported_share    supported claims / claims, whatever ``aggregate`` is
    weakest            the lowest claim probability (one invented sentence among grounded ones shows here)
    mean_probability   the mean claim probability

Why the mean by default: a response has one or two sentences in dialogue, so the thresholded share takes
two or three values and ranks poorly against people's labels. The mean was chosen over the share and the
weakest claim on the train halves of the agreement table's sets (docs/verifier-log.md, "The mean as the
metric's score").

Language: the shipped verifier knows English only. On a response or evidence in another language
(``judges.data.language.detect_language``) ``multilingual_verifier`` scores it when given; without one the
item is not pretended: score 0.0 with ``undefined_reason`` and ``out_of_language`` set.

Owns: the metric. Must not load models itself (``judges.lm.verifier.resolve_verifier`` does).
"""

from __future__ import annotations

from typing import Any, ClassVar

import dspy

from judges.data.language import detect_language, split_sentences
from judges.lm.verifier import Verifier, resolve_verifier, verifier_identity
from judges.metrics.base import Judge
from judges.metrics.rag.claims import (
    CHECKABLE_SOURCES,
    ClaimJudge,
    ExtractClaims,
    checked_unclaimed_score,
    set_aside_feedback,
    unclaimed_feedback,
    units_checked,
)


class VerifierStep:
    """The verifier as a step of a metric (FaithfulnessWithVerifier, ResponseGroundedness and
    SummarizationScore with ``verifier=``): settings checked up front, the model resolved once per process,
    text in another language sent to ``multilingual_verifier`` or flagged. The metric keeps the settings as
    its own constructor parameters."""

    needs_verifier: bool = False
    verifier: str | None = None
    supported_label: str | int | None = None
    threshold: float = 0.5
    multilingual_verifier: str | None = None
    multilingual_supported_label: str | int | None = None

    def _set_verifier(self, verifier: str | None, supported_label: str | int | None, threshold: float,
                      multilingual_verifier: str | None = None,
                      multilingual_supported_label: str | int | None = None) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"{self.name}: threshold must be in [0, 1], got {threshold!r}")
        for name, value in (("verifier", verifier), ("multilingual_verifier", multilingual_verifier)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{self.name}: {name} must be None, 'embedded', 'embedded-int8' or a model folder "
                                f"path (a string), got {type(value).__name__}")
        if multilingual_verifier in ("embedded", "embedded-int8"):
            raise ValueError(f"{self.name}: multilingual_verifier={multilingual_verifier!r} is the shipped verifier, "
                             "which covers English only; name a multilingual model folder")
        self.verifier, self.supported_label, self.threshold = verifier, supported_label, float(threshold)
        self.multilingual_verifier, self.multilingual_supported_label = multilingual_verifier, multilingual_supported_label

    def model(self) -> Verifier:
        return resolve_verifier(self.verifier, supported_label=self.supported_label)

    def model_identity(self) -> dict[str, Any]:
        """The verifiers' weights and scoring settings (``verifier_identity``), when the metric uses one."""
        if not self.needs_verifier:
            return {}
        identity = {"verifier": verifier_identity(self.verifier)}
        if self.multilingual_verifier is not None:
            identity["multilingual_verifier"] = verifier_identity(self.multilingual_verifier)
        return identity

    def _verifier_for(self, language: str) -> Verifier | None:
        main = self.model()
        if not language or main.covers(language):
            return main
        if self.multilingual_verifier is not None:
            return resolve_verifier(self.multilingual_verifier, supported_label=self.multilingual_supported_label,
                                    languages=("*",))
        return None

    def verifier_for_text(self, texts: list[str]) -> Verifier | dict[str, Any]:
        """The verifier covering the language of ``texts`` (the shipped one for English, else
        ``multilingual_verifier``), or ``{"out_of_language": code, "undefined_reason": why}`` when none
        given covers it: the caller scores 0.0 and records why instead of pretending."""
        foreign = sorted({detect_language(text) for text in texts} - {"", "en"})
        verifier = self._verifier_for(foreign[0] if foreign else "en")
        if verifier is None:
            return {"out_of_language": foreign[0], "undefined_reason": (
                f"the text is in {foreign[0]!r}, which the verifier {self.model().name} does not cover "
                f"({', '.join(self.model().languages)}); give multilingual_verifier= to score it")}
        return verifier

    def verify_claims(self, verifier: Verifier, claims: list[str], evidence: list[str]) -> dict[str, Any]:
        """``{"verdicts", "weakest", "mean_probability", "verifier"}``: per claim the verifier's row (claim,
        probability, chunk, sentence, units_scored, opposite, opposite_probability, contradiction) plus
        ``supported`` (P >= threshold)."""
        rows = verifier.support(evidence, claims, cutoff=self.threshold)  # stopping early keeps this verdict exact
        for row in rows:
            row["supported"] = row["probability"] >= self.threshold
        probabilities = [row["probability"] for row in rows]
        return {"verdicts": rows, "weakest": min(probabilities),
                "mean_probability": sum(probabilities) / len(probabilities), "verifier": verifier.name}


def sentence_claims(text: str) -> list[str]:
    """The claims a verifier checks when no LM extracts them: the text's sentences (the whole text when it
    has none)."""
    return split_sentences(text) or [text.strip()]


def unsupported_feedback(verdicts: list[dict[str, Any]]) -> str:
    """The claims a verifier did not find supported, each with its probability and the evidence sentence it
    was judged against; where an evidence sentence contradicts it (``Verifier.check_contradictions``), that
    sentence and the claim as the sentence puts it; else the opposite the evidence prefers
    (``Verifier.check_opposites``) when there is one."""
    failed = [r for r in verdicts if not r["supported"]]
    if not failed:
        return ""

    def why(row: dict[str, Any]) -> str:
        contradiction = row.get("contradiction")
        if contradiction:
            return (f"contradicted by the evidence sentence {contradiction['sentence']!r}, which supports "
                    f"{contradiction['contrast']!r} instead, P={contradiction['probability']:.2f}")
        if row.get("opposite"):
            return (f"the evidence supports {row['opposite']!r} rather, P={row['opposite_probability']:.2f}; "
                    f"judged against {row['sentence']!r}")
        return f"judged against {row['sentence']!r}"

    return "; claims the evidence does not support: " + " | ".join(
        f"{r['claim']!r} (P={r['probability']:.2f}; {why(r)})" for r in failed)


#: Where FaithfulnessWithVerifier's claims come from (see the module docstring).
CLAIM_SOURCES = ("sentences", "checkable", "checkable-learned", "lm")
#: How FaithfulnessWithVerifier makes one score of its claims' probabilities (see the module docstring).
AGGREGATES = ("mean", "share", "weakest")


class FaithfulnessWithVerifier(VerifierStep, Judge):
    """Expected share of the response's claims a trained verifier finds supported by the retrieved contexts
    (``aggregate="share"``: the share at ``threshold``, Ragas's formula; ``"weakest"``: the weakest claim)."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "retrieved_contexts")
    needs_verifier: ClassVar[bool] = True
    #: No LM as built by default (claims are its sentences); an instance with ``claims="lm"`` needs one.
    needs_lm: ClassVar[bool] = False
    #: "share" was the score before the mean; no reply was set aside before ``claims="checkable"``.
    saved_before: ClassVar[dict[str, Any]] = {"aggregate": "share", "unclaimed_score": 0.0}

    def __init__(self, *, verifier: str | None = None, supported_label: str | int | None = None,
                 claims: str = "sentences", threshold: float = 0.5, aggregate: str = "mean",
                 multilingual_verifier: str | None = None, multilingual_supported_label: str | int | None = None,
                 unclaimed_score: float = 0.0, lm: Any = None, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        if claims not in CLAIM_SOURCES:
            raise ValueError(f"faithfulness_with_verifier: claims={claims!r} is not one of {list(CLAIM_SOURCES)}")
        self.unclaimed_score = checked_unclaimed_score("faithfulness_with_verifier", unclaimed_score)
        if aggregate not in AGGREGATES:
            raise ValueError(f"faithfulness_with_verifier: aggregate={aggregate!r} is not one of {list(AGGREGATES)}")
        self.aggregate = aggregate
        self._set_verifier(verifier, supported_label, threshold, multilingual_verifier, multilingual_supported_label)
        self.claims = claims
        self.needs_lm = claims == "lm"
        self.extract_claims = dspy.Predict(ExtractClaims)  # used with claims="lm" only

    claims_of = ClaimJudge.claims_of
    #: With ``claims="lm"``, a response the LM finds no claim in is judged by its sentences.
    fallback_claims: ClassVar[str] = "sentences"

    def _score(self, sample) -> dspy.Prediction:
        if not (sample.response or "").strip():
            return dspy.Prediction(score=float(self.output_floor), undefined_reason=(
                "the response is empty: nothing to judge; scored the floor without a model call"))
        if self.claims == "lm":
            return self.judged(**self._forward_inputs(sample))
        return self(**self._forward_inputs(sample))  # no LM: the verifier alone

    def forward(self, response: str, retrieved_contexts: list[str], user_input: str | None = None):
        verifier = self.verifier_for_text([response, *retrieved_contexts])
        if isinstance(verifier, dict):
            return dspy.Prediction(score=0.0, claims=[], verdicts=[], **verifier)
        set_aside: list[dict[str, str]] = []
        if self.claims == "lm":
            claims, source, set_aside = self.claims_of(response, user_input)
        elif self.claims in CHECKABLE_SOURCES:
            (claims, set_aside), source = units_checked(response, self.claims), self.claims
            if not claims:
                value = self.unclaimed_score
                return dspy.Prediction(score=value, supported_share=float(value >= self.threshold), claims=[],
                                       claims_source=source, verdicts=[], weakest=value, mean_probability=value,
                                       set_aside=set_aside, nothing_checkable=True, verifier=verifier.name)
        else:
            claims, source = sentence_claims(response), "sentences"
        checked = self.verify_claims(verifier, claims, retrieved_contexts)
        rows = checked["verdicts"]
        share = sum(r["supported"] for r in rows) / len(rows)
        score = {"mean": checked["mean_probability"], "share": share, "weakest": checked["weakest"]}[self.aggregate]
        return dspy.Prediction(score=score, supported_share=share, claims=claims, claims_source=source,
                               set_aside=set_aside, **checked)

    def feedback(self, result: dspy.Prediction) -> str:
        text = f"{self.name} = {result.score:.2f}"
        if result.get("undefined_reason"):
            return f"{text} ({result.undefined_reason})"
        aside = set_aside_feedback(result)
        if result.get("nothing_checkable"):
            return text + unclaimed_feedback(self.unclaimed_score) + aside
        rows = result.verdicts
        return (text + f" ({self.aggregate}; {sum(r['supported'] for r in rows)} of {len(rows)} claims at "
                f"P >= {self.threshold:g})" + unsupported_feedback(rows) + f"; weakest claim P={result.weakest:.2f}"
                + aside)


FaithfulnesswithHHEM = FaithfulnessWithVerifier
