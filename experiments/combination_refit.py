"""Round 10 of the shipped combination: its weights fitted again on the inputs it now reads.

    .venv/bin/python experiments/combination_refit.py run       # every set's inputs, J fitted, cached (~25 min)
    .venv/bin/python experiments/combination_refit.py decide    # the rule in docs/verifier-log.md, round 10
    .venv/bin/python experiments/combination_refit.py decide --write judges/lm/weights/faithfulness-combination.json

S is the shipped file as round 10 read it: round 6's weights (``ROUND_6_WEIGHTS``, shipped until round 14), fitted
on inputs read the old way: word signals from the whole evidence, names as written. Rounds 8 and 9 changed what the
inputs read and kept the weights; run today, the inputs are read as the judge reads them now. J has the same
inputs, gate and fit data as round 6 (BEGIN WoW, Q2, SummEval, the fresh dialogue set and made contrast pairs,
each weighted equally, ``combination_signals.logistic``), fitted on the inputs as S reads them now. ``run`` keeps
each item's inputs as the shipped judge computes them (``result.combination``), so S and J score the same
verdicts; ``decide`` applies the round's rule to the sets written for it and prints every set's numbers, the
fitted sets also on a test half left out of J's fit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.fitting.signals import feature_matrix  # noqa: E402
from calibration.verifier.contrastive import load_distractors  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from combination_names import CONTRASTIVE as ROUND_NINE_CONTRASTIVE  # noqa: E402
from combination_names import READ as READ_BEFORE  # noqa: E402
from combination_names import UNREAD as ROUND_NINE  # noqa: E402
from combination_signals import CHEAP, load_sets, logistic  # noqa: E402
from combination_signals import READ as FITTED  # noqa: E402
from combination_units import ARRANGEMENTS, cheap_aucs, distractor_table, settle, unread_rule  # noqa: E402
from judges import FaithfulnessWithVerifier  # noqa: E402
from judges.metrics.rag.verified import combined_probability, shipped_combination  # noqa: E402
from verifier_agreement import halves  # noqa: E402
from verifier_swaps import pairs_table  # noqa: E402

#: The sets written for this round, read by none before it.
UNREAD = ("dialogue-ninth", "summaries-seventh")
UNREAD_CONTRASTIVE = "contrastive-ninth"
READ = tuple(dict.fromkeys((*ROUND_NINE, "contrastive-eighth", *READ_BEFORE)))
#: The contrastive sets this round reads: the eight read before it and its own.
CONTRASTIVE = (*ROUND_NINE_CONTRASTIVE, "ninth")
DISTRACTORS = ("first", "second", "third", "fourth", "fifth")
NAMES = ("S", "J", "verifier_mean")
#: The gate's input, kept beside the file's inputs.
GATE = "learned_checkable_weakest"
#: A cache's columns: the inputs the shipped file read from round 6 to round 13, then the gate's. Fixed, so that a
#: cache stays readable after the file changes what it reads (round 14 dropped bigram_support).
COLUMNS = ("verifier_mean", "verifier_weakest", "learned_checkable_mean", "learned_set_aside_share",
           "learned_nothing_checkable", "specifics_supported", "bigram_support", GATE)
#: The shipped file's inputs and weights from round 6 to round 13 (``git show 5e55952:judges/lm/weights/
#: faithfulness-combination.json``): rounds 10 and 14 read S with them, so that they read the same after round 14
#: changed the file.
ROUND_6_WEIGHTS = {"inputs": ["verifier_mean", "verifier_weakest", "learned_checkable_mean", "learned_set_aside_share",
                              "learned_nothing_checkable", "specifics_supported", "bigram_support"],
                   "mean": [0.5708776757717505, 0.3930090045005065, 0.6505976029439388, 0.24255488692880495,
                            0.10021157914983651, 0.9158530902447173, 0.6311588186757084],
                   "scale": [0.2892985186382759, 0.34707013994958336, 0.31478438886289833, 0.33417073453460483,
                             0.30028189847896686, 0.2506433008032713, 0.3628091628963347],
                   "coef": [-0.4406213074279166, 1.3113192518990384, 0.5975672212728259, 0.27757952999356567,
                            -0.3924022853371628, 0.6238849121142817, 0.08931557984939968],
                   "intercept": -0.33803959507058495}


def combination_with(weights: dict) -> dict:
    """The shipped file with another fit's inputs, standardisation, coefficients and intercept."""
    return shipped_combination() | weights


class Inputs:
    """The shipped judge's combination inputs once per (response, contexts): S's reading, whatever it is now."""

    def __init__(self):
        self.judge = FaithfulnessWithVerifier()
        self.memo: dict[tuple, tuple[dict | None, float, float]] = {}

    def of(self, sample) -> tuple[dict | None, float, float]:
        """(inputs or None when the combination did not score, the judge's score, the verifier mean)."""
        key = (sample.response, tuple(sample.retrieved_contexts))
        if key not in self.memo:
            result = self.judge.score(sample)
            inputs = dict(result.combination) if "combination" in result else None
            self.memo[key] = (inputs, float(result.score), float(result.get("mean_probability", result.score)))
        return self.memo[key]

    def score(self, sample, weights: dict | None) -> float:
        """S's score (``weights`` None) or the score with ``weights``; the judge's own where no combination ran."""
        inputs, shipped, _ = self.of(sample)
        return shipped if inputs is None or weights is None else combined_probability(inputs, combination_with(weights))


def matrix(rows: list[tuple[dict | None, float, float]]) -> np.ndarray:
    """Each item's inputs in ``COLUMNS``' order, NaN where the combination did not score."""
    return np.array([[r[0][n] for n in COLUMNS] if r[0] else [np.nan] * len(COLUMNS) for r in rows])


def fit_weights(parts: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """J: round 6's recipe on these inputs (rows where no combination scored left out)."""
    at = [COLUMNS.index(n) for n in ROUND_6_WEIGHTS["inputs"]]
    kept = [(x[~np.isnan(x).any(axis=1)][:, at], y[~np.isnan(x).any(axis=1)]) for x, y in parts]
    scaler, model = logistic(kept)
    return {"inputs": list(ROUND_6_WEIGHTS["inputs"]), "mean": scaler.mean_.tolist(),
            "scale": scaler.scale_.tolist(), "coef": model.coef_[0].tolist(), "intercept": float(model.intercept_[0])}


def scores_with(found, weights: dict) -> np.ndarray:
    combination = combination_with(weights)
    return np.array([combined_probability(dict(zip(COLUMNS, row)), combination) if not np.isnan(row).any() else s
                     for row, s in zip(found["x"], found["S"])])


def cache_and_fit(out: Path, names: list[str], inputs: Inputs, fit) -> dict:
    """Each named set's, the fitted sets' and the made pairs' inputs (``matrix``), the shipped judge's score, the
    verifier mean and the cheap signals, cached in ``out`` once; then ``fit``'s weights on the fitted sets and the
    made pairs, written to ``out``/refit.json and returned."""
    out.mkdir(parents=True, exist_ok=True)
    wanted = [n for n in dict.fromkeys(("made", *FITTED, *names)) if not (out / f"{n}.npz").exists()]
    data = load_sets(wanted) if wanted else {}
    for name in wanted:
        samples, labels = data[name]
        rows = [inputs.of(s) for s in samples]
        np.savez(out / f"{name}.npz", y=np.asarray(labels), x=matrix(rows), S=np.array([r[1] for r in rows]),
                 verifier_mean=np.array([r[2] for r in rows]), cheap=feature_matrix(CHEAP, samples))
        print(f"{name}: {len(samples)} items", flush=True)
    found = {n: np.load(out / f"{n}.npz") for n in (*FITTED, "made")}
    weights = fit([(found[n]["x"], found[n]["y"]) for n in (*FITTED, "made")])
    (out / "refit.json").write_text(json.dumps(weights, indent=1), encoding="utf-8")
    return weights


def run(out: Path, names: list[str]) -> None:
    inputs = Inputs()
    weights = cache_and_fit(out, names, inputs, fit_weights)
    path = out / "distractors.json"
    if not path.exists():
        views = {"S": lambda s: inputs.score(s, ROUND_6_WEIGHTS), "J": lambda s: inputs.score(s, weights),
                 "verifier_mean": lambda s: inputs.of(s)[2]}
        tables = {which: {k: pairs_table(SimpleNamespace(score=lambda s, v=v: SimpleNamespace(score=v(s))),
                                         load_distractors(which), ARRANGEMENTS) for k, v in views.items()}
                  for which in DISTRACTORS}
        path.write_text(json.dumps(tables, indent=1), encoding="utf-8")


def fitted_test_halves(out: Path, fit):
    """Per fitted set: (name, its cache, its test half's indices, ``fit``'s weights fitted without that half: on
    the other fitted sets, the made pairs and the set's train half)."""
    found = {n: np.load(out / f"{n}.npz") for n in (*FITTED, "made")}
    for name in FITTED:
        y = found[name]["y"]
        parts = halves(name if name != "dialogue-fresh" else "begin-wow", list(y))  # any name: a seeded split
        held = [(found[n]["x"], found[n]["y"]) for n in (*FITTED, "made") if n != name]
        yield name, found[name], parts["test"], fit([*held, (found[name]["x"][parts["train"]], y[parts["train"]])])


def cheap_best(found, at) -> str:
    """The cheap signal ranking the items ``at`` best, and its ROC-AUC there."""
    cheap = cheap_aucs(found, at)
    best = max(cheap, key=lambda c: cheap[c])
    return f"{best} {cheap[best]:.4f}"


def rule(natural: dict, distractors: dict) -> list[str]:
    """What blocks J (docs/verifier-log.md, round 10); empty when J replaces S's weights."""
    return unread_rule(natural, distractors, old="S", new="J", unread=UNREAD,
                       guards=(UNREAD_CONTRASTIVE, "begin-cmu-tc"), distractor_set="fifth", mean_margin=0.005)


def decide(out: Path, write: str | None) -> int:
    weights = json.loads((out / "refit.json").read_text(encoding="utf-8"))
    natural = {}
    print("| set | S | J | verifier mean | best cheap signal |\n|---|---:|---:|---:|---|")
    for name in (*UNREAD, UNREAD_CONTRASTIVE, *READ):
        found = np.load(out / f"{name}.npz")
        y, scored = found["y"], {"S": scores_with(found, ROUND_6_WEIGHTS), "J": scores_with(found, weights),
                                 "verifier_mean": found["verifier_mean"]}
        natural[name] = {k: roc_auc(y, v) for k, v in scored.items()}
        cheap = cheap_aucs(found)
        best = max(cheap, key=lambda c: cheap[c])
        note = " (unread)" if name in (*UNREAD, UNREAD_CONTRASTIVE) else " (fitted on)" if name in FITTED else ""
        print(f"| {name}{note} | " + " | ".join(f"{natural[name][k]:.4f}" for k in NAMES)
              + f" | {best} {cheap[best]:.4f} |")
    contrastive = [f"contrastive-{w}" for w in CONTRASTIVE]
    print(f"\n{len(contrastive)} contrastive sets' mean: " + ", ".join(
        f"{k} {np.mean([natural[n][k] for n in contrastive]):.4f}" for k in NAMES))
    print("\n| fitted set, test half left out of J's fit (S was fitted on it) | S | J | verifier mean "
          "| best cheap signal |\n|---|---:|---:|---:|---|")
    for name, cached, test, half in fitted_test_halves(out, fit_weights):
        y = cached["y"]
        print(f"| {name} | {roc_auc(y[test], scores_with(cached, ROUND_6_WEIGHTS)[test]):.4f} | "
              f"{roc_auc(y[test], scores_with(cached, half)[test]):.4f} | "
              f"{roc_auc(y[test], cached['verifier_mean'][test]):.4f} | {cheap_best(cached, test)} |")
    distractors = json.loads((out / "distractors.json").read_text(encoding="utf-8"))
    distractor_table(distractors, NAMES, "fifth")
    print("\nJ's coefficients: " + ", ".join(f"{n} {c:+.3f}" for n, c in zip(weights["inputs"], weights["coef"]))
          + "; S's: " + ", ".join(f"{c:+.3f}" for c in ROUND_6_WEIGHTS["coef"]))
    return settle(out, natural, distractors, rule(natural, distractors), old="S", new="J", unread=UNREAD, write=write,
                  changes=weights | {"candidate": "J",
                                     "refit_decided_on": [*UNREAD, UNREAD_CONTRASTIVE, "distractors-fifth"],
                                     "refit_rule": 'docs/verifier-log.md, "A shipped combination, round 10"'})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "decide"))
    parser.add_argument("--out", default="runs/combination_round10")
    parser.add_argument("--sets", nargs="*", help="with run: only these sets besides the fitted ones (default: all)")
    parser.add_argument("--write", help="with decide: when J passes, write its weights into this combination file "
                        "(the shipped one is judges/lm/weights/faithfulness-combination.json)")
    args = parser.parse_args(argv)
    if args.step == "run":
        run(Path(args.out), list(dict.fromkeys([*FITTED, *(args.sets or [*UNREAD, UNREAD_CONTRASTIVE, *READ])])))
        return 0
    return decide(Path(args.out), args.write)


if __name__ == "__main__":
    raise SystemExit(main())
