"""How long calibrating the verifier judge takes, against an older commit, printed as tables.

    .venv/bin/python benchmarks/calibration_speed.py --ref 4333ee7            # fit, calibrate, demo; 3 runs each
    .venv/bin/python benchmarks/calibration_speed.py --ref 4333ee7 --only demo-lm --runs 1
    .venv/bin/python benchmarks/calibration_speed.py --ref 4333ee7 --only fit --runs 5

Three measurements, each in a fresh process, the two commits taking turns (this tree, then ``--ref``, then
this tree ...), so a drift in the machine's speed touches both alike:

- ``fit``: ``fit(FaithfulnessWithVerifier(), <the bundled 60-row BEGIN slice>, optimizer=None,
  calibrator="stacked")`` against scoring the same 60 items with the judge alone. The judge's verifier is
  loaded and run once on an unrelated item before the clock starts, in both; the fit loads what else it
  needs (the embedder) on the clock, as a process that judges and then calibrates does.
- ``calibrate``: ``dspy-judges calibrate begin --judge faithfulness_with_verifier --optimizer none
  --calibrator stacked --n-train 100 --n-test 100 --no-mlflow``: 200 labelled items, the whole process
  timed from its start (needs ``../shared/data``).
- ``demo``, ``demo-lm``: what ``make demo`` and ``make demo-lm`` run (the latter with the embedded LM judge
  beside the verifier judge), MLflow tracking into a new folder, the whole process timed, DSPy's cache
  emptied before each run.

The model cache (ONNX graphs) is kept: a run that has to export a graph first is not what these time. Both
commits score the same items: the agreement tables of ``calibrate`` and ``demo`` are compared score by
score, and the largest difference is printed (float noise, or a change in what is computed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ["calibrate", "begin-slice", "--judge", "faithfulness_with_verifier", "--optimizer", "none",
        "--calibrator", "stacked", "--n-train", "28", "--n-test", "32"]
COMMANDS = {"demo": DEMO, "demo-lm": DEMO + ["--beside", "faithfulness"]}
DATA = ""
CALIBRATE = ["calibrate", "begin", "--judge", "faithfulness_with_verifier", "--optimizer", "none",
             "--calibrator", "stacked", "--n-train", "100", "--n-test", "100", "--no-mlflow"]


def child(mode: str, tree: str, rest: list[str]) -> None:
    """Runs inside the measured process, with ``tree``'s code first on the path."""
    sys.path.insert(0, tree)
    import judges

    if not Path(judges.__file__).resolve().is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"measuring {tree} but its judges package came from {judges.__file__}")
    if mode == "cli":
        from judges_app.cli import main

        sys.exit(main(rest))
    from calibration.data.loaders import load_begin_slice
    from calibration.fitting.fit import fit, judge_scores
    from judges import FaithfulnessWithVerifier, SingleTurnSample

    FaithfulnessWithVerifier().score(SingleTurnSample(
        response="The tower is tall.", retrieved_contexts=["The tower stands 300 metres tall in the city."]))
    data = load_begin_slice()
    start = time.perf_counter()
    if mode == "judge":
        judge_scores(FaithfulnessWithVerifier(), data)
    else:
        fit(FaithfulnessWithVerifier(), data, optimizer=None, calibrator="stacked")
    print(json.dumps({"seconds": time.perf_counter() - start}))


def measured(mode: str, tree: Path, rest: list[str] = ()) -> tuple[float, str]:
    """Wall seconds of one fresh process (``mode`` ``cli``) or the seconds it reports, and what it printed."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tree), "DSPY_JUDGES_DATA": DATA}
    with tempfile.TemporaryDirectory() as cache:
        env["DSPY_CACHEDIR"] = cache  # DSPy's disk cache: an LM call is made, not read back
        start = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--child", mode, "--tree", str(tree), "--", *rest],
                              cwd=tree, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{mode} in {tree} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    if mode == "cli":
        return wall, done.stdout
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"], done.stdout


def spread(values: list[float]) -> str:
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def largest_difference(a: Path, b: Path) -> tuple[float, int]:
    """The largest absolute difference between two calibration_run.json files' scores, and how many were
    compared (None on both sides counts as equal)."""
    left, right = (json.loads(p.read_text())["scores"] for p in (a, b))
    if set(left) != set(right):
        raise SystemExit(f"the runs have different scorers: {sorted(set(left) ^ set(right))}")
    worst, count = 0.0, 0
    for name in left:
        for x, y in zip(left[name], right[name], strict=True):
            if (x is None) != (y is None):
                return float("inf"), count
            if x is not None:
                worst, count = max(worst, abs(x - y)), count + 1
    return worst, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="the commit to compare with (checked out in a git worktree)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="fit,calibrate,demo", help="comma-separated: fit, calibrate, demo, demo-lm")
    args = parser.parse_args()
    wanted = args.only.split(",")
    sys.path.insert(0, str(ROOT))  # here only: a measured process imports nothing before its tree is first
    from calibration.data.loaders import data_dir

    global DATA
    DATA = str(data_dir())  # the shared data, found from this tree (the other one sits in a temporary folder)
    with tempfile.TemporaryDirectory() as scratch:
        old = Path(scratch) / "ref"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.ref], check=True,
                       capture_output=True)
        try:
            trees = {"this tree": ROOT, args.ref: old}
            seconds: dict[tuple[str, str], list[float]] = {}
            differences: dict[str, tuple[float, int]] = {}
            for step in [s for s in ("fit", "calibrate", "demo", "demo-lm") if s in wanted]:
                for run in range(args.runs):
                    outputs = {}
                    for name, tree in trees.items():
                        if step == "fit":
                            for mode in ("judge", "fit"):
                                value, _ = measured(mode, tree)
                                seconds.setdefault((f"fit: {mode}", name), []).append(value)
                            continue
                        out = Path(scratch) / f"{step}-{run}-{'new' if tree == ROOT else 'old'}"
                        command = COMMANDS[step] + ["--runs-dir", str(out / "runs")] if step in COMMANDS else CALIBRATE
                        value, _ = measured("cli", tree, [*command, "--out", str(out)])
                        seconds.setdefault((step, name), []).append(value)
                        outputs[name] = out / "calibration_run.json"
                        print(f"{step} run {run + 1} ({name}): {value:.1f} s", file=sys.stderr, flush=True)
                    if outputs:
                        diff = largest_difference(*outputs.values())
                        differences[step] = max(differences.get(step, diff), diff)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)

    print(f"\nSeconds, min / median / max of {args.runs} fresh processes, the commits taking turns\n")
    print(f"| measurement | this tree | {args.ref} | median ratio |")
    print("|---|---|---|---|")
    rows = sorted({m for m, _ in seconds}, key=["fit: judge", "fit: fit", "calibrate", "demo", "demo-lm"].index)
    for m in rows:
        new, old_ = seconds[(m, "this tree")], seconds[(m, args.ref)]
        print(f"| {m} | {spread(new)} | {spread(old_)} | {statistics.median(new) / statistics.median(old_):.2f} |")
    if "fit" in wanted:
        print("\n| fit / judge alone (medians) | this tree | " + args.ref + " |\n|---|---|---|")
        ratio = {t: statistics.median(seconds[("fit: fit", t)]) / statistics.median(seconds[("fit: judge", t)])
                 for t in ("this tree", args.ref)}
        print(f"| ratio | {ratio['this tree']:.1f}x | {ratio[args.ref]:.1f}x |")
    if differences:
        print("\n| agreement table | scores compared | largest difference |\n|---|---|---|")
        for step, (worst, count) in differences.items():
            print(f"| {step} | {count} | {worst:.2e} |")


if __name__ == "__main__":
    if "--child" in sys.argv:
        at = sys.argv.index("--child")
        rest = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
        child(sys.argv[at + 1], sys.argv[sys.argv.index("--tree") + 1], rest)
    else:
        main()
