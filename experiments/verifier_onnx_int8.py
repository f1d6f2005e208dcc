"""Would ONNX Runtime's own int8 (dynamic quantization of the exported graph) bring long documents under 30 ms?

    .venv/bin/python experiments/verifier_onnx_int8.py          # ~5 min on 2 cores

The default verifier's graph (``judges.lm.verifier_onnx.shipped_onnx``) is quantized with
``onnxruntime.quantization.quantize_dynamic`` (weights int8, activations quantized as they come) into a
temporary folder; a ``Verifier()`` then scores with it in place of the float32 graph (same tokenizers,
shortlist and units). Measured on the test halves of ``experiments/verifier_agreement.py``'s split: the
weakest sentence's ROC-AUC on BEGIN WoW, Q2 and SummEval (first 320 summaries), float32 next to int8, and the
median ms an item. Nothing here changes a default: it reports, for deciding whether to offer it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets, split  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402

from calibration.fitting.verifier_training import roc_auc  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402
from judges.lm.verifier_onnx import shipped_onnx  # noqa: E402


def main() -> int:
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    data = {name: value for name, value in sets(summeval_limit=320).items() if name != "contrastive"}
    full = Verifier(runtime="onnx")
    quick = Verifier(runtime="onnx")
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "int8.onnx"
        quantize_dynamic(str(shipped_onnx()), str(target), weight_type=QuantType.QInt8)
        print(f"int8 graph: {target.stat().st_size / 1e6:.1f} MB (float32 {shipped_onnx().stat().st_size / 1e6:.1f} MB)")
        quick._session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    print("| set | n test | float32 ROC-AUC | int8 ROC-AUC | float32 ms/item | int8 ms/item | largest difference in P |")
    print("|---|---:|---|---|---:|---:|---:|")
    for name, (samples, labels) in data.items():
        _, test = split(labels, 0)
        y = np.asarray(labels)[test]
        row = []
        for verifier in (full, quick):
            seconds = []
            scores = []
            for i in test:
                started = time.perf_counter()
                scores += weakest(verifier, samples, [i])
                seconds.append(time.perf_counter() - started)
            row.append((roc_auc(y, scores), np.median(seconds) * 1000, np.asarray(scores)))
        gap = float(np.abs(row[0][2] - row[1][2]).max())
        print(f"| {name} | {len(test)} | {row[0][0]:.4f} | {row[1][0]:.4f} | {row[0][1]:.1f} | {row[1][1]:.1f} | {gap:.3f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
