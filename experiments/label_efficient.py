"""How few labels does fine-tuning the verifier need to beat the best cheap signal, and which recipe gets there?

    .venv/bin/python experiments/label_efficient.py                       # the curve, both sets
    .venv/bin/python experiments/label_efficient.py --sets q2 --sizes 60 --draws 1 --variants top2   # a smoke run
    .venv/bin/python experiments/label_efficient.py --sets dialogue-written --judge shipped --variants calibration,all
    .venv/bin/python experiments/label_efficient.py --sets begin-wow,summeval --judge shipped --variants calibration

A user with labels of a new dialogue domain runs ``fit(FaithfulnessWithVerifier(), labels, optimizer="finetune",
calibrator="stacked")`` (cross-fitted, 3 folds, the default guard). This script does that on draws of n labels from
the train half of a set the shipped verifier never trained on (Q2's WoW annotations; BEGIN's WoW part) and measures
the calibrated judge on the set's test half (experiments/verifier_agreement.py's halves, seed 0), per recipe. A
set of the project's own: "dialogue-written", the third to ninth dialogue sets written here (1,120 replies; talk
passes), none trained on and none in the combination's fit. "summeval" (1,600 summaries, which the verifier never
trained on but the combination was fitted on, both halves) measures calibration where the judge as shipped trails a
cheap signal; so does "begin-wow" with ``--judge shipped``. ``--judge shipped`` starts from the judge as it ships
now (the combination; a fine-tuned verifier then scores the mean), ``mean`` (the default) from the verifier mean, as
the first trial did.

  calibration only   the shipped verifier, stacked calibration (no fine-tuning)
  all layers         every layer but the word embeddings, learning rate 2e-5, 4 epochs (the recipe of today)
  top 2 blocks       the last 2 encoder blocks, the pooler and the head (``top_blocks=2``), 1e-4, 8 epochs
  top 2 + contrast   the same, plus a copy with one fact changed of each supported label (``contrast_pairs``)

Printed per set and n (mean over draws): the test ROC-AUC of each recipe, of the best cheap signal (the cheap
signal highest on the test half: a bar that favours the cheap side), the fine-tuned verifier's own mean ROC-AUC
on the seven hand-written contrastive sets, and the seconds each fit took. For the first draw, the paired
bootstrap 95% CI of each recipe minus the best cheap signal. The decision rules are in docs/verifier-log.md
("Label-efficient fine-tuning"); results.json holds every number.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.agreement.stats import compare  # noqa: E402
from calibration.data.labelled import LabelledSet, balanced_indices  # noqa: E402
from calibration.fitting.heldout import compare_on_heldout  # noqa: E402
from calibration.verifier.contrastive import FIRST_SEVEN_CONTRASTIVE, load_contrastive  # noqa: E402
from combination_signals import dialogue, pooled  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from judges import EvaluationDataset, FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402

#: The judge as it shipped when this trial ran: the verifier's mean over sentences (the combination came later).
MEAN_JUDGE = functools.partial(FaithfulnessWithVerifier, aggregate="mean")
from verifier_agreement import halves, sets  # noqa: E402

RECIPES = {
    "calibration only": None,
    "all layers": {},
    "top 2 blocks": {"top_blocks": 2, "learning_rate": 1e-4, "epochs": 8},
    "top 2 + contrast": {"top_blocks": 2, "learning_rate": 1e-4, "epochs": 8, "contrast_pairs": True},
}
SHORT = {"calibration": "calibration only", "all": "all layers", "top2": "top 2 blocks", "contrast": "top 2 + contrast"}
DRAWS = {60: 3, 200: 2}  # larger n: one draw (the whole train half: 496 items of Q2, 215 of BEGIN WoW)
#: The dialogue sets written for the project that the combination was not fitted on: "dialogue-written", pooled.
WRITTEN_DIALOGUE = ("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
JUDGES = {"mean": MEAN_JUDGE, "shipped": FaithfulnessWithVerifier}


def written_dialogue() -> tuple[list, list[int]]:
    return pooled(dialogue, WRITTEN_DIALOGUE)


def labelled(name: str, samples: list, labels: list[int], at) -> LabelledSet:
    return LabelledSet(name, EvaluationDataset([samples[i] for i in at]), [int(labels[i]) for i in at], "binary",
                       "experiments/label_efficient.py")


def contrastive_sets() -> dict[str, tuple[list[SingleTurnSample], np.ndarray]]:
    out = {}
    for which in FIRST_SEVEN_CONTRASTIVE:
        rows = load_contrastive(which)
        out[which] = ([SingleTurnSample(response=r["response"], retrieved_contexts=[r["evidence"]]) for r in rows],
                      np.asarray([int(r["label"]) for r in rows]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="q2,begin-wow")
    parser.add_argument("--sizes", default="60,200,500")
    parser.add_argument("--draws", type=int, default=None, help="draws at every n (default: 3 at 60, 2 at 200, else 1)")
    parser.add_argument("--variants", default="calibration,all,top2,contrast", help=", ".join(SHORT))
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--judge", default="mean", choices=sorted(JUDGES),
                        help="the judge fitted: the verifier mean (the first trial) or the judge as it ships now")
    parser.add_argument("--out", default="runs/label_efficient")
    args = parser.parse_args(argv)
    recipes = [SHORT[v] for v in args.variants.split(",")]
    data = sets(summeval_limit=None if "summeval" in args.sets.split(",") else 1)  # SummEval whole only when named
    if "dialogue-written" in args.sets.split(","):
        data["dialogue-written"] = written_dialogue()
    contrast = contrastive_sets()
    rows, started = [], time.perf_counter()
    for name in args.sets.split(","):
        samples, labels = data[name]
        part = halves(name, labels)
        test = labelled(f"{name} test", samples, labels, part["test"])
        train_labels = [labels[i] for i in part["train"]]
        for n in dict.fromkeys(min(int(s), len(part["train"])) for s in args.sizes.split(",")):  # n > the half: all of it
            for draw in range(args.draws or DRAWS.get(n, 1)):
                at = part["train"][balanced_indices(train_labels, n, np.random.default_rng([draw, n]))]
                train = labelled(f"{name} train", samples, labels, at)
                for recipe in recipes:
                    options = RECIPES[recipe]
                    clock = time.perf_counter()
                    compiled, run = compare_on_heldout(
                        JUDGES[args.judge], train, test, calibrator="stacked", seed=draw, progress=False,
                        n_bootstrap=1, optimizers=[None] if options is None else ["finetune"], **(options or {}))
                    seconds = time.perf_counter() - clock
                    y = np.asarray(run.labels) >= 0.5
                    final = ("judge as shipped + stacked calibration" if options is None
                             else "compiled (finetune) + stacked calibration")
                    cheap = {k: roc_auc(y, run.scores[k]) for k in run.scores if k.startswith("baseline: ")}
                    best_cheap = max(cheap, key=lambda k: cheap[k] or 0)
                    row = {"set": name, "n": n, "draw": draw, "recipe": recipe, "seconds": seconds,
                           "roc_auc": roc_auc(y, run.scores[final]), "shipped": roc_auc(y, run.scores["judge as shipped"]),
                           "best_cheap": best_cheap, "best_cheap_roc_auc": cheap[best_cheap], "cheap": cheap}
                    if options is not None:
                        judge = compiled["finetune"].judge
                        row["finetune"] = compiled["finetune"].report.get("finetune", {}).get("decision")
                        row["compiled_raw"] = roc_auc(y, run.scores["compiled (finetune)"])
                        row["contrastive"] = float(np.mean([roc_auc(ys, [judge.score(s).score for s in xs])
                                                            for xs, ys in contrast.values()]))
                    if draw == 0:
                        paired = compare(run.labels, run.scores[final], run.scores[best_cheap],
                                         n_bootstrap=args.n_bootstrap, seed=0, stats=["roc_auc"])
                        row["minus_best_cheap"] = paired.stats["roc_auc"]
                    rows.append(row)
                    print(json.dumps({k: v for k, v in row.items() if k != "cheap"}, default=str), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1, default=str))
    print(table(rows), f"\n\ntotal {(time.perf_counter() - started) / 60:.1f} min")
    return 0


def table(rows: list[dict]) -> str:
    lines = ["| set | n | draws | recipe | ROC-AUC | best cheap signal | minus best cheap, draw 0 [95% CI] | "
             "contrastive sets (fine-tuned verifier) | s a fit |", "|---|---:|---:|---|---:|---:|---|---:|---:|"]
    keys = list(dict.fromkeys((r["set"], r["n"], r["recipe"]) for r in rows))
    for name, n, recipe in keys:
        these = [r for r in rows if (r["set"], r["n"], r["recipe"]) == (name, n, recipe)]
        mean = lambda key: np.mean([r[key] for r in these]) if all(r.get(key) is not None for r in these) else None  # noqa: E731
        first = next((r for r in these if r["draw"] == 0 and "minus_best_cheap" in r), None)
        diff = first and first["minus_best_cheap"]
        diff_text = f"{diff['difference']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}]" if diff else "n/a"
        contrastive = mean("contrastive")
        lines.append(f"| {name} | {n} | {len(these)} | {recipe} | {mean('roc_auc'):.4f} | "
                     f"{mean('best_cheap_roc_auc'):.4f} ({these[0]['best_cheap'].removeprefix('baseline: ')}) | "
                     f"{diff_text} | {'n/a' if contrastive is None else f'{contrastive:.4f}'} | "
                     f"{mean('seconds'):.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
