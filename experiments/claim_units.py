"""Do checkable claims rank dialogue replies better than sentences? ``FaithfulnessWithVerifier(claims=...)``.

    .venv/bin/python experiments/claim_units.py                     # every set, ~5 min on 2 cores
    .venv/bin/python experiments/claim_units.py --summeval-limit 80 --out runs/claim_units

Variants: ``claims="sentences"`` (every sentence checked), and ``claims="checkable"`` (questions, greetings,
backchannels, opinions and own experiences set aside; the fact inside a hedge or a presupposing question
checked) with ``unclaimed_score`` 0.0 and 1.0 for a reply with nothing checkable. Sets and halves are
experiments/verifier_agreement.py's (seed 0), plus BEGIN's CMU-DoG and Topical-Chat turns the shipped
verifier did not train on. Printed: ROC-AUC per set and half, the decision by the rule in docs/verifier-log.md
("Checkable claims in dialogue"), what was set aside by kind, and milliseconds per BEGIN WoW turn.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.data.labelled import without_shipped_training  # noqa: E402
from calibration.data.loaders import load_begin  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from judges import FaithfulnessWithVerifier  # noqa: E402
from verifier_agreement import halves, sets  # noqa: E402

DECIDING = ("begin-wow", "q2", "summeval")
VARIANTS = ("sentences", "checkable, unclaimed 0", "checkable, unclaimed 1")


def all_sets(summeval_limit: int) -> dict:
    out = sets(summeval_limit)
    rest, _ = without_shipped_training(load_begin(parts=("cmu", "tc")))
    out["begin-cmu-tc"] = (list(rest.dataset), [int(y) for y in rest.labels])
    return out


def scored(samples, judge) -> tuple[list[float], list, float]:
    started = time.perf_counter()
    results = [judge.score(sample) for sample in samples]
    return [float(r.score) for r in results], results, (time.perf_counter() - started) / max(len(samples), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summeval-limit", type=int, default=320)
    parser.add_argument("--out", default="runs/claim_units")
    args = parser.parse_args(argv)
    data = all_sets(args.summeval_limit)
    for claims in ("sentences", "checkable"):  # models loaded and caches warm before anything is timed
        FaithfulnessWithVerifier(claims=claims).score(data["begin-wow"][0][0])
    rows: dict[str, dict[str, dict[str, float | None]]] = {v: {} for v in VARIANTS}
    aside: dict[str, Counter] = {}
    seconds: dict[str, float] = {}
    for name, (samples, labels) in data.items():
        sentences, _, seconds[f"{name} sentences"] = scored(samples, FaithfulnessWithVerifier(aggregate="mean"))
        checkable, results, seconds[f"{name} checkable"] = scored(samples, FaithfulnessWithVerifier(claims="checkable"))
        nothing = np.array([bool(r.get("nothing_checkable")) for r in results])
        aside[name] = Counter(u["kind"] for r in results for u in (r.get("set_aside") or []))
        aside[name]["replies with nothing checkable"] = int(nothing.sum())
        aside[name]["replies"] = len(samples)
        variants = {"sentences": np.asarray(sentences),
                    "checkable, unclaimed 0": np.where(nothing, 0.0, checkable),
                    "checkable, unclaimed 1": np.where(nothing, 1.0, checkable)}
        y = np.asarray(labels)
        for variant, values in variants.items():
            for half, positions in halves(name if name != "begin-cmu-tc" else "contrastive", labels).items():
                rows[variant][f"{name} {half}"] = roc_auc(y[positions], values[positions])
        print(f"{name}: done ({len(samples)} items)", flush=True)
    columns = list(rows["sentences"])
    print("\n| variant | " + " | ".join(columns) + " |\n|---|" + "---:|" * len(columns))
    for variant in VARIANTS:
        print(f"| {variant} | " + " | ".join("n/a" if rows[variant][c] is None else f"{rows[variant][c]:.4f}"
                                              for c in columns) + " |")
    train = {v: [rows[v][f"{s} train"] for s in DECIDING] for v in VARIANTS}
    mean = {v: float(np.mean(train[v])) for v in VARIANTS}
    best = max(VARIANTS[1:], key=lambda v: mean[v])
    falls = [s for s, new, old in zip(DECIDING, train[best], train["sentences"]) if new < old - 0.005]
    adopt = mean[best] >= mean["sentences"] + 0.005 and not falls
    print("\nmean over the train halves: " + ", ".join(f"{v} {mean[v]:.4f}" for v in VARIANTS))
    print(f"rule: {best} {'replaces' if adopt else 'does not replace'} sentences (mean {mean[best] - mean['sentences']:+.4f}; "
          f"train halves falling more than 0.005: {', '.join(falls) or 'none'})")
    print("\nset aside, by kind: " + "; ".join(f"{name}: " + ", ".join(f"{k} {n}" for k, n in counts.most_common())
                                              for name, counts in aside.items()))
    print("ms per BEGIN WoW turn: sentences {:.1f}, checkable {:.1f}".format(
        1000 * seconds["begin-wow sentences"], 1000 * seconds["begin-wow checkable"]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "claim_units.json").write_text(json.dumps(
        {"roc_auc": rows, "train_means": mean, "chosen": best, "adopted": adopt, "set_aside": aside,
         "seconds_per_item": seconds}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
