"""`dspy-judges train-verifier`: train the groundedness verifier again from scratch (seeded, resumable).

    dspy-judges train-verifier --out runs/verifier            # 46-61 min on 2 cores (~100 AVX2-only); a rerun continues
    dspy-judges train-verifier --out runs/verifier --install  # then copy the files into judges/lm/verifier/weights/
    dspy-judges train-verifier --recipe single --out runs/verifier-single   # one training of the full mix
    dspy-judges train-verifier --precision bfloat16 --out runs/verifier-bf16  # ~35 min where the CPU has bf16

The shipped recipe is a soup (``calibration.verifier.soup``): two trainings from the base weights,
then their weighted average. Must not hold the training itself.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from calibration.verifier.config import PRECISIONS
from calibration.verifier.mix import begin_pairs
from calibration.verifier.soup import soup_recipe, train_soup
from calibration.verifier.training import (
    MANIFEST_NAME,
    TrainConfig,
    train_verifier,
)
from judges.lm.verifier.files import SHIPPED_DIR, SHIPPED_TRAINED_ON, write_trained_on
from judges_app.cli.common import add_debug_option, positive_int, seed_value


def _last_check(manifest: dict) -> dict:
    return manifest["history"][-1] if manifest.get("history") else {}


def install_trained_on(manifest: dict) -> None:
    """The list of labelled items (BEGIN dev turns) the installed model trained on, so calibration leaves them out,
    written beside the installed weights (``SHIPPED_DIR``: the package's, or where a test points it)."""
    parts = sorted({part for parent in manifest.get("recipe", {}).get("parents", [manifest.get("recipe", {})])
                    for part in parent.get("begin_parts", [])})
    write_trained_on([(p.evidence, p.claim) for p in begin_pairs(parts)], SHIPPED_DIR / SHIPPED_TRAINED_ON.name)


def run(args) -> int:
    if args.recipe == "soup":
        weights = train_soup(args.out, soup_recipe(seed=args.seed, threads=args.threads, precision=args.precision),
                             max_steps=args.max_steps)
    else:
        weights = train_verifier(args.out, TrainConfig(seed=args.seed, threads=args.threads, precision=args.precision),
                                 max_steps=args.max_steps)
    if not weights.is_file():
        print(f"stopped at --max-steps {args.max_steps}; the checkpoints are under {Path(args.out)} "
              f"(rerun without --max-steps, or with a larger one, to continue)")
        return 0
    manifest = json.loads((Path(args.out) / MANIFEST_NAME).read_text(encoding="utf-8"))
    print(f"wrote {weights} ({weights.stat().st_size / 1e6:.1f} MB, sha256 {manifest['sha256'][:12]}); "
          f"{manifest['steps']} steps on {manifest['train_pairs']} pairs")
    for i, parent in enumerate(manifest.get("parents", [manifest])):
        name = f"parent {i} (weight {parent['weight']})" if "weight" in parent else "the training"
        print(f"  {name}: {parent['steps']} steps, {parent['seconds_this_run'] / 60:.1f} min in its last run; "
              f"last check: {_last_check(parent)}")
    if args.install:
        SHIPPED_DIR.mkdir(parents=True, exist_ok=True)
        for path in (weights, Path(args.out) / MANIFEST_NAME):
            shutil.copy2(path, SHIPPED_DIR / path.name)
        install_trained_on(manifest)
        print(f"installed into {SHIPPED_DIR}")
        if args.precision != "float32":
            print(f"note: this model was trained in {args.precision}; the one shipped with the package is float32's "
                  f"(`make verifier` trains it again), so agreement numbers in docs/verifier.md are not this file's")
    return 0


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("train-verifier", help=summary)
    p.add_argument("--out", default="runs/verifier", help="folder for the checkpoints and the trained files")
    p.add_argument("--recipe", choices=("soup", "single"), default="soup",
                   help="soup: the shipped recipe, two trainings and their average (seeds SEED and SEED+1); "
                        "single: one training of the full shipped mix (the recipe before 2026-11-27)")
    p.add_argument("--seed", type=seed_value, default=0)
    p.add_argument("--threads", type=positive_int, default=2,
                   help="torch threads (the same count gives the same tensors; the shipped model used 2)")
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help="float32: the shipped model's; bfloat16: the forward passes under autocast, about 0.6x the "
                        "time on a CPU with bfloat16 units (emulated and not faster without them); measured "
                        "within 0.004 ROC-AUC of the float32 soup on the train halves and the contrastive set, "
                        "0.007 on the test halves, but not the same tensors")
    p.add_argument("--max-steps", type=positive_int, default=None,
                   help="stop each training after this many batches (resumable)")
    p.add_argument("--install", action="store_true", help="copy the trained files into judges/lm/verifier/weights/")
    add_debug_option(p)
    p.set_defaults(run=run)
