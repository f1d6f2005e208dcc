"""Which DSPy optimizer makes a judge agree with people? One held-out comparison per (data, judge).

For each study, `dspy-judges calibrate` splits the labelled set (seeded, label-balanced) into train and a
held-out test part, then for each optimizer (none / LabeledFewShot / BootstrapFewShot / MIPROv2 / GEPA /
memory alignment, calibration.memory)
compiles the judge on train, fits a stacked calibrator on train, and scores test; baselines and the
shipped judge are scored on the same items. Every study is an MLflow run (params, agreement with CIs,
compiled judges, plots); the combined table is printed and written to runs/optimizers/results.md.

    .venv/bin/python experiments/compare_optimizers.py                       # the three default studies
    .venv/bin/python experiments/compare_optimizers.py --study evouna:answer_correctness --n-train 12 --n-test 24

LabeledFewShot makes demos whose output is the human label, so it applies only to judges whose one
step outputs the verdict (AnswerAccuracy, AspectCritic ...); for multi-step judges (Faithfulness) it is
reported as skipped. MIPROv2 and GEPA propose instructions with the judge's own LM (the embedded 135M
model unless --lm says otherwise), with budgets small enough for 2 CPU cores (see --optimizer-options).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from calibration.agreement.record import CalibrationRun
from judges_app.cli import main as cli
from judges_app.cli.common import dataset_name

STATS = ("roc_auc", "balanced_accuracy", "cohen_kappa", "brier")
DEFAULT_OPTIONS = {"num_candidates": 2, "num_trials": 3, "minibatch": False, "max_metric_calls": 30}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="append", default=None,
                        help="DATA:JUDGE, repeatable (default: begin:faithfulness, evouna:answer_accuracy, "
                             "evouna:answer_correctness)")
    parser.add_argument("--optimizers", default="none,labeled,bootstrap,mipro,gepa,memory")
    parser.add_argument("--n-train", type=int, default=16)
    parser.add_argument("--n-test", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-bootstrap", type=int, default=1000, help="bootstrap resamples for the 95%% CIs")
    parser.add_argument("--lm", default=None)
    parser.add_argument("--reflection-lm", default=None, help="GEPA's reflection LM (default: the judge LM)")
    parser.add_argument("--optimizer-options", default=json.dumps(DEFAULT_OPTIONS))
    parser.add_argument("--out", default="runs/optimizers")
    args = parser.parse_args()

    studies = args.study or ["begin:faithfulness", "evouna:answer_accuracy", "evouna:answer_correctness"]
    header = ["| data | judge | scorer | " + " | ".join(STATS) + " |", "|---|---|---|" + "---|" * len(STATS)]
    lines, timings = list(header), []
    for study in studies:
        data, _, judge = study.partition(":")
        name = dataset_name(data)
        out = Path(args.out) / f"{name}-{judge}"
        argv = ["calibrate", data, "--judge", judge, "--n-train", str(args.n_train), "--n-test", str(args.n_test),
                "--seed", str(args.seed), "--n-bootstrap", str(args.n_bootstrap), "--out", str(out),
                "--optimizer-options", args.optimizer_options]
        argv += [a for o in args.optimizers.split(",") for a in ("--optimizer", o)]
        argv += ["--lm", args.lm] if args.lm else []
        argv += ["--reflection-lm", args.reflection_lm] if args.reflection_lm else []
        start = time.perf_counter()
        code = cli(argv)
        timings.append((f"{name}:{judge}", time.perf_counter() - start))
        if code != 0:
            print(f"{study}: dspy-judges calibrate exited {code}", file=sys.stderr)
            return code
        run = CalibrationRun.load(out / "calibration_run.json")
        first = len(lines)
        for scorer, report in run.agreement.items():
            cells = []
            for stat in STATS:
                s = report.stats.get(stat, {})
                cells.append("n/a" if s.get("value") is None else f"{s['value']:.3f} [{s['low']:.2f}, {s['high']:.2f}]")
            lines.append(f"| {name} | {judge} | {scorer} | " + " | ".join(cells) + " |")
        for label, reason in run.meta.get("skipped", {}).items():
            lines.append(f"| {name} | {judge} | {label}: skipped ({reason.split(';')[0]}) |" + " |" * len(STATS))
        # One file per study as well, so studies run by separate commands can be read side by side.
        (out / "results.md").write_text("\n".join(header + lines[first:]) + f"\n\n{timings[-1][0]}: {timings[-1][1] / 60:.1f} min\n")
    table = "\n".join(lines)
    print("\n" + table)
    for study, seconds in timings:
        print(f"{study}: {seconds / 60:.1f} min")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "results.md").write_text(table + "\n\n" + "\n".join(f"{s}: {t / 60:.1f} min" for s, t in timings) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
