"""Fitting judges to human labels: labelled sets, agreement statistics, compiling and calibration."""
