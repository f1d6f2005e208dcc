"""dspy-judges: score datasets with LLM judges, calibrate judges against human labels, look at the results.

    dspy-judges metrics                                   every metric, its fields, whether it needs an LM
    dspy-judges evaluate data.jsonl -m faithfulness -m rouge_score
    dspy-judges calibrate begin-slice --judge faithfulness --optimizer bootstrap
    dspy-judges report runs/calibrate/begin-slice-faithfulness/calibration_run.json

Every evaluate / calibrate run is logged to MLflow (params, metrics with CIs, artifacts, DSPy traces):
by default to runs/mlflow.db (SQLite, no server); set MLFLOW_TRACKING_URI to use a tracking server, or
pass --no-mlflow. See `mlflow ui --backend-store-uri sqlite:///runs/mlflow.db`.

Exit codes: 0 done; 2 bad arguments or input (the message says what to fix); 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

BUILTIN_SETS = {
    "begin-slice": "60 BEGIN dialogue turns bundled with the package (faithfulness; binary)",
    "begin": "BEGIN from shared/data (faithfulness / groundedness; binary)",
    "evouna": "EVOUNA NQ answers of FiD, ChatGPT, GPT-3.5 (answer correctness; binary)",
    "summeval": "SummEval consistency (summary rubric; ordinal 1-5)",
    "cranfield": "Cranfield query-document relevance (context relevance)",
    "tau-bench": "tau-bench airline trajectories (agent goal; binary reward)",
}
OPTIMIZERS = ("none", "labeled", "bootstrap", "random_search", "mipro", "simba", "gepa")


class UsageError(Exception):
    """Bad arguments or input: reported in one line and exit code 2."""


# ------------------------------------------------------------------------------------------------
# The catalogue
# ------------------------------------------------------------------------------------------------
def catalogue() -> dict[str, type]:
    """Metric name (snake case, as ``metric.name``) -> class, for every metric the package exports;
    aliases (``ContextPrecision`` ...) resolve to the class they name."""
    import judges
    from judges.base import Judge, Metric, _snake_case

    out: dict[str, type] = {}
    for export in judges.__all__:
        cls = getattr(judges, export)
        if inspect.isclass(cls) and issubclass(cls, Metric) and cls not in (Metric, Judge):
            out.setdefault(_snake_case(export), cls)
    return dict(sorted(out.items()))


def dataset_name(data: str) -> str:
    """A short name for a labelled-set argument: a built-in set's name, or a file's stem (for output paths)."""
    return data if data in BUILTIN_SETS else Path(data).stem


def required_params(cls: type) -> list[str]:
    """The constructor parameters a metric class cannot be built without (e.g. AspectCritic's name)."""
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.default is inspect.Parameter.empty and p.name != "self"
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def metric_rows() -> list[dict[str, Any]]:
    from judges.base import _snake_case

    rows = []
    for name, cls in catalogue().items():
        rows.append({"name": name, "class": cls.__name__, "family": cls.__module__.rsplit(".", 1)[-1],
                     "sample": cls.sample_type.__name__, "required_fields": list(cls.required_fields),
                     "needs_lm": bool(cls.needs_lm), "needs_embeddings": bool(cls.needs_embeddings),
                     "required_params": required_params(cls),
                     "alias_of": None if _snake_case(cls.__name__) == name else _snake_case(cls.__name__)})
    return rows


def build_metric(spec: str, *, lm: Any = None, embeddings: Any = None):
    """``name`` or ``name:{json constructor params}``, e.g. ``aspect_critic:{"name": "polite", ...}``."""
    name, _, params_text = spec.partition(":")
    classes = catalogue()
    if name not in classes:
        raise UsageError(f"unknown metric {name!r}; `dspy-judges metrics` lists them (e.g. {', '.join(list(classes)[:4])})")
    try:
        params = json.loads(params_text) if params_text else {}
    except json.JSONDecodeError as err:
        raise UsageError(f"metric {name!r}: parameters after ':' must be a JSON object ({err.msg})") from None
    if not isinstance(params, dict):
        raise UsageError(f"metric {name!r}: parameters after ':' must be a JSON object")
    cls = classes[name]
    accepted = inspect.signature(cls.__init__).parameters
    for resource, value in (("lm", lm), ("embeddings", embeddings)):
        if value is not None and resource in accepted:
            params.setdefault(resource, value)
    try:
        return cls(**params)
    except TypeError as err:
        missing = [r for r in required_params(cls) if r not in params]
        hint = f"; it needs {missing}, e.g. {name}:" + json.dumps({m: "..." for m in missing}) if missing else ""
        raise UsageError(f"metric {name!r}: {err}{hint}") from None


# ------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------
def load_dataset(path: str, limit: int | None):
    from judges.dataset import EvaluationDataset

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"dataset file not found: {path}")
    loaders = {".jsonl": EvaluationDataset.from_jsonl, ".csv": EvaluationDataset.from_csv}
    if file.suffix not in loaders:
        raise UsageError(f"{path}: give a .jsonl or .csv file (one sample per line / row)")
    try:
        dataset = loaders[file.suffix](file)
    except ValueError as err:  # a row that is not a sample: the message names the row and field
        raise UsageError(f"{path}: {err}") from None
    return EvaluationDataset(dataset.samples[:limit]) if limit else dataset


def load_labelled(source: str, *, label_column: str, label_kind: str):
    from calibration import datasets

    named = {"begin-slice": datasets.load_begin_slice, "begin": datasets.load_begin,
             "evouna": lambda: datasets.load_evouna(systems=("fid", "chatgpt", "gpt35")),
             "summeval": datasets.load_summeval, "cranfield": datasets.load_cranfield,
             "tau-bench": datasets.load_tau_bench}
    if source in named:
        try:
            return named[source]()
        except FileNotFoundError as err:
            raise UsageError(f"{source}: {err}") from None
    file = Path(source)
    if not file.is_file():
        raise UsageError(f"{source!r} is neither a labelled file (.jsonl/.csv) nor one of {list(named)}")
    loaders = {".jsonl": datasets.LabelledSet.from_jsonl, ".csv": datasets.LabelledSet.from_csv}
    if file.suffix not in loaders:
        raise UsageError(f"{source}: give a .jsonl or .csv file with sample fields and a '{label_column}' column")
    try:
        return loaders[file.suffix](file, label=label_column, kind=label_kind, name=file.stem)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _tracking(args, experiment: str, run_name: str, params: dict[str, Any]):
    if args.no_mlflow:
        return contextlib.nullcontext()
    from judges.tracking import tracked_run

    return tracked_run(experiment, run_name, params=params, run_dir=args.runs_dir, autolog=not args.no_traces)


def _mlflow_note(args) -> None:
    if not args.no_mlflow:
        from judges.tracking import default_tracking_uri

        print(f"MLflow run logged to {default_tracking_uri(args.runs_dir)}")


# ------------------------------------------------------------------------------------------------
# Commands
# ------------------------------------------------------------------------------------------------
def cmd_metrics(args) -> int:
    rows = metric_rows()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'metric':<42} {'sample':<17} {'LM':<3} {'emb':<3} required fields")
    for r in rows:
        extra = f"  (params: {', '.join(r['required_params'])})" if r["required_params"] else ""
        extra += f"  (= {r['alias_of']})" if r["alias_of"] else ""
        print(f"{r['name']:<42} {r['sample']:<17} {'yes' if r['needs_lm'] else '-':<3} "
              f"{'yes' if r['needs_embeddings'] else '-':<3} {', '.join(r['required_fields'])}{extra}")
    print(f"\n{len(rows)} metrics. Use a name with `dspy-judges evaluate DATA -m NAME`; "
          "give constructor parameters as NAME:{json}.")
    return 0


def _read_prices(path: str | None) -> dict[str, dict[str, float]] | None:
    if not path:
        return None
    try:
        prices = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"--prices {path}: {err}") from None
    bad = [m for m, p in prices.items() if not isinstance(p, dict)] if isinstance(prices, dict) else ["(not an object)"]
    if bad:
        raise UsageError(f'--prices {path}: expected {{"model": {{"input": $/1M tokens, "output": ...}}}}; bad entries {bad}')
    return prices


def cmd_evaluate(args) -> int:
    from judges.evaluation import DatasetValidationError, evaluate

    dataset = load_dataset(args.data, args.limit)
    metrics = [build_metric(spec, lm=args.lm, embeddings=args.embeddings) for spec in args.metric]
    prices = _read_prices(args.prices)
    out = Path(args.out or Path(args.runs_dir) / "evaluate" / Path(args.data).stem)
    out.mkdir(parents=True, exist_ok=True)
    run_file = Path(args.run_file) if args.run_file else out / "run.jsonl"
    from judges.tracking import data_hash

    params = {"data": args.data, "data_hash": data_hash(dataset.samples), "samples": len(dataset),
              "lm": args.lm or "embedded", "embeddings": args.embeddings or "embedded", "threads": args.threads,
              "metrics": {m.name: {"class": type(m).__name__, **m.get_params()} for m in metrics}}
    with _tracking(args, "dspy-judges-evaluate", f"evaluate {Path(args.data).stem}", params):
        try:
            result = evaluate(dataset, metrics, lm=args.lm, embeddings=args.embeddings, num_threads=args.threads,
                              run_file=run_file, timeout=args.timeout, price_table=prices, progress=True)
        except DatasetValidationError as err:
            raise UsageError(str(err)) from None
        except ValueError as err:
            if "run file" in str(err) or "was written for other" in str(err):
                raise UsageError(f"{err} (or pass --out / --run-file)") from None
            raise
        result.to_jsonl(out / "samples.jsonl")
        result.to_csv(out / "scores.csv")
        summary = result.summary()
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        if not args.no_mlflow:
            from judges.tracking import log_evaluation

            log_evaluation(result)
    _print_summary(summary, result.failures)
    print(f"\nwrote {out}/samples.jsonl (every score with its intermediates), scores.csv, summary.json; "
          f"run file {run_file} (rerun to resume)")
    _mlflow_note(args)
    return 0


def _print_summary(summary: dict[str, dict[str, Any]], failures) -> None:
    def num(v, spec=".3f"):
        return "n/a" if v is None else format(v, spec)

    print(f"\n{'metric':<34} {'mean':>6} {'std':>6} {'scored':>7} {'failed':>6} {'LM calls':>8} "
          f"{'tokens in/out':>15} {'p50 s':>6}")
    for name, s in summary.items():
        if name == "_overall":
            continue
        print(f"{name:<34} {num(s['mean']):>6} {num(s['std']):>6} {s['scored']:>7} {s['failures']:>6} "
              f"{s['lm_calls']:>8} {s['input_tokens']:>7}/{s['output_tokens']:<7} {num(s['latency_p50'], '.2f'):>6}")
    overall = summary["_overall"]
    print(f"{overall['samples']} samples in {overall['wall_seconds']:.1f} s; {overall['failures']} failures")
    for sample, metric, error in failures[:10]:
        print(f"  sample {sample}, {metric}: {error}")


def cmd_calibrate(args) -> int:
    from calibration.datasets import balanced_sample, split
    from calibration.heldout import compare_on_heldout

    data = load_labelled(args.data, label_column=args.label_column, label_kind=args.label_kind)
    n_train, n_test = args.n_train, args.n_test
    if n_train < 2 or n_test < 2:
        raise UsageError("--n-train and --n-test must be at least 2")
    if n_train + n_test > len(data):
        raise UsageError(f"{args.data} has {len(data)} labelled items; --n-train {n_train} + --n-test {n_test} is more")
    picked = balanced_sample(data, n_train + n_test, seed=args.seed) if data.kind == "binary" else data.subset(
        range(n_train + n_test))
    parts = split(picked, dev=0, test=n_test / len(picked), seed=args.seed)
    prices = _read_prices(args.prices)  # a bad price file fails now, not after the run
    judge_spec = args.judge + (f":{args.judge_params}" if args.judge_params else "")
    probe = build_metric(judge_spec)
    if not probe.needs_lm:
        raise UsageError(f"--judge {args.judge}: not an LLM judge; calibrate compiles LLM judges (see `dspy-judges metrics`)")
    from judges.models import resolve_lm

    lm = resolve_lm(args.lm)
    reflection = resolve_lm(args.reflection_lm) if args.reflection_lm else (lm if "gepa" in args.optimizer else None)
    optimizers = [None if o == "none" else o for o in args.optimizer]
    try:
        options = {"max_demos": args.max_demos, **json.loads(args.optimizer_options or "{}")}
    except json.JSONDecodeError as err:
        raise UsageError(f"--optimizer-options must be a JSON object ({err.msg})") from None
    out = Path(args.out or Path(args.runs_dir) / "calibrate" / f"{dataset_name(args.data)}-{probe.name}")
    out.mkdir(parents=True, exist_ok=True)
    from judges.tracking import data_hash

    params = {"data": args.data, "data_hash": data_hash(list(picked.dataset.samples) + list(picked.labels)),
              "judge": probe.name, "judge_params": probe.get_params(), "lm": args.lm or "embedded",
              "optimizers": args.optimizer, "calibrator": args.calibrator, "seed": args.seed,
              "n_train": len(parts.train), "n_test": len(parts.test), "max_demos": args.max_demos}
    print(f"{args.data}: train {len(parts.train)}, test {len(parts.test)} (held out); judge {probe.name}; "
          f"optimizers {args.optimizer}; calibrator {args.calibrator}; seed {args.seed}", flush=True)
    start = time.perf_counter()
    with _tracking(args, "dspy-judges-calibrate", f"calibrate {probe.name} on {args.data}", params):
        compiled, run = compare_on_heldout(
            lambda: build_metric(judge_spec, lm=lm), parts.train, parts.test, optimizers=optimizers,
            calibrator=None if args.calibrator == "none" else args.calibrator, seed=args.seed,
            reflection_lm=reflection, progress=True, name=f"{args.data}: {probe.name}", n_bootstrap=args.n_bootstrap,
            **options)
        run.meta.update(data=args.data, lm=args.lm or "embedded", seconds_total=time.perf_counter() - start)
        run.save(out / "calibration_run.json")
        for label, judge in compiled.items():
            judge.save(out / f"compiled_{probe.name}_{label}.json")
        report = None
        if not args.no_report:
            from calibration.report import write_report

            report = write_report(run, out / "report")
        if prices is not None:
            from judges.evaluation import usage_cost

            for usage in run.meta["usage"].values():
                usage["cost"] = usage_cost(usage["by_model"], prices)
            run.save(out / "calibration_run.json")
        if not args.no_mlflow:
            _log_calibration(run, compiled, out, report)
    print(f"\n{run.name}: held-out test n={len(parts.test)}, 95% bootstrap CIs\n")
    print(run.table())
    for key, note in run.meta.get("calibrator_notes", {}).items():
        if note:
            print(f"  {key}: {note}")
    for label, reason in run.meta.get("skipped", {}).items():
        print(f"  optimizer {label} skipped: {reason}")
    print("\nLM use (cached answers count as no call):")
    for phase, usage in run.meta["usage"].items():
        tokens = _phase_tokens(usage)
        cost = f", ${usage['cost']:.4f}" if usage.get("cost") is not None else ""
        print(f"  {phase}: {usage['lm_calls']} calls, {tokens['prompt_tokens']} tokens in / "
              f"{tokens['completion_tokens']} out{cost}")
    print(f"\n{time.perf_counter() - start:.0f} s. Wrote {out}/: calibration_run.json, "
          + ", ".join(f"compiled_{probe.name}_{label}.json" for label in compiled)
          + (", report/index.html" if report else ""))
    _mlflow_note(args)
    return 0


def _phase_tokens(usage: dict[str, Any]) -> dict[str, int]:
    """Prompt and completion tokens of one ``tracked_usage`` record, summed over models."""
    return {kind: sum(t[kind] for t in usage["by_model"].values()) for kind in ("prompt_tokens", "completion_tokens")}


def _log_calibration(run, compiled: dict[str, Any], out: Path, report: Path | None) -> None:
    import mlflow

    from judges.tracking import log_agreement, log_compiled_judge, metric_key

    for scorer, agreement_report in run.agreement.items():
        log_agreement(agreement_report, scorer)
    for scorer, seconds in run.meta.get("seconds", {}).items():
        mlflow.log_metric(metric_key(f"{scorer}.seconds"), seconds)
    for phase, usage in run.meta.get("usage", {}).items():
        mlflow.log_metric(metric_key(f"{phase}.lm_calls"), usage["lm_calls"])
        for kind, count in _phase_tokens(usage).items():
            mlflow.log_metric(metric_key(f"{phase}.{kind}"), count)
        if usage.get("cost") is not None:
            mlflow.log_metric(metric_key(f"{phase}.cost"), usage["cost"])
    mlflow.log_artifact(str(out / "calibration_run.json"))
    for label, judge in compiled.items():
        log_compiled_judge(judge, name=f"compiled_{label}")
    if report is not None:
        mlflow.log_artifacts(str(report.parent), artifact_path="report")


def cmd_report(args) -> int:
    from calibration.report import write_report

    source = Path(args.source)
    if not source.is_file():
        raise UsageError(f"not a file: {args.source} (give a calibration_run.json, samples.jsonl or a run file)")
    out = Path(args.out or source.parent / "report")
    try:
        page = write_report(source, out)
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(f"wrote {page} and its plots; open it in a browser")
    return 0


# ------------------------------------------------------------------------------------------------
# Arguments
# ------------------------------------------------------------------------------------------------
def _common(parser: argparse.ArgumentParser, lm: bool = True) -> None:
    if lm:
        parser.add_argument("--lm", default=None, help="judge LM: 'embedded' (default: SmolLM2-135M in-process), a "
                            ".gguf path, or any LiteLLM model string such as openai/gpt-4o-mini")
    parser.add_argument("--runs-dir", default="runs", help="where outputs and the MLflow SQLite store go (default: runs)")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log this run to MLflow")
    parser.add_argument("--no-traces", action="store_true", help="log to MLflow but without DSPy traces")
    _debug(parser)


def _prices_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prices", default=None, help='JSON file of LM prices for the cost column: {"model": '
                        '{"input": $ per 1M tokens, "output": ...}}, models named as in the LM string')


def _debug(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="dspy-judges", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = top.add_subparsers(dest="command", required=True, metavar="{metrics,evaluate,calibrate,report}")

    p = sub.add_parser("metrics", help="list every metric, its required fields, whether it needs an LM or embeddings")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _debug(p)
    p.set_defaults(run=cmd_metrics)

    p = sub.add_parser("evaluate", help="score a dataset with metrics: scores table, per-sample JSONL, summary",
                       description="Score every sample of DATA with every metric. Outputs go to --out "
                                   "(default runs/evaluate/<data name>): samples.jsonl, scores.csv, summary.json and "
                                   "run.jsonl, which makes a rerun resume where a killed run stopped.")
    p.add_argument("data", help="a .jsonl or .csv file of samples (user_input, response, retrieved_contexts, reference ...)")
    p.add_argument("-m", "--metric", action="append", required=True,
                   help="a metric name from `dspy-judges metrics`, repeatable; parameters as NAME:{json}")
    p.add_argument("--embeddings", default=None, help="embedder: 'embedded' (default: all-MiniLM-L6-v2), a "
                   "sentence-transformers folder, or a LiteLLM embedding model string")
    p.add_argument("--threads", type=int, default=1, help="parallel items (default 1: one in-process LM "
                   "serialises calls; use more with a remote LM)")
    p.add_argument("--limit", type=int, default=None, help="only the first N samples")
    p.add_argument("--run-file", default=None, help="append-only progress file (default: <out>/run.jsonl)")
    p.add_argument("--out", default=None, help="output folder")
    p.add_argument("--timeout", type=float, default=None, help="seconds before one item is recorded as failed")
    _prices_option(p)
    _common(p)
    p.set_defaults(run=cmd_evaluate)

    p = sub.add_parser("calibrate", help="compile a judge on human labels, calibrate it, report held-out agreement",
                       description="Split a labelled set into train and a held-out test part (seeded, label-balanced "
                                   "for binary sets), compile the judge on train with each --optimizer, fit the "
                                   "calibrator, and report agreement with the human labels on test against cheap "
                                   "baselines. Writes compiled judge JSON, calibration_run.json and an HTML report.")
    p.add_argument("data", help=f"a labelled .jsonl/.csv file or one of: " + "; ".join(f"{k} ({v})" for k, v in BUILTIN_SETS.items()))
    p.add_argument("--judge", default="faithfulness", help="an LLM judge from `dspy-judges metrics` (default faithfulness)")
    p.add_argument("--judge-params", default=None, help="the judge's constructor parameters as JSON")
    p.add_argument("--label-column", default="label", help="the label column of a file (default: label)")
    p.add_argument("--label-kind", default="binary", choices=("binary", "ordinal", "continuous"))
    p.add_argument("--optimizer", action="append", choices=OPTIMIZERS, default=None,
                   help="DSPy optimizer; repeat to compare several (default: bootstrap)")
    p.add_argument("--calibrator", default="stacked", choices=("stacked", "platt", "isotonic", "none"))
    p.add_argument("--n-train", type=int, default=16, help="labelled items to compile and calibrate on (default 16)")
    p.add_argument("--n-test", type=int, default=32, help="held-out items to measure on (default 32)")
    p.add_argument("--max-demos", type=int, default=3, help="few-shot demos per step (default 3)")
    p.add_argument("--optimizer-options", default=None,
                   help='JSON passed to the optimizers, e.g. {"num_candidates": 2, "num_trials": 3} for mipro, '
                        '{"max_metric_calls": 40} for gepa')
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-bootstrap", type=int, default=1000, help="bootstrap resamples for the 95%% CIs (default 1000)")
    p.add_argument("--reflection-lm", default=None, help="GEPA's reflection LM (default: the judge LM)")
    p.add_argument("--out", default=None, help="output folder (default runs/calibrate/<data>-<judge>)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    _prices_option(p)
    _common(p)
    p.set_defaults(run=cmd_calibrate)

    p = sub.add_parser("report", help="an HTML page with plots from a calibration run or an evaluate output")
    p.add_argument("source", help="calibration_run.json, or samples.jsonl / run.jsonl from evaluate")
    p.add_argument("--out", default=None, help="output folder (default: <source folder>/report)")
    _debug(p)
    p.set_defaults(run=cmd_report)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "optimizer", "unset") is None:
        args.optimizer = ["bootstrap"]
    try:
        return args.run(args)
    except UsageError as err:
        print(f"dspy-judges {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # one line for users; --debug for the traceback
        if args.debug:
            raise
        print(f"dspy-judges {args.command}: failed: {type(err).__name__}: {err} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
