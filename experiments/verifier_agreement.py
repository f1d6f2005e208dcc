"""Does the shipped groundedness verifier agree with people better than the cheap signals? Printed as tables.

    .venv/bin/python experiments/verifier_agreement.py                  # every set, the LM judge on 40 items each
    .venv/bin/python experiments/verifier_agreement.py --lm-items 0 --summeval-limit 400

Sets (shared data only; none trained on by the shipped verifier):
  begin-wow      BEGIN dev, the WoW part (the verifier trained on the CMU and TC parts): fully attributable = 1
  q2             Q2's WoW consistency annotations (``calibration.verifier.pairs.load_q2_wow``; held out of training)
  summeval       SummEval consistency: 1 when all three experts gave 5, else 0 (the article is the evidence)
  contrastive    the hand-written copy-with-a-changed-fact set (``calibration/verifier/sets/contrastive.jsonl``)

Each set is split 50/50 (seeded, by label). On the train half every cheap signal gets the cut-off with the
best balanced accuracy, and the best of them is "the best cheap signal"; the verifier's cut-off is fitted
there too. The contrastive set is never fitted on (its CONTRASTIVE.md forbids it): all of it is the test,
and every cut-off and calibrator applied to it comes from begin-wow's train half. The test half measures: ROC-AUC (bootstrap 95% CI), balanced accuracy at the fitted cut-off, and
accuracy on the hard slice (the test items the best cheap signal gets wrong) and the ROC-AUC inside it
(threshold-free: the slices are lopsided, so their accuracy moves with the cut-off). The stacked calibrator
(``calibration.fitting.calibrators``: the verifier's weakest-sentence probability plus the cheap signals,
forward selection under the one-SE rule) is fitted on the train half (in-domain) and on all of begin-wow
(transfer), and measured on the test halves. The embedded LM judge (Faithfulness, SmolLM2-135M) runs on
the first ``--lm-items`` test items of each set only (it takes ~2 s an item). Two verifier rows are the
metric's own scores: ``FaithfulnessWithVerifier(aggregate="mean")``'s (the mean over sentences, its default then)
and ``FaithfulnessWithVerifier(aggregate="share")``'s (the share of sentences at P >= 0.5, Ragas's formula and
the default before 2026-11-27), so the table measures what a user of the metric gets.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.agreement.stats import agreement  # noqa: E402
from calibration.data.loaders import load_begin, load_summeval  # noqa: E402
from calibration.verifier.contrastive import load_contrastive  # noqa: E402
from calibration.verifier.pairs import load_q2_wow  # noqa: E402
from calibration.fitting.calibrators import Calibrator  # noqa: E402
from calibration.fitting.heldout import best_threshold, hard_item_positions  # noqa: E402
from calibration.fitting.signals import FEATURES  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from judges import Faithfulness, FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402

CHEAP = ("token_overlap", "weakest_sentence", "specifics_supported", "bigram_support", "embedding_similarity",
         "embedding_alignment")
VERIFIER = ("verifier_weakest", "verifier_mean")
#: Columns that are not calibration signals: the metric's own score (the mean) and its ``supported_share``,
#: both from one ``FaithfulnessWithVerifier().score`` per item (an item it does not score, such as one out of
#: the verifier's language, has the score it gives, 0.0, in both).
METRIC = ("metric_mean", "metric_share")


def sets(summeval_limit: int | None) -> dict[str, tuple[list[SingleTurnSample], list[int]]]:
    begin = load_begin(parts=("wow",))
    summeval = load_summeval(limit=summeval_limit)
    out = {
        "begin-wow": (list(begin.dataset), [int(y) for y in begin.labels]),
        "q2": ([SingleTurnSample(response=p.claim, retrieved_contexts=[p.evidence]) for p in load_q2_wow()],
               [p.label for p in load_q2_wow()]),
        "summeval": ([SingleTurnSample(response=s.response, retrieved_contexts=list(s.reference_contexts))
                      for s in summeval.dataset], [int(y >= 5.0 - 1e-9) for y in summeval.labels]),
    }
    contrastive = load_contrastive()
    out["contrastive"] = ([SingleTurnSample(response=r["response"], retrieved_contexts=[r["evidence"]]) for r in contrastive],
                          [int(r["label"]) for r in contrastive])
    return out


def split(labels: list[int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    train, test = [], []
    for value in (0, 1):
        positions = rng.permutation(np.flatnonzero(np.asarray(labels) == value))
        train += positions[: len(positions) // 2].tolist()
        test += positions[len(positions) // 2:].tolist()
    return np.array(sorted(train)), np.array(sorted(test))


def halves(name: str, labels: list[int], seed: int = 0) -> dict[str, np.ndarray]:
    """The positions each measured half of set ``name`` holds: "train" and "test" (``split``), or "all" for the
    contrastive set, never fitted on."""
    if name == "contrastive":
        return {"all": np.arange(len(labels))}
    return dict(zip(("train", "test"), split(labels, seed)))


def lm_judge_scores(samples: list[SingleTurnSample], n: int) -> list[float | None]:
    judge = Faithfulness()
    out: list[float | None] = []
    for sample in samples[:n]:
        try:
            out.append(float(judge.score(sample).score))
        except Exception:  # noqa: BLE001 - a failed item is left out of the judge's row
            out.append(None)
    return out


def cell(report, name: str) -> str:
    value, low, high = (report.stats[name][k] for k in ("value", "low", "high"))
    return "n/a" if value is None else (f"{value:.3f} [{low:.2f}, {high:.2f}]" if low is not None else f"{value:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lm-items", type=int, default=40)
    parser.add_argument("--summeval-limit", type=int, default=None)
    args = parser.parse_args()
    names = CHEAP + VERIFIER + METRIC
    metric = FaithfulnessWithVerifier(aggregate="mean")  # the default when this table was made
    data = sets(args.summeval_limit)
    columns: dict[str, np.ndarray] = {}
    labels: dict[str, np.ndarray] = {}
    halves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    timing = {}
    for set_name, (samples, y) in data.items():
        started = time.perf_counter()
        scored = [metric.score(s) for s in samples]
        columns[set_name] = np.array([[FEATURES[f](s) for f in CHEAP + VERIFIER] + [r.score, r.get("supported_share", r.score)]
                                      for s, r in zip(samples, scored)], float)
        timing[set_name] = (time.perf_counter() - started) / len(samples)
        labels[set_name], halves[set_name] = np.asarray(y), split(y, args.seed)
    transfer = Calibrator("stacked", binary=True, features=list(CHEAP)).fit(
        columns["begin-wow"][:, names.index("verifier_weakest")], labels["begin-wow"], columns["begin-wow"][:, :len(CHEAP)])

    print(f"\nGroundedness: the shipped verifier against the cheap signals (seed {args.seed}; test halves; "
          "ROC-AUC with bootstrap 95% CI)\n")
    print("| set | n test | scorer | ROC-AUC | balanced accuracy | hard slice accuracy | hard slice ROC-AUC |")
    print("|---|---:|---|---|---:|---|---:|")
    summary = []
    for set_name in data:
        x, y = columns[set_name], labels[set_name]
        train, test = halves[set_name]
        fit_x, fit_y, fit_rows = x, y, train
        if set_name == "contrastive":  # never fitted on: begin-wow's train half gives cut-offs and calibrators
            test = np.arange(len(y))
            fit_x, fit_y, fit_rows = columns["begin-wow"], labels["begin-wow"], halves["begin-wow"][0]
        cuts = {f: best_threshold(fit_x[fit_rows, names.index(f)], fit_y[fit_rows]) for f in names}
        best = max(CHEAP, key=lambda f: cuts[f][1])
        wrong = list(np.asarray(test)[hard_item_positions(fit_x[fit_rows, :len(CHEAP)], fit_y[fit_rows],
                                                          x[test, :len(CHEAP)], y[test], [cuts[f] for f in CHEAP])])
        rows = [("token overlap", "token_overlap"), ("weakest-sentence support", "weakest_sentence"),
                (f"best cheap signal on train: {best.replace('_', ' ')}", best),
                ("verifier, weakest sentence", "verifier_weakest"),
                ("verifier, mean over sentences (FaithfulnessWithVerifier's score: aggregate='mean', the default)",
                 "metric_mean"),
                ("verifier, share of sentences at P >= 0.5 (aggregate='share': Ragas's formula, the default before "
                 "2026-11-27)", "metric_share")]
        results = {}
        for label, feature in rows:
            column = x[:, names.index(feature)]
            report = agreement(y[test], column[test], threshold=cuts[feature][0], n_bootstrap=1000, seed=args.seed)
            hard = (np.mean([(column[i] >= cuts[feature][0]) == bool(y[i]) for i in wrong]) if wrong else float("nan"))
            inside = roc_auc(y[wrong], column[wrong]) if wrong else None
            results[feature] = report.value("roc_auc")
            print(f"| {set_name} | {len(test)} | {label} | {cell(report, 'roc_auc')} | "
                  f"{report.value('balanced_accuracy'):.3f} | {hard:.2f} (of {len(wrong)}) | "
                  f"{'n/a' if inside is None else f'{inside:.3f}'} |")
        stacked = Calibrator("stacked", binary=True, features=list(CHEAP)).fit(
            fit_x[fit_rows, names.index("verifier_weakest")], fit_y[fit_rows], fit_x[fit_rows][:, :len(CHEAP)])
        inputs = ["verifier_weakest", *stacked.features]
        for label, model in (("stacked calibrator, in-domain", stacked), ("stacked calibrator, fitted on begin-wow", transfer)):
            if model is transfer and set_name in ("begin-wow", "contrastive"):
                continue
            kept_columns = x[test][:, [names.index(f) for f in model.features]] if model.features else None
            scores = model.predict(x[test, names.index("verifier_weakest")], kept_columns)
            report = agreement(y[test], scores, threshold=0.5, n_bootstrap=1000, seed=args.seed)
            kept = ", ".join((["verifier"] if model.use_raw else []) + [f.replace("_", " ") for f in model.features])
            print(f"| {set_name} | {len(test)} | {label} (kept: {kept}) | {cell(report, 'roc_auc')} | "
                  f"{report.value('balanced_accuracy'):.3f} | | |")
            if model is stacked:
                single = max(agreement(y[test], x[test, names.index(f)], n_bootstrap=1).value("roc_auc") or 0 for f in inputs)
                summary.append((set_name, report.value("roc_auc"), single))
        if args.lm_items:
            subset = test[: args.lm_items]
            scores = lm_judge_scores([data[set_name][0][i] for i in subset], args.lm_items)
            ok = [(i, s) for i, s in zip(subset, scores) if s is not None]
            if len({int(y[i]) for i, _ in ok}) == 2:
                report = agreement([y[i] for i, _ in ok], [s for _, s in ok], n_bootstrap=1000, seed=args.seed)
                print(f"| {set_name} | {len(ok)} | embedded LM judge (Faithfulness, SmolLM2-135M; first {len(ok)} test "
                      f"items) | {cell(report, 'roc_auc')} | {report.value('balanced_accuracy'):.3f} | | |")
        margin = results["verifier_weakest"] - max(results[f] for f in ("token_overlap", "weakest_sentence", best))
        print(f"| {set_name} | | verifier (weakest) minus the best of the cheap rows above | {margin:+.3f} | | | |")
    print("\nStacked calibrator vs its best single input (in-domain, test halves): "
          + "; ".join(f"{s}: {a:.3f} vs {b:.3f}" for s, a, b in summary))
    print("Cheap signals + verifier per item, every set: " + ", ".join(f"{s} {t * 1000:.0f} ms" for s, t in timing.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
