"""Fitting judges to people: the floor above the metric library (``judges``), below the application.

    calibration.data       labelled sets, splits, and loaders of the real human-labelled data
    calibration.agreement  how far a judge agrees with people: statistics, the run record, plots, the report
    calibration.fitting    compiling judges against labels, calibrators, signals, compiled-judge files,
                           held-out comparison, which item to label next

    from calibration.fitting import fit, CompiledJudge
    compiled = fit(Faithfulness(), labelled_set, optimizer="bootstrap", calibrator="stacked")

Must not import the application (``judges_app``) or MLflow.
"""
