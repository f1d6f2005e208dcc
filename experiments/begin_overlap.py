"""Why the judge as shipped stays under token overlap on BEGIN WoW (read sets only, no decision).

    .venv/bin/python experiments/begin_overlap.py                    # reads round 14's cache, seconds
    .venv/bin/python experiments/begin_overlap.py --cut-reactions    # also the opening-reaction probe, ~3 min

Reads the cache ``experiments/combination_pairs.py run`` fills (``runs/combination_round14``) and prints:
  1. models over the shipped judge's inputs fitted on BEGIN WoW alone, five-fold cross-fitted (five seeds): its six
     inputs, the six and token overlap, the five cheap signals, the verifier's mean and weakest;
  2. the shipped recipe (round 6's fit data, each part weighted equally, ``fit_weights``) over the six inputs, and
     over the six and one cheap signal: BEGIN WoW and the means of the written dialogue, summary and contrastive
     sets, gated as the file gates;
  3. paired bootstrap 95% CIs of the judge as shipped minus the cheap signal it trails: BEGIN WoW (token overlap)
     and the sixth summary set (weakest-sentence support);
  4. with ``--cut-reactions``: the judge as shipped when each sentence's opening reaction is cut before the verifier
     reads it ("Not really, X" -> "X"), by claim_units' own rule and by that rule with a few more reactions and a
     joining "and", "but" or "so"; scored again only where the cut changes a sentence.
Decides nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.agreement.stats import compare  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from combination_refit import COLUMNS, GATE, scores_with  # noqa: E402
from combination_signals import READ as FITTED  # noqa: E402
from combination_signals import load_sets, logistic  # noqa: E402
from shipped_combination import CHEAP  # noqa: E402
from judges import FaithfulnessWithVerifier  # noqa: E402
from judges.data import claim_units  # noqa: E402
from judges.metrics.rag import verified  # noqa: E402

SIX = ("verifier_mean", "verifier_weakest", "learned_checkable_mean", "learned_set_aside_share",
       "learned_nothing_checkable", "specifics_supported")
#: Reactions claim_units' rule does not list, seen opening BEGIN WoW's replies ("not really, X", "yea and X").
MORE_REACTIONS = ("not really", "yea", "ya", "yah", "nah", "hmmm", "uh huh", "mhm", "oh ok", "oh okay", "aw", "aww")


def columns(found, extra: tuple[str, ...] = ()) -> np.ndarray:
    return np.column_stack([found["x"][:, COLUMNS.index(n)] for n in SIX]
                           + [found["cheap"][:, CHEAP.index(c)] for c in extra])


def in_set(found) -> None:
    """Section 1: what these signals reach on BEGIN WoW when fitted on it alone."""
    y = found["y"]
    rows = {"six inputs": columns(found), "six inputs + token overlap": columns(found, ("token_overlap",)),
            "the five cheap signals": found["cheap"], "verifier mean and weakest": found["x"][:, :2]}
    print("## 1. Fitted on BEGIN WoW alone, five-fold cross-fitted, mean of five seeds\n\n"
          "| inputs | ROC-AUC |\n|---|---:|")
    for name, x in rows.items():
        aucs = [roc_auc(y, cross_val_predict(make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)), x, y,
                                             cv=StratifiedKFold(5, shuffle=True, random_state=seed),
                                             method="predict_proba")[:, 1]) for seed in range(5)]
        print(f"| {name} | {np.mean(aucs):.4f} |")
    print("| " + " | ".join(f"{c} {roc_auc(y, found['cheap'][:, i]):.4f}" for i, c in enumerate(CHEAP)) + " |")


def families(cache: Path) -> dict[str, list[str]]:
    names = sorted(p.stem for p in cache.glob("*.npz"))
    return {"written dialogue": [n for n in names if n.startswith("dialogue-") and n != "dialogue-fresh"],
            "written summaries": [n for n in names if n.startswith("summaries-")],
            "contrastive": [n for n in names if n.startswith("contrastive-")]}


def shipped_recipe(cache: Path) -> None:
    """Section 2: the shipped recipe with one cheap signal more."""
    found = {p.stem: np.load(p) for p in cache.glob("*.npz")}
    fams = families(cache)
    print("\n## 2. The shipped recipe refitted, with one cheap signal more (gated)\n\n| inputs | BEGIN WoW | "
          + " | ".join(fams) + " |\n|---|---:|" + "---:|" * len(fams))
    print("| the judge as shipped | " + f"{roc_auc(found['begin-wow']['y'], shipped(found['begin-wow'])):.4f} | "
          + " | ".join(f"{np.mean([roc_auc(found[n]['y'], shipped(found[n])) for n in ns]):.4f}"
                       for ns in fams.values()) + " |")
    for extra in ((), ("token_overlap",), ("weakest_sentence",), ("embedding_alignment",)):
        parts = []
        for name in (*FITTED, "made"):
            x, y = columns(found[name], extra), found[name]["y"]
            parts.append((x[~np.isnan(x).any(axis=1)], y[~np.isnan(x).any(axis=1)]))
        scaler, model = logistic(parts)

        def score(f, scaler=scaler, model=model, extra=extra):
            x, out = columns(f, extra), shipped(f)
            ok = ~np.isnan(x).any(axis=1)
            gate = np.minimum(1.0, f["x"][:, COLUMNS.index(GATE)] / 0.5)
            out[ok] = model.predict_proba(scaler.transform(x[ok]))[:, 1] * gate[ok]
            return out
        wow = roc_auc(found["begin-wow"]["y"], score(found["begin-wow"]))
        print(f"| six{' + ' + extra[0] if extra else ''}, refitted | {wow:.4f} | "
              + " | ".join(f"{np.mean([roc_auc(found[n]['y'], score(found[n])) for n in ns]):.4f}"
                           for ns in fams.values()) + " |")


def shipped(found) -> np.ndarray:
    """The judge as shipped now, from the cache (its round-13 score where no combination ran)."""
    return scores_with(found, verified.shipped_combination())


def trails(cache: Path) -> None:
    """Section 3: how sure the two gaps are."""
    print("\n## 3. The judge as shipped minus the cheap signal it trails (paired bootstrap, 2,000 draws)\n\n"
          "| set | judge | cheap signal | difference [95% CI] |\n|---|---:|---|---|")
    for name, cheap in (("begin-wow", "token_overlap"), ("summaries-sixth", "weakest_sentence")):
        found = np.load(cache / f"{name}.npz")
        judge, signal = shipped(found), found["cheap"][:, CHEAP.index(cheap)]
        d = compare(list(found["y"]), list(judge), list(signal), n_bootstrap=2000, seed=0,
                    stats=["roc_auc"]).stats["roc_auc"]
        print(f"| {name} | {roc_auc(found['y'], judge):.4f} | {cheap} {roc_auc(found['y'], signal):.4f} | "
              f"{d['difference']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}] |")


def reaction_cut(extended: bool):
    """A sentence -> the sentence with its opening reactions cut (claim_units' rule; ``extended``: with
    ``MORE_REACTIONS`` and a joining "and", "but" or "so"), or as it was when nothing with content is left."""
    words = claim_units._REACTIONS + (MORE_REACTIONS if extended else ())
    ending = r"\s*(?:[,!.;:-]+\s*|$)" + (r"|\s+(?:and|but|so)\s+" if extended else "")
    opening = re.compile(r"^(?:" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")(?:"
                         + ending + ")", re.I)

    def cut(sentence: str) -> str:
        text = body = claim_units._normalised(sentence)
        while (shorter := opening.sub("", body, count=1).strip()) not in ("", body):
            body = shorter
        return sentence.strip() if body == text or claim_units._contentless(body) else body
    return cut


@contextlib.contextmanager
def sentences_cut(cut):
    """The judge reads its sentences through ``cut`` while inside."""
    original = verified.sentence_claims
    verified.sentence_claims = lambda text: [cut(s) for s in original(text)]
    try:
        yield
    finally:
        verified.sentence_claims = original


def cut_reactions(cache: Path) -> None:
    """Section 4: the opening-reaction probe."""
    names = ("begin-wow", "dialogue-fresh", *families(cache)["written dialogue"])
    data, judge = load_sets(list(names)), FaithfulnessWithVerifier()
    print("\n## 4. Opening reactions cut before the verifier reads a sentence\n\n"
          "| set | judge as shipped | claim_units' rule (items cut) | with more reactions (items cut) |\n"
          "|---|---:|---|---|")
    for name in names:
        samples, labels = data[name]
        base, row = shipped(np.load(cache / f"{name}.npz")), []
        for extended in (False, True):
            cut, scores, changed = reaction_cut(extended), base.copy(), 0
            for i, sample in enumerate(samples):
                sentences = verified.sentence_claims(sample.response)
                if [cut(s) for s in sentences] != sentences:
                    changed += 1
                    with sentences_cut(cut):
                        scores[i] = judge.score(sample).score
            row.append(f"{roc_auc(labels, scores):.4f} ({changed})")
        print(f"| {name} | {roc_auc(labels, base):.4f} | " + " | ".join(row) + " |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="runs/combination_round14", help="combination_pairs.py run's cache")
    parser.add_argument("--cut-reactions", action="store_true", help="also score the opening-reaction probe (~3 min)")
    args = parser.parse_args(argv)
    cache = Path(args.cache)
    if not (cache / "begin-wow.npz").exists():
        parser.error(f"no cache in {cache}: run experiments/combination_pairs.py run first")
    in_set(np.load(cache / "begin-wow.npz"))
    shipped_recipe(cache)
    trails(cache)
    if args.cut_reactions:
        cut_reactions(cache)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
