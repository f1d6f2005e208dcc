"""The judge as shipped on sets no judge has scored: is it at or above every cheap signal, and no worse than the
verifier mean on changed facts and distractors? (issue 69's closing check; decides nothing)

    .venv/bin/python experiments/unread_check.py run      # scores the four sets written for round 15, cached
    .venv/bin/python experiments/unread_check.py report   # every number, and what the rule written before says

The sets were written for round 15, which stopped on read sets, so none had been scored: dialogue fifteenth,
summaries thirteenth, contrastive fourteenth and distractors eleventh. ``run`` scores each natural set once with
``FaithfulnessWithVerifier()`` as shipped (its score and its verifier mean) and computes the cheap signals; it scores
the distractor set in its three arrangements. ``report`` prints each set's ROC-AUCs, paired bootstrap 95% CIs of the
judge minus the best cheap signal and minus the verifier mean, and the distractor table, then reads them with the
rule in docs/verifier-log.md ("The judge as shipped on four sets no judge has scored").
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

from calibration.agreement.stats import compare  # noqa: E402
from calibration.verifier.contrastive import load_distractors  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from combination_signals import CHEAP  # noqa: E402
from combination_units import ARRANGEMENTS, cache_sets  # noqa: E402
from judges import FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402
from verifier_swaps import pairs_table  # noqa: E402

NATURAL = ("dialogue-fifteenth", "summaries-thirteenth", "contrastive-fourteenth")
GUARDED = "contrastive-fourteenth"
DISTRACTORS = "eleventh"
SCORES = ("judge", "verifier_mean")
#: How far under the verifier mean the contrastive and distractor sets may fall, and how many more contradicted
#: claims the judge may lift, before "no worse" fails (the guard of rounds 9 to 15).
MEAN_MARGIN = 0.005
MORE_LIFTED = 2


class Shipped:
    """``FaithfulnessWithVerifier()`` as shipped, scored once per (response, contexts): its score and verifier mean."""

    def __init__(self):
        self.judge = FaithfulnessWithVerifier()
        self.memo: dict[tuple, dict[str, float]] = {}

    def scores(self, response: str, contexts: list[str]) -> dict[str, float]:
        key = (response, tuple(contexts))
        if key not in self.memo:
            result = self.judge.score(SingleTurnSample(response=response, retrieved_contexts=list(contexts)))
            self.memo[key] = {"judge": float(result.score), "verifier_mean": float(result.get("mean_probability",
                                                                                                result.score))}
        return self.memo[key]

    def as_judge(self, which: str):
        """A judge-like view scoring with one of ``SCORES`` (for ``pairs_table``)."""
        return SimpleNamespace(score=lambda sample: SimpleNamespace(
            score=self.scores(sample.response, list(sample.retrieved_contexts))[which]))


def run(out: Path) -> None:
    scorer = Shipped()
    cache_sets(out, NATURAL, lambda s: scorer.scores(s.response, list(s.retrieved_contexts)), SCORES)
    path = out / "distractors.json"
    if not path.exists():
        items = load_distractors(DISTRACTORS)
        tables = {k: pairs_table(scorer.as_judge(k), items, ARRANGEMENTS) for k in SCORES}
        path.write_text(json.dumps(tables, indent=1), encoding="utf-8")
        print(f"distractors {DISTRACTORS}: {len(items)} items", flush=True)


def difference(y, a, b) -> str:
    d = compare(list(y), list(a), list(b), n_bootstrap=2000, seed=0, stats=["roc_auc"]).stats["roc_auc"]
    return f"{d['difference']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]"


def report(out: Path) -> int:
    missing = [n for n in (*NATURAL, "distractors") if not (out / f"{n}.{'json' if n == 'distractors' else 'npz'}")
               .exists()]
    if missing:
        raise SystemExit(f"unread_check: {out} lacks {', '.join(missing)}; run `unread_check.py run` first")
    verdicts, found_all = [], {}
    print("| set | items | judge | verifier mean | " + " | ".join(c.replace("_", " ") for c in CHEAP)
          + " | judge - best cheap [95% CI] | judge - mean [95% CI] |\n|---|---:|" + "---:|" * (2 + len(CHEAP))
          + "---|---|")
    for name in NATURAL:
        found = np.load(out / f"{name}.npz")
        y = found["y"]
        auc = {k: roc_auc(y, found[k]) for k in SCORES}
        cheap = {c: roc_auc(y, found["cheap"][:, i]) for i, c in enumerate(CHEAP)}
        best = max(cheap, key=lambda c: cheap[c])
        found_all[name] = auc | {"cheap": cheap}
        print(f"| {name} | {len(y)} | {auc['judge']:.4f} | {auc['verifier_mean']:.4f} | "
              + " | ".join(f"{cheap[c]:.4f}" for c in CHEAP)
              + f" | {difference(y, found['judge'], found['cheap'][:, CHEAP.index(best)])} ({best})"
              + f" | {difference(y, found['judge'], found['verifier_mean'])} |")
        verdicts.append(f"{name}: judge {auc['judge']:.4f} "
                        + (f">= every cheap signal (best {best} {cheap[best]:.4f})" if auc["judge"] >= cheap[best]
                           else f"under {best} {cheap[best]:.4f}: a miss"))
    guarded = found_all[GUARDED]
    verdicts.append(f"{GUARDED}: judge {guarded['judge']:.4f}, verifier mean {guarded['verifier_mean']:.4f}: "
                    + ("no worse" if guarded["judge"] >= guarded["verifier_mean"] - MEAN_MARGIN else "worse"))
    tables = json.loads((out / "distractors.json").read_text(encoding="utf-8"))
    print(f"\n| distractors {DISTRACTORS}, arrangement | judge: ROC-AUC, lifted | verifier mean: ROC-AUC, lifted |"
          "\n|---|---|---|")
    for arrangement in ARRANGEMENTS:
        a, b = (tables[k][arrangement] for k in SCORES)
        print(f"| {arrangement} | {a['roc_auc']:.4f}, {a['lifted']} | {b['roc_auc']:.4f}, {b['lifted']} |")
        if arrangement != "alone":
            worse = a["roc_auc"] < b["roc_auc"] - MEAN_MARGIN or a["lifted"] > b["lifted"] + MORE_LIFTED
            verdicts.append(f"distractors {DISTRACTORS}, {arrangement}: " + ("worse" if worse else "no worse"))
    print("\nthe rule written before the run:\n" + "\n".join(f"- {v}" for v in verdicts))
    (out / "report.json").write_text(json.dumps({"natural": found_all, "distractors": tables, "verdicts": verdicts},
                                                indent=1), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "report"))
    parser.add_argument("--out", default="runs/unread_check")
    args = parser.parse_args(argv)
    if args.step == "run":
        run(Path(args.out))
        return 0
    return report(Path(args.out))


if __name__ == "__main__":
    raise SystemExit(main())
