"""Does a third training in the soup move it more than a seed does?

    .venv/bin/python experiments/verifier_third_parent.py --out runs/verifier-bf16-3 --parents-from runs/verifier-bf16

The shipped soup averages two trainings: the shipped mix (seed 0, weight 0.3) and twice its rule-made
changed facts (seed 1, weight 0.7). Model soups gain from more ingredients (Wortsman et al. 2022), and the
bfloat16 recipe (``experiments/verifier_bfloat16.py``: it landed within 0.004 of the float32 soup) leaves
room in the hour for one more training. The candidate: the two bfloat16 parents of that run, reused, and
a third, the second parent's configuration with seed 2, in bfloat16; weights 0.3 / 0.35 / 0.35 (the two
mixes keep their shares), then the temperature as ``make verifier`` fits it.

The question, written 2026-11-27 before the run: against the two-parent bfloat16 soup, does the third
parent move a train half's ROC-AUC (BEGIN WoW, Q2, SummEval) or the contrastive set by more than a seed's
difference (max(0.010, 1.5 x seed 1's move): 0.011, 0.041, 0.010, 0.039), and which way? Nothing is
shipped from this run (the shipped model is float32 and ``make verifier``'s); a gain would make the
three-parent recipe the next retrain's candidate. Test halves are reported, never used to decide.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import replace
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_bfloat16 import bfloat16_recipe, train_half_scores, within_a_seed  # noqa: E402
from verifier_debias import train_and_measure  # noqa: E402

from calibration.verifier.soup import SoupRecipe  # noqa: E402


def three_parent_recipe() -> SoupRecipe:
    first, second = bfloat16_recipe().parents
    return SoupRecipe((first, second, replace(second, seed=second.seed + 1)), (0.3, 0.35, 0.35))


#: The two-parent bfloat16 soup's train halves and contrastive set (runs/verifier-bf16, 2026-11-27).
TWO_PARENTS = {"begin-wow": 0.930, "q2": 0.679, "summeval": 0.767, "contrastive": 0.797}


def main() -> int:
    reuse = argparse.ArgumentParser(add_help=False)
    reuse.add_argument("--parents-from", default=None, help="a finished verifier_bfloat16.py run whose parents to reuse")
    reuse.add_argument("--out", default="runs/verifier-bf16-3")
    known, rest = reuse.parse_known_args()
    sys.argv[1:] = [*rest, "--out", known.out]  # the rest is train_and_measure's command line
    if known.parents_from:
        source, out = Path(known.parents_from), Path(known.out)
        for i in (0, 1):
            if not (out / f"parent-{i}").exists():
                shutil.copytree(source / f"parent-{i}", out / f"parent-{i}", ignore=shutil.ignore_patterns("checkpoint"))
    _, results = train_and_measure(__doc__, "runs/verifier-bf16-3", three_parent_recipe(), "parent 1 alone (seed 1)")
    moved = not within_a_seed(TWO_PARENTS, train_half_scores(results["candidate soup"]), "question")
    print(f"-> the third parent {'moves' if moved else 'does not move'} the soup beyond a seed's difference somewhere")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
