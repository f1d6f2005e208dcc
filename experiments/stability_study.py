"""How stable are the judges, and what do voting and log-probability scoring buy?

Each judge scores the same items k times with sampled LM calls (temperature 0.7, one DSPy cache entry per
rollout). Reported per judge, from those rollouts (calibration.stability): the verdict flip rate (share
of items whose verdict is not the same in every rollout), the pairwise disagreement, the score standard
deviation, and the same after majority-of-m and mean-of-m voting; for judges that support it, the same
again with ``use_logprobs=True`` (the score is P(verdict) read from token log-probabilities). The last
column is the ROC-AUC against the human labels of one rollout vs the mean of all k. Logged to MLflow.

    .venv/bin/python experiments/stability_study.py                          # both default studies
    .venv/bin/python experiments/stability_study.py --study evouna:answer_accuracy --n 20 --k 6
"""

from __future__ import annotations

import argparse
import inspect
import json
import time
from pathlib import Path

import mlflow
import numpy as np

from calibration.agreement.stats import agreement
from calibration.data.labelled import balanced_sample
from calibration.fitting.stability import stability
from judges.lm.resolve import resolve_lm
from judges.metrics.catalogue import metric_classes
from judges_app.cli.common import build_metric, load_labelled
from judges_app.tracking import metric_key, tracked_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="append", default=None,
                        help="DATA:JUDGE, repeatable (default: begin:faithfulness and evouna:answer_accuracy)")
    parser.add_argument("--n", type=int, default=16, help="items per study (label-balanced)")
    parser.add_argument("--k", type=int, default=6, help="rollouts per item")
    parser.add_argument("--group", type=int, default=3, help="m, the rollouts per vote")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lm", default=None)
    parser.add_argument("--out", default="runs/stability")
    args = parser.parse_args()

    lm = resolve_lm(args.lm)
    lines = ["| data | judge | scoring | verdict flip rate | pairwise disagreement | score std | ROC-AUC one rollout | "
             f"ROC-AUC mean of {args.k} |", "|---|---|---|---:|---:|---:|---:|---:|"]
    results, timings = {}, {}
    for study in args.study or ["begin:faithfulness", "evouna:answer_accuracy"]:
        data_name, _, judge_name = study.partition(":")
        data = balanced_sample(load_labelled(data_name, label_column="label", label_kind="binary"), args.n, seed=args.seed)
        variants = {"sampled verdicts": {}}
        if "use_logprobs" in inspect.signature(metric_classes()[judge_name].__init__).parameters:
            variants["log-probability scores"] = {"use_logprobs": True}
        params = {"data": data_name, "judge": judge_name, "n": len(data), "k": args.k, "group": args.group,
                  "temperature": args.temperature, "seed": args.seed, "lm": args.lm or "embedded"}
        with tracked_run("dspy-judges-experiments", f"stability: {judge_name} on {data_name}", params=params,
                         autolog=False):
            for variant, judge_params in variants.items():
                start = time.perf_counter()
                judge = build_metric(judge_name + (":" + json.dumps(judge_params) if judge_params else ""), lm=lm)
                report = stability(judge, list(data.dataset), k=args.k, temperature=args.temperature)
                timings[f"{study} {variant}"] = time.perf_counter() - start
                filled = np.where(np.isnan(report.scores), 0.5, report.scores)
                auc_one = agreement(data.labels, filled[:, 0], n_bootstrap=1).value("roc_auc")
                auc_mean = agreement(data.labels, filled.mean(axis=1), n_bootstrap=1).value("roc_auc")
                rows = [("single rollout", report.summary())]
                rows += [(f"{how} of {args.group}", report.summary(report.grouped(args.group, how)))
                         for how in ("majority", "mean")]
                for label, s in rows:
                    name = f"{variant}, {label}"
                    lines.append(f"| {data_name} | {judge_name} | {name} | {s['flip_rate']:.3f} | "
                                 f"{s['pairwise_disagreement']:.3f} | {s['score_std']:.3f} | "
                                 + (f"{auc_one:.3f} | {auc_mean:.3f} |" if label == "single rollout" else " | |"))
                    for key in ("flip_rate", "pairwise_disagreement", "score_std"):
                        mlflow.log_metric(metric_key(f"{name}.{key}"), s[key])
                mlflow.log_metric(metric_key(f"{variant}.failed_rollouts"), report.summary()["failed_rollouts"])
                results[f"{study} {variant}"] = report.to_dict()
    table = "\n".join(lines)
    print("\n" + table + "\n")
    for key, seconds in timings.items():
        print(f"{key}: {seconds / 60:.1f} min")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps({"args": vars(args), "reports": results, "seconds": timings}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
