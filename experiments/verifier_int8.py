"""Does the int8 verifier (``"embedded-int8"``: the shipped one with its linear layers quantized as it loads)
agree with people as the float32 one does, and how much faster is it? Printed as a table.

    .venv/bin/python experiments/verifier_int8.py          # ~6 min: both models on the test halves

The sets and the 50/50 split are ``experiments/verifier_agreement.py``'s (test halves; SummEval's first 320
summaries; the contrastive set whole). ROC-AUC of the weakest sentence's probability (response sentences
as claims, no LM), and ms per item scoring it in this process (2 threads).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets, split  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402

from calibration.fitting.verifier_training import roc_auc  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402


def main() -> int:
    data = sets(summeval_limit=320)
    print("| set | n test | float32 ROC-AUC | int8 ROC-AUC | float32 ms/item | int8 ms/item | largest |P32 - P8| |")
    print("|---|---:|---|---|---:|---:|---:|")
    models = {"float32": Verifier(), "int8": Verifier(quantize=True)}
    for name, (samples, labels) in data.items():
        test = np.arange(len(labels)) if name == "contrastive" else split(labels, 0)[1]
        cells, scores = [], {}
        for kind, verifier in models.items():
            started = time.perf_counter()
            scores[kind] = np.array(weakest(verifier, samples, test))
            cells.append((roc_auc(np.asarray(labels)[test], scores[kind]), (time.perf_counter() - started) / len(test)))
        gap = float(np.max(np.abs(scores["float32"] - scores["int8"])))
        print(f"| {name} | {len(test)} | {cells[0][0]:.4f} | {cells[1][0]:.4f} | {cells[0][1] * 1000:.1f} | "
              f"{cells[1][1] * 1000:.1f} | {gap:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
