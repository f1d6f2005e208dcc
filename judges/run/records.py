"""What one finished (sample, metric) item becomes: a record, the JSON line of a run file.

    {"sample": 3, "metric": "faithfulness", "sample_key": "...", "score": 0.5, "details": {...},
     "usage": {model: {"prompt_tokens": .., "completion_tokens": ..}}, "lm_calls": 2, "cached_calls": 0,
     "latency_s": 1.2}                       # or "score": null, "error": "TypeError: ..."

Owns: the record's fields (``scored_fields``, ``failure_record``), the identity of samples and metric settings
(what makes a run file reusable), and turning results into JSON (``jsonable``). Must not schedule work
(the backends do) or write files (``judges.run.run_file``).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any

import numpy as np

from judges.metrics.base import Metric
from judges.run.usage import TRANSIENT_ERRORS, tracked_usage


def jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data: NaN and infinities become None, pydantic models their dump, NumPy
    scalars Python numbers, anything else unknown its text."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump())
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def sample_key(sample) -> str:
    text = json.dumps(sample.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def metric_config(metric: Metric) -> dict[str, Any]:
    """The metric's class and constructor settings (``get_params``), for run-file identity."""
    return {"class": type(metric).__name__, "settings": jsonable(metric.get_params())}


def result_fields(result) -> dict[str, Any]:
    """A metric result's ``score``, ``details`` (every other field, as JSON) and ``undefined_reason``."""
    fields = {"score": float(result.score),
              "details": {k: jsonable(v) for k, v in result.items() if k not in ("score", "undefined_reason")}}
    if result.get("undefined_reason"):
        fields["undefined_reason"] = result["undefined_reason"]
    return fields


def _score_once(metric: Metric, sample, retries: int, backoff: float):
    """The metric's result and its ``tracked_usage`` record (empty for a metric without an LM)."""
    if not metric.needs_lm:  # no LM, nothing to track or retry
        return metric.score(sample), {}
    attempt = 0
    while True:
        try:
            with tracked_usage() as usage:
                result = metric.score(sample)
            return result, usage
        except TRANSIENT_ERRORS as err:
            if attempt >= retries or hasattr(err, "retried_by_served_lm"):  # a ServedLM retried it already
                raise
            time.sleep(backoff * 2**attempt)
            attempt += 1


def scored_fields(metric: Metric, sample, retries: int, backoff: float) -> dict[str, Any]:
    """A record's result fields for one item scored in this process (every backend that scores in-process
    uses this, so their records are the same): score, details, LM usage, undefined reason."""
    result, usage = _score_once(metric, sample, retries, backoff)
    fields = result_fields(result)
    fields.update(usage=usage.get("by_model", {}), lm_calls=usage.get("lm_calls", 0),
                  cached_calls=usage.get("cached_calls", 0))
    return fields


def error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def failure_record(index: int, key: str, metric_name: str, error: str, latency_s: float) -> dict[str, Any]:
    """The record of an item that could not be scored (its error as ``"Type: message"``)."""
    return {"sample": index, "metric": metric_name, "sample_key": key, "score": None, "error": error,
            "latency_s": latency_s}


def timeout_error(timeout: float, how: str = "the call was abandoned") -> str:
    return f"TimeoutError: no result after {timeout} s ({how})"
