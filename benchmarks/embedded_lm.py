"""Embedded defaults on this machine: JSON parse rate, calls per second, resident memory.

Runs a 3-output-field signature 100 times on the embedded SmolLM2-135M (DSPy cache off, so every call
is real) over 100 different BEGIN dialogue turns, then loads the embedded embedder. Prints a table.

    .venv/bin/python benchmarks/embedded_lm.py [--calls 100]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import sys
import time
from pathlib import Path
from typing import Literal

import dspy
from memory import rss_mb  # benchmarks/memory.py

from judges.lm.embeddings import resolve_embedder
from judges.lm.resolve import judge_context, local_lm

BEGIN = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "begin" / "begin_dev_wow.tsv"


class GroundedVerdict(dspy.Signature):
    """Decide whether the response is fully supported by the knowledge passage."""

    knowledge: str = dspy.InputField()
    response: str = dspy.InputField()
    reason: str = dspy.OutputField(desc="one short sentence")
    supported: bool = dspy.OutputField()
    confidence: Literal[1, 2, 3, 4, 5] = dspy.OutputField(desc="1 (guess) to 5 (certain)")




def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    if not BEGIN.exists():
        print(f"needs {BEGIN}", file=sys.stderr)
        return 2
    with open(BEGIN, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))[: args.calls]

    base_rss = rss_mb()
    lm = local_lm(cache=False)
    predict = dspy.Predict(GroundedVerdict)
    parsed = failed = 0
    prompt_tokens = completion_tokens = 0
    rss_samples = []
    start = time.perf_counter()
    with judge_context(lm):
        for i, row in enumerate(rows):
            try:
                out = predict(knowledge=row["knowledge"], response=row["response"])
                ok = isinstance(out.supported, bool) and isinstance(out.confidence, int) and isinstance(out.reason, str)
                parsed += ok
                failed += not ok
            except Exception as err:  # a parse failure is what this benchmark counts
                failed += 1
                print(f"call {i}: {type(err).__name__}: {str(err)[:200]}", file=sys.stderr)
            usage = lm.history[-1]["usage"]
            prompt_tokens += usage.get("prompt_tokens") or 0
            completion_tokens += usage.get("completion_tokens") or 0
            if i % 10 == 9:
                rss_samples.append(rss_mb())
    elapsed = time.perf_counter() - start
    lm_rss = rss_mb()

    t0 = time.perf_counter()
    embedder = resolve_embedder()
    embedder.embed(["warm up"])
    load_s = time.perf_counter() - t0
    texts = [row["response"] for row in rows]
    t0 = time.perf_counter()
    embedder.embed(texts)
    embed_s = time.perf_counter() - t0
    total_rss = rss_mb()

    n = len(rows)
    table = [
        ("LM calls (3-field JSON signature)", f"{n}"),
        ("parsed", f"{parsed}/{n}"),
        ("parse failures", f"{failed}"),
        ("LM calls per second (1 thread of work, 2 cores)", f"{n / elapsed:.2f}"),
        ("seconds per call", f"{elapsed / n:.2f}"),
        ("prompt / completion tokens per call", f"{prompt_tokens / n:.0f} / {completion_tokens / n:.0f}"),
        ("RSS before loading (MB)", f"{base_rss:.0f}"),
        ("RSS with LM loaded, after the calls (MB)", f"{lm_rss:.0f}"),
        ("RSS every 10 calls (MB)", " ".join(f"{r:.0f}" for r in rss_samples)),
        ("embedder load (s)", f"{load_s:.1f}"),
        (f"embed {n} texts (texts/s)", f"{n / embed_s:.0f}"),
        ("RSS with LM + embedder (MB)", f"{total_rss:.0f}"),
        ("peak RSS (MB)", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"),
    ]
    width = max(len(k) for k, _ in table)
    print(f"\nEmbedded defaults on {os.cpu_count()} cores\n")
    print(f"| {'measure'.ljust(width)} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for key, value in table:
        print(f"| {key.ljust(width)} | {value} |")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
