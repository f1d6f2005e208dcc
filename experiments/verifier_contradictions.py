"""Can unrelated sentences in the evidence raise a contradicted claim's score? The verifier with and without
its check against contradictions (``Verifier(check_contradictions=...)``), on a distractor set and the
agreement table's sets.

    .venv/bin/python experiments/verifier_contradictions.py                    # ~6 min on 2 cores
    .venv/bin/python experiments/verifier_contradictions.py --summeval-limit 320

Why: the verifier scores each claim against its best evidence unit, so a sentence about something else that
it happens to score higher than the sentence contradicting the claim decides the claim's score. "Mount
Everest is 8,856 metres tall." scored 0.068 against "Mount Everest is 8,849 metres tall." and 0.251 once
"Everest lies on the border of Nepal and China." was added to the evidence, and the feedback named that
sentence as the evidence (issue 57).

The distractor set (``calibration/data/distractors.jsonl``, DISTRACTORS.md: 48 items, written by a helper told
nothing of the method) has per item one evidence sentence, a claim it contradicts (8 each: number, date,
name, direction, negation, relation), a claim it supports, and three same-topic sentences that do neither.
Each claim is scored (``FaithfulnessWithVerifier``'s default, the mean over the claim's sentences) against
the evidence alone, against one passage "distractor 1, evidence, distractors 2 and 3", and against the four
sentences as four contexts. Printed per way: the mean score of the contradicted and the supported claims in
each arrangement, how many contradicted claims scored higher with the distractors than without (by kind),
and the ROC-AUC of supported against contradicted claims.

The agreement table's sets (``verifier_agreement.sets`` / ``halves``, seed 0; BEGIN WoW, Q2, SummEval, each
split into halves) and the seven hand-written contrastive sets, whole: ROC-AUC of the metric's score with
each way, and how many items' scores moved.

The rule, written before this script first ran: ``check_contradictions=True`` becomes the default if (1) with
it, no contradicted claim of the distractor set scores higher with distractors than without, in either
arrangement (the property the issue asks for), and (2) no train half (BEGIN WoW, Q2, SummEval) is more than
0.005 ROC-AUC under the verifier without it. Test halves, the contrastive sets and the supported claims are
reported, never used to choose. Its outcome is in docs/verifier.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import halves, sets  # noqa: E402

from calibration.data.contrastive import CONTRASTIVE_SETS, load_contrastive  # noqa: E402
from calibration.fitting.verifier_training import roc_auc  # noqa: E402
from judges import SingleTurnSample  # noqa: E402
from judges.data.language import detect_language  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402
from judges.metrics.rag.verified import sentence_claims  # noqa: E402

WAYS = {"without": False, "with": True}
RULED = ("begin-wow", "q2", "summeval")
TOLERANCE = 0.005
KINDS = ("number", "date", "name", "direction", "negation", "relation")


def load_distractors() -> list[dict]:
    """The distractor test set (DISTRACTORS.md): id, evidence, contradicted, kind, supported, distractors."""
    text = (resources.files("calibration.data") / "distractors.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def metric_score(verifier: Verifier, response: str, contexts: list[str]) -> float:
    """``FaithfulnessWithVerifier()``'s score with this verifier: the mean claim probability over the
    response's sentences (0.0 for text in another language, as the metric gives)."""
    if {detect_language(text) for text in [response, *contexts]} - {"", "en"}:
        return 0.0
    rows = verifier.support(contexts, sentence_claims(response), cutoff=0.5)
    return float(np.mean([row["probability"] for row in rows]))


def arrangements(item: dict) -> dict[str, list[str]]:
    first, *rest = item["distractors"]
    return {"alone": [item["evidence"]],
            "passage": [" ".join([first, item["evidence"], *rest])],
            "contexts": [item["evidence"], *item["distractors"]]}


def distractor_table(verifiers: dict[str, Verifier], items: list[dict]) -> dict[str, dict]:
    out = {}
    for way, verifier in verifiers.items():
        scores = {side: {name: np.array([metric_score(verifier, item[side], contexts)
                                         for item in items for contexts in [arrangements(item)[name]]])
                         for name in ("alone", "passage", "contexts")}
                  for side in ("contradicted", "supported")}
        risen = {name: [item for item, before, after in zip(items, scores["contradicted"]["alone"],
                                                            scores["contradicted"][name]) if after > before + 1e-9]
                 for name in ("passage", "contexts")}
        out[way] = {"scores": scores, "risen": risen}
        print(f"\n{way} the check: mean score (contradicted / supported), and contradicted claims scored higher "
              f"with the distractors than without")
        for name in ("alone", "passage", "contexts"):
            c, s = scores["contradicted"][name], scores["supported"][name]
            auc = roc_auc([0] * len(c) + [1] * len(s), np.concatenate([c, s]))
            line = f"  {name:<9} {c.mean():.3f} / {s.mean():.3f}   ROC-AUC {auc:.3f}"
            if name in risen:
                kinds = {kind: sum(item["kind"] == kind for item in risen[name]) for kind in KINDS}
                line += f"   risen {len(risen[name])} of {len(items)} " + str({k: v for k, v in kinds.items() if v})
            print(line)
        by_kind = {kind: [i for i, item in enumerate(items) if item["kind"] == kind] for kind in KINDS}
        print("  contradicted, mean by kind (alone -> passage -> contexts): " + "; ".join(
            f"{kind} " + " -> ".join(f"{scores['contradicted'][n][rows].mean():.2f}" for n in ("alone", "passage", "contexts"))
            for kind, rows in by_kind.items()))
    return out


def agreement_tables(verifiers: dict[str, Verifier], data: dict[str, tuple[list, list[int]]]) -> dict[str, dict]:
    scores = {way: {} for way in verifiers}
    for name, (samples, labels) in data.items():
        for way, verifier in verifiers.items():
            started = time.perf_counter()
            scores[way][name] = np.array([metric_score(verifier, s.response, list(s.retrieved_contexts)) for s in samples])
            print(f"  scored {name} ({len(samples)}) {way} the check in {time.perf_counter() - started:.0f} s", flush=True)
    print(f"\nROC-AUC of the metric's score: {'set':<22} {'half':<6} {'without':>8} {'with':>8} {'change':>8}  moved")
    table = {}
    for name, (_, labels) in data.items():
        parts = halves(name if name in RULED else "contrastive", labels)
        for half, rows in parts.items():
            y = np.asarray(labels)[rows]
            before, after = (roc_auc(y, scores[way][name][rows]) for way in WAYS)
            moved = int(np.sum(np.abs(scores["with"][name][rows] - scores["without"][name][rows]) > 1e-9))
            table[(name, half)] = (before, after)
            print(f"  {name:<22} {half:<6} {before:>8.4f} {after:>8.4f} {after - before:>+8.4f}  {moved} of {len(rows)}")
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summeval-limit", type=int, default=None, help="the first N SummEval summaries (all)")
    args = parser.parse_args()
    verifiers = {way: Verifier(check_contradictions=flag) for way, flag in WAYS.items()}
    items = load_distractors()
    distractors = distractor_table(verifiers, items)
    data = sets(args.summeval_limit)
    data.pop("contrastive")
    for which in CONTRASTIVE_SETS:
        rows = load_contrastive(which)
        data[f"contrastive-{which}"] = (
            [SingleTurnSample(response=r["response"], retrieved_contexts=[r["evidence"]]) for r in rows],
            [int(r["label"]) for r in rows])
    table = agreement_tables(verifiers, data)
    risen = sum(len(v) for v in distractors["with"]["risen"].values())
    worst = min(table[(name, "train")][1] - table[(name, "train")][0] for name in RULED)
    passed = risen == 0 and worst >= -TOLERANCE
    print(f"\nThe rule: contradicted claims risen with distractors, with the check: {risen} (must be 0); the "
          f"largest fall of a train half: {worst:+.4f} (must be >= -{TOLERANCE}). "
          f"{'PASSED: the check is the default' if passed else 'NOT PASSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
