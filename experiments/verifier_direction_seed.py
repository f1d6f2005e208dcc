"""Does the direction pairs' gain come back with another seed of the second parent?

    .venv/bin/python experiments/verifier_direction_seed.py          # ~19 min of training, then ~6 to measure

``experiments/verifier_direction.py`` (2026-11-28) measured one training: the bfloat16 soup with 2,000
minimal pairs of a flipped direction word in its second parent rose from 0.764 to 0.823 ROC-AUC on the
second hand-written contrastive set, and no train half fell beyond a seed. One run of one seed. Here the
same comparison with the second parent's seed 2 instead of 1, paired:

- baseline: the bfloat16 first parent (seed 0, runs/verifier-bf16/parent-0) and the second parent's mix
  with seed 2 and no direction pairs (trained already, runs/verifier-bf16-3/parent-2), weights 0.3 / 0.7,
  then the temperature; no training;
- candidate: the same with ``direction=4000`` in the seed-2 second parent (trained here, ~19 min).

The rule, written 2026-11-28 before the run: the gain replicates if the candidate's ROC-AUC on the second
contrastive set rises over the baseline's by more than 0.039 and no train half (BEGIN WoW, Q2, SummEval)
falls by more than a seed's difference (0.011, 0.041, 0.010). Test halves and the first set are reported,
never used to decide.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import CHEAP, sets  # noqa: E402
from verifier_bfloat16 import bfloat16_recipe  # noqa: E402
from verifier_debias import SETS, hf_folder, rows_for  # noqa: E402
from verifier_direction import DIRECTION_PAIRS, by_kind, passes_rule, print_kinds  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402

from calibration.fitting.signals import FEATURES  # noqa: E402
from calibration.verifier.soup import SoupRecipe, train_soup  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402

SECOND_SEED = 2


def recipe(direction: int) -> SoupRecipe:
    """The bfloat16 soup recipe with its second parent seeded ``SECOND_SEED`` and ``direction`` pairs."""
    base = bfloat16_recipe()
    first, second = base.parents
    return replace(base, parents=(first, replace(second, seed=SECOND_SEED, direction=direction)))


def main() -> int:
    runs = {"baseline (seed 2)": (Path("runs/verifier-direction-seed2-base"), recipe(0),
                                  Path("runs/verifier-bf16-3/parent-2")),
            "candidate (seed 2)": (Path("runs/verifier-direction-seed2"), recipe(DIRECTION_PAIRS), None)}
    for out, soup, second in runs.values():
        for i, source in enumerate((Path("runs/verifier-bf16/parent-0"), second)):
            if source is not None and not (out / f"parent-{i}").exists():
                shutil.copytree(source, out / f"parent-{i}", ignore=shutil.ignore_patterns("checkpoint"))
        train_soup(out, soup)  # finished parents are reused (their manifests' configs are checked)
    data = sets(summeval_limit=320)
    cheap = {s: np.array([[FEATURES[f](x) for f in CHEAP] for x in data[s][0]], float) for s in SETS}
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for label, (out, _, _) in runs.items():
            verifier = Verifier(hf_folder(out, Path(folder) / out.name))
            row = {s: rows_for(np.array(weakest(verifier, data[s][0], range(len(data[s][0])))), cheap[s],
                               np.asarray(data[s][1])) for s in SETS}
            row.update({which: by_kind(verifier, which) for which in ("first", "second")})
            results[label] = row
    print("\n| model | set | train ROC-AUC | train hard acc. (n) | test ROC-AUC | test hard acc. (n) |")
    print("|---|---|---|---|---|---|")
    for label, row in results.items():
        for s in SETS:
            r = row[s]
            print(f"| {label} | {s} | {r['train roc']:.3f} | {r['train hard']:.2f} ({r['train hard n']}) | "
                  f"{r['test roc']:.3f} | {r['test hard']:.2f} ({r['test hard n']}) |")
    print_kinds({label: {which: row[which] for which in ("first", "second")} for label, row in results.items()})
    base, new = results.values()
    passes = passes_rule("baseline (seed 2)", base["second"]["all"], new["second"]["all"],
                         {s: base[s]["train roc"] for s in SETS}, {s: new[s]["train roc"] for s in SETS})
    print(f"-> the gain {'replicates' if passes else 'does not replicate'} with seed {SECOND_SEED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
