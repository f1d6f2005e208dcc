"""A scoring demo on the embedded defaults (`make demo-metrics`): the bundled en/zh/ja samples, seven metrics.

    python -m judges_app.demo [--samples FILE.jsonl] [--metrics faithfulness,rouge_score,...]

Runs on SmolLM2-135M-Instruct (in-process llama.cpp) and all-MiniLM-L6-v2, prints one row per sample and
the mean of each metric, then the LM calls, tokens and time it took. A 135M judge is fast and always
parses, but its verdicts are weak: ``calibration`` measures and corrects that against human labels.

Must not be imported by the library: it is a script's body.
"""

from __future__ import annotations

import argparse
import sys
import time
import unicodedata
from importlib import resources

import dspy

from judges import (
    AnswerCorrectness,
    BleuScore,
    EvaluationDataset,
    Faithfulness,
    LLMContextPrecisionWithReference,
    NonLLMStringSimilarity,
    RougeScore,
    SampleValidationError,
    SemanticSimilarity,
)
from judges.lm.resolve import local_lm

#: The demo's metrics by the names ``--metrics`` takes.
DEMO_METRICS = {
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
    out, used = "", 0
    for char in text:
        w = 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        if used + w > width - 2:
            break
        out, used = out + char, used + w
    return out + " " * (width - used)


def main(argv: list[str] | None = None) -> int:
    catalogue = DEMO_METRICS
    parser = argparse.ArgumentParser(prog="python -m judges_app.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", help="a JSONL dataset (default: the bundled samples)")
    parser.add_argument("--metrics", default=",".join(catalogue),
                        help=f"comma-separated, from: {', '.join(catalogue)}")
    args = parser.parse_args(argv)
    names = [m.strip() for m in args.metrics.split(",") if m.strip()]
    unknown = [m for m in names if m not in catalogue]
    if unknown:
        parser.error(f"unknown metric(s): {', '.join(unknown)}; choose from {', '.join(catalogue)}")
    path = args.samples or resources.files("judges_app") / "data" / "demo_samples.jsonl"
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
