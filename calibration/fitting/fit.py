"""Compile a judge against human labels, calibrate its scores, save it as JSON, load it back.

    compiled = fit(Faithfulness(lm=lm), train, optimizer="bootstrap", calibrator="stacked", devset=dev)
    compiled.score(sample).score       # calibrated; .raw_score is the judge's own
    compiled.save("faithfulness.json"); CompiledJudge.load("faithfulness.json", lm=lm)
    metric = compiled.as_metric()      # a DSPy metric, exactly like an uncompiled judge

How the steps are supervised. Human labels exist for the final score only, never for a judge's steps
(the claims, the per-claim verdicts). Every optimizer therefore runs the whole judge and is scored by one
agreement metric on its final score: ``1 - |score - label|`` (labels scaled to [0, 1]) when evaluating,
and "the verdict lands on the human's side of 0.5" while bootstrapping. A bootstrapped demo for
``extract_claims`` or ``verify`` is kept only when the whole judge agreed with the human on that example,
so the labels supervise each step through the final score. GEPA gets the same metric with text feedback:
the human label, the judge's score and the judge's own reasons (unsupported claims and so on).

Optimizers: ``"labeled"`` (LabeledFewShot: demos of the verdict step whose output is the human's own
verdict or rating; for judges where one step's output is the label: AspectCritic, the rating judges, the
dual judges), ``"bootstrap"`` (BootstrapFewShot), ``"random_search"`` (BootstrapFewShotWithRandomSearch),
``"mipro"`` (MIPROv2), ``"simba"`` (SIMBA, batch size set to fit small sets), ``"gepa"`` (GEPA, needs a
``reflection_lm``), ``"memory"`` (``calibration.fitting.memory``), ``"finetune"`` (a
``FaithfulnessWithVerifier``'s verifier trained on the labels: ``calibration.fitting.finetune``), ``None``
(no compiling), or any DSPy optimizer instance. Multi-step judges such as
Faithfulness have no step whose output is the label, so "labeled" refuses them with a clear error.

Which optimizers fit which judge (``fitting_optimizers``, checked before any work): ``None`` fits every
judge; the DSPy optimizers and ``"memory"`` need a judge with LM steps; ``"labeled"`` a judge whose one
step outputs the label; ``"finetune"`` a ``FaithfulnessWithVerifier``.

Calibrators are fitted on scores of items the compiled judge did not learn from. A compiled program has
seen its training items (as demos, as memory, as fine-tuning pairs), so its scores there are better than
anywhere else, and a calibrator fitted on them over-trusts it. ``crossfit=k`` (default 3) compiles the
judge again on each of k folds of the training set without the fold and scores the fold with it; the
calibrator is fitted on these out-of-fold scores and then applied to the judge compiled on everything.
Items the shipped verifier trained on are dropped from every set first (``without_shipped_training``).

Calibrators (scikit-learn), fitted on the judge's scores on ``calibration_set`` (default: the training
set): ``"isotonic"``, ``"platt"`` (logistic on the raw score), ``"stacked"`` (logistic or linear on inputs
chosen by forward selection under 5-fold cross-validation among the judge's raw score and cheap signals:
token overlap, reference-token recall, embedding similarity, the grounding signals, the shipped
verifier's weakest-sentence probability, the judge's intermediate counts; Platt
scaling when no signal helps; the judge's score itself is dropped when it adds nothing), or ``None``.

Must not read data files (``calibration.data``) or write reports (``calibration.agreement``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import dspy
import numpy as np
from tqdm.auto import tqdm

from calibration.agreement.stats import compare
from calibration.data.labelled import (
    LabelledSet,
    k_fold_indices,
    without_shipped_training,
)
from calibration.fitting.calibrators import SELECTION_RULES, Calibrator
from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.finetune import FINETUNE_OPTIONS, finetune_verifier
from calibration.fitting.judgments import open_records
from calibration.fitting.memory import align_with_memory
from calibration.fitting.optimizers import (
    LM_OPTIMIZERS,
    OPTIMIZERS,
    agreement_metric,
    check_optimizer,
    compile_judge,
    fitting_optimizers,
    held_back,
    judge_examples,
    label_schema,
    make_optimizer,
    scaled,
)
from calibration.fitting.signals import FEATURES, feature_matrix
from judges.data.dataset import EvaluationDataset
from judges.lm.resolve import lm_name, resolve_lm
from judges.lm.served import PermanentLMError
from judges.metrics.base import Judge, Metric
from judges.run.records import sample_key
from judges.run.usage import tracked_usage

__all__ = [
    "FEATURES",
    "LM_OPTIMIZERS",
    "OPTIMIZERS",
    "Calibrator",
    "CompiledJudge",
    "JudgeFailedError",
    "TrainedOnItemsWarning",
    "agreement_metric",
    "check_optimizer",
    "failed_mask",
    "feature_matrix",
    "fit",
    "fitting_optimizers",
    "held_back",
    "judge_examples",
    "judge_scores",
    "label_schema",
    "make_optimizer",
    "scaled",
]


class JudgeFailedError(RuntimeError):
    """The judge failed on every item it was asked to score: there is nothing to fit or measure."""


class TrainedOnItemsWarning(UserWarning):
    """Items the shipped verifier trained on were left out of fitting or measuring."""


# ------------------------------------------------------------------------------------------------
# fit()
# ------------------------------------------------------------------------------------------------
def judge_scores(judge: Metric, data: LabelledSet, *, progress: bool = False,
                 desc: str | None = None) -> tuple[np.ndarray, list[Any]]:
    """The judge's raw scores on every item and the Predictions behind them; ``progress`` shows a progress
    bar. A failed item is NaN in the scores and ``{"error": "<type>: <message>"}`` in the results: callers
    leave it out of fitting and agreement (``failed_mask``), never impute a score for it."""
    scores, results = [], []
    records = open_records()
    items = data.dataset
    if progress:
        items = tqdm(items, desc=desc or judge.name, unit="item")
    for sample in items:
        try:
            if records is None:
                result = judge.score(sample)
            elif (result := records.get(judge, sample)) is None:
                with tracked_usage() as usage:
                    result = judge.score(sample)
                records.put(judge, sample, result, usage)
            scores.append(float(result.score))
            results.append(result)
        except PermanentLMError:  # the LM refuses every request (auth, bad request): no point going on
            raise
        except Exception as err:  # a weak LM may still fail on an item; the set goes on
            scores.append(float("nan"))
            results.append({"error": f"{type(err).__name__}: {err}"})
    return np.asarray(scores, dtype=float), results


#: fit(optimizer="memory", ...) options: see calibration.memory.align_with_memory.
MEMORY_OPTIONS = ("episodic", "semantic", "k", "max_guidelines", "max_guideline_chars", "embeddings")


def _guarded(shipped: Judge, compiled: Judge, check: LabelledSet, schema: dict[str, Any],
             keep: str) -> tuple[Judge, dict[str, Any]]:
    """The program to keep after scoring both on the held-back ``check`` items, and the record of why."""
    target = scaled(check.labels, schema)
    old, _ = judge_scores(shipped, check, desc="guard: shipped")
    new, _ = judge_scores(compiled, check, desc="guard: compiled")
    both = np.isfinite(old) & np.isfinite(new)
    if not both.any():
        return compiled, {"items": len(check), "decision": "compiled kept: neither program scored a check item"}
    agreement_old = float(np.mean(1 - np.abs(old[both] - target[both])))
    agreement_new = float(np.mean(1 - np.abs(new[both] - target[both])))
    constant = bool(np.ptp(new[both]) <= 1e-6 < np.ptp(old[both]))
    kind = "binary" if schema["kind"] == "binary" else "continuous"
    paired = compare(target[both].tolist(), new[both].tolist(), old[both].tolist(), kind=kind, n_bootstrap=500)
    worse = agreement_new < agreement_old - 1e-9 or constant
    record = {"items": int(both.sum()), "shipped_agreement": agreement_old, "compiled_agreement": agreement_new,
              "compiled_constant": constant, "paired": paired.to_dict()}
    if keep == "better" and worse:
        record["decision"] = ("shipped kept: the compiled program " + ("scored every check item the same"
                              if constant else f"agreed less ({agreement_new:.3f} vs {agreement_old:.3f})")
                              + f" on {int(both.sum())} held-back train items")
        return shipped, record
    record["decision"] = (f"compiled kept: agreement {agreement_new:.3f} vs {agreement_old:.3f} shipped on "
                          f"{int(both.sum())} held-back train items" + (" (keep='compiled')" if worse else ""))
    return compiled, record


def _copy(judge: Judge) -> Judge:
    """A copy of ``judge`` to compile again (DSPy's deepcopy keeps what cannot be copied, e.g. an LM, shared)."""
    return judge.deepcopy() if isinstance(judge, dspy.Module) else judge


def out_of_fold_scores(judge: Judge, trainset: LabelledSet, optimizer: Any, *, folds: int, seed: int,
                       progress: bool = False, **fit_options: Any) -> tuple[np.ndarray, list[Any], dict[str, Any]]:
    """Each training item's score by the judge compiled (same optimizer, no guard, no calibrator) on the other
    folds: scores of items the program did not learn from, for the calibrator. Returns the scores, the
    results and a report (the folds and their sizes)."""
    raw = np.full(len(trainset), np.nan)
    results: list[Any] = [None] * len(trainset)
    sizes = []
    for k, (rest, held) in enumerate(k_fold_indices(trainset, k=folds, seed=seed)):
        options = dict(fit_options)
        if options.get("out") is not None:  # a fine-tuned fold model never overwrites the final one
            options["out"] = f"{options['out']}-fold{k + 1}"
        program = fit(_copy(judge), trainset.subset(rest), optimizer=optimizer, calibrator=None, guard=0,
                      seed=seed + k + 1, **options)
        values, fold_results = judge_scores(program, trainset.subset(held), progress=progress,
                                            desc=f"cross-fitting: fold {k + 1} of {folds}")
        raw[held] = values
        for i, result in zip(held, fold_results):
            results[i] = result
        sizes.append(len(held))
    return raw, results, {"folds": folds, "fold_sizes": sizes}


def pooled(sets: LabelledSet | Sequence[LabelledSet]) -> LabelledSet:
    """One labelled set from several (of one label kind), e.g. to fit a calibrator on BEGIN and another
    dialogue set together; labels keep each set's own scale (``label_range``), mapped to [0, 1] first."""
    if isinstance(sets, LabelledSet):
        return sets
    sets = list(sets)
    if not sets:
        raise ValueError("pooled: give at least one labelled set")
    kinds = {s.kind for s in sets}
    if len(kinds) != 1:
        raise ValueError(f"pooled: the sets' label kinds differ ({sorted(kinds)}); pool sets of one kind")
    if len(sets) == 1:
        return sets[0]
    samples = [sample for s in sets for sample in s.dataset]
    labels = [float(v) for s in sets for v in scaled(s.labels, label_schema(s))]
    kind = sets[0].kind
    return LabelledSet(" + ".join(s.name for s in sets), EvaluationDataset(samples),
                       [int(v) for v in labels] if kind == "binary" else labels,
                       kind if kind == "binary" else "continuous", label_range=(0.0, 1.0))


def failed_mask(results: Sequence[Any]) -> np.ndarray:
    """True where ``judge_scores`` recorded a failure instead of a result."""
    return np.array([isinstance(r, dict) and "error" in r for r in results], dtype=bool)


#: The report key holding the sample keys (``judges.run.records.sample_key``) a compiled judge was fitted on.
FITTED_ON = "fitted_on_items"


def fitted_on_keys(*sets: LabelledSet | None) -> list[str]:
    """The sample keys of every item in ``sets`` (compiled on, checked on, calibrated on), sorted, once each."""
    return sorted({sample_key(sample) for data in sets if data is not None for sample in data.dataset})


def fit(
    judge: Judge,
    trainset: LabelledSet,
    *,
    optimizer: Any = "bootstrap",
    calibrator: str | None = "isotonic",
    features: Sequence[str] = ("token_overlap", "reference_token_recall", "embedding_similarity",
                               "specifics_supported", "weakest_sentence", "bigram_support", "embedding_alignment",
                               "verifier_weakest", "claim_count", "unsupported_count", "claims_missing_specifics"),
    monotone: bool = True,
    selection: str = "judge_first",
    guard: float = 0.25,
    keep: str = "better",
    crossfit: int = 3,
    devset: LabelledSet | None = None,
    calibration_set: LabelledSet | Sequence[LabelledSet] | None = None,
    reflection_lm: Any = None,
    seed: int = 0,
    progress: bool = False,
    **optimizer_options: Any,
) -> CompiledJudge:
    """Compile ``judge`` against ``trainset``'s human labels, then fit a score calibrator. See the module
    docstring for how steps are supervised, which optimizers fit which judge and which calibrators exist.
    ``monotone`` and ``selection`` (``"one_se"``, ``"any_gain"`` or ``"judge_first"``) are the stacked calibrator's
    (``calibration.calibrators``).

    Compiling never makes a judge worse in silence: with ``guard`` > 0 a stratified share of the train set
    (``guard``, at least 4 items; sets under 8 items are not split) is held back from compiling; the shipped
    and the compiled program both score it, and with ``keep="better"`` the compiled one is kept only if its
    agreement (mean 1 - |score - label|) is at least the shipped one's and its scores are not constant where
    the shipped judge's vary. ``report["guard"]`` holds both agreements, the paired comparison and the
    decision (``keep="compiled"`` always keeps the compiled program, reporting the same).

    The calibrator never sees the compiled program's scores of items it learned from: with ``crossfit`` >= 2
    the training items are scored out of fold (``out_of_fold_scores``); ``crossfit=0`` fits on the compiled
    program's own training items, which ``report["calibrator"]["scores"]`` then says. Items of
    ``calibration_set`` outside the training set are scored by the compiled program itself."""
    if keep not in ("better", "compiled"):
        raise ValueError(f"fit: keep={keep!r} is not one of 'better', 'compiled'")
    if selection not in SELECTION_RULES:
        raise ValueError(f"fit: selection={selection!r} is not one of {', '.join(map(repr, SELECTION_RULES))}")
    if not isinstance(crossfit, int) or isinstance(crossfit, bool) or crossfit < 0 or crossfit == 1:
        raise ValueError(f"fit: crossfit={crossfit!r} must be 0 (off) or a number of folds >= 2")
    dropped = {}
    trainset, dropped["train"] = without_shipped_training(trainset)
    if devset is not None:
        devset, dropped["dev"] = without_shipped_training(devset)
    if calibration_set is not None:
        calibration_set, dropped["calibration"] = without_shipped_training(pooled(calibration_set))
    if any(dropped.values()):
        warnings.warn(f"fit: left out {', '.join(f'{n} {where}' for where, n in dropped.items() if n)} items the "
                      f"shipped verifier trained on", TrainedOnItemsWarning, stacklevel=2)
    check_optimizer(judge, optimizer, trainset, guard=guard, crossfit=crossfit, calibrator=calibrator, seed=seed,
                    **optimizer_options)
    schema = label_schema(trainset)
    report: dict[str, Any] = {"optimizer": optimizer if isinstance(optimizer, (str, type(None))) else type(optimizer).__name__,
                              "train_size": len(trainset), "seed": seed,
                              "dropped_trained_on": {k: v for k, v in dropped.items() if v},
                              # the items it learnt from, by their keys: agreement leaves them out of a measurement
                              FITTED_ON: fitted_on_keys(trainset, devset, calibration_set)}
    if getattr(judge, "needs_lm", False):
        report["lm"] = lm_name(resolve_lm(judge.judge_lm))
    compile_on, check_set = trainset, None
    if optimizer is not None and guard > 0:
        held = held_back(trainset, guard, seed)
        if held:
            check_set = trainset.subset(held)
            compile_on = trainset.subset([i for i in range(len(trainset)) if i not in set(held)])
    memory = None
    if optimizer == "memory":
        compiled, memory, report["memory"] = align_with_memory(
            judge, compile_on, scaled(compile_on.labels, schema).tolist(), kind=schema["kind"],
            **{"k": optimizer_options.get("max_demos", 3),
               **{k: v for k, v in optimizer_options.items() if k in MEMORY_OPTIONS}})
    elif optimizer == "finetune":  # the verifier of a FaithfulnessWithVerifier, trained on these labels
        compiled, report["finetune"] = finetune_verifier(
            judge, compile_on, scaled(compile_on.labels, schema), seed=seed,
            **{k: v for k, v in optimizer_options.items() if k in FINETUNE_OPTIONS})
    else:
        compiled = compile_judge(judge, compile_on, schema, optimizer, devset=devset, reflection_lm=reflection_lm,
                                 seed=seed, **optimizer_options)
    if check_set is not None and compiled is judge and optimizer == "finetune":
        # fine-tuning kept the shipped verifier: nothing was compiled, so there is nothing to check
        report["guard"] = {"items": 0, "decision": report["finetune"]["decision"]}
    elif check_set is not None:
        kept, report["guard"] = _guarded(judge, CompiledJudge(compiled, schema=schema, memory=memory), check_set,
                                         schema, keep)
        if kept is judge:
            compiled, memory = judge, None
            if optimizer == "finetune":
                report["finetune"]["kept"] = "shipped"
                report["finetune"]["decision"] = ("the shipped verifier was kept: fine-tuning beat it on its own "
                                                  "held-out items, but the guard found " + report["guard"]["decision"])
    if optimizer is not None:
        report["demos"] = {name: len(p.demos) for name, p in compiled.named_predictors()}
    if memory is not None:
        report["memory"]["episodes_kept"] = len(memory.episodes)
    result = CompiledJudge(compiled, Calibrator(None, binary=schema["kind"] == "binary"), schema, report, memory)
    if calibrator is not None:
        fit_on = calibration_set if calibration_set is not None else trainset
        learned = optimizer is not None and compiled is not judge  # the guard may have kept the shipped judge
        train_keys = {sample_key(s): i for i, s in enumerate(trainset.dataset)} if learned else {}
        inside = [train_keys.get(sample_key(s)) for s in fit_on.dataset]
        outside = [i for i, at in enumerate(inside) if at is None]
        raw = np.full(len(fit_on), np.nan)
        results: list[Any] = [None] * len(fit_on)
        if learned and crossfit and len(outside) < len(fit_on):
            oof_raw, oof_results, report["crossfit"] = out_of_fold_scores(
                judge, trainset, optimizer, folds=crossfit, seed=seed, progress=progress, reflection_lm=reflection_lm,
                **optimizer_options)
            for i, at in enumerate(inside):
                if at is not None:
                    raw[i], results[i] = oof_raw[at], oof_results[at]
        else:
            outside = list(range(len(fit_on)))
        if outside:
            values, own = judge_scores(result, fit_on.subset(outside), progress=progress,
                                       desc="scoring the calibration set")
            raw[outside] = values
            for i, r in zip(outside, own):
                results[i] = r
        failed = failed_mask(results)
        if failed.all():
            raise JudgeFailedError(f"fit: the judge failed on all {len(fit_on)} items of the calibration set; "
                                   f"first error: {results[0]['error']}")
        kept = fit_on.subset(np.flatnonzero(~failed).tolist())
        chosen = list(features) if calibrator == "stacked" else []
        cal = Calibrator(calibrator, binary=schema["kind"] == "binary", features=chosen, monotone=monotone,
                         selection=selection)
        extra = feature_matrix(chosen, kept.dataset, [r for r, f in zip(results, failed) if not f], progress=progress)
        cal.fit(raw[~failed], scaled(kept.labels, schema), extra)
        result.calibrator = cal
        result.needs_embeddings = result.needs_embeddings or "embedding_similarity" in cal.features
        scores = ("out-of-fold scores of the training items" if "crossfit" in report else
                  "the judge's scores (nothing was learned from the items)" if not learned else
                  "the compiled program's scores of items it learned from" if any(a is not None for a in inside) else
                  "the compiled program's scores of items it did not learn from")
        report["calibrator"] = {"kind": calibrator, "fitted_on": len(kept), "fitted_on_sets": fit_on.name,
                                "scores": scores, "failed": int(failed.sum()),
                                "errors": sorted({r["error"] for r, f in zip(results, failed) if f})[:5],
                                "note": cal.note}
    return result
