"""Should reference-token recall normalise answers as SQuAD / EVOUNA do? Measured on the shared EVOUNA data.

    .venv/bin/python experiments/answer_normalisation.py

``calibration.fitting.signals.reference_token_recall`` lower-cases and keeps word tokens (punctuation drops out
with the tokeniser). SQuAD's convention also removes the articles a / an / the before comparing. Both are
scored here against EVOUNA's human verdicts (all five systems, every judged answer), as ROC-AUC; the
signal keeps whichever agrees better (docs/agreement.md says which and by how much).
"""

from __future__ import annotations

import argparse
import re
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.agreement.stats import agreement  # noqa: E402
from calibration.data.loaders import load_evouna  # noqa: E402
from judges.data.language import tokenize  # noqa: E402


def squad_normalised(text: str) -> str:
    """SQuAD's answer normalisation: lower case, punctuation and the articles a / an / the removed."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def recall(sample, normalise) -> float:
    response = set(tokenize(normalise(sample.response)))
    best = 0.0
    for alternative in sample.reference_alternatives():
        tokens = tokenize(normalise(alternative))
        if tokens:
            best = max(best, sum(t in response for t in tokens) / len(tokens))
    return best


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    data = load_evouna()
    print(f"\nReference-token recall against EVOUNA's human verdicts (NQ, all systems, n={len(data)})\n")
    print("| normalisation | ROC-AUC [95% CI] |")
    print("|---|---|")
    for name, normalise in (("lower case, word tokens (the signal as it is)", lambda text: text),
                            ("SQuAD: also punctuation and articles removed", squad_normalised)):
        report = agreement(data.labels, [recall(s, normalise) for s in data.dataset], n_bootstrap=200)
        cell = report.stats["roc_auc"]
        print(f"| {name} | {cell['value']:.4f} [{cell['low']:.3f}, {cell['high']:.3f}] |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
