"""evaluate() against a served LM under load, and side by side with Ragas on the same endpoint.

    .venv/bin/python benchmarks/served_load.py                      # throughput: 500 items x Faithfulness
    .venv/bin/python benchmarks/served_load.py --side-by-side        # 100 samples x Faithfulness + AnswerCorrectness

The endpoint is tests/servers.py's MockOpenAI on 127.0.0.1: OpenAI-compatible, a fixed latency per call
(default 200 ms) and scripted valid replies, so the numbers measure this library (threads, DSPy's
adapters and client, accounting, the run file) rather than a model. Throughput: ``evaluate()`` with
1 / 4 / 16 / 64 threads, each item's LM calls through one ``ServedLM`` with ``max_concurrency`` equal to
the threads; the speed-up is items per second over one thread's. Resident memory is sampled every 0.5 s.

Side by side: the 100 samples of benchmarks/peers/samples.py with Faithfulness and AnswerCorrectness, 16
threads (Ragas's default of 16 workers), DSPy's cache off; the Ragas numbers come from
benchmarks/peers/ragas_side_by_side.py (its own environment) when its JSON is there.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from memory import rss_mb  # benchmarks/memory.py

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))

from samples import side_by_side_samples  # noqa: E402
from servers import MockOpenAI  # noqa: E402

from judges import AnswerCorrectness, EvaluationDataset, Faithfulness, evaluate  # noqa: E402
from judges.lm.served import ServedLM, forget_endpoint_limits  # noqa: E402


class MemorySampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.5):
            self.samples.append(rss_mb())


def throughput(n: int, threads_list: list[int], latency: float) -> list[dict]:
    data = EvaluationDataset([{"response": f"The capital is city number {i}. It is large.",
                               "retrieved_contexts": [f"City number {i} is the capital."]} for i in range(n)])
    rows = []
    with MockOpenAI(latency=latency) as mock:
        for threads in threads_list:
            forget_endpoint_limits()
            lm = ServedLM("openai/mock", api_base=mock.url + "/v1", api_key="none", cache=False,
                          max_concurrency=threads)
            sampler = MemorySampler()
            sampler.start()
            before = rss_mb()
            start = time.perf_counter()
            result = evaluate(data, [Faithfulness(lm=lm)], num_threads=threads, progress=False)
            wall = time.perf_counter() - start
            sampler.stop.set()
            sampler.join()
            summary = result.summary()["faithfulness"]
            rows.append({"threads": threads, "items": n, "wall_s": wall, "items_per_s": n / wall,
                         "lm_calls": summary["lm_calls"], "failures": summary["failures"],
                         "max_in_flight": mock.counts["max_in_flight"], "rss_before_mb": before,
                         "rss_max_mb": max(sampler.samples or [before]), "rss_after_mb": rss_mb()})
            mock.counts["max_in_flight"] = 0
            print(f"  {threads:>3} threads: {wall:7.1f} s, {n / wall:6.2f} items/s, {len(result.failures)} failures",
                  flush=True)
    base = rows[0]["items_per_s"]
    for row in rows:
        row["speedup"] = row["items_per_s"] / base
    return rows


def side_by_side(latency: float, threads: int) -> dict:
    samples = side_by_side_samples(100)
    data = EvaluationDataset(samples)
    with MockOpenAI(latency=latency) as mock:
        forget_endpoint_limits()
        lm = ServedLM("openai/mock", api_base=mock.url + "/v1", api_key="none", cache=False, max_concurrency=threads)
        metrics = [Faithfulness(lm=lm), AnswerCorrectness(lm=lm)]
        AnswerCorrectness(lm=lm).embedder  # load the local embedder before the clock starts
        start = time.perf_counter()
        result = evaluate(data, metrics, num_threads=threads, progress=False)
        wall = time.perf_counter() - start
        summary = result.summary()
    return {"library": "dspy-judges", "samples": 100, "threads": threads, "wall_s": wall,
            "lm_calls": mock.counts["requests"],
            "prompt_tokens_per_sample": mock.counts["prompt_tokens"] / 100,
            "completion_tokens_per_sample": mock.counts["completion_tokens"] / 100,
            "failures": {m: summary[m]["failures"] for m in ("faithfulness", "answer_correctness")},
            "mean": {m: summary[m]["mean"] for m in ("faithfulness", "answer_correctness")},
            "embeddings": "local all-MiniLM-L6-v2 (no embedding requests)"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--threads", default="1,4,16,64")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--side-by-side", action="store_true")
    parser.add_argument("--ragas", default=str(ROOT / "benchmarks" / "peers" / "ragas_results.json"))
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    if args.side_by_side:
        ours = side_by_side(args.latency, threads=16)
        rows = [ours]
        ragas_path = Path(args.ragas)
        if ragas_path.is_file():
            rows.append(json.loads(ragas_path.read_text()))
        print(json.dumps(rows, indent=1))
    else:
        rows = throughput(args.items, [int(t) for t in args.threads.split(",")], args.latency)
        print("\n| threads | wall s | items/s | speed-up | LM calls | failures | max in flight | RSS before / max / after MB |")
        print("|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r['threads']} | {r['wall_s']:.1f} | {r['items_per_s']:.2f} | {r['speedup']:.1f}x | {r['lm_calls']} "
                  f"| {r['failures']} | {r['max_in_flight']} | {r['rss_before_mb']:.0f} / {r['rss_max_mb']:.0f} / "
                  f"{r['rss_after_mb']:.0f} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
