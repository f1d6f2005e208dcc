"""Does a stacked calibrator fitted on a few labels rank worse than the judge it calibrates, and does letting the
judge's score enter first (``selection="judge_first"``) prevent it?

    .venv/bin/python experiments/calibration_judge_first.py        # signals cached once (~10 min), then the draws

For each set, the shipped judge's score (``FaithfulnessWithVerifier()``) and the stacked calibrator's default
signals (``calibration.fitting.fit.fit``'s ``features``) are computed once per item and cached. Per draw, n labels
are drawn label-balanced from the set's train half (``verifier_agreement.halves``, seed 0); a stacked calibrator
is fitted with each selection rule and measured on the test half (ROC-AUC). Two judges: the shipped one, and one at
chance (seeded uniform noise in place of its score), which a calibrator should drop whatever the rule. Sets: the
third to ninth written dialogue sets pooled, and the first six written summary sets pooled (the combination was
fitted on neither); all seven summary sets pooled, Q2 and BEGIN WoW are reported only (the combination was fitted
on the last two). The rule is in
docs/agreement-log.md ("Which input a calibrator takes first").
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.data.labelled import balanced_indices  # noqa: E402
from calibration.fitting.calibrators import Calibrator  # noqa: E402
from calibration.fitting.fit import fit  # noqa: E402
from calibration.fitting.signals import feature_matrix  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from combination_signals import pooled, summaries  # noqa: E402
from judges import FaithfulnessWithVerifier  # noqa: E402
from label_efficient import written_dialogue  # noqa: E402
from verifier_agreement import halves, sets  # noqa: E402

DECIDING = ("dialogue-written", "summaries-written")
REPORTED = ("summaries-all-seven", "q2", "begin-wow")
WRITTEN_SUMMARIES = ("fresh", "second", "third", "fourth", "fifth", "sixth")
#: The rule named "the six written summary sets" with the count of all seven (1,080): the seven are reported too.
ALL_SEVEN_SUMMARIES = (*WRITTEN_SUMMARIES, "seventh")
DRAWS = {40: 15, 60: 15, 200: 8}
RULES = ("one_se", "judge_first")
#: The stacked calibrator's signals when ``fit`` is given none.
FEATURES = tuple(inspect.signature(fit).parameters["features"].default)


def written_summaries(names=WRITTEN_SUMMARIES) -> tuple[list, list[int]]:
    return pooled(summaries, names)


def cached(out: Path, name: str, load) -> dict[str, np.ndarray]:
    path = out / f"{name}.npz"
    if not path.exists():
        samples, labels = load()
        judge = FaithfulnessWithVerifier()
        results = [judge.score(s) for s in samples]
        np.savez(path, y=np.asarray(labels), judge=np.array([float(r.score) for r in results]),
                 extra=feature_matrix(list(FEATURES), samples, results))
        print(f"{name}: {len(samples)} items", flush=True)
    return dict(np.load(path))


def study(found: dict[str, np.ndarray], name: str) -> list[dict]:
    y, extra = found["y"], found["extra"]
    part = halves(name, list(y))
    train, test = part["train"], part["test"]
    rows = []
    for n, draws in DRAWS.items():
        for draw in range(draws):
            at = train[balanced_indices(list(y[train]), n, np.random.default_rng([draw, n]))]
            noise = np.random.default_rng([draw, n, 7]).random(len(y))
            for judge, raw in (("shipped", found["judge"]), ("at chance", noise)):
                row = {"set": name, "n": n, "draw": draw, "judge": judge, "uncalibrated": roc_auc(y[test], raw[test])}
                for rule in RULES:
                    cal = Calibrator("stacked", binary=True, features=FEATURES, selection=rule)
                    cal.fit(raw[at], y[at], extra[at])
                    kept = extra[test][:, [FEATURES.index(f) for f in cal.features]]  # the columns it kept
                    row[rule] = roc_auc(y[test], cal.predict(raw[test], kept))
                    row[f"{rule} keeps the judge"] = bool(cal.use_raw)
                rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| set | judge | n (draws) | uncalibrated | one_se | judge_first | judge kept (one_se / judge_first) | "
             "draws 0.05 under the uncalibrated judge (one_se / judge_first) |", "|---|---|---|---:|---:|---:|---|---|"]
    for key in dict.fromkeys((r["set"], r["judge"], r["n"]) for r in rows):
        these = [r for r in rows if (r["set"], r["judge"], r["n"]) == key]
        mean = {k: np.mean([r[k] for r in these]) for k in ("uncalibrated", *RULES)}
        kept = " / ".join(f"{sum(r[f'{k} keeps the judge'] for r in these)}" for k in RULES)
        under = " / ".join(f"{sum(r[k] < r['uncalibrated'] - 0.05 for r in these)}" for k in RULES)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} ({len(these)}) | {mean['uncalibrated']:.4f} | "
                     f"{mean['one_se']:.4f} | {mean['judge_first']:.4f} | {kept} | {under} |")
    return "\n".join(lines)


def rule(rows: list[dict]) -> list[str]:
    """What blocks judge_first as the default (docs/agreement-log.md); empty when it becomes the default."""
    blocked = []
    cells = {}
    for r in rows:
        if r["set"] in DECIDING:
            cells.setdefault((r["set"], r["judge"], r["n"]), []).append(r)
    shipped = [k for k in cells if k[1] == "shipped"]
    gains = {k: np.mean([r["judge_first"] - r["one_se"] for r in cells[k]]) for k in cells}
    if np.mean([gains[k] for k in shipped]) < 0.005:
        blocked.append(f"shipped judge: mean gain {np.mean([gains[k] for k in shipped]):+.4f} < +0.005")
    blocked += [f"{k}: {gains[k]:+.4f} < -0.005" for k in cells if gains[k] < -0.005]
    return blocked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/calibration_judge_first")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    public = {}

    def public_set(name):
        if not public:
            public.update(sets(summeval_limit=1))
        return public[name]

    loads = {"dialogue-written": written_dialogue, "summaries-written": written_summaries,
             "summaries-all-seven": lambda: written_summaries(ALL_SEVEN_SUMMARIES),
             **{name: (lambda name=name: public_set(name)) for name in ("q2", "begin-wow")}}
    rows = []
    for name in (*DECIDING, *REPORTED):
        rows += study(cached(out, name, loads[name]), name)
    (out / "results.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(table(rows))
    blocked = rule(rows)
    print("\nrule: judge_first " + ("becomes the default" if not blocked else "does not; blocked by: "
                                    + "; ".join(blocked)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
