"""How many threads the models compute with: the cores this process may use, and for llama.cpp's decoding
all of them or one while another program takes them.

Owns: ``usable_cores`` (the process's CPU affinity), ``DecodeThreads`` (timed decode steps decide the thread
count) and ``runnable_elsewhere`` (``/proc/loadavg``). Must not touch llama.cpp itself: the engine applies
the count it is given.
"""

from __future__ import annotations

import collections
import os
import statistics
from collections.abc import Callable


def usable_cores() -> int:
    """The CPUs this process may run on: its affinity mask (a container's cpuset, ``taskset``, a test worker
    pinned to one core), not every CPU of the machine. Two compute threads on one core only wait for each
    other, so every default thread count (llama.cpp, ONNX Runtime, torch training) is capped by it."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def runnable_elsewhere() -> int | None:
    """Tasks runnable on this machine now besides the caller (``/proc/loadavg``), None where unknown."""
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return max(0, int(handle.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return None


class DecodeThreads:
    """How many threads decode each generated token: all of them, or one when the cores are shared.

    Decoding one token of a small model is a few milliseconds of work split across threads that wait for
    each other at every layer. When another busy program takes the cores, a waiting thread spins while the
    one it waits for is descheduled: a token can take fifteen times longer with 2 threads than with 1
    (measured in docs/performance.md). So the engine times its decode steps and keeps
    the setting whose steps are faster: now and then it tries the other one for ``probe_steps`` steps and
    switches when their median is under ``margin`` times the median of the current setting's last 9 steps
    (clearly faster, not faster by noise). The first try comes after ``first_interval`` steps; each try that
    loses doubles the wait (up to ``max_interval``), a switch resets it; and a step over 4x the recent median (a neighbour may have arrived) triggers a try at once
    (it wins once slow steps are most of the recent ones, not after one spike). When a try of more threads
    cost over 10x a step (beside matrix products on both cores one such step took seconds), the next waits
    until no other task is runnable on the machine (``others_running``; ``/proc/loadavg``).
    Prompts (batches) use the same count (mixing 1 for steps with 2 for prompts was slower still beside
    such a neighbour). The thread count does not change results: each output value is one thread's sum."""

    def __init__(self, n_threads: int, probe_steps: int = 1, first_interval: int = 4, max_interval: int = 1024,
                 margin: float = 0.8, others_running: Callable[[], int | None] | None = None):
        self.choices = (n_threads, 1) if n_threads > 1 else (n_threads,)
        self.margin = margin
        self.others_running = others_running or runnable_elsewhere
        self.best = n_threads
        self.probe_steps, self.first_interval, self.max_interval = probe_steps, first_interval, max_interval
        self.interval = self.until_probe = first_interval
        self.recent: collections.deque = collections.deque(maxlen=9)  # the current setting's last steps
        self.probe: list[float] = []  # the other setting's steps in the try under way
        self.costly_up = False  # the last try of more threads cost over 10x the current setting's steps
        self.switches = 0

    def _other(self) -> int:
        return self.choices[1] if self.best == self.choices[0] else self.choices[0]

    def threads(self) -> int:
        """The thread count for the next decode step."""
        if len(self.choices) == 1 or self.until_probe > 0:
            return self.best
        if not self.probe and self._other() > self.best and self.costly_up and (self.others_running() or 0) > 0:
            # the last try of more threads cost over 10x a step, and something else still runs: later
            self.until_probe = self.first_interval
            return self.best
        return self._other()

    def record(self, threads: int, seconds: float) -> None:
        """A decode step with ``threads`` threads took ``seconds``."""
        if len(self.choices) == 1:
            return
        if threads == self.best:
            if len(self.recent) >= 3 and seconds > 4 * statistics.median(self.recent):
                self.until_probe = 0  # a try now, against the recent median (one spike does not move it)
            else:
                self.until_probe -= 1
            self.recent.append(seconds)
            return
        self.probe.append(seconds)
        if len(self.probe) < self.probe_steps:
            return
        tried, current = statistics.median(self.probe), statistics.median(self.recent)
        if threads > self.best:
            self.costly_up = tried > 10 * current
        if tried < self.margin * current:
            self.best, self.interval = threads, self.first_interval
            self.recent = collections.deque(self.probe, maxlen=self.recent.maxlen)
            self.switches += 1
        else:
            self.interval = min(2 * self.interval, self.max_interval)
        self.probe, self.until_probe = [], self.interval
