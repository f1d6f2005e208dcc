"""The embedded engine's speed: the machine's limit, and what a judge gets of it.

    .venv/bin/python benchmarks/engine_speed.py [--items 20]

1. Raw llama.cpp on SmolLM2-135M: prompt evaluation and generation tokens per second, 1 and 2 threads.
2. Faithfulness on BEGIN dialogue turns (DSPy cache off) per engine setting: seconds per item, prompt and
   completion tokens per item, resident memory, and whether every item gets the same verdicts as the first
   setting (temperature 0 is greedy: settings that only reuse work must not change an answer).
   Settings: one context (the old engine: each judge step re-evaluates its instructions), a context per
   prompt family (``prefix_contexts=2``: each step's instructions stay evaluated), with 2 or 1 threads.
3. The same beside one busy process (a niced Python loop on one core), as a user's own program or a test
   runner would be: llama.cpp's threads wait on each other when one core is taken.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import dspy
from memory import rss_mb  # benchmarks/memory.py

from calibration.datasets import load_begin
from judges import Faithfulness
from judges.models import LlamaCppEngine, embedded_gguf_path

BUSY = "import os\nos.nice(10)\nwhile True:\n    pass\n"




def raw_speed(threads: int) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) of llama.cpp itself."""
    from llama_cpp import Llama

    llama = Llama(model_path=str(embedded_gguf_path()), n_ctx=2048, n_threads=threads, n_batch=512, verbose=False)
    prompt = " ".join(["The quick brown fox jumps over the lazy dog."] * 50)
    tokens = llama.tokenize(prompt.encode())[:500]
    start = time.perf_counter()
    llama.eval(tokens)
    prompt_rate = len(tokens) / (time.perf_counter() - start)
    llama.reset()
    llama.eval(tokens[:20])
    start = time.perf_counter()
    generated = 0
    for _ in llama.generate(tokens[:20], temp=0.0, reset=False):
        generated += 1
        if generated >= 128:
            break
    generation_rate = generated / (time.perf_counter() - start)
    llama.close()
    return prompt_rate, generation_rate


def judge_run(samples, prefix_contexts: int, threads: int) -> dict:
    engine = LlamaCppEngine(embedded_gguf_path(), prefix_contexts=prefix_contexts, n_threads=threads)
    lm = dspy.LM("llamacpp/bench", engine=engine, temperature=0.0, max_tokens=1024, cache=False)
    judge = Faithfulness(lm=lm)
    start = time.perf_counter()
    verdicts = []
    for sample in samples:
        try:
            result = judge.score(sample)
            verdicts.append([v["supported"] for v in result.verdicts])
        except Exception as err:  # noqa: BLE001 - counted as a different outcome
            verdicts.append(type(err).__name__)
    seconds = time.perf_counter() - start
    usage = [h["usage"] for h in lm.history]
    out = {"s_per_item": seconds / len(samples), "verdicts": verdicts, "rss_mb": rss_mb(),
           "prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usage) / len(samples),
           "completion_tokens": sum(u.get("completion_tokens", 0) for u in usage) / len(samples)}
    engine.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=20)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores\n\n| threads | prompt tokens/s | generated tokens/s |\n|---:|---:|---:|")
    for threads in (1, 2):
        prompt_rate, generation_rate = raw_speed(threads)
        print(f"| {threads} | {prompt_rate:.0f} | {generation_rate:.0f} |", flush=True)
    data = load_begin(parts=("wow",))
    samples = [data.dataset[i] for i in range(args.items)]
    settings = [("one context (before)", 1, 2), ("a context per prompt family", 2, 2),
                ("a context per prompt family, 1 thread", 2, 1)]
    rows, first = [], None
    for busy in (False, True):
        neighbour = subprocess.Popen([sys.executable, "-c", BUSY]) if busy else None
        try:
            for label, contexts, threads in settings if not busy else [settings[0], settings[1], settings[2]]:
                result = judge_run(samples, contexts, threads)
                first = first or result["verdicts"]
                same = sum(a == b for a, b in zip(first, result["verdicts"]))
                rows.append((("beside a busy core: " if busy else "") + label, result, same))
                print(f"  {rows[-1][0]}: {result['s_per_item']:.2f} s/item", flush=True)
        finally:
            if neighbour is not None:
                neighbour.kill()
                neighbour.wait()
    print(f"\nFaithfulness on {args.items} BEGIN turns, DSPy cache off\n")
    print("| engine | s / item | prompt / completion tokens per item | same verdicts as the first row | RSS MB |")
    print("|---|---:|---|---:|---:|")
    for label, result, same in rows:
        print(f"| {label} | {result['s_per_item']:.2f} | {result['prompt_tokens']:.0f} / "
              f"{result['completion_tokens']:.0f} | {same}/{args.items} | {result['rss_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
