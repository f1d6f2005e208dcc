"""Does compiling and calibrating a judge make it agree with people? A held-out test on real human labels.

For BEGIN (is a dialogue response fully attributable to its knowledge?) the judge is Faithfulness; for
EVOUNA (is a QA answer correct given the gold answer?) it is AnswerAccuracy. The steps, all seeded:

  1. a stratified sample of the set, split into train and a held-out test part;
  2. baselines on test: token overlap (response tokens found in the evidence), reference-token recall
     (EVOUNA: gold-answer tokens found in the response) and embedding similarity;
  3. the judge as shipped, on test;
  4. the judge compiled on train (BootstrapFewShot by default), on test;
  5. the compiled judge with a stacked calibrator fitted on train (raw score + cheap signals; it falls
     back to Platt scaling when the signals do not help in cross-validation), on test.

Each line gets ROC-AUC, balanced accuracy, Cohen's kappa, Brier score and ECE with bootstrap 95% CIs.
The report (JSON) and the compiled judge (JSON) are written under --out.

    .venv/bin/python experiments/calibrate_judges.py --dataset begin --n-train 60 --n-test 120
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from calibration.agreement import agreement  # noqa: E402
from calibration.datasets import LabelledSet, load_begin, load_evouna, split  # noqa: E402
from calibration.fit import FEATURES, fit, judge_scores  # noqa: E402
from judges import AnswerAccuracy, Faithfulness  # noqa: E402
from judges.models import local_lm  # noqa: E402

STATS = ("roc_auc", "balanced_accuracy", "cohen_kappa", "brier", "ece")


def sample_balanced(data: LabelledSet, n: int, seed: int) -> LabelledSet:
    rng = np.random.default_rng(seed)
    labels = np.asarray(data.labels)
    picked = []
    for value in (0, 1):
        pool = np.where(labels == value)[0]
        picked.extend(rng.choice(pool, size=min(len(pool), n // 2), replace=False).tolist())
    return data.subset(sorted(picked))


def row(name: str, labels, scores, seconds: float | None = None) -> dict:
    report = agreement(labels, scores, n_bootstrap=1000)
    return {"name": name, "seconds": seconds, **{s: report.stats[s] for s in STATS}}


def fmt(stat: dict) -> str:
    if stat["value"] is None:
        return "n/a"
    return f"{stat['value']:.3f} [{stat['low']:.2f}, {stat['high']:.2f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=("begin", "evouna"), default="begin")
    parser.add_argument("--n-train", type=int, default=60)
    parser.add_argument("--n-test", type=int, default=120)
    parser.add_argument("--optimizer", default="bootstrap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/calibration")
    args = parser.parse_args()

    if args.dataset == "begin":
        full, make = load_begin(), lambda lm: Faithfulness(lm=lm)
    else:
        full, make = load_evouna(systems=("fid", "chatgpt", "gpt35")), lambda lm: AnswerAccuracy(lm=lm)
    data = sample_balanced(full, args.n_train + args.n_test, args.seed)
    parts = split(data, dev=0, test=args.n_test / len(data), seed=args.seed)
    train, test = parts.train, parts.test
    labels = test.labels
    print(f"{args.dataset}: train {len(train)} (positives {sum(train.labels)}), test {len(test)} "
          f"(positives {sum(labels)}); judge {make(None).name}; optimizer {args.optimizer}; seed {args.seed}",
          flush=True)

    rows = []
    for feature in ("token_overlap", "reference_token_recall", "embedding_similarity"):
        if feature == "reference_token_recall" and args.dataset != "evouna":
            continue
        scores = [FEATURES[feature](s) for s in test.dataset]
        rows.append(row(f"baseline: {feature.replace('_', ' ')}", labels, scores))

    lm = local_lm()
    start = time.perf_counter()
    raw, _ = judge_scores(make(lm), test)
    rows.append(row("judge as shipped", labels, raw, time.perf_counter() - start))
    print(rows[-1], flush=True)

    start = time.perf_counter()
    compiled = fit(make(lm), train, optimizer=args.optimizer, calibrator="stacked", seed=args.seed)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    compiled_raw, results = judge_scores(compiled.judge, test)
    rows.append(row(f"compiled ({args.optimizer})", labels, compiled_raw, time.perf_counter() - start))
    extra = (np.array([[FEATURES[f](s, r) for f in compiled.calibrator.features] for s, r in zip(test.dataset, results)])
             if compiled.calibrator.features else None)
    calibrated = compiled.calibrator.predict(compiled_raw, extra)
    rows.append(row(f"compiled + {compiled.calibrator.kind} calibration", labels, calibrated))

    print(f"\n{args.dataset}, held-out test n={len(test)}, bootstrap 95% CIs; calibrator: {compiled.calibrator.note}\n")
    print("| scorer | ROC-AUC | balanced accuracy | Cohen's kappa | Brier | ECE |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | " + " | ".join(fmt(r[s]) for s in STATS) + " |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    compiled.report.update(test_rows=rows, fit_seconds=fit_seconds, dataset=args.dataset, seed=args.seed)
    compiled.save(out / f"{args.dataset}_{compiled.name}.json")
    (out / f"{args.dataset}_report.json").write_text(json.dumps({"rows": rows, "args": vars(args)}, indent=1))
    print(f"\nfit took {fit_seconds:.0f} s; wrote {out}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
