"""Which forward-selection rule makes a stacked calibrator travel? Cheap signals only (no LM), many seeds.

    .venv/bin/python experiments/selection_rule.py                  # the default studies, 30 seeds
    .venv/bin/python experiments/selection_rule.py --study begin-wow:begin-cmu-tc --seeds 50

The stacked calibrator chooses its inputs by forward selection under cross-validation. ``"any_gain"``
keeps an input whenever it lowers the cross-validated loss at all; ``"one_se"`` (the default) only when it
lowers it by more than the standard error of the per-item gain. On 40 labels the first can keep inputs
that helped by chance, which then fail on another data set. This study measures both rules against the
best single signal (each cheap signal fitted alone by a monotone logistic on train; the best by
cross-validated loss), with the same seeded draws as ``experiments/transfer.py`` (label-balanced train from
SOURCE, held-out test from TARGET), repeated over seeds: the mean of each statistic over seeds, its
standard error, and how often each calibrator is at least as good as the best single signal; and the hard
slice (the test items the best baseline, at its cut-off fitted on train, gets wrong), pooled over seeds.

The judge's own score is left out on purpose: the embedded 135M judge was dropped by every calibrator in
``transfer.py`` (at chance), and without it each seed takes a fraction of a second, so the comparison
rests on many draws instead of one. Features are computed once per data set (the embedder runs once).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).parent))
from transfer import best_single_signal, load  # noqa: E402  (experiments/transfer.py)

from calibration.data.labelled import balanced_indices  # noqa: E402
from calibration.fitting.calibrators import Calibrator  # noqa: E402
from calibration.fitting.heldout import applicable_baselines, hard_item_positions  # noqa: E402
from calibration.fitting.signals import feature_matrix  # noqa: E402
from judges.run.records import sample_key  # noqa: E402

STATS = ("roc_auc", "balanced_accuracy", "brier")
#: The two rules this study compares (without a judge's score, "judge_first" is "one_se").
SELECTION_RULES = ("one_se", "any_gain")


def statistics(labels: np.ndarray, p: np.ndarray, hard: np.ndarray) -> dict[str, float]:
    """The three statistics, and the right / total counts on the hard items (``hard``: their positions)."""
    predicted = p >= 0.5
    recalls = [float(np.mean(predicted[labels == c] == bool(c))) for c in (0, 1)]
    return {"roc_auc": float(roc_auc_score(labels, p)), "balanced_accuracy": float(np.mean(recalls)),
            "brier": float(np.mean((p - labels) ** 2)),
            "hard_right": int(np.sum(predicted[hard] == labels[hard].astype(bool))), "hard_total": len(hard)}


def features(names: list[str], samples, cache: dict[tuple[str, str], float]) -> np.ndarray:
    """Each sample's signals ``names``, computed once per (sample, signal) across studies (``cache``)."""
    rows = []
    for sample in samples:
        key = sample_key(sample)
        missing = [n for n in names if (key, n) not in cache]
        if missing:
            cache.update({(key, n): v for n, v in zip(missing, feature_matrix(missing, [sample], [None])[0])})
        rows.append([cache[(key, n)] for n in names])
    return np.array(rows, float)


def study(source: str, target: str, seeds: int, n_train: int, n_test: int,
          cache: dict[tuple[str, str], float]) -> dict[str, object]:
    source_set = load(source)
    target_set = source_set if target == source else load(target)
    names = applicable_baselines(target_set)
    x_source = features(names, source_set.dataset, cache)
    x_target = x_source if target == source else features(names, target_set.dataset, cache)
    y_source, y_target = np.asarray(source_set.labels, float), np.asarray(target_set.labels, float)
    rows: dict[str, list[dict[str, float]]] = {"best single signal": [], **{f"stacked, {r}": [] for r in SELECTION_RULES}}
    kept: dict[str, list[int]] = {r: [] for r in SELECTION_RULES}
    # a target smaller than n_test (CMU-DoG + Topical-Chat once the verifier's training turns are left out):
    # every seed tests on all of it
    n_test = min(n_test, len(target_set) - (n_train if target == source else 0))
    for seed in range(seeds):
        train = balanced_indices(y_source, n_train, np.random.default_rng(seed))
        allowed = [i for i in range(len(target_set)) if target != source or i not in set(train)]
        test = [allowed[i] for i in balanced_indices(y_target[allowed], n_test, np.random.default_rng(seed + 1))]
        x, y, labels = x_source[train], y_source[train], (y_target[test] >= 0.5).astype(int)
        hard = np.array(hard_item_positions(x, y, x_target[test], labels), dtype=int)
        best, single = best_single_signal(x, y, names)
        rows["best single signal"].append(statistics(labels, single.predict(x_target[test][:, best]), hard))
        for rule in SELECTION_RULES:
            constant = np.full(len(train), 0.5)  # no judge: its column never lowers the loss
            calibrator = Calibrator("stacked", binary=True, features=names, selection=rule).fit(constant, y, x)
            chosen = [names.index(f) for f in calibrator.features]
            p = calibrator.predict(np.full(len(test), 0.5), x_target[test][:, chosen] if chosen else None)
            rows[f"stacked, {rule}"].append(statistics(labels, p, hard))
            kept[rule].append(len(calibrator.features))
    return {"rows": rows, "kept": kept, "signals": names, "n_test": n_test}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="append", default=None,
                        help="SOURCE:TARGET, repeatable (default: begin:begin, begin-wow:begin-cmu-tc, begin:summeval)")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--n-train", type=int, default=40)
    parser.add_argument("--n-test", type=int, default=60)
    args = parser.parse_args()
    studies = args.study or ["begin:begin", "begin-wow:begin-cmu-tc", "begin:summeval"]
    print(f"{args.seeds} seeds; train {args.n_train} (label-balanced, from SOURCE), test {args.n_test} (from TARGET); "
          "mean over seeds (standard error); 'as good' = share of seeds at least as good as the best single signal\n")
    print("| study | scorer | inputs kept | " + " | ".join(STATS) + " | as good: " + " / ".join(STATS)
          + " | hard slice (right / items, all seeds) |")
    print("|---|---|---:|" + "---:|" * len(STATS) + "---|---:|")
    cache: dict[tuple[str, str], float] = {}  # the studies share data sets (BEGIN and its parts)
    for spec in studies:
        source, _, target = spec.partition(":")
        start = time.perf_counter()
        result = study(source, target or source, args.seeds, args.n_train, args.n_test, cache)
        reference = result["rows"]["best single signal"]
        label = spec if result["n_test"] == args.n_test else f"{spec} (test {result['n_test']})"
        for scorer, values in result["rows"].items():
            rule = scorer.removeprefix("stacked, ")
            cells = []
            for stat in STATS:
                column = np.array([v[stat] for v in values])
                cells.append(f"{column.mean():.3f} ({column.std(ddof=1) / np.sqrt(len(column)):.3f})")
            if scorer == "best single signal":
                kept, good = "1", "-"
            else:
                kept = f"{np.mean(result['kept'][rule]):.1f}"
                shares = [np.mean([(v[s] <= r[s] + 1e-12) if s == "brier" else (v[s] >= r[s] - 1e-12)
                                   for v, r in zip(values, reference)]) for s in STATS]
                good = " / ".join(f"{share:.2f}" for share in shares)
            right, total = sum(v["hard_right"] for v in values), sum(v["hard_total"] for v in values)
            hard = f"{right / total:.2f} ({right} / {total})" if total else "n/a"
            print(f"| {label} | {scorer} | {kept} | " + " | ".join(cells) + f" | {good} | {hard} |", flush=True)
        print(f"<!-- {spec}: {time.perf_counter() - start:.0f} s -->", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
