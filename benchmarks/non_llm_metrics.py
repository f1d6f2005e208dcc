"""Throughput of the deterministic metrics, and what our wrapper adds over the library call it wraps.

For each metric: samples per second through ``metric.score(sample)`` on N generated samples (English and
Chinese mixed, seeded), the same inputs through the bare library call, and the per-sample difference in
microseconds (validation + Prediction + dispatch). Target: under 20 us per sample.

    .venv/bin/python benchmarks/non_llm_metrics.py [--n 10000]
"""

from __future__ import annotations

import argparse
import random
import time

from rapidfuzz.distance import Levenshtein

from judges import (
    AIMessage,
    BleuScore,
    ChrfScore,
    DataCompyScore,
    ExactMatch,
    HumanMessage,
    IDBasedContextPrecision,
    IDBasedContextRecall,
    MultiTurnSample,
    NonLLMContextPrecisionWithReference,
    NonLLMContextRecall,
    NonLLMStringSimilarity,
    RougeScore,
    SingleTurnSample,
    StringPresence,
    ToolCall,
    ToolCallAccuracy,
    ToolCallF1,
    ToolMessage,
)

EN_WORDS = "the tower city river museum was built in by an engineer who designed bridge paris france year".split()
ZH_CHARS = list("埃菲尔铁塔位于巴黎是法国的首都著名地标之一建于年由工程师设计")


def sentence(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return " ".join(rng.choice(EN_WORDS) for _ in range(rng.randint(6, 16))) + "."
    return "".join(rng.choice(ZH_CHARS) for _ in range(rng.randint(8, 24))) + "。"


def perturb(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(0, 4)):
        chars[rng.randrange(len(chars))] = rng.choice(ZH_CHARS + list("abcde "))
    return "".join(chars)


def single_turn(rng: random.Random) -> SingleTurnSample:
    reference = sentence(rng)
    contexts = [sentence(rng) for _ in range(rng.randint(1, 4))]
    return SingleTurnSample(
        response=perturb(reference, rng),
        reference=reference,
        retrieved_contexts=[perturb(c, rng) for c in contexts] + [sentence(rng)],
        reference_contexts=contexts,
        retrieved_context_ids=[rng.randint(0, 20) for _ in range(5)],
        reference_context_ids=[rng.randint(0, 20) for _ in range(3)],
    )


def multi_turn(rng: random.Random) -> MultiTurnSample:
    names = ["search", "book", "cancel", "lookup"]
    reference = [ToolCall(name=rng.choice(names), args={"id": rng.randint(0, 3)}) for _ in range(rng.randint(1, 4))]
    calls = [c if rng.random() < 0.7 else ToolCall(name=rng.choice(names), args={"id": 9}) for c in reference]
    messages = [HumanMessage(content="help me")]
    for call in calls:
        messages += [AIMessage(content="", tool_calls=[call]), ToolMessage(content="ok")]
    return MultiTurnSample(user_input=messages, reference_tool_calls=reference)


def table(rng: random.Random) -> SingleTurnSample:
    rows = [(i, round(rng.random() * 100, 2), rng.choice(["a", "b", "c"])) for i in range(5)]
    text = "id,amount,name\n" + "".join(f"{i},{a},{n}\n" for i, a, n in rows)
    changed = text.replace(",a\n", ",b\n", 1)
    return SingleTurnSample(response=changed, reference=text)


def timed(fn, items, repeats: int = 3) -> float:
    """Best of ``repeats`` passes (as timeit does): the least disturbed by the rest of the machine."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--n-tables", type=int, default=1_000, help="DataCompyScore samples (datacompy is slow)")
    args = parser.parse_args()
    rng = random.Random(0)
    singles = [single_turn(rng) for _ in range(args.n)]
    multis = [multi_turn(rng) for _ in range(args.n)]
    tables = [table(rng) for _ in range(args.n_tables)]

    bleu, rouge, chrf = BleuScore(), RougeScore(), ChrfScore()
    similarity = NonLLMStringSimilarity()
    # (metric, samples, the bare library call on the same sample, or None where the metric is the logic)
    rows = [
        (bleu, singles, None),
        (rouge, singles, lambda s: rouge._scorer.score(s.reference, s.response)),
        (chrf, singles, lambda s: chrf._chrf.sentence_score(s.response, [s.reference])),
        (ExactMatch(), singles, lambda s: s.response == s.reference),
        (StringPresence(), singles, lambda s: s.reference in s.response),
        (similarity, singles, lambda s: Levenshtein.normalized_similarity(s.response, s.reference)),
        (NonLLMContextPrecisionWithReference(), singles, None),
        (NonLLMContextRecall(), singles, None),
        (IDBasedContextPrecision(), singles, None),
        (IDBasedContextRecall(), singles, None),
        (ToolCallAccuracy(), multis, None),
        (ToolCallF1(), multis, None),
        (DataCompyScore(), tables, None),
    ]
    print(f"\n{args.n} generated samples ({args.n_tables} tables for DataCompyScore); one thread; best of 3 passes\n")
    print("| metric | samples/s | library call samples/s | wrapper overhead us/sample | overhead vs _score us/sample |")
    print("|---|---:|---:|---:|---:|")
    for metric, samples, raw in rows:
        repeats = 1 if isinstance(metric, DataCompyScore) else 3
        inner = timed(metric._score, samples, repeats)
        full = timed(metric.score, samples, repeats)
        n = len(samples)
        if raw is not None:
            bare = timed(raw, samples, repeats)
            lib, over = f"{n / bare:,.0f}", f"{(full - bare) / n * 1e6:.1f}"
        else:
            lib, over = "-", "-"
        print(f"| {type(metric).__name__} | {n / full:,.0f} | {lib} | {over} | {(full - inner) / n * 1e6:.1f} |")


if __name__ == "__main__":
    main()
