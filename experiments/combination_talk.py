"""Round 13 of the shipped combination (talk classifier round 3): does a talk classifier trained also on chat
sentences by another writer make the shipped judge rank better, with the combination's weights unchanged?

    .venv/bin/python -m calibration.verifier.talk_units --sets train chat --out runs/talk-chat.json
    .venv/bin/python experiments/combination_talk.py run --talk-weights runs/talk-chat.json   # S and T (~10 min)
    .venv/bin/python experiments/combination_talk.py decide     # the rule in docs/verifier-log.md, round 13
    .venv/bin/python experiments/combination_talk.py decide --install runs/talk-chat.json

S is the shipped judge: its talk classifier was trained on one writer's chat sentences (``units_train.jsonl``). T
is the same judge and combination file with the classifier refitted on those and ``units_chat.jsonl`` together.
``run`` scores the round's sets once per classifier (``judges.metrics.rag.claims`` takes the classifier it is
given) into ``<out>/S`` and ``<out>/T``; ``decide`` puts them side by side, applies the round's rule and, with
``--install``, copies T's weights over the shipped ones when it passes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.verifier.talk_units import load_units  # noqa: E402
from combination_echo import SHIPPED  # noqa: E402
from combination_units import reading_round, run  # noqa: E402
from judges.lm.talk import TALK_WEIGHTS, TalkClassifier  # noqa: E402
from judges.metrics.rag import claims  # noqa: E402

#: The natural sets written for this round, its contrastive set and its distractor set.
UNREAD = ("dialogue-twelfth", "summaries-tenth")
UNREAD_CONTRASTIVE = "contrastive-twelfth"
DISTRACTOR_SET = "eighth"
#: The sets each classifier scores: the unread ones, the guard and the written dialogue sets.
SETS = (*UNREAD, UNREAD_CONTRASTIVE, "begin-cmu-tc",
        *(f"dialogue-{w}" for w in ("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                                    "eleventh")))
READ = SETS[3:]


def run_both(out: Path, talk_weights: str) -> None:
    """Every set of ``SETS`` and the round's distractor set, scored by S (the shipped classifier) and by T (the
    classifier in ``talk_weights``), each into its own folder."""
    for label, classifier in (("S", TalkClassifier()), ("T", TalkClassifier(talk_weights))):
        claims.shipped_talk_classifier = lambda chosen=classifier: chosen
        run(out / label, list(SETS), {label: SHIPPED}, (DISTRACTOR_SET,))


def merged(out: Path) -> None:
    """S's and T's caches as one per set in ``out`` (the labels, the cheap signals and the verifier mean are the
    same for both), and their distractor tables as one."""
    for name in SETS:
        s, t = (np.load(out / label / f"{name}.npz") for label in ("S", "T"))
        np.savez(out / f"{name}.npz", y=s["y"], cheap=s["cheap"], S=s["S"], T=t["T"], verifier_mean=s["verifier_mean"])
    tables = [json.loads((out / label / "distractors.json").read_text(encoding="utf-8")) for label in ("S", "T")]
    both = {which: tables[0][which] | {"T": tables[1][which]["T"]} for which in tables[0]}
    (out / "distractors.json").write_text(json.dumps(both, indent=1), encoding="utf-8")


def units_accuracy(weights) -> float:
    """The classifier's accuracy on ``units_test.jsonl``, written by another hand and never trained on."""
    test = load_units("test")
    found = TalkClassifier(weights).checkable([r["sentence"] for r in test])
    return float(np.mean(found == np.array([r["checkable"] for r in test], dtype=bool)))


def decide(out: Path, talk_weights: str, install: bool) -> int:
    """The rule in docs/verifier-log.md, round 13, and every set's numbers; T's weights installed only if it
    passes, its units_test accuracy included."""
    merged(out)
    shipped, refitted = units_accuracy(None), units_accuracy(talk_weights)
    print(f"units_test accuracy: S {shipped:.4f}, T {refitted:.4f}\n")
    code = reading_round(out, None, old="S", new="T", unread=UNREAD, unread_contrastive=UNREAD_CONTRASTIVE,
                         read=READ, contrastive=("twelfth",),
                         dialogue=("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                                   "eleventh"), distractor_set=DISTRACTOR_SET, changes={},
                         also_blocked=[f"units_test: T {refitted:.4f} < S {shipped:.4f} - 0.01"]
                         if refitted < shipped - 0.01 - 1e-9 else [])  # "at least", in floats
    decision = json.loads((out / "decision.json").read_text(encoding="utf-8"))
    if install and not decision["blocked"] and not decision["under_mean"]:
        shutil.copyfile(talk_weights, TALK_WEIGHTS)
        print(f"installed {talk_weights} as {TALK_WEIGHTS}")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "decide"))
    parser.add_argument("--out", default="runs/combination_round13")
    parser.add_argument("--talk-weights", default="runs/talk-chat.json", help="T's classifier (a talk-minilm JSON)")
    parser.add_argument("--install", action="store_true",
                        help="with decide: when T passes, copy its weights over judges/lm/weights/talk-minilm.json")
    args = parser.parse_args(argv)
    if args.step == "run":
        run_both(Path(args.out), args.talk_weights)
        return 0
    return decide(Path(args.out), args.talk_weights, args.install)


if __name__ == "__main__":
    raise SystemExit(main())
