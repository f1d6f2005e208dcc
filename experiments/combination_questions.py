"""Round 15 of the shipped combination: is a unit the rules read as a question set aside whatever the talk
classifier says?

    .venv/bin/python experiments/combination_questions.py run --sets read   # the read sets, S and Q (~25 min)
    .venv/bin/python experiments/combination_questions.py look              # the read families: go on or stop
    .venv/bin/python experiments/combination_questions.py run               # then the sets written for the round
    .venv/bin/python experiments/combination_questions.py decide            # the rule in docs/verifier-log.md, round 15
    .venv/bin/python experiments/combination_questions.py decide --write judges/lm/weights/faithfulness-combination.json

S is the shipped file as round 14 left it: the learned classifier alone decides which units are talk, so a question
back it keeps ("Did she give it a name?") caps a faithful reply with the low P the verifier gives a question. Q is
the same file and weights with ``questions="rules"``: a unit ``judges.data.claim_units`` reads as a question holding
no claim is set aside whatever the classifier says (a question presupposing a fact stays the classifier's). ``run``
scores every set once with the shipped judge and derives both readings from the same verdicts
(``combination_units.Scorer``); ``look`` prints the read sets only; ``decide`` applies the round's rule to the sets
written for it and prints every set's numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from combination_units import (  # noqa: E402
    distractor_table,
    faithful_by_kind,
    natural_table,
    run_step,
    settle,
    unread_rule,
)

#: The sets written for this round, read by none before it.
UNREAD = ("dialogue-fifteenth", "summaries-thirteenth")
UNREAD_CONTRASTIVE = "contrastive-fourteenth"
UNREAD_DISTRACTORS = "eleventh"
DIALOGUE = ("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth",
            "thirteenth", "fourteenth")
SUMMARIES = ("fresh", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
             "twelfth")
CONTRASTIVE = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
               "eleventh", "twelfth", "thirteenth")
READ = (*(f"dialogue-{w}" for w in DIALOGUE), *(f"summaries-{w}" for w in SUMMARIES),
        *(f"contrastive-{w}" for w in CONTRASTIVE), "dialogue-fresh", "begin-wow", "begin-cmu-tc", "q2", "summeval")
DISTRACTORS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
               UNREAD_DISTRACTORS)
#: What the shipped file reads after round 14, fixed, so that S reads the same after the round writes the file.
SHIPPED = {"words_read": "units", "name_endings": "strip", "specifics_match": "whole"}
READS = {"S": SHIPPED | {"questions": "classifier"}, "Q": SHIPPED | {"questions": "rules"}}
NAMES = (*READS, "verifier_mean")
#: The read written dialogue sets' mean must gain this much for the round to go on to the sets written for it.
READ_DIALOGUE_GAIN = 0.002


def families(natural: dict, name: str) -> dict[str, float]:
    """The mean ROC-AUC of ``name`` over each read family: the written dialogue, summary and contrastive sets."""
    return {family: float(np.mean([natural[f"{family}-{w}"][name] for w in ordinals]))
            for family, ordinals in (("dialogue", DIALOGUE), ("summaries", SUMMARIES), ("contrastive", CONTRASTIVE))}


def read_gain(natural: dict) -> float:
    found = {name: families(natural, name)["dialogue"] for name in ("S", "Q")}
    return found["Q"] - found["S"]


def look(out: Path) -> int:
    """The read sets only: every set, the three families' means, and whether the round goes on."""
    natural = natural_table(out, READ, NAMES, ())
    print("\n| score | " + " | ".join(families(natural, "S")) + " |\n|---|---:|---:|---:|")
    for name in NAMES:
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in families(natural, name).values()) + " |")
    gain = read_gain(natural)
    print(f"\nread written dialogue sets, Q - S: {gain:+.4f} "
          + ("(goes on)" if gain >= READ_DIALOGUE_GAIN else f"(under +{READ_DIALOGUE_GAIN}: stop)"))
    return 0


def decide(out: Path, write: str | None) -> int:
    """The rule in docs/verifier-log.md, round 15, and every set's numbers."""
    natural = natural_table(out, (*UNREAD, UNREAD_CONTRASTIVE, *READ), NAMES, (*UNREAD, UNREAD_CONTRASTIVE))
    sets = [f"contrastive-{w}" for w in (*CONTRASTIVE, "fourteenth")]
    print(f"\n{len(sets)} contrastive sets' mean: " + ", ".join(
        f"{k} {np.mean([natural[n][k] for n in sets]):.4f}" for k in NAMES))
    faithful_by_kind(out, (*DIALOGUE, "fifteenth"), NAMES)
    distractors = json.loads((out / "distractors.json").read_text(encoding="utf-8"))
    distractor_table(distractors, NAMES, UNREAD_DISTRACTORS)
    blocked = unread_rule(natural, distractors, old="S", new="Q", unread=UNREAD, guards=(UNREAD_CONTRASTIVE,),
                          distractor_set=UNREAD_DISTRACTORS)
    dialogue = natural["dialogue-fifteenth"]
    if dialogue["Q"] < dialogue["S"]:
        blocked.append(f"dialogue-fifteenth: Q {dialogue['Q']:.4f} < S {dialogue['S']:.4f}")
    if read_gain(natural) < READ_DIALOGUE_GAIN:
        blocked.append(f"read written dialogue sets: Q - S {read_gain(natural):+.4f} < +{READ_DIALOGUE_GAIN}")
    return settle(out, natural, distractors, blocked, old="S", new="Q", unread=UNREAD, write=write,
                  changes={"questions": "rules",
                           "questions_decided_on": [*UNREAD, UNREAD_CONTRASTIVE, f"distractors-{UNREAD_DISTRACTORS}"],
                           "questions_rule": 'docs/verifier-log.md, "A shipped combination, round 15"'})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "look", "decide"))
    parser.add_argument("--out", default="runs/combination_round15")
    parser.add_argument("--sets", choices=("read", "all"), default="all",
                        help="with run: 'read' scores the read sets only, no distractor set (for look)")
    parser.add_argument("--write", help="with decide: when Q passes, name questions='rules' in this combination file "
                        "(the shipped one is judges/lm/weights/faithfulness-combination.json)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.step == "run":
        run_step(out, args.sets, READ, (*UNREAD, UNREAD_CONTRASTIVE), READS, DISTRACTORS)
        return 0
    return look(out) if args.step == "look" else decide(out, args.write)


if __name__ == "__main__":
    raise SystemExit(main())
