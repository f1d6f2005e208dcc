"""Run files: an append-only JSONL record of a run, so a killed run resumes where it stopped.

    {"header": {"version": 2, "samples": "<hash of every sample>", "metrics": {name: {class, settings, models}},
                "ids": ["<the user's id of sample 0>", ...]}}     # "ids" only with an id column
    {"sample": 0, "metric": "exact_match", "score": 1.0, "run": "<run id>", ...}   # one line per finished item
    {"call": {"sample": 0, "metric": "faithfulness", "model": ..., "prompt_tokens": .., ...}, "run": "<run id>"}
                                              # one line per paid LM call, written as the LM answers it

Owns: writing records the moment the driver receives them (one ``write`` per batch, to the operating
system before the next item is handed out: a SIGKILL loses none of them), reading them back, refusing a
file made for other samples or settings or holding a score outside [0, 1], and the lock that keeps a
second run off a file in use (``<run file>.lock``, an ``flock`` the operating system drops when its
holder exits, killed or not). Must not decide what a record holds (``judges.run.records``).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from judges.metrics.base import Metric
from judges.run.records import metric_config, score_problem
from judges.run.usage import add_call, add_version_1_usage

#: 2: call lines and a ``run`` id in records. A version-1 file (records only) is still read and resumed.
RUN_FILE_VERSION = 2
READS_VERSIONS = (1, 2)


def run_header(keys: Sequence[str], names: Sequence[str], metrics: Sequence[Metric], *, lm: Any = None,
               embeddings: Any = None) -> dict[str, Any]:
    """What identifies a run: the samples (by their keys) and each metric's class, settings and models
    (``metric_config``; ``lm``, ``embeddings``: the run's, as ``evaluate`` was given them)."""
    return {
        "version": RUN_FILE_VERSION,
        "samples": hashlib.sha1("".join(keys).encode()).hexdigest()[:16],
        "metrics": {name: metric_config(m, lm, embeddings) for name, m in zip(names, metrics)},
    }


def open_own(path: Path, flags: int) -> int:
    """``os.open`` that never follows a symbolic link (a link at the run file's or the lock's path would
    send the writes into a file elsewhere): refused with one line naming the path."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ValueError(f"{path} is a symbolic link; a run file and its lock are never written through one: "
                             "give the file's real path") from None
        raise


def _readable_length(data: bytes) -> int:
    """How many bytes of a run file to keep: all but a last line cut short (no newline), or a last line that
    is not JSON at all (NUL bytes a crash left), which a resumed run would otherwise append after."""
    keep = data.rfind(b"\n") + 1 if not data.endswith(b"\n") else len(data)
    start = data.rfind(b"\n", 0, max(keep - 1, 0)) + 1
    last = data[start:keep].strip()
    if start > 0 and last:
        try:
            json.loads(last)
        except (ValueError, RecursionError):
            keep = start
    return keep


def read_trimmed(path: Path, is_header: Callable[[Any], bool], refusal: str) -> bytes:
    """The bytes of one of this library's append-only JSONL files (a run file, calibrate's judgments), never read
    through a link, after trimming a last line a kill cut or a crash garbled, so that later appends follow whole
    lines. A file whose first line fails ``is_header`` is refused (ValueError ``refusal``) and left as it is."""
    with os.fdopen(open_own(path, os.O_RDWR), "r+b") as handle:
        data = handle.read()
        first = data.split(b"\n", 1)[0]
        try:
            header = json.loads(first)
        except (ValueError, RecursionError):
            header = None
        if not is_header(header):
            raise ValueError(refusal)
        keep = _readable_length(data)
        if keep <= len(first):  # the header alone, its newline cut: the header stays, whole
            handle.truncate(len(first))
            handle.seek(len(first))
            handle.write(b"\n")
            return first + b"\n"
        if keep < len(data):  # a kill mid-line, or a crash's garbage line: whole lines only (the header checked above)
            handle.truncate(keep)
        return data[:keep]


class FileInUse(ValueError):
    """Another process holds the lock on ``path`` (``holder``: what it wrote into the lock file)."""

    def __init__(self, path: Path, holder: str, what: str = "file"):
        self.path, self.holder = path, holder
        super().__init__(f"{what} {path} is in use by another run ({holder or 'holder unknown'}); wait for it "
                         f"to finish or give this run another {what}")


class RunFileInUse(FileInUse):
    """Another run holds the run file's lock."""

    def __init__(self, path: Path, holder: str):
        super().__init__(path, holder, "run file")


def take_lock(lock_path: Path, guarded: Path, what: str = "file") -> int:
    """An exclusive ``flock`` on ``lock_path`` (made if missing, never through a link), holding a line that
    says who holds it; the descriptor, whose closing (or the holder's exit, killed or not) drops the lock.
    ``FileInUse`` names ``guarded`` and the holder when another process has it."""
    fd = open_own(lock_path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        os.close(fd)
        raise (RunFileInUse(guarded, holder) if what == "run file" else FileInUse(guarded, holder, what)) from None
    except OSError as err:  # a file system without locks (some network mounts)
        os.close(fd)
        raise ValueError(f"{what} {guarded}: cannot lock {lock_path} ({err.strerror}); put it on a local disk") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0)
    return fd


def read_run_records(path: str | Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The header (None for plain ``to_jsonl`` output) and the records of a run file or JSONL output.

    A record is a dict with an int ``sample`` and a ``metric``; a later record for the same pair
    replaces an earlier one. The last line of a run file may be cut short (a run killed, or still
    being written) and is skipped; any other line that is not a record raises ValueError naming it.
    Call lines (``read_run_calls``) are not records and are passed over."""
    header, records, _ = _read_lines(Path(path))
    return header, records


def read_run_calls(path: str | Path) -> dict[tuple[str, int, str], dict[str, Any]]:
    """The paid LM calls a run file holds, summed per (run id, sample, metric) as ``add_usage`` totals: one
    line ``{"call": {"sample", "metric", "model", "prompt_tokens", "completion_tokens"}, "run": id}`` per call,
    written as the LM answered it (``judges.run.usage.unrecorded_usage`` sets them against the records); and,
    under the run id ``"version 1"``, the own usage of each record without a run id (a version-1 file's,
    which has no call lines) that a later record replaced."""
    return _read_lines(Path(path))[2]


def _read_lines(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[tuple[str, int, str], dict]]:
    lines = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1) if line.strip()]
    if not lines:
        raise ValueError(f"{path} is empty")
    try:
        first = json.loads(lines[0][1])
    except json.JSONDecodeError:
        first = None
    except RecursionError:
        raise ValueError(f"{path}: line {lines[0][0]} is nested too deeply to read") from None
    header = first.get("header") if isinstance(first, dict) and isinstance(first.get("header"), dict) else None
    records: dict[tuple[int, str], dict[str, Any]] = {}
    where: dict[tuple[int, str], int] = {}  # the line each record came from
    calls: dict[tuple[str, int, str], dict[str, Any]] = {}
    body = lines[1:] if header is not None else lines
    for position, (number, line) in enumerate(body, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if header is not None and position == len(body):
                continue
            raise ValueError(f"{path}: line {number} is not JSON") from None
        except RecursionError:
            raise ValueError(f"{path}: line {number} is nested too deeply to read") from None
        if isinstance(record, dict) and "call" in record:
            problem = _call_problem(record)
            if problem:
                raise ValueError(f"{path}: line {number} is not a call line ({problem})")
            add_call(calls, record["run"], record["call"])
            continue
        if not isinstance(record, dict) or not isinstance(record.get("sample"), int) or "metric" not in record:
            raise ValueError(f"{path}: line {number} is not an evaluate record (needs an int 'sample' and 'metric')")
        problem = None if record.get("score") is None else score_problem(record["score"], record["metric"])
        if problem:
            raise ValueError(f"{path}: line {number}: {problem}")
        key = (record["sample"], record["metric"])
        if key in records and "run" not in records[key]:
            problem = _usage_problem(records[key])
            if problem:
                raise ValueError(f"{path}: line {where[key]}: a replaced record's usage: {problem}")
            add_version_1_usage(calls, records[key])
        records[key], where[key] = record, number
    return header, list(records.values()), calls


def _what_differs(existing: dict[str, Any], wanted: dict[str, Any], key: str) -> str:
    """The first few differences between two headers' metrics, as " (name.path: x in the file, y now; ...)"
    (empty for samples, which are only a hash)."""
    if key != "metrics" or not isinstance(existing.get(key), dict):
        return ""
    changes: list[str] = []

    def compare(there: dict[str, Any], here: dict[str, Any], path: str) -> None:
        for name in sorted(set(there) | set(here), key=str):
            at = f"{path}.{name}" if path else str(name)
            if name not in there or name not in here:
                changes.append(f"{at}: {'only now' if name in here else 'only in the file'}")
            elif isinstance(there[name], dict) and isinstance(here[name], dict):
                compare(there[name], here[name], at)
            elif there[name] != here[name]:
                changes.append(f"{at}: {json.dumps(there[name])} in the file, {json.dumps(here[name])} now")

    compare(existing[key], wanted[key], "")
    if not changes:
        return ""
    return " (" + "; ".join(changes[:3]) + (f"; {len(changes) - 3} more" if len(changes) > 3 else "") + ")"


def _not_a_count(value: Any) -> bool:
    return isinstance(value, bool) or not isinstance(value, int) or value < 0


def _usage_problem(record: dict[str, Any]) -> str | None:
    calls, usage = record.get("lm_calls", 0), record.get("usage") or {}
    if _not_a_count(calls):
        return f"lm_calls {calls!r} is not a count"
    if not isinstance(usage, dict) or not all(isinstance(t, dict) for t in usage.values()):
        return "'usage' is not {model: {prompt_tokens, completion_tokens}}"
    for model, tokens in usage.items():
        for kind in ("prompt_tokens", "completion_tokens"):
            value = tokens.get(kind) or 0
            if _not_a_count(value):
                return f"{model}'s {kind} {value!r} is not a count"
    return None


def _call_problem(line: dict[str, Any]) -> str | None:
    call = line["call"]
    if not isinstance(line.get("run"), str) or not isinstance(call, dict):
        return "needs a 'call' object and a 'run' id"
    if not isinstance(call.get("sample"), int) or not isinstance(call.get("metric"), str) \
            or not isinstance(call.get("model"), str):
        return "the call needs an int 'sample', a 'metric' and a 'model'"
    for kind in ("prompt_tokens", "completion_tokens"):
        value = call.get(kind)
        if _not_a_count(value):
            return f"{kind} {value!r} is not a count"
    return None


class RunFile:
    """Append-only JSONL: a header line describing the run, then one line per finished (sample, metric) and
    one per paid LM call (``read_run_calls``).

    A line cut short by a kill is ignored on reading (its item is simply done again). Records are written
    with one ``os.write`` per batch on a descriptor opened for appending, so each batch reaches the
    operating system whole before ``append`` returns (as durable as a write and flush per record). The
    file's lock is taken before anything is read: a second run on it is refused (``RunFileInUse``, naming
    the holder) before it reads, truncates or scores anything."""

    def __init__(self, path: str | Path, header: dict[str, Any]):
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self.path = Path(path)
        self.header = header
        self.done: dict[tuple[int, str], dict[str, Any]] = {}
        self.calls: dict[tuple[str, int, str], dict[str, Any]] = {}  # read_run_calls: what earlier runs paid for
        if self.path.is_dir():
            raise ValueError(f"run file {self.path} is a directory; give a file path")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            if self.path.exists() and self.path.stat().st_size > 0:
                self._read()
            else:
                fd = open_own(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(json.dumps({"header": header}, ensure_ascii=False) + "\n")
            self._fd = open_own(self.path, os.O_WRONLY | os.O_APPEND)
        except BaseException:
            self.close()  # refused: the lock goes with it
            raise

    def _lock(self) -> None:
        self._lock_fd = take_lock(self.path.with_name(self.path.name + ".lock"), self.path, "run file")

    def _read(self) -> None:
        read_trimmed(self.path, lambda header: isinstance(header, dict) and isinstance(header.get("header"), dict),
                     f"{self.path} is not a run file of this library (no header line); it was left as it is: give a "
                     "new run file")
        try:
            existing, records, self.calls = _read_lines(self.path)
        except ValueError as error:
            raise ValueError(f"{error}; use a new run file (or delete it to start over)") from None
        if existing is None:
            raise ValueError(f"{self.path} is not a run file of this library (no header line)")
        if existing.get("version") not in READS_VERSIONS:
            raise ValueError(f"{self.path} is a run file of version {existing.get('version')!r}, which this library "
                             f"does not read (it reads {list(READS_VERSIONS)}); use a new run file")
        for key in ("samples", "metrics"):
            if existing.get(key) != self.header.get(key):
                differs = _what_differs(existing, self.header, key)
                raise ValueError(f"{self.path} was written for other {key} than this run{differs}; use a new run "
                                 "file (or delete it to start over)")
        self.done = {(r["sample"], r["metric"]): r for r in records}

    def append(self, records: dict[str, Any] | Iterable[dict[str, Any]]) -> None:
        """Write one record, or a batch of them, and keep them in ``done``."""
        batch = [records] if isinstance(records, dict) else list(records)
        self._write(batch)
        for record in batch:
            self.done[(record["sample"], record["metric"])] = record

    def append_calls(self, calls: Iterable[dict[str, Any]], run: str) -> None:
        """Write paid LM calls (``judges.run.backend.Calls`` entries) of run ``run`` as call lines."""
        self._write([{"call": call, "run": run} for call in calls])

    def _write(self, lines: list[dict[str, Any]]) -> None:
        if not lines:
            return
        if self._fd is None:
            raise ValueError(f"{self.path}: the run file is closed")
        data = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in lines).encode("utf-8")
        view = memoryview(data)
        try:
            while view:  # a regular file takes it in one write; a short write is finished, never dropped
                view = view[os.write(self._fd, view):]
        except OSError as err:  # a full disk, a quota: say which file, and what was not written
            kinds = sorted({"LM call" if "call" in line else "record" for line in lines})
            raise OSError(err.errno, f"{err.strerror}: the run file could not take {len(lines)} "
                                     f"{' and '.join(kinds)} line(s)", str(self.path)) from err

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:  # closing the descriptor drops the flock; the lock file stays (harmless)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> RunFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
