"""A DSPy program optimised with our metrics: a small RAG program over 20 facts, before and after
BootstrapFewShot, MIPROv2 (light) and GEPA, measured on held-out questions.

    .venv/bin/python experiments/optimise_program.py                       # embedded LM, the verifier as judge
    .venv/bin/python experiments/optimise_program.py --program-lm openai/gpt-4o-mini --metric llm \\
        --judge-lm openai/gpt-4o-mini --optimizers bootstrap,gepa

The program retrieves the two facts sharing most words with the question (``experiments/data/rag_facts.jsonl``:
20 invented facts, each with a question and its short answer, written for this script) and answers in a
sentence from them (``dspy.Predict("context, question -> answer")``). The metric is one ``CombinedMetric``:
the product of a grounding judge and ``StringPresence`` of the short answer (case ignored), so an answer
scores only when it is both grounded in the retrieved facts and right; threshold 0.5.

  --metric verifier   grounding by ``FaithfulnessWithVerifier(aggregate="mean")``, the trained verifier: no LM (the default)
  --metric llm        grounding by ``Faithfulness(lm=--judge-lm)``, an LLM judge with its own LM

The same metric object goes to every optimizer and to ``dspy.Evaluate``; nothing is set per optimizer. The
program's LM is ``--program-lm`` (``dspy.configure``), GEPA's reflection LM ``--reflection-lm`` (default: the
program's); the judge never borrows the program's LM. Questions are split in two (seeded): ``--n-train``
for the optimizers (also GEPA's and MIPROv2's validation set), the rest held out. Printed: the held-out
mean score, the share at or above the threshold, the program's LM calls and minutes per optimizer, the
demos each kept (every one scored at or above the threshold when it was bootstrapped), and the metric's
own counts (empty outputs, degraded judgments, repeated samples it did not judge again). Results go to
``--out`` (``results.json``). Numbers and their command: docs/optimising.md.

Reproducible: the split, MIPROv2 and GEPA take ``--seed``, and so does the LMs' sampling (``seed=``, which the
embedded engine honours at any temperature), so two runs of one command print the same table with or without
DSPy's cache; the minutes are printed under it.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

import dspy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judges import (  # noqa: E402
    CombinedMetric,
    Faithfulness,
    FaithfulnessWithVerifier,
    StringPresence,
)
from judges.data.language import tokenize  # noqa: E402
from judges.lm.resolve import resolve_adapter, resolve_lm  # noqa: E402

FACTS = Path(__file__).resolve().parent / "data" / "rag_facts.jsonl"
OPTIMIZERS = ("bootstrap", "mipro", "gepa")
THRESHOLD = 0.5


def load_facts() -> list[dict[str, str]]:
    return [json.loads(line) for line in FACTS.read_text(encoding="utf-8").splitlines() if line.strip()]


class RetrieveThenAnswer(dspy.Module):
    """The two facts sharing most words with the question, then an answer in a sentence from them."""

    def __init__(self, facts: list[str], k: int = 2):
        super().__init__()
        self.facts, self.k = facts, k
        self.answer = dspy.Predict("context, question -> answer")

    def retrieve(self, question: str) -> list[str]:
        words = set(tokenize(question))
        return sorted(self.facts, key=lambda fact: -len(words & set(tokenize(fact))))[: self.k]

    def forward(self, question: str):
        context = self.retrieve(question)
        answer = self.answer(context="\n".join(context), question=question).answer
        return dspy.Prediction(answer=answer, context=context)


def make_metric(kind: str, judge_lm: Any = None):
    """One metric for every optimizer: grounding x the short answer present, threshold 0.5."""
    # The verifier's mean, the default when docs/optimising.md's table was printed (the combination came later).
    grounded = FaithfulnessWithVerifier(aggregate="mean") if kind == "verifier" else Faithfulness(lm=judge_lm)
    combined = CombinedMetric({"grounded": grounded, "correct": StringPresence(ignore_case=True)}, rule="product")
    return combined.as_metric(threshold=THRESHOLD, field_map={"response": "pred.answer",
                                                               "retrieved_contexts": "pred.context",
                                                               "reference": "example.short_answer"})


def split(facts: list[dict[str, str]], n_train: int, seed: int) -> tuple[list[dspy.Example], list[dspy.Example]]:
    examples = [dspy.Example(question=f["question"], short_answer=f["answer"]).with_inputs("question") for f in facts]
    random.Random(seed).shuffle(examples)
    return examples[:n_train], examples[n_train:]


def held_out(program: dspy.Module, metric, test: list[dspy.Example]) -> dict[str, Any]:
    result = dspy.Evaluate(devset=test, metric=metric, num_threads=1, display_progress=False)(program)
    scores = [float(score) for _, _, score in result.results]
    return {"mean": sum(scores) / len(scores), "passing": sum(bool(s) for *_, s in result.results) / len(scores),
            "scores": scores, "answers": [getattr(p, "answer", None) for _, p, _ in result.results]}


def optimizer_for(name: str, metric, program_lm, reflection_lm, seed: int):
    if name == "bootstrap":
        return dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=3, max_labeled_demos=0, max_rounds=1)
    if name == "mipro":
        return dspy.MIPROv2(metric=metric, auto="light", task_model=program_lm, prompt_model=program_lm,
                            max_bootstrapped_demos=3, max_labeled_demos=0, num_threads=1, seed=seed, verbose=False)
    if name == "gepa":
        return dspy.GEPA(metric=metric, reflection_lm=reflection_lm, max_metric_calls=60, num_threads=1,
                         reflection_minibatch_size=3, seed=seed)
    raise ValueError(f"--optimizers: {name!r} is not one of {list(OPTIMIZERS)}")


def compile_with(name: str, optimizer, program: dspy.Module, train: list[dspy.Example]) -> dspy.Module:
    """MIPROv2 and GEPA validate on the training questions too (20 questions leave none to spare)."""
    if name in ("mipro", "gepa"):
        return optimizer.compile(program, trainset=train, valset=train)
    return optimizer.compile(program, trainset=train)


def run(program_lm, reflection_lm, metric_kind: str = "verifier", judge_lm: Any = None,
        optimizers: tuple[str, ...] = OPTIMIZERS, n_train: int = 10, seed: int = 0) -> dict[str, Any]:
    """Each optimizer's program against the uncompiled one on the held-out questions (see the module
    docstring); returns the rows printed."""
    facts = load_facts()
    train, test = split(facts, n_train, seed)
    rows: dict[str, Any] = {}
    with dspy.context(lm=program_lm, adapter=resolve_adapter(program_lm)):
        for name in ("none", *optimizers):
            metric = make_metric(metric_kind, judge_lm)
            program = RetrieveThenAnswer([f["fact"] for f in facts])
            started, calls_before = time.perf_counter(), len(program_lm.history)
            if name != "none":
                program = compile_with(name, optimizer_for(name, metric, program_lm, reflection_lm, seed), program,
                                       train)
            row = held_out(program, metric, test)
            demos = [demo.answer for _, predictor in program.named_predictors() for demo in predictor.demos]
            instructions = program.answer.signature.instructions
            row.update(minutes=(time.perf_counter() - started) / 60,
                       program_lm_calls=len(program_lm.history) - calls_before, demos=demos,
                       instructions=instructions, empty_outputs=metric.empty_outputs, degraded=metric.degraded,
                       repeats=metric.repeats)
            rows[name] = row
            print(f"  {name:<10} held-out mean {row['mean']:.3f}, at or above {THRESHOLD}: {row['passing']:.0%} "
                  f"({len(test)} questions); {len(demos)} demos; {row['minutes']:.1f} min", flush=True)
    return {"train": [e.question for e in train], "test": [e.question for e in test], "rows": rows}


def table(result: dict[str, Any]) -> str:
    """The results as a Markdown table: the same for two runs of one command (times are printed apart)."""
    lines = ["| program | held-out mean | at or above 0.5 | demos kept | program LM calls | "
             "empty outputs | degraded | repeats not judged again |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, row in result["rows"].items():
        lines.append(f"| {'uncompiled' if name == 'none' else name} | {row['mean']:.3f} | {row['passing']:.0%} | "
                     f"{len(row['demos'])} | {row['program_lm_calls']} | {row['empty_outputs']} | "
                     f"{row['degraded']} | {row['repeats']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program-lm", default="embedded", help="the program's LM: 'embedded' or a LiteLLM string")
    parser.add_argument("--reflection-lm", default=None, help="GEPA's reflection LM (default: the program's)")
    parser.add_argument("--metric", choices=("verifier", "llm"), default="verifier")
    parser.add_argument("--judge-lm", default="embedded", help="the LLM judge's own LM (--metric llm)")
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS), help=f"comma-separated, of {list(OPTIMIZERS)}")
    parser.add_argument("--n-train", type=int, default=10,
                        help="questions for the optimizers (of 20; the rest held out)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/optimise", help="where results.json goes")
    args = parser.parse_args(argv)
    optimizers = tuple(name for name in re.split(r"[,\s]+", args.optimizers) if name)
    for name in optimizers:
        if name not in OPTIMIZERS:
            parser.error(f"--optimizers: {name!r} is not one of {list(OPTIMIZERS)}")
    if not 2 <= args.n_train <= 18:
        parser.error("--n-train must be between 2 and 18 (20 questions, some held out)")
    # Seeded sampling: the optimizers sample at temperature 1 (instruction proposals, rollouts), and an unseeded
    # sampler makes every run, and every fresh DSPy cache, another experiment.
    program_lm = resolve_lm(args.program_lm).copy(seed=args.seed)
    reflection_lm = resolve_lm(args.reflection_lm).copy(seed=args.seed) if args.reflection_lm else program_lm
    print(f"program LM {getattr(program_lm, 'model', program_lm)}; metric: grounding by "
          f"{'the verifier' if args.metric == 'verifier' else 'Faithfulness on ' + args.judge_lm} x the answer present")
    result = run(program_lm, reflection_lm, args.metric, args.judge_lm, optimizers, args.n_train, args.seed)
    result["command"] = " ".join(["experiments/optimise_program.py", *(argv if argv is not None else sys.argv[1:])])
    print("\n" + table(result))
    print("minutes: " + ", ".join(f"{'uncompiled' if name == 'none' else name} {row['minutes']:.1f}"
                                  for name, row in result["rows"].items()))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"\nwritten: {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
