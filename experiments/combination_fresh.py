"""Round 5 of the shipped combination: chosen on the sets earlier rounds read, decided on sets none read.

    .venv/bin/python experiments/combination_fresh.py signals            # every set's signals, cached (~25 min)
    .venv/bin/python experiments/combination_fresh.py choose             # leave one family out, read sets only
    .venv/bin/python experiments/combination_fresh.py decide --candidate C
    .venv/bin/python experiments/combination_fresh.py gate --out runs/combination_round6   # round 6: F against E
    .venv/bin/python experiments/combination_fresh.py report --out runs/combination_round6 # the shipped one, by set

``signals`` computes each reply's inputs once (the verifier's own signals with talk decided by the rules and by
the learned classifier, and the cheap signals) into ``--out``/signals. ``choose`` fits each candidate
(``CANDIDATES``) on all read natural sets but one and measures the one left out, with the seven contrastive
sets as a guard; nothing unread is touched. ``decide`` fits the named candidate on every read set and applies
the rule in docs/verifier-log.md ("A shipped combination, round 5") to the unread sets. ``gate`` applies round
6's rule (F, gated by the weakest checkable claim, against E) to two sets written after round 5; with
``--write`` it writes the winner to the shipped file. ``report`` prints the shipped candidate by set: never
fitted on, a read set's test half left out of the fit, and a whole read set left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.data.labelled import without_shipped_training  # noqa: E402
from calibration.data.loaders import load_begin, load_summeval  # noqa: E402
from calibration.fitting.signals import feature_matrix  # noqa: E402
from calibration.verifier.contrastive import (  # noqa: E402
    CONTRASTIVE_SETS,
    DIALOGUE_SETS,
    SUMMARY_SETS,
    load_contrastive,
    load_dialogue,
    load_summaries,
)
from calibration.verifier.training import roc_auc  # noqa: E402
from judges import FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402
from shipped_combination import CHEAP, made_pairs  # noqa: E402
from verifier_agreement import halves, sets  # noqa: E402

OWN = ("verifier_mean", "verifier_weakest")
TALK = ("checkable_mean", "set_aside_share", "nothing_checkable")
#: learned_checkable_weakest was added for round 6, after round 5's signals were cached: it comes last.
COLUMNS = (*OWN, *TALK, *(f"learned_{t}" for t in TALK), *CHEAP, "learned_checkable_weakest")
#: The natural sets earlier rounds read: fitted on, and each left out once by ``choose``.
READ = ("begin-wow", "q2", "summeval", "dialogue-fresh")
#: Sets no round has scored with a combination: ``decide`` decides on the first two, reports the third.
UNREAD = ("dialogue-fourth", "summaries-fresh", "dialogue-third")
GUARDS = ("begin-cmu-tc", *(f"contrastive-{w}" for w in CONTRASTIVE_SETS))
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


def fit(candidate: str, parts: list[tuple[np.ndarray, np.ndarray]]):
    inputs, gated = CANDIDATES[candidate]
    at = [COLUMNS.index(i) for i in inputs]
    x = np.vstack([p[0][:, at] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    weights = np.concatenate([np.full(len(p[1]), len(y) / (len(p[1]) * len(parts))) for p in parts])
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(C=1.0, max_iter=2000).fit(scaler.transform(x), y, sample_weight=weights)
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


def choose(found: dict) -> None:
    print("| candidate | " + " | ".join(f"{s} (left out)" for s in READ) + " | mean over bar | seven contrastive, "
          "fit on all read |\n|---|" + "---:|" * (len(READ) + 2))
    verifier_guard = np.mean([roc_auc(found[g][1], found[g][0][:, 0]) for g in GUARDS[1:]])
    kept = {}
    for candidate in CANDIDATES:
        cells, over = [], []
        for left in READ:
            score, _ = fit(candidate, [found[s] for s in READ if s != left] + [found["made"]])
            value = roc_auc(found[left][1], score(found[left][0]))
            best, which = bar(*found[left])
            cells.append(f"{value:.4f} ({value - best:+.4f} vs {which})")
            over.append(value - best)
        score, _ = fit(candidate, [found[s] for s in READ] + [found["made"]])
        guard = np.mean([roc_auc(found[g][1], score(found[g][0])) for g in GUARDS[1:]])
        print(f"| {candidate} | " + " | ".join(cells) + f" | {np.mean(over):+.4f} | {guard:.4f} "
              f"({guard - verifier_guard:+.4f}) |")
        if guard >= verifier_guard - 0.02:
            kept[candidate] = float(np.mean(over))
    best = max(kept.values())
    near = [c for c in kept if kept[c] >= best - 0.002]
    chosen = min(near, key=lambda c: (len(CANDIDATES[c][0]), -kept[c]))
    print(f"\nchosen: {chosen} (the contrastive guard keeps {', '.join(kept)}; within 0.002 of the best: "
          f"{', '.join(near)}; fewest inputs among them)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("signals", "choose", "decide", "gate", "report", "news"))
    parser.add_argument("--talk-weights", help="score with this talk classifier instead of the shipped one")
    parser.add_argument("--candidate", choices=sorted(CANDIDATES))
    parser.add_argument("--sets", nargs="*", help="with signals: only these sets")
    parser.add_argument("--out", default="runs/combination_fresh")
    parser.add_argument("--write", help="with decide: write the fitted combination here (the shipped file is "
                        "judges/lm/weights/faithfulness-combination.json)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.talk_weights:  # every judge built here asks judges.lm.talk for its classifier
        import judges.lm.talk as talk

        chosen = talk.TalkClassifier(args.talk_weights)
        talk.shipped_talk_classifier = lambda: chosen
    if args.step == "news":
        return round_seven(out, args.talk_weights)
    if args.step == "signals":
        names = args.sets or [*READ, "made", *GUARDS, *UNREAD]
        cached_signals(out, load_sets(names), names)
        return 0
    if args.step == "report":
        names = [*READ, "made", *GUARDS, *UNREAD, *ROUND_SIX]
        return report(cached_signals(out, load_sets(names), names), args.candidate or "F")
    if args.step == "gate":
        names = [*READ, "made", *GUARDS, "dialogue-third", "dialogue-fourth", *ROUND_SIX]
        return round_six(cached_signals(out, load_sets(names), names), out, args.write)
    names = [*READ, "made", *GUARDS]
    found = cached_signals(out, load_sets(names), names)
    if args.step == "choose":
        choose(found)
        return 0
    if not args.candidate:
        raise SystemExit("decide needs --candidate (the one choose printed as chosen)")
    found |= cached_signals(out, load_sets(UNREAD), UNREAD)
    score, coefficients = fit(args.candidate, [found[s] for s in READ] + [found["made"]])
    print(f"candidate {args.candidate}, fitted on {', '.join(READ)} and the made pairs; standardised coefficients: "
          + ", ".join(f"{k} {v:+.3f}" for k, v in coefficients.items()))
    table = {name: {c: roc_auc(found[name][1], found[name][0][:, COLUMNS.index(c)]) for c in ("verifier_mean", *CHEAP)}
             | {"combined": roc_auc(found[name][1], score(found[name][0]))} for name in (*UNREAD, *GUARDS)}
    print("\n| signal | " + " | ".join(table) + " |\n|---|" + "---:|" * len(table))
    for signal in ("verifier_mean", *CHEAP, "combined"):
        print(f"| {signal} | " + " | ".join(f"{table[n][signal]:.4f}" for n in table) + " |")
    blocked, target = round_five(table)
    print(f"\nrule: candidate {args.candidate} {'becomes' if not blocked else 'does not become'} the shipped score"
          + ("" if not blocked else "; blocked by: " + "; ".join(blocked)))
    print("target (at or above every cheap signal, within 0.005, on each unread set): "
          + ("met" if not target else "not met: " + "; ".join(target)))
    if args.write:
        Path(args.write).write_text(json.dumps(score.shipped | {
            "candidate": args.candidate, "fitted_on": [*READ, "made contrast pairs"],
            "decided_on": list(UNREAD[:2]), "rule": 'docs/verifier-log.md, "A shipped combination, round 5"'},
            indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")
    (out / "decision.json").write_text(json.dumps({"candidate": args.candidate, "coefficients": coefficients,
                                                   "roc_auc": table, "blocked": blocked, "target_missed": target},
                                                  indent=1), encoding="utf-8")
    return 0


def report(found: dict, candidate: str) -> int:
    """The shipped candidate against the verifier mean and the best cheap signal: on every set never fitted on;
    on each read set's test half with that half left out of the fit; and with the whole set left out."""

    def row(name: str, score, at=None) -> str:
        x, y = found[name]
        at = np.arange(len(y)) if at is None else at
        cheap = {c: roc_auc(y[at], x[at, COLUMNS.index(c)]) for c in CHEAP}
        best = max(cheap, key=lambda c: cheap[c])
        return (f"| {name} | {roc_auc(y[at], score(x[at])):.4f} | {roc_auc(y[at], x[at, 0]):.4f} | "
                f"{best} {cheap[best]:.4f} |")

    print(f"| never fitted on | {candidate} | verifier mean | best cheap signal |\n|---|---:|---:|---|")
    shipped, _ = fit(candidate, [found[s] for s in READ] + [found["made"]])
    for name in (*UNREAD, *ROUND_SIX, "begin-cmu-tc"):
        print(row(name, shipped))
    print(f"\n| test half left out of the fit | {candidate} | verifier mean | best cheap signal |\n|---|---:|---:|---|")
    for name in READ:
        y = found[name][1]
        parts = halves(name if name != "dialogue-fresh" else "begin-wow", list(y))  # any name: a seeded split
        held = (found[name][0][parts["train"]], y[parts["train"]])
        score, _ = fit(candidate, [found[s] for s in READ if s != name] + [held, found["made"]])
        print(row(name, score, parts["test"]))
    print(f"\n| whole set left out of the fit | {candidate} | verifier mean | best cheap signal |\n|---|---:|---:|---|")
    for name in READ:
        score, _ = fit(candidate, [found[s] for s in READ if s != name] + [found["made"]])
        print(row(name, score))
    return 0


def round_seven(out: Path, talk_weights: str | None) -> int:
    """Round 7 (docs/verifier-log.md, "Talk classifier round 2"): G, the classifier refitted with news
    sentences and F's combination refitted on its inputs (signals in ``out``), against F (the shipped classifier's
    signals in runs/combination_round6)."""
    if not talk_weights:
        raise SystemExit("news needs --talk-weights (the refitted classifier)")
    import judges.lm.talk as talk

    names = [*READ, "made", *GUARDS, *ROUND_SEVEN]
    data = load_sets(names)
    new = cached_signals(out, data, names)
    shipped = talk.TalkClassifier()
    talk.shipped_talk_classifier = lambda: shipped  # F's inputs: the shipped classifier's
    old = cached_signals(Path("runs/combination_round6"), data, names)
    scores = {}
    for label, found in (("F", old), ("G", new)):
        score, _ = fit("F", [found[s] for s in READ] + [found["made"]])
        scores[label] = {n: roc_auc(found[n][1], score(found[n][0])) for n in (*ROUND_SEVEN, *GUARDS)}
        y = found["summeval"][1]
        parts = halves("summeval", list(y))
        held, _ = fit("F", [found[s] for s in READ if s != "summeval"]
                      + [(found["summeval"][0][parts["train"]], y[parts["train"]]), found["made"]])
        scores[label]["summeval test half"] = roc_auc(y[parts["test"]], held(found["summeval"][0][parts["test"]]))
    mean = {n: roc_auc(old[n][1], old[n][0][:, 0]) for n in (*ROUND_SEVEN, *GUARDS)}
    cheap = {n: max(roc_auc(old[n][1], old[n][0][:, COLUMNS.index(c)]) for c in CHEAP) for n in ROUND_SEVEN}
    from calibration.verifier.talk_units import load_units

    test = load_units("test")
    truth = np.array([r["checkable"] for r in test], dtype=bool)
    accuracy = {label: float(np.mean(classifier.checkable([r["sentence"] for r in test]) == truth))
                for label, classifier in (("F", talk.TalkClassifier()), ("G", talk.TalkClassifier(talk_weights)))}
    shown = (*ROUND_SEVEN, "summeval test half", *GUARDS)
    print("| | " + " | ".join(shown) + " | units_test accuracy |\n|---|" + "---:|" * (len(shown) + 1))
    print("| verifier mean | " + " | ".join(f"{mean[n]:.4f}" if n in mean else "" for n in shown) + " | |")
    print("| best cheap signal | " + " | ".join(f"{cheap[n]:.4f}" if n in cheap else "" for n in shown) + " | |")
    for label in ("F", "G"):
        print(f"| {label} | " + " | ".join(f"{scores[label][n]:.4f}" for n in shown) + f" | {accuracy[label]:.4f} |")
    blocked = [f"{n}: G {scores['G'][n]:.4f} under F {scores['F'][n]:.4f} - 0.005 or the verifier mean "
               f"{mean[n]:.4f} + 0.005" for n in ROUND_SEVEN
               if scores["G"][n] < scores["F"][n] - 0.005 or scores["G"][n] < mean[n] + 0.005]
    if scores["G"]["summeval test half"] < scores["F"]["summeval test half"] + 0.01:
        blocked.append("SummEval's test half: G not 0.01 above F")
    if accuracy["G"] < accuracy["F"] - 0.01 - 1e-9:  # 4 of 400 fewer is 0.01 exactly, not under the rule's floor
        blocked.append(f"units_test accuracy {accuracy['G']:.4f}, more than 0.01 under {accuracy['F']:.4f}")
    sevens = [g for g in GUARDS if g.startswith("contrastive")]
    for label, group in (("seven contrastive sets", sevens), ("contrastive-first", ["contrastive-first"]),
                         ("begin-cmu-tc", ["begin-cmu-tc"])):
        fall = float(np.mean([mean[n] - scores["G"][n] for n in group]))
        if fall > 0.02:
            blocked.append(f"{label}: G {fall:.4f} under the verifier mean")
    print(f"\nrule: G {'replaces' if not blocked else 'does not replace'} F"
          + ("" if not blocked else "; blocked by: " + "; ".join(blocked)))
    (out / "round_seven.json").write_text(json.dumps({"roc_auc": scores, "verifier_mean": mean, "accuracy": accuracy,
                                                     "blocked": blocked}, indent=1), encoding="utf-8")
    return 0


def round_six(found: dict, out: Path, write: str | None) -> int:
    """Round 6 (docs/verifier-log.md, "A shipped combination, round 6"): F against E on two unread sets."""
    fitted = {c: fit(c, [found[s] for s in READ] + [found["made"]]) for c in ("E", "F")}
    shown = (*ROUND_SIX, *GUARDS)
    table = {n: {c: roc_auc(found[n][1], found[n][0][:, COLUMNS.index(c)]) for c in ("verifier_mean", *CHEAP)}
             | {c: roc_auc(found[n][1], fitted[c][0](found[n][0])) for c in fitted} for n in shown}
    print("| signal | " + " | ".join(shown) + " |\n|---|" + "---:|" * len(shown))
    for signal in ("verifier_mean", *CHEAP, "E", "F"):
        print(f"| {signal} | " + " | ".join(f"{table[n][signal]:.4f}" for n in shown) + " |")
    for name in ROUND_SIX:
        y = found[name][1]
        print(f"Brier, {name}: " + ", ".join(f"{c} {np.mean((fitted[c][0](found[name][0]) - y) ** 2):.4f}"
                                              for c in fitted))
    talking = {c: [] for c in fitted}
    print("\n| dialogue set | kind | n | E | F |\n|---|---|---:|---:|---:|")
    for which in ("third", "fourth", "fifth"):
        kinds = np.array([r["kind"] for r in load_dialogue(which)])
        scores = {c: fitted[c][0](found[f"dialogue-{which}"][0]) for c in fitted}
        for kind in sorted(set(kinds)):
            at = kinds == kind
            print(f"| {which} | {kind} | {at.sum()} | {scores['E'][at].mean():.3f} | {scores['F'][at].mean():.3f} |")
            if kind in TALKING:
                for c in fitted:
                    talking[c] += scores[c][at].tolist()
    lift = float(np.mean(talking["F"]) - np.mean(talking["E"]))
    print(f"\nfaithful replies with talk ({len(talking['E'])}): E {np.mean(talking['E']):.3f}, F {np.mean(talking['F']):.3f}")
    blocked = [f"{n}: F {table[n]['F']:.4f} under E {table[n]['E']:.4f} by more than 0.005" for n in ROUND_SIX
               if table[n]["F"] < table[n]["E"] - 0.005]
    if np.mean([table[n]["F"] for n in ROUND_SIX]) < np.mean([table[n]["E"] for n in ROUND_SIX]):
        blocked.append("F's mean over the unread sets is under E's")
    sevens = [g for g in GUARDS if g.startswith("contrastive")]
    for label, names in (("seven contrastive sets", sevens), ("contrastive-first", ["contrastive-first"]),
                         ("begin-cmu-tc", ["begin-cmu-tc"])):
        fall = float(np.mean([table[n]["verifier_mean"] - table[n]["F"] for n in names]))
        if fall > 0.02:
            blocked.append(f"{label}: F {fall:.4f} under the verifier mean")
    if lift < 0.05:
        blocked.append(f"faithful replies with talk: F {lift:+.3f} over E, not +0.05")
    shipped = "E" if blocked else "F"
    print(f"\nrule: F {'replaces' if not blocked else 'does not replace'} E" + (
        "" if not blocked else "; blocked by: " + "; ".join(blocked)))
    reverts = [n for n in ROUND_SIX if table[n][shipped] < table[n]["verifier_mean"] - 0.005]
    print(f"safeguard: the shipped combination ({shipped}) " + (
        f"is more than 0.005 under the verifier mean on {', '.join(reverts)}: the default goes back to the mean"
        if reverts else "is not under the verifier mean on either unread set: it stays the default"))
    print("target (every cheap signal, within 0.005): " + "; ".join(
        f"{n}: " + (", ".join(f"under {c} by {table[n][c] - table[n][shipped]:.4f}" for c in CHEAP
                              if table[n][shipped] < table[n][c] - 0.005) or "met") for n in ROUND_SIX))
    if write:
        Path(write).write_text(json.dumps(fitted[shipped][0].shipped | {
            "candidate": shipped, "fitted_on": [*READ, "made contrast pairs"],
            "decided_on": list(ROUND_SIX), "rule": 'docs/verifier-log.md, "A shipped combination, round 6"'},
            indent=1) + "\n", encoding="utf-8")
        print(f"wrote {write}")
    (out / "round_six.json").write_text(json.dumps({"roc_auc": table, "blocked": blocked, "reverts": reverts},
                                                   indent=1), encoding="utf-8")
    return 0


def round_five(table: dict) -> tuple[list[str], list[str]]:
    """The rule in docs/verifier-log.md ("A shipped combination, round 5"): (blocking reasons, target misses)."""
    blocked, target = [], []
    for name in UNREAD[:2]:
        row = table[name]
        if row["combined"] < row["verifier_mean"] + 0.005:
            blocked.append(f"{name}: {row['combined']:.4f}, not 0.005 above the verifier mean {row['verifier_mean']:.4f}")
        target += [f"{name}: under {c} by {row[c] - row['combined']:.4f}" for c in CHEAP
                   if row["combined"] < row[c] - 0.005]
    sevens = [g for g in GUARDS if g.startswith("contrastive")]
    for label, names in (("the seven contrastive sets' mean", sevens), ("contrastive-first", ["contrastive-first"]),
                         ("begin-cmu-tc", ["begin-cmu-tc"])):
        fall = float(np.mean([table[n]["verifier_mean"] - table[n]["combined"] for n in names]))
        if fall > 0.02:
            blocked.append(f"{label}: {fall:.4f} under the verifier mean")
    return blocked, target


if __name__ == "__main__":
    raise SystemExit(main())
