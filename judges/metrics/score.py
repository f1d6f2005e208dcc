"""What an exported metric gives DSPy: a ``MetricScore``, or a ``MetricStop`` that ends the run.

``MetricScore`` is a ``dspy.Prediction(score=..., feedback=..., ...)`` (how SIMBA, GEPA and Refine read a score
with metadata) that is also a number wherever a number is read (sums, means, comparisons, ``float()``), true
only at or above the threshold wherever truth is tested (BootstrapFewShot's ``if success``, BootstrapFinetune's
filter), and a plain mapping of JSON values to orjson, json and pickle (SIMBA's and Refine's prompts serialise
it with orjson, which refuses float subclasses and reads dict subclasses).

The ``MetricStop`` errors are ``BaseException`` on purpose (like ``KeyboardInterrupt``): DSPy's Evaluate and
optimizers catch ``Exception`` per item and score it ``failure_score`` (0), which would read a judge that
cannot judge as a bad program. ``stopping`` cancels the items still queued in DSPy's thread pool first.

Owns: the return type and the stop errors. Must not build samples (``judges.metrics.fields``) or judge.
"""

from __future__ import annotations

import copy
import numbers
import queue
import sys
import weakref
from collections.abc import Mapping
from typing import Any

import dspy
from dspy.utils.parallelizer import ParallelExecutor


class MetricStop(BaseException):
    """A failure that must stop a DSPy run rather than score an item: the metric is misconfigured, or its judge
    cannot judge. A ``BaseException``, so that DSPy's per-item ``except Exception`` (which would score the
    item ``failure_score``, 0) lets it through; catch it by name."""


class MetricConfigurationError(MetricStop):
    """The metric cannot be built from this program's outputs (a field it never produces, a field map that
    points nowhere)."""


class JudgeUnavailableError(MetricStop):
    """The judge cannot judge: its LM has no key, refuses the request for good (authentication, billing, an
    unknown model, a bad request), or cannot be reached after its retries. Names the judge, its LM and the
    cause; the LM's own error is chained as ``__cause__``."""


class DegradedJudgmentError(MetricStop):
    """``on_degraded="fail"``: the judge scored from fewer steps or judges than designed, or could not read
    the answer (a language its verifier does not cover): which and why."""


@numbers.Real.register
class MetricScore(dspy.Prediction, dict):
    """A metric's score as every DSPy consumer reads it (see the module docstring).

    Keys (also attributes): ``score`` (float), ``feedback`` (the judge's reasons), ``threshold``, ``passed``
    (``score >= threshold``, also its truth), ``degraded`` (why the judgment is degraded, or None),
    ``judge_lm`` (the LM that judged, or None), and for a combined metric ``objective_scores`` (each part's
    score: GEPA's per-objective scores). Arithmetic and comparisons act on the score and return floats.
    """

    def __init__(self, score: float, threshold: float = 0.5, feedback: str = "", *, degraded: str | None = None,
                 judge_lm: str | None = None, objective_scores: Mapping[str, float] | None = None):
        score, threshold = float(score), float(threshold)
        fields = dict(score=score, feedback=str(feedback), threshold=threshold, passed=score >= threshold,
                      degraded=degraded, judge_lm=judge_lm)
        if objective_scores:
            fields["objective_scores"] = {str(k): float(v) for k, v in objective_scores.items()}
        dspy.Prediction.__init__(self, **fields)
        dict.update(self, self._store)  # what orjson and json serialise

    @classmethod
    def _from_store(cls, store: Mapping[str, Any]) -> MetricScore:
        return cls(store["score"], store.get("threshold", 0.5), store.get("feedback", ""),
                   degraded=store.get("degraded"), judge_lm=store.get("judge_lm"),
                   objective_scores=store.get("objective_scores"))

    # --- the mapping: DSPy's store and the dict that serialisers read stay one ---------------------------
    def __setitem__(self, key: str, value: Any) -> None:  # GEPA writes a missing feedback back
        if key == "score":
            value = float(value)
        dspy.Prediction.__setitem__(self, key, value)
        dict.__setitem__(self, key, value)
        if key in ("score", "threshold"):
            passed = float(self._store["score"]) >= float(self._store["threshold"])
            dspy.Prediction.__setitem__(self, "passed", passed)
            dict.__setitem__(self, "passed", passed)

    def __setattr__(self, key: str, value: Any) -> None:
        if key.startswith("_"):
            object.__setattr__(self, key, value)
        else:
            self[key] = value

    def __delitem__(self, key: str) -> None:
        dspy.Prediction.__delitem__(self, key)
        dict.__delitem__(self, key)

    def copy(self, **changes: Any) -> MetricScore:
        copied = MetricScore._from_store(self._store)
        for key, value in changes.items():
            copied[key] = value
        return copied

    def __reduce__(self):
        return (MetricScore._from_store, (dict(self._store),))

    # --- the number --------------------------------------------------------------------------------------
    def __bool__(self) -> bool:
        return bool(self._store["passed"])

    def __float__(self) -> float:
        return float(self._store["score"])

    def __int__(self) -> int:
        return int(float(self))

    def __hash__(self) -> int:
        return hash(float(self))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, MetricScore):
            return self._store == other._store
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return float(self) == float(other)
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    @staticmethod
    def _number(other: Any) -> float:
        if isinstance(other, numbers.Real):
            return float(other)
        raise TypeError(f"a MetricScore combines with numbers, not {type(other).__name__}")

    def __add__(self, other): return float(self) + self._number(other)  # noqa: E704
    def __radd__(self, other): return self._number(other) + float(self)  # noqa: E704
    def __sub__(self, other): return float(self) - self._number(other)  # noqa: E704
    def __rsub__(self, other): return self._number(other) - float(self)  # noqa: E704
    def __mul__(self, other): return float(self) * self._number(other)  # noqa: E704
    def __rmul__(self, other): return self._number(other) * float(self)  # noqa: E704
    def __truediv__(self, other): return float(self) / self._number(other)  # noqa: E704
    def __rtruediv__(self, other): return self._number(other) / float(self)  # noqa: E704
    def __lt__(self, other): return float(self) < self._number(other)  # noqa: E704
    def __le__(self, other): return float(self) <= self._number(other)  # noqa: E704
    def __gt__(self, other): return float(self) > self._number(other)  # noqa: E704
    def __ge__(self, other): return float(self) >= self._number(other)  # noqa: E704
    def __neg__(self): return -float(self)  # noqa: E704
    def __pos__(self): return float(self)  # noqa: E704
    def __abs__(self): return abs(float(self))  # noqa: E704

    def __round__(self, ndigits: int | None = None):
        return round(float(self), ndigits)

    def __format__(self, spec: str) -> str:
        return format(float(self), spec) if spec else str(self)

    def __str__(self) -> str:
        return f"{float(self):.3f}"

    def __repr__(self) -> str:
        extra = "".join(f", {key}={self._store[key]!r}" for key in ("degraded", "objective_scores")
                        if self._store.get(key))
        return (f"MetricScore(score={float(self)!r}, passed={self.passed}, threshold={self.threshold!r}"
                f"{extra}, feedback={self.feedback!r})")


#: The DSPy pools a metric stopped, with the error that stopped each: the items still running in them when
#: the stop came are refused before they call a judge (paid calls whose results nobody reads).
_stopped_pools: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _this_pool() -> tuple[ParallelExecutor | None, Any]:
    """The DSPy ``ParallelExecutor`` this call runs under and the work queue of its thread pool (``None``
    for either that is not on the call stack: a call outside DSPy, or a sequential run)."""
    frame = sys._getframe(2)
    executor, work_queue = None, None
    while frame is not None:
        here = frame.f_locals
        if executor is None and isinstance(here.get("self"), ParallelExecutor):
            executor = here["self"]
        if work_queue is None and frame.f_code.co_name == "_worker" and "concurrent" in frame.f_code.co_filename:
            work_queue = here.get("work_queue")
        frame = frame.f_back
    return executor, work_queue


def stopping(error: MetricStop) -> MetricStop:
    """``error``, after cancelling the items still queued in the DSPy thread pool this call runs in (found
    on the call stack: Evaluate's, ``dspy.Parallel``'s and the optimizers' ``ParallelExecutor``), so that no
    more program calls start once the run is bound to stop. Items already running finish their program call
    and are then refused by ``refuse_if_stopped`` before they judge. The executor's own stop flag is left
    alone so that the error raised is this one, not DSPy's generic "Execution cancelled"."""
    executor, work_queue = _this_pool()
    if executor is not None:
        _stopped_pools.setdefault(executor, copy.copy(error))  # no traceback: its frames hold the executor
    if executor is not None and isinstance(work_queue, queue.SimpleQueue | queue.Queue):
        kept = []
        while True:
            try:
                item = work_queue.get_nowait()
            except queue.Empty:
                break
            if item is None or not hasattr(item, "future"):
                kept.append(item)  # the pool's own shutdown signal
            else:
                item.future.cancel()
        for item in kept:
            work_queue.put(item)
    return error


def refuse_if_stopped() -> None:
    """Raise again the error that stopped the DSPy pool this call runs in, if a metric has stopped it: the
    item was running when the stop came, and judging it would cost judge calls whose result is discarded.
    A copy of the same error, so that whichever finished item DSPy reads first, the caller sees one message."""
    if not _stopped_pools:
        return
    executor, _ = _this_pool()
    first = _stopped_pools.get(executor) if executor is not None else None
    if first is not None:
        raise copy.copy(first)
