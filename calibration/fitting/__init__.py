"""Fitting a judge to people's labels.

    fit.py          ``fit``: compile a judge's steps against labels (DSPy optimizers, memory) and calibrate it
    calibrators.py  raw score (and cheap signals) -> calibrated score: isotonic, Platt, stacked
    signals.py      the cheap signals a stacked calibrator may choose from
    compiled.py     ``CompiledJudge``: a judge plus its calibrator, saved as JSON (never a pickle)
    memory.py       episodic memory and guidelines distilled from people's rationales
    heldout.py      every scorer compared on held-out labels, with the hard slice
    active.py       which item to label next
    stability.py    how much a judge's score moves when asked again

Must not read the shared data files (``calibration.data``) or write reports (``calibration.agreement``).
"""

from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.fit import JudgeFailedError, fit

__all__ = ["CompiledJudge", "JudgeFailedError", "fit"]
