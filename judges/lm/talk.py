"""Is a sentence of a reply talk or a checkable claim? A small learned classifier over sentence embeddings.

    TalkClassifier().checkable(["Oh no, poor little thing!", "The tower was finished in 1889."])
    -> array([False,  True])

``judges.data.claim_units``'s word lists set aside the talk they were written from ("Me too.", questions,
greetings) and miss talk written otherwise ("That's such a fun phase!"). This classifier reads each sentence
as the embedded sentence embedder encodes it, plus whether those rules found a claim in it, and gives
P(checkable). It is a logistic regression: its weights ship as one JSON file (``TALK_WEIGHTS``), trained by
``calibration.verifier.talk_units`` on hand-written chat sentences (the file names them and their SHA-256).

Owns: loading the weights and scoring sentences. Must not split replies (``claim_units`` does) or train.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from judges.data.claim_units import claim_units

#: The shipped classifier: coefficients over [embedding..., rules found a claim], its intercept and threshold.
TALK_WEIGHTS = Path(__file__).resolve().parent / "weights" / "talk-minilm.json"


def rule_feature(sentences: list[str]) -> np.ndarray:
    """1.0 where ``claim_units``'s rules find a claim in the sentence, else 0.0: the classifier's last input."""
    return np.array([float(any(u.claim for u in claim_units(s))) for s in sentences], dtype=np.float32)


class TalkClassifier:
    """``checkable(sentences) -> bool array`` and ``probability(sentences) -> P(checkable)`` for each sentence.

    ``weights`` is a JSON file written by ``calibration.verifier.talk_units`` (None: the shipped one);
    ``embeddings`` anything ``resolve_embedder`` takes, and must be the embedder the weights were fitted on
    (None: the embedded all-MiniLM-L6-v2, which the shipped weights were)."""

    def __init__(self, weights: str | Path | None = None, embeddings: Any = None):
        path = Path(weights) if weights is not None else TALK_WEIGHTS
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
            self.coef = np.asarray(found["coef"], dtype=np.float32)
            self.intercept = float(found["intercept"])
            self.threshold = float(found["threshold"])
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(f"talk classifier: {path} is not a weights file written by "
                             f"calibration.verifier.talk_units ({error})") from error
        self.path = path
        self.manifest = {k: v for k, v in found.items() if k != "coef"}
        self._embeddings = embeddings

    @functools.cached_property
    def embedder(self):
        from judges.lm.embeddings import resolve_embedder
        from judges.lm.files import EMBEDDED

        # Not the run's default embedder: the weights belong to one embedder, whatever else a run uses.
        return resolve_embedder(EMBEDDED if self._embeddings is None else self._embeddings)

    def features(self, sentences: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(sentences)
        if vectors.shape[1] + 1 != self.coef.shape[0]:
            raise ValueError(f"talk classifier: {self.path} expects {self.coef.shape[0] - 1}-dimensional embeddings, "
                             f"the embedder gives {vectors.shape[1]}")
        return np.hstack([vectors, rule_feature(sentences)[:, None]])

    def probability(self, sentences: list[str]) -> np.ndarray:
        if not sentences:
            return np.zeros(0, dtype=np.float32)
        return 1.0 / (1.0 + np.exp(-(self.features(list(sentences)) @ self.coef + self.intercept)))

    def checkable(self, sentences: list[str]) -> np.ndarray:
        return self.probability(sentences) >= self.threshold


@functools.lru_cache(maxsize=1)
def talk_identity() -> str:
    """What a run file records of the shipped classifier: its weights' SHA-256."""
    return "sha256:" + hashlib.sha256(TALK_WEIGHTS.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=1)
def shipped_talk_classifier() -> TalkClassifier:
    """The shipped classifier on the embedded embedder, made once per process."""
    return TalkClassifier()
