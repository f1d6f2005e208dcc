"""How many human labels does calibrating a judge need? A learning curve at 10, 20, 50, 100, 200 labels.

The judge (as shipped) scores a labelled pool and a fixed held-out test set once (the DSPy cache keeps
those calls, so reruns are fast). Then, for each label budget n and each of --repeats seeded draws of n
labels from the pool (label-balanced), three things are fitted on those n labels only and measured on the
test set: Platt scaling of the judge's score, the stacked calibrator (judge score + cheap signals, kept
only when cross-validation on the n labels prefers it), and a logistic fit of the best cheap signal alone.
What changes with n is the calibration, not the judge's prompts: compiling is studied in
compare_optimizers.py. Logged to MLflow (one run, metrics stepped by n) and printed as a table.

``--finetune`` (a ``faithfulness_with_verifier`` judge, balanced draws only) adds a fourth method: the
verifier fine-tuned on the n labels (``fit(optimizer="finetune")``: 25% of them held out inside for early
stopping, refused below 40 labels or 10 of a label, so those budgets have no row) and Platt scaling of the
fine-tuned judge's score on the same n. It shows where fine-tuning on a user's own labels starts to pay.
That Platt fit reads the fine-tuned judge's scores of its own training items (``fit`` cross-fits instead;
``crossfit_calibrator.py`` measures the difference): its ROC-AUC is unaffected (Platt is monotone), but its
Brier and balanced accuracy are optimistic.

Which labels? ``--selection random,active`` compares a person labelling in random order with one labelling
what ``dspy-judges label`` would ask next (``calibration.active``: each method's own calibrator, refitted
every 2 labels, ranks the rest of the pool by uncertainty and disagreement with the cheap signal the CLI
uses); both start from the same random items. Labels here are revealed from the pool's existing labels.

    .venv/bin/python experiments/label_curve.py --data evouna --judge answer_accuracy
    .venv/bin/python experiments/label_curve.py --data begin --judge faithfulness --sizes 10,20,50 --n-test 60
    .venv/bin/python experiments/label_curve.py --data evouna --judge answer_accuracy --sizes 10,20,50 --pool-size 200 \
        --selection random,active
    .venv/bin/python experiments/label_curve.py --data begin-wow --judge faithfulness_with_verifier --sizes 20,50,100,200 \
        --repeats 3 --finetune
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import mlflow
import numpy as np

from calibration.agreement.stats import agreement
from calibration.data.labelled import balanced_indices, balanced_sample, split, without_shipped_training
from calibration.fitting.active import selection_order
from calibration.fitting.calibrators import Calibrator
from calibration.fitting.finetune import finetune_verifier
from calibration.fitting.fit import judge_scores
from calibration.fitting.heldout import applicable_baselines
from calibration.fitting.signals import FEATURES, SAMPLE_SIGNALS, feature_matrix
from judges.lm.resolve import resolve_lm
from judges_app.cli.common import build_metric, dataset_name, load_labelled
from judges_app.cli.label import disagreement_signal
from judges_app.tracking import data_hash, metric_key, tracked_run

STATS = ("roc_auc", "balanced_accuracy", "brier")
SIGNALS = tuple(FEATURES)  # every cheap signal and judge-step signal the stacked calibrator may use
FINETUNED = "fine-tuned verifier, Platt"  # the method --finetune adds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="evouna")
    parser.add_argument("--judge", default="answer_accuracy")
    parser.add_argument("--sizes", default="10,20,50,100,200")
    parser.add_argument("--n-test", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pool-size", type=int, default=None,
                        help="unlabelled items to choose from (default: the largest of --sizes; make it larger to "
                             "give active selection a choice)")
    parser.add_argument("--selection", default="balanced",
                        help="how the n labels are picked, comma-separated: balanced (a seeded draw, half of each "
                             "label), random (a person labelling in random order), active (calibration.active: the "
                             "method's calibrator refitted every 2 labels ranks the rest)")
    parser.add_argument("--finetune", action="store_true",
                        help="also fine-tune the verifier on each draw (faithfulness_with_verifier, balanced draws)")
    parser.add_argument("--finetune-epochs", type=int, default=4,
                        help="passes over each draw's training labels when fine-tuning (default 4)")
    parser.add_argument("--lm", default=None)
    parser.add_argument("--out", default="runs/label_curve")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    unknown = sorted(set(args.selection.split(",")) - {"balanced", "random", "active"})
    if unknown:
        parser.error(f"--selection: {unknown} are not balanced, random or active")
    if args.finetune_epochs < 1:
        parser.error(f"--finetune-epochs must be at least 1, got {args.finetune_epochs}")
    if args.finetune and (args.judge != "faithfulness_with_verifier" or args.selection != "balanced"):
        parser.error("--finetune fine-tunes the verifier of --judge faithfulness_with_verifier on balanced draws only")

    data, dropped = without_shipped_training(load_labelled(args.data, label_column="label", label_kind="binary"))
    if dropped:
        print(f"{args.data}: left out {dropped} items the shipped verifier trained on; {len(data)} remain")
    pool_size = args.pool_size or max(sizes)
    if pool_size < max(sizes):
        parser.error(f"--pool-size {pool_size} is smaller than the largest of --sizes ({max(sizes)})")
    picked = balanced_sample(data, pool_size + args.n_test, seed=args.seed)
    parts = split(picked, dev=0, test=args.n_test / len(picked), seed=args.seed)
    pool, test = parts.train, parts.test
    judge = build_metric(args.judge, lm=resolve_lm(args.lm))
    params = {"data": args.data, "judge": args.judge, "sizes": sizes, "n_test": len(test), "pool_size": len(pool),
              "repeats": args.repeats,
              "selection": args.selection, "seed": args.seed, "lm": args.lm or "embedded", "data_hash": data_hash(list(picked.dataset.samples))}
    if args.finetune:
        params["finetune_epochs"] = args.finetune_epochs
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

        best = signals.index(best_signal)
        chooser = disagreement_signal(pool.dataset)
        chooser_values = pool_x[:, signals.index(chooser)] if chooser in signals else None

        def fitted(method: str, index) -> Callable[[np.ndarray, np.ndarray | None], np.ndarray]:
            """The method's calibrator fitted on the pool items ``index``, as (raw scores, signals) -> p."""
            y, raw, x = pool_y[index], pool_raw[index], pool_x[index]
            if method == "stacked":
                cal = Calibrator("stacked", binary=True, features=signals).fit(raw, y, x)
                return lambda r, xs: cal.predict(r, xs[:, [signals.index(f) for f in cal.features]])
            if method == "Platt on judge score":
                cal = Calibrator("platt", binary=True).fit(raw, y)
                return lambda r, xs: cal.predict(r)
            if method == FINETUNED:  # test scores come from the fine-tuned judge, not from ``r``
                tuned, _ = finetune_verifier(judge, pool.subset(list(index)), y, seed=int(len(index)),
                                             epochs=args.finetune_epochs,
                                             out=Path(args.out) / "finetuned" / f"{len(index)}-{int(np.sum(index))}")
                cal = Calibrator("platt", binary=True).fit(judge_scores(tuned, pool.subset(list(index)))[0], y)
                tuned_test = judge_scores(tuned, test)[0]
                return lambda r, xs: cal.predict(tuned_test)
            cal = Calibrator("platt", binary=True).fit(x[:, best], y)
            return lambda r, xs: cal.predict(xs[:, best])

        methods = ("Platt on judge score", "stacked", f"logistic on {best_signal}") + ((FINETUNED,) if args.finetune else ())
        rows = []
        for selection in args.selection.split(","):
            per: dict[tuple[int, str], list[dict[str, float]]] = {}
            for r in range(args.repeats):
                for method in methods:
                    if selection == "balanced":
                        orders = {n: balanced_indices(pool.labels, n, np.random.default_rng([args.seed, r, n]))
                                  for n in sizes}
                    else:
                        order = selection_order(
                            pool.labels, max(sizes), strategy=selection, signal=chooser_values, seed=args.seed * 1000 + r,
                            probabilities=lambda picked, m=method: fitted(m, picked)(pool_raw, pool_x))
                        orders = {n: order[:n] for n in sizes}
                    for n, index in orders.items():
                        try:
                            scores = fitted(method, index)(test_raw, test_x)
                        except ValueError:  # n random labels of one class only: nothing to fit
                            continue
                        report = agreement(test_y, scores, n_bootstrap=1)
                        per.setdefault((n, method), []).append({s: report.value(s) for s in STATS})
            for (n, method), values in sorted(per.items(), key=lambda kv: (kv[0][0], methods.index(kv[0][1]))):
                row = {"n": n, "method": method, "selection": selection, "draws": len(values)}
                for stat in STATS:
                    v = np.array([d[stat] for d in values if d[stat] is not None], float)
                    row[stat], row[f"{stat}_sd"] = float(v.mean()), float(v.std())
                    mlflow.log_metric(metric_key(f"{selection}.{method}.{stat}"), row[stat], step=n)
                rows.append(row)
        raw_report = agreement(test_y, test_raw, n_bootstrap=1000)
    total = time.perf_counter() - start

    print(f"\n{args.judge} on {args.data}: held-out test n={len(test)}; mean ± sd over {args.repeats} draws of n labels;"
          f" uncalibrated judge ROC-AUC {raw_report.value('roc_auc'):.3f}, Brier {raw_report.value('brier'):.3f}\n")
    lines = ["| labels | selection | method | " + " | ".join(STATS) + " |", "|---:|---|---|" + "---:|" * len(STATS)]
    for row in rows:
        lines.append(f"| {row['n']} | {row['selection']} | {row['method']} | " + " | ".join(
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
