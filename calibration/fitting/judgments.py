"""Judgments a calibration paid for, kept as they come, so an interrupted ``calibrate`` resumes without paying
again.

    {"judgments": 1}                                                # the header
    {"key": "<judge state + sample>", "judge": "faithfulness", "score": 0.5, "details": {...},
     "lm_calls": 2, "cached_calls": 0, "usage": {model: {"prompt_tokens": .., "completion_tokens": ..}}}

A judgment's key is the judge's class, settings, models and compiled steps (``metric_config`` and its
program's state, both stable across processes) with the sample's: a judge compiled differently, or given
another LM, judges again. Failed items are not kept (a rerun tries them again). ``judge_scores`` reads and
writes the records open in ``recording_judgments``.

Owns: the file and the key. Must not score (``calibration.fitting.fit.judge_scores`` does).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from pathlib import Path
from typing import Any

import dspy

from judges.metrics.base import Metric, state_digest
from judges.run.records import metric_config, result_fields, sample_key
from judges.run.run_file import open_own, read_trimmed
from judges.run.usage import add_usage

HEADER = {"judgments": 1}

_open_records: contextvars.ContextVar[JudgmentRecords | None] = contextvars.ContextVar("judgments", default=None)


class JudgmentRecords:
    """The judgments file at ``path``: read back when it exists (a last line cut or garbled by a crash is
    trimmed), appended to, one ``os.write`` per judgment. ``reused`` and ``written`` count this session's
    reads and writes; ``spent`` totals the LM use of the judgments it was given (``tracked_usage``'s shape)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.reused, self.written, self.spent = 0, 0, {}
        self._done: dict[str, dict[str, Any]] = {}
        if self.path.exists() and self.path.stat().st_size > 0:
            self._read()
        else:
            fd = open_own(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.write(fd, (json.dumps(HEADER) + "\n").encode())
            os.close(fd)
        self._fd = open_own(self.path, os.O_WRONLY | os.O_APPEND)

    def _read(self) -> None:
        data = read_trimmed(self.path, lambda header: header == HEADER,
                            f"{self.path} is not a judgments file of this library (no header line); it was left as it "
                            "is: give calibrate another --out")
        for number, line in enumerate(data.splitlines()[1:], start=2):
            try:
                record = json.loads(line)
                self._done[record["key"]] = record
            except (ValueError, RecursionError, KeyError, TypeError):
                raise ValueError(f"{self.path}, line {number}: not a judgment record; delete the file to judge "
                                 "every item again") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def stored(self) -> int:
        """How many judgments the file held when it was opened (an earlier run's), plus this session's."""
        return len(self._done)

    @staticmethod
    def key(judge: Metric, sample: Any) -> str:
        program = judge.dump_state() if isinstance(judge, dspy.Module) else None
        return state_digest({"judge": metric_config(judge), "program": program, "sample": sample_key(sample)})

    def get(self, judge: Metric, sample: Any) -> dspy.Prediction | None:
        """The judgment recorded for ``judge`` on ``sample``, as the result ``judge.score`` gave, or None."""
        record = self._done.get(self.key(judge, sample))
        if record is None:
            return None
        self.reused += 1
        flags = {flag: record[flag] for flag in ("undefined_reason", "degraded") if record.get(flag)}
        return dspy.Prediction(score=record["score"], **record["details"], **flags)

    def put(self, judge: Metric, sample: Any, result: Any, usage: dict[str, Any]) -> None:
        """Record ``judge``'s ``result`` on ``sample`` and the LM use (``usage``) it cost. A result without a
        score in [0, 1] is not kept: the item is judged again on a rerun, as a failed one is."""
        add_usage(self.spent, usage)
        try:
            fields = result_fields(result)
        except ValueError:
            return
        record = {"key": self.key(judge, sample), "judge": judge.name, **fields,
                  "lm_calls": usage.get("lm_calls", 0), "cached_calls": usage.get("cached_calls", 0),
                  "usage": usage.get("by_model", {})}
        os.write(self._fd, (json.dumps(record, ensure_ascii=False) + "\n").encode())
        self._done[record["key"]] = record
        self.written += 1


@contextlib.contextmanager
def recording_judgments(records: JudgmentRecords):
    """Within the block, ``judge_scores`` reuses what ``records`` holds and records each new judgment."""
    token = _open_records.set(records)
    try:
        yield records
    finally:
        _open_records.reset(token)


def open_records() -> JudgmentRecords | None:
    """The records ``recording_judgments`` opened for this block, if any."""
    return _open_records.get()
