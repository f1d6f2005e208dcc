"""Where a retrained verifier gains or loses BEGIN WoW against the shipped one: each verifier's weakest-sentence
probability on every BEGIN WoW turn (the WoW part of BEGIN dev, 430 turns), by label, and the turns whose rank
moved most between the shipped verifier and the last one named. Printed as a table; nothing is fitted.

    .venv/bin/python experiments/verifier_leniency.py runs/verifier-joint3/model runs/verifier-joint3-replies/model
    .venv/bin/python experiments/verifier_leniency.py runs/verifier-facts2/model --set summeval   # 320 summaries

Columns: mean P on the turns people found fully attributable and on the others; the share of attributable turns
under 0.5 and of the others at 0.5 or more. Then the ``--show`` unattributable turns whose rank rose most and
attributable turns whose rank fell most (rank = the probability's place among all 430, as a fraction), with
both probabilities: what the last verifier now gets wrong that the shipped one got right, read by eye.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402

from judges.lm.verifier import Verifier  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="verifier model folders (the shipped verifier is measured first)")
    parser.add_argument("--show", type=int, default=8, help="turns to print each way (default %(default)s)")
    parser.add_argument("--set", default="begin-wow", choices=("begin-wow", "summeval"),
                        help="BEGIN WoW (default) or SummEval consistency's first 320 summaries (1 = all experts gave 5)")
    args = parser.parse_args()
    samples, labels = sets(summeval_limit=320)[args.set]
    labels = np.asarray(labels)
    every = range(len(labels))
    scores = {"shipped": np.asarray(weakest(Verifier(), samples, every))}
    for folder in args.models:
        scores[folder] = np.asarray(weakest(Verifier(folder), samples, every))
    print(f"{args.set}, {len(labels)} items, {int(labels.sum())} labelled supported\n")
    print("| verifier | mean P, attributable | mean P, not attributable | attributable under 0.5 | "
          "not attributable at 0.5 or more |")
    print("|---|---:|---:|---:|---:|")
    for name, p in scores.items():
        print(f"| {name} | {p[labels == 1].mean():.3f} | {p[labels == 0].mean():.3f} | "
              f"{(p[labels == 1] < 0.5).mean():.1%} | {(p[labels == 0] >= 0.5).mean():.1%} |")
    base, last = scores["shipped"], scores[args.models[-1]]
    shift = rankdata(last) / len(last) - rankdata(base) / len(base)
    order = np.argsort(shift)
    for title, label, ranked in (("not attributable, rank rose most", 0, order[::-1]),
                                 ("attributable, rank fell most", 1, order)):
        print(f"\n{title} (shipped P -> {args.models[-1]} P):")
        for i in [i for i in ranked if labels[i] == label][:args.show]:
            print(f"  {base[i]:.2f} -> {last[i]:.2f} | {samples[i].response[:150]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
