"""`dspy-judges calibrate`: compile a judge on human labels, calibrate it, report agreement on held-out items.

Must not implement fitting itself (``calibration.fitting``): it drives it and prints.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
import time

from calibration.agreement.record import main_statistic, spread_over_splits
from calibration.agreement.report import write_report
from calibration.data.labelled import balanced_sample, split, without_items, without_shipped_training
from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.fit import FITTED_ON, JudgeFailedError, check_optimizer
from calibration.fitting.heldout import check_split, compare_on_heldout
from calibration.fitting.judgments import JudgmentRecords, recording_judgments
from judges.data.samples import SampleValidationError
from judges.lm.resolve import lm_name, resolve_lm
from judges.lm.served import PermanentLMError
from judges.run.run_file import take_lock
from judges.run.usage import tracked_usage, usage_cost, usage_tokens
from judges_app.cli.common import (
    BUILTIN_SETS,
    CommandFailed,
    UsageError,
    add_common_options,
    add_file_mapping_options,
    add_label_scale_options,
    add_prices_option,
    add_reference_separator_option,
    bootstrap_count,
    build_metric,
    check_bootstrap_memory,
    check_tracking,
    cli_lm,
    dataset_name,
    labelled_file_options,
    sizes_list,
    table_file,
    lm_params,
    load_labelled,
    log_after_printing,
    mlflow_note,
    output_folder,
    positive_int,
    read_prices,
    seed_value,
    share,
    tracking,
)
from judges_app.cli.outputs import default_output, path_part
from judges_app.mlflow_labels import MlflowSourceError, labels_from_mlflow
from judges_app.tracking import data_hash, default_tracking_uri, log_calibration

OPTIMIZERS = ("none", "labeled", "bootstrap", "random_search", "mipro", "simba", "gepa", "memory", "finetune")


def judge_spec(args) -> str:
    """``--judge`` with ``--judge-params`` as ``build_metric`` reads it (``NAME:{json}``)."""
    return args.judge + (f":{args.judge_params}" if args.judge_params else "")


def mlflow_labelled(args):
    """The labelled set ``--from-mlflow EXPERIMENT --assessment NAME [--filter]`` describe (traces lacking a
    field the judge needs are skipped and counted); ``args.data`` becomes the set's name."""
    if args.data is not None:
        raise UsageError(f"give either a labelled DATA ({args.data}) or --from-mlflow, not both")
    if not args.assessment:
        raise UsageError("--from-mlflow needs --assessment NAME: the human feedback that holds the labels")
    required = build_metric(judge_spec(args)).required_fields
    try:
        data, report = labels_from_mlflow(args.from_mlflow, assessment=args.assessment, filter_string=args.filter,
                                          tracking_uri=default_tracking_uri(args.runs_dir),
                                          label_kind=args.label_kind, label_range=args.label_range,
                                          required_fields=required)
    except MlflowSourceError as err:
        raise UsageError(f"--from-mlflow {args.from_mlflow}: {err}") from None
    print(f"--from-mlflow {args.from_mlflow}, feedback {args.assessment!r}: {report.summary()}", flush=True)
    args.data = "mlflow-" + re.sub(r"[^\w-]+", "_", f"{args.from_mlflow}-{args.assessment}")
    return data


def labelled_data(args):
    """The labelled set to calibrate on: DATA (a file or a built-in set) or an MLflow experiment's feedback."""
    if args.from_mlflow is not None:
        return mlflow_labelled(args)
    if args.assessment or args.filter:
        raise UsageError("--assessment and --filter go with --from-mlflow EXPERIMENT")
    if args.data is None:
        raise UsageError("give a labelled DATA file or built-in set, or --from-mlflow EXPERIMENT --assessment NAME")
    return load_labelled(args.data, label_column=args.label_column, label_kind=args.label_kind,
                         label_range=args.label_range, reference_separator=args.reference_separator,
                         **labelled_file_options(args))


def split_sizes(args, found: int) -> tuple[int, int]:
    """``--n-train`` / ``--n-test``, checked against the ``found`` labelled items; with ``--from-mlflow`` and
    neither given, a split that fits what was found (a third held out, at least 2 items each)."""
    if args.from_mlflow is not None and args.n_train is None and args.n_test is None:
        n_test = max(2, found // 3)
        n_train = found - n_test
    else:
        n_train, n_test = args.n_train or 16, args.n_test or 32
    if n_train < 2 or n_test < 2:
        raise UsageError(f"{args.data} has {found} labelled items: calibrate needs at least 4 (2 to compile and "
                         f"calibrate on, 2 to measure on)" if found < 4 else "--n-train and --n-test must be at least 2")
    if n_train + n_test > found:
        raise UsageError(f"{args.data} has {found} labelled items; --n-train {n_train} + --n-test {n_test} needs "
                         f"{n_train + n_test}: give a smaller split, e.g. --n-train {max(2, found - max(2, found // 3))} "
                         f"--n-test {max(2, found // 3)}")
    return n_train, n_test


def run(args) -> int:
    spec = judge_spec(args)
    probe = build_metric(spec)
    args.optimizer = args.optimizer or (["bootstrap"] if probe.needs_lm else ["none"])
    optimizers = [None if o == "none" else o for o in args.optimizer]
    for optimizer in optimizers:  # before any data is read or model loaded
        try:
            check_optimizer(probe, optimizer)
        except ValueError as err:
            raise UsageError(f"--judge {args.judge}: {err}".replace("fit: optimizer=", "--optimizer ")) from None
    data = labelled_data(args)
    data, dropped = without_shipped_training(data)
    if dropped:
        print(f"{args.data}: left out {dropped} items the shipped verifier trained on (it is a judge, a baseline and "
              f"a calibrator signal here); {len(data)} remain", flush=True)
    n_train, n_test = split_sizes(args, len(data))
    parts = split_for(data, n_train, n_test, args.seed)
    check_bootstrap_memory(args.n_bootstrap, len(parts.test))  # before any judge runs
    pool = [without_shipped_training(load_labelled(source, label_column=args.label_column, label_kind=args.label_kind,
                                                   reference_separator=args.reference_separator,
                                                   **labelled_file_options(args)))[0]
            for source in args.pool or []]
    try:
        check_split(parts.train, parts.test, None if args.calibrator == "none" else args.calibrator)
        for optimizer in optimizers:
            check_optimizer(probe, optimizer, parts.train, calibrator=None if args.calibrator == "none" else
                            args.calibrator, seed=args.seed)
    except ValueError as err:
        raise UsageError(f"{args.data}: {err}") from None
    prices = read_prices(args.prices)  # a bad price file fails now, not after the run
    check_tracking(args)
    try:  # every sample must have what the judge reads: refused now, before any LM work
        probe.validate_dataset(list((data if args.repeats > 1 else parts.train).dataset) + list(parts.test.dataset)
                               + [sample for extra in pool for sample in extra.dataset])
    except SampleValidationError as err:
        raise UsageError(f"{args.data} cannot be scored by --judge {probe.name}: {err}") from None
    besides = [build_metric(name) for name in args.beside or []]
    try:
        for other in besides:
            other.validate_dataset(list(parts.test.dataset))
    except SampleValidationError as err:
        raise UsageError(f"{args.data} cannot be scored by --beside {err}") from None
    needs_lm = probe.needs_lm or any(other.needs_lm for other in besides)
    lm = (cli_lm(args) or resolve_lm(None)) if needs_lm else None
    beside = [build_metric(name, lm=lm) for name in args.beside or []]
    for name, other in zip(args.beside or [], beside):  # a compiled judge measured on items it was fitted on
        fitted = set(other.report.get(FITTED_ON) or ()) if isinstance(other, CompiledJudge) else set()
        seen = without_items(parts.test, fitted)[1] if fitted else 0
        if seen:
            print(f"warning: --beside {name} was fitted on {seen} of the {len(parts.test)} test items: its numbers "
                  "there are too good (measure it with agreement on other items)", flush=True)
    reflection = resolve_lm(args.reflection_lm) if args.reflection_lm else (lm if "gepa" in args.optimizer else None)
    try:
        extra = json.loads(args.optimizer_options or "{}")
    except json.JSONDecodeError as err:
        raise UsageError(f"--optimizer-options must be a JSON object ({err.msg})") from None
    if not isinstance(extra, dict):
        raise UsageError(f"--optimizer-options must be a JSON object, got {type(extra).__name__}: {args.optimizer_options}")
    options = {"max_demos": args.max_demos, **extra}
    out = output_folder(args.out or default_output(args.runs_dir, "calibrate", dataset_name(args.data), probe.name))
    try:  # one calibrate at a time per output folder: a second would replace the first's files unseen
        folder_lock = take_lock(out / ".calibrate.lock", out, "output folder")
    except ValueError as err:
        raise UsageError(str(err)) from None
    try:
        if "finetune" in args.optimizer:
            options.setdefault("out", str(out / "finetuned-verifier"))
        picked = list(parts.train.dataset.samples) + list(parts.test.dataset.samples)
        params = {"data": args.data, "data_hash": data_hash(picked + list(parts.train.labels) + list(parts.test.labels)),
                  "judge": probe.name, "judge_params": probe.get_params(), **lm_params(args),
                  "optimizers": args.optimizer, "calibrator": args.calibrator, "seed": args.seed,
                  "n_train": len(parts.train), "n_test": len(parts.test), "max_demos": args.max_demos,
                  "pool": args.pool or [], "dropped_trained_on": dropped, "repeats": args.repeats}
        judging = f" with {lm_name(lm)}" if lm is not None else " (no LM)"
        print(f"{args.data}: train {len(parts.train)}, test {len(parts.test)} (held out); judge {probe.name}{judging}; "
              f"optimizers {args.optimizer}; calibrator {args.calibrator}; seed {args.seed}", flush=True)
        records = judgment_records(out)
        measure = functools.partial(  # the judge, its optimizers and calibrator on one train/test split
            compare_on_heldout, lambda: build_metric(spec, lm=lm), optimizers=optimizers,
            calibrator=None if args.calibrator == "none" else args.calibrator, reflection_lm=reflection,
            name=f"{args.data}: {probe.name}", n_bootstrap=args.n_bootstrap, pool=pool, beside=beside, **options)
        start = time.perf_counter()
        with tracking(args, "dspy-judges-calibrate", f"calibrate {probe.name} on {args.data}", params):
            try:
                with recording_judgments(records), tracked_usage() as spent:
                    compiled, run = measure(parts.train, parts.test, seed=args.seed, progress=True)
                    if args.repeats > 1:
                        others = []
                        for k in range(1, args.repeats):
                            print(f"\nsplit {k + 1} of {args.repeats} (seed {args.seed + k})", flush=True)
                            other = split_for(data, n_train, n_test, args.seed + k)
                            others.append(measure(other.train, other.test, seed=args.seed + k, progress=False)[1])
                        run.meta["repeats"] = spread_over_splits([run, *others])
                    if args.label_curve:
                        run.meta["label_curve"] = label_curve(args.label_curve, parts, run, measure, args.seed)
            except JudgeFailedError as err:
                raise CommandFailed(f"{err}. No agreement table: there is nothing to measure.") from None
            except PermanentLMError as err:
                raise CommandFailed(f"stopped: the LM refused a request in a way no retry fixes ({err})") from None
            except KeyboardInterrupt:
                print(f"\ninterrupted after {time.perf_counter() - start:.0f} s: {spent_words(spent)}. "
                      f"{records.written} new judgments are kept in {records.path}; the same command again "
                      "reuses them instead of paying for them again", file=sys.stderr, flush=True)
                raise
            finally:
                records.close()
            run.meta["judgments"] = {"file": records.path.name, "reused": records.reused, "written": records.written}
            run.meta.update(data=args.data, lm=(args.lm or "embedded") if probe.needs_lm else None,
                            seconds_total=time.perf_counter() - start)
            if prices is not None:
                for usage in run.meta["usage"].values():
                    usage["cost"] = usage_cost(usage["by_model"], prices)
            run.save(out / "calibration_run.json")
            for label, judge in compiled.items():
                judge.save(out / f"compiled_{path_part(probe.name)}_{label}.json")
            report = None if args.no_report else write_report(run, out / "report", progress=True)
            print_results(run, args)
            if args.table:
                print(f"Table for a paper: {run.write_table(args.table)} ({run.caption()})")
            print(f"\n{time.perf_counter() - start:.0f} s. Wrote {out}/: calibration_run.json, "
                  + ", ".join(f"compiled_{path_part(probe.name)}_{label}.json" for label in compiled))
            if report:
                print(f"HTML report: {report}")
            if records.reused:
                print(f"{records.reused} judgments came from {records.path.name}, recorded by an earlier run of this "
                      "command (no LM call); delete it to judge every item again")
            logging_failed = log_after_printing(
                args, lambda: log_calibration(run, compiled, out / "calibration_run.json", report))
        if logging_failed:
            raise CommandFailed(logging_failed)
        mlflow_note(args)
        worst = max(((count / len(parts.test if scorer in run.scores else parts.train), scorer)
                     for scorer, count in run.meta["failures"].items()), default=(0.0, None))
        if worst[0] > args.max_failure_share:
            raise CommandFailed(f"{worst[1]} failed on {worst[0]:.0%} of its items, more than --max-failure-share "
                                f"{args.max_failure_share:.0%}: the numbers above describe only the items it scored")
        return 0
    finally:
        os.close(folder_lock)


def label_curve(sizes: list[int], parts, run, measure, seed: int) -> dict:
    """The main statistic of each scorer fitted on the first N training items (label-balanced), for each N of
    ``sizes`` below the training set's size and the whole of it, always on the same test items; ``measure`` runs
    one train/test comparison, ``run`` is the one on the whole training set."""
    stat = main_statistic(run.label_kind)
    sizes = sorted({min(n, len(parts.train)) for n in sizes} | {len(parts.train)})
    curve = {"stat": stat, "sizes": sizes, "scorers": {name: [] for name in run.scores}}
    for size in sizes:
        if size == len(parts.train):
            measured = run
        else:
            print(f"\nlabel curve: fitting on {size} of {len(parts.train)} training labels", flush=True)
            measured = measure(first_items(parts.train, size, seed), parts.test, seed=seed, progress=False)[1]
        reports = measured.ensure_agreement()
        for name in curve["scorers"]:
            curve["scorers"][name].append(reports[name].value(stat) if name in reports else None)
    return curve


def first_items(data, n: int, seed: int):
    """``n`` items of ``data``: label-balanced for binary labels (seeded), else the first ``n``."""
    return balanced_sample(data, n, seed=seed) if data.kind == "binary" else data.subset(range(n))


def split_for(data, n_train: int, n_test: int, seed: int):
    """``n_train`` + ``n_test`` items of ``data`` (``first_items``), split into train and test with ``seed``: one
    split of ``--repeats``."""
    picked = first_items(data, n_train + n_test, seed)
    return split(picked, dev=0, test=n_test / len(picked), seed=seed)


def judgment_records(out) -> JudgmentRecords:
    """``<out>/judgments.jsonl``: the judgments this calibration pays for, kept as they come (an earlier
    interrupted run's are reused; the command says how many)."""
    try:
        records = JudgmentRecords(out / "judgments.jsonl")
    except ValueError as err:
        raise UsageError(str(err)) from None
    if records.stored:
        print(f"resuming: {records.stored} judgments recorded by an earlier run in {records.path} are reused where "
              "the judge, its settings and the item are the same", flush=True)
    return records


def spent_words(spent: dict) -> str:
    """``N paid LM calls (tokens in / out)`` for a ``tracked_usage`` record."""
    tokens = usage_tokens(spent) if spent.get("by_model") is not None else {"prompt_tokens": 0, "completion_tokens": 0}
    return (f"{spent.get('lm_calls', 0)} paid LM calls ({tokens['prompt_tokens']} tokens in / "
            f"{tokens['completion_tokens']} out)")


def print_results(run, args) -> None:
    """The agreement table, the findings in words, errors, skipped optimizers and LM use per phase."""
    measured = run.meta.get("measured_on", f"held-out test n={len(run.labels)}")
    print(f"\n{run.name}: {measured}, 95% bootstrap CIs\n")
    print(run.table())
    print()
    for finding in run.findings(n_bootstrap=args.n_bootstrap, seed=args.seed):
        print(f"* {finding}")
    for scorer, errors in run.meta.get("errors", {}).items():
        print(f"  {scorer} failed with: " + "; ".join(errors))
    for label, reason in run.meta.get("skipped", {}).items():
        print(f"  optimizer {label} skipped: {reason}")
    shown = [d for d in run.meta.get("disagreements", {}).get("items", []) if d.get("rationale")][:3]
    if shown:
        print(f"\nWhere {run.meta['disagreements']['scorer']} and people disagree (their rationale beside its reasons):")
        for d in shown:
            print(f"  item {d.get('id', d['item'])}: label {d['label']}, score {d['score']}\n    person: {d['rationale']}\n"
                  f"    judge: {d['judge_reasons'][:300]}")
    curve = run.meta.get("label_curve")
    if curve:
        print(f"\n{curve['stat']} by the number of training labels ({', '.join(map(str, curve['sizes']))}), "
              "on the same test items:")
        for name, values in curve["scorers"].items():
            print(f"  {name}: " + ", ".join("n/a" if v is None else f"{v:.3f}" for v in values))
    spread = run.meta.get("repeats")
    if spread:
        first = next(iter(spread.values()))
        print(f"\nOver {len(first['values'])} splits (seeds {args.seed}-{args.seed + len(first['values']) - 1}), "
              f"{first['stat']}: mean, standard deviation, lowest-highest")
        for name, found in spread.items():
            print(f"  {name}: {found['mean']:.3f} sd {found['sd']:.3f} ({found['min']:.3f}-{found['max']:.3f})")
    print("\nLM use (calls that cost tokens; answers from DSPy's cache are counted apart):")
    for phase, usage in run.meta["usage"].items():
        tokens = usage_tokens(usage)
        cost = f", ${usage['cost']:.4f}" if usage.get("cost") is not None else ""
        cached = f" (+{usage['cached_calls']} answered from cache)" if usage.get("cached_calls") else ""
        print(f"  {phase}: {usage['lm_calls']} calls{cached}, {tokens['prompt_tokens']} tokens in / "
              f"{tokens['completion_tokens']} out{cost}")


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("calibrate", help=summary,
                       description="Split a labelled set into train and a held-out test part (seeded, label-balanced "
                                   "for binary sets), compile the judge on train with each --optimizer, fit the "
                                   "calibrator, and report agreement with the human labels on test against cheap "
                                   "baselines. Writes compiled judge JSON, calibration_run.json and an HTML report.")
    p.add_argument("data", nargs="?", default=None,
                   help="a labelled .jsonl/.csv file or one of: " + "; ".join(f"{k} ({v})" for k, v in BUILTIN_SETS.items())
                        + " (leave out with --from-mlflow)")
    p.add_argument("--from-mlflow", default=None, metavar="EXPERIMENT",
                   help="read the labels from an MLflow experiment (name or id) instead of DATA: each trace's latest "
                        "HUMAN feedback named --assessment, at MLFLOW_TRACKING_URI (default: the --runs-dir store)")
    p.add_argument("--assessment", default=None, metavar="NAME", help="with --from-mlflow: the feedback's name")
    p.add_argument("--filter", default=None, metavar="STRING",
                   help="with --from-mlflow: an MLflow trace filter string, e.g. \"tags.split = 'dev'\"")
    p.add_argument("--judge", default="faithfulness",
                   help="a judge from `dspy-judges metrics`, LLM or not (default faithfulness); e.g. "
                        "faithfulness_with_verifier, the offline verifier judge (--optimizer none or finetune)")
    p.add_argument("--judge-params", default=None, help="the judge's constructor parameters as JSON")
    p.add_argument("--beside", action="append", default=None, metavar="JUDGE",
                   help="another judge (by name, as --judge) scored as shipped on the same test items, one row of "
                        "the table, for comparison; repeatable")
    p.add_argument("--label-column", default="label", help="the label column of a file (default: label)")
    add_label_scale_options(p)
    add_file_mapping_options(p)
    p.add_argument("--repeats", type=positive_int, default=1, metavar="K",
                   help="measure on K label-balanced splits (seeds SEED..SEED+K-1): each scorer's mean, spread and "
                        "range over them beside the first split's table (K times the work; judgments are reused)")
    p.add_argument("--label-curve", type=sizes_list, default=None, metavar="N,N,...",
                   help="also fit on the first N training labels for each N (e.g. 20,40) and measure on the same test "
                        "items: each scorer's main statistic by the number of labels, printed and plotted in the report")
    p.add_argument("--table", type=table_file, default=None, metavar="FILE",
                   help="also write the agreement table for a paper: Markdown (.md), LaTeX (.tex) or CSV (.csv), "
                        "three decimals, the settings in a caption line")
    p.add_argument("--optimizer", action="append", choices=OPTIMIZERS, default=None,
                   help="DSPy optimizer, memory (the nearest labelled items as demos plus guidelines distilled "
                        "from people's rationales), finetune (the verifier judge's model trained on the labels) or "
                        "none; repeat to compare several (default: bootstrap for an LLM judge, none otherwise). "
                        "One that does not fit the judge is refused before any work")
    p.add_argument("--calibrator", default="stacked", choices=("stacked", "platt", "isotonic", "none"))
    p.add_argument("--pool", action="append", default=None, metavar="DATA",
                   help="another labelled set (file or built-in name) the calibrator is fitted on together with "
                        "the train split, repeatable: a calibrator meant to travel between data sets")
    p.add_argument("--n-train", type=positive_int, default=None,
                   help="labelled items to compile and calibrate on (default 16; with --from-mlflow, two thirds "
                        "of what it finds); finetune needs 60 labelled training items")
    p.add_argument("--n-test", type=positive_int, default=None,
                   help="held-out items to measure on (default 32; with --from-mlflow, a third of what it finds)")
    p.add_argument("--max-demos", type=positive_int, default=3, help="few-shot demos per step (default 3)")
    p.add_argument("--optimizer-options", default=None,
                   help='JSON passed to the optimizers, e.g. {"num_candidates": 2, "num_trials": 3} for mipro, '
                        '{"max_metric_calls": 40} for gepa, {"semantic": false} for memory (k is --max-demos)')
    p.add_argument("--seed", type=seed_value, default=0)
    p.add_argument("--n-bootstrap", type=bootstrap_count, default=1000, help="bootstrap resamples for the 95%% CIs (default 1000)")
    p.add_argument("--reflection-lm", default=None, help="GEPA's reflection LM (default: the judge LM)")
    p.add_argument("--out", default=None, help="output folder (default runs/calibrate/<data>-<judge>)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("--max-failure-share", type=share, default=0.2,
                   help="exit with an error when a judge fails on more than this share of its items (default 0.2); "
                        "failed items are always left out of agreement, never imputed")
    add_reference_separator_option(p)
    add_prices_option(p)
    add_common_options(p)
    p.set_defaults(run=run)
