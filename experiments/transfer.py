"""Does a calibrated judge travel? Fit on one labelled set, measure on another, and in-domain.

    .venv/bin/python experiments/transfer.py                         # the three default studies
    .venv/bin/python experiments/transfer.py --study begin-wow:begin-cmu-tc --n-train 30 --n-test 40

For each study (SOURCE:TARGET), the shipped judge (Faithfulness; the embedded SmolLM2-135M unless --lm)
scores a seeded, label-balanced sample of SOURCE (train) and of TARGET (test; held out, disjoint from train
when both are the same set). On train are fitted: the stacked calibrator (forward selection over the
judge's score, the cheap signals and the judge's own steps) monotone in every input, the same calibrator
unconstrained, and a logistic fit of each single cheap signal (the best by cross-validated loss on train
is "best single signal"). On test: ROC-AUC, balanced accuracy, Brier with bootstrap 95% CIs, and the hard
slice (the test items the best baseline, at its cut-off fitted on train, gets wrong). Data sets, all from
../shared/data (dev splits only; labels binary):

  begin           BEGIN dev, all three sources (WoW, CMU-DoG, Topical-Chat): "fully attributable" = 1
  begin-wow       BEGIN dev, Wizard of Wikipedia only
  begin-cmu-tc    BEGIN dev, CMU-DoG and Topical-Chat (the turns the shipped verifier trained on are left out
                  of every set, and counted: only the bundled slice's CMU-DoG turns remain here)
  summeval        SummEval consistency, the summary as response and the article as context: 1 when every
                  expert rated it 5 (mean 5.0), else 0
  FILE            a labelled .jsonl / .csv of your own (binary "label")

Writes runs/transfer/results.md (the table) and one calibration_run.json per study; logs each study to
MLflow (experiment "dspy-judges-transfer").
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from calibration.agreement.record import CalibrationRun
from calibration.data.labelled import LabelledSet, balanced_indices, without_shipped_training
from calibration.data.loaders import load_begin, load_summeval
from calibration.fitting.calibrators import Calibrator
from calibration.fitting.fit import judge_scores
from calibration.fitting.heldout import applicable_baselines, hard_slice
from calibration.fitting.signals import feature_matrix
from judges import Faithfulness, SingleTurnSample
from judges.data.dataset import EvaluationDataset
from judges.lm.resolve import resolve_lm
from judges_app.tracking import log_agreement, tracked_run

STATS = ("roc_auc", "balanced_accuracy", "brier")
JUDGE_SIGNALS = ("claim_count", "unsupported_count", "claims_missing_specifics")


def load(name: str) -> LabelledSet:
    """The set, without the items the shipped verifier trained on (a calibrator signal here): says how many."""
    data, dropped = without_shipped_training(read(name))
    if dropped:
        print(f"{name}: left out {dropped} items the shipped verifier trained on; {len(data)} remain", flush=True)
    return data


def read(name: str) -> LabelledSet:
    if Path(name).is_file():  # a labelled file of your own (sample fields + a binary "label")
        return (LabelledSet.from_csv if name.endswith(".csv") else LabelledSet.from_jsonl)(name, name=Path(name).stem)
    if name == "begin":
        return load_begin()
    if name == "begin-wow":
        return load_begin(parts=("wow",))
    if name == "begin-cmu-tc":
        return load_begin(parts=("cmu", "tc"))
    if name == "summeval":
        data = load_summeval("consistency")
        samples = [SingleTurnSample(response=s.response, retrieved_contexts=s.reference_contexts) for s in data.dataset]
        return LabelledSet("summeval-consistency", EvaluationDataset(samples), [int(v >= 5.0) for v in data.labels],
                           "binary", data.source)
    raise SystemExit(f"unknown data set {name!r}: begin, begin-wow, begin-cmu-tc, summeval")


def draw(data: LabelledSet, n: int, seed: int, exclude: set[int] = frozenset()) -> tuple[LabelledSet, set[int]]:
    """A label-balanced sample of ``n`` items not in ``exclude`` (all of them when fewer remain, said so);
    and the indices drawn."""
    allowed = [i for i in range(len(data)) if i not in exclude]
    if n > len(allowed):
        print(f"{data.name}: {n} items asked for, {len(allowed)} there: taking them all", flush=True)
        n = len(allowed)
    picked = balanced_indices([data.labels[i] for i in allowed], n, np.random.default_rng(seed))
    indices = [allowed[i] for i in picked]
    return data.subset(indices), set(indices)


def fitted(kind: str, raw, labels, extra, features, monotone: bool) -> Calibrator:
    return Calibrator(kind, binary=True, features=features, monotone=monotone).fit(raw, labels, extra)


def best_single_signal(x: np.ndarray, y: np.ndarray, names: list[str]) -> tuple[int, Calibrator]:
    """The best single signal: a monotone logistic fit of each column of ``x`` (signals ``names``), the one
    with the lowest cross-validated loss on train; its column index and its fit."""
    losses = [Calibrator("stacked", binary=True, features=[n])._cv_loss(x[:, [i]], y, [n]) for i, n in enumerate(names)]
    best = int(np.argmin(losses))
    single = Calibrator("platt", binary=True)
    single._fit_linear(x[:, [best]], y, [names[best]])
    return best, single


def study(source: str, target: str, args, lm) -> tuple[CalibrationRun, float]:
    start = time.perf_counter()
    source_set = load(source)
    train, used = draw(source_set, args.n_train, args.seed)
    target_set = source_set if target == source else load(target)
    test, _ = draw(target_set, args.n_test, args.seed + 1, used if target == source else set())
    judge = Faithfulness(lm=lm)
    train_raw, train_results = judge_scores(judge, train, progress=True, desc=f"{source} (train)")
    test_raw, test_results = judge_scores(judge, test, progress=True, desc=f"{target} (test)")
    ok_train, ok_test = np.isfinite(train_raw), np.isfinite(test_raw)
    train, test = train.subset(np.flatnonzero(ok_train).tolist()), test.subset(np.flatnonzero(ok_test).tolist())
    train_raw, test_raw = train_raw[ok_train], test_raw[ok_test]
    train_results = [r for r, k in zip(train_results, ok_train) if k]
    test_results = [r for r, k in zip(test_results, ok_test) if k]
    signals = applicable_baselines(test)
    features = signals + list(JUDGE_SIGNALS)
    x_train = feature_matrix(features, train.dataset, train_results)
    x_test = feature_matrix(features, test.dataset, test_results)
    y = np.asarray(train.labels, float)
    scores: dict[str, list[float]] = {}
    for i, name in enumerate(signals):
        scores[f"baseline: {name.replace('_', ' ')} (raw)"] = np.clip(x_test[:, i], 0, 1).tolist()
    best_i, single = best_single_signal(x_train[:, :len(signals)], y, signals)
    best_name = signals[best_i]
    scores[f"baseline: best single signal ({best_name.replace('_', ' ')}), fitted"] = single.predict(x_test[:, best_i]).tolist()
    scores["judge as shipped"] = test_raw.tolist()
    notes = {}
    for label, monotone in (("stacked, monotone", True), ("stacked, unconstrained", False)):
        calibrator = fitted("stacked", train_raw, y, x_train, features, monotone)
        chosen = [features.index(f) for f in calibrator.features]
        key = f"judge + {label}"
        scores[key] = calibrator.predict(test_raw, x_test[:, chosen] if chosen else None).tolist()
        notes[key] = {"note": calibrator.note, "outside_fit_range": calibrator.out_of_range(
            test_raw, x_test[:, chosen] if chosen else None)}
    meta = {"source": source, "target": target, "train": len(train), "test": len(test), "seed": args.seed,
            "failed": {"train": int((~ok_train).sum()), "test": int((~ok_test).sum())}, "calibrators": notes,
            "best_single_signal": best_name}
    slice_ = hard_slice(train, test, signals)
    if slice_:
        meta["hard_slice"] = slice_
    run = CalibrationRun(f"{Path(source).stem} -> {Path(target).stem}", test.labels, scores, meta=meta)
    run.compute_agreement(n_bootstrap=args.n_bootstrap, seed=args.seed)
    return run, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="append", default=None,
                        help="SOURCE:TARGET, repeatable (default: begin:begin, begin-wow:begin-cmu-tc, begin:summeval)")
    parser.add_argument("--n-train", type=int, default=40)
    parser.add_argument("--n-test", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--lm", default=None, help="judge LM (default: the embedded SmolLM2-135M)")
    parser.add_argument("--out", default="runs/transfer")
    args = parser.parse_args()
    studies = args.study or ["begin:begin", "begin-wow:begin-cmu-tc", "begin:summeval"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lm = resolve_lm(args.lm)
    lines = ["| study | scorer | " + " | ".join(STATS) + " | hard slice accuracy |", "|---" * (len(STATS) + 3) + "|"]
    for spec in studies:
        source, _, target = spec.partition(":")
        with tracked_run("dspy-judges-transfer", spec, params={"source": source, "target": target,
                                                               "n_train": args.n_train, "n_test": args.n_test,
                                                               "seed": args.seed, "lm": args.lm or "embedded"}):
            run, seconds = study(source, target or source, args, lm)
            for scorer, report in run.agreement.items():
                log_agreement(report, scorer)
        run.meta["seconds"] = seconds
        run.save(out / f"{Path(source).stem}-to-{Path(target or source).stem}.json")
        print(f"\n{run.name} ({seconds / 60:.1f} min; train {run.meta['train']}, test {run.meta['test']})")
        print(run.table(stats=list(STATS)))
        for finding in run.findings(n_bootstrap=args.n_bootstrap):
            print(f"* {finding}")
        for scorer, report in run.agreement.items():
            cells = [f"{report.value(s):.3f} [{report.stats[s]['low']:.2f}, {report.stats[s]['high']:.2f}]"
                     if report.value(s) is not None else "n/a" for s in STATS]
            accuracy, _ = run.hard_slice_accuracy(scorer)
            lines.append(f"| {run.name} | {scorer} | " + " | ".join(cells)
                         + f" | {'n/a' if accuracy is None else f'{accuracy:.2f}'} |")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print(f"\nwrote {out / 'results.md'}")
    print(json.dumps({"studies": studies}, indent=None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
