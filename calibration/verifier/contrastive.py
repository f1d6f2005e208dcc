"""The hand-written test sets of the verifier, in ``sets/`` beside this file, each with a page saying who wrote
it, how, and what it decided:

  contrastive sets (CONTRASTIVE.md)  responses that copy their evidence's words but change one fact (a number,
                                     a name, a negation, a direction), against faithful paraphrases and copies
  distractor sets (DISTRACTORS.md)   a claim the evidence contradicts and one it supports, each scored against
                                     the evidence alone and with three same-topic sentences that do neither
  swap sets (SWAPS.md)               claims that swap one entity or quantity within the same relation, with a
                                     shared-word sentence about another subject beside each
  dialogue sets (DIALOGUE_FRESH.md, ...)     chat replies to a knowledge text, faithful or not, talk mixed in
  summary sets (SUMMARIES_FRESH.md, ...)     summaries of written articles, faithful or changed in one fact

Each set was written by a helper told nothing of the method, for a round whose rule was written before the set was
registered here (the last four, dialogue_fifteenth, summaries_thirteenth, contrastive_fourteenth and
distractors_eleventh, for round 15 of the shipped combination).

Owns: reading those sets. Nothing that ships is fitted or trained on them: they are tests (the first contrastive set
is watched while the verifier trains, never trained on). An experiment may fit a user's recipe on the dialogue sets
to measure it (experiments/label_efficient.py, calibration_judge_first.py); what it fits is thrown away.
"""

from __future__ import annotations

import json
from importlib import resources

CONTRASTIVE_SETS = {"first": "contrastive.jsonl"} | {
    w: f"contrastive_{w}.jsonl"
    for w in ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
              "twelfth", "thirteenth", "fourteenth")}
#: The contrastive sets the combination's rounds 1 to 8 read; the eighth was written for round 9.
FIRST_SEVEN_CONTRASTIVE = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh")
DISTRACTOR_SETS = {"first": "distractors.jsonl"} | {
    w: f"distractors_{w}.jsonl"
    for w in ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
              "twelfth")}
SWAP_SETS = {"first": "swaps.jsonl"} | {w: f"swaps_{w}.jsonl" for w in ("second", "third", "fourth", "fifth", "sixth")}
DIALOGUE_SETS = {w: f"dialogue_{w}.jsonl" for w in ("fresh", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                                                      "ninth", "tenth", "eleventh", "twelfth", "thirteenth",
                                                      "fourteenth", "fifteenth")}
SUMMARY_SETS = {w: f"summaries_{w}.jsonl" for w in ("fresh", "second", "third", "fourth", "fifth", "sixth", "seventh",
                                                     "eighth", "ninth", "tenth", "eleventh", "twelfth", "thirteenth",
                                                     "fourteenth")}


def _read(name: str) -> list[dict]:
    text = (resources.files("calibration.verifier") / "sets" / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_contrastive(which: str = "first") -> list[dict]:
    """A contrastive set ("first" is watched while training; CONTRASTIVE.md): evidence, response, label, kind."""
    if which not in CONTRASTIVE_SETS:
        raise ValueError(f"load_contrastive: which must be one of {sorted(CONTRASTIVE_SETS)}, got {which!r}")
    return _read(CONTRASTIVE_SETS[which])


def load_distractors(which: str = "first") -> list[dict]:
    """A distractor set (DISTRACTORS.md; the second to eighth, DISTRACTORS_SECOND.md to DISTRACTORS_EIGHTH.md, each
    for a round after the sets before it were read): id, evidence, contradicted, kind, supported, distractors."""
    if which not in DISTRACTOR_SETS:
        raise ValueError(f"load_distractors: which must be one of {sorted(DISTRACTOR_SETS)}, got {which!r}")
    return _read(DISTRACTOR_SETS[which])


def load_swaps(which: str = "first") -> list[dict]:
    """A swap set (SWAPS.md; the second, SWAPS_SECOND.md, for the round after the first was read): id, kind,
    evidence, contradicted, supported, distractor."""
    if which not in SWAP_SETS:
        raise ValueError(f"load_swaps: which must be one of {sorted(SWAP_SETS)}, got {which!r}")
    return _read(SWAP_SETS[which])


def load_dialogue(which: str = "fresh") -> list[dict]:
    """A dialogue set (DIALOGUE_FRESH.md; the third to fifteenth, DIALOGUE_THIRD.md to DIALOGUE_FIFTEENTH.md,
    each written for a round after the sets before it were read): id, topic, knowledge, user_input, reply, label,
    kind. Talk passes there: a reply is faithful when every fact it states is in the knowledge."""
    if which not in DIALOGUE_SETS:
        raise ValueError(f"load_dialogue: which must be one of {sorted(DIALOGUE_SETS)}, got {which!r}")
    return _read(DIALOGUE_SETS[which])


def load_summaries(which: str = "fresh") -> list[dict]:
    """A summary set (SUMMARIES_FRESH.md; the second to thirteenth, SUMMARIES_SECOND.md to SUMMARIES_THIRTEENTH.md, each
    for a round after the sets before it were read; the sixth holds 120 summaries): id, article_id, article,
    summary, label, kind."""
    if which not in SUMMARY_SETS:
        raise ValueError(f"load_summaries: which must be one of {sorted(SUMMARY_SETS)}, got {which!r}")
    return _read(SUMMARY_SETS[which])
