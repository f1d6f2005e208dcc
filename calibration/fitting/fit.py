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

Calibrators (scikit-learn), fitted on the judge's scores on ``calibration_set`` (default: the training
set): ``"isotonic"``, ``"platt"`` (logistic on the raw score), ``"stacked"`` (logistic or linear on inputs
chosen by forward selection under 5-fold cross-validation among the judge's raw score and cheap signals:
token overlap, reference-token recall, embedding similarity, the grounding signals, the shipped
verifier's weakest-sentence probability, the judge's intermediate counts; Platt
scaling when no signal helps; the judge's score itself is dropped when it adds nothing), or ``None``.

Must not read data files (``calibration.data``) or write reports (``calibration.agreement``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import dspy
import numpy as np
from tqdm.auto import tqdm

from calibration.agreement.stats import compare
from calibration.data.labelled import LabelledSet
from calibration.fitting.calibrators import SELECTION_RULES, Calibrator
from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.finetune import FINETUNE_OPTIONS, finetune_verifier
from calibration.fitting.memory import align_with_memory
from calibration.fitting.signals import FEATURES, feature_matrix
from judges.data.dataset import EvaluationDataset
from judges.lm.resolve import judge_context, resolve_lm
from judges.lm.served import PermanentLMError
from judges.metrics.base import Judge, Metric

__all__ = ["Calibrator", "CompiledJudge", "FEATURES", "agreement_metric", "feature_matrix", "fit", "judge_examples",
           "judge_scores", "failed_mask", "label_schema", "make_optimizer", "scaled", "JudgeFailedError"]


class JudgeFailedError(RuntimeError):
    """The judge failed on every item it was asked to score: there is nothing to fit or measure."""


# ------------------------------------------------------------------------------------------------
# Labels <-> [0, 1]
# ------------------------------------------------------------------------------------------------
def label_schema(data: LabelledSet) -> dict[str, Any]:
    """The label scale (``data.label_range``: declared, or from the whole set's labels) that scores map to."""
    low, high = data.label_range
    if high <= low:
        raise ValueError(f"{data.name}: every label is {low}; nothing to calibrate against")
    return {"kind": data.kind, "low": low, "high": high}


def scaled(labels: Sequence[float], schema: dict[str, Any]) -> np.ndarray:
    return (np.asarray(labels, float) - schema["low"]) / (schema["high"] - schema["low"])


# ------------------------------------------------------------------------------------------------
# The agreement metric optimizers compile against
# ------------------------------------------------------------------------------------------------
def agreement_metric(judge: Judge, schema: dict[str, Any], *, feedback: bool = False) -> Callable[..., Any]:
    """A DSPy metric comparing the judge's final score with the example's human ``label``."""

    def metric(example, pred, trace=None, pred_name=None, pred_trace=None):
        target = float(scaled([example.label], schema)[0])
        score = float(pred.score)
        agreement_value = 1.0 - abs(score - target)
        if feedback:
            text = (f"The human label is {example.label} ({target:.2f} on a 0-1 scale); the judge scored "
                    f"{score:.2f}. " + (judge.explain(pred) if hasattr(judge, "explain") else ""))
            return dspy.Prediction(score=agreement_value, feedback=text)
        if trace is None:
            return agreement_value
        return (score >= 0.5) == (target >= 0.5)

    return metric


def judge_examples(judge: Judge, data: LabelledSet) -> list[dspy.Example]:
    """``dspy.Example``s holding the judge's forward inputs (marked as inputs) and the human ``label``."""
    params = [p for p in inspect.signature(type(judge).forward).parameters if p != "self"]
    examples = []
    for sample, label in zip(data.dataset, data.labels):
        fields = {p: getattr(sample, p) for p in params if getattr(sample, p, None) is not None}
        examples.append(dspy.Example(**fields, label=label).with_inputs(*fields))
    return examples


def _labeled_few_shot(judge: Judge, trainset: LabelledSet, schema: dict[str, Any], *, k: int, seed: int) -> Judge:
    """LabeledFewShot with demos made from the human labels: each training item becomes a demo of the
    judge's verdict step whose output is the human's verdict or rating (``Judge.label_demo``)."""
    demos = []
    for example in judge_examples(judge, trainset):
        demo = judge.label_demo(dict(example.inputs()), float(scaled([example.label], schema)[0]))
        if demo is None:
            steps = [name for name, _ in judge.named_predictors()]
            raise ValueError(f"fit(optimizer='labeled'): {judge.name}'s label is not the output of one step "
                             f"(its steps are {steps}); use optimizer='bootstrap', which supervises every step "
                             f"through the final score")
        demos.append(dspy.Example(**demo))
    return dspy.LabeledFewShot(k=k).compile(judge, trainset=demos, sample=True)


def make_optimizer(name: str, metric, *, n_train: int, lm=None, reflection_lm=None, seed: int = 0, **options):
    """A DSPy optimizer by name, sized for small labelled sets; ``lm`` is the judge's LM (MIPROv2 proposes
    instructions with ``prompt_model``, default that same LM)."""
    if name == "bootstrap":
        return dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=options.get("max_demos", 3),
                                     max_labeled_demos=0, max_rounds=options.get("max_rounds", 1))
    if name == "random_search":
        return dspy.BootstrapFewShotWithRandomSearch(
            metric=metric, max_bootstrapped_demos=options.get("max_demos", 3), max_labeled_demos=0,
            num_candidate_programs=options.get("num_candidates", 4), num_threads=options.get("num_threads", 1))
    if name == "mipro":
        # auto="light" by default; a budget of your own: num_candidates=..., plus num_trials=... for compile.
        sized = "num_candidates" in options
        return dspy.MIPROv2(metric=metric, auto=None if sized else options.get("auto", "light"),
                            num_candidates=options.get("num_candidates"), seed=seed, task_model=lm,
                            prompt_model=options.get("prompt_model", lm),
                            max_bootstrapped_demos=options.get("max_demos", 3), max_labeled_demos=0,
                            num_threads=options.get("num_threads", 1), verbose=False)
    if name == "simba":
        # SIMBA asserts len(trainset) >= bsize: fit the batch to small sets.
        return dspy.SIMBA(metric=metric, bsize=max(2, min(options.get("bsize", 8), n_train)),
                          max_steps=options.get("max_steps", 4), num_candidates=options.get("num_candidates", 4),
                          max_demos=options.get("max_demos", 3), num_threads=options.get("num_threads", 1))
    if name == "gepa":
        if reflection_lm is None:
            raise ValueError("fit(optimizer='gepa') needs reflection_lm=... (the LM that proposes new instructions)")
        return dspy.GEPA(metric=metric, reflection_lm=reflection_lm,
                         max_metric_calls=options.get("max_metric_calls", 4 * n_train),
                         num_threads=options.get("num_threads", 1), seed=seed)
    raise ValueError(f"fit: optimizer={name!r} is not one of None, 'labeled', 'bootstrap', 'random_search', "
                     f"'mipro', 'simba', 'gepa' or a DSPy optimizer instance")


# ------------------------------------------------------------------------------------------------
# fit()
# ------------------------------------------------------------------------------------------------
def judge_scores(judge: Metric, data: LabelledSet, *, progress: bool = False,
                 desc: str | None = None) -> tuple[np.ndarray, list[Any]]:
    """The judge's raw scores on every item and the Predictions behind them; ``progress`` shows a progress
    bar. A failed item is NaN in the scores and ``{"error": "<type>: <message>"}`` in the results: callers
    leave it out of fitting and agreement (``failed_mask``), never impute a score for it."""
    scores, results = [], []
    items = data.dataset
    if progress:
        items = tqdm(items, desc=desc or judge.name, unit="item")
    for sample in items:
        try:
            result = judge.score(sample)
            scores.append(float(result.score))
            results.append(result)
        except PermanentLMError:  # the LM refuses every request (auth, bad request): no point going on
            raise
        except Exception as err:  # a weak LM may still fail on an item; the set goes on
            scores.append(float("nan"))
            results.append({"error": f"{type(err).__name__}: {err}"})
    return np.asarray(scores, dtype=float), results


def held_back(data: LabelledSet, share: float, seed: int) -> list[int] | None:
    """Indices of a stratified ``share`` of ``data`` (at least 4 items, at least one of each binary label)
    to check a compiled program on; None when the set is too small to spare them (under 8 items)."""
    n = len(data)
    size = max(4, int(round(share * n)))
    if n < 8 or n - size < 4:
        return None
    rng = np.random.default_rng(seed + 7919)
    if data.kind == "binary":
        by_label = {v: [i for i in range(n) if data.labels[i] == v] for v in (0, 1)}
        if min(len(v) for v in by_label.values()) < 2:
            return None
        take = {v: max(1, int(round(size * len(ids) / n))) for v, ids in by_label.items()}
        return sorted(i for v, ids in by_label.items() for i in rng.choice(ids, size=min(take[v], len(ids) - 1),
                                                                          replace=False).tolist())
    return sorted(rng.choice(n, size=size, replace=False).tolist())


#: fit(optimizer="memory", ...) options: see calibration.memory.align_with_memory.
MEMORY_OPTIONS = ("episodic", "semantic", "k", "max_guidelines", "max_guideline_chars", "embeddings")


def _compiled(judge: Judge, trainset: LabelledSet, schema: dict[str, Any], optimizer: Any, *, devset, reflection_lm,
              seed: int, **optimizer_options: Any) -> Judge:
    """The judge compiled on ``trainset`` by ``optimizer`` (the judge itself for None)."""
    if optimizer is None:
        return judge
    if optimizer == "labeled":
        return _labeled_few_shot(judge, trainset, schema, k=optimizer_options.get("max_demos", 3), seed=seed)
    wants_feedback = optimizer == "gepa" or type(optimizer).__name__ == "GEPA"
    metric = agreement_metric(judge, schema, feedback=wants_feedback)
    teleprompter = (make_optimizer(optimizer, metric, n_train=len(trainset), lm=resolve_lm(judge.judge_lm),
                                   reflection_lm=reflection_lm, seed=seed, **optimizer_options)
                    if isinstance(optimizer, str) else optimizer)
    kwargs: dict[str, Any] = {"trainset": judge_examples(judge, trainset)}
    accepted = inspect.signature(teleprompter.compile).parameters
    if devset is not None and "valset" in accepted:
        kwargs["valset"] = judge_examples(judge, devset)
    if "requires_permission_to_run" in accepted:
        kwargs["requires_permission_to_run"] = False
    kwargs.update({k: optimizer_options[k] for k in ("num_trials", "minibatch", "minibatch_size")
                   if k in optimizer_options and k in accepted})
    with judge_context(judge.judge_lm, judge.judge_adapter):
        compiled = teleprompter.compile(judge, **kwargs)
    compiled.judge_lm, compiled.judge_adapter = judge.judge_lm, judge.judge_adapter
    return compiled


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
    selection: str = "one_se",
    guard: float = 0.25,
    keep: str = "better",
    devset: LabelledSet | None = None,
    calibration_set: LabelledSet | Sequence[LabelledSet] | None = None,
    reflection_lm: Any = None,
    seed: int = 0,
    progress: bool = False,
    **optimizer_options: Any,
) -> CompiledJudge:
    """Compile ``judge`` against ``trainset``'s human labels, then fit a score calibrator. See the module
    docstring for how steps are supervised and which optimizers and calibrators exist. ``monotone`` and
    ``selection`` (``"one_se"`` or ``"any_gain"``) are the stacked calibrator's (``calibration.calibrators``).

    Compiling never makes a judge worse in silence: with ``guard`` > 0 a stratified share of the train set
    (``guard``, at least 4 items; sets under 8 items are not split) is held back from compiling; the shipped
    and the compiled program both score it, and with ``keep="better"`` the compiled one is kept only if its
    agreement (mean 1 - |score - label|) is at least the shipped one's and its scores are not constant where
    the shipped judge's vary. ``report["guard"]`` holds both agreements, the paired comparison and the
    decision (``keep="compiled"`` always keeps the compiled program, reporting the same)."""
    if keep not in ("better", "compiled"):
        raise ValueError(f"fit: keep={keep!r} is not one of 'better', 'compiled'")
    if selection not in SELECTION_RULES:
        raise ValueError(f"fit: selection={selection!r} is not one of {', '.join(map(repr, SELECTION_RULES))}")
    schema = label_schema(trainset)
    report: dict[str, Any] = {"optimizer": optimizer if isinstance(optimizer, (str, type(None))) else type(optimizer).__name__,
                              "train_size": len(trainset), "seed": seed}
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
        compiled = _compiled(judge, compile_on, schema, optimizer, devset=devset, reflection_lm=reflection_lm,
                             seed=seed, **optimizer_options)
    if check_set is not None:
        kept, report["guard"] = _guarded(judge, CompiledJudge(compiled, schema=schema, memory=memory), check_set,
                                         schema, keep)
        if kept is judge:
            compiled, memory = judge, None
    if optimizer is not None:
        report["demos"] = {name: len(p.demos) for name, p in compiled.named_predictors()}
    if memory is not None:
        report["memory"]["episodes_kept"] = len(memory.episodes)
    result = CompiledJudge(compiled, Calibrator(None, binary=schema["kind"] == "binary"), schema, report, memory)
    if calibrator is not None:
        fit_on = pooled(calibration_set) if calibration_set is not None else trainset
        raw, results = judge_scores(result, fit_on, progress=progress, desc="scoring the calibration set")
        failed = failed_mask(results)
        if failed.all():
            raise JudgeFailedError(f"fit: the judge failed on all {len(fit_on)} items of the calibration set; "
                                   f"first error: {results[0]['error']}")
        kept = fit_on.subset(np.flatnonzero(~failed).tolist())
        chosen = list(features) if calibrator == "stacked" else []
        cal = Calibrator(calibrator, binary=schema["kind"] == "binary", features=chosen, monotone=monotone,
                         selection=selection)
        extra = feature_matrix(chosen, kept.dataset, [r for r, f in zip(results, failed) if not f])
        cal.fit(raw[~failed], scaled(kept.labels, schema), extra)
        result.calibrator = cal
        result.needs_embeddings = result.needs_embeddings or "embedding_similarity" in cal.features
        report["calibrator"] = {"kind": calibrator, "fitted_on": len(kept), "fitted_on_sets": fit_on.name,
                                "failed": int(failed.sum()),
                                "errors": sorted({r["error"] for r, f in zip(results, failed) if f})[:5],
                                "note": cal.note}
    return result
