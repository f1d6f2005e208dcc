"""Does fitting the calibrator on out-of-fold scores change a fine-tuned judge's agreement on unseen items?

A compiled judge has seen its training items (here: the verifier fine-tuned on them), so its scores there are
better than anywhere else. A calibrator fitted on those scores trusts the judge too much and may drop every
cheap signal. ``fit(..., crossfit=k)`` fits it on out-of-fold scores instead. This script measures both on a
held-out test set, per seed:

  shipped + stacked       the shipped verifier judge, stacked calibrator (nothing learned: no folds needed)
  finetune + stacked, leaky      fine-tuned on train, calibrator on its own train scores (crossfit=0)
  finetune + stacked, crossfit   the same fine-tuned judge, calibrator on 3-fold out-of-fold scores

and the paired difference crossfit - leaky (bootstrap 95% CI on the same test items). Data: BEGIN dev, the
Wizard of Wikipedia part (the shipped verifier never trained on it), a label-balanced train sample of
--n-train and every other turn as test.

    .venv/bin/python experiments/crossfit_calibrator.py --seeds 0,1 --n-train 120
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from calibration.agreement.stats import compare
from calibration.data.labelled import balanced_indices, without_shipped_training
from calibration.data.loaders import load_begin
from calibration.fitting.heldout import compare_on_heldout
from judges import FaithfulnessWithVerifier

STATS = ("roc_auc", "brier", "ece", "balanced_accuracy")
FINAL = "compiled (finetune) + stacked calibration"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds, one split and one fit each")
    parser.add_argument("--n-train", type=int, default=120, help="labelled turns to fine-tune and calibrate on")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--out", default="runs/crossfit", help="folder for results.json")
    args = parser.parse_args()
    import numpy as np

    data, dropped = without_shipped_training(load_begin(parts=("wow",)))
    print(f"BEGIN WoW dev: {len(data)} turns ({dropped} left out: the shipped verifier trained on them)")
    rows, started = [], time.perf_counter()
    for seed in (int(s) for s in args.seeds.split(",")):
        train_at = balanced_indices(data.labels, args.n_train, np.random.default_rng(seed))
        train = data.subset(train_at)
        test = data.subset([i for i in range(len(data)) if i not in set(train_at)])
        runs = {}
        for label, crossfit in (("leaky", 0), ("crossfit", 3)):
            _, runs[label] = compare_on_heldout(FaithfulnessWithVerifier, train, test,
                                                optimizers=[None, "finetune"] if label == "leaky" else ["finetune"],
                                                calibrator="stacked", seed=seed, progress=False, crossfit=crossfit,
                                                n_bootstrap=args.n_bootstrap)
        leaky, honest = runs["leaky"], runs["crossfit"]
        same = np.allclose(leaky.scores["compiled (finetune)"], honest.scores["compiled (finetune)"])
        paired = compare(leaky.labels, honest.scores[FINAL], leaky.scores[FINAL], n_bootstrap=args.n_bootstrap,
                         seed=seed)
        row = {"seed": seed, "train": len(train), "test": len(test), "same_finetuned_judge": bool(same),
               "scorers": {}, "crossfit_minus_leaky": {s: paired.stats.get(s) for s in STATS}}
        for name, run in (("shipped", leaky), ("finetune (no calibration)", leaky), ("leaky", leaky),
                          ("crossfit", honest)):
            key = {"shipped": "judge as shipped + stacked calibration",
                   "finetune (no calibration)": "compiled (finetune)"}.get(name, FINAL)
            stats = {s: run.agreement[key].value(s) for s in STATS}
            inputs = run.meta["calibrator_inputs"].get(key, {})
            row["scorers"][name] = {**stats, "judge_score_kept": inputs.get("judge_score"),
                                    "signals_kept": inputs.get("signals")}
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"rows": rows, "seconds": time.perf_counter() - started}, indent=1))
    print(f"\n| seed | scorer | {' | '.join(STATS)} | judge score kept | signals kept |\n|---|---|"
          + "---|" * (len(STATS) + 2))
    for row in rows:
        for name, values in row["scorers"].items():
            cells = " | ".join("n/a" if values[s] is None else f"{values[s]:.3f}" for s in STATS)
            print(f"| {row['seed']} | {name} | {cells} | {values['judge_score_kept']} | {values['signals_kept']} |")
    print(f"\n{time.perf_counter() - started:.0f} s; wrote {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
