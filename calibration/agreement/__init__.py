"""How far a judge agrees with people, measured and reported.

    stats.py   agreement statistics per label kind (ROC-AUC, kappa, Brier, ECE, correlations) with bootstrap
               intervals; paired comparison of two scorers
    ppi.py     prediction-powered inference: a mean from many judge scores and few labels
    record.py  ``CalibrationRun``: the saved record of a calibration or comparison
    plots.py   reliability diagrams, histograms, bars
    report.py  the HTML report of a calibration run or an evaluation

Must not fit or compile judges (``calibration.fitting``).
"""

from calibration.agreement.stats import (
    AgreementReport,
    PairedComparison,
    agreement,
    compare,
)

__all__ = ["AgreementReport", "PairedComparison", "agreement", "compare"]
