"""A lexical bias model for training the verifier against word overlap (``TrainConfig.debias``).

    bias = LexicalBias.fit(train_pairs)     # logistic regression on two overlap features of each pair
    bias.logits(train_pairs)                # its log-odds, centred: what the product of experts adds

The cheap signals the verifier must beat are word overlap under several names, and the verifier trained
plainly errs where they err (docs/verifier.md: it ranks poorly on the items the best cheap signal gets
wrong). The product of experts (Clark et al. 2019, "Don't take the easy way out"; He et al.
2019, "Unlearn dataset bias ... by fitting the residual"; Mahabadi et al. 2020) trains the model's logit
plus a fixed bias model's log-odds against the label, so the model is pushed to learn what the bias model
does not already explain; it is scored alone. Here the bias model sees only how much of the claim's words
(``token_support``) and word pairs (``novel_bigrams``) the evidence holds: the shortcut, and nothing a
changed number or name would show (``specifics_supported`` is left out on purpose: a changed fact is a
reason, not a shortcut). Each source's intercept carries its label prior too, so a source's prior is taken
out of the loss with its overlap.

Owns: the bias features and model. Must not train the verifier (``verifier_training`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from calibration.verifier.pairs import EvidencePair
from judges.data.language import tokenize
from judges.metrics.grounding import novel_bigrams, token_support

#: The bias model's inputs, in its coefficients' order.
BIAS_FEATURES = ("token_support", "bigram_support")
#: Sources (prefixes) given no bias model: the rule-made pairs (``calibration.verifier.perturb``).
NO_BIAS_MODEL = ("perturbed_",)


def lexical_features(pairs: Sequence[EvidencePair]) -> np.ndarray:
    """Per pair: the share of the claim's tokens the evidence holds, and of its word pairs."""
    rows = []
    for pair in pairs:
        count, novel = novel_bigrams(pair.claim, pair.evidence)
        words = token_support(pair.claim, set(tokenize(pair.evidence)))
        rows.append((words, 1.0 - len(novel) / count if count else 1.0))  # a one-word claim: no pair, 1.0
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(BIAS_FEATURES))


@dataclass(frozen=True)
class LexicalBias:
    """Per source of the mix, a logistic regression of the label on ``BIAS_FEATURES``: each corpus offers
    its own shortcut (overlap ranks some sources' labels far better than others'). The rule-made pairs (sources ``perturbed_*``) get none: they were made to counter the shortcut
    (a changed fact keeps nearly every word), and their near-total overlap is what the model must see past.
    A source with one label only, or not seen in ``fit``, gets none either."""

    #: source -> (coefficients in ``BIAS_FEATURES`` order, intercept).
    models: dict[str, tuple[tuple[float, ...], float]]
    #: The mean log-odds over the pairs with a model that it was fitted on, taken off theirs.
    centre: float
    #: source -> ROC-AUC of its model on the pairs it was fitted on: how much of its labels overlap explains.
    roc_auc: dict[str, float]

    @classmethod
    def fit(cls, pairs: Sequence[EvidencePair]) -> LexicalBias:
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import roc_auc_score

        x = lexical_features(pairs)
        labels = np.asarray([p.label for p in pairs])
        models, auc = {}, {}
        for source in sorted({p.source for p in pairs if not p.source.startswith(NO_BIAS_MODEL)}):
            rows = np.asarray([i for i, p in enumerate(pairs) if p.source == source])
            if len(set(labels[rows].tolist())) < 2:
                continue
            model = LogisticRegression(C=1.0, max_iter=1000).fit(x[rows], labels[rows])
            models[source] = (tuple(float(c) for c in model.coef_[0]), float(model.intercept_[0]))
            auc[source] = float(roc_auc_score(labels[rows], model.decision_function(x[rows])))
        if not models:
            raise ValueError("LexicalBias.fit: no source outside the rule-made pairs has both labels: nothing to "
                             "fit a bias model on (train with debias=0)")
        raw = cls(models, 0.0, auc).logits(pairs, x)
        return cls(models, float(np.mean([z for z, p in zip(raw, pairs) if p.source in models])), auc)

    def logits(self, pairs: Sequence[EvidencePair], features: np.ndarray | None = None) -> np.ndarray:
        """Each pair's log-odds under its source's model minus ``centre``; 0 (nothing added) for a source without
        a model."""
        x = lexical_features(pairs) if features is None else features
        out = np.zeros(len(pairs))
        for i, pair in enumerate(pairs):
            if pair.source in self.models:
                coefficients, intercept = self.models[pair.source]
                out[i] = float(x[i] @ np.asarray(coefficients)) + intercept - self.centre
        return out
