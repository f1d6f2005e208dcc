"""The hand-written test sets of the verifier, in ``sets/`` beside this file, each with a page saying who wrote
it, how, and what it decided:

  contrastive sets (CONTRASTIVE.md)  responses that copy their evidence's words but change one fact (a number,
                                     a name, a negation, a direction), against faithful paraphrases and copies
  distractor sets (DISTRACTORS.md)   a claim the evidence contradicts and one it supports, each scored against
                                     the evidence alone and with three same-topic sentences that do neither
  the swap set (SWAPS.md)            claims that swap one entity or quantity within the same relation, with a
                                     shared-word sentence about another subject beside each

Owns: reading those sets. Must not fit or train on them: they are tests only (the first contrastive set is
watched while the verifier trains, never trained on).
"""

from __future__ import annotations

import json
from importlib import resources

CONTRASTIVE_SETS = {"first": "contrastive.jsonl"} | {
    w: f"contrastive_{w}.jsonl" for w in ("second", "third", "fourth", "fifth", "sixth", "seventh")}
DISTRACTOR_SETS = {"first": "distractors.jsonl", "second": "distractors_second.jsonl"}


def _read(name: str) -> list[dict]:
    text = (resources.files("calibration.verifier") / "sets" / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_contrastive(which: str = "first") -> list[dict]:
    """A contrastive set ("first" is watched while training; CONTRASTIVE.md): evidence, response, label, kind."""
    if which not in CONTRASTIVE_SETS:
        raise ValueError(f"load_contrastive: which must be one of {sorted(CONTRASTIVE_SETS)}, got {which!r}")
    return _read(CONTRASTIVE_SETS[which])


def load_distractors(which: str = "first") -> list[dict]:
    """A distractor set (DISTRACTORS.md): id, evidence, contradicted, kind, supported, distractors."""
    if which not in DISTRACTOR_SETS:
        raise ValueError(f"load_distractors: which must be one of {sorted(DISTRACTOR_SETS)}, got {which!r}")
    return _read(DISTRACTOR_SETS[which])


def load_swaps() -> list[dict]:
    """The swap set (SWAPS.md): id, kind, evidence, contradicted, supported, distractor."""
    return _read("swaps.jsonl")
