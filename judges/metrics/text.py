"""Text and string metrics between ``response`` and ``reference``: no LM, built on sacrebleu, rouge-score
and rapidfuzz. Every score is in [0, 1]. Chinese and Japanese are tokenised one character per token
(``judges.data.language``), so CJK text is scored rather than silently dropped.

Empty strings are scored, not refused (as Ragas does), each metric by the rule in its docstring. Where
the *reference* is empty there is nothing to compare against: the score follows the rule but carries an
``undefined_reason``, so ``evaluate`` leaves it out of the metric's mean and counts it as undefined.

A reference given as a list of acceptable alternatives is scored against the best of them: BLEU and chrF
as sacrebleu's multi-reference scores, ROUGE as rouge-score's ``score_multi`` (the alternative with the best
F-measure), exact match, presence and similarity as the maximum; ``matched_reference`` names the winner.

Must not call an LM or an embedder.
"""

from __future__ import annotations

import functools
import unicodedata
from enum import Enum
from typing import ClassVar

import dspy

from judges.data.language import Tokenizer, has_cjk, tokenize
from judges.metrics.base import InputTooLargeError, Metric


def _check_choice(metric: str, parameter: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{metric}: {parameter}={value!r} is not one of {sorted(choices)}")


def _check_positive(metric: str, parameter: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{metric}: {parameter} must be a positive int, got {value!r}")


class _ResponseVsReference(Metric):
    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference")
    allow_empty: ClassVar[tuple[str, ...]] = ("response", "reference")


def _flag_empty_reference(out: dspy.Prediction, sample) -> dspy.Prediction:
    """``out``, marked undefined when the sample's reference is empty (nothing to compare against)."""
    if not any(a.strip() for a in sample.reference_alternatives()):
        out["undefined_reason"] = "the reference is empty: nothing to compare against"
    return out


def _best_alternative(sample, score) -> dspy.Prediction:
    """The best of ``score(response, alternative)`` over the reference's alternatives, with the winner."""
    alternatives = sample.reference_alternatives() or [""]
    values = [score(sample.response, a) for a in alternatives]
    best = max(range(len(values)), key=values.__getitem__)
    out = dspy.Prediction(score=float(values[best]))
    if len(alternatives) > 1:
        out["matched_reference"] = alternatives[best]
    return _flag_empty_reference(out, sample)


class BleuScore(_ResponseVsReference):
    """Sentence BLEU (sacrebleu) of ``response`` against ``reference``, divided by 100.

    ``tokenize=None`` picks sacrebleu's ``13a`` for Latin-script text and CJK-aware tokens (a character
    per Han/kana token, punctuation kept) when either text holds Chinese or Japanese. Any sacrebleu
    tokenizer name can be given instead. ``effective_order`` (default on, as is usual for sentence BLEU)
    keeps short sentences from scoring 0 only for lacking 4-grams.

    Empty: an empty response or reference scores 0.0 (undefined when the reference is empty).
    """

    first_use_imports: ClassVar[tuple[str, ...]] = ("sacrebleu.metrics",)

    def __init__(self, *, tokenize: str | None = None, effective_order: bool = True, lowercase: bool = False):
        from sacrebleu.metrics import BLEU

        if tokenize is not None:
            _check_choice("bleu_score", "tokenize", tokenize, BLEU.TOKENIZERS)
        self.tokenize = tokenize
        self.effective_order = effective_order
        self.lowercase = lowercase
        options = dict(effective_order=effective_order, lowercase=lowercase)
        self._bleu = BLEU(tokenize=tokenize or "13a", **options)
        self._bleu_pretokenized = BLEU(tokenize="none", **options)

    def _score(self, sample) -> dspy.Prediction:
        hypothesis = sample.response
        references = [r for r in sample.reference_alternatives() if r.strip()]
        if not hypothesis.strip() or not references:
            return _flag_empty_reference(dspy.Prediction(score=0.0, precisions=[0.0] * 4, brevity_penalty=0.0), sample)
        if self.tokenize is None and (has_cjk(hypothesis) or any(has_cjk(r) for r in references)):
            hypothesis = " ".join(tokenize(hypothesis, lower=False, keep_punct=True))
            references = [" ".join(tokenize(r, lower=False, keep_punct=True)) for r in references]
            result = self._bleu_pretokenized.sentence_score(hypothesis, references)
        else:
            result = self._bleu.sentence_score(hypothesis, references)
        # sacrebleu's float arithmetic can give 100.00000000000004: clipped so a score is never above 1
        return dspy.Prediction(score=min(1.0, max(0.0, result.score / 100.0)),
                               precisions=[p / 100.0 for p in result.precisions], brevity_penalty=result.bp)


ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
ROUGE_MODES = ("precision", "recall", "fmeasure")


@functools.lru_cache(maxsize=8)
def _rouge_scorer(rouge_type: str, use_stemmer: bool):
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer([rouge_type], tokenizer=Tokenizer(stem=use_stemmer))


class RougeScore(_ResponseVsReference):
    """ROUGE-1/2/L (rouge-score) of ``response`` against ``reference``: precision, recall or F-measure.

    Defaults follow Ragas (``rougeL``, ``fmeasure``, ``use_stemmer=True``: "cats" matches "cat"). Tokens
    are lower-cased words of any script, and single characters for Chinese/Japanese; the Porter stemmer
    applies to ASCII words only. Ragas's tokenizer (rouge-score's default) keeps only ``[a-z0-9]``, so
    there Cyrillic, accented and CJK text scores 0; here it is scored. On ASCII text the two agree.

    Size guard: ROUGE-L fills a table of (response tokens x reference tokens) cells in pure Python (a 2 MB
    pair took 9.6 GB). Beyond ``max_lcs_cells`` (default 10,000,000, e.g. 3,000 x 3,000 tokens: about 3 s
    and 100 MB) the item fails with ``InputTooLargeError`` instead; ROUGE-1/2 are linear and unguarded.
    """

    first_use_imports: ClassVar[tuple[str, ...]] = ("rouge_score.rouge_scorer",)

    def __init__(self, *, rouge_type: str = "rougeL", mode: str = "fmeasure", use_stemmer: bool = True,
                 max_lcs_cells: int = 10_000_000):
        _check_choice("rouge_score", "rouge_type", rouge_type, ROUGE_TYPES)
        _check_choice("rouge_score", "mode", mode, ROUGE_MODES)
        _check_positive("rouge_score", "max_lcs_cells", max_lcs_cells)
        self.rouge_type = rouge_type
        self.mode = mode
        self.use_stemmer = bool(use_stemmer)
        self.max_lcs_cells = max_lcs_cells
        self._scorer = _rouge_scorer(rouge_type, self.use_stemmer)

    def _score(self, sample) -> dspy.Prediction:
        references = sample.reference_alternatives() or [""]
        for reference in references:
            if self.rouge_type == "rougeL" and len(reference) * len(sample.response) > self.max_lcs_cells:
                cells = len(tokenize(reference)) * len(tokenize(sample.response))  # chars bound tokens
                if cells > self.max_lcs_cells:
                    raise InputTooLargeError(f"rouge_score: ROUGE-L on {cells:,} token pairs is over max_lcs_cells="
                                             f"{self.max_lcs_cells:,}; raise it or use rouge1 / rouge2")
        result = self._scorer.score_multi(references, sample.response)[self.rouge_type]
        out = dspy.Prediction(
            score=float(getattr(result, self.mode)),
            precision=result.precision,
            recall=result.recall,
            fmeasure=result.fmeasure,
        )
        empty = [f for f, texts in (("reference", references), ("response", [sample.response]))
                 if not any(tokenize(t) for t in texts)]
        if empty:  # rouge-score gives 0 here; say why rather than pass it off as a real 0
            out["undefined_reason"] = f"the {' and the '.join(empty)} has no tokens; ROUGE is 0 by convention"
        return out


class ChrfScore(_ResponseVsReference):
    """Sentence chrF (sacrebleu; character n-grams, so any script works), divided by 100.
    ``word_order=2`` gives chrF++. Empty: an empty response or reference scores 0.0 (undefined when the
    reference is empty)."""

    first_use_imports: ClassVar[tuple[str, ...]] = ("sacrebleu.metrics",)

    def __init__(self, *, char_order: int = 6, word_order: int = 0, beta: int = 2):
        from sacrebleu.metrics import CHRF

        for name, value in (("char_order", char_order), ("beta", beta)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"chrf_score: {name} must be a positive int, got {value!r}")
        self.char_order, self.word_order, self.beta = char_order, word_order, beta
        self._chrf = CHRF(char_order=char_order, word_order=word_order, beta=beta)

    def _score(self, sample) -> dspy.Prediction:
        references = [r for r in sample.reference_alternatives() if r.strip()]
        if not sample.response.strip() or not references:
            return _flag_empty_reference(dspy.Prediction(score=0.0), sample)
        return dspy.Prediction(score=min(1.0, self._chrf.sentence_score(sample.response, references).score / 100.0))


class ExactMatch(_ResponseVsReference):
    """1.0 when ``response`` equals ``reference`` (optionally ignoring case and surrounding whitespace).
    Both are compared in Unicode's composed form (NFC): "é" typed as one character or as "e" and an accent
    is one letter. Empty: plain equality, so two empty strings match (1.0, undefined: the reference is empty)."""

    def __init__(self, *, ignore_case: bool = False, strip: bool = False):
        self.ignore_case = ignore_case
        self.strip = strip

    def _normalise(self, text: str) -> str:
        text = unicodedata.normalize("NFC", text)
        text = text.strip() if self.strip else text
        return text.casefold() if self.ignore_case else text

    def _score(self, sample) -> dspy.Prediction:
        return _best_alternative(sample, lambda response, reference: float(
            self._normalise(response) == self._normalise(reference)))


class StringPresence(_ResponseVsReference):
    """1.0 when ``reference`` occurs in ``response`` (optionally ignoring case). Empty: an empty reference
    occurs in every response (1.0, as in Ragas, but undefined); an empty response holds no non-empty
    reference (0.0)."""

    def __init__(self, *, ignore_case: bool = False):
        self.ignore_case = ignore_case

    def _score(self, sample) -> dspy.Prediction:
        def present(response: str, reference: str) -> float:
            if self.ignore_case:
                response, reference = response.casefold(), reference.casefold()
            return float(reference in response)

        return _best_alternative(sample, present)


class DistanceMeasure(str, Enum):
    LEVENSHTEIN = "levenshtein"
    HAMMING = "hamming"
    JARO = "jaro"
    JARO_WINKLER = "jaro_winkler"


def _similarity_function(measure: DistanceMeasure):
    from rapidfuzz.distance import Hamming, Jaro, JaroWinkler, Levenshtein

    return {
        DistanceMeasure.LEVENSHTEIN: Levenshtein.normalized_similarity,
        DistanceMeasure.HAMMING: Hamming.normalized_similarity,  # pads the shorter string
        DistanceMeasure.JARO: Jaro.normalized_similarity,
        DistanceMeasure.JARO_WINKLER: JaroWinkler.normalized_similarity,
    }[measure]


class NonLLMStringSimilarity(_ResponseVsReference):
    """Normalised string similarity (rapidfuzz) of ``response`` and ``reference``, character by character:
    Levenshtein (default), Hamming, Jaro or Jaro-Winkler. 1.0 means identical. Empty: rapidfuzz's rule,
    two empty strings are identical (1.0), an empty and a non-empty one share nothing (0.0); undefined
    when the reference is empty.

    Size guard: Levenshtein's time grows with the product of the lengths (two 2 MB strings: 160 s, holding
    the interpreter). A string longer than ``max_length`` characters (default 200,000: about 2 s at most)
    fails the item with ``InputTooLargeError``."""

    first_use_imports: ClassVar[tuple[str, ...]] = ("rapidfuzz.distance",)

    def __init__(self, *, distance_measure: DistanceMeasure | str = DistanceMeasure.LEVENSHTEIN,
                 max_length: int = 200_000):
        try:
            self.distance_measure = DistanceMeasure(distance_measure)
        except ValueError:
            raise ValueError(
                f"non_llm_string_similarity: distance_measure={distance_measure!r} is not one of "
                f"{[m.value for m in DistanceMeasure]}"
            ) from None
        _check_positive("non_llm_string_similarity", "max_length", max_length)
        self.max_length = max_length

    def similarity(self, a: str, b: str) -> float:
        if max(len(a), len(b)) > self.max_length:
            raise InputTooLargeError(f"non_llm_string_similarity: a string of {max(len(a), len(b)):,} characters "
                                     f"is over max_length={self.max_length:,}")
        return float(_similarity_function(self.distance_measure)(a, b))  # looked up: a metric pickles

    def _score(self, sample) -> dspy.Prediction:
        return _best_alternative(sample, self.similarity)
