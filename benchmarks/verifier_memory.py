"""Where the shipped verifier's memory goes: resident memory after each import and step, printed as a table.

    .venv/bin/python benchmarks/verifier_memory.py                  # torch, then ONNX Runtime, ~1 min
    .venv/bin/python benchmarks/verifier_memory.py --runtime onnx

Each runtime runs in a fresh child process of this script, which reads ``benchmarks/memory.py``'s ``rss_mb()``
after each stage, in this order:

  torch  Python alone; ``import torch``; ``import transformers``; the library (``judges``); the BERT classifier
         built on PyTorch's ``meta`` device (no weight allocated: what importing transformers' BERT modules
         costs); the shipped verifier loaded on torch (its float32 weights and the tokenizer); after scoring
         ``--turns`` BEGIN WoW turns with ``FaithfulnessWithVerifier`` (sentence claims, no LM)
  onnx   Python alone; the library; the shipped verifier loaded on ONNX Runtime (the default; reads the cached
         graph, exporting it first with torch if the cache is empty, which this row then includes); after the
         same turns

So it answers why the torch rows of ``benchmarks/verifier_speed.py`` sit near the 500 MB target whatever the
verifier does (docs/verifier.md, "Speed and memory"). Runs in one environment differed here by 2 MB on torch
and up to 25 MB on ONNX Runtime; two environments of the same package versions by up to 100 MB. Needs the
shared BEGIN data (``../shared/data``) and, for the ONNX rows, onnxruntime (the ``embeddings`` extra). The
last line says whether torch was imported by the end of each child.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from memory import rss_mb  # noqa: E402 - benchmarks/memory.py

#: The child's lines that carry a reading start with this (a library may print other lines).
MARK = "RSS-STAGE"


def stages(runtime: str, turns: int) -> None:
    """Run one runtime's stages in this process, printing "MARK<TAB>stage<TAB>MB" after each."""
    def mark(stage: str) -> None:
        print(f"{MARK}\t{stage}\t{rss_mb():.0f}", flush=True)

    mark("Python alone")
    if runtime == "torch":
        import torch

        mark("import torch")
        import transformers

        mark("import transformers")
    from judges import FaithfulnessWithVerifier
    from judges.lm.verifier import Verifier

    mark("the library (import judges)")
    if runtime == "torch":
        from judges.lm.files import embedded_embedder_path

        config = transformers.AutoConfig.from_pretrained(str(embedded_embedder_path()), num_labels=1,
                                                         local_files_only=True)
        with torch.device("meta"):
            transformers.AutoModelForSequenceClassification.from_config(config)
        mark("BERT classifier on the meta device (no weights)")
    from calibration.data.loaders import load_begin

    verifier = Verifier(runtime=runtime)
    mark(f"shipped verifier loaded ({verifier.runtime}: weights, tokenizer)")
    metric = FaithfulnessWithVerifier()
    metric.model = lambda: verifier  # this Verifier's runtime (the metric names models by string)
    for sample in load_begin(parts=("wow",), limit=turns).dataset:
        metric.score(sample)
    mark(f"after {turns} BEGIN turns scored")
    print(f"{MARK}-TORCH\t{'yes' if 'torch' in sys.modules else 'no'}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtime", choices=("torch", "onnx", "both"), default="both")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--child", choices=("torch", "onnx"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.turns < 0:
        parser.error(f"--turns must be >= 0, got {args.turns}")
    if args.child:
        stages(args.child, args.turns)
        return 0
    rows, notes = [], []
    for runtime in ("torch", "onnx") if args.runtime == "both" else (args.runtime,):
        done = subprocess.run([sys.executable, __file__, "--child", runtime, "--turns", str(args.turns)],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if done.returncode != 0:
            print(f"the {runtime} child failed (exit {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
            return done.returncode
        before = None
        for line in done.stdout.splitlines():
            fields = line.split("\t")
            if fields[0] == f"{MARK}-TORCH":
                notes.append(f"{runtime}: torch imported by the end: {fields[1]}")
            elif fields[0] == MARK:
                mb = float(fields[2])
                added = "" if before is None else f"{mb - before:+.0f}"
                rows.append(f"| {runtime} | {fields[1]} | {mb:.0f} | {added} |")
                before = mb
    print("| runtime | stage | RSS (MB) | added (MB) |\n|---|---|---:|---:|\n" + "\n".join(rows))
    print("\n" + "; ".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
