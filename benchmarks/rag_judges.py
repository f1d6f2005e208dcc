"""Cost of each RAG judge on the embedded SmolLM2-135M: LM calls, tokens and seconds per sample, parse
failures. DSPy's cache is off so every call is real.

Samples: BEGIN dialogue turns (knowledge, message, response) for the judges that need no reference;
EVOUNA questions (question, a system's answer, the gold answer) for those that do. EVOUNA has no
retrieved passages, so the GPT-4 system's long answer stands in as the one retrieved context: this
measures cost on realistic text, not judgement quality (calibration measures that).

    .venv/bin/python benchmarks/rag_judges.py [--n 50] [--metrics faithfulness,answer_correctness]
"""

from __future__ import annotations

import argparse
import sys
import time

from dspy.utils.exceptions import AdapterParseError

from calibration.data.loaders import load_begin, load_evouna
from judges.lm.resolve import local_lm
from judges.metrics import rag

BEGIN_JUDGES = {
    "faithfulness": rag.Faithfulness,
    "response_relevancy": rag.ResponseRelevancy,
    "context_utilization": rag.LLMContextPrecisionWithoutReference,
    "context_relevancy": rag.ContextRelevancy,
}
EVOUNA_JUDGES = {
    "answer_correctness": rag.AnswerCorrectness,
    "factual_correctness": rag.FactualCorrectness,
    "semantic_similarity": rag.SemanticSimilarity,
    "context_recall": rag.LLMContextRecall,
    "context_precision": rag.LLMContextPrecisionWithReference,
    "context_entity_recall": rag.ContextEntityRecall,
    "noise_sensitivity": rag.NoiseSensitivity,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--metrics", default=",".join([*BEGIN_JUDGES, *EVOUNA_JUDGES]))
    args = parser.parse_args()
    names = [m.strip() for m in args.metrics.split(",") if m.strip()]
    begin = load_begin(parts=("wow",), limit=args.n).dataset
    evouna = load_evouna(systems=("fid", "chatgpt"), context_system="gpt4", limit=args.n).dataset
    lm = local_lm(cache=False)

    print(f"\n{args.n} samples per metric, embedded SmolLM2-135M-Instruct, 2 cores, DSPy cache off\n")
    print("| metric | data | LM calls/sample | prompt tokens/sample | completion tokens/sample | s/sample | parse failures | other errors | undefined | mean score |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        if name in BEGIN_JUDGES:
            make, data, source = BEGIN_JUDGES[name], begin, "BEGIN"
        elif name in EVOUNA_JUDGES:
            make, data, source = EVOUNA_JUDGES[name], evouna, "EVOUNA"
        else:
            print(f"unknown metric {name}", file=sys.stderr)
            return 2
        judge = make() if name == "semantic_similarity" else make(lm=lm)
        first = len(lm.history)
        parse_failures = errors = undefined = 0
        scores = []
        start = time.perf_counter()
        for sample in data:
            try:
                result = judge.score(sample)
                scores.append(result.score)
                undefined += "undefined_reason" in result.keys()
            except AdapterParseError:
                parse_failures += 1
            except Exception as err:  # counted and shown, the run goes on
                errors += 1
                print(f"{name}: {type(err).__name__}: {str(err)[:160]}", file=sys.stderr)
        elapsed = time.perf_counter() - start
        entries = lm.history[first:]
        n = len(data)
        prompt = sum(e["usage"].get("prompt_tokens") or 0 for e in entries)
        completion = sum(e["usage"].get("completion_tokens") or 0 for e in entries)
        mean = sum(scores) / len(scores) if scores else float("nan")
        print(f"| {name} | {source} | {len(entries) / n:.1f} | {prompt / n:.0f} | {completion / n:.0f} | "
              f"{elapsed / n:.2f} | {parse_failures} | {errors} | {undefined} | {mean:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
