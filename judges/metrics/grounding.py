"""Grounding signals without an LM: is the response backed by its evidence, beyond shared words?

Token overlap (the share of the response's words found in the evidence) is the strongest cheap baseline on
faithfulness data and the one a judge must beat. These four catch what it misses:

  metric                  score (1.0 = grounded)                              what overlap misses
  UnsupportedSpecifics    specifics (numbers, dates, names) found / specifics  "finished in 1899" against "in 1889": every
                                                                                word but one number overlaps
  WeakestSentenceSupport  min over response sentences of its token overlap      one invented sentence among grounded ones:
                                                                                the mean hides it, the minimum does not
  NovelBigramSupport      response word pairs found in the evidence / pairs     familiar words in a new combination ("the
                                                                                Rhine flows through Paris" from a text about both)
  EmbeddingAlignment      mean over response tokens of the best cosine with     a paraphrase ("purchased" for "bought")
                          an evidence token (BERTScore-style precision)          that shares no word

The evidence is ``retrieved_contexts`` joined. A response with nothing to check (no specific, no word
pair) scores 1.0 with an ``undefined_reason``. ``calibration.signals`` feeds the same functions to the
stacked calibrator.

Must not call an LM.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import dspy
import numpy as np

from judges.data.contrasts import DATE, MONTHS, NAME, NUMBER, STOP_CAPITALS, normalised
from judges.data.language import split_sentences, tokenize
from judges.lm.embeddings import resolve_embedder
from judges.metrics.base import Metric


#: How a name's ending is read: "strip" reads "Ferrin's" as Ferrin, "Drinks' Grangemoor" as two names, and "I'm"
#: as I (not a name); "keep" reads each as written, as the combination's weights before round 9 were fitted on.
NAME_ENDINGS = ("strip", "keep")
#: A possessive or contraction ending a capitalised word: 's, 'm, 'd, 've, 'll, 're, or a plural's bare '.
_ENDING = re.compile(r"(?:'(?:s|m|d|ve|ll|re)|(?<=s)')(?=\s|$)")
#: How a specific is found in the evidence: "whole" as a whole number or word (round 11), "substring" anywhere in
#: it, as the combination's weights before round 11 were fitted on.
SPECIFICS_MATCH = ("whole", "substring")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def specifics(text: str, name_endings: str = "strip", match: str = "whole") -> list[str]:
    """Numbers, dates and capitalised names (not sentence-initial) in ``text``: the details a response can
    get wrong while every other word matches its source. A name's possessive or contraction ending is read
    off (``name_endings="strip"``): "Ferrin's" names Ferrin, whom a source may name only as "Ferrin", and
    "I'm" names nobody. With ``match="whole"`` a lone capital letter (the "C" of "30 °C", an initial) is no
    name: it is found inside too many words to say anything."""
    if name_endings not in NAME_ENDINGS:
        raise ValueError(f"specifics: name_endings must be one of {list(NAME_ENDINGS)}, got {name_endings!r}")
    if match not in SPECIFICS_MATCH:
        raise ValueError(f"specifics: match must be one of {list(SPECIFICS_MATCH)}, got {match!r}")
    found = [m.group().rstrip(",") for m in NUMBER.finditer(text)]
    found += [m.group() for m in DATE.finditer(text)]
    for sentence in split_sentences(text) or [text]:
        for match_ in NAME.finditer(sentence):
            if match_.start() == 0:
                continue  # a sentence's first word is capitalised anyway
            names = _ENDING.split(match_.group()) if name_endings == "strip" else [match_.group()]
            for name in filter(None, (n.strip() for n in names)):
                if name in STOP_CAPITALS or re.fullmatch(MONTHS, name, re.IGNORECASE):
                    continue
                if match == "whole" and len(name) == 1:
                    continue
                found.append(name)
    return list(dict.fromkeys(found))


def _folded(text: str) -> str:
    """``normalised`` with thousands separators dropped first, so "2,500" reads as 2500, never as 2 and 500."""
    return normalised(_THOUSANDS.sub("", text))


def _found(specific: str, haystack: str, match: str) -> bool:
    """Is ``specific`` in the folded ``haystack``? "substring": anywhere, as before round 11. "whole": a
    number not inside a longer number ("12" is not in "120" or "12.5"; "-5" not in "10-5"), a name starting at a
    word's start and followed by one more letter at most, so that a plural's "s" still counts ("Roman" is in
    "Romans"; "Jones" is not in "Jonestown", but "Paul" is in "Paula")."""
    if match == "substring":
        return normalised(specific) in haystack
    needle = _folded(specific)
    number = needle.lstrip("+-")[:1].isdigit()
    before = r"(?<![\d.])" if number else r"(?<![^\W\d_])"
    after = r"(?!\d|\.\d)" if needle[-1:].isdigit() else r"(?![^\W\d_]{2})"
    return re.search(before + re.escape(needle) + after, haystack) is not None


def supported_specifics(response: str, evidence: str, name_endings: str = "strip", match: str = "whole",
                        ) -> tuple[list[str], list[str]]:
    """The response's specifics split into those the evidence contains (case-insensitive, numbers with or
    without thousands separators; ``match`` says whether a whole word or any substring counts) and those it
    does not."""
    haystack = _folded(evidence) if match == "whole" else normalised(evidence)
    found, missing = [], []
    for item in specifics(response, name_endings, match):
        (found if _found(item, haystack, match) else missing).append(item)
    return found, missing


def specifics_share(response: str, evidence: str, name_endings: str = "strip", match: str = "whole") -> float:
    """Share of the response's specifics found in the evidence (1.0 when it has none): the signal
    ``specifics_supported``, and an input of FaithfulnessWithVerifier's combination."""
    found, missing = supported_specifics(response, evidence, name_endings, match)
    return len(found) / (len(found) + len(missing)) if found or missing else 1.0


def token_support(text: str, evidence_tokens: set[str]) -> float:
    tokens = tokenize(text)
    return sum(t in evidence_tokens for t in tokens) / len(tokens) if tokens else 1.0


def bigrams(text: str) -> list[tuple[str, str]]:
    tokens = tokenize(text)
    return list(zip(tokens, tokens[1:]))


def sentence_supports(response: str, evidence: str) -> tuple[list[str], list[float]]:
    """The response's sentences and the token overlap of each with the evidence."""
    tokens = set(tokenize(evidence))
    sentences = split_sentences(response) or [response]
    return sentences, [token_support(s, tokens) for s in sentences]


def novel_bigrams(response: str, evidence: str) -> tuple[int, list[str]]:
    """How many word pairs the response has, and those the evidence does not."""
    pairs = bigrams(response)
    known = set(bigrams(evidence))
    return len(pairs), [" ".join(p) for p in pairs if p not in known]


def bigram_share(response: str, evidence: str) -> float:
    """Share of the response's word pairs found in the evidence, 1 - the novel bigram rate (1.0 with no pair):
    the signal ``bigram_support``, and an input of FaithfulnessWithVerifier's combination."""
    pairs, novel = novel_bigrams(response, evidence)
    return 1.0 - len(novel) / pairs if pairs else 1.0


def alignment(response: str, evidence: str, embedder: Any) -> float | None:
    """BERTScore-style precision: the mean over response tokens of the best cosine with an evidence token;
    None when the embedder gives no token embeddings or a side has no token."""
    vectors = getattr(embedder, "token_vectors", None)
    if vectors is None or not response or not evidence:
        return None
    left, right = vectors(response), vectors(evidence)
    if len(left) == 0 or len(right) == 0:
        return None
    return float(max(np.clip((left @ right.T).max(axis=1), -1.0, 1.0).mean(), 0.0))


class _GroundingMetric(Metric):
    required_fields: ClassVar[tuple[str, ...]] = ("response", "retrieved_contexts")

    @staticmethod
    def evidence(sample) -> str:
        return "\n".join(sample.retrieved_contexts)


class UnsupportedSpecifics(_GroundingMetric):
    """Share of the response's specifics (numbers, dates, capitalised names) that occur in the contexts;
    ``unsupported`` lists the others. No specific in the response: 1.0, undefined."""

    def _score(self, sample) -> dspy.Prediction:
        found, missing = supported_specifics(sample.response, self.evidence(sample))
        total = len(found) + len(missing)
        out = dspy.Prediction(score=len(found) / total if total else 1.0, supported=found, unsupported=missing)
        if not total:
            out["undefined_reason"] = "the response has no number, date or name to check"
        return out

    def feedback(self, result: dspy.Prediction) -> str:
        return (f"specifics supported {result.score:.2f}" +
                (f"; not in the sources: {', '.join(result.unsupported)}" if result.unsupported else ""))


class WeakestSentenceSupport(_GroundingMetric):
    """The lowest share of a response sentence's tokens found in the contexts (``sentence`` names it)."""

    def _score(self, sample) -> dspy.Prediction:
        sentences, supports = sentence_supports(sample.response, self.evidence(sample))
        weakest = int(np.argmin(supports))
        return dspy.Prediction(score=float(supports[weakest]), sentence=sentences[weakest], supports=supports)


class NovelBigramSupport(_GroundingMetric):
    """Share of the response's consecutive word pairs that occur in the contexts (1 - novel bigram rate).
    A one-word response has no pair: 1.0, undefined."""

    def _score(self, sample) -> dspy.Prediction:
        pairs, novel = novel_bigrams(sample.response, self.evidence(sample))
        out = dspy.Prediction(score=1.0 - len(novel) / pairs if pairs else 1.0, novel=novel[:20])
        if not pairs:
            out["undefined_reason"] = "the response has fewer than two words"
        return out


class EmbeddingAlignment(_GroundingMetric):
    """BERTScore-style precision with the configured embedder: for each response token, the best cosine
    with any context token, averaged. Needs a sentence-transformers embedder (token embeddings); the
    embedded all-MiniLM-L6-v2 is the default."""

    needs_embeddings: ClassVar[bool] = True

    def __init__(self, *, embeddings: Any = None):
        self.embeddings = embeddings

    def _score(self, sample) -> dspy.Prediction:
        embedder = resolve_embedder(self.embeddings)
        if getattr(embedder, "token_vectors", None) is None:
            raise ValueError("embedding_alignment: the embedder gives no token embeddings; use a "
                             "sentence-transformers model (the default, or a model folder)")
        value = alignment(sample.response, self.evidence(sample), embedder)
        if value is None:
            return dspy.Prediction(score=0.0, undefined_reason="no token to align")
        return dspy.Prediction(score=value)
