"""The embedded engine's speed: the machine's limit, and what a judge gets of it.

    .venv/bin/python benchmarks/engine_speed.py [--items 20] [--neighbour-items 5] [--neighbours-only]

1. Raw llama.cpp on SmolLM2-135M: prompt evaluation and generation tokens per second, 1 and 2 threads.
2. Faithfulness on BEGIN dialogue turns (DSPy cache off) per engine setting: seconds per item, prompt and
   completion tokens per item, resident memory, and whether every item gets the same verdicts as the first
   setting (temperature 0 is greedy: settings that only reuse work must not change an answer).
   Settings: one context (the first engine: each judge step re-evaluates its instructions), a context per
   prompt family (``prefix_contexts=2``: each step's instructions stay evaluated), llama.cpp's grammar
   sampler (tests the whole vocabulary every token) or ``GreedyGrammarSampler`` (tests the best token
   first), flash attention, 2 or 1 threads.
   Decode threads: 2 always, 1 always, or chosen by timing (``DecodeThreads``, the default).
3. The same beside a neighbour, as a user's own program or a test runner would be: a niced Python loop on
   one core, and a program using both cores (matrix products on 2 BLAS threads). llama.cpp's decode
   threads wait on each other at every layer, and spin while the one they wait for is descheduled.
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

#: The neighbours a judge meets: a niced Python loop on one core, and a program using both cores (matrix
#: products on 2 BLAS threads, as an embedding job, a training loop or a second judge would).
NEIGHBOURS = {
    "beside a busy core": "import os\nos.nice(10)\nwhile True:\n    pass\n",
    "beside a job on both cores": ("import os\nos.environ['OPENBLAS_NUM_THREADS'] = os.environ['OMP_NUM_THREADS'] = '2'\n"
                                   "import numpy as np\na = np.random.rand(600, 600)\nwhile True:\n    a @ a\n"),
}




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


def judge_run(samples, prefix_contexts: int, threads: int, best_first: bool, flash_attn: bool = False,
              adaptive: bool = True) -> dict:
    engine = LlamaCppEngine(embedded_gguf_path(), prefix_contexts=prefix_contexts, n_threads=threads,
                            grammar_best_first=best_first, flash_attn=flash_attn, adaptive_threads=adaptive)
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
    parser.add_argument("--neighbour-items", type=int, default=5,
                        help="items per setting beside a neighbour (two threads beside a job on both cores can "
                             "take minutes an item)")
    parser.add_argument("--neighbours-only", action="store_true", help="skip the raw speed and the runs alone")
    args = parser.parse_args()
    if not args.neighbours_only:
        print(f"{os.cpu_count()} cores\n\n| threads | prompt tokens/s | generated tokens/s |\n|---:|---:|---:|")
        for threads in (1, 2):
            prompt_rate, generation_rate = raw_speed(threads)
            print(f"| {threads} | {prompt_rate:.0f} | {generation_rate:.0f} |", flush=True)
    data = load_begin(parts=("wow",))
    samples = [data.dataset[i] for i in range(max(args.items, args.neighbour_items))]
    settings = [  # label, prefix contexts, threads, grammar best-first, flash attention, adaptive decode threads
        ("one context, llama.cpp's grammar sampler (the first engine)", 1, 2, False, False, False),
        ("a context per prompt family, llama.cpp's grammar sampler", 2, 2, False, False, False),
        ("a context per prompt family, grammar best-first, 2 threads always", 2, 2, True, False, False),
        ("default: + decode threads chosen by timing", 2, 2, True, False, True),
        ("default + flash attention", 2, 2, True, True, True),
        ("1 thread always", 2, 1, True, False, False),
    ]
    rows, first = [], None
    for neighbour_name in ((*NEIGHBOURS,) if args.neighbours_only else (None, *NEIGHBOURS)):
        neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOURS[neighbour_name]]) if neighbour_name else None
        items = samples[:args.neighbour_items] if neighbour_name else samples[:args.items]
        try:
            for label, contexts, threads, best_first, flash, adaptive in (
                    settings if neighbour is None else [settings[i] for i in (2, 3, 5)]):
                result = judge_run(items, contexts, threads, best_first, flash, adaptive)
                first = first or result["verdicts"]
                same = sum(a == b for a, b in zip(first, result["verdicts"]))
                rows.append(((f"{neighbour_name}: " if neighbour_name else "") + label, result, same, len(items)))
                print(f"  {rows[-1][0]}: {result['s_per_item']:.2f} s/item", flush=True)
        finally:
            if neighbour is not None:
                neighbour.kill()
                neighbour.wait()
    print("\nFaithfulness on BEGIN turns, DSPy cache off\n")
    print("| engine | items | s / item | prompt / completion tokens per item | same verdicts as the first row | RSS MB |")
    print("|---|---:|---:|---|---:|---:|")
    for label, result, same, n in rows:
        print(f"| {label} | {n} | {result['s_per_item']:.2f} | {result['prompt_tokens']:.0f} / "
              f"{result['completion_tokens']:.0f} | {same}/{n} | {result['rss_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
