"""Running metrics over datasets: ``evaluate``, its run files, its accounting and its backends.

    evaluate.py     the driver: validation, run file, backend, result
    backend.py      the interface every backend implements; one item scored in-process
    threads.py      the default backend (a pool of threads)
    processes.py    killable child processes, for metrics without an LM
    ray_backend.py  Ray actors, for a cluster
    records.py      what a finished item's record holds
    run_file.py     append-only, resumable JSONL run files
    result.py       ``EvaluationResult`` and ``RunStopped``
    usage.py        LM calls, tokens and cost

Must not define metrics.
"""

from judges.run.evaluate import BACKENDS, DatasetValidationError, evaluate
from judges.run.records import jsonable
from judges.run.result import EvaluationResult, RunStopped
from judges.run.run_file import read_run_calls, read_run_records
from judges.run.usage import tracked_usage, usage_cost, usage_tokens

__all__ = ["BACKENDS", "DatasetValidationError", "EvaluationResult", "RunStopped", "evaluate", "jsonable",
           "read_run_calls", "read_run_records", "tracked_usage", "usage_cost", "usage_tokens"]
