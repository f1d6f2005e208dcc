"""Human-labelled data: ``LabelledSet`` and its splits (``labelled``), loaders of the real sets in
shared/data and of the bundled BEGIN slice (``loaders``), (evidence, claim) pairs for training the
groundedness verifier (``pairs``) and rule-made copy-with-a-changed-fact pairs (``perturb``). Must not fit or
score anything."""

from calibration.data.labelled import LabelledSet, Split, balanced_sample, k_fold, split
from calibration.data.loaders import (
    data_dir,
    load_begin,
    load_begin_slice,
    load_cranfield,
    load_evouna,
    load_summeval,
    load_tau_bench,
)

__all__ = ["LabelledSet", "Split", "balanced_sample", "data_dir", "k_fold", "load_begin", "load_begin_slice",
           "load_cranfield", "load_evouna", "load_summeval", "load_tau_bench", "split"]
