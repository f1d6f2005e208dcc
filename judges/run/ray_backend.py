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
  function, ``judges.run.backend.score_item``, scores an item in both), so a killed run resumes on either
  backend.
* A ``PermanentLMError`` on a worker stops the run exactly as in the thread pool (``RunStopped``); a worker
  that dies records its items as failed with the reason.
* ``timeout`` (seconds per item, counted on the worker from when the item starts): an item that overruns
  is recorded as ``TimeoutError`` and abandoned (its late result discarded; the calls it is paid for come
  back with the actor's next reply or when the driver collects every actor's calls at the end); its call
  runs on in the actor's thread until it returns, so it still holds its LM connection meanwhile (threads
  that never return are not stopped: Ray cannot stop a thread of a threaded actor).

Owns: how metrics and LMs travel (``metric_spec``, ``lm_spec``), the actor, and the driver's scheduling.
Must not write run files.

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
from collections.abc import Sequence
from typing import Any

import dspy

from judges.lm.embeddings import current_default_embeddings, default_embeddings
from judges.lm.resolve import judges_context, judges_lm_setting, resolve_lm, warn_borrowed_lm
from judges.lm.served import PermanentLMError, ServedLM
from judges.metrics.base import Judge, Metric
from judges.metrics.catalogue import metric_classes
from judges.run.backend import Backend, Calls, Item, Records, score_item
from judges.run.records import failure_record, timeout_error

__all__ = ["RayBackend", "lm_spec", "metric_spec"]

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
                     "string ('openai/...', 'embedded', a .gguf path) or a judges.ServedLM with api_key_env")


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
    """A Ray actor: the run's metrics and LM rebuilt once, scoring items with ``score_item`` (as the thread
    pool does, so the records are the same)."""

    def __init__(self, metric_specs: dict[str, dict[str, Any]], lm: dict[str, Any] | None, embeddings: str | None,
                 retries: int, backoff: float, timeout: float | None = None):
        self.metrics = {name: _rebuilt_metric(spec) for name, spec in metric_specs.items()}
        for name, metric in self.metrics.items():
            if metric.name != name:  # an alias given with Metric.named: not a setting, so carried by the name
                metric.named(name)
        self.lm, self.embeddings = _rebuilt_lm(lm), embeddings
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self._calls: list[dict[str, Any]] = []  # paid LM calls not yet handed back (abandoned items' too)
        self._calls_lock = threading.Lock()

    def _called(self, call: dict[str, Any]) -> None:
        with self._calls_lock:
            self._calls.append(call)

    def taken_calls(self) -> list[dict[str, Any]]:
        """The paid calls not handed back yet (the driver asks every actor once more at the end)."""
        with self._calls_lock:
            calls, self._calls = self._calls, []
        return calls

    def _record(self, item: Item) -> dict[str, Any]:
        """``score_item``'s record, or a ``TimeoutError`` record once the item has run ``timeout`` seconds (its
        thread, a daemon, is abandoned: the late result is discarded)."""
        if self.timeout is None:
            return score_item(item, self.retries, self.backoff, on_call=self._called)
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["record"] = score_item(item, self.retries, self.backoff, on_call=self._called)
            except BaseException as err:  # handed to the caller's thread
                outcome["error"] = err

        started = time.monotonic()
        thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True)
        thread.start()
        thread.join(self.timeout)
        if thread.is_alive():
            return failure_record(item.index, item.key, item.metric.name, timeout_error(self.timeout),
                                  time.monotonic() - started)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["record"]

    def score(self, items: list[tuple[int, str, Any, str]]) -> tuple[list[dict[str, Any]], str | None, list]:
        """Records of ``items`` ((sample index, sample key, sample, metric name)) in order; on a
        ``PermanentLMError`` the records so far and its message (that item and the rest are not recorded); and
        the paid LM calls this actor saw answered since its last reply (``Calls`` entries: those of items it
        abandoned at their timeout included)."""
        records = []
        context = judges_context(lm=self.lm) if self.lm is not None else contextlib.nullcontext()
        with context, default_embeddings(self.embeddings):
            for index, key, sample, name in items:
                try:
                    records.append(self._record(Item(index, key, sample, self.metrics[name])))
                except PermanentLMError as err:
                    return records, str(err), self.taken_calls()
        return records, None, self.taken_calls()


class RayBackend(Backend):
    """Items on Ray actors (see the module docstring); ``ray_address`` and ``ray_workers`` as in ``evaluate``."""

    name = "ray"

    def __init__(self, settings, ray_address: str | None = None, ray_workers: int | None = None):
        super().__init__(settings)
        self.ray_address, self.ray_workers = ray_address, ray_workers

    def run(self, items: Sequence[Item], on_records: Records, on_calls: Calls | None = None) -> str | None:
        """Score ``items`` on Ray, handing each call's records to ``on_records`` in the driver as they arrive, and
        the paid LM calls an actor saw answered to ``on_calls`` with each of its replies and once more from
        every actor at the end (so an item abandoned at its timeout is counted up to the end of the run; the
        calls of items in flight when the driver is killed are not: they had not come back)."""
        if not items:
            return None
        settings = self.settings
        if self.ray_address is None and "ray" not in sys.modules:
            # A local instance started for this run listens on 127.0.0.1 only (Ray otherwise binds the machine's
            # reachable address, for other nodes to join); read by Ray when it is imported.
            os.environ.setdefault(LOOPBACK_ONLY, "0")
        try:
            import ray
        except ImportError:
            raise ImportError("evaluate(backend='ray') needs Ray: pip install 'dspy-judges[ray]'") from None
        embeddings = settings.embeddings if settings.embeddings is not None else current_default_embeddings()
        if not isinstance(embeddings, (str, type(None))):
            raise ValueError("evaluate(backend='ray'): give embeddings as None, 'embedded', a model folder or a model "
                             "string (an embedder object cannot be rebuilt on workers)")
        metrics = list({item.metric.name: item.metric for item in items}.values())
        specs = {m.name: metric_spec(m) for m in metrics}
        lm = next((candidate for candidate in (settings.lm, judges_lm_setting()[0], dspy.settings.lm)
                   if candidate is not None), None)  # what the thread pool would use
        if lm is not None and lm is dspy.settings.lm and settings.lm is None and judges_lm_setting()[0] is None:
            for metric in metrics:
                if metric.needs_lm and getattr(metric, "judge_lm", None) is None:
                    warn_borrowed_lm(metric.name, lm)
        lm_travels = lm_spec(lm)
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(address=self.ray_address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            return self._drive(ray, items, metrics, specs, lm, lm_travels, embeddings, on_records, on_calls)
        finally:
            if started_here:
                ray.shutdown()

    def _drive(self, ray, items, metrics, specs, lm, lm_travels, embeddings, on_records, on_calls) -> str | None:
        settings = self.settings
        actors_n = self.ray_workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        lm_items = [item for item in items if item.metric.needs_lm]
        cap = settings.num_threads
        for candidate in [lm, *[getattr(m, "judge_lm", None) for m in metrics]]:
            if isinstance(candidate, ServedLM):
                cap = min(cap, candidate.max_concurrency)
        per_actor = max(1, math.ceil(cap / actors_n)) if lm_items else 1
        actor = ray.remote(num_cpus=0)(ScoringWorker).options(max_concurrency=per_actor)
        workers = [actor.remote(specs, lm_travels, embeddings, settings.retries, settings.backoff,
                                settings.timeout) for _ in range(actors_n)]
        plain = [item for item in items if not item.metric.needs_lm]
        batch = max(1, min(MAX_BATCH, len(plain) // (8 * actors_n) or 1))
        work: deque[tuple[bool, list[tuple[int, str, Any, str]]]] = deque(
            (False, [(i.index, i.key, i.sample, i.metric.name) for i in plain[at:at + batch]])
            for at in range(0, len(plain), batch))
        work.extend((True, [(i.index, i.key, i.sample, i.metric.name)]) for i in lm_items)
        load = [0] * actors_n
        pending: dict[Any, tuple[int, bool, list]] = {}
        in_flight_lm = 0
        stopped: str | None = None
        while (work and stopped is None) or pending:
            while work and stopped is None:
                uses_lm, chunk = work[0]
                if (uses_lm and in_flight_lm >= cap) or (not uses_lm and len(pending) - in_flight_lm >= 2 * actors_n):
                    break
                work.popleft()
                target = min(range(actors_n), key=lambda a: (load[a], a))
                pending[workers[target].score.remote(chunk)] = (target, uses_lm, chunk)
                load[target] += 1
                in_flight_lm += uses_lm
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                target, uses_lm, chunk = pending.pop(ref)
                load[target] -= 1
                in_flight_lm -= uses_lm
                try:
                    records, refused, answered = ray.get(ref)
                except Exception as err:  # the worker died or Ray failed: the items are recorded as failed
                    records, refused, answered = [failure_record(i, key, name, f"{type(err).__name__}: {err}"[:2000],
                                                                 0.0) for i, key, _, name in chunk], None, []
                if answered and on_calls is not None:
                    on_calls(answered)
                if records:
                    on_records(records)
                stopped = stopped or refused
        if on_calls is not None:  # calls answered since each actor's last reply (items abandoned at their timeout)
            try:
                leftovers = [call for calls in ray.get([w.taken_calls.remote() for w in workers]) for call in calls]
            except Exception:  # noqa: BLE001 - an actor that died took its calls with it
                leftovers = []
            if leftovers:
                on_calls(leftovers)
        return stopped
