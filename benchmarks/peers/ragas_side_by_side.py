"""Ragas 0.4.3 side of the side-by-side benchmark: ``ragas.evaluate()`` with faithfulness and
answer_correctness on the 100 samples of ``samples.side_by_side_samples(100)``, against the local
OpenAI-compatible mock of ``tests/servers.py`` (0.2 s per chat completion; no real LM is ever called).

Run from /work/main with the peers venv (see README.md beside this file for making it):

    timeout 25m /work/peers/.venv-ragas/bin/python benchmarks/peers/ragas_side_by_side.py \
        --out benchmarks/peers/ragas_results.json

Records wall time of the ``evaluate()`` call, the chat-completion requests the mock served (LM calls),
prompt / completion tokens as the mock counts them (one token per whitespace-separated word of the joined
message contents and of the reply), embedding requests and tokens, failures (NaN or missing score) per
metric, the mean score per metric and the concurrency Ragas ran with, into a JSON file and a summary.

Wiring: ``ragas.llms.llm_factory("mock", client=openai.AsyncOpenAI(base_url=mock.url + "/v1"))`` (the
Instructor adapter, which Ragas 0.4.3 puts in ``instructor.Mode.JSON`` for OpenAI clients) and
``ragas.embeddings.base.embedding_factory("openai", model="mock", client=<same client>)``, passed to the legacy
``ragas.evaluate(dataset=EvaluationDataset.from_list(samples), metrics=[faithfulness,
answer_correctness], llm=..., embeddings=...)`` with Ragas's default ``RunConfig`` (max_workers=16).

In Mode.JSON every request is a plain prompt that quotes the output's JSON Schema twice (Instructor's system
message and Ragas's own prompt text) plus ``response_format={"type": "json_object"}``; no tools, no
``json_schema`` response format. The stock ``MockOpenAI`` answers with an instance of the last outermost
schema the prompt quotes; ``RagasMock`` below also answers a schema sent as ``response_format.json_schema``
or as ``tools[].function.parameters`` (returning a tool call then) and tallies how each request carried its
schema. Latency, in-flight tracking and token counting are the mock's own, unchanged.
"""

from __future__ import annotations

import os

os.environ["RAGAS_DO_NOT_TRACK"] = "true"  # no telemetry; set before ragas is imported
for _key in [k for k in os.environ if k.endswith("_API_KEY") or k.endswith("_BASE_URL")]:
    del os.environ[_key]  # nothing may reach a real provider by accident

import argparse  # noqa: E402
import importlib.metadata as md  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
import warnings  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
MAIN = HERE.parent.parent
sys.dont_write_bytecode = True  # leave no __pycache__ in tests/ or here
sys.path.insert(0, str(MAIN / "tests"))
sys.path.insert(0, str(HERE))

from samples import side_by_side_samples  # noqa: E402
from servers import MockOpenAI, chat_text, completion, schema_instance, scripted_reply  # noqa: E402

DEFAULT_OUT = HERE / "ragas_results.json"
METRICS = ("faithfulness", "answer_correctness")
NOTE = ("Legacy ragas.metrics.faithfulness / answer_correctness instances: the 0.4.3 collections metrics "
        "(ragas.metrics.collections.Faithfulness, ...) derive from SimpleBaseMetric, not ragas.metrics.base.Metric, "
        "and evaluate() rejects them with a TypeError. The Instructor adapter sends each request in Mode.JSON: "
        "system + user messages that quote the output JSON Schema as text, response_format={'type': 'json_object'}, "
        "no tools, no json_schema response format; the mock answers with schema_instance() of the top-level schema.")


def outermost_schema_in_prompt(prompt: str) -> dict[str, Any] | None:
    """The last top-level JSON schema a prompt quotes: scans left to right, and a ``{...}`` that decodes to an
    object schema is taken whole (its nested ``$defs`` / ``properties`` objects are skipped)."""
    decoder = json.JSONDecoder()
    found, position = None, 0
    while True:
        start = prompt.find("{", position)
        if start < 0:
            return found
        try:
            value, end = decoder.raw_decode(prompt, start)
        except ValueError:
            position = start + 1
            continue
        if isinstance(value, dict) and ("properties" in value or "$defs" in value) \
                and value.get("type", "object") == "object":
            found = value
        position = end  # a decoded object (schema or not, e.g. an example) is skipped whole


class RagasMock(MockOpenAI):
    """``MockOpenAI`` answering with an instance of the request's top-level output schema; counts as the
    mock does, plus how each request carried its schema (``formats``) and which schema it was
    (``schemas``, by title), and ``retries`` (requests that carry an earlier assistant turn)."""

    def __init__(self, latency: float = 0.2, model: str = "mock"):
        super().__init__(latency=latency, model=model)
        self.formats: Counter = Counter()
        self.schemas: Counter = Counter()

    class handler(MockOpenAI.handler):
        def do_POST(self):
            owner = self.server.owner
            request = json.loads(self._body() or b"{}")
            if self.path.rstrip("/").endswith("/embeddings"):
                return self._embeddings(owner, request)
            messages = request.get("messages", [])
            prompt = "\n".join(str(m.get("content") or "") for m in messages)  # as MockOpenAI counts it
            with owner.lock:
                owner.in_flight += 1
                owner.counts["max_in_flight"] = max(owner.counts["max_in_flight"], owner.in_flight)
                owner.starts.append(time.monotonic())
            try:
                time.sleep(owner.latency)
            finally:
                with owner.lock:
                    owner.in_flight -= 1
            response_format = request.get("response_format") or {}
            tools = [t for t in request.get("tools") or [] if t.get("type") == "function"]
            tool_name, schema = None, None
            if response_format.get("type") == "json_schema":
                schema, kind = (response_format.get("json_schema") or {}).get("schema"), "response_format.json_schema"
            elif tools:
                function = tools[0]["function"]
                tool_name, schema, kind = function["name"], function.get("parameters") or {}, "tools"
            else:
                schema = outermost_schema_in_prompt(prompt)
                kind = f"prompt_text+response_format.{response_format.get('type')}" if schema is not None \
                    else "no_schema"
            if schema is not None:
                text = json.dumps(schema_instance(schema))
            else:  # not Ragas's: whatever the stock mock would say
                text = chat_text(scripted_reply(prompt), response_format.get("type") in ("json_object", "json_schema"))
            body = completion(owner.model, text, len(prompt.split()))
            if tool_name is not None:
                message = body["choices"][0]["message"]
                message["content"] = None
                message["tool_calls"] = [{"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                                          "function": {"name": tool_name, "arguments": text}}]
                body["choices"][0]["finish_reason"] = "tool_calls"
            with owner.lock:
                owner.counts["requests"] += 1
                owner.counts["prompt_tokens"] += body["usage"]["prompt_tokens"]
                owner.counts["completion_tokens"] += body["usage"]["completion_tokens"]
                owner.formats[kind] += 1
                owner.schemas[(schema or {}).get("title", "?")] += 1
                if any(m.get("role") == "assistant" for m in messages):
                    owner.counts["retries"] += 1
            self._send(200, json.dumps(body).encode())


class JobErrors(logging.Handler):
    """Collects the errors Ragas logs for failed jobs (it returns NaN for them when raise_exceptions=False)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage()[:500])


class Overtime(Exception):
    pass


def number(value: Any) -> float | None:
    """A score as a float, None when missing or NaN."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def run(n: int, latency: float, time_limit: int, progress: bool) -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as seen_at_import:
        warnings.simplefilter("always")
        import openai
        from ragas import EvaluationDataset, evaluate
        from ragas.embeddings.base import embedding_factory
        from ragas.llms import llm_factory
        from ragas.metrics import (  # legacy metrics: see NOTE
            answer_correctness,
            faithfulness,
        )
        from ragas.run_config import RunConfig

    samples = side_by_side_samples(n)
    errors = JobErrors()
    logging.getLogger("ragas").addHandler(errors)
    run_config = RunConfig()  # Ragas's defaults, as evaluate() would make them
    caught: list[str] = []

    def overtime(signum, frame):
        raise Overtime(f"evaluate() still running after {time_limit} s")

    with RagasMock(latency=latency, model="mock") as mock:
        client = openai.AsyncOpenAI(base_url=mock.url + "/v1", api_key="none")
        llm = llm_factory("mock", client=client)
        embeddings = embedding_factory("openai", model="mock", client=client)
        dataset = EvaluationDataset.from_list(samples)
        previous = signal.signal(signal.SIGALRM, overtime)
        signal.alarm(time_limit)
        started = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                result = evaluate(dataset=dataset, metrics=[faithfulness, answer_correctness], llm=llm,
                                  embeddings=embeddings, run_config=run_config, show_progress=progress)
            wall = time.perf_counter() - started
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        caught = sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in [*seen_at_import, *seen]})
        counts, formats, schemas = Counter(mock.counts), Counter(mock.formats), Counter(mock.schemas)
    # the mock is stopped here (its context manager shut the server down)

    rows = list(result.scores)
    per_metric: dict[str, Any] = {}
    for name in METRICS:
        values = [number(row.get(name)) for row in rows] + [None] * (n - len(rows))
        good = [v for v in values if v is not None]
        per_metric[name] = {"scored": len(good), "failures": n - len(good),
                            "mean": round(sum(good) / len(good), 6) if good else None,
                            "min": min(good) if good else None, "max": max(good) if good else None}
    calls = counts["requests"]
    return {
        "library": "ragas", "ragas_version": version("ragas"),
        "versions": {p: version(p) for p in ("ragas", "openai", "instructor", "langchain-core",
                                             "langchain-openai", "langchain-community", "datasets", "numpy")},
        "python": platform.python_version(),
        "samples": n, "metrics": list(METRICS),
        "mock": {"latency_s": latency, "model": "mock", "server": "tests/servers.py MockOpenAI subclass RagasMock"},
        "wiring": {
            "llm": "ragas.llms.llm_factory('mock', client=openai.AsyncOpenAI(base_url=mock.url+'/v1')) -> "
                   f"{type(llm).__module__}.{type(llm).__name__} (instructor Mode.JSON)",
            "embeddings": "ragas.embeddings.base.embedding_factory('openai', model='mock', client=<same AsyncOpenAI>) -> "
                          f"{type(embeddings).__module__}.{type(embeddings).__name__}",
            "evaluate": "ragas.evaluate(dataset=EvaluationDataset.from_list(samples), "
                        "metrics=[ragas.metrics.faithfulness, ragas.metrics.answer_correctness], llm=..., embeddings=...)",
            "note": NOTE,
            "request_formats": dict(formats), "schemas_requested": dict(schemas),
        },
        "concurrency": {"run_config_max_workers": run_config.max_workers, "run_config_timeout_s": run_config.timeout,
                        "run_config_max_retries": run_config.max_retries,
                        "observed_max_in_flight": counts["max_in_flight"]},
        "wall_s": round(wall, 3),
        "lm_calls": calls, "lm_calls_per_sample": calls / n,
        "lm_retries": counts["retries"],
        "prompt_tokens": counts["prompt_tokens"], "completion_tokens": counts["completion_tokens"],
        "prompt_tokens_per_sample": counts["prompt_tokens"] / n,
        "completion_tokens_per_sample": counts["completion_tokens"] / n,
        "embedding_requests": counts["embedding_requests"], "embedding_tokens": counts["embedding_tokens"],
        "embedding_requests_per_sample": counts["embedding_requests"] / n,
        "failures": {name: per_metric[name]["failures"] for name in METRICS},
        "mean_scores": {name: per_metric[name]["mean"] for name in METRICS},
        "per_metric": per_metric,
        "job_errors_logged": len(errors.messages), "job_error_examples": errors.messages[:5],
        "warnings": caught,
    }


def summary(r: dict[str, Any]) -> str:
    lines = [f"Ragas {r['ragas_version']}: evaluate() on {r['samples']} samples, metrics {', '.join(r['metrics'])}, "
             f"mock latency {r['mock']['latency_s']} s, max_workers {r['concurrency']['run_config_max_workers']} "
             f"(observed max in flight {r['concurrency']['observed_max_in_flight']})",
             f"  wall               {r['wall_s']:.2f} s",
             f"  LM calls           {r['lm_calls']} ({r['lm_calls_per_sample']:.2f}/sample, {r['lm_retries']} retries)",
             f"  prompt tokens      {r['prompt_tokens']} ({r['prompt_tokens_per_sample']:.1f}/sample)",
             f"  completion tokens  {r['completion_tokens']} ({r['completion_tokens_per_sample']:.1f}/sample)",
             f"  embeddings         {r['embedding_requests']} requests, {r['embedding_tokens']} tokens",
             f"  request formats    {r['wiring']['request_formats']}"]
    for name in r["metrics"]:
        m = r["per_metric"][name]
        mean = "n/a" if m["mean"] is None else f"{m['mean']:.4f}"
        lines.append(f"  {name:<18} mean {mean}, failures {m['failures']}/{r['samples']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results file (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2, help="mock seconds per chat completion")
    parser.add_argument("--time-limit", type=int, default=1200, help="seconds evaluate() may take (default 20 min)")
    parser.add_argument("--progress", action="store_true", help="show Ragas's progress bar")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    results = run(args.samples, args.latency, args.time_limit, args.progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(summary(results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
