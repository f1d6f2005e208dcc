"""evaluate(): many metrics over a dataset, validated up front, accounted, resumable.

    result = evaluate(dataset, [Faithfulness(), RougeScore()], num_threads=4, run_file="runs/r1.jsonl")
    result.summary()          # per metric: mean, std, quantiles, failures, undefined, tokens, cost, latency

A record's path, top to bottom: ``evaluate`` validates every sample against every metric (all problems at
once, ``DatasetValidationError``, before any LM call), opens the run file and skips what it holds, hands
the remaining (sample, metric) items to a backend, and writes each batch of records the backend hands
back to the run file the moment it arrives.

* Backends (``judges.run.backend``): ``"threads"`` (default; ``judges.run.threads``), with a ``timeout``
  the items of metrics without an LM go to killable child processes (``judges.run.processes``);
  ``"processes"`` sends those items to ``num_threads`` child processes in any case (every core, not one);
  ``"ray"`` scores everything on Ray actors (``judges.run.ray_backend``). Same records, run file and
  resume on each.
* Transient LM errors (rate limit, timeout, server, transport) are retried with exponential backoff. A
  failed sample never stops the run unless ``strict=True``.
* ``timeout`` (seconds per item, counted from when the item starts, not from when it was queued): metrics
  without an LM or embedder run in a killable child process, so an item that overruns is stopped and
  recorded as ``TimeoutError``. An LLM judge cannot be stopped mid-call: its item is recorded as failed
  and abandoned (its late result discarded; the thread is a daemon and never keeps the process alive),
  but the call runs on until the LM returns, and an in-process model stays busy until then.
* A ``PermanentLMError`` (a ``ServedLM`` told it no retry can help: bad request, authentication, billing)
  stops the run: no new items start, the ones in flight finish and are recorded, and ``RunStopped`` is
  raised with one message (``.result`` holds what finished). The item that met the refusal is not
  recorded as failed, so a rerun after the fix resumes with it.
* ``retry_failed=True`` with a ``run_file``: items recorded as failed are run again (the new record
  replaces the old one); finished items are still skipped.
* Degraded scores: a metric whose score came from fewer steps or judges than designed (one of two judges
  unparsed, claims without a verdict) records ``degraded`` (which part and why) and the summary counts
  them. ``on_degraded="record"`` (default) keeps the score; ``"fail"`` turns the item into a failure
  (``DegradedScore: ...``, the score kept as ``degraded_score``), and ``retry_failed`` then runs it again.
  The run file keeps the record as scored, so the policy can change on a rerun.
* ``run_file``: finished items are appended as JSON lines as soon as the backend hands them over (one
  write per batch); a rerun with the same file skips what is there, so a run killed at any point (even
  SIGKILL) resumes without losing finished work, and ends with the same table as an uninterrupted run. A
  run file made for other samples or metric settings is refused rather than mixed in.
* Accounting per metric: LM calls and input/output tokens of every answered call, whether its item scored
  or failed (DSPy's usage tracker; answers served from DSPy's cache cost none), cost from a ``price_table``
  ``{model: {"input": $ per 1M tokens, "output": ...}}``, latency p50/p95, and overall throughput. Each
  paid call also reaches the driver as the LM answers it (a call line in the run file, with the run's id,
  which its records carry too): calls that no final record holds (items in flight when a run was killed,
  calls answered after an item was abandoned at its timeout while the run lasted, attempts replaced by
  ``retry_failed``) are counted as the summary's ``unrecorded_calls`` and are in its totals. Not counted:
  a call the LM answered in the instant before a kill, before the driver wrote it; an abandoned item's
  calls answered after ``evaluate`` returned; on the Ray backend, the calls of items in flight when the
  driver is killed (an actor hands calls back with its replies, and once more at the end of the run); a
  call made inside a metric's own nested ``dspy.track_usage()`` is in its record but not a call line.

Owns: validation, the run file's life, the choice of backend, the result. Must not score an item itself.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from judges.data.dataset import EvaluationDataset
from judges.data.samples import SampleValidationError
from judges.metrics.base import Metric
from judges.run.backend import Backend, Item, Settings
from judges.run.processes import ProcessBackend, rebuildable
from judges.run.ray_backend import RayBackend
from judges.run.records import degraded_as_failure, sample_key
from judges.run.result import EvaluationResult, RunStopped
from judges.run.run_file import RunFile, run_header
from judges.run.threads import ThreadBackend
from judges.run.usage import add_call, add_version_1_usage, unrecorded_usage

BACKENDS = ("threads", "processes", "ray")
ON_DEGRADED = ("record", "fail")


class DatasetValidationError(ValueError):
    """Samples lack what some metrics need; ``errors`` holds one SampleValidationError per metric."""

    def __init__(self, errors: list[SampleValidationError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


def _metric_names(metrics: Sequence[Metric]) -> list[str]:
    names = [m.name for m in metrics]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"evaluate: two metrics share the name(s) {duplicates}; give them distinct names with "
                         f"metric.named('...') (CLI: -m ALIAS=NAME:{{json}})")
    return names


def _checked(dataset: EvaluationDataset, metrics: list[Metric], num_threads: Any, timeout: Any, backend: Any,
             on_degraded: Any = "record") -> None:
    if not metrics:
        raise ValueError("evaluate: give at least one metric")
    if len(dataset) == 0:
        raise ValueError("evaluate: the dataset holds no samples")
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"evaluate: num_threads must be a positive int, got {num_threads!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise ValueError(f"evaluate: timeout must be a positive number of seconds or None, got {timeout!r}")
    if backend not in BACKENDS:
        raise ValueError(f"evaluate: backend={backend!r} is not one of {list(BACKENDS)}")
    if on_degraded not in ON_DEGRADED:
        raise ValueError(f"evaluate: on_degraded={on_degraded!r} is not one of {list(ON_DEGRADED)}")
    errors = []
    for metric in metrics:
        try:
            metric.validate_dataset(dataset.samples)
        except SampleValidationError as err:
            errors.append(err)
    if errors:
        raise DatasetValidationError(errors)


def _plan(backend: str, settings: Settings, todo: list[Item], ray_address: str | None,
          ray_workers: int | None) -> list[tuple[Backend, list[Item]]]:
    """Which backend scores which items."""
    if backend == "ray":
        return [(RayBackend(settings, ray_address, ray_workers), todo)]
    to_processes = {m.name for m in {i.metric.name: i.metric for i in todo}.values()
                    if (backend == "processes" or settings.timeout is not None) and rebuildable(m)}
    return [(ProcessBackend(settings), [i for i in todo if i.metric.name in to_processes]),
            (ThreadBackend(settings), [i for i in todo if i.metric.name not in to_processes])]


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
    on_degraded: str = "record",
) -> EvaluationResult:
    """Score every sample with every metric. See the module docstring for the guarantees; ``backend`` is
    ``"threads"``, ``"processes"`` or ``"ray"`` (``ray_address``, ``ray_workers``: ``judges.run.ray_backend``;
    ``num_threads`` caps the LM items in flight across the cluster)."""
    if not isinstance(dataset, EvaluationDataset):
        dataset = EvaluationDataset(list(dataset))
    metrics = list(metrics)
    _checked(dataset, metrics, num_threads, timeout, backend, on_degraded)
    names = _metric_names(metrics)

    keys = [sample_key(s) for s in dataset]
    settings = Settings(lm=lm, embeddings=embeddings, num_threads=num_threads, retries=retries, backoff=backoff,
                        timeout=timeout, strict=strict)
    header = run_header(keys, names, metrics, lm=lm, embeddings=embeddings) if run_file is not None else None
    if header is not None and dataset.ids:  # the user's id of each position (an id column)
        header["ids"] = list(dataset.ids)
    with RunFile(run_file, header) if run_file is not None else contextlib.nullcontext() as store:
        done = dict(store.done) if store else {}
        calls = dict(store.calls) if store else {}  # (run, sample, metric) -> the paid calls of that item
        if retry_failed:
            kept = {key: record for key, record in done.items()
                    if not record.get("error") and not (on_degraded == "fail" and record.get("degraded"))}
            for key, record in done.items():  # a version-1 record to be replaced has no call lines:
                if key not in kept and "run" not in record:  # its own usage stays in the bill
                    add_version_1_usage(calls, record)
            done = kept
        records = dict(done)
        run = uuid.uuid4().hex[:12]  # this run's id, in its records and call lines
        todo = [Item(i, keys[i], dataset[i], m) for i in range(len(dataset)) for m in metrics if (i, m.name) not in done]
        bar = tqdm(total=len(todo), desc="evaluate", unit="item") if progress and todo else None

        def on_calls(batch: list[dict[str, Any]]) -> None:
            """Paid LM calls as the LM answers them: appended to the run file before their item's record."""
            if store:
                store.append_calls(batch, run)
            for call in batch:
                add_call(calls, run, call)

        def on_records(batch: list[dict[str, Any]]) -> None:
            """Finished items: kept, appended to the run file, counted on the progress bar."""
            batch = [{**record, "run": run} for record in batch]
            if store:
                store.append(batch)
            for record in batch:
                records[(record["sample"], record["metric"])] = record
            if bar:
                bar.update(len(batch))

        start = time.perf_counter()
        refused = None
        try:
            for part, items in _plan(backend, settings, todo, ray_address, ray_workers):
                refused = part.run(items, on_records, on_calls) if refused is None else refused
        finally:
            if bar:
                bar.close()
    if on_degraded == "fail":
        records = {key: degraded_as_failure(record) for key, record in records.items()}
    return _result(records, names, len(dataset), time.perf_counter() - start, price_table, refused, store is not None,
                   unrecorded_usage(calls, records))


def _result(records: dict[tuple[int, str], dict[str, Any]], names: list[str], n_samples: int, wall: float,
            price_table: dict[str, dict[str, float]] | None, refused: str | None,
            resumable: bool, unrecorded: dict[str, dict[str, Any]]) -> EvaluationResult:
    """The run's result, or ``RunStopped`` (holding the partial result) when the LM refused for good."""
    if refused is not None:
        partial = EvaluationResult(sorted(records.values(), key=lambda r: (r["sample"], names.index(r["metric"]))),
                                   names, n_samples, wall, dict(price_table or {}), unrecorded)
        raise RunStopped(f"the LM refused a request in a way no retry fixes ({refused}); stopped after {len(records)} "
                         f"of {n_samples * len(names)} items" + (" (finished items are in the run file: fix the "
                         "cause and rerun to resume)" if resumable else ""), partial)
    ordered = [records[(i, name)] for i in range(n_samples) for name in names]
    return EvaluationResult(ordered, names, n_samples, wall, dict(price_table or {}), unrecorded)
