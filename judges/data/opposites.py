"""Direction words and their opposites (rose/fell, north/south, won/lost, before/after ...), English only.

Two users: the rule-made training pairs turn one of these words to its opposite to make a claim the
evidence does not support (``calibration.verifier.perturb.flip_direction``), and the verifier checks a claim
against its opposite where the evidence uses the opposite word (``direction_contrasts``,
``judges.lm.verifier.Verifier(check_opposites=True)``): "Prices fell in May." read against "Prices rose
in May." is scored next to "Prices rose in May.", and the evidence's preference between the two decides.

Owns: the word list and the edits that turn a word to its opposite. Must not call a model.
"""

from __future__ import annotations

import re

ANTONYM_PAIRS = [
    ("increased", "decreased"), ("increase", "decrease"), ("increases", "decreases"),
    ("increasing", "decreasing"), ("rose", "fell"), ("rise", "fall"), ("rises", "falls"),
    ("risen", "fallen"), ("rising", "falling"), ("grew", "shrank"), ("won", "lost"), ("gained", "lost"),
    ("win", "lose"), ("wins", "loses"), ("winning", "losing"), ("before", "after"), ("north", "south"),
    ("east", "west"), ("northern", "southern"), ("eastern", "western"), ("larger", "smaller"),
    ("largest", "smallest"), ("bigger", "smaller"), ("biggest", "smallest"), ("more", "less"),
    ("fewer", "more"), ("above", "below"), ("first", "last"), ("older", "younger"), ("oldest", "youngest"),
    ("higher", "lower"), ("highest", "lowest"), ("earlier", "later"), ("earliest", "latest"),
    ("longer", "shorter"), ("longest", "shortest"), ("faster", "slower"), ("fastest", "slowest"),
    ("heavier", "lighter"), ("better", "worse"), ("best", "worst"), ("warmer", "colder"),
    ("hotter", "colder"), ("maximum", "minimum"), ("majority", "minority"), ("upper", "lower"),
    ("opened", "closed"), ("inside", "outside"), ("imported", "exported"), ("imports", "exports"),
    ("ahead", "behind"), ("sunrise", "sunset"),
]
#: Each word's opposite (a word in two pairs keeps its first: "lost" -> "won", "more" -> "less").
ANTONYMS: dict[str, str] = {}
for _a, _b in ANTONYM_PAIRS:
    ANTONYMS.setdefault(_a, _b)
    ANTONYMS.setdefault(_b, _a)
DIRECTION_WORD = re.compile(r"\b(" + "|".join(sorted(map(re.escape, ANTONYMS), key=len, reverse=True)) + r")\b",
                            re.IGNORECASE)


def keep_case(word: str, like: str) -> str:
    """``word`` capitalised as ``like`` is (its first letter)."""
    return word[0].upper() + word[1:] if like[:1].isupper() else word


def match_case(word: str, like: str) -> str:
    """``word`` in ``like``'s case: all capitals when ``like`` is (and longer than a letter), else as
    ``keep_case``."""
    return word.upper() if like.isupper() and len(like) > 1 else keep_case(word, like)


def opposite(word: str) -> str:
    """The opposite of a direction word (``DIRECTION_WORD`` matched it), in its case: "Rose" -> "Fell",
    "NORTH" -> "SOUTH"."""
    return match_case(ANTONYMS[word.lower()], word)


def direction_flips(claim: str) -> list[str]:
    """The claim with one direction word turned to its opposite, one variant for each of its direction words,
    in the claim's order (the rule-made training pairs pick one: ``perturb.flip_direction``)."""
    return [claim[:m.start()] + opposite(m.group(1)) + claim[m.end():] for m in DIRECTION_WORD.finditer(claim)]


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"\b{re.escape(word)}\b", text, re.IGNORECASE) is not None


def direction_contrasts(claim: str, evidence: str) -> list[str]:
    """The claim with one direction word turned to its opposite, for each of its direction words whose
    opposite ``evidence`` has and which ``evidence`` itself lacks (the claim says "fell" where the evidence
    says "rose"), in the claim's order, without repeats. Empty when there is none, which keeps the check off
    most text: it rarely fires on natural responses (docs/verifier-log.md, "Opposites round 2")."""
    out = [claim[:m.start()] + opposite(m.group(1)) + claim[m.end():] for m in DIRECTION_WORD.finditer(claim)
           if _has_word(evidence, ANTONYMS[m.group(1).lower()]) and not _has_word(evidence, m.group(1))]
    return [text for text in dict.fromkeys(out) if text != claim]
