"""Would one combination of the verifier and the cheap signals, fitted on public labels, beat each of them?

    .venv/bin/python experiments/shipped_combination.py                    # every set, ~6 min on 2 cores
    .venv/bin/python experiments/shipped_combination.py --summeval-limit 80

The candidate is a logistic regression over the verifier's mean and weakest claim, the checkable claims' mean
(``claims="checkable"``, ``unclaimed_score=1``), the share of a reply set aside, whether nothing was checkable,
and the cheap signals (``CHEAP``). Inputs are standardised; it is fitted on the train halves of BEGIN WoW, Q2
and SummEval pooled, each set weighted equally (experiments/verifier_agreement.py's halves, seed 0), and
measured on the test halves, the contrastive set and BEGIN's CMU-DoG + Topical-Chat turns the verifier did not
train on. Printed: ROC-AUC of every input alone and of the combination per set, the coefficients, and the
decision by the rule in docs/verifier-log.md ("A shipped combination of signals").

``--made-pairs`` (round 2) adds made contrast pairs to the fit and all seven contrastive sets to the measures;
``--gate`` (round 3) caps the combination by the verifier's weakest claim; ``--own`` (round 4) fits the
verifier's own signals only and decides on two fresh sets: the dialogue set DIALOGUE_FRESH.md and the SummEval
summaries after ``--summeval-limit``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.fitting.signals import feature_matrix  # noqa: E402
from calibration.data.loaders import load_summeval  # noqa: E402
from calibration.verifier.contrastive import FIRST_SEVEN_CONTRASTIVE, load_contrastive, load_dialogue  # noqa: E402
from calibration.verifier.perturb import names_in, one_fact_changed  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from claim_units import all_sets  # noqa: E402
from judges import FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402
from verifier_agreement import halves  # noqa: E402

CHEAP = ("token_overlap", "weakest_sentence", "bigram_support", "specifics_supported", "embedding_alignment")
OWN = ("verifier_mean", "verifier_weakest", "checkable_mean", "set_aside_share", "nothing_checkable")
DECIDING = ("begin-wow", "q2", "summeval")


def own_signals(samples) -> np.ndarray:
    """The verifier's signals of each reply: its mean and weakest claim over sentences, and over checkable
    claims the mean (1 when nothing is checkable), the share of units set aside, and nothing checkable."""
    sentences, checkable = FaithfulnessWithVerifier(), FaithfulnessWithVerifier(claims="checkable", unclaimed_score=1.0)
    rows = []
    for sample in samples:
        a, b = sentences.score(sample), checkable.score(sample)
        units = len(b.get("claims") or []) + len(b.get("set_aside") or [])
        rows.append([a.mean_probability, a.weakest, b.mean_probability, len(b.get("set_aside") or []) / max(units, 1),
                     float(bool(b.get("nothing_checkable")))])
    return np.asarray(rows, float)


def made_pairs(samples, labels, positions, seed: int = 0) -> list:
    """For each faithful reply among ``positions``, the reply with one fact of one sentence changed
    (``one_fact_changed``), label 0, same evidence."""
    rng = random.Random(f"{seed}:made-pairs")
    pool = sorted({name for i in positions for c in samples[i].retrieved_contexts for name in names_in(c)})
    made = []
    for i in positions:
        if labels[i] != 1:
            continue
        reply = one_fact_changed(samples[i].response, "\n".join(samples[i].retrieved_contexts), rng, pool)
        if reply:
            made.append(SingleTurnSample(response=reply, retrieved_contexts=list(samples[i].retrieved_contexts)))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summeval-limit", type=int, default=320)
    parser.add_argument("--out", default="runs/shipped_combination")
    parser.add_argument("--made-pairs", action="store_true",
                        help="round 2: also fit on made contrast pairs, and measure on all seven contrastive sets")
    parser.add_argument("--gate", action="store_true",
                        help="round 3: the combination's probability times min(1, verifier weakest claim / 0.5)")
    parser.add_argument("--own", action="store_true",
                        help="round 4: the verifier's own signals only (no cheap signal), decided on fresh sets")
    args = parser.parse_args(argv)
    data = all_sets(args.summeval_limit)
    if args.own:  # round 4's fresh sets: a dialogue set made for it, and the SummEval summaries no round read
        fresh = load_dialogue("fresh")
        data["dialogue-fresh"] = ([SingleTurnSample(user_input=r["user_input"], response=r["reply"],
                                                    retrieved_contexts=[r["knowledge"]]) for r in fresh],
                                  [int(r["label"]) for r in fresh])
        rest = load_summeval()
        data["summeval-rest"] = ([SingleTurnSample(response=s.response, retrieved_contexts=list(s.reference_contexts))
                                  for s in list(rest.dataset)[args.summeval_limit:]],
                                 [int(y >= 5.0 - 1e-9) for y in rest.labels[args.summeval_limit:]])
    if args.made_pairs:
        for which in sorted(set(FIRST_SEVEN_CONTRASTIVE) - {"first"}):
            rows = load_contrastive(which)
            data[f"contrastive-{which}"] = ([SingleTurnSample(response=r["response"], retrieved_contexts=[r["evidence"]])
                                            for r in rows], [int(r["label"]) for r in rows])
        made = []
        for name in DECIDING:
            samples, labels = data[name]
            made += made_pairs(samples, labels, halves(name, labels)["train"])
        data["made"] = (made, [0] * len(made))
    inputs = (*OWN, *CHEAP)
    fitted_inputs = [inputs.index(i) for i in (OWN if args.own else inputs)]
    x, y, parts = {}, {}, {}
    for name, (samples, labels) in data.items():
        x[name] = np.column_stack([own_signals(samples), feature_matrix(CHEAP, samples)])
        y[name] = np.asarray(labels)
        parts[name] = halves(name if name in DECIDING else "contrastive", labels)  # "all" outside the three
        print(f"{name}: {len(samples)} items", flush=True)
    fitted = {s: parts[s]["train"] for s in DECIDING}
    if "made" in data:
        fitted["made"] = parts["made"]["all"]
    train_x = np.vstack([x[s][at][:, fitted_inputs] for s, at in fitted.items()])
    train_y = np.concatenate([y[s][at] for s, at in fitted.items()])
    weights = np.concatenate([np.full(len(at), 1.0 / len(at)) for at in fitted.values()])
    scaler = StandardScaler().fit(train_x)
    model = LogisticRegression(C=1.0, max_iter=1000).fit(scaler.transform(train_x), train_y,
                                                         sample_weight=weights * len(weights) / len(fitted))
    measured = {name: "test" if name in DECIDING else "all" for name in data if name != "made"}
    table: dict[str, dict[str, float | None]] = {}
    for name, half in measured.items():
        at = parts[name][half]
        table[name] = {signal: roc_auc(y[name][at], x[name][at, i]) for i, signal in enumerate(inputs)}
        combined = model.predict_proba(scaler.transform(x[name][at][:, fitted_inputs]))[:, 1]
        if args.gate:  # an unsupported claim caps the reply: the verifier's weakest claim against its threshold
            combined = combined * np.minimum(1.0, x[name][at, inputs.index("verifier_weakest")] / 0.5)
        table[name]["combined"] = roc_auc(y[name][at], combined)
    columns = [f"{name} {half}" for name, half in measured.items()]
    print("\n| signal | " + " | ".join(columns) + " |\n|---|" + "---:|" * len(columns))
    for signal in (*inputs, "combined"):
        print(f"| {signal} | " + " | ".join("n/a" if table[n][signal] is None else f"{table[n][signal]:.4f}"
                                             for n in measured) + " |")
    print("\ncoefficients (standardised inputs): " + ", ".join(
        f"{inputs[i]} {c:+.3f}" for i, c in zip(fitted_inputs, model.coef_[0])) + f"; intercept {model.intercept_[0]:+.3f}")
    if args.own:
        blocked, gain = round_four(table, measured), float("nan")
    else:
        blocked, gain = rounds_one_to_three(table, measured, data)
    print(f"\nrule: the combination {'is' if not blocked else 'is not'} the shipped score"
          + ("" if args.own else f" (mean gain over the verifier mean on the test halves {gain:+.4f})")
          + ("" if not blocked else "; blocked by: " + "; ".join(blocked)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "combination.json").write_text(json.dumps(
        {"inputs": [inputs[i] for i in fitted_inputs], "mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist(),
         "coefficients": model.coef_[0].tolist(), "intercept": float(model.intercept_[0]), "roc_auc": table,
         "blocked": blocked}, indent=1), encoding="utf-8")
    return 0


def round_four(table: dict, measured: dict) -> list[str]:
    """Round 4's rule (docs/verifier-log.md, "A shipped combination, round 4"): decided on the two fresh sets,
    the read test halves and the contrastive sets as guards."""
    blocked = []
    row = table["dialogue-fresh"]
    if row["combined"] < row["verifier_mean"] + 0.005:
        blocked.append(f"dialogue-fresh: {row['combined']:.4f}, not 0.005 above the verifier mean {row['verifier_mean']:.4f}")
    for name in ("dialogue-fresh", "summeval-rest"):
        for signal in ("verifier_mean", *CHEAP):
            if table[name][signal] is not None and table[name]["combined"] < table[name][signal] - 0.005:
                blocked.append(f"{name}: under {signal} by {table[name][signal] - table[name]['combined']:.4f}")
    for name in DECIDING:
        if table[name]["combined"] < table[name]["verifier_mean"] - 0.005:
            blocked.append(f"{name} test: under the verifier mean by "
                           f"{table[name]['verifier_mean'] - table[name]['combined']:.4f}")
    sevens = [n for n in measured if n.startswith("contrastive")]
    fall = float(np.mean([table[n]["verifier_mean"] - table[n]["combined"] for n in sevens]))
    print(f"\nthe {len(sevens)} contrastive sets: mean {float(np.mean([table[n]['combined'] for n in sevens])):.4f} "
          f"combined, {float(np.mean([table[n]['verifier_mean'] for n in sevens])):.4f} verifier mean")
    if fall > 0.02:
        blocked.append(f"the {len(sevens)} contrastive sets: their mean {fall:.4f} under the verifier mean")
    for name in ("contrastive", "begin-cmu-tc"):
        if table[name]["combined"] < table[name]["verifier_mean"] - 0.02:
            blocked.append(f"{name}: {table[name]['verifier_mean'] - table[name]['combined']:.4f} under the verifier mean")
    return blocked


def rounds_one_to_three(table: dict, measured: dict, data: dict) -> tuple[list[str], float]:
    """Rounds 1 to 3's rule (docs/verifier-log.md): decided on the test halves, guarded by the contrastive sets."""
    blocked = []
    for name in DECIDING:
        row = table[name]
        if row["combined"] < row["verifier_mean"] - 0.005:
            blocked.append(f"{name}: under the verifier mean by {row['verifier_mean'] - row['combined']:.4f}")
        for signal in CHEAP:
            if row[signal] is not None and row["combined"] < row[signal] - 0.005:
                blocked.append(f"{name}: under {signal} by {row[signal] - row['combined']:.4f}")
    gain = float(np.mean([table[n]["combined"] - table[n]["verifier_mean"] for n in DECIDING]))
    if gain < 0.005:
        blocked.append(f"mean gain over the verifier mean {gain:+.4f} < 0.005")
    for name in ("contrastive", "begin-cmu-tc"):
        if table[name]["combined"] < table[name]["verifier_mean"] - 0.02:
            blocked.append(f"{name}: {table[name]['verifier_mean'] - table[name]['combined']:.4f} under the verifier mean")
    sevens = [n for n in measured if n.startswith("contrastive")]
    if len(sevens) > 1:
        fall = float(np.mean([table[n]["verifier_mean"] - table[n]["combined"] for n in sevens]))
        print(f"\nthe {len(sevens)} contrastive sets: mean {float(np.mean([table[n]['combined'] for n in sevens])):.4f} "
              f"combined, {float(np.mean([table[n]['verifier_mean'] for n in sevens])):.4f} verifier mean; "
              f"{len(data.get('made', ([], []))[0])} made pairs fitted on")
        if fall > 0.02:
            blocked.append(f"the {len(sevens)} contrastive sets: their mean {fall:.4f} under the verifier mean")
    return blocked, gain


if __name__ == "__main__":
    raise SystemExit(main())
