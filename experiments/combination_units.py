"""Round 8 of the shipped combination: do its word signals read the units the verifier read, or all the evidence?

    .venv/bin/python experiments/combination_units.py run       # every set scored by F and H, cached (~15 min)
    .venv/bin/python experiments/combination_units.py decide    # the rule in docs/verifier-log.md, round 8
    .venv/bin/python experiments/combination_units.py decide --write judges/lm/weights/faithfulness-combination.json
    .venv/bin/python experiments/combination_units.py passage   # the third distractor set in one passage, by input
    .venv/bin/python experiments/combination_units.py blend     # H mixed with the verifier mean, on the cache

F is the shipped combination: its two word signals (specifics supported, bigram support) read the whole evidence.
H is the same file and weights, its word signals read only the units the verifier scored each sentence against
(``words_read="units"``), so that a distractor sentence sharing a contradicted claim's words cannot lift it.
``run`` scores every natural set once with the shipped judge and derives H's inputs from the same verdicts; the
verifier mean and the cheap signals come along. It also scores the three distractor sets in their three
arrangements. ``decide`` applies the round's rule to the sets written for it and prints every set's numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.fitting.signals import feature_matrix  # noqa: E402
from calibration.verifier.contrastive import (  # noqa: E402
    FIRST_SEVEN_CONTRASTIVE,
    load_contrastive,
    load_dialogue,
    load_distractors,
)
from calibration.verifier.training import roc_auc  # noqa: E402
from combination_signals import CHEAP, load_sets  # noqa: E402
from judges import FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402
from judges.metrics.rag.verified import combined_probability, shipped_combination  # noqa: E402
from verifier_swaps import pairs_table  # noqa: E402

#: The natural sets written for this round (unread), and the ones every earlier round read.
UNREAD = ("dialogue-seventh", "summaries-fourth", "summaries-fifth")
READ = ("begin-wow", "q2", "summeval", "dialogue-fresh", "dialogue-third", "dialogue-fourth", "dialogue-fifth",
        "dialogue-sixth", "summaries-fresh", "summaries-second", "summaries-third", "begin-cmu-tc",
        *(f"contrastive-{w}" for w in FIRST_SEVEN_CONTRASTIVE))
ARRANGEMENTS = {
    "alone": lambda it: [it["evidence"]],
    "one passage": lambda it: [" ".join([it["distractors"][0], it["evidence"], *it["distractors"][1:]])],
    "four contexts": lambda it: [it["evidence"], *it["distractors"]]}
#: Each score's reading of the word signals (``combination_inputs`` keywords), all with the shipped file's weights.
READS = {"F": {"words_read": "evidence"}, "H": {"words_read": "units"}}
SCORES = (*READS, "verifier_mean")
#: The distractor sets of this round: two read before it, the third written for it (later ones stay unread here).
DISTRACTORS = ("first", "second", "third")


class Scorer:
    """The shipped judge's verdicts once per (response, contexts), and from them one score per entry of ``reads``
    (round 8's: F's, the word signals read from the whole evidence, and H's, read from the verifier's units), each
    with the shipped file's weights whatever it says to read, and the verifier mean."""

    def __init__(self, reads: dict[str, dict] = READS):
        self.judge = FaithfulnessWithVerifier()
        self.reads = reads
        self.names = (*reads, "verifier_mean")
        self.memo: dict[tuple, dict[str, float]] = {}

    def scores(self, sample) -> dict[str, float]:
        key = (sample.response, tuple(sample.retrieved_contexts))
        if key not in self.memo:
            result = self.judge.score(sample)
            if "combination" not in result:  # out of language or empty: the judge's own score for all three
                self.memo[key] = dict.fromkeys(self.names, float(result.score))
            else:
                checked = {k: result[k] for k in ("verdicts", "weakest", "mean_probability")}
                self.memo[key] = {"verifier_mean": float(result.mean_probability)} | {
                    name: combined_probability(self.judge.combination_inputs(
                        self.judge.model(), sample.response, list(sample.retrieved_contexts), checked,
                        **read)[0], shipped_combination()) for name, read in self.reads.items()}
        return self.memo[key]

    def as_judge(self, which: str):
        """A judge-like view scoring with one of ``names`` (for ``pairs_table``)."""
        return SimpleNamespace(score=lambda sample: SimpleNamespace(score=self.scores(sample)[which]))


def cache_sets(out: Path, names, scores, keys) -> None:
    """Each named set not yet in ``out``: its labels, cheap signals and ``scores(sample)[k]`` for each of ``keys``,
    as ``out/<name>.npz``."""
    out.mkdir(parents=True, exist_ok=True)
    missing = [name for name in names if not (out / f"{name}.npz").exists()]
    data = load_sets(missing)
    for name in missing:
        samples, labels = data[name]
        rows = [scores(s) for s in samples]
        np.savez(out / f"{name}.npz", y=np.asarray(labels), cheap=feature_matrix(CHEAP, samples),
                 **{k: np.array([r[k] for r in rows]) for k in keys})
        print(f"{name}: {len(samples)} items", flush=True)


def run(out: Path, names: list[str], reads: dict[str, dict] = READS, distractors=DISTRACTORS) -> None:
    """Each named set's scores (``reads``' and the verifier mean), its labels and cheap signals into ``out``, and
    the tables of the named distractor sets, each computed once."""
    scorer = Scorer(reads)
    cache_sets(out, names, scorer.scores, scorer.names)
    path = out / "distractors.json"
    if distractors and not path.exists():  # none named: the natural sets only, the tables left for a later run
        tables = {which: {k: pairs_table(scorer.as_judge(k), load_distractors(which), ARRANGEMENTS)
                          for k in scorer.names} for which in distractors}
        path.write_text(json.dumps(tables, indent=1), encoding="utf-8")


def run_step(out: Path, sets: str, read, written, reads: dict[str, dict], distractors) -> None:
    """A reading round's ``run``: with ``sets="read"`` the read sets only and no distractor table (for the round's
    look at them before its written sets), else the sets ``written`` for the round too, and the distractor tables."""
    if sets == "read":
        run(out, list(read), reads, ())
    else:
        run(out, [*written, *read], reads, distractors)


def rule(natural: dict, distractors: dict) -> list[str]:
    """What blocks H (docs/verifier-log.md, round 8); empty when H replaces F."""
    blocked = []
    third = distractors["third"]
    for arrangement in ("one passage", "four contexts"):
        f, h = third["F"][arrangement], third["H"][arrangement]
        if not h["lifted"] < f["lifted"]:
            blocked.append(f"distractors third, {arrangement}: H lifts {h['lifted']}, F {f['lifted']}")
        if h["roc_auc"] < f["roc_auc"] - 0.005:
            blocked.append(f"distractors third, {arrangement}: H {h['roc_auc']:.4f} < F {f['roc_auc']:.4f} - 0.005")
    for name in UNREAD:
        if natural[name]["H"] < natural[name]["F"] - 0.01:
            blocked.append(f"{name}: H {natural[name]['H']:.4f} < F {natural[name]['F']:.4f} - 0.01")
    mean_h, mean_f = (np.mean([natural[n][k] for n in UNREAD]) for k in "HF")
    if mean_h < mean_f - 0.005:
        blocked.append(f"unread sets' mean: H {mean_h:.4f} < F {mean_f:.4f} - 0.005")
    contrastive = [n for n in natural if n.startswith("contrastive-")]
    for label, names in (("seven contrastive sets' mean", contrastive), ("begin-cmu-tc", ["begin-cmu-tc"])):
        h, f = (np.mean([natural[n][k] for n in names]) for k in "HF")
        if h < f - 0.005:
            blocked.append(f"{label}: H {h:.4f} < F {f:.4f} - 0.005")
    return blocked


def contrastive_by_kind(out: Path, sets=FIRST_SEVEN_CONTRASTIVE, names=SCORES) -> None:
    """On the contrastive sets, averaged over them: ROC-AUC of the faithful items against each kind of changed
    copy, and the mean score of each faithful kind (what the word signals do to a paraphrase)."""
    auc: dict[str, dict[str, list[float]]] = {}
    for which in sets:
        found = np.load(out / f"contrastive-{which}.npz")
        kinds, y = np.array([r["kind"] for r in load_contrastive(which)]), found["y"]
        for kind in sorted(set(kinds)):
            at = (y == 1) | (kinds == kind) if kind in set(kinds[y == 0]) else kinds == kind
            for k in names:
                value = roc_auc(y[at], found[k][at]) if kind in set(kinds[y == 0]) else float(found[k][at].mean())
                auc.setdefault(kind, {}).setdefault(k, []).append(value)
    print(f"\n| contrastive kind, mean of the {len(sets)} sets | " + " | ".join(names) + " |\n|---|"
          + "---:|" * len(names))
    for kind, values in auc.items():
        print(f"| {kind} ({'mean score' if kind in ('copy', 'paraphrase') else 'ROC-AUC against the faithful'}) | "
              + " | ".join(f"{np.mean(values[k]):.3f}" for k in names) + " |")


def faithful_by_kind(out: Path, sets=("third", "fourth", "fifth", "sixth", "seventh"), names=SCORES) -> None:
    """The mean score of each faithful kind in the dialogue sets written for rounds 5 to 8 (by default): how low
    a faithful copy, or a faithful reply with talk, scores in absolute terms."""
    print("\n| dialogue set | faithful kind | " + " | ".join(names) + " |\n|---|---|" + "---:|" * len(names))
    for which in sets:
        found = np.load(out / f"dialogue-{which}.npz")
        kinds = np.array([r["kind"] for r in load_dialogue(which)])
        for kind in ("faithful_copy", "faithful_with_talk", "faithful_talk_only"):
            print(f"| {which} | {kind} | " + " | ".join(f"{found[k][kinds == kind].mean():.3f}" for k in names) + " |")


def cheap_aucs(found, at=slice(None)) -> dict[str, float]:
    """Each cheap signal's ROC-AUC on the items ``at`` (all by default) of a cached set."""
    return {c: roc_auc(found["y"][at], found["cheap"][at, i]) for i, c in enumerate(CHEAP)}


def natural_table(out: Path, sets, names, unread) -> dict[str, dict]:
    """Each cached set's ROC-AUC for every score in ``names`` and every cheap signal, printed with the best cheap
    signal; the sets in ``unread`` are marked."""
    natural = {}
    print("| set | " + " | ".join(n.replace("_", " ") for n in names) + " | best cheap signal |\n|---|"
          + "---:|" * len(names) + "---|")
    for name in sets:
        found = np.load(out / f"{name}.npz")
        y = found["y"]
        natural[name] = {k: roc_auc(y, found[k]) for k in names}
        cheap = cheap_aucs(found)
        best = max(cheap, key=lambda c: cheap[c])
        natural[name]["cheap"] = cheap
        print(f"| {name}{' (unread)' if name in unread else ''} | " + " | ".join(
            f"{natural[name][k]:.4f}" for k in names) + f" | {best} {cheap[best]:.4f} |")
    return natural


def unread_rule(natural: dict, distractors: dict, *, old: str, new: str, unread, guards, distractor_set: str,
                mean_margin: float = 0.0) -> list[str]:
    """What blocks ``new`` in rounds 9 to 13 (docs/verifier-log.md); empty when it replaces ``old``: each unread
    natural set at least ``old`` - 0.01 and their mean at least ``old`` + ``mean_margin``; each of ``guards`` at
    least ``old`` - 0.005; on ``distractor_set``, in each arrangement with distractors, ROC-AUC at least ``old``'s
    - 0.005 and at most 2 more contradicted claims lifted."""
    blocked = []
    for name in unread:
        if natural[name][new] < natural[name][old] - 0.01:
            blocked.append(f"{name}: {new} {natural[name][new]:.4f} < {old} {natural[name][old]:.4f} - 0.01")
    mean_new, mean_old = (np.mean([natural[n][k] for n in unread]) for k in (new, old))
    if mean_new < mean_old + mean_margin:
        blocked.append(f"unread natural sets' mean: {new} {mean_new:.4f} < {old} {mean_old:.4f}"
                       + (f" + {mean_margin:g}" if mean_margin else ""))
    for name in guards:
        if natural[name][new] < natural[name][old] - 0.005:
            blocked.append(f"{name}: {new} {natural[name][new]:.4f} < {old} {natural[name][old]:.4f} - 0.005")
    tables = distractors[distractor_set]
    for arrangement in ("one passage", "four contexts"):
        a, b = tables[new][arrangement], tables[old][arrangement]
        if a["roc_auc"] < b["roc_auc"] - 0.005:
            blocked.append(f"distractors {distractor_set}, {arrangement}: {new} {a['roc_auc']:.4f} < {old} "
                           f"{b['roc_auc']:.4f} - 0.005")
        if a["lifted"] > b["lifted"] + 2:
            blocked.append(f"distractors {distractor_set}, {arrangement}: {new} lifts {a['lifted']}, {old} "
                           f"{b['lifted']} (+2 allowed)")
    return blocked


def decide(out: Path, write: str | None) -> int:
    natural = natural_table(out, (*UNREAD, *READ), SCORES, UNREAD)
    contrastive_by_kind(out)
    faithful_by_kind(out)
    distractors = json.loads((out / "distractors.json").read_text(encoding="utf-8"))
    distractor_table(distractors, SCORES, "third")
    return settle(out, natural, distractors, rule(natural, distractors), old="F", new="H", unread=UNREAD, write=write,
                  changes={"candidate": "H", "words_read": "units",
                           "words_read_decided_on": [*UNREAD, "distractors-third"],
                           "words_read_rule": 'docs/verifier-log.md, "A shipped combination, round 8"'})


def distractor_table(distractors: dict, names, unread: str) -> None:
    """Each distractor set's ROC-AUC and lifted contradicted claims, by arrangement, for each score in ``names``."""
    print(f"\n| distractor set, arrangement | {names[0]}: ROC-AUC, lifted | " + " | ".join(names[1:])
          + " |\n|---|" + "---|" * len(names))
    for which, tables in distractors.items():
        for arrangement in ARRANGEMENTS:
            print(f"| {which}{' (unread)' if which == unread else ''}, {arrangement} | " + " | ".join(
                f"{tables[k][arrangement]['roc_auc']:.4f}, {tables[k][arrangement]['lifted']}" for k in names) + " |")


def settle(out: Path, natural: dict, distractors: dict, blocked: list[str], *, old: str, new: str, unread,
           write: str | None, changes: dict) -> int:
    """A round's ending: the rule's verdict; the safeguard (the default goes back to the verifier mean when the
    combination shipped after the rule is more than 0.005 under it on an unread natural set); ``changes`` written
    into the combination file ``write`` only when both allow it; and every number in ``out``/decision.json."""
    print(f"\nrule: {new} " + (f"replaces {old}" if not blocked else f"does not replace {old}; blocked by: "
                                + "; ".join(blocked)))
    shipped = old if blocked else new
    under = [n for n in unread if natural[n][shipped] < natural[n]["verifier_mean"] - 0.005]
    print(f"safeguard ({shipped} against the verifier mean on the unread natural sets): "
          + ("holds" if not under else "the default goes back to the mean: " + ", ".join(under)))
    if write and (blocked or under):
        print("not written: " + (f"{new} did not pass its rule" if blocked else "the safeguard sends the default back"))
    if write and not blocked and not under:
        found = json.loads(Path(write).read_text(encoding="utf-8"))
        Path(write).write_text(json.dumps(found | changes, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {write}: " + ", ".join(changes))
    (out / "decision.json").write_text(json.dumps({"natural": natural, "distractors": distractors,
                                                   "blocked": blocked, "under_mean": under}, indent=1),
                                       encoding="utf-8")
    return 0


def reading_round(out: Path, write: str | None, *, old: str, new: str, unread, unread_contrastive: str, read,
                  contrastive, dialogue, distractor_set: str, changes: dict, also_blocked: list[str] = ()) -> int:
    """``decide`` of a round that reads the shipped weights' inputs another way (rounds 9, 11, 12 and 13): every
    set's table, the contrastive sets' mean and kinds, the dialogue sets' faithful kinds, the distractor table, then
    the rule (``unread_rule``, and what a round's own condition found, ``also_blocked``) and ``settle``.
    ``contrastive`` and ``dialogue`` name the sets by their ordinal."""
    names = (old, new, "verifier_mean")
    natural = natural_table(out, (*unread, unread_contrastive, *read), names, (*unread, unread_contrastive))
    sets = [f"contrastive-{w}" for w in contrastive]
    print(f"\n{len(sets)} contrastive sets' mean: " + ", ".join(
        f"{k} {np.mean([natural[n][k] for n in sets]):.4f}" for k in names))
    contrastive_by_kind(out, contrastive, names)
    faithful_by_kind(out, dialogue, names)
    distractors = json.loads((out / "distractors.json").read_text(encoding="utf-8"))
    distractor_table(distractors, names, distractor_set)
    blocked = [*unread_rule(natural, distractors, old=old, new=new, unread=unread,
                            guards=(unread_contrastive, "begin-cmu-tc"), distractor_set=distractor_set), *also_blocked]
    return settle(out, natural, distractors, blocked, old=old, new=new, unread=unread, write=write, changes=changes)


def blend(out: Path) -> int:
    """Could a share of the verifier mean close the contrastive sets' gap? ROC-AUC of a * H + (1 - a) * mean on
    every cached set (read sets only: a trade-off to look at, not a candidate)."""
    names = [*UNREAD, *(n for n in READ if not n.startswith("contrastive-"))]
    print("| a | seven contrastive sets | " + " | ".join(names) + " |\n|---:|---:|" + "---:|" * len(names))
    for a in (1.0, 0.9, 0.8, 0.7, 0.5, 0.0):
        def auc(name: str) -> float:
            found = np.load(out / f"{name}.npz")
            return roc_auc(found["y"], a * found["H"] + (1 - a) * found["verifier_mean"])
        contrastive = np.mean([auc(f"contrastive-{w}") for w in FIRST_SEVEN_CONTRASTIVE])
        print(f"| {a:.1f} | {contrastive:.4f} | " + " | ".join(f"{auc(n):.3f}" for n in names) + " |")
    return 0


def passage(which: str) -> int:
    """Why the distractors still cost the shipped score with them in one passage: the mean score, verifier P and
    word signals of supported and contradicted claims, evidence alone against evidence and distractors in one
    passage (the shipped judge, words read from the verifier's units)."""
    judge = FaithfulnessWithVerifier()
    items = load_distractors(which)
    print(f"| distractors {which}, arrangement | claims | score | verifier P | specifics supported | bigram support |"
          "\n|---|---|---:|---:|---:|---:|")
    for arrangement in ("alone", "one passage"):
        for side in ("supported", "contradicted"):
            rows = [judge.score(SingleTurnSample(response=it[side], retrieved_contexts=ARRANGEMENTS[arrangement](it)))
                    for it in items]
            print(f"| {arrangement} | {side} | {np.mean([r.score for r in rows]):.3f} | "
                  f"{np.mean([r.mean_probability for r in rows]):.3f} | "
                  + " | ".join(f"{np.mean([r.combination[k] for r in rows]):.3f}"
                               for k in ("specifics_supported", "bigram_support")) + " |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("run", "decide", "passage", "blend"))
    parser.add_argument("--out", default="runs/combination_round8")
    parser.add_argument("--sets", nargs="*", help="with run: only these natural sets (default: all of them)")
    parser.add_argument("--write", help="with decide: when H passes, name words_read='units' in this combination "
                        "file (the shipped one is judges/lm/weights/faithfulness-combination.json)")
    args = parser.parse_args(argv)
    if args.step == "run":
        run(Path(args.out), args.sets or [*UNREAD, *READ])
        return 0
    if args.step == "passage":
        return passage("third")
    if args.step == "blend":
        return blend(Path(args.out))
    return decide(Path(args.out), args.write)


if __name__ == "__main__":
    raise SystemExit(main())
