"""The one interface every way of running items implements, and how an item is scored in-process.

    backend = ThreadBackend(Settings(num_threads=4, timeout=60))       # or ProcessBackend, RayBackend
    refused = backend.run(items, on_records, on_calls)  # lists of records / of paid calls, in the caller's thread

An item is one (sample, metric) pair. A backend scores its items and hands the finished records to
``on_records`` as they arrive, and, where it can, each paid LM call to ``on_calls`` the moment the LM
answers it (``{"sample", "metric", "model", "prompt_tokens", "completion_tokens"}``: the run file keeps them,
so calls of an item in flight when the run is killed, or abandoned at its timeout, are still counted); it
returns the message of a ``PermanentLMError`` that stopped the run (no
new item starts, those in flight finish and are handed over; the item that met the refusal is not
recorded), else None. With ``Settings.strict`` the first failure is raised instead of recorded.

Owns: ``Item``, ``Settings``, ``Backend`` and ``score_item`` (one item in this thread: retries, usage,
failure record). Must not write run files or choose a backend (``judges.run.evaluate`` does both).
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from judges.lm.served import PermanentLMError
from judges.metrics.base import Metric
from judges.run.records import error_text, scored_fields, usage_fields

Records = Callable[[list[dict[str, Any]]], None]
Calls = Callable[[list[dict[str, Any]]], None]


class Item(NamedTuple):
    """One unit of work: sample ``index`` (its ``key``, for the record) scored by ``metric``."""

    index: int
    key: str
    sample: Any
    metric: Metric


@dataclass(frozen=True)
class Settings:
    """``evaluate``'s settings that reach the backends (see ``evaluate``'s docstring)."""

    lm: Any = None
    embeddings: Any = None
    num_threads: int = 4
    retries: int = 3
    backoff: float = 1.0
    timeout: float | None = None
    strict: bool = False


class Backend(abc.ABC):
    """Scores items; see the module docstring for the contract."""

    name: str = ""

    def __init__(self, settings: Settings):
        self.settings = settings

    @abc.abstractmethod
    def run(self, items: Sequence[Item], on_records: Records, on_calls: Calls | None = None) -> str | None:
        """Score ``items``, handing records to ``on_records`` (and paid calls to ``on_calls`` where the
        backend reports them); the refusal message that stopped it, or None."""


def score_item(item: Item, retries: int, backoff: float, strict: bool = False,
               on_call: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The record of ``item`` scored in this thread. A ``PermanentLMError`` propagates (it is not the item's
    fault); any other failure is recorded as the item's error, or raised when ``strict``. ``on_call`` gets
    each paid LM call of the item as the LM answers it (the ``on_calls`` entry)."""
    record: dict[str, Any] = {"sample": item.index, "metric": item.metric.name, "sample_key": item.key}
    started = time.monotonic()
    spent: dict[str, Any] = {}  # every answered LM call of the item, whether it scored or failed
    try:
        report = None if on_call is None else (lambda model, tokens: on_call(
            {"sample": item.index, "metric": item.metric.name, "model": model, **tokens}))
        record.update(scored_fields(item.metric, item.sample, retries, backoff, spent, report))
    except PermanentLMError:
        raise
    except Exception as err:
        if strict:
            raise
        record.update(score=None, error=error_text(err), **(usage_fields(spent) if item.metric.needs_lm else {}))
    record["latency_s"] = time.monotonic() - started
    return record
