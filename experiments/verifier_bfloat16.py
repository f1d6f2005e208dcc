"""Does the shipped recipe trained under bfloat16 autocast land where the float32 one does?

    .venv/bin/python experiments/verifier_bfloat16.py --out runs/verifier-bf16          # ~35 min, then ~8 to measure
    .venv/bin/python experiments/verifier_bfloat16.py --out runs/verifier-bf16 --measure-only

``TrainConfig(precision="bfloat16")`` halves a batch's time on a CPU with bfloat16 units (docs/verifier-experiments.md,
"Measured: bfloat16"), and its curve at 500 batches matched float32's. The candidate here is the whole
shipped recipe, ``soup_recipe()``, with both parents in bfloat16: the same mixes, seeds, schedule, soup
weights and temperature. It is measured as every candidate soup is (``verifier_debias.measure``).

The rule, written 2026-11-27 before the run: the bfloat16 soup lands within a seed's difference of the
shipped soup if on the train halves of BEGIN WoW, Q2 and SummEval, and on the contrastive set, its ROC-AUC
differs from the shipped soup's by no more than max(0.010, 1.5 x what seed 1 of the single recipe moved
it): BEGIN WoW 0.011, Q2 0.041, SummEval 0.010, contrastive 0.039. If it does, ``train-verifier`` offers
``--precision bfloat16`` as a faster way to train the recipe (not the shipped model's, which stays
float32); if not, the option is not offered. Test halves are reported, never used to decide.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_debias import train_and_measure  # noqa: E402

from calibration.verifier.soup import SoupRecipe, soup_recipe  # noqa: E402

#: What seed 1 of the single recipe moved each train-half ROC-AUC by (docs/verifier-experiments.md, "Measured: how far
#: two trainings of the same mix land apart"); the contrastive set is scored whole.
SEED_DIFFERENCE = {"begin-wow": 0.007, "q2": 0.027, "summeval": 0.002, "contrastive": 0.026}


def bfloat16_recipe() -> SoupRecipe:
    """``soup_recipe()`` with every parent trained under bfloat16 autocast."""
    recipe = soup_recipe()
    return replace(recipe, parents=tuple(replace(config, precision="bfloat16") for config in recipe.parents))


def train_half_scores(result: dict) -> dict[str, float]:
    """A measured soup's train-half ROC-AUC per set and its contrastive ROC-AUC (``verifier_debias.measure``)."""
    return {s: result[s] if s == "contrastive" else result[s]["train roc"] for s in SEED_DIFFERENCE}


def within_a_seed(before: dict[str, float], after: dict[str, float], verb: str) -> bool:
    """Prints, per set, ``before -> after`` and whether the move is within max(0.010, 1.5 x a seed's); True
    when every move is."""
    within = True
    for s, seed in SEED_DIFFERENCE.items():
        margin = max(0.010, 1.5 * seed)
        moved = after[s] - before[s]
        within &= abs(moved) <= margin
        print(f"{verb}: {s} {before[s]:.3f} -> {after[s]:.3f} ({moved:+.3f}; within {margin:.3f}: {abs(moved) <= margin})")
    return within


def main() -> int:
    _, results = train_and_measure(__doc__, "runs/verifier-bf16", bfloat16_recipe(), "bfloat16 parent 1 alone")
    lands = within_a_seed(train_half_scores(results["shipped soup"]), train_half_scores(results["candidate soup"]),
                          "rule")
    print(f"-> the bfloat16 soup {'lands' if lands else 'does not land'} within a seed's difference of the shipped soup")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
