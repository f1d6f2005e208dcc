"""evaluate() on this machine: LLM judges on the embedded LM with 1 and 4 threads and a cached rerun, and
how non-LLM metrics scale with the number of samples. Prints tables; asserts nothing.

    .venv/bin/python benchmarks/evaluate_bench.py [--n 50] [--skip-llm]

Data: EVOUNA questions with a system's answer and the gold answer; the GPT-4 system's long answer is the
retrieved context faithfulness reads (EVOUNA has no retrieval). Each LLM run starts with an empty DSPy
cache in a temporary folder; the cached rerun reuses the 4-thread run's cache.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time

import dspy

from calibration.data.loaders import load_evouna
from judges import (
    AnswerCorrectness,
    BleuScore,
    EvaluationDataset,
    ExactMatch,
    Faithfulness,
    NonLLMStringSimilarity,
    RougeScore,
    SingleTurnSample,
)
from judges.lm.resolve import local_lm
from judges.run.evaluate import evaluate


def llm_runs(n: int) -> None:
    data = load_evouna(systems=("fid", "chatgpt"), context_system="gpt4", limit=n).dataset
    print(f"\nFaithfulness + AnswerCorrectness, {n} EVOUNA samples, embedded SmolLM2-135M (in-process, one model)\n")
    print("| run | threads | wall s | LM calls | prompt tokens/sample | completion tokens/sample | failures |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    walls = {}
    for label, threads, fresh_cache in (("cold", 1, True), ("cold", 4, True), ("cached rerun", 4, False)):
        if fresh_cache:
            dspy.configure_cache(disk_cache_dir=tempfile.mkdtemp(prefix="dspy-cache-"))
        lm = local_lm()  # DSPy cache on
        result = evaluate(data, [Faithfulness(lm=lm), AnswerCorrectness(lm=lm)], num_threads=threads, progress=False)
        summary = result.summary()
        calls = sum(s["lm_calls"] for k, s in summary.items() if k != "_overall")
        prompt = sum(s["input_tokens"] for k, s in summary.items() if k != "_overall")
        completion = sum(s["output_tokens"] for k, s in summary.items() if k != "_overall")
        walls[(label, threads)] = result.wall_seconds
        for index, metric, reason in result.failures:
            print(f"  {label}/{threads}: sample {index} {metric}: {reason[:200]}", file=sys.stderr)
        print(f"| {label} | {threads} | {result.wall_seconds:.1f} | {calls} | {prompt / n:.0f} | {completion / n:.0f} | "
              f"{len(result.failures)} |", flush=True)
    speedup = walls[("cold", 4)] / walls[("cached rerun", 4)]
    print(f"\ncached rerun is {speedup:.0f}x faster than the cold 4-thread run (LM calls answered by DSPy's cache "
          f"report no tokens). One in-process model serialises its calls, so 4 threads cannot beat 1 on the "
          f"embedded LM; they do help with a remote LM.")


def scaling() -> None:
    rng = random.Random(0)
    words = "the tower city river museum was built in by an engineer who designed bridge paris".split()

    def sample():
        ref = " ".join(rng.choice(words) for _ in range(12))
        return SingleTurnSample(user_input="q", response=ref.replace("the", "a", 1), reference=ref)

    metrics = [BleuScore(), RougeScore(), ExactMatch(), NonLLMStringSimilarity()]
    print("\nNon-LLM mix (BLEU, ROUGE-L, exact match, Levenshtein), 4 threads\n")
    print("| samples | wall s | samples/s | wall s per 1,000 samples |")
    print("|---:|---:|---:|---:|")
    for n in (10, 100, 1000):
        data = EvaluationDataset([sample() for _ in range(n)])
        start = time.perf_counter()
        evaluate(data, metrics, num_threads=4, progress=False)
        wall = time.perf_counter() - start
        print(f"| {n} | {wall:.3f} | {n / wall:,.0f} | {wall / n * 1000:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--skip-llm", action="store_true")
    args = parser.parse_args()
    scaling()
    if not args.skip_llm:
        llm_runs(args.n)


if __name__ == "__main__":
    main()
