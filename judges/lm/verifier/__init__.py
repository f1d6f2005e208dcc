"""The groundedness verifier: a small cross-encoder giving P(the evidence supports the claim), offline.

    model.py       ``Verifier`` (scoring, evidence units, the checks) and ``resolve_verifier``
    units.py       evidence cut into the units a claim is scored against; batches by length
    opposites.py   the checks of a claim against its opposite and against contradicting sentences
    onnx_graph.py  the shipped verifier on ONNX Runtime: exported from torch once, then scored without torch
    files.py       the shipped weights (``weights/``): where they are, checking them, loading a model folder

How it is trained is on the calibration floor (``calibration.verifier``); what it measures is in
docs/verifier.md.

Must not extract claims (the metrics' steps do) or train.
"""

from judges.lm.verifier.files import VerifierError
from judges.lm.verifier.model import (
    EMBEDDED_INT8,
    RUNTIMES,
    SCORING_SETTINGS,
    Verifier,
    resolve_verifier,
    verifier_identity,
)

__all__ = ["EMBEDDED_INT8", "RUNTIMES", "SCORING_SETTINGS", "Verifier", "VerifierError", "resolve_verifier",
           "verifier_identity"]
