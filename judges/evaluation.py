"""evaluate(): many metrics over a dataset, in a thread pool, with accounting and resumable run files.

    result = evaluate(dataset, [Faithfulness(), RougeScore()], num_threads=4, run_file="runs/r1.jsonl")
    result.summary()          # per metric: mean, std, quantiles, failures, undefined, tokens, cost, latency
    result.to_pandas()        # one row per sample, a column per metric
    result.failures           # (sample, metric, reason) of every sample that could not be scored

* Every sample is validated against every metric's required fields before the first LM call; all
  problems are reported at once (``DatasetValidationError``).
* Work items are (sample, metric) pairs run ``num_threads`` at a time, each on a daemon thread (DSPy's
  settings and the LM/embedder overrides travel with each item). Transient LM errors (rate limit,
  timeout, server, transport) are retried with exponential backoff. A failed sample never stops the run
  unless ``strict=True``.
* ``timeout`` (seconds per item, counted from when the item starts, not from when it was queued):
  metrics without an LM or embedder run in a killable child process (``judges.workers``), so an item
  that overruns is stopped and recorded as ``TimeoutError``. An LLM judge cannot be stopped mid-call:
  its item is recorded as failed and abandoned (its late result discarded; the thread is a daemon and
  never keeps the process alive), but the call runs on until the LM returns, and an in-process model
  stays busy until then.
* A ``PermanentLMError`` (a ``ServedLM`` told it no retry can help: bad request, authentication,
  billing) stops the run: no new items start, the ones in flight finish and are recorded, and
  ``RunStopped`` is raised with one message (``.result`` holds what finished). The item that met the
  refusal is not recorded as failed, so a rerun after the fix resumes with it.
* ``retry_failed=True`` with a ``run_file``: items recorded as failed are run again (the new record
  replaces the old one); finished items are still skipped.
* ``run_file``: each finished item is appended (and flushed) as one JSON line the moment it finishes; a
  rerun with the same file skips what is there, so a run killed at any point (even SIGKILL) resumes
  without losing or redoing finished work, and ends with the same table as an uninterrupted run. A run
  file made for other samples or metric settings is refused rather than mixed in.
* ``backend="ray"`` scores the same items on Ray actors (``judges.ray_backend``): the same records, run
  file, resume and refusal handling; metrics and the LM are rebuilt on workers from their settings.
* Accounting per metric: LM calls and input/output tokens (DSPy's usage tracker; answers served from
  DSPy's cache cost none), cost from a ``price_table`` ``{model: {"input": $ per 1M tokens, "output":
  ...}}``, latency p50/p95, and overall throughput.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import hashlib
import itertools
import json
import math
import queue
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
import numpy as np
from dspy.utils.callback import BaseCallback
from tqdm.auto import tqdm

from judges.base import Metric
from judges.dataset import EvaluationDataset
from judges.models import default_embeddings, resolve_lm
from judges.ray_backend import run_on_ray
from judges.samples import SampleValidationError
from judges.served import PermanentLMError
from judges.workers import ProcessWorker, rebuildable

RUN_FILE_VERSION = 1

#: Exceptions worth another try: the provider or the network, not the sample.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, ConnectionError)
try:  # DSPy's public LM errors
    from dspy.utils.exceptions import (
        LMLockTimeoutError,
        LMRateLimitError,
        LMServerError,
        LMTimeoutError,
        LMTransportError,
    )

    TRANSIENT_ERRORS += (LMRateLimitError, LMServerError, LMTimeoutError, LMTransportError, LMLockTimeoutError)
except ImportError:  # pragma: no cover - older DSPy
    pass


class RunStopped(RuntimeError):
    """The LM refused in a way no retry fixes (``PermanentLMError``: bad request, authentication ...): the
    run stopped early. Finished items are recorded (and in the run file); rerun to resume once it is fixed."""

    def __init__(self, message: str, result: EvaluationResult | None = None):
        super().__init__(message)
        self.result = result


class DatasetValidationError(ValueError):
    """Samples lack what some metrics need; ``errors`` holds one SampleValidationError per metric."""

    def __init__(self, errors: list[SampleValidationError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


# ------------------------------------------------------------------------------------------------
# Identity of samples and metrics (what makes a run file reusable)
# ------------------------------------------------------------------------------------------------
def sample_key(sample) -> str:
    text = json.dumps(sample.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def metric_config(metric: Metric) -> dict[str, Any]:
    """The metric's class and constructor settings (``get_params``), for run-file identity."""
    return {"class": type(metric).__name__, "settings": _jsonable(metric.get_params())}


def _metric_names(metrics: Sequence[Metric]) -> list[str]:
    names = [m.name for m in metrics]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"evaluate: two metrics share the name(s) {duplicates}; give them distinct names")
    return names


# ------------------------------------------------------------------------------------------------
# Result
# ------------------------------------------------------------------------------------------------
@dataclass
class EvaluationResult:
    """Per-(sample, metric) records plus the run's wall time; everything else is derived from them."""

    records: list[dict[str, Any]]
    metric_names: list[str]
    n_samples: int
    wall_seconds: float
    price_table: dict[str, dict[str, float]] = field(default_factory=dict)

    def _by_metric(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["metric"] == name]

    @property
    def failures(self) -> list[tuple[int, str, str]]:
        return [(r["sample"], r["metric"], r["error"]) for r in self.records if r.get("error")]

    def scores(self, name: str) -> list[float | None]:
        """The metric's score per sample (None where it failed)."""
        table: list[float | None] = [None] * self.n_samples
        for r in self._by_metric(name):
            table[r["sample"]] = r.get("score")
        return table

    def cost(self, record: dict[str, Any]) -> float | None:
        return usage_cost(record.get("usage") or {}, self.price_table)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per metric: n, mean/std/min/quartiles/max over defined scores, failures, undefined, LM calls
        (paid in this run) and cached calls (answered by DSPy's cache: free now, but an interrupted earlier
        run may have paid for them), tokens, cost (None without prices), latency p50/p95 (s); plus an
        ``_overall`` entry."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.metric_names:
            records = self._by_metric(name)
            ok = [r for r in records if r.get("score") is not None and not r.get("undefined_reason")]
            values = np.array([r["score"] for r in ok], dtype=float)
            latencies = np.array([r["latency_s"] for r in records if r.get("latency_s") is not None], dtype=float)
            costs = [self.cost(r) for r in records]
            stats: dict[str, Any] = {
                "n": len(records),
                "scored": len(ok),
                "failures": sum(1 for r in records if r.get("error")),
                "undefined": sum(1 for r in records if r.get("undefined_reason")),
                "mean": float(values.mean()) if len(values) else None,
                "std": float(values.std()) if len(values) else None,
            }
            for label, q in (("min", 0), ("p25", 25), ("median", 50), ("p75", 75), ("max", 100)):
                stats[label] = float(np.percentile(values, q)) if len(values) else None
            stats.update(
                lm_calls=sum(r.get("lm_calls", 0) for r in records),
                cached_calls=sum(r.get("cached_calls", 0) for r in records),
                input_tokens=sum(u.get("prompt_tokens", 0) for r in records for u in (r.get("usage") or {}).values()),
                output_tokens=sum(u.get("completion_tokens", 0) for r in records for u in (r.get("usage") or {}).values()),
                cost=None if any(c is None for c in costs) else float(sum(costs)),
                latency_p50=float(np.percentile(latencies, 50)) if len(latencies) else None,
                latency_p95=float(np.percentile(latencies, 95)) if len(latencies) else None,
            )
            out[name] = stats
        out["_overall"] = {
            "samples": self.n_samples,
            "wall_seconds": self.wall_seconds,
            "samples_per_second": self.n_samples / self.wall_seconds if self.wall_seconds > 0 else None,
            "failures": len(self.failures),
        }
        return out

    def to_pandas(self):
        """One row per sample: ``<metric>`` score columns, ``<metric>__error`` where something failed."""
        import pandas as pd

        rows = [{"sample": i} for i in range(self.n_samples)]
        for r in self.records:
            rows[r["sample"]][r["metric"]] = r.get("score")
            if r.get("error"):
                rows[r["sample"]][f"{r['metric']}__error"] = r["error"]
        return pd.DataFrame(rows).set_index("sample")

    def to_jsonl(self, path: str | Path) -> Path:
        """Every record, intermediates included, one JSON object per line."""
        path = Path(path)
        with open(path, "w", encoding="utf-8") as handle:
            for r in sorted(self.records, key=lambda r: (r["sample"], self.metric_names.index(r["metric"]))):
                handle.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
        return path

    def to_csv(self, path: str | Path) -> Path:
        path = Path(path)
        self.to_pandas().to_csv(path)
        return path

    def __repr__(self) -> str:
        means = ", ".join(
            f"{n}={s['mean']:.3f}" if s["mean"] is not None else f"{n}=n/a"
            for n, s in self.summary().items() if n != "_overall"
        )
        return f"EvaluationResult({self.n_samples} samples: {means}; {len(self.failures)} failures)"


def usage_cost(usage: dict[str, dict[str, Any]], price_table: dict[str, dict[str, float]]) -> float | None:
    """Dollars for ``{model: {"prompt_tokens": .., "completion_tokens": ..}}`` at ``{model: {"input": $ per
    1M tokens, "output": ..}}``; None when a model used has no price (0.0 when nothing was used)."""
    total = 0.0
    for model, tokens in usage.items():
        price = price_table.get(model)
        if price is None:
            return None
        total += tokens.get("prompt_tokens", 0) / 1e6 * price.get("input", 0.0)
        total += tokens.get("completion_tokens", 0) / 1e6 * price.get("output", 0.0)
    return total


class _AnsweredCalls(BaseCallback):
    """Counts LM calls that returned, cached or not (DSPy's usage tracker sees only the uncached ones)."""

    def __init__(self):
        self.answered = 0

    def on_lm_end(self, call_id, outputs, exception=None):
        if exception is None:
            self.answered += 1


@contextlib.contextmanager
def tracked_usage():
    """``with tracked_usage() as usage:`` fills ``usage`` on exit with ``lm_calls`` (calls the LM answered
    in this block and that cost tokens), ``cached_calls`` (calls DSPy's cache answered: free now, though an
    interrupted earlier run may have paid for them) and the tokens per model
    (``{"lm_calls": n, "cached_calls": m, "by_model": {model: {"prompt_tokens": .., "completion_tokens": ..}}}``)."""
    usage: dict[str, Any] = {}
    counter = _AnsweredCalls()
    with dspy.track_usage() as tracker, dspy.context(callbacks=[*dspy.settings.callbacks, counter]):
        try:
            yield usage
        finally:
            totals = tracker.get_total_tokens()
            usage["lm_calls"] = sum(len(entries) for entries in tracker.usage_data.values())
            usage["cached_calls"] = max(0, counter.answered - usage["lm_calls"])
            usage["by_model"] = {model: {k: int(totals.get(model, {}).get(k) or 0)
                                         for k in ("prompt_tokens", "completion_tokens")}
                                 for model in tracker.usage_data}


def usage_tokens(usage: dict[str, Any]) -> dict[str, int]:
    """Prompt and completion tokens of one ``tracked_usage`` record, summed over models."""
    return {kind: sum(t[kind] for t in usage["by_model"].values()) for kind in ("prompt_tokens", "completion_tokens")}


# ------------------------------------------------------------------------------------------------
# Run file
# ------------------------------------------------------------------------------------------------
def read_run_records(path: str | Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The header (None for plain ``to_jsonl`` output) and the records of a run file or JSONL output.

    A record is a dict with an int ``sample`` and a ``metric``; a later record for the same pair
    replaces an earlier one. The last line of a run file may be cut short (a run killed, or still
    being written) and is skipped; any other line that is not a record raises ValueError naming it."""
    path = Path(path)
    lines = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1) if line.strip()]
    if not lines:
        raise ValueError(f"{path} is empty")
    try:
        first = json.loads(lines[0][1])
    except json.JSONDecodeError:
        first = None
    header = first.get("header") if isinstance(first, dict) and isinstance(first.get("header"), dict) else None
    records: dict[tuple[int, str], dict[str, Any]] = {}
    body = lines[1:] if header is not None else lines
    for position, (number, line) in enumerate(body, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if header is not None and position == len(body):
                continue
            raise ValueError(f"{path}: line {number} is not JSON") from None
        if not isinstance(record, dict) or not isinstance(record.get("sample"), int) or "metric" not in record:
            raise ValueError(f"{path}: line {number} is not an evaluate record (needs an int 'sample' and 'metric')")
        records[(record["sample"], record["metric"])] = record
    return header, list(records.values())


class RunFile:
    """Append-only JSONL: a header line describing the run, then one line per finished (sample, metric).

    A line cut short by a kill is ignored on reading (its item is simply done again)."""

    def __init__(self, path: str | Path, header: dict[str, Any]):
        self.path = Path(path)
        self.header = header
        self.done: dict[tuple[int, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        if self.path.exists() and self.path.stat().st_size > 0:
            self._read()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as handle:
                handle.write(json.dumps({"header": header}, ensure_ascii=False) + "\n")

    def _read(self) -> None:
        with open(self.path, "rb") as handle:
            data = handle.read()
        if not data.endswith(b"\n"):  # a kill mid-line: drop the cut line so the file stays valid JSONL
            with open(self.path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
        try:
            existing, records = read_run_records(self.path)
        except ValueError as error:
            raise ValueError(f"{error}; use a new run file (or delete it to start over)") from None
        if existing is None:
            raise ValueError(f"{self.path} is not a run file of this library (no header line)")
        for key in ("version", "samples", "metrics"):
            if existing.get(key) != self.header.get(key):
                raise ValueError(
                    f"{self.path} was written for other {key} than this run; use a new run file "
                    f"(or delete it to start over)"
                )
        self.done = {(r["sample"], r["metric"]): r for r in records}

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
            self.done[(record["sample"], record["metric"])] = record


# ------------------------------------------------------------------------------------------------
# evaluate()
# ------------------------------------------------------------------------------------------------
def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "model_dump"):
        return _jsonable(value.model_dump())
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _score_once(metric: Metric, sample, retries: int, backoff: float) -> tuple[dspy.Prediction, dict[str, Any]]:
    """The metric's result and its ``tracked_usage`` record (empty for a metric without an LM)."""
    if not metric.needs_lm:  # no LM, nothing to track or retry
        return metric.score(sample), {}
    attempt = 0
    while True:
        try:
            with tracked_usage() as usage:
                result = metric.score(sample)
            return result, usage
        except TRANSIENT_ERRORS as err:
            if attempt >= retries or hasattr(err, "retried_by_served_lm"):  # a ServedLM retried it already
                raise
            time.sleep(backoff * 2**attempt)
            attempt += 1


def scored_fields(metric: Metric, sample, retries: int, backoff: float) -> dict[str, Any]:
    """A run-file record's result fields for one item scored in this process (the thread pool and the Ray
    workers both use this, so their records are the same): score, details, LM usage, undefined reason."""
    result, usage = _score_once(metric, sample, retries, backoff)
    fields = {"score": float(result.score),
              "details": {k: _jsonable(v) for k, v in result.items() if k not in ("score", "undefined_reason")},
              "usage": usage.get("by_model", {}), "lm_calls": usage.get("lm_calls", 0),
              "cached_calls": usage.get("cached_calls", 0)}
    if result.get("undefined_reason"):
        fields["undefined_reason"] = result["undefined_reason"]
    return fields


def evaluate(
    dataset: EvaluationDataset | Iterable[Any],
    metrics: Sequence[Metric],
    *,
    lm: Any = None,
    embeddings: Any = None,
    num_threads: int = 4,
    run_file: str | Path | None = None,
    retry_failed: bool = False,
    strict: bool = False,
    retries: int = 3,
    backoff: float = 1.0,
    timeout: float | None = None,
    price_table: dict[str, dict[str, float]] | None = None,
    progress: bool = True,
    backend: str = "threads",
    ray_address: str | None = None,
    ray_workers: int | None = None,
) -> EvaluationResult:
    """Score every sample with every metric. See the module docstring for the guarantees; ``backend="ray"``
    scores on Ray actors instead of this process's threads (``judges.ray_backend``: same records, run file
    and resume; ``num_threads`` caps the LM items in flight across the cluster)."""
    if not isinstance(dataset, EvaluationDataset):
        dataset = EvaluationDataset(list(dataset))
    metrics = list(metrics)
    if not metrics:
        raise ValueError("evaluate: give at least one metric")
    if len(dataset) == 0:
        raise ValueError("evaluate: the dataset holds no samples")
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"evaluate: num_threads must be a positive int, got {num_threads!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise ValueError(f"evaluate: timeout must be a positive number of seconds or None, got {timeout!r}")
    if backend not in ("threads", "ray"):
        raise ValueError(f"evaluate: backend={backend!r} is not 'threads' or 'ray'")
    names = _metric_names(metrics)

    errors = []
    for metric in metrics:
        try:
            metric.validate_dataset(dataset.samples)
        except SampleValidationError as err:
            errors.append(err)
    if errors:
        raise DatasetValidationError(errors)

    keys = [sample_key(s) for s in dataset]
    header = {
        "version": RUN_FILE_VERSION,
        "samples": hashlib.sha1("".join(keys).encode()).hexdigest()[:16],
        "metrics": {name: metric_config(m) for name, m in zip(names, metrics)},
    }
    store = RunFile(run_file, header) if run_file is not None else None
    done = dict(store.done) if store else {}
    if retry_failed:
        done = {key: record for key, record in done.items() if not record.get("error")}
    todo = [(i, m) for i in range(len(dataset)) for m in metrics if (i, m.name) not in done]
    isolated = {m.name for m in metrics if timeout is not None and rebuildable(m)}

    resolved_lm = resolve_lm(lm) if lm is not None else None
    records: dict[tuple[int, str], dict[str, Any]] = dict(done)
    idle_workers: collections.deque[ProcessWorker] = collections.deque()
    finished: queue.Queue = queue.Queue()

    def run_one(attempt: int, index: int, metric: Metric) -> None:
        started = time.monotonic()
        running[attempt] = started
        record: dict[str, Any] = {"sample": index, "metric": metric.name, "sample_key": keys[index]}
        try:
            if metric.name in isolated:
                worker = idle_workers.popleft() if idle_workers else ProcessWorker()
                try:
                    reply = worker.score(metric, dataset[index], timeout)
                finally:
                    idle_workers.append(worker)
                if "error" in reply:
                    record.update(score=None, error=reply["error"])
                else:
                    record.update(reply, usage={}, lm_calls=0)
            else:
                record.update(scored_fields(metric, dataset[index], retries, backoff))
        except PermanentLMError as err:  # not this item's fault: never recorded; the run stops
            finished.put((attempt, err))
            return
        except Exception as err:  # recorded, the run goes on (unless strict)
            if strict:
                finished.put((attempt, err))
                return
            record.update(score=None, error=f"{type(err).__name__}: {err}")
        record["latency_s"] = time.monotonic() - started
        finished.put((attempt, record))

    context = dspy.context(lm=resolved_lm) if resolved_lm is not None else contextlib.nullcontext()
    bar = tqdm(total=len(todo), desc="evaluate", unit="item") if progress and todo else None
    start = time.perf_counter()

    def on_record(record: dict[str, Any]) -> None:
        """A finished item: kept, appended to the run file, counted on the progress bar."""
        records[(record["sample"], record["metric"])] = record
        if store:
            store.append(record)
        if bar:
            bar.update(1)

    if backend == "ray":
        try:
            refused = run_on_ray(dataset.samples, metrics, keys, todo, lm=lm, embeddings=embeddings,
                                 num_threads=num_threads, retries=retries, backoff=backoff, score_item=scored_fields,
                                 on_record=on_record, ray_address=ray_address, ray_workers=ray_workers,
                                 timeout=timeout) if todo else None
        finally:
            if bar:
                bar.close()
        return _result(records, names, len(dataset), time.perf_counter() - start, price_table,
                       PermanentLMError(refused) if refused else None, store is not None)
    running: dict[int, float] = {}  # attempt -> when its thread started working on it
    stopped: PermanentLMError | None = None
    with context, default_embeddings(embeddings):
        pending: dict[int, tuple[int, Metric]] = {}
        waiting = collections.deque(todo)
        attempts = itertools.count()
        try:
            while (waiting and stopped is None) or pending:
                while waiting and len(pending) < num_threads and stopped is None:
                    index, metric = waiting.popleft()
                    attempt = next(attempts)
                    pending[attempt] = (index, metric)
                    # daemon threads: an item abandoned at its timeout never keeps the process alive
                    threading.Thread(target=contextvars.copy_context().run, args=(run_one, attempt, index, metric),
                                     daemon=True, name=f"evaluate-{attempt}").start()
                try:
                    attempt, outcome = finished.get(timeout=0.2)
                except queue.Empty:
                    attempt, outcome = None, None
                if isinstance(outcome, PermanentLMError):
                    stopped = stopped or outcome  # no new items; the ones in flight finish and are recorded
                    pending.pop(attempt, None)
                    outcome = None
                elif isinstance(outcome, Exception):
                    raise outcome
                done_now = [] if attempt is None or attempt not in pending else [(attempt, outcome)]
                if timeout is not None:  # in-thread items: the clock starts when the item starts, not when queued
                    now = time.monotonic()
                    for late, (index, metric) in pending.items():
                        if metric.name not in isolated and late in running and now - running[late] > timeout:
                            if strict:
                                raise TimeoutError(f"{metric.name} on sample {index} took over {timeout} s")
                            done_now.append((late, {
                                "sample": index, "metric": metric.name, "sample_key": keys[index], "score": None,
                                "error": f"TimeoutError: no result after {timeout} s (the call was abandoned)",
                                "latency_s": now - running[late]}))
                for finished_attempt, record in done_now:
                    del pending[finished_attempt]
                    on_record(record)
        finally:
            for worker in idle_workers:
                worker.close()
            if bar:
                bar.close()
    return _result(records, names, len(dataset), time.perf_counter() - start, price_table, stopped, store is not None)


def _result(records: dict[tuple[int, str], dict[str, Any]], names: list[str], n_samples: int, wall: float,
            price_table: dict[str, dict[str, float]] | None, stopped: PermanentLMError | None,
            resumable: bool) -> EvaluationResult:
    """The run's result, or ``RunStopped`` (holding the partial result) when the LM refused for good."""
    if stopped is not None:
        partial = EvaluationResult(sorted(records.values(), key=lambda r: (r["sample"], names.index(r["metric"]))),
                                   names, n_samples, wall, dict(price_table or {}))
        raise RunStopped(f"the LM refused a request in a way no retry fixes ({stopped}); stopped after {len(records)} "
                         f"of {n_samples * len(names)} items" + (" (finished items are in the run file: fix the "
                         "cause and rerun to resume)" if resumable else ""), partial)
    ordered = [records[(i, name)] for i in range(n_samples) for name in names]
    return EvaluationResult(ordered, names, n_samples, wall, dict(price_table or {}))
