"""Does compiling and calibrating a judge make it agree with people? Measure it on a held-out split.

    compiled, run = compare_on_heldout(lambda: Faithfulness(lm=lm), train, test,
                                       optimizers=[None, "bootstrap"], calibrator="stacked")
    print(run.table())      # one row per scorer, bootstrap 95% CIs

Every scorer is scored on the same ``test`` items, which ``fit`` never sees:

* ``baseline: <signal>``: cheap signals with no LM (token overlap of the response with its evidence,
  reference-token recall, embedding similarity), those the samples have the fields for;
* ``judge as shipped``: the judge with no compiling and no calibration;
* ``compiled (<optimizer>)``: the judge compiled on ``train`` against the human labels;
* ``... + <calibrator> calibration``: that judge's scores mapped to the human scale by a calibrator
  fitted on ``train`` (for ``optimizer=None``, on top of the shipped judge).

Labels are put on a [0, 1] scale (``fit.label_schema``); binary sets get binary agreement statistics,
ordinal and continuous ones correlations and MAE on that scale.

A judge that cannot score the set's samples (a missing field) is refused before any LM call. An item the
judge fails on is None in that scorer's scores and left out of its agreement (never imputed); the counts
are in ``run.meta["failures"]``, the distinct errors in ``run.meta["errors"]``. A judge that fails on
every test item raises ``JudgeFailedError``.

Must not fit on the held-out items it measures on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from calibration.agreement.record import CalibrationRun
from calibration.data.labelled import LabelledSet, without_shipped_training
from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.fit import (
    JudgeFailedError,
    check_optimizer,
    failed_mask,
    fit,
    judge_scores,
    label_schema,
    scaled,
)
from calibration.fitting.signals import FEATURES, SAMPLE_SIGNALS, feature_matrix, signal_columns
from judges.metrics.base import Judge
from judges.run.records import sample_key
from judges.run.usage import tracked_usage

BASELINES = SAMPLE_SIGNALS


def applicable_baselines(data: LabelledSet) -> list[str]:
    """The cheap signals every sample of ``data`` has the fields for."""
    samples = list(data.dataset)
    has_evidence = all((s.retrieved_contexts or s.reference_contexts or s.reference) for s in samples)
    has_reference = all(getattr(s, "reference", None) for s in samples)
    has_response = all(getattr(s, "response", None) for s in samples)
    chosen = []
    if has_response and has_evidence:
        chosen += ["token_overlap", "embedding_similarity", "specifics_supported", "weakest_sentence",
                   "bigram_support", "embedding_alignment", "verifier_weakest"]
    if has_response and has_reference:
        chosen.append("reference_token_recall")
    return [b for b in BASELINES if b in chosen]


def best_threshold(scores: Sequence[float], labels: Sequence[int]) -> tuple[float, float]:
    """The cut-off on ``scores`` with the best balanced accuracy on binary ``labels`` (cut-offs halfway between
    neighbouring values), and that accuracy."""
    s, y = np.asarray(scores, float), np.asarray(labels, int)
    values = np.unique(s)
    cuts = np.concatenate([[values[0] - 1e-9], (values[:-1] + values[1:]) / 2, [values[-1] + 1e-9]])  # midpoints
    best = (0.5, -1.0)
    for cut in cuts:
        decided = s >= cut
        accuracy = np.mean([np.mean(decided[y == c] == bool(c)) for c in (0, 1)])
        if accuracy > best[1]:
            best = (float(cut), float(accuracy))
    return best


def hard_slice(train: LabelledSet, test: LabelledSet, baselines: Sequence[str], *,
               progress: bool = False) -> dict[str, Any] | None:
    """The test items the best cheap baseline gets wrong: the baseline with the best balanced accuracy on
    ``train`` at its own cut-off fitted there, applied to ``test``. A judge that only repeats the baseline
    is right on about none of them. Also every baseline's train cut-off (to score baselines on the slice).
    ``progress`` shows a bar per baseline computed on train."""
    if train.kind != "binary" or not baselines:
        return None
    x_train = feature_matrix(baselines, train.dataset, progress=progress)
    cuts = [best_threshold(x_train[:, j], train.labels) for j in range(len(baselines))]
    best = max(range(len(baselines)), key=lambda j: cuts[j][1])
    name = baselines[best]
    x_test = feature_matrix([name], test.dataset)  # only the best baseline is applied
    return {"baseline": f"baseline: {name.replace('_', ' ')}", "threshold": cuts[best][0],
            "train_balanced_accuracy": cuts[best][1],
            "items": hard_item_positions(x_train[:, [best]], train.labels, x_test, test.labels, [cuts[best]]),
            "thresholds": {f"baseline: {b.replace('_', ' ')}": c for b, (c, _) in zip(baselines, cuts)}}


def hard_item_positions(x_train: np.ndarray, y_train: Sequence[int], x_test: np.ndarray, y_test: Sequence[int],
                        cuts: Sequence[tuple[float, float]] | None = None) -> list[int]:
    """Positions of the test rows the best baseline gets wrong: of the columns (baselines) of ``x_train``,
    the one with the best balanced accuracy on train at its own cut-off fitted there (``cuts``, when
    already fitted), applied to ``x_test``."""
    cuts = cuts or [best_threshold(x_train[:, j], y_train) for j in range(x_train.shape[1])]
    best = max(range(len(cuts)), key=lambda j: cuts[j][1])
    decided = np.asarray(x_test, float)[:, best] >= cuts[best][0]
    return [i for i, (d, y) in enumerate(zip(decided, y_test)) if d != bool(y)]


def check_split(train: LabelledSet, test: LabelledSet, calibrator: str | None) -> None:
    """A train / test split that can be compiled, calibrated and measured: refused before any LM work
    (ValueError) when a part is empty, the kinds differ, test holds one label value (agreement is then
    undefined), or a binary train split holds one class and a calibrator must be fitted on it."""
    if len(train) == 0 or len(test) == 0:
        raise ValueError(f"train has {len(train)} items and test {len(test)}; both need some")
    if train.kind != test.kind:
        raise ValueError(f"train labels are {train.kind} but test labels are {test.kind}")
    if len(set(test.labels)) < 2:
        raise ValueError(f"every test label is {test.labels[0]}: agreement with people is undefined on one label "
                         "value; use a larger or balanced test split")
    if calibrator is not None and len(set(train.labels)) < 2:
        raise ValueError(f"every train label is {train.labels[0]}: a calibrator cannot be fitted on one label value")


def data_warnings(train: LabelledSet, test: LabelledSet) -> list[str]:
    """What in the labelled items undermines a measurement: identical inputs labelled differently (within
    train + test), and items in both train and test."""
    labels: dict[str, set] = {}
    for part in (train, test):
        for sample, label in zip(part.dataset, part.labels):
            labels.setdefault(sample_key(sample), set()).add(label)
    conflicting = [key for key, values in labels.items() if len(values) > 1]
    warnings = []
    if conflicting:
        conflicted = set(conflicting)
        items = sum(1 for part in (train, test) for s in part.dataset if sample_key(s) in conflicted)
        warnings.append(f"{len(conflicting)} distinct input(s) appear with conflicting labels ({items} items): no "
                        "judge can agree with both labels of one input")
    shared = {sample_key(s) for s in train.dataset} & {sample_key(s) for s in test.dataset}
    if shared:
        warnings.append(f"{len(shared)} input(s) are in both train and test: the test part is not held out for "
                        "them, and agreement there is optimistic")
    return warnings


def disagreements(test: LabelledSet, target: np.ndarray, scorer: str, judge: Any, results: Sequence[Any],
                  scores: dict[str, list[float | None]], limit: int = 20) -> dict[str, Any]:
    """The test items where ``scorer`` lands on the other side of 0.5 from the person (on the [0, 1] label
    scale): the item's id in the user's data (``LabelledSet.item_id``: their id column, else its row), the label,
    the score, the judge's own reasons and the person's rationale, side by side."""
    rows = []
    for i, value in enumerate(scores[scorer]):
        if value is None or abs(value - float(target[i])) < 0.5:
            continue
        result = results[i]
        reasons = judge.explain(result) if hasattr(result, "score") and hasattr(judge, "explain") else ""
        rows.append({"item": i, "id": test.item_id(i), "label": test.labels[i], "score": round(float(value), 3),
                     "judge_reasons": reasons,
                     "rationale": test.rationale(i), "response": (test.dataset[i].to_dict().get("response") or "")[:300]})
    return {"scorer": scorer, "count": len(rows), "items": rows[:limit]}


def _record(scores: dict[str, list[float | None]], meta: dict[str, Any], scorer: str, values: np.ndarray,
            results: Sequence[Any]) -> None:
    """A judge scorer's test scores, None where the item failed (left out of agreement, never imputed),
    with the failure count and the distinct errors in ``meta``."""
    failed = failed_mask(results)
    scores[scorer] = [None if f else float(v) for v, f in zip(values, failed)]
    meta["failures"][scorer] = int(failed.sum())
    if failed.any():
        meta["errors"][scorer] = sorted({r["error"] for r, f in zip(results, failed) if f})[:5]


def _optimizer_label(optimizer: Any) -> str:
    return "none" if optimizer is None else optimizer if isinstance(optimizer, str) else type(optimizer).__name__


def compare_on_heldout(
    make_judge: Callable[[], Judge],
    train: LabelledSet,
    test: LabelledSet,
    *,
    optimizers: Sequence[Any] = ("bootstrap",),
    calibrator: str | None = "stacked",
    baselines: Sequence[str] | str = "auto",
    seed: int = 0,
    reflection_lm: Any = None,
    progress: bool = True,
    name: str | None = None,
    n_bootstrap: int = 1000,
    pool: Sequence[LabelledSet] = (),
    beside: Sequence[Judge] = (),
    **optimizer_options: Any,
) -> tuple[dict[str, CompiledJudge], CalibrationRun]:
    """Score ``test`` with the baselines, the shipped judge and, per optimizer, the compiled and the
    calibrated judge. Returns the compiled judges by optimizer name and a ``CalibrationRun`` holding
    every scorer's test scores (agreement computed), the seconds per scorer (``meta["seconds"]``) and the
    LM calls and tokens per model of each LM phase (``meta["usage"]``: the shipped judge on test, each
    fit on train, each compiled judge on test; DSPy-cache hits count as no call). An optimizer that cannot
    compile this judge (e.g. "labeled" for a multi-step judge), or a set too small for it, is refused
    (ValueError) before any scoring. ``pool``: more labelled sets the calibrator is fitted on together with
    train. Items the shipped verifier trained on are left out of train, test and pool, counted in
    ``run.meta["dropped_trained_on"]``.
    ``run.meta["hard_slice"]`` names the test items the best baseline gets wrong (``hard_slice``);
    ``run.meta["range_warnings"]`` the calibrator inputs that fall outside the range seen at fit time.
    ``beside``: other judges scored on the same test items as shipped, one row each (``"beside: <name>"``),
    for comparison (e.g. the LM judge beside the verifier judge)."""
    dropped = {}
    train, dropped["train"] = without_shipped_training(train)
    test, dropped["test"] = without_shipped_training(test)
    pool = [without_shipped_training(extra)[0] for extra in pool]
    check_split(train, test, calibrator)
    schema = label_schema(train)
    target = scaled(test.labels, schema)
    shipped = make_judge()
    shipped.validate_dataset(list(train.dataset) + list(test.dataset))  # before any LM call
    for other in beside:
        other.validate_dataset(list(test.dataset))
    for optimizer in optimizers:
        check_optimizer(shipped, optimizer, train, calibrator=calibrator, seed=seed, **optimizer_options)
    kind = "binary" if schema["kind"] == "binary" else "continuous"
    chosen = applicable_baselines(test) if baselines == "auto" else list(baselines)
    unknown = [b for b in chosen if b not in FEATURES]
    if unknown:
        raise ValueError(f"compare_on_heldout: unknown baselines {unknown}; choose from {list(BASELINES)}")

    scores: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    meta: dict[str, Any] = {"train_size": len(train), "test_size": len(test), "seed": seed, "calibrator": calibrator,
                            "label_schema": schema, "optimizers": [_optimizer_label(o) for o in optimizers],
                            "skipped": {}, "calibrator_notes": {}, "demos": {}, "failures": {}, "errors": {},
                            "calibrator_inputs": {}, "range_warnings": {},
                            "dropped_trained_on": {k: v for k, v in dropped.items() if v},
                            "data_warnings": data_warnings(train, test)}
    for feature in chosen:
        start = time.perf_counter()
        column = signal_columns([feature], test.dataset, progress=progress)[feature]
        scores[f"baseline: {feature.replace('_', ' ')}"] = column.tolist()
        seconds[f"baseline: {feature.replace('_', ' ')}"] = time.perf_counter() - start

    slice_ = hard_slice(train, test, chosen, progress=progress)
    if slice_ is not None:
        meta["hard_slice"] = slice_
    meta["judge"] = shipped.name
    usage: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    with tracked_usage() as usage["judge as shipped"]:
        raw, results = judge_scores(shipped, test, progress=progress, desc="judge as shipped")
    seconds["judge as shipped"] = time.perf_counter() - start
    _record(scores, meta, "judge as shipped", raw, results)
    final = ("judge as shipped", shipped, results)
    if failed_mask(results).all():
        raise JudgeFailedError(f"the judge as shipped failed on all {len(test)} test items; first error: "
                               f"{results[0]['error']}")

    for other in beside:
        key = f"beside: {other.name}"
        start = time.perf_counter()
        with tracked_usage() as usage[key]:
            values, other_results = judge_scores(other, test, progress=progress, desc=key)
        seconds[key] = time.perf_counter() - start
        _record(scores, meta, key, values, other_results)

    compiled_by_optimizer: dict[str, CompiledJudge] = {}
    for optimizer in optimizers:
        label = _optimizer_label(optimizer)
        start = time.perf_counter()
        try:
            with tracked_usage() as usage[f"fit ({label})"]:
                compiled = fit(make_judge(), train, optimizer=optimizer, calibrator=calibrator, seed=seed,
                               reflection_lm=reflection_lm, progress=progress,
                               calibration_set=[train, *pool] if pool else None, **optimizer_options)
        except ValueError as err:
            usage.pop(f"fit ({label})")
            if optimizer is None or "optimizer=" not in str(err):
                raise
            meta["skipped"][label] = str(err)
            continue
        meta[f"fit_seconds.{label}"] = time.perf_counter() - start
        compiled.report["test_size"] = len(test)
        compiled_by_optimizer[label] = compiled
        meta["demos"][label] = compiled.report.get("demos", {})
        if compiled.report.get("memory"):
            meta.setdefault("memory", {})[label] = compiled.report["memory"]
        if compiled.report.get("guard"):
            meta.setdefault("guard", {})[label] = compiled.report["guard"]["decision"]
        if compiled.report.get("finetune"):
            meta.setdefault("finetune", {})[label] = compiled.report["finetune"]
        if optimizer is None:
            test_raw, test_results = raw, results
        else:
            start = time.perf_counter()
            with tracked_usage() as usage[f"compiled ({label})"]:
                test_raw, test_results = judge_scores(compiled.uncalibrated(), test, progress=progress,
                                                      desc=f"compiled ({label})")
            seconds[f"compiled ({label})"] = time.perf_counter() - start
            _record(scores, meta, f"compiled ({label})", test_raw, test_results)
            final = (f"compiled ({label})", compiled.judge, test_results)
        fitted = compiled.report.get("calibrator", {})
        if fitted.get("failed"):
            meta["failures"][f"fit ({label}), calibration set"] = fitted["failed"]
            meta["errors"][f"fit ({label}), calibration set"] = fitted["errors"]
        if calibrator is not None:
            ok = ~failed_mask(test_results)
            extra = feature_matrix(compiled.calibrator.features, [s for s, k in zip(test.dataset, ok) if k],
                                   [r for r, k in zip(test_results, ok) if k])
            base = "judge as shipped" if optimizer is None else f"compiled ({label})"
            key = f"{base} + {compiled.calibrator.kind} calibration"
            calibrated = np.full(len(test), np.nan)
            if ok.any():
                calibrated[ok] = compiled.calibrator.predict(test_raw[ok], extra)
                outside = compiled.calibrator.out_of_range(test_raw[ok], extra)
                if outside:
                    meta["range_warnings"][key] = outside
            _record(scores, meta, key, calibrated, test_results)
            final = (key, compiled.judge, test_results)
            meta["calibrator_notes"][key] = compiled.calibrator.note
            meta["calibrator_inputs"][key] = {"kind": compiled.calibrator.kind, "judge_score": compiled.calibrator.use_raw,
                                              "signals": list(compiled.calibrator.features)}
    meta["seconds"], meta["usage"] = seconds, usage
    meta["disagreements"] = disagreements(test, target, *final, scores)
    run = CalibrationRun(name=name or f"{test.name}: {shipped.name}", labels=target.tolist(), scores=scores,
                         label_kind=kind, meta=meta)
    run.compute_agreement(n_bootstrap=n_bootstrap, seed=seed, progress=progress)
    for compiled in compiled_by_optimizer.values():
        compiled.report["heldout"] = {k: r.to_dict() for k, r in run.agreement.items()}
    return compiled_by_optimizer, run
