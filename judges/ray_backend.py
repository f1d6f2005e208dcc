"""``evaluate(..., backend="ray")``: the same metrics, items and run file, scored by Ray actors.

    evaluate(dataset, [Faithfulness(), RougeScore()], lm=ServedLM("openai/gpt-4o-mini", api_key_env="OPENAI_API_KEY"),
             backend="ray", run_file="runs/r1.jsonl")
    dspy-judges evaluate data.jsonl -m faithfulness --lm openai/gpt-4o-mini --api-key-env OPENAI_API_KEY --backend ray

* Nothing with a connection or a model in it is pickled. Each metric travels as its catalogue class and
  ``get_params()`` (plus its own LM or embeddings when given as a model string), or, for a metric whose
  class saves itself as JSON (``to_dict()`` / ``from_dict(data, lm=, embeddings=)``, e.g. a calibrated
  ``CompiledJudge``), as that JSON and its class's import path; the LM as a model string,
  ``"embedded"``, a .gguf path, or a ``ServedLM``'s ``config()`` (its key never: ``api_key_env`` names the
  variable each worker reads). Workers rebuild them once and keep them.
* One actor per CPU of the cluster (``ray_workers`` to choose), each scoring up to
  ``ceil(cap / actors)`` LM items at a time on threads, where ``cap`` is ``num_threads`` and, for a
  ``ServedLM``, at most its ``max_concurrency``: the driver never has more than ``cap`` LM items in flight,
  so an endpoint's concurrency limit holds across the whole cluster. Metrics without an LM go in batches.
* Results stream back item by item into the same run file as the thread pool's (the same records: one
  function, evaluate's ``scored_fields``, scores an item in both), so a killed run resumes on either
  backend.
* A ``PermanentLMError`` on a worker stops the run exactly as in the thread pool (``RunStopped``); a worker
  that dies records its items as failed with the reason.
* ``timeout`` (seconds per item, counted on the worker from when the item starts): an item that overruns
  is recorded as ``TimeoutError`` and abandoned (its late result discarded); its call runs on in the
  actor's thread until it returns, so it still holds its LM connection meanwhile (threads that never
  return are not stopped: Ray cannot stop a thread of a threaded actor).

Ray is an optional extra (``pip install dspy-judges[ray]``). ``evaluate`` uses the Ray instance already
initialised in the process (``ray.init(address="ray://head:10001")`` for a cluster; every node needs this
package installed, e.g. through ``runtime_env={"pip": ["dspy-judges[all]"]}``), else starts a local one on
this machine, on 127.0.0.1 only, and shuts it down at the end (``ray_address=`` connects to a running
cluster instead).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import inspect
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from judges.base import Judge, Metric
from judges.catalogue import metric_classes
from judges.models import default_embeddings, resolve_lm
from judges.served import PermanentLMError, ServedLM

__all__ = ["lm_spec", "metric_spec", "run_on_ray"]

#: Ray's switch for multi-node clusters; "0" keeps a local instance on the loopback interface.
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: Items per call for metrics without an LM (one call's records come back together).
MAX_BATCH = 2000


def lm_spec(lm: Any) -> dict[str, Any] | None:
    """How an LM travels to workers, or ValueError saying what to give instead."""
    if lm is None:
        return None
    if isinstance(lm, str):
        return {"string": lm}
    if isinstance(lm, ServedLM):
        return {"served": lm.config()}
    raise ValueError(f"evaluate(backend='ray'): the LM {lm!r} cannot be rebuilt on Ray workers; give a model "
                     "string ('openai/...', 'embedded', a .gguf path) or a judges.served.ServedLM with api_key_env")


def _resource_spec(value: Any, what: str, metric: Metric) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"evaluate(backend='ray'): {metric.name}'s {what} ({type(value).__name__}) cannot be rebuilt on "
                     f"Ray workers; give it as a model string, or pass the LM to evaluate(lm=...)")


def saves_as_json(cls: type) -> bool:
    """Whether a metric class saves itself as JSON and rebuilds from it (``to_dict`` / ``from_dict``)."""
    return (isinstance(cls, type) and issubclass(cls, Metric) and callable(getattr(cls, "to_dict", None))
            and isinstance(inspect.getattr_static(cls, "from_dict", None), classmethod))


def _json_metric_spec(metric: Metric) -> dict[str, Any]:
    cls = type(metric)
    lm = _resource_spec(getattr(metric, "judge_lm", None), "LM", metric)
    embeddings = _resource_spec(getattr(metric, "embeddings", None), "embeddings", metric)
    data = metric.to_dict()
    try:
        rebuilt = cls.from_dict(data, lm=lm, embeddings=embeddings).get_params()
    except (TypeError, ValueError) as err:
        raise ValueError(f"evaluate(backend='ray'): {metric.name} does not rebuild from its JSON ({err})") from None
    if rebuilt != metric.get_params():
        raise ValueError(f"evaluate(backend='ray'): {metric.name} does not rebuild from its JSON to the same settings")
    return {"json_class": f"{cls.__module__}:{cls.__qualname__}", "json": data, "lm": lm, "embeddings": embeddings}


def metric_spec(metric: Metric) -> dict[str, Any]:
    """How a metric travels to workers: its catalogue class, settings and own LM/embeddings as strings, or
    its own JSON (``to_dict``) and class path when its class saves itself so."""
    cls = type(metric)
    if cls not in set(metric_classes().values()):
        if saves_as_json(cls):
            return _json_metric_spec(metric)
        raise ValueError(f"evaluate(backend='ray'): {metric.name} ({cls.__name__}) is neither a catalogue metric class "
                         "nor a metric that saves itself as JSON (to_dict / from_dict); use the thread pool")
    params = metric.get_params()
    spec: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}", "params": params}
    if isinstance(metric, Judge):
        spec["lm"] = _resource_spec(metric.judge_lm, "LM", metric)
        if metric.judge_adapter is not None:
            raise ValueError(f"evaluate(backend='ray'): {metric.name} has a custom adapter, which Ray workers cannot "
                             "rebuild; use the thread pool")
    if getattr(metric, "embeddings", None) is not None:
        spec["embeddings"] = _resource_spec(metric.embeddings, "embeddings", metric)
    for name in metric._runtime_params:
        if name not in ("lm", "adapter", "embeddings") and getattr(metric, name, None) is not None:
            raise ValueError(f"evaluate(backend='ray'): {metric.name}'s {name} cannot be rebuilt on workers")
    try:
        rebuilt = cls(**params).get_params()
    except (TypeError, ValueError) as err:
        raise ValueError(f"evaluate(backend='ray'): {metric.name} does not rebuild from its settings ({err})") from None
    if rebuilt != params:
        raise ValueError(f"evaluate(backend='ray'): {metric.name} does not rebuild to the same settings")
    return spec


def _rebuilt_lm(spec: dict[str, Any] | None) -> Any:
    if spec is None:
        return None
    if "served" in spec:
        return ServedLM(**spec["served"])
    return resolve_lm(spec["string"])


def _rebuilt_metric(spec: dict[str, Any]) -> Metric:
    if "json_class" in spec:  # the driver's own metric class (this program's code), rebuilt from its JSON
        module, _, name = spec["json_class"].partition(":")
        cls = importlib.import_module(module)
        for part in name.split("."):
            cls = getattr(cls, part)
        if not saves_as_json(cls):
            raise TypeError(f"{spec['json_class']} is not a metric class that rebuilds from JSON")
        return cls.from_dict(spec["json"], lm=spec["lm"], embeddings=spec["embeddings"])
    classes = {f"{c.__module__}.{c.__qualname__}": c for c in metric_classes().values()}
    kwargs = dict(spec["params"])
    if spec.get("lm") is not None:
        kwargs["lm"] = spec["lm"]
    if spec.get("embeddings") is not None:
        kwargs["embeddings"] = spec["embeddings"]
    return classes[spec["class"]](**kwargs)


class ScoringWorker:
    """A Ray actor: the run's metrics and LM rebuilt once, scoring items with the ``score_item`` it is given."""

    def __init__(self, metric_specs: dict[str, dict[str, Any]], lm: dict[str, Any] | None, embeddings: str | None,
                 retries: int, backoff: float, score_item: Callable[..., dict[str, Any]], timeout: float | None = None):
        self.metrics = {name: _rebuilt_metric(spec) for name, spec in metric_specs.items()}
        self.lm, self.embeddings = _rebuilt_lm(lm), embeddings
        self.retries, self.backoff, self.score_item, self.timeout = retries, backoff, score_item, timeout

    def _fields(self, metric: Metric, sample: Any) -> dict[str, Any]:
        """``score_item``'s fields, or a ``TimeoutError`` record once the item has run ``timeout`` seconds (its
        thread, a daemon, is abandoned: the late result is discarded)."""
        if self.timeout is None:
            return self.score_item(metric, sample, self.retries, self.backoff)
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["fields"] = self.score_item(metric, sample, self.retries, self.backoff)
            except BaseException as err:  # handed to the caller's thread
                outcome["error"] = err

        thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True)
        thread.start()
        thread.join(self.timeout)
        if thread.is_alive():
            return {"score": None, "error": f"TimeoutError: no result after {self.timeout} s (the call was abandoned)"}
        if "error" in outcome:
            raise outcome["error"]
        return outcome["fields"]

    def score(self, items: list[tuple[int, str, Any, str]]) -> tuple[list[dict[str, Any]], str | None]:
        """Records of ``items`` ((sample index, sample key, sample, metric name)) in order; on a
        ``PermanentLMError`` the records so far and its message (that item and the rest are not recorded)."""
        records = []
        context = dspy.context(lm=self.lm) if self.lm is not None else contextlib.nullcontext()
        with context, default_embeddings(self.embeddings):
            for index, key, sample, name in items:
                record: dict[str, Any] = {"sample": index, "metric": name, "sample_key": key}
                started = time.monotonic()
                try:
                    record.update(self._fields(self.metrics[name], sample))
                except PermanentLMError as err:
                    return records, str(err)
                except Exception as err:  # recorded; the run goes on
                    record.update(score=None, error=f"{type(err).__name__}: {err}")
                record["latency_s"] = time.monotonic() - started
                records.append(record)
        return records, None


def run_on_ray(dataset: Sequence[Any], metrics: Sequence[Metric], keys: Sequence[str], todo: Sequence[tuple[int, Metric]],
               *, lm: Any, embeddings: Any, num_threads: int, retries: int, backoff: float,
               score_item: Callable[..., dict[str, Any]], on_record: Callable[[dict[str, Any]], None],
               ray_address: str | None = None, ray_workers: int | None = None, timeout: float | None = None) -> str | None:
    """Score ``todo`` on Ray, calling ``on_record`` in the driver for every finished item as it arrives.
    ``score_item(metric, sample, retries, backoff)`` gives an item's record fields on a worker (evaluate
    passes its own, sent by reference: a module-level function). Returns the message of a
    ``PermanentLMError`` that stopped the run, else None."""
    if ray_address is None and "ray" not in sys.modules:
        # A local instance started for this run listens on 127.0.0.1 only (Ray otherwise binds the machine's
        # reachable address, for other nodes to join); read by Ray when it is imported.
        os.environ.setdefault(LOOPBACK_ONLY, "0")
    try:
        import ray
    except ImportError:
        raise ImportError("evaluate(backend='ray') needs Ray: pip install 'dspy-judges[ray]'") from None
    if not isinstance(embeddings, (str, type(None))):
        raise ValueError("evaluate(backend='ray'): give embeddings as None, 'embedded', a model folder or a model "
                         "string (an embedder object cannot be rebuilt on workers)")
    specs = {m.name: metric_spec(m) for m in metrics}
    lm = lm if lm is not None else dspy.settings.lm  # what the thread pool would use: dspy.configure(lm=...)
    lm_travels = lm_spec(lm)
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=ray_address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        actors_n = ray_workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        lm_items = [(i, m) for i, m in todo if m.needs_lm]
        cap = num_threads
        for candidate in [lm, *[getattr(m, "judge_lm", None) for m in metrics]]:
            if isinstance(candidate, ServedLM):
                cap = min(cap, candidate.max_concurrency)
        per_actor = max(1, math.ceil(cap / actors_n)) if lm_items else 1
        actor = ray.remote(num_cpus=0)(ScoringWorker).options(max_concurrency=per_actor)
        workers = [actor.remote(specs, lm_travels, embeddings, retries, backoff, score_item, timeout)
                   for _ in range(actors_n)]
        plain = [(i, m) for i, m in todo if not m.needs_lm]
        batch = max(1, min(MAX_BATCH, len(plain) // (8 * actors_n) or 1))
        calls: deque[tuple[bool, list[tuple[int, str, Any, str]]]] = deque(
            (False, [(i, keys[i], dataset[i], m.name) for i, m in plain[at:at + batch]])
            for at in range(0, len(plain), batch))
        calls.extend((True, [(i, keys[i], dataset[i], m.name)]) for i, m in lm_items)
        load = [0] * actors_n
        pending: dict[Any, tuple[int, bool, list]] = {}
        in_flight_lm = 0
        stopped: str | None = None
        while (calls and stopped is None) or pending:
            while calls and stopped is None:
                uses_lm, items = calls[0]
                if (uses_lm and in_flight_lm >= cap) or (not uses_lm and len(pending) - in_flight_lm >= 2 * actors_n):
                    break
                calls.popleft()
                target = min(range(actors_n), key=lambda a: (load[a], a))
                pending[workers[target].score.remote(items)] = (target, uses_lm, items)
                load[target] += 1
                in_flight_lm += uses_lm
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                target, uses_lm, items = pending.pop(ref)
                load[target] -= 1
                in_flight_lm -= uses_lm
                try:
                    records, refused = ray.get(ref)
                except Exception as err:  # the worker died or Ray failed: the items are recorded as failed
                    records, refused = [{"sample": i, "metric": name, "sample_key": key, "score": None,
                                         "error": f"{type(err).__name__}: {err}"[:2000], "latency_s": 0.0}
                                        for i, key, _, name in items], None
                for record in records:
                    on_record(record)
                stopped = stopped or refused
        return stopped
    finally:
        if started_here:
            ray.shutdown()
