"""Would int8 weights for the talk classifier's embedder keep its decisions? (a measurement; decides nothing)

    .venv/bin/python experiments/talk_int8.py      # ~2 min on 2 cores

The talk classifier (``judges.lm.talk``) embeds every sentence of a reply with the embedded all-MiniLM-L6-v2,
most of what the shipped combination adds to a turn's time. Here its ONNX graph is quantized to int8 by ONNX
Runtime's dynamic quantization (into a temporary folder) and the classifier decides with each embedder: its
accuracy on ``units_test.jsonl``, how many of its decisions flip on the sentences of six sets, and the time to
embed two chat sentences.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration.verifier.talk_units import load_units  # noqa: E402
from combination_signals import load_sets  # noqa: E402
from judges.data.claim_units import claim_units  # noqa: E402
from judges.lm.embedder_onnx import OnnxTransformer, embedder_graph  # noqa: E402
from judges.lm.embeddings import Embedder  # noqa: E402
from judges.lm.files import embedded_embedder_path  # noqa: E402
from judges.lm.onnx_files import open_session  # noqa: E402
from judges.lm.talk import TalkClassifier  # noqa: E402

SETS = ("dialogue-third", "dialogue-seventh", "summaries-fourth", "summaries-fifth", "begin-wow", "q2")
TWO = ["I love dogs, they are so loyal.", "The Labrador is a popular breed in the United States."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder = embedded_embedder_path()
    runners = {"float32": OnnxTransformer(folder), "int8": OnnxTransformer(folder)}
    with tempfile.TemporaryDirectory() as scratch:
        quantized = Path(scratch) / "embedder.int8.onnx"
        quantize_dynamic(str(embedder_graph(folder)), str(quantized), weight_type=QuantType.QInt8)
        runners["int8"].session = open_session(lambda: quantized)
    test = load_units("test")
    truth = np.array([r["checkable"] for r in test], bool)
    sentences = list(dict.fromkeys(u.text.strip() for samples, _ in load_sets(SETS).values()
                                   for s in samples for u in claim_units(s.response)))
    decided, ms = {}, {}
    for name, runner in runners.items():
        classifier = TalkClassifier(embeddings=Embedder(None, name=f"minilm-{name}", encode_tokens=runner.run,
                                                        pooled=True))
        decided[name] = (classifier.checkable([r["sentence"] for r in test]), classifier.checkable(sentences))
        runner.run(TWO)
        started = time.perf_counter()
        for i in range(100):
            runner.run([f"{t} {i}" for t in TWO])
        ms[name] = (time.perf_counter() - started) * 10
    print("| embedder | units_test accuracy | ms to embed two sentences |\n|---|---:|---:|")
    for name in runners:
        print(f"| {name} | {np.mean(decided[name][0] == truth):.4f} | {ms[name]:.1f} |")
    flips = int(np.sum(decided["float32"][1] != decided["int8"][1]))
    print(f"\ndecisions that flip: {int(np.sum(decided['float32'][0] != decided['int8'][0]))} of {len(test)} test "
          f"sentences; {flips} of {len(sentences)} sentences of {', '.join(SETS)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
