"""Long evidence: score each claim against a shortlist of the evidence's units instead of all of them?

    .venv/bin/python experiments/verifier_shortlist.py                  # ~12 min on 2 cores
    .venv/bin/python experiments/verifier_shortlist.py --tops 2,4 --summeval-limit 80

On a SummEval news article the verifier scores every claim against every chunk and every sentence of the
article (``Verifier.units``): ~470 ms a summary on ONNX Runtime (~810 ms on torch), against ~8 ms a BEGIN turn. With
``Verifier(top_units=k)`` a claim is scored only against the ``k`` units sharing most of its words (rarer
words weigh more: ``judges.lm.verifier.units.shortlist``). Here, for each ``k`` (and all units), on the first
``--summeval-limit`` SummEval summaries split as in ``experiments/verifier_agreement.py``: the weakest
sentence's ROC-AUC against the consistency label on the train and the test half, and the median seconds a
summary. Then BEGIN WoW and Q2 (their knowledge is one to three sentences: a chunk and its sentences, so
a ``k`` of 2 or 3 can leave a unit out there too), train and test halves, all units against the chosen ``k``.

The rule for a default, written before it ran: the smallest ``k`` whose SummEval train-half ROC-AUC is
within 0.005 of all units' becomes ``Verifier``'s default; if none is, the default stays all units. Added
after the first run showed the premise that BEGIN and Q2 were untouched was wrong (a stricter rule, not a
looser one): the chosen ``k`` must also keep BEGIN WoW's and Q2's train halves within 0.005. Test halves are
reported, never used to choose.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets, split  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402

from calibration.data.loaders import load_summeval  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from judges.data.language import split_sentences  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402

TOLERANCE = 0.005


def summeval_set(limit: int | None) -> tuple[list[list[str]], list[list[str]], np.ndarray]:
    """SummEval's first ``limit`` summaries: (articles, summary sentences, fully-consistent labels)."""
    data = load_summeval(limit=limit)
    evidence = [list(s.reference_contexts) for s in data.dataset]
    claims = [split_sentences(s.response) or [s.response] for s in data.dataset]
    labels = np.asarray([int(y >= 5.0 - 1e-9) for y in data.labels])
    train, test = split(labels.tolist(), 0)
    print(f"SummEval: {len(labels)} summaries ({labels.sum()} fully consistent); train {len(train)}, test {len(test)}")
    return evidence, claims, labels


def summeval_row(verifier: Verifier, evidence: list[list[str]], claims: list[list[str]],
                 labels: np.ndarray) -> tuple[float, float, float, float]:
    """The weakest sentence's ROC-AUC on the train and the test half, the median seconds a summary and the
    mean (unit, claim) pairs a summary."""
    train, test = split(labels.tolist(), 0)
    lowest, seconds, pairs = [], [], []
    for context, sentences in zip(evidence, claims):
        started = time.perf_counter()
        rows = verifier.support(context, sentences)
        seconds.append(time.perf_counter() - started)
        lowest.append(min(r["probability"] for r in rows))
        pairs.append(sum(r["units_scored"] for r in rows))
    lowest = np.asarray(lowest)
    return (roc_auc(labels[train], lowest[train]), roc_auc(labels[test], lowest[test]), float(np.median(seconds)),
            float(np.mean(pairs)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tops", default="1,2,3,4,6", help="comma-separated k (all units is always run)")
    parser.add_argument("--summeval-limit", type=int, default=320)
    parser.add_argument("--int8", action="store_true", help="the int8 model (the rule reads float32 runs)")
    parser.add_argument("--chunk-tokens", type=int, default=160,
                        help="window size (%(default)s, as when it ran; experiments/verifier_windows.py varies it)")
    args = parser.parse_args()
    tops = [None] + sorted({int(k) for k in args.tops.split(",")})
    summeval = summeval_set(args.summeval_limit)
    print(f"{'units':>6} {'train ROC-AUC':>14} {'test ROC-AUC':>13} {'median s':>9} {'pairs/summary':>14}")
    rows = {}
    for k in tops:
        rows[k] = summeval_row(Verifier(top_units=k, quantize=args.int8, chunk_tokens=args.chunk_tokens), *summeval)
        print(f"{'all' if k is None else k:>6} {rows[k][0]:>14.4f} {rows[k][1]:>13.4f} {rows[k][2]:>9.3f}"
              f" {rows[k][3]:>14.1f}", flush=True)
    chosen = next((k for k in tops[1:] if rows[k][0] >= rows[None][0] - TOLERANCE), None)
    print(f"SummEval rule (train half within {TOLERANCE} of all units): "
          + ("all units (no k qualifies)" if chosen is None else f"top_units={chosen}"))
    if chosen is None:
        return 0
    data = {name: value for name, value in sets(summeval_limit=2).items() if name in ("begin-wow", "q2")}
    kept = True
    for name, (samples, labels) in data.items():
        for half, indices in zip(("train", "test"), split(labels, 0)):
            y = np.asarray(labels)[indices]
            full, short = (roc_auc(y, weakest(Verifier(top_units=k, quantize=args.int8, chunk_tokens=args.chunk_tokens),
                                              samples, indices))
                           for k in (None, chosen))
            print(f"{name} {half}: all units {full:.4f}, top_units={chosen} {short:.4f}", flush=True)
            kept &= half == "test" or short >= full - TOLERANCE
    print(f"rule on BEGIN WoW and Q2 train halves: {'kept' if kept else 'failed'} -> default "
          + (f"top_units={chosen}" if kept else "all units"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
