"""The shared part of the combination rounds (experiments/combination_fresh.py): the sets, each reply's signals
cached on disk, the candidates and how one is fitted. Run alone, it fills the cache:

    .venv/bin/python experiments/combination_signals.py --out runs/combination_round6   # ~12 min on 2 cores

    signals(samples)         each reply's inputs (``COLUMNS``): the verifier's own signals with talk decided by the
                             rules and by the learned classifier, and the cheap signals
    fit(candidate, parts)    a candidate's scoring function, fitted on (x, y) parts each weighted equally

Owns: the candidates, the sets' names and the signal cache. Must not decide anything (the rounds do).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.data.labelled import without_shipped_training  # noqa: E402
from calibration.data.loaders import load_begin  # noqa: E402
from calibration.fitting.signals import feature_matrix  # noqa: E402
from calibration.verifier.contrastive import (  # noqa: E402
    CONTRASTIVE_SETS,
    DIALOGUE_SETS,
    FIRST_SEVEN_CONTRASTIVE,
    SUMMARY_SETS,
    load_contrastive,
    load_dialogue,
    load_summaries,
)
from calibration.verifier.training import roc_auc  # noqa: E402
from judges import FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402
from shipped_combination import CHEAP, made_pairs  # noqa: E402
from verifier_agreement import sets  # noqa: E402

OWN = ("verifier_mean", "verifier_weakest")
TALK = ("checkable_mean", "set_aside_share", "nothing_checkable")
#: learned_checkable_weakest was added for round 6, after round 5's signals were cached: it comes last.
COLUMNS = (*OWN, *TALK, *(f"learned_{t}" for t in TALK), *CHEAP, "learned_checkable_weakest")
#: The natural sets earlier rounds read: fitted on, and each left out once by ``choose``.
READ = ("begin-wow", "q2", "summeval", "dialogue-fresh")
#: Sets no round has scored with a combination: ``decide`` decides on the first two, reports the third.
UNREAD = ("dialogue-fourth", "summaries-fresh", "dialogue-third")
GUARDS = ("begin-cmu-tc", *(f"contrastive-{w}" for w in FIRST_SEVEN_CONTRASTIVE))
#: Candidate -> (inputs, gate): each a logistic regression over standardised inputs, L2 (C=1), every set
#: weighted equally; a gate multiplies its probability by min(1, verifier weakest / 0.5) (round 3's gate; a
#: column's name instead of True reads that column).
CANDIDATES = {
    "A": (("verifier_mean", "verifier_weakest", "checkable_mean", "set_aside_share", "nothing_checkable"), False),
    "B": (("verifier_mean", "verifier_weakest", "checkable_mean", "set_aside_share", "nothing_checkable",
           "specifics_supported"), False),
    "C": (("verifier_mean", "verifier_weakest", "checkable_mean", "set_aside_share", "nothing_checkable",
           "specifics_supported", "bigram_support"), True),
    "D": (("verifier_mean", "verifier_weakest", "learned_checkable_mean", "learned_set_aside_share",
           "learned_nothing_checkable", "specifics_supported"), False),
    "E": (("verifier_mean", "verifier_weakest", "learned_checkable_mean", "learned_set_aside_share",
           "learned_nothing_checkable", "specifics_supported", "bigram_support"), True),
}
#: Round 6: E's inputs and fit, gated by the weakest checkable claim (the learned classifier's) instead.
CANDIDATES["F"] = (CANDIDATES["E"][0], "learned_checkable_weakest")
#: Round 6's unread sets, and the dialogue sets whose faithful replies with talk it reads by kind.
ROUND_SIX = ("dialogue-fifth", "summaries-second")
TALKING = ("faithful_with_talk", "faithful_talk_only", "faithful_hedged")
#: Round 7's unread sets: chat, and summaries in a news corpus's tokenised lower case.
ROUND_SEVEN = ("dialogue-sixth", "summaries-third")


def dialogue(which: str) -> tuple[list, list[int]]:
    rows = load_dialogue(which)
    return ([SingleTurnSample(user_input=r["user_input"], response=r["reply"], retrieved_contexts=[r["knowledge"]])
             for r in rows], [int(r["label"]) for r in rows])


def pooled(load, names) -> tuple[list, list[int]]:
    """The sets ``load(name)`` gives for each of ``names``, one after another: (samples, labels)."""
    samples, labels = [], []
    for which in names:
        more, their = load(which)
        samples, labels = samples + more, labels + their
    return samples, labels


def summaries(which: str) -> tuple[list, list[int]]:
    rows = load_summaries(which)
    return ([SingleTurnSample(response=r["summary"], retrieved_contexts=[r["article"]]) for r in rows],
            [int(r["label"]) for r in rows])


def contrastive(which: str) -> tuple[list, list[int]]:
    rows = load_contrastive(which)
    return ([SingleTurnSample(response=r["response"], retrieved_contexts=[r["evidence"]]) for r in rows],
            [int(r["label"]) for r in rows])


def begin_rest() -> tuple[list, list[int]]:
    rest, _ = without_shipped_training(load_begin(parts=("cmu", "tc")))
    return list(rest.dataset), [int(y) for y in rest.labels]


def load_sets(names) -> dict[str, tuple[list, list[int]]]:
    """The named sets (``READ``, ``UNREAD``, ``GUARDS`` and "made"), each loaded only when asked for."""
    natural = {k: v for k, v in sets(None).items() if k != "contrastive"}  # the whole of SummEval
    loaders = {f"dialogue-{w}": (lambda w=w: dialogue(w)) for w in DIALOGUE_SETS} | {
        f"summaries-{w}": (lambda w=w: summaries(w)) for w in SUMMARY_SETS} | {"begin-cmu-tc": begin_rest} | {f"contrastive-{w}": (lambda w=w: contrastive(w)) for w in CONTRASTIVE_SETS}
    data = {name: natural[name] if name in natural else loaders[name]() for name in names if name != "made"}
    if "made" in names:  # a copy with one fact changed of each faithful reply of the read sets, label 0
        made = []
        for name in READ:
            samples, labels = data[name] if name in data else natural.get(name) or loaders[name]()
            made += made_pairs(samples, labels, range(len(samples)))
        data["made"] = (made, [0] * len(made))
    return data


def signals(samples) -> np.ndarray:
    judges = [FaithfulnessWithVerifier(),
              FaithfulnessWithVerifier(claims="checkable", unclaimed_score=1.0),
              FaithfulnessWithVerifier(claims="checkable-learned", unclaimed_score=1.0)]
    rows = []
    for sample in samples:
        a, *talk = [judge.score(sample) for judge in judges]
        row = [a.mean_probability, a.weakest]
        for b in talk:
            aside = len(b.get("set_aside") or [])
            row += [b.mean_probability, aside / max(aside + len(b.get("claims") or []), 1),
                    float(bool(b.get("nothing_checkable")))]
        rows.append(row + [talk[-1].weakest])
    rows = np.asarray(rows, float)
    return np.column_stack([rows[:, :-1], feature_matrix(CHEAP, samples), rows[:, -1:]])


def cached_signals(out: Path, data: dict, names) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    found = {}
    for name in names:
        path = out / "signals" / f"{name}.npz"
        samples, labels = data[name]
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, x=signals(samples), y=np.asarray(labels))
            print(f"{name}: {len(samples)} replies", flush=True)
        loaded = np.load(path)
        found[name] = (loaded["x"], loaded["y"])
    return found


def logistic(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[StandardScaler, LogisticRegression]:
    """Every combination's recipe: a logistic regression (L2, C=1) over standardised inputs, each (x, y) part
    weighted equally whatever its size."""
    x = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    weights = np.concatenate([np.full(len(p[1]), len(y) / (len(p[1]) * len(parts))) for p in parts])
    scaler = StandardScaler().fit(x)
    return scaler, LogisticRegression(C=1.0, max_iter=2000).fit(scaler.transform(x), y, sample_weight=weights)


def fit(candidate: str, parts: list[tuple[np.ndarray, np.ndarray]]):
    inputs, gated = CANDIDATES[candidate]
    at = [COLUMNS.index(i) for i in inputs]
    scaler, model = logistic([(p[0][:, at], p[1]) for p in parts])
    weakest = COLUMNS.index(gated if isinstance(gated, str) else "verifier_weakest")

    def score(xs: np.ndarray) -> np.ndarray:
        p = model.predict_proba(scaler.transform(xs[:, at]))[:, 1]
        return p * np.minimum(1.0, xs[:, weakest] / 0.5) if gated else p

    score.shipped = {"inputs": list(inputs), "mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist(),
                     "coef": model.coef_[0].tolist(), "intercept": float(model.intercept_[0]),
                     "gate": f"{COLUMNS[weakest]} / 0.5" if gated else None}
    return score, dict(zip(inputs, model.coef_[0].round(3).tolist()))


def bar(x: np.ndarray, y: np.ndarray) -> tuple[float, str]:
    """The best of the verifier mean and every cheap signal on a set: the bar a combination must clear."""
    named = {c: roc_auc(y, x[:, COLUMNS.index(c)]) for c in ("verifier_mean", *CHEAP)}
    best = max(named, key=lambda c: named[c])
    return named[best], best


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Compute and cache each set's signals for the combination rounds "
                                     "(experiments/combination_fresh.py reads the cache).")
    parser.add_argument("--out", default="runs/combination_fresh", help="the cache is OUT/signals/<set>.npz")
    parser.add_argument("--sets", nargs="*", help="only these sets (default: the read sets, made pairs, guards "
                        "and round 5's unread sets)")
    args = parser.parse_args(argv)
    names = args.sets or [*READ, "made", *GUARDS, *UNREAD]
    cached_signals(Path(args.out), load_sets(names), names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
