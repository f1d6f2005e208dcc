"""What an LM call cost: calls answered, calls served from DSPy's cache, tokens per model, dollars.

    with tracked_usage() as usage:
        judge.score(sample)
    usage["lm_calls"], usage["cached_calls"], usage["by_model"]

Owns: counting (DSPy's usage tracker plus a callback for cached answers), which LM errors are worth another
try (``TRANSIENT_ERRORS``) and pricing (``usage_cost``). Must not call an LM itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

#: Exceptions worth another try: the provider or the network, not the sample.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, ConnectionError)
try:  # DSPy's public LM errors
    from dspy.utils.exceptions import (
        LMLockTimeoutError,
        LMRateLimitError,
        LMServerError,
        LMTimeoutError,
        LMTransportError,
    )

    TRANSIENT_ERRORS += (LMRateLimitError, LMServerError, LMTimeoutError, LMTransportError, LMLockTimeoutError)
except ImportError:  # pragma: no cover - older DSPy
    pass


class _AnsweredCalls(BaseCallback):
    """Counts LM calls that returned, cached or not (DSPy's usage tracker sees only the uncached ones)."""

    def __init__(self):
        self.answered = 0

    def on_lm_end(self, call_id, outputs, exception=None):
        if exception is None:
            self.answered += 1


@contextlib.contextmanager
def tracked_usage(on_call: Callable[[str, dict[str, int]], None] | None = None):
    """``with tracked_usage() as usage:`` fills ``usage`` on exit with ``lm_calls`` (calls the LM answered
    in this block and that cost tokens), ``cached_calls`` (calls DSPy's cache answered: free now, though an
    interrupted earlier run may have paid for them) and the tokens per model
    (``{"lm_calls": n, "cached_calls": m, "by_model": {model: {"prompt_tokens": .., "completion_tokens": ..}}}``).

    ``on_call(model, {"prompt_tokens": .., "completion_tokens": ..})`` is told of each paid call the moment
    the LM answers it, inside the block (the run file keeps them, so a run killed mid-item still counts it).
    Not told: calls made under a tracker nested inside the block (a metric's own ``dspy.track_usage()``),
    which DSPy adds to this one's totals only when the nested block ends."""
    usage: dict[str, Any] = {}
    counter = _AnsweredCalls()
    with dspy.track_usage() as tracker, dspy.context(callbacks=[*dspy.settings.callbacks, counter]):
        if on_call is not None:
            keep = tracker.add_usage

            def add_usage(lm: str, entry: dict[str, Any]) -> None:  # DSPy's tracker, reporting each paid call
                keep(lm, entry)
                if entry:
                    on_call(lm, {kind: int(entry.get(kind) or 0) for kind in ("prompt_tokens", "completion_tokens")})

            tracker.add_usage = add_usage
        try:
            yield usage
        finally:
            totals = tracker.get_total_tokens()
            usage["lm_calls"] = sum(len(entries) for entries in tracker.usage_data.values())
            usage["cached_calls"] = max(0, counter.answered - usage["lm_calls"])
            usage["by_model"] = {model: {k: int(totals.get(model, {}).get(k) or 0)
                                         for k in ("prompt_tokens", "completion_tokens")}
                                 for model in tracker.usage_data}


def add_usage(total: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """Add one ``tracked_usage`` record into ``total`` (same shape; empty to start) and return ``total``: every
    attempt of an item counts, the ones that failed after the LM answered included."""
    total["lm_calls"] = total.get("lm_calls", 0) + usage.get("lm_calls", 0)
    total["cached_calls"] = total.get("cached_calls", 0) + usage.get("cached_calls", 0)
    models = total.setdefault("by_model", {})
    for model, tokens in usage.get("by_model", {}).items():
        into = models.setdefault(model, {"prompt_tokens": 0, "completion_tokens": 0})
        for kind in ("prompt_tokens", "completion_tokens"):
            into[kind] += int(tokens.get(kind) or 0)
    return total


def usage_tokens(usage: dict[str, Any]) -> dict[str, int]:
    """Prompt and completion tokens of one ``tracked_usage`` record, summed over models."""
    return {kind: sum(t[kind] for t in usage["by_model"].values()) for kind in ("prompt_tokens", "completion_tokens")}


def usage_cost(usage: dict[str, dict[str, Any]], price_table: dict[str, dict[str, float]]) -> float | None:
    """Dollars for ``{model: {"prompt_tokens": .., "completion_tokens": ..}}`` at ``{model: {"input": $ per
    1M tokens, "output": ..}}``; None when a model used has no price (0.0 when nothing was used)."""
    total = 0.0
    for model, tokens in usage.items():
        price = price_table.get(model)
        if price is None:
            return None
        total += tokens.get("prompt_tokens", 0) / 1e6 * price.get("input", 0.0)
        total += tokens.get("completion_tokens", 0) / 1e6 * price.get("output", 0.0)
    return total


def add_call(ledger: dict[tuple[str, int, str], dict[str, Any]], run: str, call: dict[str, Any]) -> None:
    """Count one paid call (a ``judges.run.backend.Calls`` entry) of run ``run`` into ``ledger``, which maps
    (run id, sample, metric) to ``add_usage`` totals: the shape ``unrecorded_usage`` reads."""
    add_usage(ledger.setdefault((run, call["sample"], call["metric"]), {}),
              {"lm_calls": 1, "by_model": {call["model"]: call}})


def add_version_1_usage(ledger: dict[tuple[str, int, str], dict[str, Any]], record: dict[str, Any]) -> None:
    """Count into ``ledger`` (``add_call``'s shape) the own usage of a version-1 run file's record (no ``run``
    id, no call lines) that a later record replaces, under the run id ``"version 1"``: those calls were paid,
    and no final record holds them."""
    add_usage(ledger.setdefault(("version 1", record["sample"], record["metric"]), {}),
              {"lm_calls": record.get("lm_calls", 0), "by_model": record.get("usage") or {}})


def unrecorded_usage(calls: dict[tuple[str, int, str], dict[str, Any]],
                     records: dict[tuple[int, str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per metric, the paid calls that no final record holds (``add_usage`` totals; metrics with none left out).

    ``calls`` maps (run id, sample, metric) to the ``add_usage`` total of the calls the LM answered for that
    item in that run (the run file's call lines; ``tracked_usage(on_call=...)``); ``records`` are the final
    records by (sample, metric), each holding the calls of its own attempts in its ``run``. What is left over:
    items in flight when a run was killed, calls answered after an item was abandoned at its timeout, and
    the attempts of a failed item that a later run replaced (``retry_failed``)."""
    out: dict[str, dict[str, Any]] = {}
    for (run, sample, metric), used in calls.items():
        record = records.get((sample, metric))
        held = record if record is not None and record.get("run") == run else {}
        left: dict[str, Any] = {"lm_calls": max(0, used.get("lm_calls", 0) - held.get("lm_calls", 0)), "by_model": {}}
        for model, tokens in used.get("by_model", {}).items():
            have = (held.get("usage") or {}).get(model, {})
            rest = {kind: max(0, tokens.get(kind, 0) - int(have.get(kind) or 0))
                    for kind in ("prompt_tokens", "completion_tokens")}
            if any(rest.values()):
                left["by_model"][model] = rest
        if left["lm_calls"] or left["by_model"]:
            add_usage(out.setdefault(metric, {}), left)
    return out
