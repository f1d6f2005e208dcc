"""The hand-written contrastive test sets (CONTRASTIVE.md): responses that copy their evidence's words but
change one fact (a number, a name, a negation, a direction), against faithful paraphrases in other words and
copies. Each set was written by a helper to decide one measurement; CONTRASTIVE.md says who wrote it, how, and
what it decided.

Owns: reading the sets shipped beside this file. Must not fit or train on them: they are tests only (the
first is watched while the verifier trains, never trained on).
"""

from __future__ import annotations

import json
from importlib import resources

CONTRASTIVE_SETS = {"first": "contrastive.jsonl"} | {
    w: f"contrastive_{w}.jsonl" for w in ("second", "third", "fourth", "fifth", "sixth", "seventh")}


def load_contrastive(which: str = "first") -> list[dict]:
    """A hand-written test set ("first" is watched while training; CONTRASTIVE.md): evidence, response, label, kind."""
    if which not in CONTRASTIVE_SETS:
        raise ValueError(f"load_contrastive: which must be one of {sorted(CONTRASTIVE_SETS)}, got {which!r}")
    lines = (resources.files("calibration.data") / CONTRASTIVE_SETS[which]).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]
