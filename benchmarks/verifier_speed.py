"""The shipped groundedness verifier's speed and memory on this machine, printed as a table.

    .venv/bin/python benchmarks/verifier_speed.py            # 200 BEGIN WoW turns, then 100 SummEval summaries
    .venv/bin/python benchmarks/verifier_speed.py --verifier embedded-int8      # the int8 verifier

FaithfulnessWithVerifier with sentence claims (no LM), one item at a time as ``evaluate`` scores it, after a
warm-up of 5 items (the model's load is timed apart). BEGIN turns are a response of 1-3 sentences against a
knowledge passage of one chunk; SummEval summaries are 3-5 sentences against a news article of several
chunks. RSS is this process's resident memory (torch, the library, the model, the tokenizer, the data read):
before any data is read, after the dialogue run, and after the SummEval run (which reads the articles first).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from memory import rss_mb  # noqa: E402 - benchmarks/memory.py

from calibration.data.loaders import load_begin, load_summeval  # noqa: E402
from judges import FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402
from judges.lm.verifier import resolve_verifier  # noqa: E402


def timed(metric, samples) -> list[float]:
    for sample in samples[:5]:
        metric.score(sample)
    out = []
    for sample in samples[5:]:
        started = time.perf_counter()
        metric.score(sample)
        out.append(time.perf_counter() - started)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--begin", type=int, default=200)
    parser.add_argument("--summeval", type=int, default=100)
    parser.add_argument("--verifier", default="embedded", help="'embedded' (float32), 'embedded-int8' or a folder")
    args = parser.parse_args()
    import torch

    started = time.perf_counter()
    verifier = resolve_verifier(args.verifier)
    load = time.perf_counter() - started
    metric = FaithfulnessWithVerifier(verifier=args.verifier)
    metric.score(SingleTurnSample(response="It was completed in 1889.", retrieved_contexts=["It was built in 1889."]))
    memory = [f"{rss_mb():.0f} MB with the library and the model loaded, one item scored, no data read"]
    begin = list(load_begin(parts=("wow",), limit=args.begin + 5).dataset)

    def summeval():
        return [SingleTurnSample(response=s.response, retrieved_contexts=list(s.reference_contexts))
                for s in load_summeval(limit=args.summeval + 5).dataset]

    print(f"\nFaithfulnessWithVerifier (sentence claims, no LM), {verifier.name}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs; model load {load:.1f} s\n")
    print("| items | n | pairs scored per item (mean) | ms/item median | ms/item p95 | ms/item mean |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, samples in (("BEGIN WoW turns", lambda: begin), ("SummEval summaries vs articles", summeval)):
        samples = samples()
        seconds = timed(metric, samples)
        pairs = statistics.mean(len(verifier.units(s.retrieved_contexts)) * len(metric.score(s).claims)
                                for s in samples[5:25])
        ordered = sorted(seconds)
        print(f"| {name} | {len(seconds)} | {pairs:.1f} | {statistics.median(seconds) * 1000:.1f} | "
              f"{ordered[int(0.95 * (len(ordered) - 1))] * 1000:.1f} | {statistics.mean(seconds) * 1000:.1f} |")
        memory.append(f"{rss_mb():.0f} MB after the {name} run")
    print("\nRSS: " + "; ".join(memory))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
