"""Does the int8 verifier (``"embedded-int8"``: the shipped one with int8 weights) agree with people as the
float32 one does, and how much faster is it? Printed as a table.

    .venv/bin/python experiments/verifier_int8.py                    # ONNX Runtime (the default): ~1 min
    .venv/bin/python experiments/verifier_int8.py --runtime torch    # PyTorch's int8 against torch: ~6 min

The sets and the 50/50 split are ``experiments/verifier_agreement.py``'s (test halves; SummEval's first 320
summaries; the contrastive set whole). ROC-AUC of the weakest sentence's probability (response sentences
as claims, no LM), and ms per item scoring it in this process (2 threads). Both models run on
``--runtime``: on ONNX Runtime int8 is the graph ONNX Runtime quantized (``shipped_onnx_int8``), on torch
PyTorch's dynamic quantization of the linear layers; the two give different probabilities.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets, split  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402

from calibration.verifier.training import roc_auc  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtime", default="auto", choices=("auto", "torch"))
    args = parser.parse_args()
    data = sets(summeval_limit=320)
    models = {"float32": Verifier(runtime=args.runtime), "int8": Verifier(quantize=True, runtime=args.runtime)}
    print(f"float32 on {models['float32'].runtime}, int8 on {models['int8'].runtime}\n")
    print("| set | n test | float32 ROC-AUC | int8 ROC-AUC | float32 ms/item | int8 ms/item | largest |P32 - P8| |")
    print("|---|---:|---|---|---:|---:|---:|")
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
