"""Scoring in a child process that can be killed: how ``evaluate(timeout=...)`` bounds CPU-bound metrics.

A thread cannot be stopped from outside, and a C routine (rapidfuzz's Levenshtein, a long ROUGE-L in pure
Python) can hold the interpreter for minutes, so a timeout measured in a thread is not a timeout. For a
metric that needs neither an LM nor an embedder, ``evaluate`` with a ``timeout`` runs each item in a
``ProcessWorker``: a child process that rebuilds the metric from its class name and ``get_params()`` (no
pickled objects), scores one sample at a time, and is killed when an item overruns; the next item gets a
fresh child. LLM judges stay in threads (their LM clients hold connections and an in-process model cannot
be copied); for them a timeout abandons the item's thread and records the failure, but the call itself
runs on until it returns (bound a served LM's calls with its own request timeout).
"""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import Any

from judges.base import Metric
from judges.catalogue import metric_classes

#: The child's program: serve jobs from the pipe whose descriptor is argv[1], reply on argv[2].
CHILD = ("import sys; from multiprocessing.connection import Connection; from judges.workers import _serve; "
         "_serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))")
#: Seconds a new worker process may take to import the library before it counts as failed to start.
STARTUP_SECONDS = 120.0


def rebuildable(metric: Metric) -> bool:
    """Whether ``type(metric)(**metric.get_params())`` gives the same metric in another process: a catalogue
    class, no LM or embedder, and settings that rebuild (not, e.g., a function as ``arg_comparison``)."""
    if metric.needs_lm or metric.needs_embeddings or type(metric) not in set(metric_classes().values()):
        return False
    if any(getattr(metric, name, None) is not None for name in metric._runtime_params):
        return False
    try:
        params = metric.get_params()
        return type(metric)(**params).get_params() == params
    except (TypeError, ValueError):  # e.g. a function given as ToolCallAccuracy's arg_comparison
        return False


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _serve(jobs: Connection, replies: Connection) -> None:  # pragma: no cover - runs in the child process
    from judges.evaluation import _jsonable

    classes = {_class_path(c): c for c in metric_classes().values()}
    built: dict[str, Metric] = {}
    replies.send("ready")  # imports done: from here on an item's time is its own
    while True:
        try:
            class_path, params, sample = jobs.recv()
        except EOFError:
            return
        key = repr((class_path, sorted(params.items())))
        try:
            metric = built.get(key) or built.setdefault(key, classes[class_path](**params))
            result = metric.score(sample)
            reply = {"score": float(result.score),
                     "details": {k: _jsonable(v) for k, v in result.items() if k not in ("score", "undefined_reason")}}
            if result.get("undefined_reason"):
                reply["undefined_reason"] = result["undefined_reason"]
        except Exception as err:  # the parent records it as the item's failure
            reply = {"error": f"{type(err).__name__}: {err}"}
        replies.send(reply)


class ProcessWorker:
    """One child process scoring one item at a time; ``score`` returns the reply or raises TimeoutError
    after killing the child (a new one starts on the next call).

    The child is a fresh interpreter running ``CHILD`` over two pipes, not a ``multiprocessing`` spawn: a
    spawned child re-imports the caller's main script, which re-runs any unguarded top-level code (a
    script calling ``evaluate`` would call it again) and fails outright for code read from stdin."""

    def __init__(self):
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

    def score(self, metric: Metric, sample: Any, timeout: float) -> dict[str, Any]:
        """Score ``sample`` with a rebuilt copy of ``metric`` within ``timeout`` seconds (a new child's
        start-up is not counted)."""
        if self._process is None or self._process.poll() is not None:
            self.close()
            self._start()
        self._jobs.send((_class_path(type(metric)), metric.get_params(), sample.to_dict()))
        if not self._replies.poll(timeout):
            self.close()
            raise TimeoutError(f"no result after {timeout} s (the worker process was killed)")
        return self._replies.recv()

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=5)
            self._jobs.close()
            self._replies.close()
        self._process = self._jobs = self._replies = None

