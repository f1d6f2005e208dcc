"""Round 11 of the shipped combination: does its specifics input find a name or number only as a whole word or
number ("12" not inside "120", "Jones" not inside "Jonestown"), and leave a lone capital letter out?

    .venv/bin/python experiments/combination_matching.py run       # every set scored by S and K, cached (~25 min)
    .venv/bin/python experiments/combination_matching.py decide    # the rule in docs/verifier-log.md, round 11
    .venv/bin/python experiments/combination_matching.py decide --write judges/lm/weights/faithfulness-combination.json

S is the shipped combination after round 10: it finds a specific anywhere in the verifier's units, so a changed
"12" passes where the evidence says "120", and the "C" of "30 °C" is a name found inside any word with a c. K is
the same file and weights with ``specifics_match="whole"``. ``run`` scores every set once with the shipped judge
and derives both from the same verdicts (``combination_units.Scorer``); the verifier mean and the cheap signals come
along (specifics supported already matches whole words). ``decide`` applies the round's rule to the sets written
for it and prints every set's numbers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from combination_refit import CONTRASTIVE as ROUND_TEN_CONTRASTIVE  # noqa: E402
from combination_refit import READ as READ_BEFORE  # noqa: E402
from combination_refit import UNREAD as ROUND_TEN  # noqa: E402
from combination_units import reading_round, run  # noqa: E402

#: The natural sets written for this round, and its contrastive set.
UNREAD = ("dialogue-tenth", "summaries-eighth")
UNREAD_CONTRASTIVE = "contrastive-tenth"
#: The contrastive sets this round reads.
CONTRASTIVE = (*ROUND_TEN_CONTRASTIVE, "tenth")
READ = tuple(dict.fromkeys((*ROUND_TEN, "contrastive-ninth", *READ_BEFORE)))
#: S (round 10, shipped) and K (specifics found as whole words), both with the shipped file's weights.
READS = {"S": {"words_read": "units", "name_endings": "strip", "specifics_match": "substring"},
         "K": {"words_read": "units", "name_endings": "strip", "specifics_match": "whole"}}
#: The distractor sets: five read by earlier rounds, the sixth written for this one.
DISTRACTORS = ("first", "second", "third", "fourth", "fifth", "sixth")


def decide(out: Path, write: str | None) -> int:
    """The rule in docs/verifier-log.md, round 11, and every set's numbers."""
    return reading_round(out, write, old="S", new="K", unread=UNREAD, unread_contrastive=UNREAD_CONTRASTIVE,
                         read=READ, contrastive=CONTRASTIVE,
                         dialogue=("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"),
                         distractor_set="sixth",
                         changes={"candidate": "K", "specifics_match": "whole",
                                  "specifics_match_decided_on": [*UNREAD, UNREAD_CONTRASTIVE, "distractors-sixth"],
                                  "specifics_match_rule": 'docs/verifier-log.md, "A shipped combination, round 11"'})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "decide"))
    parser.add_argument("--out", default="runs/combination_round11")
    parser.add_argument("--sets", nargs="*", help="with run: only these sets (default: all of them)")
    parser.add_argument("--distractors", nargs="*", default=list(DISTRACTORS),
                        help="with run: the distractor sets scored (default: all six)")
    parser.add_argument("--write", help="with decide: when K passes, name specifics_match='whole' in this "
                        "combination file (the shipped one is judges/lm/weights/faithfulness-combination.json)")
    args = parser.parse_args(argv)
    if args.step == "run":
        run(Path(args.out), args.sets or [*UNREAD, UNREAD_CONTRASTIVE, *READ], READS, args.distractors)
        return 0
    return decide(Path(args.out), args.write)


if __name__ == "__main__":
    raise SystemExit(main())
