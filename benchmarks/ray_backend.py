"""evaluate(backend="ray") vs the thread pool on this machine, printed as a table.

    .venv/bin/python benchmarks/ray_backend.py                   # 100,000 rows x 3 non-LLM metrics; 50 rows x Faithfulness
    .venv/bin/python benchmarks/ray_backend.py --rows 20000 --llm-rows 200

Workloads: (1) non-LLM metrics (ExactMatch, StringPresence, NonLLMStringSimilarity) on generated rows;
(2) Faithfulness through a served endpoint: tests/servers.py's MockOpenAI on 127.0.0.1 with a fixed
latency per call (default 200 ms), 16 LM items in flight (``num_threads=16``, ``max_concurrency=16``).
The Ray instance is local (2 actors on 2 cores) and started once before the timings; its start-up time is
printed apart. Wall seconds include writing the run file. The point is what a cluster would add, measured
where it is cheapest to see: on one machine Ray can only add overhead.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from servers import MockOpenAI  # noqa: E402

from judges import EvaluationDataset, ExactMatch, Faithfulness, NonLLMStringSimilarity, StringPresence, evaluate  # noqa: E402
from judges.served import _LIMITS, ServedLM  # noqa: E402

KEY = "JUDGES_BENCH_KEY"


def timed(label: str, backend: str, data, metrics, **kwargs) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        result = evaluate(data, metrics, backend=backend, run_file=Path(folder) / "run.jsonl", progress=False, **kwargs)
        wall = time.perf_counter() - start
    items = len(result.records)
    return {"workload": label, "backend": backend, "items": items, "failures": len(result.failures),
            "wall_s": wall, "items_per_s": items / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--llm-rows", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    os.environ[KEY] = "bench"
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray is imported: 127.0.0.1 only
    import ray

    start = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    startup = time.perf_counter() - start
    rows = EvaluationDataset([{"response": f"answer {i % 7} of {i % 3}", "reference": f"answer {i % 5}"}
                              for i in range(args.rows)])
    metrics = [ExactMatch(), StringPresence(), NonLLMStringSimilarity()]
    table = [timed(f"{args.rows:,} rows x 3 non-LLM metrics", backend, rows, metrics) for backend in ("threads", "ray")]
    rag = EvaluationDataset([{"response": f"The answer is {i}. It is blue.", "retrieved_contexts": [f"The answer is {i}."]}
                             for i in range(args.llm_rows)])
    with MockOpenAI(latency=args.latency) as mock:
        for backend in ("threads", "ray"):
            _LIMITS.clear()
            lm = ServedLM("openai/mock", api_base=mock.url + "/v1", api_key_env=KEY, cache=False, max_concurrency=16)
            table.append(timed(f"{args.llm_rows} rows x Faithfulness, served, {args.latency * 1000:.0f} ms/call",
                               backend, rag, [Faithfulness()], lm=lm, num_threads=16))
        calls = mock.counts["requests"]
    ray.shutdown()
    print(f"\nLocal Ray start-up: {startup:.1f} s ({os.cpu_count()} CPUs); the mock endpoint answered {calls} calls\n")
    print("| workload | backend | items | failures | wall s | items/s |")
    print("|---|---|---:|---:|---:|---:|")
    for row in table:
        print(f"| {row['workload']} | {row['backend']} | {row['items']:,} | {row['failures']} | {row['wall_s']:.1f} "
              f"| {row['items_per_s']:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
