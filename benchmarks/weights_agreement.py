"""Does re-encoding the embedded model's weights change how well its judge agrees with people?

    .venv/bin/python benchmarks/weights_agreement.py [--n 100] [--seed 0] [--weights as-is,q8_0]

The embedded SmolLM2-135M-Instruct ships as Q4_1; the engine runs it re-encoded as Q8_0 by default
(``judges.lm.files.EMBEDDED_WEIGHTS``: faster kernels, the same model within rounding). At temperature 0 a
rounding difference can still flip a greedy token and with it a verdict, so this measures what matters:
Faithfulness as shipped, run with each weight format on the same seeded label-balanced BEGIN items (dev
files, all three sources), agreement with the human labels per format with bootstrap 95% CIs, the
paired difference (``calibration.agreement.compare``: paired bootstrap, McNemar), how many items get the
same verdicts, and seconds per item. DSPy's cache is off, so each format is run cold.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from engine_speed import judge_run  # benchmarks/engine_speed.py

from calibration.agreement.stats import agreement, compare
from calibration.data.labelled import balanced_sample
from calibration.data.loaders import load_begin


def run(samples, weights: str) -> tuple[list[float | None], list, float]:
    """Scores (None where the judge failed), verdicts and seconds per item: the default engine on ``weights``."""
    result = judge_run(samples, weights, prefix_contexts=2, threads=os.cpu_count() or 1, best_first=True)
    return ([None if np.isnan(s) else s for s in result["scores"]], result["verdicts"], result["s_per_item"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="label-balanced BEGIN items")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weights", default="as-is,q8_0", help="two formats, the first is the reference")
    args = parser.parse_args()
    formats = [w.strip() for w in args.weights.split(",")]
    if len(formats) != 2:
        parser.error(f"--weights takes two formats, got {formats}")
    data = balanced_sample(load_begin(), args.n, seed=args.seed)
    samples = list(data.dataset)
    runs = {w: run(samples, w) for w in formats}
    print(f"Faithfulness as shipped on {len(samples)} label-balanced BEGIN items (seed {args.seed}), DSPy cache off\n")
    print("| weights | ROC-AUC | balanced accuracy | Brier | failed items | s / item |\n|---|---|---|---|---:|---:|")
    for w, (scores, _, seconds) in runs.items():
        kept = [i for i, s in enumerate(scores) if s is not None]
        report = agreement([data.labels[i] for i in kept], [scores[i] for i in kept], kind="binary")
        cells = []
        for name in ("roc_auc", "balanced_accuracy", "brier"):
            stat = report.stats[name]
            cells.append(f"{stat['value']:.3f} [{stat['low']:.2f}, {stat['high']:.2f}]")
        print(f"| {w} | {' | '.join(cells)} | {len(scores) - len(kept)} | {seconds:.2f} |")
    (a, (scores_a, verdicts_a, _)), (b, (scores_b, verdicts_b, _)) = runs.items()
    same = sum(x == y for x, y in zip(verdicts_a, verdicts_b))
    paired = compare(data.labels, scores_b, scores_a, kind="binary")
    print(f"\nsame verdicts on {same}/{len(samples)} items; {b} minus {a}, paired bootstrap 95% CI:")
    for name in ("roc_auc", "balanced_accuracy", "brier"):
        stat = paired.stats[name]
        print(f"  {name}: {stat['difference']:+.3f} [{stat['low']:+.3f}, {stat['high']:+.3f}]")
    print(f"  McNemar at 0.5: only {b} right on {paired.mcnemar['only_a_right']}, only {a} right on "
          f"{paired.mcnemar['only_b_right']}, p = {paired.mcnemar['p_value']:.2f}")
    print(f"  mean |score difference| {np.mean([abs(x - y) for x, y in zip(scores_a, scores_b) if x is not None and y is not None]):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
