"""Where a claim and an evidence sentence say the same thing but one detail differs: the specifics a text
names, and the claim as the sentence would put it (its contrasts).

    specific_spans("It opened on March 4, 1962 in Tarnby.")
    # [(13, 20, 'date'), (22, 26, 'number'), (30, 36, 'name')]
    contrasts("Mount Everest is 8,856 metres tall.", "Mount Everest is 8,849 metres tall.")
    # ['Mount Everest is 8,849 metres tall.']

A sentence is a **contrast candidate** for a claim when it shares the claim's frame (at least half of the claim's
content words outside its specifics and direction words, ``FRAME_SHARE``, and two of them) and differs in one
detail: a specific of the claim (a number, a date, a capitalised name) the sentence lacks where the sentence has one
of the same kind the claim lacks, or a direction word the sentence says the other way round
(``opposites.direction_contrasts``). Each contrast is the claim with that one detail as the sentence has it. The
verifier scores a claim against its contrasts (``judges.lm.verifier.opposites.check_against_contradictions``): a
sentence that supports the contrast and prefers it to the claim contradicts the claim, whatever else the evidence
holds.

Why the frame: a sentence about something else with another name or number in it ("Everest lies between
Nepal and China") says nothing against the claim, and scoring contrasts against it would cost model calls
and invent contradictions.

Owns: the specifics' patterns (``judges.metrics.grounding`` counts them too) and the contrasts. Must not call a
model.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any

from judges.data import nouns
from judges.data.language import split_sentences, tokenize
from judges.data.opposites import ANTONYMS, direction_contrasts

MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|"
           "apr|jun|jul|aug|sep|sept|oct|nov|dec")
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?%?")
DATE = re.compile(rf"\b(?:{MONTHS})\.?\s+\d{{1,2}}\b|\b\d{{1,2}}\s+(?:{MONTHS})\b", re.IGNORECASE)
NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")
STOP_CAPITALS = {"I", "The", "A", "An", "It", "This", "That", "He", "She", "They", "We", "You", "In", "On", "At"}
#: Words a sentence opens with that answer, react or lead into a clause rather than name ("Yes, he was ...",
#: "If I've got it right, ..."), and that the lexicon below does not list: never an opening name.
OPENING_WORDS = frozenset(
    "yes yeah yep yup no nope well so oh ok okay sure um uh hmm ah wow haha hey hi hello indeed really right "
    "actually but however also anyway besides thanks true exactly absolutely definitely maybe perhaps probably "
    "interesting cool great nice if although though because since unless whether while once".split())
#: ``check_swaps`` values: off, every check (round 1), the opening name and same-subject support (round 2), the
#: opening name and spelled numbers read as numbers (round 3), and those with a noun swapped for one that may not
#: stand for it (round 5).
SWAP_CHECKS = (False, True, "names", "names-numbers", "names-numbers-nouns")
#: The ``check_swaps`` values under which another unit's support stops a contradiction's cap only when that unit
#: is about the claim's subject (``judges.lm.verifier.opposites.about_the_same``).
SAME_SUBJECT = (True, "names")
#: A sentence shares a claim's frame when it holds at least this share of the claim's content words.
FRAME_SHARE = 0.5
#: At most this many contrasts a (claim, sentence).
MAX_CONTRASTS = 4
#: Words too common to make a frame (articles, auxiliaries, prepositions, pronouns).
_FUNCTION_WORDS = frozenset(
    "a an the is are was were be been being am has have had do does did of in on at to for from by with as and "
    "or but not no it its this that these those he she they we you i his her their our my your them us him "
    "there here which who whom what when where will would can could shall should may might must than then so "
    "also into onto over under about after before".split())


def specific_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, kind)`` of each specific in ``text``, kind "date", "number", "weekday" or "name", none
    inside another: dates first, then numbers outside them, then capitalised names that do not open their
    sentence (a sentence's first word is capitalised anyway), are not a stop word and not a month or day."""
    spans: list[tuple[int, int, str]] = [(m.start(), m.end(), "date") for m in DATE.finditer(text)]
    taken = lambda start, end: any(s < end and start < e for s, e, _ in spans)  # noqa: E731
    for m in NUMBER.finditer(text):
        end = m.end() - (1 if m.group().endswith(",") else 0)
        if not taken(m.start(), end):
            spans.append((m.start(), end, "number"))
    for m in re.finditer(rf"\b(?:{_WEEKDAYS})\b", text, re.IGNORECASE):
        spans.append((m.start(), m.end(), "weekday"))
    offset = 0
    for sentence in split_sentences(text) or [text]:
        at = text.find(sentence, offset)
        at = offset if at < 0 else at
        offset = at + len(sentence)
        for match in NAME.finditer(sentence):
            name = match.group()
            if match.start() == 0 or name in STOP_CAPITALS or re.fullmatch(f"{MONTHS}|{_WEEKDAYS}", name, re.I):
                continue
            start, end = at + match.start(), at + match.end()
            if not taken(start, end):
                spans.append((start, end, "name"))
    return sorted(spans)


def normalised(text: str) -> str:
    """Case, spaces and thousands separators folded: how a specific is looked for in another text."""
    return re.sub(r"[\s,]+", " ", text.casefold()).strip()


@functools.lru_cache(maxsize=4096)
def frame_words(text: str) -> frozenset[str]:
    """The content words of ``text`` outside its specifics and direction words (the details that differ)."""
    spans = specific_spans(text)
    kept = "".join(ch if not any(s <= i < e for s, e, _ in spans) else " " for i, ch in enumerate(text))
    return frozenset(w for w in tokenize(kept) if w not in _FUNCTION_WORDS and w not in ANTONYMS and not w.isdigit())


def frame_echo(unit: str, evidence: str, fewest: int = 3) -> float:
    """The share of ``unit``'s frame words (``frame_words``) that ``evidence`` holds; 0.0 when the unit has fewer
    than ``fewest``. A unit that repeats the evidence's frame speaks about the evidence's facts, whatever it
    changes in them."""
    words = frame_words(unit)
    return len(words & set(tokenize(evidence))) / len(words) if len(words) >= fewest else 0.0


def shares_frame(claim: str, sentence: str) -> bool:
    """Whether ``sentence`` holds at least ``FRAME_SHARE`` of the claim's content words, and two of them
    (one when the claim has one)."""
    words = frame_words(claim)
    shared = len(words & set(tokenize(sentence)))
    return bool(words) and shared >= FRAME_SHARE * len(words) and shared >= min(2, len(words))


def specific_contrasts(claim: str, sentence: str) -> list[str]:
    """The claim with one specific the sentence lacks replaced by one of the same kind that the sentence has
    and the claim lacks, for each such pair, in the claim's order."""
    have = normalised(sentence)
    mine = [(s, e, kind) for s, e, kind in specific_spans(claim) if normalised(claim[s:e]) not in have]
    if not mine:
        return []
    said = normalised(claim)
    theirs = [(sentence[s:e], kind) for s, e, kind in specific_spans(sentence) if normalised(sentence[s:e]) not in said]
    return [claim[:s] + value + claim[e:] for s, e, kind in mine for value, other in theirs if other == kind]


def may_be_a_name(word: str) -> bool:
    """Whether a capitalised word that opens a sentence may be a name: no contraction ("Wasn't", "It's"), no
    stop, function or opening word, no month or weekday, and no part of it (split at hyphens) a word of
    LemmInflect's English lexicon of common nouns, verbs, adjectives and adverbs ("Lead", "Gorgeous", "Sixty-four"
    are words; "Sydney", "Gregor" are not). Names that are also words ("Mercury", "China", "Bill") are read as
    words: a missed swap costs less than a paraphrase capped."""
    from lemminflect import getAllLemmas

    stem = re.sub(r"'s$", "", word)
    if "'" in stem or stem in STOP_CAPITALS or stem.casefold() in _FUNCTION_WORDS | OPENING_WORDS \
            or re.fullmatch(f"{MONTHS}|{_WEEKDAYS}", stem, re.IGNORECASE):
        return False
    return not any(getAllLemmas(part.casefold()) for part in stem.split("-") if part)


def _opening_name(claim: str, sentence: str) -> str | None:
    """The claim's opening run of capitalised words when it may be a name the sentence lacks (its first word
    ``may_be_a_name``, and none of its words in the sentence: "Paul Merson" is no new name where the sentence
    says "Merson"), else None."""
    first = re.match(r"[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*", claim.strip())
    if not first or not may_be_a_name(first.group().split()[0]):
        return None
    said = set(tokenize(sentence))
    return None if any(w in said for w in tokenize(first.group())) else first.group()


def opening_name_contrasts(claim: str, sentence: str) -> list[str]:
    """The claim with its opening name (``_opening_name``), when the sentence lacks it, replaced by each name
    the sentence has and the claim lacks: "Sydney is the capital of Australia." against "The capital of
    Australia is Canberra." gives "Canberra is the capital of Australia." (a sentence's first word is no
    specific otherwise: every sentence opens with a capital)."""
    first = _opening_name(claim, sentence)
    if first is None:
        return []
    said = normalised(claim)
    names = [sentence[s:e] for s, e, kind in specific_spans(sentence) if kind == "name" and normalised(sentence[s:e])
             not in said]
    start = claim.index(first)
    return [claim[:start] + name + claim[start + len(first):] for name in names]


def spelled_as_digits(text: str) -> str:
    """``text`` with its spelled numbers written in digits ("six legs" -> "6 legs", "tenth" -> "10th") by
    ``text_to_num.alpha2digit``; a lone "one" or "first" stays a word (it is a pronoun or an order as often as
    a count)."""
    from text_to_num import alpha2digit

    return alpha2digit(text, "en", threshold=2)


def _counts(text: str) -> list[tuple[int, int, bool]]:
    """``(start, end, ordinal)`` of each number specific of ``text``; ordinal when "st", "nd", "rd" or "th"
    follows it (the span then holds it)."""
    found = []
    for s, e, kind in specific_spans(text):
        if kind == "number":
            suffix = re.match(r"(?:st|nd|rd|th)\b", text[e:], re.IGNORECASE)
            found.append((s, e + (2 if suffix else 0), bool(suffix)))
    return found


def spelled_number_contrasts(claim: str, sentence: str) -> list[str]:
    """The claim with one number the sentence lacks replaced by one the sentence has and the claim lacks, spelled
    numbers read as numbers on both sides, compared as whole numbers, and an ordinal only against an ordinal:
    "Insects have eight legs."
    against "Insects have six legs." gives "Insects have 6 legs."; "the 83rd minute" against "seven minutes
    remaining" gives none. Empty when neither text spells a number."""
    said, have = spelled_as_digits(claim), spelled_as_digits(sentence)
    if said == claim and have == sentence:
        return []
    value = lambda text: normalised(text).rstrip("%")  # noqa: E731 - "8%" is the "8" of "8 percent"
    there = {value(have[s:e]) for s, e, _ in _counts(have)}  # whole numbers: 8 is not found in 1998
    here = {value(said[s:e]) for s, e, _ in _counts(said)}
    mine = [(s, e, o) for s, e, o in _counts(said) if value(said[s:e]) not in there]
    theirs = [(have[s:e], o) for s, e, o in _counts(have) if value(have[s:e]) not in here]
    return [said[:s] + value + said[e:] for s, e, ordinal in mine for value, other in theirs if other == ordinal]


_SPAN = re.compile(r"[\w'-]+")


def _one_span(claim: str, sentence: str, longest: int) -> tuple[int, int, str, str, bool] | None:
    """``(start, end, span, theirs, opening)`` where the claim differs from the sentence in one span of at most
    ``longest`` words (``claim[start:end]``, the sentence's ``theirs``) and everything else of the claim stands in
    the sentence in order (the sentence may add words); ``opening`` when either span opens its text (its capital
    says nothing). None otherwise."""
    mine = [(m.group().casefold(), m.start(), m.end()) for m in _SPAN.finditer(claim)]
    theirs = [m.group() for m in _SPAN.finditer(sentence)]
    matcher = difflib.SequenceMatcher(a=[w for w, _, _ in mine], b=[w.casefold() for w in theirs], autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    replaced = [op for op in changes if op[0] == "replace"]
    if len(replaced) != 1 or any(op[0] == "delete" for op in changes):
        return None
    _, a0, a1, b0, b1 = replaced[0]
    if a1 - a0 > longest or b1 - b0 > longest:
        return None
    start, end = mine[a0][1], mine[a1 - 1][2]
    return start, end, claim[start:end], " ".join(theirs[b0:b1]), a0 == 0 or b0 == 0


def one_span_contrasts(claim: str, sentence: str, longest: int = 3) -> list[str]:
    """The claim with one span of at most ``longest`` words as the sentence has it, where everything else of
    the claim stands in the sentence in order (the sentence may add words): "Plants absorb oxygen from the
    air." against "Plants absorb carbon dioxide from the air." gives the claim with "carbon dioxide"."""
    found = _one_span(claim, sentence, longest)
    return [claim[:found[0]] + found[3] + claim[found[1]:]] if found else []


#: Words after which a word LemmInflect also lists as a verb reads as a noun ("the run", "of water").
_BEFORE_A_NOUN = frozenset(
    "a an the this that these those his her their our my your its of in on at for from by with into onto over "
    "under about after before some many no each every any all several few".split())


def _read_as_noun(span: str, before: str, opening: bool) -> bool:
    """Whether a span reads as a common noun: WordNet lists the whole span as a noun ("carbon dioxide"; "salt
    year" is no noun WordNet knows, whatever "year" is), no word of it is a function word or, unless it opens its
    text, capitalised (a name: "The Glass Orchard" is a play's, not an orchard), and its last word is no verb form
    LemmInflect lists unless a determiner or preposition (``_BEFORE_A_NOUN``) comes before the span ("the run" is
    a noun, "they run" is not)."""
    from lemminflect import getAllLemmas

    words = span.split()
    if not words or any(w.casefold() in _FUNCTION_WORDS or not w.isalpha() for w in words):
        return False
    if not opening and any(w[0].isupper() for w in words):
        return False
    if not nouns.is_noun(span):
        return False
    return "VERB" not in getAllLemmas(words[-1].casefold()) or before.casefold() in _BEFORE_A_NOUN


def noun_swap_contrasts(claim: str, sentence: str, longest: int = 2) -> list[str]:
    """The claim with one noun (a span of at most ``longest`` words, ``_read_as_noun`` on both sides) as the
    sentence has it, where everything else of the claim stands in the sentence in order, the claim's noun is
    nowhere in the sentence, and it may not stand for the sentence's (``judges.data.nouns.may_stand_for``: no
    synonym, not a kind the sentence's is one of): "Plants absorb oxygen from the air." against "Plants absorb
    carbon dioxide from the air." gives "Plants absorb carbon dioxide from the air."; "She watched the movie."
    against "She watched the film." gives none."""
    found = _one_span(claim, sentence, longest)
    if not found:
        return []
    start, end, span, theirs, opening = found
    before = ([""] + claim[:start].split())[-1]
    if not (_read_as_noun(span, before, opening) and _read_as_noun(theirs, before, opening)):
        return []
    if set(tokenize(span)) & set(tokenize(sentence)) or nouns.may_stand_for(span, theirs):
        return []
    return [claim[:start] + theirs + claim[end:]]


def checked_swaps(value: Any, where: str) -> bool | str:
    """``value`` as a ``check_swaps`` setting, one of ``SWAP_CHECKS`` (True is not 1); else ValueError naming
    ``where``."""
    if not any(value is known or (isinstance(known, str) and value == known) for known in SWAP_CHECKS):
        raise ValueError(f"{where} must be one of {list(SWAP_CHECKS)}, got {value!r}")
    return value


def contrasts(claim: str, sentence: str, *, swaps: bool | str = False) -> list[str]:
    """The claim with one detail as ``sentence`` has it (a specific, or a direction word turned; with ``swaps``,
    also an opening name; with ``swaps == "names-numbers"`` also a spelled number, and with
    ``"names-numbers-nouns"`` also a swapped noun (``noun_swap_contrasts``); with ``swaps=True`` any one short
    span), at most ``MAX_CONTRASTS``, without repeats; empty unless the sentence shares the claim's frame."""
    checked_swaps(swaps, "contrasts: swaps")
    opening = _opening_name(claim, sentence) if swaps else None
    framed = claim.strip()[len(opening):] if opening else claim  # a name that opens the claim is no frame word
    if not shares_frame(framed, sentence):
        return []
    # the opening name's contrasts first: the specifics inside a multi-word opening run give garbled ones
    found = opening_name_contrasts(claim, sentence) if swaps else []
    found += direction_contrasts(claim, sentence) + specific_contrasts(claim, sentence)
    if swaps in ("names-numbers", "names-numbers-nouns"):
        found += spelled_number_contrasts(claim, sentence)
    if swaps == "names-numbers-nouns":
        found += noun_swap_contrasts(claim, sentence)
    elif swaps is True:  # a one-span contrast also catches a paraphrase's other wording
        found += one_span_contrasts(claim, sentence)
    return [text for text in dict.fromkeys(found) if text != claim][:MAX_CONTRASTS]
