"""Long evidence, third step: stop scoring a claim once one of its units is clearly enough (``stop_at``)?

    .venv/bin/python experiments/verifier_cascade.py                     # ~3 min on 2 cores
    .venv/bin/python experiments/verifier_cascade.py --summeval-limit 80 --stops 0.9

A claim's probability is the best of its shortlisted units' (``Verifier.support``), and each claim is scored
against 2 units: on SummEval often a window of ~128 tokens and one single sentence. With ``stop_at`` the
units are scored shortest first, and a claim whose first unit reaches ``stop_at`` is not scored against the
rest: its probability is then at most ``1 - stop_at`` below what every unit would have given (the best can
only rise, and not above 1), and whether it reaches ``stop_at`` (or any cut-off under it, 0.5 included) is
exactly what every unit would have said.

How it came about (2026-11-27): a simulation on the first 320 SummEval summaries, with every shortlisted
pair scored once and the cascade replayed on those probabilities, had the tokens a summary fall from 631 to
337 (0.8), 365 (0.9) and 443 (0.95), and the weakest claim's ROC-AUC move on the train half from 0.7554 to
0.7533, 0.7552 and 0.7554, on the test half from 0.7541 to 0.7528, 0.7528 and 0.7541. BEGIN WoW, Q2 and the
contrastive set had not been measured when this rule was written.

The rule for a new default, written before this script ran: the reference is the current default (no stop,
2 units, 128-token windows). Candidates are 0.9 and 0.95 only (0.5 and 0.8 are printed, never chosen: they
would leave a claim's probability up to 0.5 or 0.2 under its best unit's, and that number is shown to users
in the metric's feedback). The smallest candidate whose SummEval, BEGIN WoW and Q2 train-half ROC-AUC (the
weakest sentence's probability) are each at least the reference's minus 0.005 becomes ``Verifier``'s
default ``stop_at``; if none is, the default stays ``None``. Test halves and the contrastive set are
reported, never used to choose. Time: the median seconds a SummEval summary in this process, after one
untimed pass that fills the sentence cache; the speed claim itself is measured with
``benchmarks/verifier_speed.py``, whole processes A/B (docs/verifier.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import halves, sets  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402
from verifier_shortlist import summeval_row, summeval_set  # noqa: E402

from calibration.verifier.training import roc_auc  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402

TOLERANCE = 0.005
CANDIDATES = (0.9, 0.95)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stops", default="0.5,0.8,0.9,0.95", help="comma-separated stop_at values")
    parser.add_argument("--summeval-limit", type=int, default=320)
    args = parser.parse_args()
    stops: list[float | None] = [None] + sorted({float(s) for s in args.stops.split(",")})
    summeval = summeval_set(args.summeval_limit)
    summeval_row(Verifier(stop_at=None), *summeval)  # untimed: fills the sentence cache
    data = {name: value for name, value in sets(summeval_limit=2).items() if name != "summeval"}
    print(f"{'stop_at':>8} {'SummEval train':>15} {'test':>7} {'median s':>9} {'pairs':>6} "
          + " ".join(f"{name + ' ' + half:>17}" for name in data if name != "contrastive" for half in ("train", "test"))
          + f" {'contrastive':>12}")
    rows = {}
    for stop in stops:
        verifier = Verifier(stop_at=stop)
        row = dict(zip(("summeval train", "summeval test", "seconds", "pairs"), summeval_row(verifier, *summeval)))
        for name, (samples, labels) in data.items():
            for half, indices in halves(name, labels).items():
                row[f"{name} {half}"] = roc_auc(np.asarray(labels)[indices], weakest(verifier, samples, indices))
        rows[stop] = row
        print(f"{'none' if stop is None else stop:>8} {row['summeval train']:>15.4f} {row['summeval test']:>7.4f} "
              f"{row['seconds']:>9.4f} {row['pairs']:>6.2f} "
              + " ".join(f"{row[name + ' ' + half]:>17.4f}" for name in data if name != "contrastive"
                         for half in ("train", "test")) + f" {row['contrastive all']:>12.4f}", flush=True)
    keys = ("summeval train",) + tuple(f"{name} train" for name in data if name != "contrastive")
    chosen = next((stop for stop in CANDIDATES if stop in rows
                   and all(rows[stop][key] >= rows[None][key] - TOLERANCE for key in keys)), None)
    print("-> " + ("the default stays stop_at=None" if chosen is None else f"new default stop_at={chosen}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
