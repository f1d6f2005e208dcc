"""Train the talk-or-claim sentence classifier (``judges.lm.talk``) on hand-written chat sentences.

    .venv/bin/python -m calibration.verifier.talk_units                # writes judges/lm/weights/talk-minilm.json
    .venv/bin/python -m calibration.verifier.talk_units --out /tmp/talk.json

The sentences are ``sets/units_train.jsonl`` (UNITS_TRAIN.md): each a sentence of a chat reply, labelled
checkable (it states a fact about the world) or talk; ``--sets train news`` adds ``sets/units_news.jsonl``
(UNITS_NEWS.md), sentences of summaries and reports; ``--sets train chat`` adds ``sets/units_chat.jsonl``
(UNITS_CHAT.md), chat sentences by another writer. ``sets/units_test.jsonl`` (UNITS_TEST.md), written by
another hand, only measures. The model is scikit-learn's logistic regression over the embedded embedder's
sentence vector and the rules' verdict, its C chosen by 5-fold cross-validation on the training sentences.

Owns: reading the unit sets, fitting and writing the weights. Must not decide a metric's claims (the judges do).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np

from judges.lm.talk import TALK_WEIGHTS, TalkClassifier, rule_feature

UNIT_SETS = {"train": "units_train.jsonl", "test": "units_test.jsonl", "news": "units_news.jsonl",
             "chat": "units_chat.jsonl"}
#: The regularisation strengths cross-validation chooses from.
C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)


def _set_file(which: str):
    if which not in UNIT_SETS:
        raise ValueError(f"load_units: which must be one of {sorted(UNIT_SETS)}, got {which!r}")
    return resources.files("calibration.verifier") / "sets" / UNIT_SETS[which]


def load_units(which: str = "train") -> list[dict]:
    """A unit set: id, sentence, checkable (1 a fact to check, 0 talk), kind, claim (the fact inside; None)."""
    rows = [json.loads(line) for line in _set_file(which).read_text(encoding="utf-8").splitlines() if line.strip()]
    for i, row in enumerate(rows):
        if row.get("checkable") not in (0, 1) or not str(row.get("sentence") or "").strip():
            raise ValueError(f"load_units({which!r}): row {i} ({row.get('id')}) needs a sentence and checkable 0 or 1")
    return rows


def fit_talk_classifier(rows: list[dict], embedder, seed: int = 0) -> dict:
    """The weights (``judges.lm.talk``'s JSON fields) of a logistic regression fitted on ``rows``."""
    from sklearn.linear_model import LogisticRegressionCV

    sentences = [r["sentence"] for r in rows]
    x = np.hstack([embedder.embed(sentences), rule_feature(sentences)[:, None]])
    y = np.array([r["checkable"] for r in rows])
    model = LogisticRegressionCV(Cs=list(C_GRID), cv=5, scoring="roc_auc", max_iter=5000, random_state=seed)
    model.fit(x, y)
    return {"coef": [round(float(c), 6) for c in model.coef_[0]], "intercept": float(model.intercept_[0]),
            "threshold": 0.5, "C": float(model.C_[0]), "embedder": embedder.name,
            "features": "sentence embedding, then 1.0 where judges.data.claim_units finds a claim",
            "cv_roc_auc": float(np.max(np.mean(model.scores_[1], axis=0)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(TALK_WEIGHTS))
    parser.add_argument("--sets", nargs="+", default=["train"], choices=sorted(set(UNIT_SETS) - {"test"}),
                        help="the unit sets fitted on (default: the chat sentences)")
    args = parser.parse_args(argv)
    from judges.lm.embeddings import sentence_transformer_embedder

    sets = {which: load_units(which) for which in args.sets}
    weights = fit_talk_classifier([row for rows in sets.values() for row in rows], sentence_transformer_embedder())
    weights["trained_on"] = [{"file": UNIT_SETS[w], "sha256": hashlib.sha256(_set_file(w).read_bytes()).hexdigest(),
                              "sentences": len(rows), "checkable": sum(r["checkable"] for r in rows)}
                             for w, rows in sets.items()]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(weights, indent=None) + "\n", encoding="utf-8")
    test = load_units("test")
    found = TalkClassifier(out).checkable([r["sentence"] for r in test])
    truth = np.array([r["checkable"] for r in test], dtype=bool)
    print(f"wrote {out}: C={weights['C']}, cross-validated ROC-AUC {weights['cv_roc_auc']:.4f}; "
          f"test accuracy {np.mean(found == truth):.4f} ({len(test)} sentences)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
