"""Long evidence, second step: shorter windows (``chunk_tokens``) and shorter shortlists (``top_units``)?

    .venv/bin/python experiments/verifier_windows.py                    # ~4 min on 2 cores
    .venv/bin/python experiments/verifier_windows.py --chunk-tokens 160,64 --tops 2 --summeval-limit 80
    .venv/bin/python experiments/verifier_windows.py --model runs/verifier-joint3/model --chunk-tokens 128 --tops 2

With the shortlist (``experiments/verifier_shortlist.py``) a SummEval summary still takes ~100 ms on ONNX
Runtime: each claim is scored against 2 units, and a unit is often a window of ~160 tokens, so a pair is
~180 tokens long. A shorter window makes every pair shorter (a cross-encoder's cost grows with the length);
one unit instead of two halves the pairs. Here, for each (``chunk_tokens``, ``top_units``) on the first
``--summeval-limit`` SummEval summaries split as in ``experiments/verifier_agreement.py``: the weakest
sentence's ROC-AUC on the train and the test half, the median seconds a summary and the pairs a summary;
then BEGIN WoW's and Q2's halves for the candidates the SummEval rule lets through.

The rule for a new default, written before it ran: the reference is the current default (160 tokens, 2
units). Of the other settings, the fastest (median seconds a SummEval summary) whose SummEval train-half
ROC-AUC is at least the reference's minus 0.005, and whose BEGIN WoW and Q2 train halves are each within
0.005 of the reference's, becomes ``Verifier``'s default; if none is, the default stays. Test halves are
reported, never used to choose. With ``--model`` (a model folder, e.g. a retrain of
``experiments/verifier_joint_mix.py``) only the SummEval table is printed: the rule is for the shipped verifier.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets, split  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402
from verifier_shortlist import summeval_row, summeval_set  # noqa: E402

from calibration.verifier.training import roc_auc  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402

TOLERANCE = 0.005
REFERENCE = (160, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunk-tokens", default="160,128,96,64", help="comma-separated window sizes")
    parser.add_argument("--tops", default="1,2", help="comma-separated top_units")
    parser.add_argument("--summeval-limit", type=int, default=320)
    parser.add_argument("--model", default=None, help="a model folder instead of the shipped verifier (table only)")
    args = parser.parse_args()
    settings = sorted({(int(c), int(k)) for c in args.chunk_tokens.split(",") for k in args.tops.split(",")}
                      | {REFERENCE}, reverse=True)
    summeval = summeval_set(args.summeval_limit)
    print(f"{'chunk':>6} {'units':>6} {'train ROC-AUC':>14} {'test ROC-AUC':>13} {'median s':>9} {'pairs/summary':>14}")
    rows = {}
    for chunk, k in settings:
        rows[chunk, k] = summeval_row(Verifier(args.model, chunk_tokens=chunk, top_units=k), *summeval)
        train, test, seconds, pairs = rows[chunk, k]
        print(f"{chunk:>6} {k:>6} {train:>14.4f} {test:>13.4f} {seconds:>9.3f} {pairs:>14.1f}", flush=True)
    if args.model is not None:
        return 0
    floor = rows[REFERENCE][0] - TOLERANCE
    candidates = sorted((rows[s][2], s) for s in settings if s != REFERENCE and rows[s][0] >= floor)
    print(f"SummEval rule (train half >= {floor:.4f}): {[s for _, s in candidates] or 'none'}")
    if not candidates:
        print(f"-> the default stays chunk_tokens={REFERENCE[0]}, top_units={REFERENCE[1]}")
        return 0
    data = {name: value for name, value in sets(summeval_limit=2).items() if name in ("begin-wow", "q2")}
    halves = {}
    for setting in [REFERENCE] + [s for _, s in candidates]:
        verifier = Verifier(chunk_tokens=setting[0], top_units=setting[1])
        for name, (samples, labels) in data.items():
            for half, indices in zip(("train", "test"), split(labels, 0)):
                halves[setting, name, half] = roc_auc(np.asarray(labels)[indices], weakest(verifier, samples, indices))
        print(f"chunk {setting[0]}, units {setting[1]}: " + "; ".join(
            f"{name} {half} {halves[setting, name, half]:.4f}" for name in data for half in ("train", "test")),
            flush=True)
    chosen = next((s for _, s in candidates if all(halves[s, name, "train"] >= halves[REFERENCE, name, "train"]
                                                   - TOLERANCE for name in data)), None)
    print("-> " + (f"the default stays chunk_tokens={REFERENCE[0]}, top_units={REFERENCE[1]}" if chosen is None
                   else f"new default chunk_tokens={chosen[0]}, top_units={chosen[1]}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
