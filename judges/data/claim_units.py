"""Which sentences of a dialogue reply are checkable claims, and the claim inside a hedge or a question.

    claim_units("Me too. The tower was finished in 1889.")
    -> [Unit("Me too.", "backchannel", None), Unit("The tower was finished in 1889.", "claim", "The tower ...")]

A reply mixes facts with talk. Each sentence is one unit of a kind:

    claim        a statement of fact to check (the default)
    question     asks something ("Have you ever been to Paris?")
    greeting     hello, thanks, goodbye, you're welcome
    backchannel  a reaction with no content of its own ("Me too.", "Haha, that's a surprise.", "I agree.")
    opinion      the speaker's taste ("I love jazz.", "It is my favorite.")
    experience   the speaker's own life ("I went there last year.")

Two kinds of sentence hold a claim inside them, which ``claim`` carries:
    a hedge       "I'm not sure, but I think it was finished in 1889."  -> "it was finished in 1889."
    a presupposing question  "Did you know that it was finished in 1889?"  -> "it was finished in 1889."
A leading reaction is cut from a statement ("Yeah, the tower is tall." -> "the tower is tall."). An opinion or
experience carrying a number or a relative clause ("I like their album, which was released in 2007.") stays
a claim: the fact riding on it is checked.

The rules read words, not a parse: sentence-final "?" and a leading auxiliary or wh-word for questions; short
word lists for greetings, reactions and hedges; a first-person subject with a verb of taste or of doing for
opinions and experiences. A sentence none of them fits is a claim, so a fact is never set aside by a rule
that did not recognise it. English only; text in other scripts is all claims.

Owns: the unit kinds and the rules. Must not score (``judges.metrics.rag.verified`` does).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from judges.data.language import has_cjk, split_sentences

#: The kinds a unit can be; only "claim" is checked.
KINDS = ("claim", "question", "greeting", "backchannel", "opinion", "experience")
#: The kind of a unit the rules took for a claim and a learned classifier set aside.
LEARNED_TALK = "talk"
#: Who decides a question when a classifier decides talk: the classifier alone ("classifier"), or the rules too
#: ("rules": a plain question, ``plain_question``, is set aside whatever the classifier says).
QUESTIONS = ("classifier", "rules")


class Unit(NamedTuple):
    text: str  #: the sentence as it stands in the reply
    kind: str  #: one of ``KINDS``
    claim: str | None  #: the text to check (the sentence, or the fact inside a hedge or question); None if none


# A sentence opening with one of these (and a comma or the end) starts with a reaction, cut from the claim.
_REACTIONS = ("yes", "yeah", "yep", "yup", "no", "nope", "well", "oh", "ah", "aha", "wow", "haha", "hahaha",
              "lol", "hmm", "hm", "um", "uh", "sure", "ok", "okay", "right", "true", "indeed", "so", "cool",
              "nice", "great", "awesome", "interesting", "really", "exactly", "absolutely", "definitely", "of course",
              "i see", "that's true", "that is true", "that's right", "that is right", "me too", "me neither",
              "i agree", "good", "gotcha", "ha", "oh wow", "oh yes", "oh yeah", "oh no", "yes indeed")
_OPENING_REACTION = re.compile(r"^(?:" + "|".join(sorted(map(re.escape, _REACTIONS), key=len, reverse=True))
                               + r")\s*(?:[,!.;:-]+\s*|$)", re.I)
_GREETING = re.compile(r"^(?:hi|hello|hey|greetings|good (?:morning|afternoon|evening|night)|bye|goodbye|"
                       r"see you|take care|have a (?:nice|good|great) (?:day|one|night)|nice (?:to meet|talking|"
                       r"chatting)|thanks?(?: you)?(?: so much| a lot)?|thank you|you'?re welcome|you are welcome|"
                       r"no problem|my pleasure)\b", re.I)
# Words a reaction is made of: a sentence of nothing else (with pronouns and small words) has no content.
_REACTION_WORDS = set(" ".join(_REACTIONS).split()) | {
    "agree", "agreed", "amazing", "bad", "believe", "fun", "funny", "glad", "guess", "incredible", "know", "like",
    "lovely", "neat", "sad", "sounds", "surprise", "surprised", "surprising", "think", "too", "wonderful", "crazy",
    "insane", "impressive", "fascinating", "weird", "strange", "love", "lot", "pretty", "quite", "very", "much",
    "so", "such", "what", "how", "hear", "heard", "didn't", "did", "not", "never", "knew", "sound", "seems",
    "good", "great", "kind", "sort", "fact", "though", "thing", "things", "idea", "wish", "hope", "sorry"}
_SMALL = {"i", "me", "my", "you", "your", "we", "it", "it's", "that", "that's", "this", "is", "was", "are", "a",
          "an", "the", "to", "of", "and", "but", "be", "do", "does", "have", "has", "had", "am", "i'm", "there",
          "there's", "its", "one", "all", "just", "also", "as", "for", "in", "on", "at", "would", "could", "can",
          "will", "must", "be", "been", "out"}
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")

# A hedge in front of a fact: "I'm not sure, but (I think) X", "I think X", "I believe that X", "maybe X".
_HEDGE = re.compile(
    r"^(?:(?:i'?m|i am) not (?:sure|certain)|i don'?t know|i do not know|not sure)\s*(?:,\s*)?(?:but\s+)?"
    r"(?:i\s+(?:do\s+)?(?:think|believe|know|guess|heard|read|recall|remember)(?:\s+that)?\s+)?"
    r"|^i\s+(?:do\s+)?(?:think|believe|know|guess|suppose|heard|read|recall|remember)(?:\s+that)?\s+"
    r"|^(?:maybe|perhaps|probably|apparently|i'?m pretty sure|i am pretty sure|i'?m sure|if i recall correctly"
    r"|as far as i know|from what i know|from what i'?ve read)\s*,?\s*(?:that\s+)?", re.I)
# A question presupposing a fact: "Did you know (that) X?", "Have you heard that X?".
_PRESUPPOSING = re.compile(r"^(?:did|do) you (?:know|realize|realise)(?: that)?\s+|^have you heard(?: that)?\s+"
                           r"|^(?:did|do) you hear(?: that)?\s+|^(?:is|was) it true that\s+", re.I)
_QUESTION_START = re.compile(r"^(?:do|does|did|have|has|had|are|is|was|were|can|could|would|will|should|shall|"
                             r"may|might|what|which|who|whom|whose|when|where|why|how)\b(?!\s*,)", re.I)
# A question that leans on a fact: a negative auxiliary ("Isn't Kilimanjaro in Tanzania?", "..., wasn't it?"), a
# closing "right?", or "you know".
_LEANING = re.compile(r"\b(?:is|are|was|were|do|does|did|could|would|have|has|had|should|must)n't\b|\b(?:won|can)'?t\b"
                      r"|,\s*right\s*\?\s*$|\byou know\b", re.I)
# The speaker about themselves: a first-person subject with a verb of taste (opinion) or of doing (experience).
_OPINION = re.compile(r"^(?:i|we)\s+(?:really\s+|also\s+|just\s+|do\s+|don'?t\s+|do not\s+|absolutely\s+)?"
                      r"(?:love|like|liked|loved|enjoy|enjoyed|hate|hated|prefer|adore|dislike|am a (?:big )?fan|"
                      r"'?m a (?:big )?fan|find|found it|think (?:it|that|they|he|she)'?s?\s+(?:is|was|are)?\s*"
                      r"(?:so|very|really|pretty)?\s*(?:cool|great|interesting|amazing|awesome|fun|good|bad|nice))\b"
                      r"|\b(?:my|our) (?:favou?rite|favou?rites)\b|\bis (?:the )?best\b(?!\s+known)", re.I)
_EXPERIENCE = re.compile(r"^(?:i|we)\s+(?:(?:have|had|'ve|'d)\s+(?:never\s+|always\s+|also\s+|just\s+)?"
                         r"(?:been|seen|visited|gone|played|watched|heard|read|tried|had|lived|worked|met|used)|"
                         r"(?:went|visited|played|watched|saw|lived|grew up|worked|studied|tried|used to|go|play|"
                         r"watch|live|work|study|own|owned|have a|had a|am going|'m going|was|am|'m|were)\b)", re.I)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("’", "'"))


def _contentless(text: str) -> bool:
    """Nothing but reaction words and small words, with no number or name in it."""
    if re.search(r"\d", text) or re.search(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+", text.strip()[1:]):
        return False
    words = _words(text)
    return bool(words) and all(w in _REACTION_WORDS or w in _SMALL for w in words)


def _normalised(text: str) -> str:
    """Tokenised dialogue text as written ("i ' m not sure , but" -> "i'm not sure, but")."""
    text = text.replace("’", "'")
    text = re.sub(r"\s+'\s*(?=[a-z])", "'", text)
    return re.sub(r"\s+([,.!?;:])", r"\1", text).strip()


def _unit(sentence: str) -> Unit:
    original = sentence.strip()
    if has_cjk(original):
        return Unit(sentence, "claim", original)
    text = written = _normalised(original)
    asked = text.endswith("?")
    body = _OPENING_REACTION.sub("", text, count=1).strip()
    while body and body != text and _OPENING_REACTION.match(body):  # "oh yeah, wow, ..."
        text, body = body, _OPENING_REACTION.sub("", body, count=1).strip()
    if not body or _contentless(body):
        return Unit(sentence, "question" if asked else "backchannel", None)
    if _GREETING.match(body) and (len(_words(body)) <= 6 or _contentless(_GREETING.sub("", body, count=1))):
        return Unit(sentence, "greeting", None)
    presupposed = _PRESUPPOSING.match(body)
    if presupposed:
        inside = body[presupposed.end():].rstrip("?").strip()
        return Unit(sentence, "question", (inside + ".") if inside and not _contentless(inside) else None)
    if asked or (_QUESTION_START.match(body) and re.match(r"^\w+\s+(?:you|we|they|he|she|it|i)\b", body, re.I)):
        return Unit(sentence, "question", None)
    hedged = _HEDGE.match(body)
    if hedged:
        inside = body[hedged.end():].strip()
        if inside and not _contentless(inside):
            return Unit(sentence, "claim", inside)
        return Unit(sentence, "backchannel", None)
    specific = re.search(r"\d|,\s*(?:which|who|where)\b", body)  # a fact riding on the speaker's words
    if _OPINION.search(body) and not specific:
        return Unit(sentence, "opinion", None)
    if _EXPERIENCE.match(body) and not specific:
        return Unit(sentence, "experience", None)
    return Unit(sentence, "claim", original if body == written else body)


def plain_question(unit: Unit) -> bool:
    """A unit asking without asserting: a question holding no claim, ending in "?", and not leaning on a fact (a
    negative auxiliary, a closing "right?", "you know"). "Was she looking right at you?" is one; "Isn't the Titanic
    built in Belfast?" is not: it asserts what it asks, and a reader labels it checkable."""
    text = _normalised(unit.text)
    return unit.kind == "question" and unit.claim is None and text.endswith("?") and not _LEANING.search(text)


def claim_units(text: str) -> list[Unit]:
    """Each sentence of ``text`` (``split_sentences``) as a ``Unit``: its kind, and the claim it holds. A
    sentence of tokenised text ("you ' re welcome . they ' re ...") is split again once written as usual."""
    units = []
    for sentence in split_sentences(text):
        parts = split_sentences(_normalised(sentence)) if not has_cjk(sentence) else [sentence]
        units += [_unit(part) for part in (parts if len(parts) > 1 else [sentence])]
    return units


def checkable_claims(text: str, checkable: Callable[[list[str]], Sequence[bool]] | None = None,
                     questions: str = "classifier") -> tuple[list[str], list[dict[str, str]]]:
    """``(claims, set_aside)``: the claims of ``text``'s checkable units, and each unit holding none as
    ``{"sentence", "kind"}``, so a metric can say what it left unchecked and why.

    ``checkable`` (sentences -> one bool each; ``judges.lm.talk.TalkClassifier.checkable``) decides instead of
    the rules which units hold a claim. A unit it keeps checks the rules' claim where they found one (the fact
    inside a hedge), else the sentence; a unit it sets aside that the rules took for a claim is kind "talk".
    With ``questions="rules"`` a plain question (``plain_question``: "Have you been?") is set aside even where
    ``checkable`` keeps it: it asserts nothing to check. A question presupposing a fact ("Did you know that X?") or
    leaning on one ("Isn't X?", "X, right?") is still the classifier's to decide."""
    if questions not in QUESTIONS:
        raise ValueError(f"checkable_claims: questions={questions!r} is not one of {list(QUESTIONS)}")
    units = claim_units(text)
    if checkable is None:
        return ([u.claim for u in units if u.claim],
                [{"sentence": u.text.strip(), "kind": u.kind} for u in units if not u.claim])
    decided = list(checkable([u.text.strip() for u in units])) if units else []
    if questions == "rules":
        decided = [keep and not plain_question(u) for u, keep in zip(units, decided)]
    claims = [u.claim or u.text.strip() for u, keep in zip(units, decided) if keep]
    return claims, [{"sentence": u.text.strip(), "kind": LEARNED_TALK if u.claim else u.kind}
                    for u, keep in zip(units, decided) if not keep]
