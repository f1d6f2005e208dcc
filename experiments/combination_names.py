"""Round 9 of the shipped combination: does its specifics input read a name without its possessive or contraction
ending ("Ferrin's" as Ferrin, "I'm" as no name at all)?

    .venv/bin/python experiments/combination_names.py run       # every set scored by H and I, cached (~20 min)
    .venv/bin/python experiments/combination_names.py decide    # the rule in docs/verifier-log.md, round 9
    .venv/bin/python experiments/combination_names.py decide --write judges/lm/weights/faithfulness-combination.json

H is the shipped combination of round 8: its word signals read the verifier's units, and a name as written. I is
the same file and weights with ``name_endings="strip"``: "Saturday's" is found where the evidence says "Saturday",
and "I'm" after a comma is no longer a name the evidence lacks. ``run`` scores every set once with the shipped
judge and derives both from the same verdicts (``combination_units.Scorer``); the verifier mean and the cheap
signals come along (specifics supported already reads names without their endings). ``decide`` applies the
round's rule to the sets written for it and prints every set's numbers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.verifier.contrastive import FIRST_SEVEN_CONTRASTIVE  # noqa: E402
from combination_units import reading_round, run  # noqa: E402
from combination_units import READ as READ_BEFORE  # noqa: E402
from combination_units import UNREAD as ROUND_EIGHT  # noqa: E402

#: The natural sets written for this round (or before it and read by none), and its contrastive set.
UNREAD = ("dialogue-eighth", "summaries-sixth")
UNREAD_CONTRASTIVE = "contrastive-eighth"
#: The contrastive sets this round reads (later ones stay unread here).
CONTRASTIVE = (*FIRST_SEVEN_CONTRASTIVE, "eighth")
READ = (*ROUND_EIGHT, *READ_BEFORE)
#: H (round 8, shipped) and I (names read without their endings), both with the shipped file's weights.
READS = {"H": {"words_read": "units", "name_endings": "keep"}, "I": {"words_read": "units", "name_endings": "strip"}}
#: The distractor sets: three read by earlier rounds, the fourth written before this round and read by none.
DISTRACTORS = ("first", "second", "third", "fourth")


def decide(out: Path, write: str | None) -> int:
    """The rule in docs/verifier-log.md, round 9, and every set's numbers."""
    return reading_round(out, write, old="H", new="I", unread=UNREAD, unread_contrastive=UNREAD_CONTRASTIVE,
                         read=READ, contrastive=CONTRASTIVE,
                         dialogue=("third", "fourth", "fifth", "sixth", "seventh", "eighth"), distractor_set="fourth",
                         changes={"candidate": "I", "name_endings": "strip",
                                  "name_endings_decided_on": [*UNREAD, UNREAD_CONTRASTIVE, "distractors-fourth"],
                                  "name_endings_rule": 'docs/verifier-log.md, "A shipped combination, round 9"'})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "decide"))
    parser.add_argument("--out", default="runs/combination_round9")
    parser.add_argument("--sets", nargs="*", help="with run: only these sets (default: all of them)")
    parser.add_argument("--write", help="with decide: when I passes, name name_endings='strip' in this combination "
                        "file (the shipped one is judges/lm/weights/faithfulness-combination.json)")
    args = parser.parse_args(argv)
    if args.step == "run":
        run(Path(args.out), args.sets or [*UNREAD, UNREAD_CONTRASTIVE, *READ], READS, DISTRACTORS)
        return 0
    return decide(Path(args.out), args.write)


if __name__ == "__main__":
    raise SystemExit(main())
