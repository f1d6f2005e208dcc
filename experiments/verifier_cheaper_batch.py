"""The shipped first parent trained with a cheaper batch: its time a batch and its curve, next to the shipped one's.

    .venv/bin/python experiments/verifier_cheaper_batch.py --max-length 128                    # ~40 min here, whole
    .venv/bin/python experiments/verifier_cheaper_batch.py --frozen-layers 2 --max-length 128 --steps 500   # ~5 min

``make verifier`` trains two parents; the first (``soup_recipe().parents[0]``, 3,025 batches) is the same
mix, seed and held-out pairs whatever the batch costs, so its checks along the way (ROC-AUC on the held-out
pairs and on the first hand-written contrastive set, every ``--eval-every`` batches) can be read against
the shipped first parent's, kept in the shipped manifest. A change that falls behind that curve early is not
worth a whole soup. The checks are 400 and 112 pairs: ~0.02 apart is within what a seed moves (0.026 on the
contrastive set, docs/verifier.md "Measured: how far two trainings ... (seeds)").

Written 2026-11-29 for runs 6 and 7 of docs/verifier.md ("Measured: minimal pairs ..."), on an AMD EPYC
without AVX-512, where the shipped recipe trains at 0.88 s a batch and would take ~95 min.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from calibration.fitting.verifier_soup import soup_recipe  # noqa: E402
from calibration.fitting.verifier_training import MANIFEST_NAME, train_verifier  # noqa: E402
from judges.lm.verifier_files import SHIPPED_MANIFEST  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frozen-layers", type=int, default=0)
    parser.add_argument("--max-length", type=int, default=160)
    parser.add_argument("--learning-rate", type=float, default=None, help="the shipped recipe's when not given")
    parser.add_argument("--steps", type=int, default=None, help="stop after this many batches (all when not given)")
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    shipped = soup_recipe().parents[0]
    config = replace(shipped, frozen_layers=args.frozen_layers, max_length=args.max_length,
                     learning_rate=args.learning_rate or shipped.learning_rate, eval_every=args.eval_every)
    out = Path(args.out or f"runs/verifier-batch-f{config.frozen_layers}-l{config.max_length}"
                           f"-lr{config.learning_rate:g}")
    started = time.time()
    train_verifier(out, config, max_steps=args.steps)
    print(f"trained to batch {args.steps or 'the end'} in {(time.time() - started) / 60:.1f} min, the mix's making "
          f"included (its progress bar above gives the time a batch)")
    history = json.loads((out / "checkpoint" / "state.json").read_text(encoding="utf-8"))["history"]
    if (out / MANIFEST_NAME).is_file():
        history = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))["history"]
    shipped_parents = json.loads(SHIPPED_MANIFEST.read_text(encoding="utf-8"))["parents"]
    reference = {h["step"]: h for h in shipped_parents[0]["history"]}
    print(f"\n| batch | held-out, shipped parent 0 | held-out, this run | contrastive, shipped parent 0 | "
          f"contrastive, this run |  (frozen_layers={config.frozen_layers}, max_length={config.max_length}, "
          f"learning_rate={config.learning_rate:g})")
    print("|---|---|---|---|---|")
    for point in history:
        ref = reference.get(point["step"], {})
        cells = [ref.get("held_out_roc_auc"), point["held_out_roc_auc"], ref.get("contrastive_roc_auc"),
                 point["contrastive_roc_auc"]]
        print(f"| {point['step']} | " + " | ".join("n/a" if c is None else f"{c:.3f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
