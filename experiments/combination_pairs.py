"""Round 14 of the shipped combination: is it better without its word-pair input (bigram support)?

    .venv/bin/python experiments/combination_pairs.py run --sets read   # the fitted and read sets, W fitted (~30 min)
    .venv/bin/python experiments/combination_pairs.py look              # the read sets: S, W, the verifier mean
    .venv/bin/python experiments/combination_pairs.py run               # then the sets written for the round
    .venv/bin/python experiments/combination_pairs.py decide            # the rule in docs/verifier-log.md, round 14
    .venv/bin/python experiments/combination_pairs.py decide --write judges/lm/weights/faithfulness-combination.json

S is the shipped file as round 13 left it (``combination_refit.ROUND_6_WEIGHTS``). Z, the candidate, is S without
its input ``bigram_support``: a changed copy shares more of the evidence's word pairs than a faithful paraphrase
does, and a distractor sharing a swapped claim's words lifts it. W, reported beside it, has the same fit data,
recipe and gate as S (round 6's, refitted as in round 10) over Z's inputs. ``run`` keeps each item's inputs as the
shipped judge computes them (``combination_refit.Inputs``), so S, Z and W score the same verdicts; the distractor
and swap sets' tables come from the same inputs. ``look`` prints the read sets only; ``decide`` applies the round's
rule to the sets written for it and prints every set's numbers, the fitted sets also on a test half left out of
W's fit.
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

from calibration.verifier.contrastive import (  # noqa: E402
    SWAP_SETS,
    load_contrastive,
    load_distractors,
    load_swaps,
)
from calibration.verifier.training import roc_auc  # noqa: E402
from combination_refit import (  # noqa: E402
    COLUMNS,
    ROUND_6_WEIGHTS,
    Inputs,
    cache_and_fit,
    cheap_best,
    fitted_test_halves,
    scores_with,
)
from combination_signals import logistic  # noqa: E402
from combination_signals import READ as FITTED  # noqa: E402
from combination_units import ARRANGEMENTS, cheap_aucs, distractor_table, settle  # noqa: E402
from verifier_swaps import pairs_table  # noqa: E402

DROPPED = "bigram_support"
#: The sets written for this round, read by none before it.
UNREAD = ("dialogue-fourteenth", "summaries-twelfth")
UNREAD_CONTRASTIVE = "contrastive-thirteenth"
UNREAD_DISTRACTORS = "tenth"
DIALOGUE = [f"dialogue-{w}" for w in ("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                                      "eleventh", "twelfth", "thirteenth")]
SUMMARIES = [f"summaries-{w}" for w in ("fresh", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                                        "ninth", "tenth", "eleventh")]
CONTRASTIVE = [f"contrastive-{w}" for w in ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                                             "ninth", "tenth", "eleventh", "twelfth")]
READ = (*DIALOGUE, *SUMMARIES, *CONTRASTIVE, "begin-cmu-tc")
READ_DISTRACTORS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
NAMES = ("S", "Z", "W", "verifier_mean")
SWAP_ARRANGEMENTS = {"alone": lambda it: [it["evidence"]],
                     "with its distractor": lambda it: [f"{it['distractor']} {it['evidence']}"]}


def without_pairs(parts: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """W: round 6's recipe over S's inputs but ``DROPPED`` (rows where no combination scored left out)."""
    inputs = [n for n in ROUND_6_WEIGHTS["inputs"] if n != DROPPED]
    at = [COLUMNS.index(n) for n in inputs]
    kept = [(x[~np.isnan(x).any(axis=1)][:, at], y[~np.isnan(x).any(axis=1)]) for x, y in parts]
    scaler, model = logistic(kept)
    return {"inputs": inputs, "mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist(),
            "coef": model.coef_[0].tolist(), "intercept": float(model.intercept_[0])}


def without_pairs_unfitted() -> dict:
    """Z: S's inputs, standardisation, coefficients and intercept, ``DROPPED`` left out."""
    at = [i for i, n in enumerate(ROUND_6_WEIGHTS["inputs"]) if n != DROPPED]
    return {k: [ROUND_6_WEIGHTS[k][i] for i in at] for k in ("inputs", "mean", "scale", "coef")} | {
        "intercept": ROUND_6_WEIGHTS["intercept"]}


def tables(inputs: Inputs, weights: dict, which: dict) -> dict:
    """The distractor (or swap) sets ``which`` ({name: (items, arrangements)}) scored by S, Z, W and the mean."""
    views = {"S": lambda s: inputs.score(s, ROUND_6_WEIGHTS), "Z": lambda s: inputs.score(s, without_pairs_unfitted()),
             "W": lambda s: inputs.score(s, weights), "verifier_mean": lambda s: inputs.of(s)[2]}
    return {name: {k: pairs_table(SimpleNamespace(score=lambda s, v=v: SimpleNamespace(score=v(s))), items,
                                  arrangements) for k, v in views.items()}
            for name, (items, arrangements) in which.items()}


def run(out: Path, names: list[str], distractors: tuple[str, ...]) -> None:
    """Each named set's inputs, S's score, the verifier mean and the cheap signals into ``out``; W fitted on the
    fitted sets and the made pairs; the distractor sets ``distractors`` and the swap sets scored by all three."""
    inputs = Inputs()
    weights = cache_and_fit(out, names, inputs, without_pairs)
    for file, which in (("distractors.json", {w: (load_distractors(w), ARRANGEMENTS) for w in distractors}),
                        ("swaps.json", {w: (load_swaps(w), SWAP_ARRANGEMENTS) for w in SWAP_SETS})):
        done = json.loads((out / file).read_text(encoding="utf-8")) if (out / file).exists() else {}
        missing = {k: v for k, v in which.items() if k not in done}
        if missing:
            (out / file).write_text(json.dumps(done | tables(inputs, weights, missing), indent=1), encoding="utf-8")


def natural_rows(out: Path, weights: dict, names, unread=()) -> dict:
    """Each cached set's ROC-AUC for S, Z, W and the mean, printed with its best cheap signal."""
    natural = {}
    print("| set | S | Z | W | verifier mean | best cheap signal |\n|---|---:|---:|---:|---:|---|")
    for name in names:
        found = np.load(out / f"{name}.npz")
        y = found["y"]
        scored = {"S": scores_with(found, ROUND_6_WEIGHTS), "Z": scores_with(found, without_pairs_unfitted()),
                  "W": scores_with(found, weights),
                  "verifier_mean": found["verifier_mean"]}
        natural[name] = {k: roc_auc(y, v) for k, v in scored.items()} | {"cheap": cheap_aucs(found)}
        note = " (unread)" if name in unread else " (fitted on)" if name in FITTED else ""
        print(f"| {name}{note} | " + " | ".join(f"{natural[name][k]:.4f}" for k in NAMES)
              + f" | {cheap_best(found, slice(None))} |")
    return natural


def families(natural: dict) -> None:
    for label, sets in (("written dialogue, third to thirteenth", DIALOGUE), ("written summaries, first to "
                        "eleventh", SUMMARIES), (f"contrastive, {len(CONTRASTIVE)} read sets", CONTRASTIVE)):
        print(f"{label}, mean: " + ", ".join(f"{k} {np.mean([natural[n][k] for n in sets]):.4f}" for k in NAMES))


def fitted_halves(out: Path) -> None:
    """The fitted sets on a test half left out of W's fit (S was fitted on all of it)."""
    print("\n| fitted set, test half left out of W's fit (S and Z were fitted on it) | S | Z | W | verifier mean "
          "| best cheap signal |\n|---|---:|---:|---:|---:|---|")
    for name, cached, test, half in fitted_test_halves(out, without_pairs):
        y = cached["y"]
        scored = [scores_with(cached, w) for w in (ROUND_6_WEIGHTS, without_pairs_unfitted(), half)]
        print(f"| {name} | " + " | ".join(f"{roc_auc(y[test], s[test]):.4f}" for s in scored)
              + f" | {roc_auc(y[test], cached['verifier_mean'][test]):.4f} | {cheap_best(cached, test)} |")


def contrastive_kinds(out: Path, weights: dict) -> None:
    """Mean over every contrastive set cached: ROC-AUC of the faithful items against each kind of changed copy,
    and the mean score of a faithful paraphrase and of a copy."""
    found: dict[str, dict[str, list[float]]] = {}
    sets = [name.removeprefix("contrastive-") for name in (*CONTRASTIVE, UNREAD_CONTRASTIVE)]
    for which in sets:
        cached = np.load(out / f"contrastive-{which}.npz")
        kinds, y = np.array([r["kind"] for r in load_contrastive(which)]), cached["y"]
        scored = {"S": scores_with(cached, ROUND_6_WEIGHTS), "Z": scores_with(cached, without_pairs_unfitted()),
                  "W": scores_with(cached, weights), "verifier_mean": cached["verifier_mean"]}
        for kind in ("number", "name", "negation", "direction", "paraphrase", "copy"):
            at = kinds == kind if kind in ("paraphrase", "copy") else (y == 1) | (kinds == kind)
            for name, values in scored.items():
                value = float(values[at].mean()) if kind in ("paraphrase", "copy") else roc_auc(y[at], values[at])
                found.setdefault(kind, {}).setdefault(name, []).append(value)
    print(f"\n| contrastive kind, mean of {len(sets)} sets | " + " | ".join(NAMES) + " |\n|---|" + "---:|" * len(NAMES))
    for kind, by in found.items():
        label = "mean score" if kind in ("paraphrase", "copy") else "ROC-AUC against the faithful"
        print(f"| {kind} ({label}) | " + " | ".join(f"{np.mean(by[n]):.3f}" for n in NAMES) + " |")


def swap_table(swaps: dict) -> None:
    print("\n| swap set, arrangement | S: ROC-AUC, lifted | Z | W | verifier mean |\n|---|---|---|---|---|")
    for which, by in swaps.items():
        for arrangement in SWAP_ARRANGEMENTS:
            print(f"| {which}, {arrangement} | " + " | ".join(
                f"{by[k][arrangement]['roc_auc']:.4f}, {by[k][arrangement]['lifted']}" for k in NAMES) + " |")


def look(out: Path) -> int:
    """The read sets only: every table, nothing decided."""
    weights = json.loads((out / "refit.json").read_text(encoding="utf-8"))
    natural = natural_rows(out, weights, (*FITTED, *READ))
    families(natural)
    fitted_halves(out)
    distractor_table(json.loads((out / "distractors.json").read_text(encoding="utf-8")), NAMES, "")
    swap_table(json.loads((out / "swaps.json").read_text(encoding="utf-8")))
    print(f"\nW's coefficients: {coefficients(weights)}; S's: {coefficients(ROUND_6_WEIGHTS)}")
    return 0


def rule(natural: dict, distractors: dict, new: str = "Z") -> list[str]:
    """What blocks ``new`` (docs/verifier-log.md, round 14); empty when it replaces S's weights. BEGIN CMU + TC is
    reported, not a guard, this round: the log says why."""
    blocked = []
    tenth = distractors[UNREAD_DISTRACTORS]
    gains = [tenth[new][a]["roc_auc"] - tenth["S"][a]["roc_auc"] for a in ("one passage", "four contexts")]
    gains.append(natural[UNREAD_CONTRASTIVE][new] - natural[UNREAD_CONTRASTIVE]["S"])
    if np.mean(gains) < 0.005:
        blocked.append(f"changed-fact sets written for the round: mean gain {np.mean(gains):+.4f} < +0.005")
    for arrangement in ("one passage", "four contexts"):
        if tenth[new][arrangement]["lifted"] > tenth["S"][arrangement]["lifted"] + 2:
            blocked.append(f"distractors {UNREAD_DISTRACTORS}, {arrangement}: {new} lifts "
                           f"{tenth[new][arrangement]['lifted']}, S {tenth['S'][arrangement]['lifted']} (+2 allowed)")
    for name in UNREAD:
        if natural[name][new] < natural[name]["S"] - 0.01:
            blocked.append(f"{name}: {new} {natural[name][new]:.4f} < S {natural[name]['S']:.4f} - 0.01")
    guards = {"unread natural sets' mean": list(UNREAD), "written dialogue sets' mean": DIALOGUE,
              "written summary sets' mean": SUMMARIES}
    for label, sets in guards.items():
        a, s = (np.mean([natural[n][k] for n in sets]) for k in (new, "S"))
        if a < s - 0.005:
            blocked.append(f"{label}: {new} {a:.4f} < S {s:.4f} - 0.005")
    return blocked


def decide(out: Path, write: str | None) -> int:
    weights = json.loads((out / "refit.json").read_text(encoding="utf-8"))
    natural = natural_rows(out, weights, (*UNREAD, UNREAD_CONTRASTIVE, *FITTED, *READ), (*UNREAD, UNREAD_CONTRASTIVE))
    families(natural)
    fitted_halves(out)
    distractors = json.loads((out / "distractors.json").read_text(encoding="utf-8"))
    distractor_table(distractors, NAMES, UNREAD_DISTRACTORS)
    swap_table(json.loads((out / "swaps.json").read_text(encoding="utf-8")))
    contrastive_kinds(out, weights)
    print(f"\nW's coefficients: {coefficients(weights)}; S's: {coefficients(ROUND_6_WEIGHTS)}")
    refit = rule(natural, distractors, "W")  # reported beside the candidate: would the refit pass the same rule?
    print("W under the same rule: " + ("passes" if not refit else "blocked by: " + "; ".join(refit)))
    return settle(out, natural, distractors, rule(natural, distractors), old="S", new="Z", unread=UNREAD, write=write,
                  changes=without_pairs_unfitted() | {
                      "pairs": "dropped", "pairs_decided_on": [*UNREAD, UNREAD_CONTRASTIVE,
                                                               f"distractors-{UNREAD_DISTRACTORS}"],
                      "pairs_rule": 'docs/verifier-log.md, "A shipped combination, round 14"'})


def coefficients(weights: dict) -> str:
    return ", ".join(f"{n} {c:+.3f}" for n, c in zip(weights["inputs"], weights["coef"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "look", "decide"))
    parser.add_argument("--out", default="runs/combination_round14")
    parser.add_argument("--sets", choices=("read", "all"), default="all",
                        help="with run: 'read' scores the fitted and read sets only (for look)")
    parser.add_argument("--write", help="with decide: when Z passes, write its inputs into this combination file "
                        "(the shipped one is judges/lm/weights/faithfulness-combination.json)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.step == "run":
        if args.sets == "read":
            run(out, list(READ), READ_DISTRACTORS)
        else:
            run(out, [*UNREAD, UNREAD_CONTRASTIVE, *READ], (*READ_DISTRACTORS, UNREAD_DISTRACTORS))
        return 0
    return look(out) if args.step == "look" else decide(out, args.write)


if __name__ == "__main__":
    raise SystemExit(main())
