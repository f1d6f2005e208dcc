"""`dspy-judges label`: a person labels the items that teach the judge most, one by one, in the terminal.

    dspy-judges label pool.jsonl --judge faithfulness --budget 20 --out labels.jsonl
    dspy-judges label pool.jsonl --judge faithfulness --compiled compiled_faithfulness_bootstrap.json --budget 50 --out labels.jsonl
    dspy-judges calibrate labels.jsonl --judge faithfulness          # then fit the judge to those labels

The judge (calibrated, with --compiled) scores every unlabelled item of the pool once; items are ranked by
the judge's uncertainty, by its disagreement with a cheap signal (reference-token recall where items have
a reference, else token overlap with the contexts) and by diversity (embedding similarity to items already
ranked or labelled; --diversity 0 turns it off): see calibration.active. The ranking is kept beside the
labels (LABELS.jsonl.queue.json), so a rerun asks the next item without scoring again.

For each item you type a label (binary: 1/0, y/n; ordinal and continuous: a number on --label-range), then,
optionally, why (the rationale that memory alignment distils guidelines from). Each answer is appended to
LABELS.jsonl and flushed to disk at once: a crash or Ctrl-C loses nothing, and a rerun continues where it
stopped, until --budget items of the pool are labelled. Type s to skip an item (it is asked again on a
rerun), m to see it whole, q to stop.

Why the terminal and not a web page: labelling needs the item's text and two answers; a terminal flow
works over SSH and inside tmux with nothing to serve, no port, no browser, and it is tested under tmux.

Must not rank items itself (``calibration.fitting.active``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from calibration.fitting.active import labelling_priority, select_for_labelling
from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.signals import signal_columns
from judges.data.dataset import EvaluationDataset
from judges.data.samples import SampleValidationError
from judges.lm.embeddings import resolve_embedder
from judges.lm.served import PermanentLMError
from judges.run.run_file import take_lock
from judges_app.cli import for_users
from judges_app.cli.common import (
    CommandFailed,
    UsageError,
    add_common_options,
    add_label_scale_options,
    add_reference_separator_option,
    build_metric,
    cli_lm,
    load_dataset,
    positive_int,
    share,
)

QUEUE_VERSION = 1
_SHOWN_CHARS = 1200  # of each field, until the person asks for the whole item


def item_key(row: dict[str, Any]) -> str:
    """An item's identity: a hash of its sample fields (the label and rationale left out)."""
    fields = {k: v for k, v in row.items() if k not in ("label", "rationale")}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:20]


def read_labels(path: Path) -> list[dict[str, Any]]:
    """The rows labelled so far. A last line cut off by a crash mid-write is dropped (its item is asked
    again); any other line that is not a JSON object is an error naming the line."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) and not line.endswith("\n"):
                print(f"{path}: line {number} was cut off (a crash while writing); dropping it", file=sys.stderr)
                path.write_text("".join(lines[:-1]), encoding="utf-8")
                break
            raise UsageError(f"{path}: line {number} is not valid JSON; fix or remove it") from None
        if not isinstance(row, dict) or "label" not in row:
            raise UsageError(f"{path}: line {number} is not a labelled item (an object with a 'label')")
        rows.append(row)
    return rows


def append_label(path: Path, row: dict[str, Any]) -> None:
    """One labelled item, written whole and forced to disk before the next item is shown."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def disagreement_signal(pool: EvaluationDataset) -> str | None:
    """The cheap signal the judge is compared with: reference-token recall where every item has a
    reference and a response, else token overlap where every item has a response and contexts."""
    samples = list(pool)
    if all(getattr(s, "reference", None) and getattr(s, "response", None) for s in samples):
        return "reference_token_recall"
    if all(getattr(s, "response", None) and (s.retrieved_contexts or s.reference_contexts) for s in samples):
        return "token_overlap"
    return None


def ranked_queue(args, judge, pool: EvaluationDataset, rows: list[dict[str, Any]], keys: list[str],
                 labelled: set[str]) -> dict[str, Any]:
    """Score the pool, rank it, and save the ranking beside the labels (or reuse the saved one when the
    pool, the judge and the settings are the same). ``rows`` are the pool's items as JSON objects."""
    path = Path(str(args.out) + ".queue.json")
    settings = {"version": QUEUE_VERSION, "judge": args.compiled or args.judge, "keys": keys,
                "diversity": args.diversity, "lm": args.lm or "embedded"}
    if path.exists():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            saved = {}
        if {k: saved.get(k) for k in settings} == settings:
            return saved
    probabilities, reasons = [], []
    live = sys.stderr.isatty()
    for i, sample in enumerate(pool):
        if live or i + 1 == len(pool):
            print(f"\rscoring the pool with {judge.name}: {i + 1}/{len(pool)}", end="", file=sys.stderr, flush=True)
        try:
            result = judge.score(sample)
            probabilities.append(float(result.score))
            reasons.append(judge.explain(result) if hasattr(judge, "explain") else "")
        except PermanentLMError as err:  # the LM refuses every request: ranking on nothing would mislead
            raise CommandFailed(f"the LM refused ({err}); nothing was ranked") from None
        except Exception as err:  # an item the judge fails on is one it knows nothing about: p = 0.5
            probabilities.append(float("nan"))
            reasons.append(f"the judge failed: {type(err).__name__}: {err}"[:300])
    print(file=sys.stderr)
    if all(np.isnan(p) for p in probabilities):
        raise CommandFailed(f"{judge.name} failed on every pool item; first error: {reasons[0]}")
    signal_name = disagreement_signal(pool)
    signal = signal_columns([signal_name], pool, progress=True)[signal_name].tolist() if signal_name else None
    priority = labelling_priority(probabilities, signal)
    vectors = None
    if args.diversity > 0:
        vectors = resolve_embedder(None).embed([json.dumps(row, ensure_ascii=False)[:2000] for row in rows])
    done = [i for i, k in enumerate(keys) if k in labelled]
    order = done + select_for_labelling(priority, len(pool) - len(done), vectors=vectors, exclude=done,
                                        diversity=args.diversity)
    queue = {**settings, "order": order, "score": [None if np.isnan(p) else p for p in probabilities],
             "priority": priority.tolist(), "signal": signal_name, "signal_values": signal, "reasons": reasons}
    path.write_text(json.dumps(queue, ensure_ascii=False), encoding="utf-8")
    return queue


def parse_label(text: str, kind: str, scale: tuple[float, float] | None) -> float | int:
    """The person's answer as a label of ``kind``, or ValueError saying what is expected."""
    answer = text.strip().lower()
    if kind == "binary":
        words = {"1": 1, "y": 1, "yes": 1, "true": 1, "0": 0, "n": 0, "no": 0, "false": 0}
        if answer not in words:
            raise ValueError("type 1 or 0 (y/n)")
        return words[answer]
    try:
        value = float(answer)
    except ValueError:
        raise ValueError(f"type a number{f' from {scale[0]:g} to {scale[1]:g}' if scale else ''}") from None
    if not np.isfinite(value) or (scale and not scale[0] <= value <= scale[1]):
        raise ValueError(f"type a number from {scale[0]:g} to {scale[1]:g}" if scale else "type a finite number")
    if kind == "ordinal":
        if value != int(value):
            raise ValueError("ordinal labels are whole numbers")
        return int(value)
    return value


def show(row: dict[str, Any], whole: bool = False) -> None:
    for field, value in row.items():
        text = "\n".join(map(str, value)) if isinstance(value, list) else str(value)
        if not whole and len(text) > _SHOWN_CHARS:
            text = text[:_SHOWN_CHARS] + f" ... ({len(text) - _SHOWN_CHARS} more characters: m shows all)"
        print(f"  {field}: {text}")


def ask(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None


def mlflow_pool(args) -> tuple[EvaluationDataset, list[str]]:
    """With ``--to-mlflow``: the pool (every row with a ``trace_id``, e.g. from
    ``judges_app.mlflow_labels.export_pool``) and its trace ids, the tracking store checked to answer."""
    if not args.labeller or not args.labeller.strip():
        raise UsageError("--to-mlflow needs --labeller ID: who gives the labels (the feedback's HUMAN source)")
    from judges_app.mlflow_labels import pool_with_trace_ids  # MLflow: with --to-mlflow only
    from judges_app.tracking import check_reachable, default_tracking_uri

    try:
        pool, trace_ids = pool_with_trace_ids(args.pool)
        check_reachable(default_tracking_uri(args.runs_dir))
    except (ValueError, OSError) as err:  # MlflowSourceError is a ValueError
        raise UsageError(f"--to-mlflow: {err}") from None
    return pool, trace_ids


def human_assessment(args, judge) -> str:
    """The name people's labels go by in MLflow: ``--assessment``, else ``human_<judge>``. Never a name a judge
    writes its values under (the judge's own, its compiled, calibrated or aligned column, or any catalogue
    metric's): the person's labels would show in a judge's column of MLflow's UI."""
    from judges_app.mlflow_scorers import judge_feedback_names

    name = args.assessment or f"human_{judge.name}"
    taken = judge_feedback_names(judge)
    if name in taken:
        raise UsageError(f"--assessment {name!r} is a name our judges write their values under ({taken[name]}); "
                         f"people's labels would show in a judge's column: give another name, e.g. human_{name}")
    return name


def log_to_mlflow(args, trace_id: str, row: dict[str, Any]) -> None:
    """The label just saved, logged on its trace as HUMAN feedback ``args.assessment``: a binary label as a
    boolean, the way MLflow's own feedback UI stores a pass/fail (the calibrate side reads both)."""
    from judges_app.mlflow_labels import log_label
    from judges_app.tracking import default_tracking_uri

    value = bool(row["label"]) if args.label_kind == "binary" else row["label"]
    try:
        log_label(trace_id, name=args.assessment, value=value, labeller=args.labeller,
                  rationale=row.get("rationale"), tracking_uri=default_tracking_uri(args.runs_dir))
    except Exception as err:  # logged before it is saved: nothing is saved, a rerun asks for it again
        raise CommandFailed(f"logging the label of trace {trace_id} to MLflow failed ({type(err).__name__}: {err}); "
                            f"it was not saved to {args.out}: rerun to go on") from None


def run(args) -> int:
    if args.label_kind == "binary" and args.label_range:
        raise UsageError("--label-range is for ordinal or continuous labels")
    if args.to_mlflow:
        pool, trace_ids = mlflow_pool(args)
    elif args.labeller or args.assessment:
        raise UsageError("--labeller and --assessment go with --to-mlflow")
    else:
        pool, trace_ids = load_dataset(args.pool, None, args.reference_separator), None
    lm = cli_lm(args)
    judge = build_metric(args.compiled or args.judge, lm=lm, args=args)
    if args.compiled and isinstance(judge, CompiledJudge) and args.judge and judge.judge.name != build_metric(
            args.judge).name:
        raise UsageError(f"--compiled {args.compiled} holds the judge {judge.judge.name}, not {args.judge}")
    try:
        judge.validate_dataset(pool)
    except SampleValidationError as err:
        raise UsageError(f"{args.pool} cannot be scored by {judge.name}: {err}") from None
    if args.to_mlflow:
        args.assessment = human_assessment(args, judge.judge if isinstance(judge, CompiledJudge) else judge)
    out = Path(args.out)
    if out.parent and not out.parent.exists():
        raise UsageError(f"--out {out}: folder {out.parent} does not exist")
    try:  # one labelling session per labels file: two would ask for the same items twice
        session_lock = take_lock(out.with_name(out.name + ".lock"), out, "labels file")
    except ValueError as err:
        raise UsageError(str(err)) from None
    try:
        return _label(args, judge, pool, trace_ids, out)
    finally:
        os.close(session_lock)


def _label(args, judge, pool, trace_ids, out: Path) -> int:
    """The labelling session of ``run``, its labels file locked."""
    rows = EvaluationDataset(list(pool)).to_list()
    keys = [item_key(r) for r in rows]
    labelled = {item_key(r) for r in read_labels(out)}
    have = sum(k in labelled for k in keys)
    if have >= args.budget:
        print(f"{out}: {have} items of this pool are labelled already (--budget {args.budget}); nothing to ask")
        return 0
    queue = ranked_queue(args, judge, pool, rows, keys, labelled)
    todo = [i for i in queue["order"] if keys[i] not in labelled]  # skipped items make room for the next ones
    wanted = args.budget - have
    print(f"{len(pool)} items in the pool, {have} labelled; asking for {wanted} more, the most informative "
          f"first ({'judge uncertainty' + (', disagreement with ' + queue['signal'] if queue['signal'] else '')}"
          f"{', diversity' if args.diversity > 0 else ''}). Answers are saved to {out} as you go.\n")
    scale = tuple(args.label_range) if args.label_range else None
    asked = 0
    for i in todo:
        if asked == wanted:
            break
        score = queue["score"][i]
        signal = f", {queue['signal']} {queue['signal_values'][i]:.2f}" if queue["signal"] else ""
        print(f"--- item {asked + 1}/{wanted} (pool line {i + 1}; judge {'failed' if score is None else f'{score:.2f}'}"
              f"{signal}; priority {queue['priority'][i]:.2f})")
        show(rows[i])
        if queue["reasons"][i]:
            print(f"  judge's reasons: {queue['reasons'][i][:400]}")
        while True:
            answer = ask("label> ")
            if answer is None or answer.strip().lower() == "q":
                print(f"\nstopped; {have + asked} of this pool's items are labelled in {out}. Rerun to go on.")
                return 0
            if answer.strip().lower() == "s":
                break
            if answer.strip().lower() == "m":
                show(rows[i], whole=True)
                continue
            try:
                label = parse_label(answer, args.label_kind, scale)
            except ValueError as err:
                print(f"  {err}; or s to skip, m to see it all, q to stop")
                continue
            rationale = ask("why? (optional, Enter to skip)> ")
            row = {**rows[i], "label": label}
            if rationale and rationale.strip():
                row["rationale"] = rationale.strip()
            if trace_ids is not None:  # MLflow first: a failure there saves nothing, so a rerun asks again
                for j in (j for j, key in enumerate(keys) if key == keys[i]):  # traces of the very same item
                    log_to_mlflow(args, trace_ids[j], row)
            append_label(out, row)
            asked += 1
            break
    print(f"\ndone: {have + asked} of this pool's items are labelled in {out}.\n"
          f"next: dspy-judges calibrate {out} --judge {args.judge or judge.name}"
          f"{' --label-kind ' + args.label_kind if args.label_kind != 'binary' else ''}")
    return 0


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("label", help=summary,
                       description=for_users(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pool", help="unlabelled items: a .jsonl/.csv file of sample fields")
    p.add_argument("--judge", required=True, help="the judge to label for: a metric name (NAME or NAME:{json})")
    p.add_argument("--compiled", default=None, metavar="FILE",
                   help="a compiled judge saved by calibrate: its calibrated scores rank the pool")
    p.add_argument("--budget", type=positive_int, required=True, help="label this many of the pool's items in all")
    p.add_argument("--out", required=True, metavar="LABELS.jsonl", help="appended to; a rerun continues it")
    add_label_scale_options(p)
    p.add_argument("--diversity", type=share, default=0.3,
                   help="weight of being unlike the items ranked before (0 to 1; default 0.3; 0: no embeddings)")
    p.add_argument("--to-mlflow", action="store_true",
                   help="also log each label on its trace as HUMAN feedback (the pool's rows carry a trace_id: "
                        "judges_app.mlflow_labels.export_pool writes such a pool), at MLFLOW_TRACKING_URI or the "
                        "--runs-dir store")
    p.add_argument("--labeller", default=None, metavar="ID", help="with --to-mlflow: who labels (the feedback's source)")
    p.add_argument("--assessment", default=None, metavar="NAME",
                   help="with --to-mlflow: the feedback's name (default: human_<judge>; never a name a judge "
                        "writes under)")
    add_reference_separator_option(p)
    add_common_options(p)
    p.set_defaults(run=run)

