"""Faithful compressions of one sentence, made by rules: shorter restatements that the sentence still
entails, the form a summary's sentence takes ("Responding to a query, Minister Gen Nakatani told the Diet
that ... after ..." -> "Minister Gen Nakatani told the Diet that ..."). A verifier trained on exact copies,
trims and one-fact-changed copies only can read such a compression as a changed fact.

Each operation returns None when it does not apply:

- ``drop_opening``: a leading adverbial phrase or clause before the first comma ("In 2010, the firm ..." ->
  "The firm ..."; "Speaking on Monday, he said ..." -> "He said ..."), unless it is conditional or
  negative ("If ...", "Unless ...", "Without ...", "Never ...") or an attribution ("According to ...").
- ``cut_tail``: the sentence up to a clause that only adds to it (", and ...", ", but ...", ", who ...",
  ", which ...", " after ...", " because ...", ", leaving ..." ...): the first clause is entailed. Never
  at "until", "unless", "if", "than" or "only", which change what the first part says. The part kept
  has at least 6 words and a verb.
- ``drop_age``: an age set off by commas after a name ("Stephen Moss, 54, was ..." -> "Stephen Moss was ...").

``compress_sentence`` applies each operation that applies with probability 1/2 (at least one), in a
seeded order, then ``perturb.trim_sentence``'s trims on top in 1 of 2 cases (``trim`` passed in, so this
module stays below ``perturb``). Attributions ("..., police said") are kept: dropping one does not give
an entailed sentence.

Everything is deterministic given the ``random.Random`` passed in.

Owns: these compressions. Must not read data files, fit or score anything.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

#: First words of an opening phrase that can go: place, time, circumstance and discourse words.
_OPENING_WORDS = {"in", "on", "at", "after", "before", "during", "since", "following", "despite", "although",
                  "though", "while", "when", "once", "last", "earlier", "later", "this", "by", "from", "for",
                  "with", "under", "over", "throughout", "meanwhile", "however", "also", "today", "yesterday",
                  "now", "then", "still", "additionally", "as", "amid", "within", "across", "upon",
                  "there", "here", "instead", "unlike", "like", "besides", "moreover", "furthermore"}
#: Openings that are subordinate clauses: they have a verb of their own.
_SUBORDINATORS = {"after", "before", "since", "although", "though", "while", "when", "once", "as", "despite"}
#: Opening words whose phrase qualifies the rest: dropping it would make the claim say more.
_KEEP_OPENING = {"if", "unless", "without", "except", "only", "never", "not", "no", "hardly", "according",
                 "should", "had", "were", "whether", "assuming", "provided", "supposedly", "allegedly",
                 "reportedly", "perhaps", "maybe", "possibly", "probably", "apparently", "hypothetically"}
#: Words that make an opening restrict what the rest claims ("In theory, ...", "In some cases, ...").
_SCOPE = re.compile(r"\b(?:not|never|no|theory|principle|some|most|many|part|certain|case|cases|rarely|"
                    r"sometimes|often|usually|general|hypothetically|possibly|likely)\b")
_OPENING = re.compile(r"^([A-Za-z][\w'-]*)\b[^,]{0,90},\s+(?=\S)")

#: Where a tail can be cut: a clause that adds to the first part without qualifying it.
_TAIL = re.compile(r",\s+(?:and|but|while|whereas|who|which|where|having|leaving|making|helping|bringing|"
                   r"taking|giving|including|despite|after|before|as)\b"
                   r"|\s+(?:after|because|despite|while|when|amid)\s+(?=\w)")
_NEVER_CUT = re.compile(r"\b(?:until|unless|if|than|only|except|whether|without|provided)\b", re.IGNORECASE)
_VERB = re.compile(r"\b(?:is|are|was|were|be|been|has|have|had|will|would|can|could|may|might|must|should|"
                   r"did|does|do|said|says|told|made|took|gave|got|went|came|saw|found|won|lost|left|began|"
                   r"became|held|led|met|paid|put|ran|set|sold|spent|wrote|[a-z]{2,}ed)\b")
#: Words a kept first part cannot end in ("the day after ...", "for a while ..." are not clauses).
_FUNCTION_WORDS = {"the", "a", "an", "of", "to", "in", "on", "at", "by", "for", "with", "from", "and", "or",
                   "that", "this", "who", "which", "what", "how", "is", "was", "are", "were", "be",
                   "but", "day", "days", "year", "years", "week", "weeks", "month", "months", "time", "soon",
                   "shortly", "just", "long", "right", "even", "immediately", "moments", "minutes", "hours"}
_AGE = re.compile(r"(?<=[A-Za-z]),\s+(?:aged\s+)?\d{1,3},\s+(?=[a-z])")
MIN_KEPT = 6


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def drop_opening(sentence: str) -> str | None:
    """The sentence without its leading adverbial phrase before the first comma; None when it has none
    that can go (see the module's docstring) or too little would be left."""
    match = _OPENING.match(sentence)
    if not match:
        return None
    first = match.group(1).lower()
    opening = sentence[:match.end()].lower()
    if first in _KEEP_OPENING or _NEVER_CUT.search(opening) or _SCOPE.search(opening):
        return None
    participle = re.fullmatch(r"[a-z]{3,}(?:ing|ed)", first) and len(opening.split()) >= 3
    if first not in _OPENING_WORDS and not participle:
        return None  # "Sterling, the England forward, ...": a one-word "-ing" opening is a name
    if first not in _SUBORDINATORS and _VERB.search(opening[len(first):]):
        return None  # "Now the firm is remaking it, to air in 2016": the comma ends the main clause
    rest = sentence[match.end():]
    if len(rest.split()) < 4 or not rest[:1].isalpha():  # "On July 30, 2009, he ...": a date's comma
        return None
    return _sentence_case(rest)


def cut_tail(sentence: str) -> str | None:
    """The sentence up to the first clause that only adds to it (see the module's docstring), with its
    closing stop; None when there is none, or the part kept is under ``MIN_KEPT`` words or has no verb."""
    for match in _TAIL.finditer(sentence):
        kept = sentence[:match.start()].rstrip(" ,;:")
        word = match.group(0).strip(" ,").lower()
        if word in ("who", "which", "where") and "," in sentence[match.end():] \
                or re.search(r",\s+(?:who|which|where|whose)\b[^,]*$", kept):
            continue  # a relative clause inside the sentence: the main verb comes after it
        if len(kept.split()) < MIN_KEPT or not _VERB.search(kept):
            continue
        if _NEVER_CUT.search(sentence[match.end():match.end() + 25]) or \
                kept.split()[-1].lower().strip("'\"") in _FUNCTION_WORDS:
            continue  # "..., but only if ...": the first part holds only with the rest; "for a while"
        if kept.count("(") != kept.count(")") or kept.count('"') % 2:
            continue
        return kept + ("?" if sentence.rstrip().endswith("?") else ".")
    return None


def drop_age(sentence: str) -> str | None:
    """The sentence without an age set off by commas after a name; None when it has none."""
    dropped = _AGE.sub(" ", sentence, count=1)
    return None if dropped == sentence else dropped


OPERATIONS: dict[str, Callable[[str], str | None]] = {
    "opening": drop_opening, "tail": cut_tail, "age": drop_age}


def compress_sentence(sentence: str, rng: random.Random,
                      trim: Callable[[str], str | None] | None = None) -> str | None:
    """A shorter restatement the sentence entails: each of ``OPERATIONS`` that applies, with probability
    1/2 each (at least one), in a seeded order, then ``trim`` (a faithful trim, e.g.
    ``perturb.trim_sentence``) in 1 of 2 cases where it applies. None when no operation applies or fewer
    than 4 words would be left. Deterministic given ``rng``'s state."""
    names = list(OPERATIONS)
    rng.shuffle(names)
    text, applied = sentence.strip(), 0
    for index, name in enumerate(names):
        shorter = OPERATIONS[name](text)
        if shorter is None:
            continue
        last_chance = applied == 0 and all(OPERATIONS[n](text) is None for n in names[index + 1:])
        if last_chance or rng.random() < 0.5:
            text, applied = shorter, applied + 1
    if applied == 0:
        return None
    if trim is not None and rng.random() < 0.5:
        text = trim(text) or text
    text = re.sub(r"\s+([,.;:!?])", r"\1", re.sub(r"\s{2,}", " ", text)).strip()
    return text if len(text.split()) >= 4 and text != sentence.strip() else None
