"""Write the BEGIN slice bundled with the package (calibration/data/begin_slice.jsonl).

A seeded, label-balanced sample of BEGIN's CC BY 4.0 parts (Wizard of Wikipedia and CMU-DoG; the
Topical-Chat part, CDLA-Sharing, is left out) so that the main job can calibrate a faithfulness judge on
a fresh machine without the full data. The rows are BEGIN's own text, unchanged; attribution is in
calibration/data/SOURCE.md.

    .venv/bin/python experiments/make_begin_slice.py [--n 60] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from calibration.data.loaders import load_begin

OUT = Path(__file__).resolve().parents[1] / "calibration" / "data" / "begin_slice.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=60, help="items, half of them labelled attributable")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = load_begin(parts=("wow", "cmu"))
    rng = np.random.default_rng(args.seed)
    labels = np.asarray(data.labels)
    picked = sorted(i for value in (0, 1)
                    for i in rng.choice(np.where(labels == value)[0], size=args.n // 2, replace=False).tolist())
    with open(OUT, "w", encoding="utf-8") as handle:
        for i in picked:
            sample = data.dataset[i]
            row = {"user_input": sample.user_input, "response": sample.response,
                   "retrieved_contexts": sample.retrieved_contexts, "label": int(labels[i])}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(picked)} rows ({int(labels[picked].sum())} attributable) to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
