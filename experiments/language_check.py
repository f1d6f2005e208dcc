"""How many texts of the shared data does the language check call something other than English?

    .venv/bin/python experiments/language_check.py

Counts ``judges.data.language.detect_language`` over the responses, claims and evidence of BEGIN (all
parts), SummEval, Q2, the contrastive set and the first 3,000 pairs of each training source (all English),
prints the counts per set and the first flagged texts, and how many items of the agreement table's sets
(``verifier_agreement.sets``) have a flagged text (``FaithfulnessWithVerifier`` scores those 0.0). The
counts before 2026-11-27's rule came from this count run with ``judges/data/language.py`` of commit
3d859b5. Prints no MLflow run; not run by the tests.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets  # noqa: E402

from calibration.verifier import pairs  # noqa: E402
from calibration.verifier.contrastive import load_contrastive  # noqa: E402
from calibration.data.loaders import load_begin, load_summeval  # noqa: E402
from judges.data.language import detect_language  # noqa: E402

SOURCES = ("vitaminc", "mnli_snli_dev", "fever_symmetric", "factcheck_gpt", "expertqa", "halueval_qa")


def texts() -> dict[str, list[str]]:
    out: dict[str, list[str]] = collections.defaultdict(list)
    for s in load_begin().dataset:
        out["begin"] += [s.response, *s.retrieved_contexts]
    for s in load_summeval().dataset:
        out["summeval"] += [s.response, *s.reference_contexts]
    for p in pairs.load_q2_wow():
        out["q2"] += [p.claim, p.evidence]
    for r in load_contrastive():
        out["contrastive"] += [r["response"], r["evidence"]]
    for name in SOURCES:
        for p in getattr(pairs, f"load_{name}")(limit=3000):
            out[name] += [p.claim, p.evidence]
    return out


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    total = flagged = 0
    for name, group in texts().items():
        found = [t for t in group if detect_language(t) not in ("", "en")]
        total, flagged = total + len(group), flagged + len(found)
        print(f"{name}: {len(found)} of {len(group)} texts not English: "
              f"{dict(collections.Counter(detect_language(t) for t in group))}")
        for text in found[:3]:
            print(f"    {text[:100]!r}")
    print(f"all: {flagged} of {total} texts ({flagged / total:.1%})")
    for name, (samples, _) in sets(summeval_limit=320).items():
        items = sum(any(detect_language(t) not in ("", "en") for t in (s.response, *s.retrieved_contexts))
                    for s in samples)
        print(f"agreement set {name}: {items} of {len(samples)} items with a text not English")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
