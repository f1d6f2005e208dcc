"""`dspy-judges train-verifier`: train the groundedness verifier again from scratch (seeded, resumable).

    dspy-judges train-verifier --out runs/verifier            # ~25 min on 2 cores; a rerun continues
    dspy-judges train-verifier --out runs/verifier --install  # then copy the files into judges/lm/weights/

Must not hold the training itself (``calibration.fitting.verifier_training``).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from calibration.fitting.verifier_training import (
    MANIFEST_NAME,
    TrainConfig,
    train_verifier,
)
from judges.lm.verifier_files import SHIPPED_DIR
from judges_app.cli.common import add_debug_option, positive_int


def run(args) -> int:
    config = TrainConfig(seed=args.seed, threads=args.threads)
    weights = train_verifier(args.out, config, max_steps=args.max_steps)
    if not weights.is_file():
        print(f"stopped at --max-steps {args.max_steps}; the checkpoint is in {Path(args.out) / 'checkpoint'} "
              f"(rerun the same command to continue)")
        return 0
    manifest = json.loads((Path(args.out) / MANIFEST_NAME).read_text(encoding="utf-8"))
    last = manifest["history"][-1] if manifest["history"] else {}
    print(f"wrote {weights} ({weights.stat().st_size / 1e6:.1f} MB, sha256 {manifest['sha256'][:12]}); "
          f"{manifest['steps']} steps on {manifest['train_pairs']} pairs; last check: {last}")
    if args.install:
        SHIPPED_DIR.mkdir(parents=True, exist_ok=True)
        for path in (weights, Path(args.out) / MANIFEST_NAME):
            shutil.copy2(path, SHIPPED_DIR / path.name)
        print(f"installed into {SHIPPED_DIR}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train-verifier", help="train the groundedness verifier again from scratch (seeded, resumable)")
    p.add_argument("--out", default="runs/verifier", help="folder for the checkpoint and the trained files")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=positive_int, default=2,
                   help="torch threads (the same count gives the same tensors; the shipped model used 2)")
    p.add_argument("--max-steps", type=positive_int, default=None, help="stop after this many batches (resumable)")
    p.add_argument("--install", action="store_true", help="copy the trained files into judges/lm/weights/")
    add_debug_option(p)
    p.set_defaults(run=run)
