"""What should the verifier check a response by: its sentences, each sentence with the one before, or the whole?

    .venv/bin/python experiments/verifier_claim_units.py                  # ~4 min on 2 cores
    .venv/bin/python experiments/verifier_claim_units.py --summeval-limit 80

With no LM to extract claims, ``FaithfulnessWithVerifier`` and the calibration signals ``verifier_weakest`` /
``verifier_mean`` check the response's sentences one by one (``sentence_claims``), as SummaC and MiniCheck
do. A sentence read alone can lose what it refers to ("It opened in 1990." after "The bridge was built by
X."), which FActScore and the work on decontextualised claims take a step to put back. No LM here can
rewrite claims, so this script measures ways to keep the context without one, and one (clauses) to cut
finer:

  sentences    each sentence alone (the shipped way)
  in-context   the first sentence alone, every later one with the sentence before it prepended
  response     the whole response as one claim (the verifier cuts a pair at 256 tokens, longest side first;
               its evidence windows are ~128 tokens, and of the first 320 SummEval summaries the longest
               is 129 tokens, the 95th percentile 92; BEGIN WoW's and Q2's responses are at most 44)
  clauses      each sentence cut further at a comma, semicolon or colon and before "and", "but", "while",
               "although", "whereas", "because", "which" and "who", a piece under 4 words joined to the
               one before it (added after the first run had shown longer claims losing on SummEval, under
               the same rule; the first run's numbers are in docs/verifier-experiments.md)

Sets and halves are the agreement table's (``verifier_agreement.sets`` / ``halves``, seed 0): BEGIN WoW, Q2,
the first ``--summeval-limit`` SummEval summaries, and the hand-written contrastive set (all of it; 110 of its
112 responses are one sentence, so the first three ways nearly coincide there; clauses cut them). Each
item's score is the weakest claim's probability (the targets table's row) and the mean over its claims (the
metric's default score); for ``response`` both are its one probability. The shipped verifier with its
defaults (``Verifier()``).

The rule, written before this script first ran: the reference is ``sentences``. A candidate replaces it
(as ``sentence_claims``' way, so in the metric and in both calibration signals) only if, for the weakest
claim and for the mean alike, the mean over the three train halves (BEGIN WoW, Q2, SummEval) of its ROC-AUC
is at least 0.010 above the reference's and no one of the three train halves is more than 0.005 under the
reference's. If more than one passes, the one with the larger rise of the weakest claim's mean is taken. Test halves
and the contrastive set are reported, never used to choose. If neither passes, nothing in the library
changes.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import halves, sets  # noqa: E402

from calibration.verifier.training import roc_auc  # noqa: E402
from judges.data.language import split_sentences  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402

WAYS = ("sentences", "in-context", "response", "clauses")
CLAUSE_BREAK = re.compile(r"(?<=[,;:])\s+|\s+(?=(?:and|but|while|although|whereas|because|which|who)\s)", re.I)
MIN_CLAUSE_WORDS = 4
RULED = ("begin-wow", "q2", "summeval")
RISE, TOLERANCE = 0.010, 0.005


def claim_units(response: str, way: str) -> list[str]:
    """The claims one response is checked by, the named way."""
    sentences = split_sentences(response) or [response.strip()]
    if way == "sentences":
        return sentences
    if way == "in-context":
        return sentences[:1] + [f"{before} {sentence}" for before, sentence in zip(sentences, sentences[1:])]
    if way == "response":
        return [response.strip()]
    if way == "clauses":
        return [clause for sentence in sentences for clause in clauses(sentence)]
    raise ValueError(f"claim_units: way={way!r} is not one of {list(WAYS)}")


def clauses(sentence: str) -> list[str]:
    """One sentence cut at ``CLAUSE_BREAK``, a piece under ``MIN_CLAUSE_WORDS`` words joined to the one before
    (the first piece to the one after)."""
    pieces: list[str] = []
    for piece in (p.strip() for p in CLAUSE_BREAK.split(sentence)):
        if not piece:
            continue
        if pieces and (len(piece.split()) < MIN_CLAUSE_WORDS or len(pieces[-1].split()) < MIN_CLAUSE_WORDS):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    return pieces or [sentence]


def scores(verifier: Verifier, samples, way: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Per item the weakest claim's probability and the mean over its claims; seconds for the whole set."""
    weakest, mean = [], []
    started = time.perf_counter()
    for sample in samples:
        p = [r["probability"] for r in verifier.support(sample.retrieved_contexts, claim_units(sample.response, way))]
        weakest.append(min(p))
        mean.append(float(np.mean(p)))
    return np.asarray(weakest), np.asarray(mean), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--summeval-limit", type=int, default=320)
    args = parser.parse_args()
    data = sets(summeval_limit=args.summeval_limit)
    verifier = Verifier()
    columns = [f"{name} {half}" for name, (_, labels) in data.items() for half in halves(name, labels)]
    results: dict[tuple[str, str], dict[str, float]] = {}
    print(f"{'way':>11} {'score':>8} " + " ".join(f"{c:>16}" for c in columns) + f" {'seconds':>8}")
    for way in WAYS:
        by_score: dict[str, dict[str, float]] = {"weakest": {}, "mean": {}}
        seconds = 0.0
        for name, (samples, labels) in data.items():
            weakest, mean, spent = scores(verifier, samples, way)
            seconds += spent
            y = np.asarray(labels)
            for half, indices in halves(name, labels).items():
                by_score["weakest"][f"{name} {half}"] = roc_auc(y[indices], weakest[indices])
                by_score["mean"][f"{name} {half}"] = roc_auc(y[indices], mean[indices])
        for score, row in by_score.items():
            results[(way, score)] = row
            print(f"{way:>11} {score:>8} " + " ".join(f"{row[c]:>16.4f}" for c in columns) + f" {seconds:>8.1f}",
                  flush=True)
    passed = {}
    for way in WAYS[1:]:
        rises = {}
        for score in ("weakest", "mean"):
            deltas = [results[(way, score)][f"{n} train"] - results[("sentences", score)][f"{n} train"] for n in RULED]
            rises[score] = float(np.mean(deltas))
            print(f"{way} {score}: train-half changes " + ", ".join(f"{n} {d:+.4f}" for n, d in zip(RULED, deltas))
                  + f"; mean {rises[score]:+.4f}")
            if rises[score] < RISE or min(deltas) < -TOLERANCE:
                break
        else:
            passed[way] = rises["weakest"]
    chosen = max(passed, key=passed.get) if passed else None
    print("-> " + ("sentences stay" if chosen is None else f"{chosen} replaces sentences"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
