"""Does a learned talk classifier find the claims of a reply better than the word-list rules?

    .venv/bin/python experiments/talk_units.py                      # every set, ~6 min on 2 cores
    .venv/bin/python experiments/talk_units.py --summeval-limit 80 --out runs/talk_units

Two measures. Sentences: on ``units_test.jsonl`` (UNITS_TEST.md), how often the rules (``claim_units``) and the
learned classifier (``judges.lm.talk``) call a sentence checkable or talk as its writer did, by kind. Replies:
ROC-AUC of ``FaithfulnessWithVerifier`` with ``claims="sentences"``, ``"checkable"`` and ``"checkable-learned"``
(both with ``unclaimed_score=1``) on the third dialogue set (DIALOGUE_THIRD.md), the fresh one, the halves of
experiments/verifier_agreement.py's sets and its first contrastive set. Printed: both tables and the decision
by the rule in docs/verifier-log.md ("Talk decided by a learned classifier").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.verifier.contrastive import load_dialogue  # noqa: E402
from calibration.verifier.talk_units import load_units  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from judges import FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402
from judges.data.claim_units import claim_units  # noqa: E402
from judges.lm.talk import shipped_talk_classifier  # noqa: E402
from verifier_agreement import halves, sets  # noqa: E402

VARIANTS = {"sentences": {"aggregate": "mean"}, "checkable": {"claims": "checkable", "unclaimed_score": 1.0},
            "checkable-learned": {"claims": "checkable-learned", "unclaimed_score": 1.0}}


def sentence_table(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per decider: accuracy, the share of checkable sentences set aside, of talk kept, and accuracy by kind."""
    sentences = [r["sentence"] for r in rows]
    truth = np.array([r["checkable"] for r in rows], dtype=bool)
    found = {"rules": np.array([any(u.claim for u in claim_units(s)) for s in sentences]),
             "learned": shipped_talk_classifier().checkable(sentences)}
    table = {}
    for name, called in found.items():
        by_kind = defaultdict(list)
        for row, right in zip(rows, called == truth):
            by_kind[row["kind"]].append(right)
        table[name] = {"accuracy": float(np.mean(called == truth)),
                       "checkable set aside": float(np.mean(~called[truth])),
                       "talk kept": float(np.mean(called[~truth]))} | {
                          f"kind {k}": float(np.mean(v)) for k, v in sorted(by_kind.items())}
    return table


def dialogue(which: str) -> tuple[list, list[int]]:
    rows = load_dialogue(which)
    return ([SingleTurnSample(user_input=r["user_input"], response=r["reply"], retrieved_contexts=[r["knowledge"]])
             for r in rows], [int(r["label"]) for r in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summeval-limit", type=int, default=320)
    parser.add_argument("--out", default="runs/talk_units")
    args = parser.parse_args(argv)
    test, seen = load_units("test"), {r["sentence"].strip().lower() for r in load_units("train")}
    units = sentence_table(test)
    unseen = sentence_table([r for r in test if r["sentence"].strip().lower() not in seen])
    units |= {f"{k}, unseen": v for k, v in unseen.items()}  # the rule reads the whole set, as written
    print(f"{len(test) - sum(r['sentence'].strip().lower() in seen for r in test)} of {len(test)} test sentences "
          "are not in the training set (the 'unseen' columns)")
    print("| sentences (units_test) | " + " | ".join(units) + " |\n|---|" + "---:|" * len(units))
    for measure in units["rules"]:
        print(f"| {measure} | " + " | ".join(f"{units[d][measure]:.3f}" for d in units) + " |")
    data = {"dialogue-third": dialogue("third"), "dialogue-fresh": dialogue("fresh")} | sets(args.summeval_limit)
    judges = {name: FaithfulnessWithVerifier(**kwargs) for name, kwargs in VARIANTS.items()}
    for judge in judges.values():  # models loaded before anything is timed
        judge.score(data["begin-wow"][0][0])
    table: dict[str, dict[str, float | None]] = {v: {} for v in VARIANTS}
    ms: dict[str, float] = {}
    for name, (samples, labels) in data.items():
        y = np.asarray(labels)
        parts = halves(name, labels) if name in ("begin-wow", "q2", "summeval") else {"all": np.arange(len(y))}
        for variant, judge in judges.items():
            started = time.perf_counter()
            values = np.array([judge.score(s).score for s in samples], float)
            if name == "begin-wow":
                ms[variant] = 1000 * (time.perf_counter() - started) / len(samples)
            for half, at in parts.items():
                table[variant][f"{name} {half}"] = roc_auc(y[at], values[at])
        print(f"{name}: {len(samples)} replies", flush=True)
    columns = list(table["sentences"])
    print("\n| claims | " + " | ".join(columns) + " |\n|---|" + "---:|" * len(columns))
    for variant in VARIANTS:
        print(f"| {variant} | " + " | ".join(f"{table[variant][c]:.4f}" for c in columns) + " |")
    print("ms per BEGIN WoW turn (caches shared, the first variant pays for the verifier's): "
          + ", ".join(f"{v} {t:.1f}" for v, t in ms.items()))
    blocked = decision(units, table)
    print(f"\nrule: checkable-learned is {'adopted' if not blocked else 'not adopted'}"
          + ("" if not blocked else "; blocked by: " + "; ".join(blocked)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "talk_units.json").write_text(json.dumps({"sentences": units, "roc_auc": table, "ms_per_turn": ms,
                                                     "blocked": blocked}, indent=1), encoding="utf-8")
    return 0


def decision(units: dict, table: dict) -> list[str]:
    """The rule in docs/verifier-log.md ("Talk decided by a learned classifier")."""
    blocked = []
    rules, learned = units["rules"], units["learned"]
    if learned["accuracy"] < rules["accuracy"] + 0.05:
        blocked.append(f"units_test accuracy {learned['accuracy']:.3f}, not 0.05 above the rules' {rules['accuracy']:.3f}")
    if learned["checkable set aside"] > rules["checkable set aside"] + 0.02:
        blocked.append(f"units_test: sets aside {learned['checkable set aside']:.3f} of checkable sentences "
                       f"(rules {rules['checkable set aside']:.3f})")
    third = {v: table[v]["dialogue-third all"] for v in VARIANTS}
    if third["checkable-learned"] < third["checkable"] + 0.01:
        blocked.append(f"dialogue-third {third['checkable-learned']:.4f}, not 0.01 above checkable {third['checkable']:.4f}")
    if third["checkable-learned"] < third["sentences"] - 0.005:
        blocked.append(f"dialogue-third {third['checkable-learned']:.4f} under sentences {third['sentences']:.4f}")
    if table["checkable-learned"]["q2 train"] < table["checkable"]["q2 train"] - 0.005:
        blocked.append(f"q2 train {table['checkable-learned']['q2 train']:.4f}, "
                       f"under checkable's {table['checkable']['q2 train']:.4f} by more than 0.005")
    return blocked


if __name__ == "__main__":
    raise SystemExit(main())
