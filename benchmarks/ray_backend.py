"""evaluate()'s backends on this machine (threads, processes, Ray), printed as tables.

    .venv/bin/python benchmarks/ray_backend.py                   # 100,000 rows x 3 non-LLM metrics; 50 rows x Faithfulness
    .venv/bin/python benchmarks/ray_backend.py --rows 20000 --llm-rows 200
    .venv/bin/python benchmarks/ray_backend.py --backends threads --llm-rows 0     # the machinery's cost alone

Workloads: (1) non-LLM metrics (ExactMatch, StringPresence, NonLLMStringSimilarity) on generated rows, with
the metrics' own cost measured apart (every item scored in a plain loop, no evaluate) so the table shows
what the machinery adds per item: (wall - the plain loop's time) / items;
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

from judges import (  # noqa: E402
    EvaluationDataset,
    ExactMatch,
    Faithfulness,
    NonLLMStringSimilarity,
    StringPresence,
    evaluate,
)
from judges.lm.served import ServedLM, forget_endpoint_limits  # noqa: E402

KEY = "JUDGES_BENCH_KEY"


def timed(label: str, backend: str, data, metrics, metric_seconds: float | None = None, **kwargs) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        result = evaluate(data, metrics, backend=backend, run_file=Path(folder) / "run.jsonl", progress=False, **kwargs)
        wall = time.perf_counter() - start
    items = len(result.records)
    return {"workload": label, "backend": backend, "items": items, "failures": len(result.failures),
            "wall_s": wall, "items_per_s": items / wall,
            "overhead_us": None if metric_seconds is None else (wall - metric_seconds) / items * 1e6}


def plain_loop_seconds(data, metrics) -> float:
    """Every item scored in a plain loop in this process: the metrics' own cost, no evaluate around it."""
    start = time.perf_counter()
    for sample in data:
        for metric in metrics:
            metric.score(sample)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--llm-rows", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--backends", default="threads,processes,ray",
                        help="comma-separated, of threads, processes, ray (processes: the non-LLM workload only)")
    args = parser.parse_args()
    backends = args.backends.split(",")
    os.environ[KEY] = "bench"
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray is imported: 127.0.0.1 only
    import ray

    startup = None
    if "ray" in backends:
        start = time.perf_counter()
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
        startup = time.perf_counter() - start
    rows = EvaluationDataset([{"response": f"answer {i % 7} of {i % 3}", "reference": f"answer {i % 5}"}
                              for i in range(args.rows)])
    metrics = [ExactMatch(), StringPresence(), NonLLMStringSimilarity()]
    own = plain_loop_seconds(rows, metrics)
    table = [timed(f"{args.rows:,} rows x 3 non-LLM metrics", backend, rows, metrics, own) for backend in backends]
    rag = EvaluationDataset([{"response": f"The answer is {i}. It is blue.", "retrieved_contexts": [f"The answer is {i}."]}
                             for i in range(args.llm_rows)])
    calls = 0
    with MockOpenAI(latency=args.latency) as mock:
        for backend in [b for b in backends if b != "processes" and args.llm_rows]:
            forget_endpoint_limits()
            lm = ServedLM("openai/mock", api_base=mock.url + "/v1", api_key_env=KEY, cache=False, max_concurrency=16)
            table.append(timed(f"{args.llm_rows} rows x Faithfulness, served, {args.latency * 1000:.0f} ms/call",
                               backend, rag, [Faithfulness()], lm=lm, num_threads=16))
        calls = mock.counts["requests"]
    if startup is not None:
        ray.shutdown()
        print(f"\nLocal Ray start-up: {startup:.1f} s ({os.cpu_count()} CPUs)")
    n_items = args.rows * len(metrics)
    print(f"The metrics' own cost, a plain loop in this process: {own:.1f} s for {n_items:,} items "
          f"({own / n_items * 1e6:.1f} us/item); the mock endpoint answered {calls} calls\n")
    print("| workload | backend | items | failures | wall s | items/s | machinery us/item over the metric |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in table:
        overhead = f"{row['overhead_us']:.1f}" if row["overhead_us"] is not None else ""
        print(f"| {row['workload']} | {row['backend']} | {row['items']:,} | {row['failures']} | {row['wall_s']:.1f} "
              f"| {row['items_per_s']:,.0f} | {overhead} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
