"""Round 12 of the shipped combination: is a unit the talk classifier sets aside checked after all when it repeats
the evidence's frame ("The strike planned for next week will take place.", a copy with its negation removed)?

    .venv/bin/python experiments/combination_echo.py run --sets read     # the read sets, S and three L's (~15 min)
    .venv/bin/python experiments/combination_echo.py choose              # the share, chosen on the read sets
    .venv/bin/python experiments/combination_echo.py run                 # then the unread sets and the distractors
    .venv/bin/python experiments/combination_echo.py decide              # the rule in docs/verifier-log.md, round 12
    .venv/bin/python experiments/combination_echo.py decide --write judges/lm/weights/faithfulness-combination.json

S is the shipped combination after round 11: the learned classifier alone decides which units are talk, and a
changed copy it sets aside has nothing checkable to cap its score. L<share>
is the same file and weights with ``talk_echo=<share>``: a set-aside unit that is no question and whose frame words
the evidence holds at that share or more is checked (``judges.data.contrasts.frame_echo``). ``run`` scores every set
once with the shipped judge and derives every reading from the same verdicts (``combination_units.Scorer``).
``choose`` picks the share on read sets only; ``decide`` applies the round's rule to the sets written for it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from combination_matching import CONTRASTIVE as ROUND_ELEVEN_CONTRASTIVE  # noqa: E402
from combination_matching import READ as READ_BEFORE  # noqa: E402
from combination_matching import UNREAD as ROUND_ELEVEN  # noqa: E402
from combination_units import contrastive_by_kind, natural_table, reading_round, run_step  # noqa: E402

#: The natural sets written for this round, and its contrastive set.
UNREAD = ("dialogue-eleventh", "summaries-ninth")
UNREAD_CONTRASTIVE = "contrastive-eleventh"
READ = tuple(dict.fromkeys((*ROUND_ELEVEN, "contrastive-tenth", *READ_BEFORE)))
#: The contrastive sets read before this round, and the dialogue and summary sets written for the project.
READ_CONTRASTIVE = [f"contrastive-{w}" for w in ROUND_ELEVEN_CONTRASTIVE]
WRITTEN_DIALOGUE = [f"dialogue-{w}"
                    for w in ("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")]
WRITTEN_SUMMARIES = [f"summaries-{w}" for w in ("fresh", "second", "third", "fourth", "fifth", "sixth", "seventh",
                                                 "eighth")]
SHIPPED = {"words_read": "units", "name_endings": "strip", "specifics_match": "whole"}
#: S (round 11, shipped) and L at three shares, all with the shipped file's weights.
SHARES = (0.7, 0.8, 0.9)
READS = {"S": SHIPPED} | {f"L{round(100 * share)}": SHIPPED | {"talk_echo": share} for share in SHARES}
NAMES = (*READS, "verifier_mean")
#: The distractor sets: six read by earlier rounds, the seventh written for this one.
DISTRACTORS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh")


def families(natural: dict, name: str) -> dict[str, float]:
    """The mean ROC-AUC of ``name`` over each read family: the written dialogue sets, the written summary sets and
    the contrastive sets."""
    return {family: float(np.mean([natural[n][name] for n in sets])) for family, sets in
            (("dialogue", WRITTEN_DIALOGUE), ("summaries", WRITTEN_SUMMARIES), ("contrastive", READ_CONTRASTIVE))}


def choose(out: Path) -> int:
    """The share of the round's rule (docs/verifier-log.md, round 12): on the read sets only, the L whose mean over
    the three families is highest, if it is above S's; else the round stops before any unread set is read."""
    natural = natural_table(out, READ, NAMES, ())
    scores = {name: families(natural, name) for name in NAMES}
    print("\n| score | " + " | ".join(scores["S"]) + " | mean of the three |\n|---|" + "---:|" * 4)
    for name, found in scores.items():
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in found.values())
              + f" | {np.mean(list(found.values())):.4f} |")
    contrastive_by_kind(out, ROUND_ELEVEN_CONTRASTIVE, NAMES)
    best = max((n for n in READS if n != "S"), key=lambda n: np.mean(list(scores[n].values())))
    gain = np.mean(list(scores[best].values())) - np.mean(list(scores["S"].values()))
    print(f"\nchosen: {best} ({gain:+.4f} over S)" if gain > 0 else f"\nno L is above S ({best} {gain:+.4f}): stop")
    (out / "choice.json").write_text(json.dumps({"chosen": best if gain > 0 else None, "families": scores},
                                                indent=1), encoding="utf-8")
    return 0


def decide(out: Path, write: str | None) -> int:
    """The rule in docs/verifier-log.md, round 12, for the L ``choose`` picked, and every set's numbers."""
    chosen = json.loads((out / "choice.json").read_text(encoding="utf-8"))["chosen"]
    if chosen is None:
        print("choose found no L above S: the round stopped")
        return 0
    return reading_round(out, write, old="S", new=chosen, unread=UNREAD, unread_contrastive=UNREAD_CONTRASTIVE,
                         read=READ, contrastive=(*ROUND_ELEVEN_CONTRASTIVE, "eleventh"),
                         dialogue=("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                                   "eleventh"), distractor_set="seventh",
                         changes={"candidate": chosen, "talk_echo": READS[chosen]["talk_echo"],
                                  "talk_echo_decided_on": [*UNREAD, UNREAD_CONTRASTIVE, "distractors-seventh"],
                                  "talk_echo_rule": 'docs/verifier-log.md, "A shipped combination, round 12"'})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "choose", "decide"))
    parser.add_argument("--out", default="runs/combination_round12")
    parser.add_argument("--sets", choices=("read", "all"), default="all",
                        help="with run: 'read' scores the read sets only, no distractor set (for choose)")
    parser.add_argument("--write", help="with decide: when the chosen L passes, name its talk_echo in this "
                        "combination file (the shipped one is judges/lm/weights/faithfulness-combination.json)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.step == "run":
        run_step(out, args.sets, READ, (*UNREAD, UNREAD_CONTRASTIVE), READS, DISTRACTORS)
        return 0
    return choose(out) if args.step == "choose" else decide(out, args.write)


if __name__ == "__main__":
    raise SystemExit(main())
