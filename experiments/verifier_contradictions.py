"""Can unrelated sentences in the evidence raise a contradicted claim's score? The verifier with and without
its check against contradictions (``Verifier(check_contradictions=...)``), on a distractor set and the
agreement table's sets.

    .venv/bin/python experiments/verifier_contradictions.py                    # ~13 min on 2 cores
    .venv/bin/python experiments/verifier_contradictions.py --summeval-limit 320

Why: the verifier scores each claim against its best evidence unit, so a sentence about something else that
it happens to score higher than the sentence contradicting the claim decides the claim's score. "Mount
Everest is 8,856 metres tall." scored 0.068 against "Mount Everest is 8,849 metres tall." and 0.251 once
"Everest lies on the border of Nepal and China." was added to the evidence, and the feedback named that
sentence as the evidence (issue 57).

Each distractor set (``calibration/verifier/sets/distractors.jsonl`` and ``distractors_second.jsonl``, DISTRACTORS.md:
48 items each, each written by a helper told nothing of the method) has per item one evidence sentence, a
claim it contradicts (8 each: number, date, name, direction, negation, relation), a claim it supports, and
three same-topic sentences that do neither.
Each claim is scored (``FaithfulnessWithVerifier``'s default, the mean over the claim's sentences) against
the evidence alone, against one passage "distractor 1, evidence, distractors 2 and 3", and against the four
sentences as four contexts. Printed per way: the mean score of the contradicted and the supported claims in
each arrangement, how many contradicted claims scored higher with the distractors than without (by kind),
and the ROC-AUC of supported against contradicted claims.

The agreement table's sets (``verifier_agreement.sets`` / ``halves``, seed 0; BEGIN WoW, Q2, SummEval, each
split into halves) and the seven hand-written contrastive sets, whole: ROC-AUC of the metric's score with
each way, and how many items' scores moved.

Round 1 (commit c0205ad; rule written before it ran: no contradicted claim of the first distractor set
rises with distractors, no train half more than 0.005 under the verifier without the check) did not pass:
with the check 24 contradicted claims still rose (12 in each arrangement; without it 25 in each: the check caught
numbers, names and most dates, not negations or relations), and SummEval's train half fell 0.0050 (56 of 800
items moved: a long article's sentences about alike events share frames). The contrastive sets rose
+0.007 to +0.032. Numbers in docs/verifier.md.

Round 2, written after round 1 and before it ran. Reference: the verifier without the check
(``check_contradictions=False``, what shipped before). Candidates:

  contradictions  round 1's check, except that a contradiction overrides the claim's best unit only where
                  that unit holds the contradicting sentence or supports the claim nowhere (P < 0.5)
  closest         contradictions, and a claim no unit supports (P < 0.5) read at the unit sharing most of its
                  words (``closest_when_unsupported``) instead of the highest-scoring one: a sentence that
                  supports nothing cannot lift it over the sentence that speaks of it

The first distractor set, read by round 1, cannot decide: a second (``distractors_second.jsonl``,
DISTRACTORS_SECOND.md) was written by another helper before round 2 ran, from the first's instructions
with other topics asked for and more varied negations and dates. A
candidate becomes the default if, on the second set: (1) in each arrangement, the contradicted claims that
score higher with distractors than without are at most half as many as the reference's; (2) in each
arrangement with distractors, its ROC-AUC of supported against contradicted claims is not under the
reference's; and (3) no train half (BEGIN WoW, Q2, SummEval) is more than 0.005 under the reference's. If
both pass, the one with fewer risen claims (both arrangements together); on a tie, contradictions. Test
halves, the first distractor set and the contrastive sets are reported, never used to choose.

Round 2's outcome (2026-12-01): closest passed and is the library's default (with contradictions under it).
On the second set the contradicted claims that rose with distractors went 29 -> 9 (passage) and 20 -> 3
(contexts), and ROC-AUC with distractors 0.731 -> 0.764 and 0.738 -> 0.759; the train halves held (BEGIN WoW
+0.0007, Q2 +0.0014, SummEval +0.0002). contradictions alone did not: 29 -> 16 in the passage, over half.
Reported: SummEval's test half 0.6897 -> 0.6849 (closest) and 0.6904 (contradictions); the contrastive sets
+0.011 to +0.047 with closest. The claims that still rise are negations, relations and directions the
contrasts do not name, in the arrangements where a distractor shares more words with the claim than the
sentence that contradicts it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import halves, sets  # noqa: E402

from calibration.verifier.contrastive import (  # noqa: E402
    CONTRASTIVE_SETS,
    DISTRACTOR_SETS,
    load_contrastive,
    load_distractors,
)
from calibration.verifier.training import roc_auc  # noqa: E402
from judges import SingleTurnSample  # noqa: E402
from judges.data.language import detect_language  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402
from judges.metrics.rag.verified import sentence_claims  # noqa: E402

#: Each way's Verifier settings; "reference" is what shipped before the check.
WAYS = {"reference": {"check_contradictions": False, "closest_when_unsupported": False},
        "contradictions": {"closest_when_unsupported": False}, "closest": {}}
CANDIDATES = ("contradictions", "closest")
RULED = ("begin-wow", "q2", "summeval")
TOLERANCE = 0.005

KINDS = ("number", "date", "name", "direction", "negation", "relation")


def metric_score(verifier: Verifier, response: str, contexts: list[str]) -> float:
    """``FaithfulnessWithVerifier()``'s score with this verifier: the mean claim probability over the
    response's sentences (0.0 for text in another language, as the metric gives)."""
    if {detect_language(text) for text in [response, *contexts]} - {"", "en"}:
        return 0.0
    rows = verifier.support(contexts, sentence_claims(response), cutoff=0.5)
    return float(np.mean([row["probability"] for row in rows]))


def arrangements(item: dict) -> dict[str, list[str]]:
    """The evidence alone, in one passage with the distractors around it, and as four contexts."""
    first, *rest = item["distractors"]
    return {"alone": [item["evidence"]],
            "passage": [" ".join([first, item["evidence"], *rest])],
            "contexts": [item["evidence"], *item["distractors"]]}


def distractor_table(verifiers: dict[str, Verifier], items: list[dict], title: str) -> dict[str, dict]:
    """Per way: each claim's score in each arrangement, the contradicted claims risen with distractors per
    arrangement, and the ROC-AUC of supported against contradicted claims per arrangement (printed)."""
    out = {}
    print(f"\n{title}: mean score (contradicted / supported), ROC-AUC, and the contradicted claims scored higher "
          "with the distractors than without")
    for way, verifier in verifiers.items():
        scores = {side: {name: np.array([metric_score(verifier, item[side], arrangements(item)[name])
                                         for item in items])
                         for name in ("alone", "passage", "contexts")}
                  for side in ("contradicted", "supported")}
        risen, aucs = {}, {}
        print(f"  {way}")
        for name in ("alone", "passage", "contexts"):
            c, s = scores["contradicted"][name], scores["supported"][name]
            aucs[name] = roc_auc([0] * len(c) + [1] * len(s), np.concatenate([c, s]))
            line = f"    {name:<9} {c.mean():.3f} / {s.mean():.3f}   ROC-AUC {aucs[name]:.3f}"
            if name != "alone":
                risen[name] = [item for item, before, after in zip(items, scores["contradicted"]["alone"], c)
                               if after > before + 1e-9]
                kinds = {kind: sum(item["kind"] == kind for item in risen[name]) for kind in KINDS}
                line += f"   risen {len(risen[name])} of {len(items)} " + str({k: v for k, v in kinds.items() if v})
            print(line)
        by_kind = {kind: [i for i, item in enumerate(items) if item["kind"] == kind] for kind in KINDS}
        print("    contradicted, mean by kind (alone -> passage -> contexts): " + "; ".join(
            f"{kind} " + " -> ".join(f"{scores['contradicted'][n][rows].mean():.2f}"
                                     for n in ("alone", "passage", "contexts"))
            for kind, rows in by_kind.items()))
        out[way] = {"scores": scores, "risen": risen, "auc": aucs}
    return out


def agreement_tables(verifiers: dict[str, Verifier], data: dict[str, tuple[list, list[int]]]) -> dict:
    """ROC-AUC of the metric's score per way, set and half (printed with the items each candidate moved)."""
    scores = {way: {} for way in verifiers}
    for name, (samples, labels) in data.items():
        for way, verifier in verifiers.items():
            started = time.perf_counter()
            scores[way][name] = np.array([metric_score(verifier, s.response, list(s.retrieved_contexts))
                                          for s in samples])
            print(f"  scored {name} ({len(samples)}) {way} in {time.perf_counter() - started:.0f} s", flush=True)
    print(f"\nROC-AUC of the metric's score: {'set':<22} {'half':<6} " + " ".join(f"{w:>14}" for w in verifiers)
          + "  (items moved)")
    table = {}
    for name, (_, labels) in data.items():
        for half, rows in halves(name if name in RULED else "contrastive", labels).items():
            y = np.asarray(labels)[rows]
            table[(name, half)] = {way: roc_auc(y, scores[way][name][rows]) for way in verifiers}
            moved = [int(np.sum(np.abs(scores[way][name][rows] - scores["reference"][name][rows]) > 1e-9))
                     for way in CANDIDATES]
            print(f"  {name:<22} {half:<6} " + " ".join(f"{table[(name, half)][w]:>14.4f}" for w in verifiers)
                  + f"  ({', '.join(f'{w} {m} of {len(rows)}' for w, m in zip(CANDIDATES, moved))})")
    return table


def verdict(second: dict[str, dict], table: dict) -> str | None:
    """Round 2's rule (the module docstring): the candidate that becomes the default, or None."""
    passing = {}
    for way in CANDIDATES:
        reference, mine = second["reference"], second[way]
        fewer = all(2 * len(mine["risen"][a]) <= len(reference["risen"][a]) for a in ("passage", "contexts"))
        ranks = all(mine["auc"][a] >= reference["auc"][a] for a in ("passage", "contexts"))
        worst = min(table[(name, "train")][way] - table[(name, "train")]["reference"] for name in RULED)
        print(f"  {way}: risen at most half the reference's {fewer}; ROC-AUC not under it {ranks}; "
              f"largest fall of a train half {worst:+.4f} (>= -{TOLERANCE}: {worst >= -TOLERANCE})")
        if fewer and ranks and worst >= -TOLERANCE:
            passing[way] = sum(len(mine["risen"][a]) for a in ("passage", "contexts"))
    return min(passing, key=lambda way: (passing[way], CANDIDATES.index(way))) if passing else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summeval-limit", type=int, default=None, help="the first N SummEval summaries (all)")
    args = parser.parse_args()
    verifiers = {way: Verifier(**settings) for way, settings in WAYS.items()}
    distractors = {which: distractor_table(verifiers, load_distractors(which), f"The {which} distractor set")
                   for which in DISTRACTOR_SETS}
    data = sets(args.summeval_limit)
    data.pop("contrastive")
    for which in CONTRASTIVE_SETS:
        rows = load_contrastive(which)
        data[f"contrastive-{which}"] = ([SingleTurnSample(response=r["response"], retrieved_contexts=[r["evidence"]])
                                         for r in rows], [int(r["label"]) for r in rows])
    table = agreement_tables(verifiers, data)
    print("\nRound 2's rule, on the second distractor set and the train halves:")
    chosen = verdict(distractors["second"], table)
    print(f"  -> {chosen or 'neither passed: the library keeps the reference'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
