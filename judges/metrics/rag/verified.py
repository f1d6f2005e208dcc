"""Faithfulness checked by a trained verifier instead of an LM's verdicts (Ragas: ``FaithfulnesswithHHEM``).

    FaithfulnessWithVerifier().score(sample)                    # the shipped combination over the verifier's signals
    FaithfulnessWithVerifier(aggregate="mean").score(sample)    # the verifier's mean over the sentences, raw
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

    score              by ``aggregate``: "combined" (the default where it fits: sentence claims and the shipped
                       float32 verifier) the shipped combination's probability; "mean" (the default elsewhere) the mean
                       claim probability, that is the expected share of supported claims (AlignScore's and
                       SummaC's aggregation); "share" supported claims / claims (Ragas's formula); "weakest"
                       the lowest claim probability
    combination        with "combined": its inputs, by name (below)
    supported_share    supported claims / claims, whatever ``aggregate`` is
    weakest            the lowest claim probability (one invented sentence among grounded ones shows here)
    mean_probability   the mean claim probability

The combination (``COMBINATION``, a logistic model fitted on public labels only: BEGIN WoW, Q2, SummEval and
a dialogue set written for the project, plus made contrast pairs) reads the verifier's mean and weakest claim
over the sentences; its mean over the units a learned classifier keeps as checkable (``judges.lm.talk``), the
share it sets aside and whether nothing was checkable; the share of the response's names and numbers found in
the units the verifier read its sentences against (the file's ``words_read``; a name read without its possessive or
contraction ending, its ``name_endings``; found as a whole word or number, or anywhere, its ``specifics_match``):
a distractor in another context, or outside the unit the verifier read, is not read. The share of its word pairs
found there is computed too, and the shipped file no longer reads it: a copy with one fact changed shares more word
pairs than a faithful paraphrase, and a distractor sharing a swapped claim's words added more. Its
probability is capped by the weakest claim the classifier keeps (times min(1, P / 0.5)), so that overlap cannot
lift a claim the verifier rejects, while talk does not cap it. A unit the classifier sets aside is checked after
all when it repeats the evidence, as far as the file's ``talk_echo`` says; a question the rules read holds no
claim, and is set aside whatever the classifier says, as far as its ``questions`` says. Why it is the default, and
where it loses, is in docs/verifier.md; how it was chosen and decided is in docs/verifier-log.md ("A shipped
combination", rounds 5 to 15).

Language: the shipped verifier knows English only. On a response or evidence in another language
(``judges.data.language.detect_language``) ``multilingual_verifier`` scores it when given; without one the
item is not pretended: score 0.0 with ``undefined_reason`` and ``out_of_language`` set.

Owns: the metric. Must not load models itself (``judges.lm.verifier.resolve_verifier`` does).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path
from typing import Any, ClassVar

import dspy

from judges.data.claim_units import QUESTIONS
from judges.data.contrasts import frame_echo
from judges.data.language import detect_language, split_sentences
from judges.lm.talk import talk_identity
from judges.lm.verifier import Verifier, resolve_verifier, verifier_identity
from judges.metrics.grounding import NAME_ENDINGS, SPECIFICS_MATCH, bigram_share, specifics_share
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
AGGREGATES = ("combined", "mean", "share", "weakest")
#: The shipped combination (``aggregate="combined"``): its inputs, their standardisation, the logistic
#: coefficients and the gate, fitted on public labels by experiments/combination_fresh.py.
COMBINATION = Path(__file__).resolve().parents[2] / "lm" / "weights" / "faithfulness-combination.json"
#: What the combination's word signals (specifics supported, bigram support) read, named by its file's
#: ``words_read`` ("evidence" when absent): the whole contexts, or the units the verifier read.
WORDS_READ = ("evidence", "units")
#: The inputs ``combination_inputs`` computes: a combination file may read any of them.
COMBINATION_INPUTS = ("verifier_mean", "verifier_weakest", "learned_checkable_mean", "learned_checkable_weakest",
                      "learned_set_aside_share", "learned_nothing_checkable", "specifics_supported", "bigram_support")


@functools.lru_cache(maxsize=1)
def shipped_combination() -> dict[str, Any]:
    found = json.loads(COMBINATION.read_text(encoding="utf-8"))
    if found.get("words_read", "evidence") not in WORDS_READ:
        raise ValueError(f"faithfulness_with_verifier: {COMBINATION} says words_read={found['words_read']!r}, not one "
                         f"of {list(WORDS_READ)}")
    if found.get("name_endings", "keep") not in NAME_ENDINGS:
        raise ValueError(f"faithfulness_with_verifier: {COMBINATION} says name_endings={found['name_endings']!r}, "
                         f"not one of {list(NAME_ENDINGS)}")
    if found.get("specifics_match", "substring") not in SPECIFICS_MATCH:
        raise ValueError(f"faithfulness_with_verifier: {COMBINATION} says specifics_match="
                         f"{found['specifics_match']!r}, not one of {list(SPECIFICS_MATCH)}")
    checked_talk_echo(found.get("talk_echo"), f"{COMBINATION} says")
    if found.get("questions", "classifier") not in QUESTIONS:
        raise ValueError(f"faithfulness_with_verifier: {COMBINATION} says questions={found['questions']!r}, not one "
                         f"of {list(QUESTIONS)}")
    missing = [key for key in ("inputs", "mean", "scale", "coef", "intercept") if key not in found]
    if missing:
        raise ValueError(f"faithfulness_with_verifier: {COMBINATION} has no {missing}")
    unknown = [name for name in found["inputs"] if name not in COMBINATION_INPUTS]
    if unknown or len(set(found["inputs"])) < len(found["inputs"]):
        raise ValueError(f"faithfulness_with_verifier: {COMBINATION} names inputs {unknown or found['inputs']}: "
                         f"{'not among ' + str(list(COMBINATION_INPUTS)) if unknown else 'one twice'}")
    gate = found.get("gate")
    if gate is not None and (gate.split(" / ")[0] not in COMBINATION_INPUTS or not gate.endswith(" / 0.5")):
        raise ValueError(f"faithfulness_with_verifier: {COMBINATION} says gate={gate!r}, not '<input> / 0.5' "
                         f"with an input among {list(COMBINATION_INPUTS)}")
    if not len(found["inputs"]) == len(found["mean"]) == len(found["scale"]) == len(found["coef"]):
        raise ValueError(f"faithfulness_with_verifier: {COMBINATION} gives {len(found['inputs'])} inputs but "
                         f"{len(found['mean'])} means, {len(found['scale'])} scales, {len(found['coef'])} coefficients")
    return found | {"sha256": hashlib.sha256(COMBINATION.read_bytes()).hexdigest()}


def checked_talk_echo(value: Any, where: str) -> float | None:
    """``value`` as the combination's ``talk_echo``: None, or a share in (0, 1]; else ValueError saying ``where``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0):
        raise ValueError(f"faithfulness_with_verifier: {where} talk_echo={value!r}, not a share in (0, 1]")
    return value


def combined_probability(inputs: dict[str, float], combination: dict[str, Any]) -> float:
    """The combination's probability that the response is faithful: a logistic model over the standardised
    inputs, times min(1, weakest claim / 0.5) when gated ("<input> / 0.5" names the weakest claim it reads), so
    overlap cannot lift a claim the verifier rejects."""
    z = sum(c * (inputs[name] - m) / s for name, m, s, c in zip(
        combination["inputs"], combination["mean"], combination["scale"], combination["coef"]))
    p = 1.0 / (1.0 + math.exp(-(z + combination["intercept"])))
    gate = combination.get("gate")
    return p * min(1.0, inputs[gate.split(" / ")[0]] / 0.5) if gate else p


class FaithfulnessWithVerifier(VerifierStep, Judge):
    """How faithful the response is to the retrieved contexts, by a trained verifier: as built, the shipped
    combination of its claims' probabilities, the talk it sets aside and the names and numbers found (``aggregate=
    "combined"``); ``"mean"`` the expected share of supported claims, ``"share"`` the share at ``threshold``
    (Ragas's formula), ``"weakest"`` the weakest claim."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "retrieved_contexts")
    needs_verifier: ClassVar[bool] = True
    #: No LM as built by default (claims are its sentences); an instance with ``claims="lm"`` needs one.
    needs_lm: ClassVar[bool] = False
    #: "share" was the score before the mean; no reply was set aside before ``claims="checkable"``.
    saved_before: ClassVar[dict[str, Any]] = {"aggregate": "share", "unclaimed_score": 0.0}

    def __init__(self, *, verifier: str | None = None, supported_label: str | int | None = None,
                 claims: str = "sentences", threshold: float = 0.5, aggregate: str | None = None,
                 multilingual_verifier: str | None = None, multilingual_supported_label: str | int | None = None,
                 unclaimed_score: float = 0.0, lm: Any = None, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        if claims not in CLAIM_SOURCES:
            raise ValueError(f"faithfulness_with_verifier: claims={claims!r} is not one of {list(CLAIM_SOURCES)}")
        self.unclaimed_score = checked_unclaimed_score("faithfulness_with_verifier", unclaimed_score)
        if aggregate is not None and aggregate not in AGGREGATES:
            raise ValueError(f"faithfulness_with_verifier: aggregate={aggregate!r} is not one of {list(AGGREGATES)}")
        self._set_verifier(verifier, supported_label, threshold, multilingual_verifier, multilingual_supported_label)
        # The combination was fitted on the shipped float32 verifier's probabilities of the response's sentences
        # (int8 moves a probability by up to 0.64).
        fits = claims == "sentences" and verifier in (None, "embedded")
        if aggregate == "combined" and not fits:
            raise ValueError(f"faithfulness_with_verifier: aggregate='combined' needs claims='sentences' and the "
                             f"shipped float32 verifier (got claims={claims!r}, verifier={verifier!r}); choose 'mean', "
                             "'share' or 'weakest'")
        #: What the score is: ``aggregate`` as given, or for None the combination where it fits and the mean
        #: elsewhere (kept resolved, so a saved judge and a run file name the score they hold).
        self.aggregate = aggregate or ("combined" if fits else "mean")
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
        if self.aggregate == "combined" and verifier is self.model():
            combination = shipped_combination()
            inputs, set_aside = self.combination_inputs(verifier, response, retrieved_contexts, checked,
                                                        words_read=combination.get("words_read", "evidence"),
                                                        name_endings=combination.get("name_endings", "keep"),
                                                        specifics_match=combination.get("specifics_match", "substring"),
                                                        talk_echo=combination.get("talk_echo"),
                                                        questions=combination.get("questions", "classifier"))
            return dspy.Prediction(score=combined_probability(inputs, combination), supported_share=share,
                                   claims=claims, claims_source=source, set_aside=set_aside, combination=inputs,
                                   **checked)
        score = {"mean": checked["mean_probability"], "share": share, "weakest": checked["weakest"]}[self.raw_aggregate]
        return dspy.Prediction(score=score, supported_share=share, claims=claims, claims_source=source,
                               set_aside=set_aside, **checked)

    @property
    def raw_aggregate(self) -> str:
        """The aggregate of the claims' probabilities scored where the combination is not: with "combined",
        the mean (another language's verifier, which the combination was not fitted on)."""
        return "mean" if self.aggregate == "combined" else self.aggregate

    def combination_inputs(self, verifier: Verifier, response: str, contexts: list[str], checked: dict[str, Any],
                           words_read: str = "evidence", name_endings: str = "keep",
                           specifics_match: str = "substring", talk_echo: float | None = None,
                           questions: str = "classifier") -> tuple[dict[str, float], list[dict[str, str]]]:
        """Every input a combination file may read (``COMBINATION_INPUTS``) and the units its talk input set
        aside: the verifier over the sentences (``checked``), over the checkable units the learned classifier
        keeps (1.0 when it keeps none), and the share of the response's names and numbers, and of its word pairs,
        found in the contexts (``words_read="evidence"``) or only in the units the verifier read each sentence against
        (``"units"``: a distractor in another context or window, sharing a claim's words, does not lift it).
        ``name_endings`` says how a name's possessive or contraction ending is read ("keep": as written, the file's
        default when it names none; ``judges.metrics.grounding.NAME_ENDINGS``); ``specifics_match`` whether a name
        or number is found only as a whole word or number ("substring": anywhere, the file's default when it names
        none; ``judges.metrics.grounding.SPECIFICS_MATCH``). With ``talk_echo`` a unit the classifier sets aside is
        checked after all, whole, when it is no question and the contexts hold at least that share of its frame words
        (``judges.data.contrasts.frame_echo``): a copy of the evidence with one fact changed is a claim, however
        the classifier reads it (None, the file's default when it names none: the classifier decides alone). With
        ``questions="rules"`` a unit the rules read as a question holding no claim is set aside whatever the classifier
        says ("classifier", the file's default when it names none: the classifier decides questions too)."""
        if words_read not in WORDS_READ:
            raise ValueError(f"faithfulness_with_verifier: the combination's words_read={words_read!r} is not one of "
                             f"{list(WORDS_READ)}")
        kept, set_aside = units_checked(response, "checkable-learned", questions)
        if talk_echo is not None:
            checked_talk_echo(talk_echo, "the combination's")
            joined = "\n".join(contexts)
            echoes = [u for u in set_aside if u["kind"] != "question" and not u["sentence"].rstrip("\"')").endswith("?")
                      and frame_echo(u["sentence"], joined) >= talk_echo]
            kept, set_aside = kept + [u["sentence"] for u in echoes], [u for u in set_aside if u not in echoes]
        # A kept unit that is a whole sentence was verified already: each claim's row depends on it alone.
        rows = {row["claim"]: row for row in checked["verdicts"]}
        fresh = [claim for claim in dict.fromkeys(kept) if claim not in rows]
        if fresh:
            rows |= {row["claim"]: row for row in self.verify_claims(verifier, fresh, contexts)["verdicts"]}
        kept_p = [rows[claim]["probability"] for claim in kept] or [1.0]
        learned = {"mean_probability": sum(kept_p) / len(kept_p), "weakest": min(kept_p)}
        evidence = ("\n".join(contexts) if words_read == "evidence"
                    else "\n".join(dict.fromkeys(row["chunk"] for row in checked["verdicts"])))
        return {"verifier_mean": checked["mean_probability"], "verifier_weakest": checked["weakest"],
                "learned_checkable_mean": learned["mean_probability"], "learned_checkable_weakest": learned["weakest"],
                "learned_set_aside_share": len(set_aside) / max(len(set_aside) + len(kept), 1),
                "learned_nothing_checkable": float(not kept),
                "specifics_supported": specifics_share(response, evidence, name_endings, specifics_match),
                "bigram_support": bigram_share(response, evidence)}, set_aside

    def model_identity(self) -> dict[str, Any]:
        identity = super().model_identity()
        if self.aggregate == "combined":  # a run file refuses to resume once the shipped combination changed
            identity["combination"] = "sha256:" + shipped_combination()["sha256"]
        if self.aggregate == "combined" or self.claims == "checkable-learned":
            identity["talk_classifier"] = talk_identity()
        return identity

    def feedback(self, result: dspy.Prediction) -> str:
        text = f"{self.name} = {result.score:.2f}"
        if result.get("undefined_reason"):
            return f"{text} ({result.undefined_reason})"
        aside = set_aside_feedback(result)
        if result.get("nothing_checkable"):
            return text + unclaimed_feedback(self.unclaimed_score) + aside
        rows = result.verdicts
        if result.get("combination"):
            text += " (combined: " + ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in result.combination.items())
            talk = " | ".join(f"{u['sentence']!r} ({u['kind']})" for u in result.get("set_aside") or [])
            return (text + f"; {sum(r['supported'] for r in rows)} of {len(rows)} sentences at P >= {self.threshold:g})"
                    + unsupported_feedback(rows) + (f"; read as talk, not capping the score: {talk}" if talk else ""))
        return (text + f" ({self.raw_aggregate}; {sum(r['supported'] for r in rows)} of {len(rows)} claims at "
                f"P >= {self.threshold:g})" + unsupported_feedback(rows) + f"; weakest claim P={result.weakest:.2f}"
                + aside)


FaithfulnesswithHHEM = FaithfulnessWithVerifier
