"""`dspy-judges evaluate`: score a dataset with metrics; per-sample JSONL, scores CSV, summary, resumable run file.

Must not score items itself (``judges.run``): it drives evaluate and prints.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from judges.lm.served import ServedLM
from judges.run.evaluate import BACKENDS, ON_DEGRADED, DatasetValidationError, evaluate
from judges.run.records import write_replacing
from judges.run.result import RunStopped
from judges_app.cli.common import (
    CommandFailed,
    UsageError,
    add_common_options,
    add_prices_option,
    add_reference_separator_option,
    build_metric,
    check_tracking,
    cli_lm,
    lm_params,
    load_dataset,
    log_after_printing,
    mlflow_note,
    output_folder,
    positive_int,
    read_prices,
    timeout_seconds,
    tracking,
)
from judges_app.cli.outputs import default_output
from judges_app.tracking import data_hash, log_evaluation


def run(args) -> int:
    dataset = load_dataset(args.data, args.limit, args.reference_separator, args.id_column)
    lm = cli_lm(args)
    if args.backend == "ray":
        # Ray workers rebuild the LM from a model string or a ServedLM's settings, never from a live object:
        # the metrics are built without one and the run's LM travels on its own.
        lm = lm if isinstance(lm, ServedLM) else args.lm
    metrics = [build_metric(spec, lm=None if args.backend == "ray" else lm, embeddings=args.embeddings, args=args)
               for spec in args.metric]
    names = [m.name for m in metrics]
    same = sorted({n for n in names if names.count(n) > 1})
    if same:
        raise UsageError(f"two metrics share the name(s) {same}: give each its own with ALIAS=, e.g. "
                         f"-m {same[0]}_2={same[0]}")
    prices = read_prices(args.prices)
    check_tracking(args)
    out = Path(args.out or default_output(args.runs_dir, "evaluate", Path(args.data).stem))
    output_folder(out)
    run_file = Path(args.run_file) if args.run_file else out / "run.jsonl"
    params = {"data": args.data, "data_hash": data_hash(dataset.samples), "samples": len(dataset),
              **lm_params(args), "embeddings": args.embeddings or "embedded", "threads": args.threads, "backend": args.backend,
              "metrics": {m.name: {"class": type(m).__name__, **m.get_params()} for m in metrics}}
    with tracking(args, "dspy-judges-evaluate", f"evaluate {Path(args.data).stem}", params):
        try:
            result = evaluate(dataset, metrics, lm=lm, embeddings=args.embeddings, num_threads=args.threads,
                              run_file=run_file, retry_failed=args.retry_failed, timeout=args.timeout,
                              price_table=prices, progress=True, backend=args.backend, ray_address=args.ray_address,
                              on_degraded=args.on_degraded)
        except DatasetValidationError as err:
            raise UsageError(str(err)) from None
        except RunStopped as err:
            if err.result is not None and err.result.records:
                print_summary(err.result.summary(), err.result.failures)
            raise CommandFailed(f"stopped: {err}") from None
        except ValueError as err:
            if "run file" in str(err) or "was written for other" in str(err):
                raise UsageError(f"{err} (or pass --out / --run-file)") from None
            if "backend='ray'" in str(err):
                raise UsageError(str(err)) from None
            raise
        summary = result.summary()
        result.ids = dataset.ids  # the user's id column beside each position in the exports
        write_replacing(out / "samples.jsonl", result.to_jsonl)
        write_replacing(out / "scores.csv", result.to_csv)
        write_replacing(out / "summary.json", lambda path: Path(path).write_text(json.dumps(summary, indent=1)))
        print_summary(summary, result.failures)
        print(f"\nwrote {out}/samples.jsonl (every score with its intermediates), scores.csv, summary.json; "
              f"run file {run_file} (rerun to resume)")
        logging_failed = log_after_printing(args, lambda: log_evaluation(result))
    if logging_failed:
        raise CommandFailed(logging_failed)
    mlflow_note(args)
    unscored = [name for name, s in summary.items() if name != "_overall" and s["scored"] == 0 and s["failures"]]
    if unscored:
        raise CommandFailed(f"no item could be scored by {', '.join(unscored)}: every one failed (see the failures "
                            f"above); the outputs were written, but this run measured nothing with "
                            f"{'it' if len(unscored) == 1 else 'them'}")
    return 0


def print_summary(summary: dict[str, dict[str, Any]], failures) -> None:
    def num(v, spec=".3f"):
        return "n/a" if v is None else format(v, spec)

    print(f"\n{'metric':<34} {'mean':>6} {'std':>6} {'scored':>7} {'failed':>6} {'degraded':>8} {'LM calls':>8} "
          f"{'cached':>6} {'tokens in/out':>15} {'p50 s':>6}")
    for name, s in summary.items():
        if name == "_overall":
            continue
        print(f"{name:<34} {num(s['mean']):>6} {num(s['std']):>6} {s['scored']:>7} {s['failures']:>6} "
              f"{s['degraded']:>8} {s['lm_calls']:>8} {s['cached_calls']:>6} {s['input_tokens']:>7}/{s['output_tokens']:<7} "
              f"{num(s['latency_p50'], '.2f'):>6}")
    overall = summary["_overall"]
    print(f"{overall['samples']} samples in {overall['wall_seconds']:.1f} s; {overall['failures']} failures")
    unrecorded = {name: s["unrecorded_calls"] for name, s in summary.items() if s.get("unrecorded_calls")}
    if unrecorded:
        print("LM calls no record holds, counted above (items in flight at a kill, calls after a timeout, retried "
              "attempts replaced by --retry-failed): " + ", ".join(f"{name} {n}" for name, n in unrecorded.items()))
    for sample, metric, error in failures[:10]:
        print(f"  sample {sample}, {metric}: {error}")


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("evaluate", help=summary,
                       description="Score every sample of DATA with every metric. Outputs go to --out "
                                   "(default runs/evaluate/<data name>): samples.jsonl, scores.csv, summary.json and "
                                   "run.jsonl, which makes a rerun resume where a killed run stopped.")
    p.add_argument("data", help="a .jsonl or .csv file of samples (user_input, response, retrieved_contexts, reference ...)")
    p.add_argument("-m", "--metric", action="append", required=True,
                   help="a metric name from `dspy-judges metrics`, repeatable; parameters as NAME:{json}")
    p.add_argument("--embeddings", default=None, help="embedder: 'embedded' (default: all-MiniLM-L6-v2), a "
                   "sentence-transformers folder, or a LiteLLM embedding model string")
    p.add_argument("--threads", type=positive_int, default=1, help="parallel items (default 1: one in-process LM "
                   "serialises calls; use more with a remote LM)")
    p.add_argument("--limit", type=positive_int, default=None, help="only the first N samples")
    p.add_argument("--id-column", default=None, metavar="NAME",
                   help="the column naming each sample: written beside its position in samples.jsonl and scores.csv")
    p.add_argument("--run-file", default=None, help="append-only progress file (default: <out>/run.jsonl)")
    p.add_argument("--out", default=None, help="output folder")
    p.add_argument("--timeout", type=timeout_seconds, default=None,
                   help="seconds one item may take: metrics without an LM run in a worker process that is stopped "
                        "then; an LM call is abandoned (recorded as failed) but runs on until the LM answers")
    p.add_argument("--backend", choices=BACKENDS, default="threads",
                   help="threads (this process); processes: metrics without an LM in --threads child processes "
                        "(every core; LLM judges stay in threads); ray: Ray actors, a local Ray instance started and "
                        "stopped for the run unless --ray-address names a running cluster; --threads caps the LM "
                        "items in flight across the cluster (needs the ray extra)")
    p.add_argument("--ray-address", default=None, help="a running Ray cluster, e.g. ray://head:10001 (with --backend ray)")
    p.add_argument("--retry-failed", action="store_true",
                   help="rerun the items the run file records as failed (finished items are still skipped)")
    p.add_argument("--on-degraded", choices=ON_DEGRADED, default="record",
                   help="a score from fewer steps or judges than designed (one of two judges unparsed, claims "
                        "without a verdict): record it (default; counted in the summary) or fail the item")
    add_reference_separator_option(p)
    add_prices_option(p)
    add_common_options(p)
    p.set_defaults(run=run)
