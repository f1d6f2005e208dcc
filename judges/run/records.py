"""What one finished (sample, metric) item becomes: a record, the JSON line of a run file.

    {"sample": 3, "metric": "faithfulness", "sample_key": "...", "score": 0.5, "details": {...},
     "usage": {model: {"prompt_tokens": .., "completion_tokens": ..}}, "lm_calls": 2, "cached_calls": 0,
     "latency_s": 1.2}                       # or "score": null, "error": "TypeError: ..." (usage kept)
    # "undefined_reason": why no score could be defined; "degraded": the score came from fewer steps or
    # judges than designed (e.g. one of two judges unparsed), which and why

Owns: the record's fields (``scored_fields``, ``failure_record``), the identity of samples and metric settings
(what makes a run file reusable), and turning results into JSON (``jsonable``). Must not schedule work
(the backends do) or write files (``judges.run.run_file``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from judges.lm.embeddings import embedder_identity
from judges.lm.resolve import lm_identity
from judges.metrics.base import Metric
from judges.run.usage import TRANSIENT_ERRORS, add_usage, tracked_usage


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


def metric_config(metric: Metric, lm: Any = None, embeddings: Any = None) -> dict[str, Any]:
    """The metric's class and constructor settings (``get_params``), for run-file identity, and its models
    when it has any: those it loads itself (``model_identity``), the LM and adapter it judges with
    (``lm_identity``: its own ``lm=``, else ``lm`` here, the run's, else DSPy's configured one, else the
    embedded one) and the embedder it uses (``embedder_identity``, chosen the same way; and the run's too when
    the metric has its own but a feature embeds with the run's, ``uses_run_embedder``)."""
    config = {"class": type(metric).__name__, "settings": jsonable(metric.get_params())}
    models = dict(metric.model_identity())
    if metric.needs_lm:
        own = getattr(metric, "judge_lm", None)
        models["lm"] = lm_identity(own if own is not None else lm, getattr(metric, "judge_adapter", None))
    if metric.needs_embeddings:
        own = getattr(metric, "embeddings", None)
        models["embedder"] = embedder_identity(own if own is not None else embeddings)
        if own is not None and getattr(metric, "uses_run_embedder", False):
            models["run_embedder"] = embedder_identity(embeddings)  # a calibrator feature embeds with it
    return {**config, "models": jsonable(models)} if models else config


def score_problem(score: Any, metric: str | None = None) -> str | None:
    """Why ``score`` cannot be a record's score (None when it can): every metric scores a number in [0, 1].
    The one rule records are written (``result_fields``) and read back (``run_file``) with."""
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
            or not 0.0 <= score <= 1.0:
        of = f" of metric {metric!r}" if metric else ""
        return f"score {score!r}{of} is not a number in [0, 1] (every metric scores there)"
    return None


def result_fields(result) -> dict[str, Any]:
    """A metric result's ``score``, ``details`` (every other field, as JSON), ``undefined_reason`` and
    ``degraded`` (the score came from fewer steps or judges than designed: which and why). A score that is
    not a number in [0, 1] (a user's own metric returning 3.0 or NaN) raises ValueError: the item fails
    now rather than a resume refusing the run file later."""
    flags = ("undefined_reason", "degraded")
    score = float(result.score)
    problem = score_problem(score)
    if problem:
        raise ValueError(problem)
    fields = {"score": score,
              "details": {k: jsonable(v) for k, v in result.items() if k not in ("score", *flags)}}
    for flag in flags:
        if result.get(flag):
            fields[flag] = str(result[flag])
    return fields


def degraded_as_failure(record: dict[str, Any]) -> dict[str, Any]:
    """``on_degraded="fail"``: a degraded record as a failed one (score None, ``DegradedScore`` error); the
    score it had stays in ``degraded_score``, its usage and ``degraded`` stay as they were."""
    if not record.get("degraded") or record.get("error"):
        return record
    return {**record, "score": None, "degraded_score": record.get("score"),
            "error": f"DegradedScore: {record['degraded']}"}


def _score_once(metric: Metric, sample, retries: int, backoff: float, spent: dict[str, Any], on_call=None):
    """The metric's result; what every attempt's LM calls used is added into ``spent`` (``add_usage``), also
    when an attempt fails: the LM answered and was paid whether or not the reply parsed. ``on_call``: told
    of each paid call as it is answered (``tracked_usage``)."""
    if not metric.needs_lm:  # no LM, nothing to track or retry
        return metric.score(sample)
    attempt = 0
    while True:
        usage: dict[str, Any] = {}
        try:
            with tracked_usage(on_call) as usage:
                return metric.score(sample)
        except TRANSIENT_ERRORS as err:
            if attempt >= retries or hasattr(err, "retried_by_served_lm"):  # a ServedLM retried it already
                raise
            time.sleep(backoff * 2**attempt)
            attempt += 1
        finally:
            add_usage(spent, usage)


def usage_fields(spent: dict[str, Any]) -> dict[str, Any]:
    """A record's ``usage`` (tokens per model), ``lm_calls`` and ``cached_calls`` from an ``add_usage`` total."""
    return {"usage": spent.get("by_model", {}), "lm_calls": spent.get("lm_calls", 0),
            "cached_calls": spent.get("cached_calls", 0)}


def scored_fields(metric: Metric, sample, retries: int, backoff: float,
                  spent: dict[str, Any] | None = None, on_call=None) -> dict[str, Any]:
    """A record's result fields for one item scored in this process (every backend that scores in-process
    uses this, so their records are the same): score, details, LM usage, undefined reason. ``spent`` (a dict
    the caller keeps) collects the usage of every attempt, so a caller whose item fails can still record it;
    ``on_call(model, tokens)`` is told of each paid call as the LM answers it."""
    spent = {} if spent is None else spent
    result = _score_once(metric, sample, retries, backoff, spent, on_call)
    return {**result_fields(result), **usage_fields(spent)}


def error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def failure_record(index: int, key: str, metric_name: str, error: str, latency_s: float) -> dict[str, Any]:
    """The record of an item that could not be scored (its error as ``"Type: message"``); the caller adds
    the usage of its LM calls where it knows it (``usage_fields``)."""
    return {"sample": index, "metric": metric_name, "sample_key": key, "score": None, "error": error,
            "latency_s": latency_s}


def timeout_error(timeout: float, how: str = "the call was abandoned") -> str:
    return f"TimeoutError: no result after {timeout} s ({how})"


_UMASK = os.umask(0o022)  # read once, at import (os.umask can only be read by setting it), and put back
os.umask(_UMASK)


def write_replacing(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """``write(a new file beside path)``, then rename it onto ``path``: an output replaces whatever stood there,
    a symlink included, and is never written through one into a file elsewhere (nor left half-written). The
    new file is made by ``tempfile.mkstemp`` (``O_CREAT | O_EXCL``, a name nobody can guess beforehand), so
    no link planted at its name can receive the output either."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_UMASK)  # as an ordinary new file would be, not mkstemp's owner-only 0600
    os.close(fd)
    temporary = Path(name)
    try:
        write(temporary)
        os.replace(temporary, path)
    except OSError as err:  # a full disk, a quota: say which output could not be written
        if err.filename == str(path):
            raise
        raise OSError(err.errno, f"{err.strerror or err}: {path} could not be written", str(path)) from err
    finally:
        temporary.unlink(missing_ok=True)
    return path
