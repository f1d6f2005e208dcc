"""The direction pairs in place of as many rule-made pairs: does the gain hold, in the hour?

    .venv/bin/python experiments/verifier_direction_swap.py            # ~58-61 min from scratch, then ~6 to measure
    .venv/bin/python experiments/verifier_direction_swap.py --measure-only

``experiments/verifier_direction.py --float32`` (2026-11-28) passed its rule: the shipped recipe with 2,000
minimal pairs of a flipped direction word added to its second parent rose from 0.773 to 0.842 ROC-AUC on
the second hand-written contrastive set, with no train half falling beyond a seed. But the added pairs make
the second parent ~4 min longer, and ``make verifier`` from scratch ~62 min on this machine, over the
issue's 60. Here the same 4,000 direction items (before ``SOUP_SCALE``) take the place of 4,000 of the
second parent's 20,000 rule-made pairs, so the mix holds as many pairs as the shipped one and trains in its
time. Both parents are trained from scratch here (no ``--parent-0``), as ``make verifier`` would, and timed.

The rule, written 2026-11-28 before the run: against the shipped soup, the swapped recipe becomes what
``make verifier`` ships (its soup installed as the shipped weights, every table measured again) if (1) its
ROC-AUC on the second contrastive set rises by more than 0.039, (2) no train half (BEGIN WoW, Q2, SummEval)
falls by more than max(0.010, 1.5 x a seed's move) (0.0105, 0.0405, 0.010), both as in
``verifier_direction.passes_rule``, and (3) the whole training, both parents and the soup, takes at most 60
minutes here. Test halves and the first set are reported, never used to decide.

Measured the same day: it fails all three: the second set 0.773 -> 0.762, SummEval's train half -0.011,
the training 60.5 min (58.1 in an earlier run on another machine whose measurements were lost, its curves
the same to the third decimal) (docs/verifier-experiments.md, "Measured: minimal pairs ...", run 4). Not shipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_bfloat16 import train_half_scores  # noqa: E402
from verifier_debias import train_and_measure  # noqa: E402
from verifier_direction import DIRECTION_PAIRS, passes_rule, print_kinds, soup_kinds  # noqa: E402

from calibration.verifier.soup import SoupRecipe, soup_recipe  # noqa: E402
from calibration.verifier.training import MANIFEST_NAME  # noqa: E402

HOUR_MINUTES = 60


def swapped_recipe() -> SoupRecipe:
    """The recipe shipped until then with ``DIRECTION_PAIRS`` direction items in its second parent in place of
    as many of its rule-made pairs (``soup_recipe``'s ``direction``)."""
    return soup_recipe(direction=DIRECTION_PAIRS)


def train_and_decide(doc: str, default_out: str, recipe: SoupRecipe, parent_label: str) -> bool:
    """Train ``recipe``'s soup from scratch (``train_and_measure``), print its by-kind tables and the rule's
    three conditions against the shipped soup; True when rules (1) and (2) pass (rule (3), the hour, is the
    printed 'candidate trained in')."""
    out, results = train_and_measure(doc, default_out, recipe, parent_label)
    parents = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))["parents"]
    parents_minutes = sum(p["seconds_this_run"] for p in parents) / 60
    kinds = soup_kinds(out, parent_label)
    print_kinds(kinds)
    passes = passes_rule("shipped soup", kinds["shipped soup"]["second"]["all"], kinds["candidate soup"]["second"]["all"],
                         train_half_scores(results["shipped soup"]), train_half_scores(results["candidate soup"]))
    print(f"rule (3): the parents trained in {parents_minutes:.1f} min (their manifests' last runs); the whole training, "
          f"the soup's average and temperature with them, is 'candidate trained in' above (needs <= {HOUR_MINUTES})")
    print(f"-> rules (1) and (2): {'pass' if passes else 'fail'}; the recipe ships only if rule (3) holds too")
    return passes


def main() -> int:
    train_and_decide(__doc__, "runs/verifier-direction-swap", swapped_recipe(), "swapped parent 1 alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
