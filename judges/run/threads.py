"""The default backend: items scored on this process's threads.

* ``num_threads`` worker threads (daemons: an item abandoned at its timeout never keeps the process alive)
  take work from one queue. An item of an LLM judge is a unit of its own; items of metrics without an LM
  go in chunks, so scoring a metric that takes microseconds costs microseconds more, not a thread start.
  Each record goes to the driver the moment its item finishes; the driver writes whatever has arrived
  in one go (``judges.run.run_file``), so batching costs no durability.
* Each worker runs in a copy of the caller's context: DSPy's settings (``evaluate(lm=...)``) and the run's
  default embeddings travel with it.
* ``timeout`` (seconds per item, counted from when the item starts, not from when it was queued): an item
  still running after it is recorded as ``TimeoutError`` and abandoned (its late result is discarded) and
  a new worker takes its place; the call itself runs on until it returns (a thread cannot be stopped:
  ``judges.run.processes`` can stop metrics without an LM, an LM call runs until the LM answers).
* A ``PermanentLMError`` stops the run: no new item starts, those in flight finish and are handed over.
* Each paid LM call reaches the driver as the LM answers it (``on_calls``), before its item's record: an
  abandoned item's calls keep arriving while the run lasts, and are counted; calls it makes after the run
  has returned are not.

Owns: the pool, its chunking and the in-thread timeout. Must not write run files or rebuild metrics.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import queue
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from judges.lm.embeddings import default_embeddings
from judges.lm.resolve import judges_context, resolve_lm
from judges.lm.served import PermanentLMError
from judges.run.backend import Backend, Calls, Item, Records, score_item
from judges.run.records import failure_record, timeout_error

#: Most items of metrics without an LM in one unit of work (their records reach the driver together).
MAX_CHUNK = 256
_EXITED = object()  # a worker's last message
#: Seconds an interrupted run (Ctrl-C, SIGTERM under the CLI) waits for the items in flight, so that LM calls
#: answered while stopping are written with their records; a second interrupt stops the wait.
INTERRUPT_GRACE = 30.0


class ThreadBackend(Backend):
    """Items on ``num_threads`` threads of this process (see the module docstring)."""

    name = "threads"

    def run(self, items: Sequence[Item], on_records: Records, on_calls: Calls | None = None) -> str | None:
        if not items:
            return None
        lm = resolve_lm(self.settings.lm) if self.settings.lm is not None else None
        with judges_context(lm=lm) if lm is not None else contextlib.nullcontext(), \
                default_embeddings(self.settings.embeddings):
            return _Pool(self, items, on_records, on_calls).drive()

    # --- what the process backend changes ----------------------------------------------------------
    #: Whether the driver abandons items that overrun ``timeout`` (a thread cannot be stopped otherwise).
    abandons_late_items = True

    def chunk_size(self, item: Item, plain_items: int) -> int:
        """How many items go in the unit of work that starts with ``item``."""
        if item.metric.needs_lm or self.settings.timeout is not None:
            return 1
        return max(1, min(MAX_CHUNK, plain_items // (8 * self.settings.num_threads)))

    def worker_state(self) -> Any:
        """What one worker keeps between units of work (nothing here; a child process for processes)."""
        return None

    def close_state(self, state: Any) -> None:
        """Release what ``worker_state`` made."""

    def score_unit(self, state: Any, unit: list[Item], pool: _Pool) -> None:
        """Score ``unit`` in this thread, handing each record to ``pool.post`` the moment it is made; stop
        before an item once the run is stopping."""
        settings = self.settings
        for item in unit:
            if pool.stopping.is_set():
                break
            with pool.watching(item) as abandoned:
                record = score_item(item, settings.retries, settings.backoff, settings.strict,
                                    pool.post_call if pool.on_calls is not None else None)
            if abandoned():
                raise _Abandoned
            pool.post(record)


class _Call(NamedTuple):
    """A worker's message: one paid LM call (``Calls``'s entry)."""

    call: dict[str, Any]


class _Abandoned(Exception):
    """The item this worker ran was recorded as timed out and a new worker took its place: it leaves."""


class _Pool:
    """One run of a ``ThreadBackend``: the work queue, its workers, and the driver's loop."""

    def __init__(self, backend: ThreadBackend, items: Sequence[Item], on_records: Records, on_calls: Calls | None):
        self.backend, self.on_records, self.on_calls = backend, on_records, on_calls
        self.timeout = backend.settings.timeout
        self.watch = self.timeout is not None and backend.abandons_late_items
        self.work: queue.SimpleQueue = queue.SimpleQueue()
        plain = sum(1 for item in items if not item.metric.needs_lm)
        at = 0
        while at < len(items):  # consecutive items in one unit, in the order given
            size = backend.chunk_size(items[at], plain)
            unit = [items[at]]
            while len(unit) < size and at + len(unit) < len(items) and not items[at + len(unit)].metric.needs_lm:
                unit.append(items[at + len(unit)])
            self.work.put(unit)
            at += len(unit)
        self.results: queue.SimpleQueue = queue.SimpleQueue()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.running: dict[int, tuple[Item, float]] = {}  # token -> (item, when it started), watched items
        self.abandoned: set[int] = set()
        self.tokens = itertools.count()
        self.pending_calls: list[dict[str, Any]] = []  # taken from ``results``, not yet written
        self.pending_records: list[dict[str, Any]] = []

    # --- workers ----------------------------------------------------------------------------------
    def post(self, record: dict[str, Any]) -> None:
        """A finished item's record, for the driver (which writes what has arrived, in one go, at once)."""
        self.results.put(record)

    def post_call(self, call: dict[str, Any]) -> None:
        """A paid LM call of a running item (an abandoned one's too, while the run lasts), for the driver."""
        self.results.put(_Call(call))

    def start_worker(self) -> None:
        threading.Thread(target=contextvars.copy_context().run, args=(self.work_loop,), daemon=True,
                         name="evaluate-worker").start()

    def work_loop(self) -> None:
        state = self.backend.worker_state()
        try:
            while not self.stopping.is_set():
                try:
                    unit = self.work.get_nowait()
                except queue.Empty:
                    break
                try:
                    self.backend.score_unit(state, unit, self)
                except _Abandoned:
                    return  # no _EXITED: the worker that replaced this one counts in its place
                except BaseException as err:  # a PermanentLMError, or a failure under strict
                    self.stopping.set()
                    self.results.put(err)
                    break
        finally:
            self.backend.close_state(state)
        self.results.put(_EXITED)

    @contextlib.contextmanager
    def watching(self, item: Item):
        """Around one in-thread item: the driver may abandon it after ``timeout``. Yields a function telling,
        once the item returned, whether it was abandoned meanwhile."""
        if not self.watch:
            yield lambda: False
            return
        token = next(self.tokens)
        with self.lock:
            self.running[token] = (item, time.monotonic())
        try:
            yield lambda: token in self.abandoned
        finally:
            with self.lock:
                self.running.pop(token, None)

    # --- the driver -------------------------------------------------------------------------------
    def drive(self) -> str | None:
        self.live = 0
        self.interrupted = self.drained = False
        try:
            with self.signals_stop_the_run():
                for _ in range(min(self.backend.settings.num_threads, self.work.qsize())):
                    self.start_worker()
                    self.live += 1
                refused = self.drive_until_done()
                if self.interrupted:
                    self.drain(INTERRUPT_GRACE)
                    raise KeyboardInterrupt("interrupted: the items in flight were recorded")
                return refused
        except KeyboardInterrupt:
            self.stopping.set()  # no new item starts
            if not self.drained:  # one wait at most: the grace said is the grace kept, a second signal ends it
                self.drain(INTERRUPT_GRACE)
            raise

    @contextlib.contextmanager
    def signals_stop_the_run(self):
        """In the main thread, Ctrl-C (and SIGTERM where a handler of the program's own stands) only sets a flag
        the driver reads between messages, so no message is lost to an exception raised mid-step; a second
        signal stops at once. The handlers are put back afterwards."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(sig)
            if handler is signal.default_int_handler or (sig == signal.SIGTERM and callable(handler)):
                previous[sig] = signal.signal(sig, self.on_signal)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def on_signal(self, signum, frame) -> None:
        if self.interrupted:
            raise KeyboardInterrupt(f"signal {signum} again: stopped at once")
        self.interrupted = True
        self.stopping.set()

    def drain(self, grace: float) -> None:
        """After an interrupt: write the calls and records of the items in flight as they finish, for at most
        ``grace`` seconds (a second interrupt ends the wait). Runs once per run."""
        self.drained = True
        self.write_pending_calls()  # taken from the queue before the interrupt, not yet written
        self.write_pending_records()
        if self.live <= 0:
            return
        sys.stderr.write(f"stopping: waiting up to {grace:.0f} s for the items in flight, so their LM calls are "
                         "recorded (interrupt again to stop now)\n")
        deadline = time.monotonic() + grace
        while self.live > 0 and time.monotonic() < deadline:
            try:
                message = self.results.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if message is _EXITED:
                self.live -= 1
            elif isinstance(message, _Call):
                self.pending_calls.append(message.call)
                self.write_pending_calls()
            elif isinstance(message, dict):
                self.pending_records.append(message)
                self.write_pending_records()

    def drive_until_done(self) -> str | None:
        refused: PermanentLMError | None = None
        while self.live > 0 and not self.interrupted:
            try:
                message = self.results.get(timeout=0.2)  # a timed wait lets an interrupt in at once
            except queue.Empty:
                message = None
            failed: BaseException | None = None
            while message is not None:  # what is taken from the queue waits in self.pending until written
                if message is _EXITED:
                    self.live -= 1
                elif isinstance(message, _Call):
                    self.pending_calls.append(message.call)
                elif isinstance(message, PermanentLMError):
                    refused = refused or message
                elif isinstance(message, BaseException):
                    failed = failed or message
                else:
                    self.pending_records.append(message)
                try:
                    message = self.results.get_nowait()
                except queue.Empty:
                    message = None
            self.write_pending_calls()  # before the records they belong to (and before a strict failure)
            if failed is not None:
                raise failed
            if self.watch:
                late = self.late_items()
                self.pending_records.extend(late)
                for _ in late:  # a new worker in each abandoned one's place
                    self.start_worker()
            self.write_pending_records()
        return str(refused) if refused is not None else None

    def write_pending_calls(self) -> None:
        """Calls are taken off the list before they are written: one interrupted there is lost, never counted
        twice."""
        calls, self.pending_calls = self.pending_calls, []
        if calls:
            self.on_calls(calls)

    def write_pending_records(self) -> None:
        """Records leave the list once written: one interrupted mid-write is written again (a record written
        twice is read once: the run file keys them by sample and metric)."""
        if self.pending_records:
            self.on_records(list(self.pending_records))
            self.pending_records = []

    def late_items(self) -> list[dict[str, Any]]:
        """Timeout records of the watched items that have run over ``timeout``, now abandoned."""
        now, late = time.monotonic(), []
        with self.lock:
            for token, (item, started) in list(self.running.items()):
                if now - started > self.timeout and token not in self.abandoned:
                    if self.backend.settings.strict:
                        raise TimeoutError(f"{item.metric.name} on sample {item.index} took over {self.timeout} s")
                    self.abandoned.add(token)
                    del self.running[token]
                    late.append(failure_record(item.index, item.key, item.metric.name, timeout_error(self.timeout),
                                               now - started))
        return late
