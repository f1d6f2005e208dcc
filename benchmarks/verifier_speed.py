"""The shipped groundedness verifier's speed and memory on this machine, printed as a table.

    .venv/bin/python benchmarks/verifier_speed.py            # 200 BEGIN WoW turns, then 100 SummEval summaries
    .venv/bin/python benchmarks/verifier_speed.py --verifier embedded-int8      # the int8 verifier
    .venv/bin/python benchmarks/verifier_speed.py --runtime torch               # float32 on torch, not ONNX Runtime
    .venv/bin/python benchmarks/verifier_speed.py --top-units 0                 # each claim against every unit
    .venv/bin/python benchmarks/verifier_speed.py --stop-at 0                   # every shortlisted unit scored
    .venv/bin/python benchmarks/verifier_speed.py --check-opposites off         # no check against opposites
    .venv/bin/python benchmarks/verifier_speed.py --aggregate mean              # the raw mean, not the combination

FaithfulnessWithVerifier with sentence claims (no LM; its default score, the shipped combination, unless
``--aggregate`` names another), one item at a time as ``evaluate`` scores it, after a
warm-up of 5 items (the model's load is timed apart). Each set is timed twice: as a run reads it (a text read
before, such as an article behind several summaries, is split into sentences once:
``judges.data.language.split_sentences`` keeps its sentences), and with every cache of texts emptied before
each item (sentences, the verifier's scored pairs, the talk classifier's embeddings).
BEGIN turns are a response of 1-3 sentences against a knowledge passage of one chunk; SummEval summaries are
3-5 sentences against a news article of several chunks. RSS is this process's resident memory (the library,
the runtime, the model, the tokenizer, the data read): before any data is read, after the dialogue run, and
after the SummEval run (which reads the articles first). On ONNX Runtime run it twice: the first run of a
fresh cache exports the graph with torch (in the load time and the RSS); the second reads the cached graph
and never imports torch.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from memory import rss_mb  # noqa: E402 - benchmarks/memory.py

from calibration.data.loaders import load_begin, load_summeval  # noqa: E402
from judges import FaithfulnessWithVerifier, SingleTurnSample  # noqa: E402
from judges.metrics.rag.verified import AGGREGATES  # noqa: E402
from judges.data.language import clear_sentence_cache  # noqa: E402
from judges.lm.files import EMBEDDED  # noqa: E402
from judges.lm.talk import shipped_talk_classifier  # noqa: E402
from judges.lm.verifier import RUNTIMES, Verifier  # noqa: E402


def runtime_version(runtime: str) -> str:
    if runtime == "onnx":
        import onnxruntime

        return f"onnxruntime {onnxruntime.__version__}"
    import torch

    return f"torch {torch.__version__}, {torch.get_num_threads()} threads"


def timed(metric, samples, *, first_reading: bool = False) -> tuple[list[float], list[int]]:
    """Seconds per item after a warm-up of 5, and the (unit, claim) pairs the verifier scored for each.
    ``first_reading``: every text the library keeps (sentences, the verifier's scored pairs, the talk
    classifier's embeddings) forgotten before each item, as if no text had been read before: the items were
    read by the pass before."""
    for sample in samples[:5]:
        metric.score(sample)
    seconds, pairs = [], []
    for sample in samples[5:]:
        if first_reading:
            clear_sentence_cache()
            metric.model().forget()
            if metric.aggregate == "combined":  # the mean never loads the classifier's embedder
                shipped_talk_classifier().embedder.forget()
        started = time.perf_counter()
        result = metric.score(sample)
        seconds.append(time.perf_counter() - started)
        pairs.append(sum(row["units_scored"] for row in result.get("verdicts") or []))
    return seconds, pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--begin", type=int, default=200)
    parser.add_argument("--summeval", type=int, default=100)
    parser.add_argument("--verifier", default="embedded", help="'embedded' (float32), 'embedded-int8' or a folder")
    parser.add_argument("--runtime", default="auto", choices=RUNTIMES)
    parser.add_argument("--top-units", type=int, default=inspect.signature(Verifier).parameters["top_units"].default,
                        help="score each claim against its best k units (default %(default)s, as Verifier; 0: all)")
    parser.add_argument("--stop-at", type=float, default=inspect.signature(Verifier).parameters["stop_at"].default,
                        help="stop scoring a claim once a unit reaches this (default %(default)s, as Verifier; 0: never)")
    checked = inspect.signature(Verifier).parameters["check_opposites"].default
    parser.add_argument("--check-opposites", default="on" if checked else "off", choices=("on", "off"),
                        help="on: a claim is also scored against its opposite (default %(default)s, as Verifier)")
    parser.add_argument("--aggregate", default=None, choices=AGGREGATES,
                        help="the metric's aggregate (default: the metric's own, the combination)")
    args = parser.parse_args()
    started = time.perf_counter()
    verifier = Verifier(None if args.verifier == EMBEDDED else args.verifier, runtime=args.runtime,
                        top_units=args.top_units or None, stop_at=args.stop_at or None,
                        check_opposites=args.check_opposites == "on")
    load = time.perf_counter() - started
    metric = FaithfulnessWithVerifier(verifier=args.verifier, aggregate=args.aggregate)
    metric.model = lambda: verifier  # this Verifier's runtime and settings (the metric names models by string)
    metric.score(SingleTurnSample(response="It was completed in 1889.", retrieved_contexts=["It was built in 1889."]))
    memory = [f"{rss_mb():.0f} MB with the library and the model loaded, one item scored, no data read"]
    begin = list(load_begin(parts=("wow",), limit=args.begin + 5).dataset) if args.begin else []

    def summeval():
        return [SingleTurnSample(response=s.response, retrieved_contexts=list(s.reference_contexts))
                for s in load_summeval(limit=args.summeval + 5).dataset] if args.summeval else []

    print(f"\nFaithfulnessWithVerifier (sentence claims, no LM, aggregate={metric.aggregate}), {verifier.name} on "
          f"{verifier.runtime} "
          f"({runtime_version(verifier.runtime)}), top_units={verifier.top_units}, stop_at={verifier.stop_at}, "
          f"check_opposites={verifier.check_opposites}; "
          f"{os.cpu_count()} CPUs; model load {load:.1f} s; torch imported: {'torch' in sys.modules}\n")
    print("| items | n | pairs scored per item (mean) | ms/item median | ms/item p95 | ms/item mean |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, samples in (("BEGIN WoW turns", lambda: begin), ("SummEval summaries vs articles", summeval)):
        samples = samples()
        if not samples:  # --begin 0 or --summeval 0: that set is not timed
            continue
        for first_reading in (False, True):
            seconds, pairs = timed(metric, samples, first_reading=first_reading)
            ordered = sorted(seconds)
            label = f"{name}, each text read for the first time" if first_reading else name
            print(f"| {label} | {len(seconds)} | {statistics.mean(pairs):.1f} | "
                  f"{statistics.median(seconds) * 1000:.1f} | {ordered[int(0.95 * (len(ordered) - 1))] * 1000:.1f} | "
                  f"{statistics.mean(seconds) * 1000:.1f} |")
        memory.append(f"{rss_mb():.0f} MB after the {name} run")
    print("\nRSS: " + "; ".join(memory))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
