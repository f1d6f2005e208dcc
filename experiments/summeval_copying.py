"""Why the shipped combination falls on SummEval: do its labels follow how much a summary copies?

    .venv/bin/python experiments/summeval_copying.py    # reads the round 6 cache (experiments/combination_signals.py)

Reads each summary's cached signals (``experiments/combination_signals.py --out runs/combination_round6`` fills
them) and prints: how much of its word pairs each label's summaries copy, on SummEval and the written summary
sets; what models over these signals reach on SummEval, cross-fitted on SummEval alone (two folds); and what a fit
toward SummEval (its train half alone, or weighted three times in F's fit) does to the written summary sets.
Decides nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.verifier.training import roc_auc  # noqa: E402
from combination_signals import CANDIDATES, COLUMNS, READ, fit  # noqa: E402
from verifier_agreement import halves  # noqa: E402

WRITTEN = ("summaries-fresh", "summaries-second", "summaries-third")
F_INPUTS = CANDIDATES["F"][0]


def cross_fitted(x: np.ndarray, y: np.ndarray, inputs, gate: str | None) -> float:
    """ROC-AUC on SummEval of a logistic model over ``inputs``, each fold scored by the model fitted on the other."""
    at, scores = [COLUMNS.index(i) for i in inputs], np.zeros(len(y))
    for train, test in KFold(2, shuffle=True, random_state=0).split(x):
        scaler = StandardScaler().fit(x[train][:, at])
        model = LogisticRegression(max_iter=2000).fit(scaler.transform(x[train][:, at]), y[train])
        scores[test] = model.predict_proba(scaler.transform(x[test][:, at]))[:, 1]
        if gate:
            scores[test] *= np.minimum(1.0, x[test][:, COLUMNS.index(gate)] / 0.5)
    return roc_auc(y, scores)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="runs/combination_round6/signals")
    args = parser.parse_args(argv)
    found = {n: (np.load(Path(args.cache) / f"{n}.npz")["x"], np.load(Path(args.cache) / f"{n}.npz")["y"])
             for n in (*READ, "made", *WRITTEN)}
    bigram = COLUMNS.index("bigram_support")
    print("| set | word pairs found, faithful | unfaithful | bigram support ROC-AUC |\n|---|---:|---:|---:|")
    for name in ("summeval", *WRITTEN):
        x, y = found[name]
        print(f"| {name} | {x[y == 1, bigram].mean():.3f} | {x[y == 0, bigram].mean():.3f} | "
              f"{roc_auc(y, x[:, bigram]):.3f} |")
    x, y = found["summeval"]
    print("\n| model on SummEval, cross-fitted on it alone | ROC-AUC |\n|---|---:|")
    models = (("F's inputs and gate", F_INPUTS, CANDIDATES["F"][1]), ("F's inputs, ungated", F_INPUTS, None),
              ("bigram support and the verifier mean", ("bigram_support", "verifier_mean"), None),
              ("bigram support alone", ("bigram_support",), None))
    for label, inputs, gate in models:
        print(f"| {label} | {cross_fitted(x, y, inputs, gate):.3f} |")
    parts = halves("summeval", list(y))
    train, test = parts["train"], parts["test"]
    print("\n| fit | SummEval test half | " + " | ".join(WRITTEN) + " |\n|---|---:|" + "---:|" * len(WRITTEN))
    fits = {"F (as shipped: read sets, SummEval's train half)":
            fit("F", [found[s] for s in READ if s != "summeval"] + [(x[train], y[train]), found["made"]])[0],
            "F's inputs on SummEval's train half alone": fit("F", [(x[train], y[train])])[0],
            "F with SummEval's train half three times": fit("F", [found[s] for s in READ if s != "summeval"]
                                                             + [(x[train], y[train])] * 3 + [found["made"]])[0]}
    for label, score in fits.items():
        print(f"| {label} | {roc_auc(y[test], score(x[test])):.3f} | "
              + " | ".join(f"{roc_auc(found[n][1], score(found[n][0])):.3f}" for n in WRITTEN) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
