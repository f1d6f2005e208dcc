"""The main job on the embedded defaults: score the bundled samples with LLM judges and text metrics.

    python -m judges.demo [--samples FILE.jsonl] [--metrics faithfulness,rouge_score,...]

Runs on SmolLM2-135M-Instruct (in-process llama.cpp) and all-MiniLM-L6-v2, prints one row per sample and
the mean of each metric, then the LM calls, tokens and time it took. A 135M judge is fast and always
parses, but its verdicts are weak: ``calibration`` measures and corrects that against human labels.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib import resources

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _catalogue():
    from judges import (
        AnswerCorrectness,
        BleuScore,
        Faithfulness,
        LLMContextPrecisionWithReference,
        NonLLMStringSimilarity,
        RougeScore,
        SemanticSimilarity,
    )

    return {
        "faithfulness": Faithfulness,
        "context_precision": LLMContextPrecisionWithReference,
        "answer_correctness": AnswerCorrectness,
        "semantic_similarity": SemanticSimilarity,
        "rouge_score": RougeScore,
        "bleu_score": BleuScore,
        "string_similarity": NonLLMStringSimilarity,
    }


def _fit(text: str, width: int) -> str:
    """``text`` cut and padded to ``width`` terminal columns (CJK characters take two)."""
    import unicodedata

    out, used = "", 0
    for char in text:
        w = 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        if used + w > width - 2:
            break
        out, used = out + char, used + w
    return out + " " * (width - used)


def main(argv: list[str] | None = None) -> int:
    catalogue = _catalogue()
    parser = argparse.ArgumentParser(prog="python -m judges.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", help="a JSONL dataset (default: the bundled samples)")
    parser.add_argument("--metrics", default=",".join(catalogue),
                        help=f"comma-separated, from: {', '.join(catalogue)}")
    args = parser.parse_args(argv)

    import dspy

    from judges import EvaluationDataset, SampleValidationError
    from judges.models import local_lm

    names = [m.strip() for m in args.metrics.split(",") if m.strip()]
    unknown = [m for m in names if m not in catalogue]
    if unknown:
        parser.error(f"unknown metric(s): {', '.join(unknown)}; choose from {', '.join(catalogue)}")
    path = args.samples or resources.files("judges") / "data" / "demo_samples.jsonl"
    dataset = EvaluationDataset.from_jsonl(path)
    metrics = {name: catalogue[name]() for name in names}
    try:  # every problem with every sample, before the first LM call
        for metric in metrics.values():
            metric.validate_dataset(dataset)
    except SampleValidationError as err:
        print(f"invalid dataset {path}:\n{err}", file=sys.stderr)
        return 2

    lm = local_lm()
    print(f"{len(dataset)} samples from {path}\nLM: {lm.model} (in-process llama.cpp) | metrics: {', '.join(names)}\n")
    header = f"{'#':>2}  {'user_input':<42}" + "".join(f"{n[:12]:>13}" for n in names)
    print(header)
    print("-" * len(header))
    totals = {name: [] for name in names}
    start = time.perf_counter()
    with dspy.context(lm=lm), dspy.track_usage() as usage:
        for i, sample in enumerate(dataset):
            row = f"{i:>2}  {_fit(sample.user_input, 42)}"
            for name, metric in metrics.items():
                score = metric.score(sample).score
                totals[name].append(score)
                row += f"{score:>13.3f}"
            print(row, flush=True)
    elapsed = time.perf_counter() - start
    print("-" * len(header))
    print(f"{'':>2}  {'mean':<42}" + "".join(f"{sum(v) / len(v):>13.3f}" for v in totals.values()))
    tokens = usage.get_total_tokens().get(lm.model, {})
    cached = sum(1 for entry in lm.history if not entry.get("usage"))  # DSPy's cache hits report no usage
    print(f"\n{len(lm.history)} LM calls ({cached} answered from DSPy's cache), {tokens.get('prompt_tokens', 0)} "
          f"prompt + {tokens.get('completion_tokens', 0)} completion tokens, {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
