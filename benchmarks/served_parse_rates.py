"""Parse rates of every LLM judge family over HTTP: which adapter to use with a served LM.

    .venv/bin/python benchmarks/served_parse_rates.py [--per-family 8]

Starts llama-cpp-python's OpenAI-compatible server on 127.0.0.1 serving the embedded SmolLM2-135M (the
stand-in for a hosted LM; nothing else runs on this machine) and scores each family's judge through
``openai/smollm2`` with its API base, DSPy's cache off, with three ways of asking for structured output:

* ChatAdapter: DSPy's default; ``[[ ## field ## ]]`` text, falling back to JSON mode when it does not parse;
* JSONAdapter: a JSON object asked for in the prompt (the server is not told the schema);
* JSONAdapter + ``response_schema="json_object"``: the output schema sent as llama.cpp's
  ``{"type": "json_object", "schema": ...}``, which the server compiles to a grammar.

Samples: BEGIN dialogue turns bundled with the package (Faithfulness, AspectCritic), EVOUNA answers from
../shared/data (AnswerAccuracy), the shortest tau-bench trajectories (AgentGoalAccuracyWithoutReference,
tool output cut to 300 characters) and hand-written SQL pairs (LLMSQLEquivalence). A sample "parses" when
the judge returns a score; anything else is counted with its exception type.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import dspy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from servers import LlamaServer  # noqa: E402

from calibration.data.loaders import load_begin_slice, load_evouna, load_tau_bench  # noqa: E402
from judges import (  # noqa: E402
    AgentGoalAccuracyWithoutReference,
    AnswerAccuracy,
    AspectCritic,
    Faithfulness,
    LLMSQLEquivalence,
    SingleTurnSample,
)
from judges.lm.files import embedded_gguf_path  # noqa: E402
from judges.lm.served import ServedLM  # noqa: E402

SQL_PAIRS = [  # (candidate, reference, schema): our own examples
    ("SELECT name FROM users WHERE age > 30", "SELECT name FROM users WHERE age >= 31", "table users: name TEXT, age INT"),
    ("SELECT COUNT(*) FROM orders", "SELECT COUNT(id) FROM orders", "table orders: id INT, total REAL"),
    ("SELECT city, SUM(total) FROM orders GROUP BY city", "SELECT city, COUNT(total) FROM orders GROUP BY city",
     "table orders: id INT, city TEXT, total REAL"),
    ("SELECT DISTINCT city FROM users", "SELECT city FROM users GROUP BY city", "table users: id INT, city TEXT"),
    ("SELECT * FROM users ORDER BY age", "SELECT * FROM users ORDER BY age DESC", "table users: id INT, age INT"),
    ("SELECT name FROM users WHERE id IN (SELECT user_id FROM orders)",
     "SELECT DISTINCT u.name FROM users u JOIN orders o ON o.user_id = u.id",
     "table users: id INT, name TEXT\ntable orders: id INT, user_id INT"),
    ("SELECT MAX(total) FROM orders", "SELECT total FROM orders ORDER BY total DESC LIMIT 1", "table orders: id INT, total REAL"),
    ("SELECT name FROM users WHERE name LIKE 'A%'", "SELECT name FROM users WHERE name >= 'A' AND name < 'B'",
     "table users: id INT, name TEXT"),
]


def family_samples(n: int) -> dict[str, tuple]:
    begin = list(load_begin_slice().dataset)[:n]
    evouna = list(load_evouna(limit=n * 3).dataset)[:n]
    trajectories = sorted(load_tau_bench().dataset, key=lambda s: len(json.dumps(s.to_dict())))[: max(2, n // 2)]
    for sample in trajectories:
        for message in sample.user_input:
            if getattr(message, "content", None) and len(message.content) > 300:
                message.content = message.content[:300]
    sql = [SingleTurnSample(response=c, reference=r, reference_contexts=[s]) for c, r, s in SQL_PAIRS[:max(2, n // 2)]]
    return {
        "rag (Faithfulness)": (lambda lm, ad: Faithfulness(lm=lm, adapter=ad), begin),
        "dual judge (AnswerAccuracy)": (lambda lm, ad: AnswerAccuracy(lm=lm, adapter=ad), evouna),
        "custom (AspectCritic)": (lambda lm, ad: AspectCritic(name="grounded", lm=lm, adapter=ad,
                                                              definition="Is the response supported by the context?"),
                                  begin),
        "agent (AgentGoalAccuracyWithoutReference)": (
            lambda lm, ad: AgentGoalAccuracyWithoutReference(lm=lm, adapter=ad), trajectories),
        "domain (LLMSQLEquivalence)": (lambda lm, ad: LLMSQLEquivalence(lm=lm, adapter=ad), sql),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-family", type=int, default=8)
    parser.add_argument("--out", default=None, help="write the table as JSON here")
    args = parser.parse_args()
    families = family_samples(args.per_family)
    ways = {"ChatAdapter": ({}, dspy.ChatAdapter()), "JSONAdapter": ({}, dspy.JSONAdapter()),
            "JSONAdapter + server schema": ({"response_schema": "json_object"}, None)}
    rows = []
    with LlamaServer(embedded_gguf_path(), "/tmp/served_parse_rates.server.log") as server:
        for family, (make, samples) in families.items():
            for way, (options, adapter) in ways.items():
                lm = ServedLM(server.model, api_base=server.api_base, api_key="none", cache=False, max_tokens=384,
                              **options)
                outcomes: Counter = Counter()
                start = time.perf_counter()
                for sample in samples:
                    try:
                        make(lm, adapter).score(sample)
                        outcomes["parsed"] += 1
                    except Exception as err:  # noqa: BLE001 - counted by kind
                        outcomes[type(err).__name__] += 1
                seconds = time.perf_counter() - start
                calls = len(lm.history)
                tokens = [sum((h.get("usage") or {}).get(k, 0) or 0 for h in lm.history)
                          for k in ("prompt_tokens", "completion_tokens")]
                row = {"family": family, "way": way, "samples": len(samples), "parsed": outcomes["parsed"],
                       "failures": {k: v for k, v in outcomes.items() if k != "parsed"}, "lm_calls": calls,
                       "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "seconds": seconds}
                rows.append(row)
                print(f"{family:<44} {way:<28} parsed {row['parsed']}/{row['samples']}  calls {calls:>3}  "
                      f"{seconds / len(samples):5.1f} s/sample  {row['failures'] or ''}", flush=True)
    print("\n| family | ChatAdapter | JSONAdapter | JSONAdapter + server schema |\n|---|---|---|---|")
    for family in families:
        cells = [next(f"{r['parsed']}/{r['samples']}" for r in rows if r["family"] == family and r["way"] == way)
                 for way in ways]
        print(f"| {family} | " + " | ".join(cells) + " |")
    totals = {way: (sum(r["parsed"] for r in rows if r["way"] == way), sum(r["samples"] for r in rows if r["way"] == way))
              for way in ways}
    print("| all | " + " | ".join(f"{p}/{n} ({p / n:.0%})" for p, n in totals.values()) + " |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
