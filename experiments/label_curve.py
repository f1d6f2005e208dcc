"""How many human labels does calibrating a judge need? A learning curve at 10, 20, 50, 100, 200 labels.

The judge (as shipped) scores a labelled pool and a fixed held-out test set once (the DSPy cache keeps
those calls, so reruns are fast). Then, for each label budget n and each of --repeats seeded draws of n
labels from the pool (label-balanced), three things are fitted on those n labels only and measured on the
test set: Platt scaling of the judge's score, the stacked calibrator (judge score + cheap signals, kept
only when cross-validation on the n labels prefers it), and a logistic fit of the best cheap signal alone.
What changes with n is the calibration, not the judge's prompts: compiling is studied in
compare_optimizers.py. Logged to MLflow (one run, metrics stepped by n) and printed as a table.

    .venv/bin/python experiments/label_curve.py --data evouna --judge answer_accuracy
    .venv/bin/python experiments/label_curve.py --data begin --judge faithfulness --sizes 10,20,50 --n-test 60
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import mlflow
import numpy as np

from calibration.agreement import agreement
from calibration.calibrators import Calibrator
from calibration.datasets import balanced_indices, balanced_sample, split
from calibration.fit import judge_scores
from calibration.heldout import applicable_baselines
from calibration.signals import FEATURES, SAMPLE_SIGNALS, feature_matrix
from judges.models import resolve_lm
from judges_app.cli.common import build_metric, dataset_name, load_labelled
from judges_app.tracking import data_hash, metric_key, tracked_run

STATS = ("roc_auc", "balanced_accuracy", "brier")
SIGNALS = tuple(FEATURES)  # every cheap signal and judge-step signal the stacked calibrator may use


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="evouna")
    parser.add_argument("--judge", default="answer_accuracy")
    parser.add_argument("--sizes", default="10,20,50,100,200")
    parser.add_argument("--n-test", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lm", default=None)
    parser.add_argument("--out", default="runs/label_curve")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    data = load_labelled(args.data, label_column="label", label_kind="binary")
    picked = balanced_sample(data, max(sizes) + args.n_test, seed=args.seed)
    parts = split(picked, dev=0, test=args.n_test / len(picked), seed=args.seed)
    pool, test = parts.train, parts.test
    judge = build_metric(args.judge, lm=resolve_lm(args.lm))
    params = {"data": args.data, "judge": args.judge, "sizes": sizes, "n_test": len(test), "repeats": args.repeats,
              "seed": args.seed, "lm": args.lm or "embedded", "data_hash": data_hash(list(picked.dataset.samples))}
    start = time.perf_counter()
    with tracked_run("dspy-judges-experiments", f"label curve: {args.judge} on {args.data}", params=params,
                     autolog=False):
        pool_raw, pool_results = judge_scores(judge, pool, progress=True, desc="judge on the label pool")
        test_raw, test_results = judge_scores(judge, test, progress=True, desc="judge on the test set")
        scoring_seconds = time.perf_counter() - start
        signals = [s for s in SIGNALS if s in applicable_baselines(test) or s not in SAMPLE_SIGNALS]
        pool_x, test_x = feature_matrix(signals, pool.dataset, pool_results), feature_matrix(signals, test.dataset, test_results)
        pool_y, test_y = np.asarray(pool.labels, float), np.asarray(test.labels, float)
        best_signal = max(applicable_baselines(test), key=lambda s: agreement(pool_y, pool_x[:, signals.index(s)], n_bootstrap=1).value("roc_auc") or 0)

        rows = []
        for n in sizes:
            per_method: dict[str, list[dict[str, float]]] = {"Platt on judge score": [], "stacked": [],
                                                             f"logistic on {best_signal}": []}
            for r in range(args.repeats):
                index = balanced_indices(pool.labels, n, np.random.default_rng([args.seed, r, n]))
                y, raw, x = pool_y[index], pool_raw[index], pool_x[index]
                fitted = {
                    "Platt on judge score": Calibrator("platt", binary=True).fit(raw, y).predict(test_raw),
                    "stacked": (lambda c: c.predict(test_raw, test_x[:, [signals.index(f) for f in c.features]]))(
                        Calibrator("stacked", binary=True, features=signals).fit(raw, y, x)),
                    f"logistic on {best_signal}": Calibrator("platt", binary=True).fit(
                        x[:, signals.index(best_signal)], y).predict(test_x[:, signals.index(best_signal)]),
                }
                for method, scores in fitted.items():
                    report = agreement(test_y, scores, n_bootstrap=1)
                    per_method[method].append({s: report.value(s) for s in STATS})
            for method, values in per_method.items():
                row = {"n": n, "method": method}
                for stat in STATS:
                    v = np.array([d[stat] for d in values if d[stat] is not None], float)
                    row[stat], row[f"{stat}_sd"] = float(v.mean()), float(v.std())
                    mlflow.log_metric(metric_key(f"{method}.{stat}"), row[stat], step=n)
                rows.append(row)
        raw_report = agreement(test_y, test_raw, n_bootstrap=1000)
    total = time.perf_counter() - start

    print(f"\n{args.judge} on {args.data}: held-out test n={len(test)}; mean ± sd over {args.repeats} draws of n labels;"
          f" uncalibrated judge ROC-AUC {raw_report.value('roc_auc'):.3f}, Brier {raw_report.value('brier'):.3f}\n")
    lines = ["| labels | method | " + " | ".join(STATS) + " |", "|---:|---|" + "---:|" * len(STATS)]
    for row in rows:
        lines.append(f"| {row['n']} | {row['method']} | " + " | ".join(
            f"{row[s]:.3f} ± {row[s + '_sd']:.3f}" for s in STATS) + " |")
    if max(sizes) >= len(pool):
        lines.append(f"\n(n >= {len(pool)} is the whole label pool: every draw is the same, so its sd is 0.)")
    table = "\n".join(lines)
    print(table)
    print(f"\njudge scoring {scoring_seconds / 60:.1f} min, total {total / 60:.1f} min")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{dataset_name(args.data)}-{args.judge}"
    (out / f"{stem}.json").write_text(json.dumps({"args": vars(args), "rows": rows,
                                                                     "seconds": total}, indent=1))
    (out / f"{stem}.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
