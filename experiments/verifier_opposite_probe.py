"""Does the shipped verifier prefer a response to the same response with one direction word turned?

    .venv/bin/python experiments/verifier_opposite_probe.py                       # the first two sets, ~10 s
    .venv/bin/python experiments/verifier_opposite_probe.py --sets first second third fourth fifth sixth seventh

The probe behind the check against opposites (``judges.lm.verifier.opposites``; docs/verifier-experiments.md,
"Measured: a claim against its own opposite"). First run as a one-off on 2026-11-29, before the check existed;
this script is that probe kept. For every item of a hand-written contrastive set (``load_contrastive``) whose
response has a direction word (``judges.data.opposites.direction_flips``: rose/fell, north/south ...), it
scores against the item's whole evidence, with the shipped verifier's raw probability (``Verifier.probabilities``:
no shortlist of units, no check against opposites):

  P(response)      the response as written
  P(turned)        the largest of the response's variants with one direction word turned to its opposite

and prints, by set and kind: how many items, the two means, and how often the response scored strictly higher
than its likeliest variant. For a response that changed a direction (label 0) the variant turns the word back
to the evidence's own, so "response higher" should be rare; for a faithful paraphrase or a copy (label 1) the
variant is a changed fact, so it should be common. Tests only: nothing is fitted on the sets.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.verifier.contrastive import CONTRASTIVE_SETS, load_contrastive  # noqa: E402
from judges.data.opposites import direction_flips  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402


def probe(verifier: Verifier, items: list[dict]) -> list[dict]:
    """One row per item with a direction word: kind, label, P(response), P(its likeliest turned variant)."""
    chosen = [(item, direction_flips(item["response"])) for item in items]
    chosen = [(item, flips) for item, flips in chosen if flips]
    pairs = [(item["evidence"], text) for item, flips in chosen for text in [item["response"], *flips]]
    scored = iter(verifier.probabilities(pairs))
    rows = []
    for item, flips in chosen:
        own = float(next(scored))
        back = max(float(next(scored)) for _ in flips)
        rows.append({"kind": item["kind"], "label": int(item["label"]), "response": own, "turned": back})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=["first", "second"], choices=sorted(CONTRASTIVE_SETS))
    args = parser.parse_args()
    verifier = Verifier()  # probabilities() is the model alone: no shortlist of units, no check against opposites
    print(f"verifier: {verifier!r}")
    print("| set | kind (label) | n | P(response) | P(turned) | response scored higher |")
    print("|---|---|---:|---:|---:|---:|")
    for name in args.sets:
        groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
        for row in probe(verifier, load_contrastive(name)):
            groups[(row["kind"], row["label"])].append(row)
        for (kind, label), rows in sorted(groups.items(), key=lambda g: (g[0][1], g[0][0])):
            own = np.array([r["response"] for r in rows])
            back = np.array([r["turned"] for r in rows])
            higher = int((own > back).sum())
            print(f"| {name} | {kind} ({label}) | {len(rows)} | {own.mean():.3f} | {back.mean():.3f} "
                  f"| {higher} of {len(rows)} ({higher / len(rows):.0%}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
