"""Items scored in child processes that can be killed: how ``evaluate(timeout=...)`` bounds metrics without
an LM, and ``backend="processes"`` puts every core to work on them.

A thread cannot be stopped from outside, and a C routine (rapidfuzz's Levenshtein, a long ROUGE-L in pure
Python) can hold the interpreter for minutes, so a timeout measured in a thread is not a timeout. A metric
that needs neither an LM nor an embedder (``rebuildable``) is scored in a ``ProcessWorker``: a child
process that rebuilds the metric from its class name and ``get_params()`` (no pickled objects), scores
the samples it is sent one after another, replying for each, and is killed when an item overruns its
``timeout``; the rest of the unit goes to a fresh child. LLM judges stay in threads (their LM clients hold
connections and an in-process model cannot be copied).

Owns: the child's program, ``ProcessWorker`` and ``ProcessBackend`` (the thread pool's loop, each worker
thread driving one child). Must not score anything in this process.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from judges.metrics.base import Metric
from judges.metrics.catalogue import metric_classes
from judges.run.backend import Item
from judges.run.records import error_text, failure_record, result_fields, timeout_error
from judges.run.threads import MAX_CHUNK, ThreadBackend

#: The child's program: serve jobs from the pipe whose descriptor is argv[1], reply on argv[2].
CHILD = ("import sys; from multiprocessing.connection import Connection; from judges.run.processes import serve; "
         "serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))")
#: Seconds a new worker process may take to import the library before it counts as failed to start.
STARTUP_SECONDS = 120.0
KILLED = "the worker process was killed"
#: What a child sends when it has built a metric it had not scored with before (and imported what that
#: metric imports on first use, ``first_use_imports``): the item's own time starts after it.
BUILT = "built"


def rebuildable(metric: Metric) -> bool:
    """Whether ``type(metric)(**metric.get_params())`` gives the same metric in another process: a catalogue
    class, no LM, embedder or verifier model, and settings that rebuild (not, e.g., a function as
    ``arg_comparison``)."""
    if (metric.needs_lm or metric.needs_embeddings or getattr(metric, "needs_verifier", False)
            or type(metric) not in set(metric_classes().values())):
        return False
    if any(getattr(metric, name, None) is not None for name in metric._runtime_params):
        return False
    try:
        params = metric.get_params()
        return type(metric)(**params).get_params() == params
    except (TypeError, ValueError):  # e.g. a function given as ToolCallAccuracy's arg_comparison
        return False


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def serve(jobs: Connection, replies: Connection) -> None:  # pragma: no cover - runs in the child process
    """The child's loop: receive a list of ``(class path, params, sample dict)``, reply once per job."""
    classes = {class_path(c): c for c in metric_classes().values()}
    built: dict[str, Metric] = {}
    replies.send("ready")  # the library imported
    while True:
        try:
            batch = jobs.recv()
        except EOFError:
            return
        for path, params, sample, announce in batch:
            key = repr((path, sorted(params.items())))
            try:
                if key not in built:  # start-up of this metric: built, its first-use imports done, not timed
                    for module in classes[path].first_use_imports:
                        importlib.import_module(module)
                    built[key] = classes[path](**params)
                if announce:  # the parent times the item from here (it asked: no guessing on either side)
                    replies.send(BUILT)
                reply = result_fields(built[key].score(sample))
            except Exception as err:  # the parent records it as the item's failure
                reply = {"error": error_text(err)}
            replies.send(reply)


class ProcessWorker:
    """One child process scoring the items it is sent, one at a time; ``score`` returns a reply per item and
    kills the child when one overruns (a new one starts for the rest).

    The child is a fresh interpreter running ``CHILD`` over two pipes, not a ``multiprocessing`` spawn: a
    spawned child re-imports the caller's main script, which re-runs any unguarded top-level code (a
    script calling ``evaluate`` would call it again) and fails outright for code read from stdin."""

    def __init__(self):
        self._built: set[str] = set()  # the metrics the current child has built
        self._process: subprocess.Popen | None = None
        self._jobs: Connection | None = None
        self._replies: Connection | None = None

    def _start(self) -> None:
        job_read, job_write = os.pipe()
        reply_read, reply_write = os.pipe()
        path = os.pathsep.join([p for p in sys.path if p] + [os.environ.get("PYTHONPATH", "")])
        self._process = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(job_read), str(reply_write)], pass_fds=(job_read, reply_write),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": path})
        os.close(job_read)
        os.close(reply_write)
        self._jobs, self._replies = Connection(job_write, readable=False), Connection(reply_read, writable=False)
        if not self._replies.poll(STARTUP_SECONDS) or self._replies.recv() != "ready":
            self.close()
            raise RuntimeError(f"the scoring worker process did not start within {STARTUP_SECONDS} s")

    def score(self, metric: Metric, sample: Any, timeout: float | None) -> dict[str, Any]:
        """One item's reply (see ``score_many``)."""
        return self.score_many([(metric, sample)], timeout)[0][0]

    def score_many(self, jobs: list[tuple[Metric, Any]], timeout: float | None,
                   on_reply: Callable[[dict[str, Any], float], None] | None = None) -> list[tuple[dict[str, Any], float]]:
        """``(reply, seconds)`` for each ``(metric, sample)``, each also handed to ``on_reply`` as it arrives: the
        reply is ``result_fields`` or ``{"error": ..}``; an item without a reply after ``timeout`` seconds gets a
        ``TimeoutError`` reply and its child is killed. Start-up is not counted: neither a new child's import of
        the library nor, for the first item of each metric in a child, building the metric and importing what
        it imports on first use (``Metric.first_use_imports``; up to ``STARTUP_SECONDS``)."""
        out: list[tuple[dict[str, Any], float]] = []

        def add(reply: dict[str, Any], seconds: float) -> None:
            out.append((reply, seconds))
            if on_reply is not None:
                on_reply(reply, seconds)

        while len(out) < len(jobs):
            if self._process is None or self._process.poll() is not None:
                self.close()
                self._start()
            rest = jobs[len(out):]
            specs: dict[int, tuple[str, dict[str, Any], str]] = {}  # per metric object: path, params, key
            for metric, _ in rest:
                if id(metric) not in specs:
                    path, params = class_path(type(metric)), metric.get_params()
                    specs[id(metric)] = (path, params, repr((path, sorted(params.items()))))
            keys, first, seen = [], [], set(self._built)
            for metric, _ in rest:
                key = specs[id(metric)][2]
                keys.append(key)
                first.append(key not in seen)  # the child builds it with this job: its start-up is announced
                seen.add(key)
            self._jobs.send([(*specs[id(m)][:2], s.to_dict(), announce) for (m, s), announce in zip(rest, first)])
            since = time.monotonic()
            for key, announce in zip(keys, first):
                building = announce
                try:
                    reply = self._next(STARTUP_SECONDS if announce else timeout)
                    if announce and reply == BUILT:  # the metric's start-up is over: the item's own time starts
                        self._built.add(key)
                        building, since = False, time.monotonic()
                        reply = self._next(timeout)
                except TimeoutError:
                    self.close()
                    error = (f"TimeoutError: the metric was not built within {STARTUP_SECONDS:g} s ({KILLED})"
                             if building else timeout_error(timeout, KILLED))
                    add({"error": error}, time.monotonic() - since)
                    break
                except (EOFError, OSError) as err:  # the child died: this item failed, the rest go to a new one
                    self.close()
                    add({"error": error_text(err)}, time.monotonic() - since)
                    break
                now = time.monotonic()
                add(reply, now - since)
                since = now
        return out

    def _next(self, seconds: float | None) -> Any:
        """The child's next message; TimeoutError when none comes within ``seconds`` (None: no limit)."""
        if seconds is not None and not self._replies.poll(seconds):
            raise TimeoutError
        return self._replies.recv()

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=5)
            self._jobs.close()
            self._replies.close()
        self._process = self._jobs = self._replies = None
        self._built = set()


class ProcessBackend(ThreadBackend):
    """Items of ``rebuildable`` metrics in ``num_threads`` child processes, killed at ``timeout``."""

    name = "processes"
    abandons_late_items = False  # the child is killed instead

    def chunk_size(self, item: Item, plain_items: int) -> int:
        return max(1, min(MAX_CHUNK, plain_items // (8 * self.settings.num_threads)))

    def worker_state(self) -> ProcessWorker:
        return ProcessWorker()

    def close_state(self, state: ProcessWorker) -> None:
        state.close()

    def score_unit(self, state: ProcessWorker, unit: list[Item], pool: Any) -> None:
        items = iter(unit)

        def on_reply(reply: dict[str, Any], seconds: float) -> None:
            item = next(items)
            record: dict[str, Any] = {"sample": item.index, "metric": item.metric.name, "sample_key": item.key}
            if "error" in reply:
                if self.settings.strict and reply["error"].startswith("TimeoutError"):
                    raise TimeoutError(reply["error"].removeprefix("TimeoutError: "))
                record.update(score=None, error=reply["error"])
            else:
                record.update(reply, usage={}, lm_calls=0, cached_calls=0)
            record["latency_s"] = seconds
            pool.post(record)

        try:
            state.score_many([(item.metric, item.sample) for item in unit], self.settings.timeout, on_reply)
        except RuntimeError as err:  # the child did not start: the unit's items not yet replied to failed
            if self.settings.strict:
                raise
            for item in items:
                pool.post(failure_record(item.index, item.key, item.metric.name, error_text(err), 0.0))
