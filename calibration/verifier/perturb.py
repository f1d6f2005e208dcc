"""Copy-with-a-changed-fact pairs made by rules, to augment verifier training: a verifier trained only on
natural pairs can learn "the claim copies the evidence's words, so it is supported". These negatives copy
one evidence sentence word for word except for exactly one fact; the positives copy it faithfully.

Negatives (label 0), each a function that returns None when the sentence has nothing of its kind:

- ``change_number``: one number gets another value (1889 -> 1899, 3 -> 4, 45% -> 54%, "three" -> "four");
- ``swap_name``: one capitalised name is replaced by a different name from a pool (names from elsewhere
  in the corpus or the evidence; ``names_in`` collects them);
- ``flip_negation``: a "not" / "never" is inserted after an auxiliary (or before a past-tense verb), or an
  existing negation is removed;
- ``flip_direction``: one direction word becomes its antonym (increased/decreased, rose/fell,
  before/after, north/south, won/lost, larger/smaller, more/less, above/below, first/last ...; the word
  list is in ``judges.data.opposites``, which the verifier's check against opposites reads too).

``direction_minimal_pair`` makes the direction flip and the unchanged sentence from one evidence text: a
pair whose labels differ by one word.

Positives (label 1): the sentence itself ("copy"), or the sentence without a parenthetical or an
appositive / trailing relative clause ("trim"; ``trim_sentence``), which the sentence still entails; with
``perturbed_pairs(compress=...)``, sentences compressed first (``calibration.verifier.compress``), as
positives ("compressed") and with a fact changed ("<kind>_compressed") alike.

``as_reply`` dresses a claim of either label as a chat reply ("yes, ...", "did you know ...?", lower case,
spaced punctuation) without changing what it asserts, so that the form a reply takes says nothing about
its label: a verifier that saw only bare copies could learn "any change to the copied words = unsupported".
The shipped verifier's tokenizer is uncased and splits punctuation off, so of these it sees the openings
only; the lower case and spacing matter to a cased model plugged in for training.

Everything is deterministic given the ``random.Random`` passed in. Sentences come from
``judges.data.language.split_sentences``.

Owns: these rules, ``as_reply``, ``perturbed_pairs`` and ``direction_minimal_pair``.
Must not read data files, fit or score anything.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from calibration.verifier.compress import compress_sentence
from judges.data.language import split_sentences
from judges.data.opposites import DIRECTION_WORD, direction_flips, keep_case

# --- numbers --------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.,:])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%)?(?![\w,:]?\d)(?!s\b)")
_NUMBER_WORDS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                 "twice"]
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
_WORD_VALUES = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "eleven": 11, "twelve": 12}
_WORD_OF = {value: word for word, value in _WORD_VALUES.items()}


def _new_integer(value: int, is_year: bool, is_percent: bool, digits: str, rng: random.Random) -> int:
    if is_percent and len(digits) == 2 and digits[0] != digits[1] and digits[1] != "0":
        return int(digits[::-1])  # 45% -> 54%
    if is_year:
        return value + rng.choice([-10, -5, -3, -2, 2, 3, 5, 10])
    if value < 10:
        return value + 1 if value <= 1 else value + rng.choice([-1, 1])
    step = max(1, round(value * rng.choice([0.1, 0.2, 0.25, 0.5])))
    if step < value and rng.random() < 0.5:
        return value - step
    return value + step


def _format_like(value: int, original: str) -> str:
    return f"{value:,}" if "," in original else str(value)


def change_number(sentence: str, rng: random.Random, avoid: str = "") -> str | None:
    """The sentence with one number (digits, or a number word two..twelve / "twice") given another value:
    years move by a few years (1889 -> 1899), small counts by one (3 -> 4), two-digit percentages swap
    their digits (45% -> 54%), other numbers by 10-50%, decimals in their last digit. The new value is
    chosen not to occur in ``avoid`` (the whole evidence) where possible. None when there is no number."""
    spots: list[tuple[int, int, str]] = []
    for match in _NUMBER.finditer(sentence):
        spots.append((match.start(), match.end(), "digits"))
    for match in _NUMBER_WORD.finditer(sentence):
        spots.append((match.start(), match.end(), "word"))
    if not spots:
        return None
    start, end, kind = rng.choice(sorted(spots))
    original = sentence[start:end]
    for _ in range(6):
        if kind == "word":
            word = original.lower()
            if word == "twice":
                new = rng.choice(["three times", "four times"])
            else:
                value = _WORD_VALUES[word]
                new = _WORD_OF.get(value + rng.choice([-1, 1]) if value > 2 else value + 1, "thirteen")
            if original[0].isupper():
                new = new[0].upper() + new[1:]
        else:
            match = _NUMBER.fullmatch(original)
            if match is None:  # pragma: no cover - the span came from _NUMBER
                return None
            whole, fraction, percent = match.group(1), match.group(2) or "", match.group(3) or ""
            if fraction:
                last = int(fraction[-1])
                new_fraction = fraction[:-1] + str((last + rng.choice([1, 2, 3, 4])) % 10)
                new = whole + new_fraction + percent
            else:
                value = int(whole.replace(",", ""))
                is_year = not percent and len(whole) == 4 and 1000 <= value <= 2100
                new = _format_like(_new_integer(value, is_year, bool(percent), whole, rng), whole) + percent
        if new != original and (not avoid or not re.search(rf"(?<![\w.]){re.escape(new)}(?![\w]|\.\d)", avoid)):
            break
    if new == original:
        return None
    return sentence[:start] + new + sentence[end:]


# --- names ----------------------------------------------------------------------------------------------

#: Capitalised words that are not names (sentence openers, function words, months, days, titles).
_NOT_NAMES = set("""
A An The This That These Those It Its He She They We I You His Her Their Our My Your There Here In On At
By For From With Without To Of And But Or Nor So Yet As If When While After Before Since Until Because
Although Though However Also Then Thus Hence Most Many Some Several All Both Each Every No Not One Two
Three Four Five Six Seven Eight Nine Ten First Second Third Last During Under Over About Around Between
Among Into Through Across Against Despite Following According Later Early Today Yesterday Tomorrow Who What
Which Where Why How Mr Mrs Ms Dr Prof St Jr Sr January February March April May June July August September
October November December Monday Tuesday Wednesday Thursday Friday Saturday Sunday
""".split())
_CAP_WORD = r"[A-Z][a-zA-Z'\u00C0-\u024F-]*[a-z\u00C0-\u024F][a-zA-Z'\u00C0-\u024F-]*"
_NAME = re.compile(rf"\b{_CAP_WORD}(?:\s+(?:(?:de|van|von|der|da|del|la|le|bin|al)\s+)?{_CAP_WORD})*")


def _name_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for match in _NAME.finditer(text):
        start, end = match.start(), match.end()
        words = match.group(0).split()
        # drop leading non-name words ("The Beatles" -> "Beatles", "In Paris" -> "Paris")
        while words and words[0] in _NOT_NAMES:
            start = text.index(words[1], start + len(words[0])) if len(words) > 1 else end
            words = words[1:]
        while words and words[-1] in _NOT_NAMES:
            end = text.rindex(words[-1], start, end)
            end = len(text[:end].rstrip())
            words = words[:-1]
        if len(words) == 1 and not text[:start].strip(" \"'\u201c("):
            continue  # a lone capitalised first word is usually just the sentence opener ("Construction")
        if words:
            spans.append((start, end))
    return spans


def names_in(text: str) -> list[str]:
    """The capitalised names in ``text`` (multi-word names kept whole; sentence openers and months are
    not names), in order, without repeats: a pool for ``swap_name``."""
    return list(dict.fromkeys(text[s:e] for s, e in _name_spans(text)))


def swap_name(sentence: str, rng: random.Random, name_pool: Sequence[str], avoid: str = "") -> str | None:
    """The sentence with one capitalised name replaced by another name from ``name_pool`` (preferring one
    with the same number of words, never one that occurs in ``avoid``, the whole evidence, or in the
    sentence). None when the sentence has no name or the pool has no other name."""
    spans = _name_spans(sentence)
    if not spans:
        return None
    start, end = rng.choice(spans)
    target = sentence[start:end]
    context = (avoid + " " + sentence).lower()
    candidates = sorted({name.strip() for name in name_pool
                         if name.strip() and name.strip().lower() not in context
                         and name.strip().lower() != target.lower()})
    if not candidates:
        return None
    same_size = [name for name in candidates if len(name.split()) == len(target.split())]
    return sentence[:start] + rng.choice(same_size or candidates) + sentence[end:]


# --- negation -------------------------------------------------------------------------------------------

_CONTRACTIONS = {"isn't": "is", "aren't": "are", "wasn't": "was", "weren't": "were", "hasn't": "has",
                 "haven't": "have", "hadn't": "had", "doesn't": "does", "don't": "do", "didn't": "did",
                 "can't": "can", "cannot": "can", "couldn't": "could", "won't": "will", "wouldn't": "would",
                 "shouldn't": "should", "mustn't": "must"}
NEGATED = re.compile(r"\b(" + "|".join(map(re.escape, _CONTRACTIONS)) + r")\b|\b(not|never)\s+(?!only\b)",
                     re.IGNORECASE)
#: Where "not" can go: after a form of "be" or a modal before any lower-case word, after "has/have/had"
#: only before a participle ("has not been", not "has not 5,000 inhabitants"). Lower case only, so the
#: month "May" is never taken for the modal.
_AUXILIARY = re.compile(r"\b(?:(is|are|was|were|can|could|will|would|should|must|might)\s+(?=[a-z])"
                        r"|(has|have|had)\s+(?=been\b|[a-z]+(?:ed|en|wn|ne)\b))(?!not\b|never\b)")
_PAST_VERB = re.compile(r"(?<!\bthe )(?<!\ba )(?<!\ban )\b([a-z]{3,}ed)\b")
_NOT_VERBS = {"hundred", "indeed", "proceed", "succeed", "exceed", "speed", "breed", "bleed", "need",
              "kindred", "sacred", "naked", "wicked", "beloved", "aged", "based", "related", "limited",
              "united", "talented", "detailed", "advanced", "supposed"}


def negation_removals(sentence: str) -> list[str]:
    """The sentence with one negation removed ("is not" -> "is", "never won" -> "won", "didn't" -> "did",
    "cannot" -> "can"), one variant for each of its negations, in order; "not only" is left alone."""
    out = []
    for match in NEGATED.finditer(sentence):
        if match.group(1):
            replacement = keep_case(_CONTRACTIONS[match.group(1).lower()], match.group(1))
            out.append(sentence[:match.start()] + replacement + sentence[match.end():])
            continue
        rest = sentence[match.end():]
        if match.start() == 0:
            rest = rest[:1].upper() + rest[1:]
        out.append(sentence[:match.start()] + rest)
    return out


def negation_insertions(sentence: str) -> list[str]:
    """The sentence with "not" after one of its auxiliaries ("was built" -> "was not built"), one variant
    for each, in order."""
    return [sentence[:m.start()] + (m.group(1) or m.group(2)) + " not " + sentence[m.end():]
            for m in _AUXILIARY.finditer(sentence)]


def flip_negation(sentence: str, rng: random.Random) -> str | None:
    """One of the sentence's ``negation_removals`` or, when it has no negation, one of its
    ``negation_insertions`` or else "never" before a past-tense verb ("opened" -> "never opened"). None when
    none applies."""
    variants = negation_removals(sentence) or negation_insertions(sentence)
    if variants:
        return rng.choice(variants)
    verbs = [m for m in _PAST_VERB.finditer(sentence) if m.start() > 0 and m.group(1) not in _NOT_VERBS]
    if verbs:
        match = rng.choice(verbs)
        return sentence[:match.start()] + "never " + sentence[match.start():]
    return None


# --- direction (the word list: judges.data.opposites) ---------------------------------------------------

def flip_direction(sentence: str, rng: random.Random) -> str | None:
    """The sentence with one direction word replaced by its antonym (increased/decreased, rose/fell,
    before/after, north/south, east/west, won/lost, larger/smaller, more/less, above/below, first/last,
    older/younger, higher/lower ...), keeping its capitalisation. None when there is none."""
    flips = direction_flips(sentence)
    return rng.choice(flips) if flips else None


def direction_minimal_pair(evidence: str, rng: random.Random) -> tuple[str, str] | None:
    """(flipped, kept): one of ``evidence``'s sentences (of ``MIN_WORDS`` words or more) that has a direction
    word, with that word flipped (``flip_direction``) and as it stands; a minimal pair, whose only
    difference decides the label. None when no sentence has one (or the flip occurs verbatim in it)."""
    sentences = [s for s in split_sentences(evidence) if len(s.split()) >= MIN_WORDS and DIRECTION_WORD.search(s)]
    if not sentences:
        return None
    kept = rng.choice(sentences)
    flipped = flip_direction(kept, rng)
    return None if not flipped or flipped in evidence else (flipped, kept)


# --- faithful trims -------------------------------------------------------------------------------------

#: A parenthetical, unless it qualifies the statement ("(excluding fuel)", "(if ...)"): removing those
#: would make the claim say more than the sentence.
_PARENTHETICAL = re.compile(r"\s*\((?!\s*(?:excluding|except|not|only|without|if|unless|when|at least|up to|"
                            r"adjusted|estimated|approximately|about|roughly|provisional)\b)[^()]*\)", re.IGNORECASE)
#: An appositive or relative clause right after a capitalised name ("Paris, the capital of France, is").
_APPOSITIVE = re.compile(r"\b([A-Z][\w\u00C0-\u024F'-]*),\s+(?:a|an|the|who|which|whose)\s[^,()]+,\s+(?=[a-z])")
#: At the end of the sentence: a "which" clause after anything, or an appositive noun phrase (no "is /
#: was ..." in it, else it is a clause of its own) or "who" clause after a capitalised name.
_TRAILING_WHICH = re.compile(r",\s+which\s[^,()]+?(?=[.!?]?$)")
_TRAILING_APPOSITIVE = re.compile(r"\b([A-Z][\w\u00C0-\u024F'-]*),\s+(a|an|the|who|whose)\s([^,()]+?)(?=[.!?]?$)")
_FINITE_BE = re.compile(r"\b(?:is|are|was|were|has|have|had)\b")


def trim_sentence(sentence: str) -> str | None:
    """The sentence without its parentheticals ("Marie Curie (1867-1934) won" -> "Marie Curie won") or,
    failing that, without one appositive or relative clause between a name and a lower-case verb
    ("Paris, the capital of France, is large" -> "Paris is large"), or at its end ("He met Jane, a
    lawyer." -> "He met Jane."; "..., which ..." clauses after any word): still entailed by the sentence.
    None when nothing can be trimmed."""
    trimmed = _PARENTHETICAL.sub("", sentence)
    if trimmed == sentence:
        trimmed = _APPOSITIVE.sub(lambda m: m.group(0) if m.group(1) in _NOT_NAMES else m.group(1) + " ",
                                  sentence, count=1)
    if trimmed == sentence:
        trimmed = _TRAILING_WHICH.sub("", sentence, count=1)
    if trimmed == sentence:
        match = _TRAILING_APPOSITIVE.search(sentence)
        if match and match.group(1) not in _NOT_NAMES and (match.group(2) in ("who", "whose")
                                                            or not _FINITE_BE.search(match.group(3))):
            trimmed = sentence[:match.end(1)] + sentence[match.end():]
    trimmed = re.sub(r"\s+([,.;:!?])", r"\1", trimmed).strip()
    if trimmed == sentence.strip() or len(trimmed.split()) < 3:
        return None
    return trimmed


# --- chat replies ---------------------------------------------------------------------------------------

#: Openings of a chat reply that assert nothing of their own (written for this module, from no dataset).
REPLY_OPENINGS = ("yes, ", "yes, and ", "yeah, ", "yep, ", "well, ", "oh, ", "actually, ", "and ", "so ",
                  "i think ", "i heard ", "i read that ", "i believe ", "apparently ", "true, ", "right, ",
                  "wow, ", "fun fact: ", "i know that ", "it's interesting that ")
_QUESTION_OPENINGS = ("did you know ", "did you know that ")
#: First words a reply's opening lower-cases; any other capitalised first word may be a name and stays.
_COMMON_FIRST = {"the", "a", "an", "it", "its", "he", "his", "she", "her", "they", "their", "this", "these",
                 "that", "those", "there", "in", "on", "at", "by", "for", "from", "after", "before", "during",
                 "many", "most", "some", "one", "each", "every", "about", "over", "under", "since", "when",
                 "as", "with", "according", "both", "all", "no", "only", "we", "our", "you", "your"}


def as_reply(claim: str, rng: random.Random) -> str:
    """``claim`` dressed as a chat reply, asserting the same: an opening from ``REPLY_OPENINGS`` (or "did you
    know ...?") in 2 of 3 cases, then lower-cased in 1 of 2; the others all lower-cased; punctuation spaced
    off ("word ,") in 1 of 6. A first word that could be a name keeps its capital unless everything is
    lower-cased. Deterministic given ``rng``'s state."""
    text = claim.strip()
    opening = rng.random() < 2 / 3
    if opening:
        first, _, rest = text.partition(" ")
        if first.lower() in _COMMON_FIRST:
            text = f"{first.lower()} {rest}" if rest else first.lower()
        if rng.random() < 0.15:
            text = rng.choice(_QUESTION_OPENINGS) + re.sub(r"[.!]$", "", text) + "?"
        else:
            text = rng.choice(REPLY_OPENINGS) + text
    if not opening or rng.random() < 0.5:
        text = text.lower()
    if rng.random() < 1 / 6:
        text = re.sub(r"(?<=\w)([,.!?;:])(?=\s|$)", r" \1", text)
    return text


# --- pairs ----------------------------------------------------------------------------------------------

NEGATIVE_KINDS = ("number", "name", "negation", "direction")
POSITIVE_KINDS = ("copy", "trim", "compressed")
MIN_WORDS = 4


def fact_changes(evidence: str, rng: random.Random, name_pool: Sequence[str]) -> dict[str, Callable[[str], str | None]]:
    """The four rules of ``NEGATIVE_KINDS``, each sentence -> the sentence with that fact changed, or None; a
    changed number or name never one that ``evidence`` already holds."""
    return {"number": lambda s: change_number(s, rng, avoid=evidence),
            "name": lambda s: swap_name(s, rng, name_pool, avoid=evidence),
            "negation": lambda s: flip_negation(s, rng), "direction": lambda s: flip_direction(s, rng)}


def perturbed_pairs(evidence: str, rng: random.Random, name_pool: Sequence[str],
                    compress: float = 0.0, compress_negatives: bool = True) -> list[tuple[str, int, str]]:
    """(claim, label, kind) pairs made from ``evidence``'s sentences (those of ``MIN_WORDS`` words or
    more): at most one negative of each kind in ``NEGATIVE_KINDS`` (label 0; each on a sentence picked with
    ``rng`` among those where the rule applies), then up to as many positives (label 1): one "trim" where
    a sentence can be trimmed and "copy" of distinct sentences (at least one positive; the labels balance
    when the evidence has as many sentences as negatives). ``name_pool`` feeds ``swap_name`` (``names_in`` of other
    evidence texts is a good pool). Negatives that happen to occur verbatim in the evidence are dropped.
    With ``compress`` > 0, that share of the sentences is first replaced by a faithful compression
    (``compress.compress_sentence``) where one exists, so compressions come with both labels: a copy of
    one is kind "compressed", a fact changed in one is "<kind>_compressed" (with 0, no random draw is
    added: the pairs are those made before this option). ``compress_negatives=False``: the facts are changed
    in the sentences as they stand, so compressions come as positives only. Deterministic given ``rng``'s
    state."""
    sentences = [s for s in split_sentences(evidence) if len(s.split()) >= MIN_WORDS]
    if not sentences:
        return []
    shortened = [False] * len(sentences)
    originals = list(sentences)
    if compress > 0:
        for index, sentence in enumerate(sentences):
            if rng.random() < compress:
                shorter = compress_sentence(sentence, rng, trim_sentence)
                if shorter:
                    sentences[index], shortened[index] = shorter, True
    rules = fact_changes(evidence, rng, name_pool)
    changed = sentences if compress_negatives else originals  # the sentences whose facts are changed
    pairs: list[tuple[str, int, str]] = []
    for kind in NEGATIVE_KINDS:
        order = list(range(len(sentences)))
        rng.shuffle(order)
        for index in order:
            claim = rules[kind](changed[index])
            if claim and claim != changed[index] and claim not in evidence:
                compressed = shortened[index] and compress_negatives
                pairs.append((claim, 0, f"{kind}_compressed" if compressed else kind))
                break
    wanted = max(1, len(pairs))
    order = list(range(len(sentences)))
    rng.shuffle(order)
    positives: list[tuple[str, int, str]] = []
    for index in order:
        trimmed = trim_sentence(sentences[index])
        if trimmed:
            positives.append((trimmed, 1, "compressed" if shortened[index] else "trim"))
            break
    order.sort(key=lambda i: not shortened[i])  # compressions first, so their labels balance
    for index in order:
        if len(positives) >= wanted:
            break
        copy = (sentences[index], 1, "compressed" if shortened[index] else "copy")
        if copy not in positives:
            positives.append(copy)
    return pairs + positives[:wanted]


def one_fact_changed(text: str, evidence: str, rng: random.Random, name_pool: Sequence[str]) -> str | None:
    """``text`` with one fact of one of its sentences changed (a number, a name, a negation or a direction:
    the first of the four, in an order drawn from ``rng``, that applies to some sentence), the rest as it
    stands; None when no rule applies. The contrast pair made from a reply labelled faithful: the same words
    with one fact wrong, so a model trained on it cannot learn "copies the evidence, so supported"."""
    rules = fact_changes(evidence, rng, name_pool)
    sentences = split_sentences(text)
    order, kinds = list(range(len(sentences))), list(rules)
    rng.shuffle(order)
    rng.shuffle(kinds)
    for kind in kinds:
        for at in order:
            changed = rules[kind](sentences[at])
            if changed and changed != sentences[at]:
                return " ".join(changed if k == at else s for k, s in enumerate(sentences))
    return None
