"""Long evidence, third step: how much padding should a batch of (unit, claim) pairs carry?

    .venv/bin/python experiments/verifier_padding.py               # ~3 min on 2 cores
    .venv/bin/python experiments/verifier_padding.py --ratios 1,1.25,2 --rounds 3 --summeval 40

A SummEval summary's claims are scored against windows of ~128 tokens and single sentences of ~30, so one
padded batch spends most of its work on padding. ``Verifier(padding_ratio=r)`` scores pairs in batches whose
token lengths are within r of each other, each padded to its own longest pair; padding is masked, so every
r gives the same probabilities (this script checks that) and only the time differs: fewer padded tokens
against more, smaller runs of the model. "one batch" is the way before (every pair of a call padded to the
longest, as ``r`` = infinity). The settings are timed in turn, round after round (the machine's speed drifts
between minutes), on the first ``--summeval`` SummEval summaries against their articles and the first
``--begin`` BEGIN WoW turns; a cell is the median over rounds of each round's median ms an item.

The rule for the default, written before it ran: the ratio with the lowest SummEval median becomes
``Verifier``'s default, unless it is within 3% of one batch's (then the default stays one batch); BEGIN's
column is reported, not used to choose (its 1-3 sentence passages make few pairs a turn).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from calibration.data.loaders import load_begin, load_summeval  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402
from judges.metrics.rag.verified import sentence_claims  # noqa: E402

ONE_BATCH = 1e9  # every pair of a call within the ratio: one batch padded to its longest (batch_size allowing)


def items(limit: int, begin: bool) -> list[tuple[list[str], list[str]]]:
    data = load_begin(parts=("wow",), limit=limit + 5) if begin else load_summeval(limit=limit + 5)
    return [(list(s.retrieved_contexts if begin else s.reference_contexts), sentence_claims(s.response))
            for s in data.dataset]


def timed(verifier: Verifier, data: list[tuple[list[str], list[str]]]) -> tuple[float, list[float]]:
    """Median ms an item after 5 warm-up items, and every claim's probability."""
    for evidence, claims in data[:5]:
        verifier.support(evidence, claims)
    seconds, probabilities = [], []
    for evidence, claims in data[5:]:
        started = time.perf_counter()
        rows = verifier.support(evidence, claims)
        seconds.append(time.perf_counter() - started)
        probabilities += [row["probability"] for row in rows]
    return statistics.median(seconds) * 1000, probabilities


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ratios", default="1,1.1,1.25,1.5,2", help="comma-separated padding ratios (>= 1)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--summeval", type=int, default=100)
    parser.add_argument("--begin", type=int, default=200)
    args = parser.parse_args()
    ratios = [ONE_BATCH] + sorted({float(r) for r in args.ratios.split(",")})
    verifiers = {r: Verifier(padding_ratio=r) for r in ratios}
    sets = {"summeval": items(args.summeval, begin=False), "begin": items(args.begin, begin=True)}
    print(f"{verifiers[ONE_BATCH]}; SummEval {len(sets['summeval']) - 5} summaries, BEGIN WoW "
          f"{len(sets['begin']) - 5} turns, {args.rounds} rounds\n")
    times = {(r, name): [] for r in ratios for name in sets}
    reference: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for r in ratios:
            for name, data in sets.items():
                ms, probabilities = timed(verifiers[r], data)
                times[r, name].append(ms)
                reference.setdefault(name, np.asarray(probabilities))
                gap = float(np.abs(np.asarray(probabilities) - reference[name]).max())
                if gap > 1e-5:
                    raise SystemExit(f"padding ratio {r} changed a probability on {name} by {gap:.2e}")
    print("| padding ratio | SummEval ms/summary (median of rounds) | min-max over rounds | BEGIN WoW ms/turn |")
    print("|---|---:|---|---:|")
    cell = {key: statistics.median(value) for key, value in times.items()}
    for r in ratios:
        label = "one batch (before)" if r == ONE_BATCH else f"{r:g}"
        spread = times[r, "summeval"]
        print(f"| {label} | {cell[r, 'summeval']:.1f} | {min(spread):.1f}-{max(spread):.1f} | {cell[r, 'begin']:.1f} |")
    best = min(ratios[1:], key=lambda r: cell[r, "summeval"])
    keep = cell[best, "summeval"] > 0.97 * cell[ONE_BATCH, "summeval"]
    print(f"\nthe rule: {'one batch stays' if keep else f'padding_ratio={best:g} becomes the default'} "
          f"({cell[best, 'summeval']:.1f} against {cell[ONE_BATCH, 'summeval']:.1f} ms a summary); "
          "every ratio gave the same probabilities (within 1e-5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
