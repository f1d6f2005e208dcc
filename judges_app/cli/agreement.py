"""`dspy-judges agreement`: how well does a judge agree with people on new labelled data? The drift check.

    dspy-judges agreement runs/calibrate/begin-slice-faithfulness/compiled_faithfulness_bootstrap.json labels.jsonl
    dspy-judges agreement faithfulness labels.jsonl --lm openai/gpt-4o-mini
    dspy-judges agreement labels.jsonl --judge faithfulness_with_verifier \\
        --judge 'faithfulness_with_verifier:{"aggregate": "share"}' --judge faithfulness

The judge (a compiled judge saved by ``calibrate``, or any metric by name) scores every labelled item; with
several ``--judge``, each does, named by what tells it apart, and every pair is compared on the same items
(paired bootstrap, DeLong's and McNemar's tests, Holm-adjusted over the pairs). The same table as
``calibrate`` follows (bootstrap 95% CIs, the cheap baselines, the hard slice, findings in
words), then an HTML report and an MLflow run. For a compiled judge both its calibrated score and the
judge's own raw score are measured, and labels are put on the scale the judge was calibrated to. The hard
slice's baseline cut-offs are fitted on this same set (there is no train split here).

Must not fit or compile: it measures a judge as given.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from calibration.agreement.pairs import compare_pairs, pairs_text
from calibration.agreement.raters import rater_agreement, raters_text
from calibration.agreement.record import CalibrationRun
from calibration.agreement.report import write_report
from calibration.data.labelled import without_items, without_shipped_training
from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.fit import FITTED_ON, failed_mask, judge_scores, label_schema, scaled
from calibration.fitting.heldout import applicable_baselines, disagreements, hard_slice
from calibration.fitting.signals import signal_columns
from judges.data.samples import SampleValidationError
from judges.run.usage import tracked_usage
from judges_app.cli.calibrate import print_results
from judges_app.cli import for_users
from judges_app.cli.common import (
    CommandFailed,
    UsageError,
    add_common_options,
    add_file_mapping_options,
    add_label_scale_options,
    add_reference_separator_option,
    bootstrap_count,
    build_metric,
    check_bootstrap_memory,
    check_tracking,
    cli_lm,
    dataset_name,
    labelled_file_options,
    table_file,
    lm_params,
    load_labelled,
    log_after_printing,
    mlflow_note,
    output_folder,
    positive_int,
    seed_value,
    share,
    tracking,
)
from judges_app.cli.outputs import default_output
from judges_app.tracking import data_hash, log_calibration


def judge_specs(args) -> tuple[list[str], str]:
    """The judges and the data the positionals and ``--judge`` name: ``JUDGE DATA`` (one judge), or ``DATA``
    with ``--judge A --judge B ...`` (several)."""
    if args.judge:
        if len(args.targets) != 1:
            raise UsageError(f"with --judge, give only the labelled DATA as a positional, got {args.targets}")
        return list(args.judge), args.targets[0]
    if len(args.targets) != 2:
        raise UsageError("give JUDGE DATA, or DATA --judge A --judge B ...")
    return [args.targets[0]], args.targets[1]


def row_names(judges: list) -> list[str]:
    """A row name per judge: its name, and where several share a name, the settings that tell them apart
    (``faithfulness_with_verifier (aggregate=share)``); a compiled judge's row says it is compiled."""
    names = []
    for judge in judges:
        base = f"{judge.name} (compiled + calibrated)" if isinstance(judge, CompiledJudge) else judge.name
        same = [other for other in judges if other.name == judge.name and other is not judge]
        params = judge.get_params()
        differs = sorted(key for other in same for key in set(params) | set(other.get_params())
                         if params.get(key) != other.get_params().get(key) and key != "checksum")
        if differs:
            base += " (" + ", ".join(f"{key}={params.get(key)!r}" for key in dict.fromkeys(differs)) + ")"
        names.append(base)
    if len(set(names)) < len(names):
        raise UsageError(f"two judges would share the row name {[n for n in names if names.count(n) > 1][0]!r}: "
                         "give each other settings")
    return names


def without_fitted_items(data, specs: list[str], judges: list) -> tuple[Any, int]:
    """``data`` without the items a compiled judge among ``judges`` was fitted on (measured on them it would look
    better than it is), said with their count; a compiled judge that does not record its items is warned of."""
    keys: set[str] = set()
    for spec, judge in zip(specs, judges):
        if isinstance(judge, CompiledJudge):
            recorded = judge.report.get(FITTED_ON) if isinstance(judge.report, dict) else None
            if recorded is None:
                print(f"warning: {spec} does not record the items it was fitted on (it was saved before compiled "
                      "judges kept them): if DATA holds any of them, its numbers are too good", flush=True)
            keys.update(recorded or ())
    if not keys:
        return data, 0
    kept, dropped = without_items(data, keys)
    if dropped:
        print(f"left out {dropped} items a compiled judge was fitted on; {len(kept)} remain", flush=True)
    if len(kept) < 2:
        raise UsageError(f"every item but {len(kept)} was fitted on by a compiled judge: measure it on other items")
    return kept, dropped


#: Krippendorff's level of measurement for each label kind.
RATER_LEVELS = {"binary": "nominal", "ordinal": "ordinal", "continuous": "interval"}


def on_label_scale(scores: list[float | None], data) -> list[float | None]:
    """A judge's [0, 1] scores as ratings on the people's scale: decisions at 0.5 for binary labels, the label
    range's value otherwise (rounded for ordinal labels)."""
    low, high = data.label_range
    out: list[float | None] = []
    for score in scores:
        if score is None:
            out.append(None)
        elif data.kind == "binary":
            out.append(float(score >= 0.5))
        else:
            value = low + score * (high - low)
            out.append(float(round(value)) if data.kind == "ordinal" else value)
    return out


def run(args) -> int:
    specs, data_source = judge_specs(args)
    args.data = data_source
    data = load_labelled(args.data, label_column=args.label_column, label_kind=args.label_kind,
                         label_range=args.label_range, reference_separator=args.reference_separator,
                         **labelled_file_options(args))
    data, dropped = without_shipped_training(data)
    if dropped:
        print(f"{args.data}: left out {dropped} items the shipped verifier trained on (it is a judge, a baseline and "
              f"a calibrator signal here); {len(data)} remain", flush=True)
    if args.limit:
        data = data.subset(range(min(args.limit, len(data))))
    check_bootstrap_memory(args.n_bootstrap, len(data))  # before any judge runs
    lm = cli_lm(args)
    judges = [build_metric(spec, lm=lm, args=args) for spec in specs]
    names = row_names(judges)
    data, fitted_on = without_fitted_items(data, specs, judges)
    for judge in judges:
        try:
            judge.validate_dataset(data.dataset)
        except SampleValidationError as err:
            raise UsageError(f"{args.data} cannot be scored by {judge.name}: {err}") from None
    if len(set(data.labels)) < 2:
        raise UsageError(f"{args.data}: every label is {data.labels[0]}; agreement needs two label values at least")
    check_tracking(args)
    schemas = [judge.schema if isinstance(judge, CompiledJudge) else label_schema(data) for judge in judges]
    for spec, judge, schema in zip(specs, judges, schemas):
        if isinstance(judge, CompiledJudge) and (schema["kind"] == "binary") != (data.kind == "binary"):
            raise UsageError(f"{spec} was calibrated to {schema['kind']} labels; {args.data} has {data.kind} labels "
                             "(--label-kind)")
    if any(schema != schemas[0] for schema in schemas):
        raise UsageError("the judges put labels on different scales (compiled judges calibrated to other scales): "
                         "compare judges calibrated to one scale")
    schema = schemas[0]
    labels = np.clip(scaled(data.labels, schema), 0.0, 1.0)
    label = judges[0].name + (f"+{len(judges) - 1}" if len(judges) > 1 else "")
    out = Path(args.out or default_output(args.runs_dir, "agreement", dataset_name(args.data), label))
    output_folder(out)
    params = {"judges": specs, "judge_names": names, "data": args.data, "items": len(data),
              "data_hash": data_hash(list(data.dataset.samples) + list(data.labels)), **lm_params(args),
              "compiled_checksums": [j.get_params()["checksum"] for j in judges if isinstance(j, CompiledJudge)]}
    start = time.perf_counter()
    with tracking(args, "dspy-judges-agreement", f"agreement {label} on {args.data}", params):
        baselines = applicable_baselines(data)
        scores = {f"baseline: {b.replace('_', ' ')}": column.tolist()
                  for b, column in signal_columns(baselines, data.dataset, progress=True).items()}
        meta = {"data": args.data, "judges": specs, "failures": {}, "errors": {}, "usage": {},
                "dropped_trained_on": dropped, "dropped_fitted_on": fitted_on,
                "measured_on": f"every labelled item, no split, n={len(data)}",
                "seed": args.seed, "disagreements_by_judge": {}}
        failed_share = {}
        for judge, key in zip(judges, names):
            with tracked_usage() as meta["usage"][key]:
                raw, results = judge_scores(judge, data, progress=True, desc=key)
            failed = failed_mask(results)
            if failed.all():
                raise CommandFailed(f"{key} failed on all {len(data)} items; first error: {results[0]['error']}")
            if isinstance(judge, CompiledJudge):
                scores[f"{judge.name} (raw judge score)"] = [None if f else float(r["raw_score"])
                                                             for r, f in zip(results, failed)]
            scores[key] = [None if f else float(v) for v, f in zip(raw, failed)]
            meta["failures"][key] = int(failed.sum())
            if failed.any():
                meta["errors"][key] = sorted({r["error"] for r, f in zip(results, failed) if f})[:5]
            meta["disagreements_by_judge"][key] = disagreements(data, labels, key, judge, results, scores)
            failed_share[key] = float(failed.mean())
        meta["disagreements"] = meta["disagreements_by_judge"][names[0]]
        meta["seconds_total"] = time.perf_counter() - start
        slice_ = hard_slice(data, data, baselines, progress=True)
        if slice_:
            meta["hard_slice"] = {**slice_, "fitted_on": "this same set (no split)"}
        kind = "binary" if schema["kind"] == "binary" else "continuous"
        run = CalibrationRun(f"{dataset_name(args.data)}: {', '.join(names)}", labels.tolist(), scores,
                             label_kind=kind, meta=meta)
        run.compute_agreement(n_bootstrap=args.n_bootstrap, seed=args.seed, progress=True)
        if len(names) > 1:
            run.meta["judge_pairs"] = compare_pairs(run, names, n_bootstrap=args.n_bootstrap, seed=args.seed)
        if data.raters:
            run.meta["raters"] = {key: rater_agreement(data.ratings(), on_label_scale(run.scores[key], data),
                                                       level=RATER_LEVELS[data.kind], names=data.raters,
                                                       n_bootstrap=args.n_bootstrap, seed=args.seed)
                                  for key in names}
        run.save(out / "agreement_run.json")
        report = None if args.no_report else write_report(run, out / "report", progress=True,
                                                          title=f"Agreement report: {run.name}")
        print_results(run, args)
        if len(names) > 1:
            print(f"\nThe judges compared pair by pair on the items both scored (p-values Holm-adjusted over "
                  f"{len(run.meta['judge_pairs'])} pairs):")
            for line in pairs_text(run.meta["judge_pairs"]):
                print(f"  {line}")
        for key, found in (run.meta.get("raters") or {}).items():
            print(f"\nSeveral people labelled each item; {key} as one more of them (95% bootstrap CIs over items):")
            for line in raters_text(found):
                print(f"  {line}")
        if args.table:
            print(f"Table for a paper: {run.write_table(args.table)} ({run.caption()})")
        print(f"\n{time.perf_counter() - start:.0f} s. Wrote {out}/agreement_run.json")
        if report:
            print(f"HTML report: {report}")
        logging_failed = log_after_printing(args, lambda: log_calibration(run, {}, out / "agreement_run.json", report))
    if logging_failed:
        raise CommandFailed(logging_failed)
    mlflow_note(args)
    worst = max(failed_share, key=failed_share.get)
    if failed_share[worst] > args.max_failure_share:
        raise CommandFailed(f"{worst} failed on {failed_share[worst]:.0%} of the items, more than --max-failure-share "
                            f"{args.max_failure_share:.0%}: the numbers above describe only the items it scored")
    return 0


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("agreement", help=summary,
                       description=for_users(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="+", metavar="[JUDGE] DATA",
                   help="JUDGE DATA: a compiled judge JSON saved by calibrate or a metric name (NAME or NAME:{json}), "
                        "then a labelled .jsonl/.csv file (sample fields + a label column) or a built-in set; with "
                        "--judge, DATA alone")
    p.add_argument("--judge", action="append", default=None, metavar="SPEC",
                   help="a judge to measure (repeat for several, variants with other settings too: NAME:{json}); "
                        "their table is one, each pair compared on the same items")
    p.add_argument("--label-column", default="label", metavar="NAME[,NAME...]",
                   help="the label column; several (a1,a2,a3) when several people labelled each item: then people's "
                        "agreement (Krippendorff's alpha, Fleiss' kappa) and the judge's as one more rater")
    add_label_scale_options(p)
    add_file_mapping_options(p)
    p.add_argument("--table", type=table_file, default=None, metavar="FILE",
                   help="also write the agreement table for a paper: Markdown (.md), LaTeX (.tex) or CSV (.csv), "
                        "three decimals, the settings in a caption line")
    p.add_argument("--limit", type=positive_int, default=None, help="only the first N labelled items")
    p.add_argument("--seed", type=seed_value, default=0)
    p.add_argument("--n-bootstrap", type=bootstrap_count, default=1000)
    p.add_argument("--out", default=None, help="output folder (default runs/agreement/<data>-<judge>)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("--max-failure-share", type=share, default=0.2)
    add_reference_separator_option(p)
    add_common_options(p)
    p.set_defaults(run=run)
