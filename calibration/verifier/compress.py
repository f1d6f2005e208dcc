"""Faithful compressions of one sentence, made by rules: shorter restatements that the sentence still
entails, the form a summary's sentence takes ("Responding to a query, Minister Gen Nakatani told the Diet
that ... after ..." -> "Minister Gen Nakatani told the Diet that ..."). A verifier trained on exact copies,
trims and one-fact-changed copies only can read such a compression as a changed fact.

Each operation returns None when it does not apply, and each errs on the side of not applying (a compression
that says more than its sentence would be a mislabelled training pair):

- ``drop_opening``: a leading discourse word ("However, ...") or phrase of time before the first comma ("In
  1921, ...", "Last week, ...", "After the war ended, ...", "Speaking on Monday, ..."). Not an opening of
  place or scope ("In the UK, ...", "Under the proposal, ...", "In most cases, ...", "Excluding ...,"), nor
  any opening when the rest holds a number ("In 2010, the firm had 50 employees": the 50 holds for 2010).
- ``cut_tail``: the sentence up to a clause that only adds to it (", and ...", ", but ...", ", who ...",
  ", which ...", ", leaving ...", " despite ..."): the first clause is entailed. Never where the rest
  qualifies it (", but only if ...", ", and not ..."), inside a list, after an opening subordinate clause,
  or in a sentence that reports or quotes someone (the cut could drop who said it). The part kept has at
  least 6 words and a verb.
- ``drop_age``: an age set off by commas after a name ("Stephen Moss, 54, was ..." -> "Stephen Moss was ...").

``compress_sentence`` applies each operation that applies with probability 1/2 (at least one), in a
seeded order, then ``perturb.trim_sentence``'s trims on top in 1 of 2 cases (``trim`` passed in, so this
module stays below ``perturb``). Checked by reading, not measured: a review of the first version found
non-entailed outputs ("... in Britain after London." -> "... in Britain."), which these rules now refuse.

Everything is deterministic given the ``random.Random`` passed in.

Owns: these compressions. Must not read data files, fit or score anything.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

#: Openings that can go: discourse words, and phrases of time (checked by ``_TIME``) after these words.
_DISCOURSE = {"however", "meanwhile", "moreover", "furthermore", "additionally", "also", "still", "then",
              "indeed", "nevertheless", "nonetheless", "similarly", "likewise", "besides", "yet", "later",
              "earlier", "today", "yesterday", "now", "in addition", "in fact", "at the time", "at that time"}
_TIME_OPENERS = {"in", "on", "at", "by", "during", "last", "this", "earlier", "later", "early", "late", "after",
                 "before", "since", "following", "throughout", "when", "while", "once", "as", "speaking",
                 "writing", "talking", "responding", "asked", "born", "founded", "established", "having"}
#: Openings that are clauses of time or circumstance (with a verb of their own): no word of time needed.
_CLAUSE_OPENERS = {"when", "while", "after", "before", "since", "once", "as", "having", "speaking", "writing",
                   "talking", "responding", "asked", "born", "founded", "established"}
#: A word of time in the opening (a year, a month, a weekday, a time of day or of the year ...).
_TIME = re.compile(r"\b(?:1[5-9]\d\d|20\d\d|january|february|march|april|may|june|july|august|september|"
                   r"october|november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
                   r"morning|afternoon|evening|night|day|week|weekend|month|year|season|century|decade|time|"
                   r"summer|winter|spring|autumn|war|era|age|childhood|career|game|match|meeting|interview|"
                   r"statement|conference|speech|visit|trip|election|campaign)s?\b")
#: An opening that restricts what the rest claims ("In most cases", "In theory", "For women", "Excluding").
_SCOPE = re.compile(r"\b(?:not|never|no|theory|principle|some|most|many|part|certain|case|cases|rarely|"
                    r"sometimes|often|usually|general|hypothetically|possibly|likely|if|unless|only|except|"
                    r"exception|excluding|without|whether|provided|assuming|depending|pending|adjusted|"
                    r"according|estimate|view|opinion|event|rate)\b")
_OPENING = re.compile(r"^([A-Za-z][\w'-]*(?:\s+(?:addition|fact|the\s+time|that\s+time))?)\b([^,]{0,90}),\s+(?=\S)")
_NUMBER = re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|hundred|thousand|million|"
                     r"billion|dozen|half|twice|double|percent)\b", re.IGNORECASE)

#: Where a tail can be cut: a clause that adds to the first part without qualifying it.
_TAIL = re.compile(r",\s+(?:and|but|while|whereas|who|which|where|having|leaving|making|helping|bringing|"
                   r"taking|giving|including|despite|after|before|as)\b"
                   r"|\s+(?:despite|amid)\s+(?=\w)")
_NEVER_CUT = re.compile(r"\b(?:until|unless|if|than|only|except|exception|whether|without|provided|even|just)\b",
                        re.IGNORECASE)
#: A report or a quotation: what follows "police said" or sits in quotes is someone's claim, and cutting
#: the sentence could drop who made it.
_REPORTED = re.compile(r"[\"\u201c\u201d\u2018]|(?:^|\s)'|\b(?:said|says|told|tells|reported|reports|added|"
                       r"claimed|claims|stated|states|according|insisted|insists|believes|believed|admitted|"
                       r"admits|argued|argues|warned|warns|suggested|suggests|alleged|alleges)\b")
_SUBORDINATE_START = re.compile(r"^(?:when|while|after|before|although|though|if|as|since|because|once|despite|"
                                r"unless|until|whether)\b", re.IGNORECASE)
_VERB = re.compile(r"\b(?:is|are|was|were|be|been|has|have|had|will|would|can|could|may|might|must|should|"
                   r"did|does|do|said|says|told|made|took|gave|got|went|came|saw|found|won|lost|left|began|"
                   r"became|held|led|met|paid|put|ran|set|sold|spent|wrote|built|brought|bought|caught|"
                   r"taught|thought|sent|kept|felt|meant|sat|stood|won|drove|flew|grew|knew|shown|seen|taken|"
                   r"given|fell|fought|sang|hit|beat|struck|threw|wore|broke|chose|rose|spoke|stole|heard|"
                   r"laid|gone|become|begun|written|known|[a-z]{2,}ed)\b")
#: Words a kept first part cannot end in ("the day after ...", "for a while ..." are not clauses).
_FUNCTION_WORDS = {"the", "a", "an", "of", "to", "in", "on", "at", "by", "for", "with", "from", "and", "or",
                   "that", "this", "who", "which", "what", "how", "is", "was", "are", "were", "be",
                   "but", "day", "days", "year", "years", "week", "weeks", "month", "months", "time", "soon",
                   "shortly", "just", "long", "right", "even", "immediately", "moments", "minutes", "hours",
                   "seconds", "second", "minute", "hour", "only", "except", "named"}
_AGE = re.compile(r"(?<=[A-Za-z]),\s+(?:aged\s+)?\d{1,3},\s+(?=[a-z])")
MIN_KEPT = 6


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def drop_opening(sentence: str) -> str | None:
    """The sentence without a leading discourse word ("However, ...") or phrase of time ("In 1921, ...",
    "Last week, ...", "After the war ended, ...", "Speaking on Monday, ...") before the first comma; None
    when there is none, when the opening restricts what the rest claims (``_SCOPE``), when the rest holds a
    number (stated without its time it would say more), or when the comma does not end the opening."""
    match = _OPENING.match(sentence)
    if not match:
        return None
    first, opening = match.group(1).lower(), sentence[:match.end()].lower()
    discourse = first in _DISCOURSE and not match.group(2).strip()
    head = first.split()[0]
    if not discourse and (head not in _TIME_OPENERS or head not in _CLAUSE_OPENERS and not _TIME.search(opening)):
        return None  # a preposition needs a word of time after it: "In the UK" is a place
    if _SCOPE.search(opening):
        return None
    rest = sentence[match.end():]
    if not discourse and _NUMBER.search(rest):
        return None  # "In 2010, the firm had 50 employees": the 50 holds for 2010 only
    if head not in _CLAUSE_OPENERS and not discourse and _VERB.search(opening[len(first):]):
        return None  # "Now the firm is remaking it, to air in 2016": the comma ends the main clause
    words = rest.split()
    if len(words) < 4 or not rest[:1].isalpha() or words[0].endswith(",") or "," in " ".join(words[1:3]) \
            or re.match(r"(?:and|but|or|so|where|which|who|whose|however)\b", rest, re.IGNORECASE):
        return None  # "In Austin, Texas, the council": the opening goes on; "..., where he met": no clause
    return _sentence_case(rest)


def cut_tail(sentence: str) -> str | None:
    """The sentence up to the first clause that only adds to it (see the module's docstring), with its
    closing stop; None when there is none, when the sentence reports or quotes someone (``_REPORTED``: the
    cut could drop who said it), or the part kept is under ``MIN_KEPT`` words, has no verb, starts with a
    subordinate clause, ends in a list or in a word that needs what follows."""
    if _REPORTED.search(sentence) or _SUBORDINATE_START.match(sentence):
        return None
    for match in _TAIL.finditer(sentence):
        kept = sentence[:match.start()].rstrip(" ,;:")
        word = match.group(0).strip(" ,").lower()
        if word in ("who", "which", "where") and "," in sentence[match.end():] \
                or re.search(r",\s+(?:\w+\s+)?(?:who|whom|which|where|whose)\b[^,]*$", kept):
            continue  # a relative clause inside the sentence: the main verb comes after it
        if len(kept.split()) < MIN_KEPT or not _VERB.search(kept):
            continue
        after = sentence[match.end():]
        if _NEVER_CUT.search(after[:25]) or re.match(r"\s*(?:not|never|no)\b", after) \
                or _NEVER_CUT.search(" ".join(kept.split()[-3:])) or kept.split()[-1].lower() in _FUNCTION_WORDS:
            continue  # "..., but only if ...", "Smith, and not Jones, ...": the first part holds only with the rest
        if "," in kept and len(kept.rsplit(",", 1)[1].split()) <= 3:
            continue  # "founded by Smith, Jones, and Brown": a list, cut inside
        if kept.count("(") != kept.count(")"):
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
