"""Which optimizers fit a judge, how they are built for small labelled sets, and the agreement metric that
supervises them: the compiling half of ``fit`` (``calibration.fitting.fit``).

Must not calibrate (``calibration.fitting.calibrators``) or read data files.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import dspy
import numpy as np

from calibration.data.labelled import LabelledSet, k_fold_indices
from calibration.fitting.finetune import MIN_LABELS, MIN_PER_CLASS
from judges.lm.resolve import judge_context, resolve_lm
from judges.metrics.base import Judge
from judges.metrics.rag.verified import FaithfulnessWithVerifier

#: The optimizers ``fit`` knows by name (None: no compiling).
OPTIMIZERS = (None, "labeled", "bootstrap", "random_search", "mipro", "simba", "gepa", "memory", "finetune")
#: Those that compile a judge's LM steps.
LM_OPTIMIZERS = ("bootstrap", "random_search", "mipro", "simba", "gepa", "memory")


def fitting_optimizers(judge: Any) -> list[str | None]:
    """The optimizers (``OPTIMIZERS``) that can compile ``judge``: None every judge; the DSPy optimizers and
    memory a judge with LM steps; "labeled" one whose single step outputs the label; "finetune" a
    ``FaithfulnessWithVerifier``."""
    names: list[str | None] = [None]
    if getattr(judge, "needs_lm", False):
        if type(judge).label_demo is not Judge.label_demo:
            names.append("labeled")
        names += list(LM_OPTIMIZERS)
    if isinstance(judge, FaithfulnessWithVerifier):
        names.append("finetune")
    return names


def check_optimizer(judge: Any, optimizer: Any, trainset: LabelledSet | None = None, *, guard: float = 0.25,
                    crossfit: int = 3, calibrator: str | None = "stacked", seed: int = 0, **options: Any) -> None:
    """Refuse (ValueError naming the optimizers that fit) an optimizer that cannot compile ``judge``, or, given
    ``trainset``, a set too small for it: fine-tuning needs ``min_labels`` items (and ``min_per_class`` of each
    label) in what it trains on after the guard's share and, with a calibrator, in each cross-fitting fold."""
    if optimizer is not None and not isinstance(optimizer, str):
        return  # a DSPy optimizer instance: the user's choice
    fits = fitting_optimizers(judge)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"fit: optimizer={optimizer!r} is not one of {', '.join(map(repr, OPTIMIZERS))} or a DSPy "
                         f"optimizer instance")
    if optimizer not in fits:
        why = ("its label is not the output of one step" if optimizer == "labeled" and judge.needs_lm else
               "it has no verifier to fine-tune" if optimizer == "finetune" else "it has no LM step to compile")
        raise ValueError(f"fit: optimizer={optimizer!r} does not fit {judge.name} ({why}); the optimizers that fit "
                         f"it: {', '.join('none' if o is None else o for o in fits)}")
    if optimizer != "finetune" or trainset is None:
        return
    need, per_class = options.get("min_labels", MIN_LABELS), options.get("min_per_class", MIN_PER_CLASS)
    held = set((held_back(trainset, guard, seed) if guard > 0 else None) or [])
    trained = [i for i in range(len(trainset)) if i not in held]
    sets = {"after the guard's held-back share" if held else "(no guard: all of them)": trained}
    if calibrator is not None and crossfit > 1:
        for k, (rest, _) in enumerate(k_fold_indices(trainset, k=crossfit, seed=seed)):
            sets[f"in cross-fitting fold {k + 1} of {crossfit}"] = rest
    for where, indices in sets.items():
        labels = (np.asarray([trainset.labels[i] for i in indices], float) - trainset.label_range[0]) / max(
            trainset.label_range[1] - trainset.label_range[0], 1e-12)
        smallest = min(int((labels >= 0.5).sum()), int((labels < 0.5).sum()))
        if len(indices) < need or smallest < per_class:
            least = min_training_labels(need, guard=guard, crossfit=crossfit if calibrator is not None else 0)
            raise ValueError(f"fit: optimizer='finetune' needs at least {least} labelled training items with these "
                             f"settings; here it trains on {len(indices)} of the {len(trainset)} labelled items {where} "
                             f"({smallest} of the rarer label), and it needs {need} there ({per_class} of each label). Give more "
                             "labels, or crossfit=0 / guard=0 at your own risk")


def min_training_labels(need: int = MIN_LABELS, *, guard: float = 0.25, crossfit: int = 3) -> int:
    """The fewest labelled training items that leave fine-tuning ``need`` items after the guard's held-back
    share and inside each cross-fitting fold (``crossfit`` folds; 0 or 1 for none): 60 with the defaults."""
    least = need
    while (least - max(1, round(guard * least)) < need if guard > 0 else False) or (
            crossfit > 1 and least - -(-least // crossfit) < need):
        least += 1
    return least


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


def labeled_few_shot(judge: Judge, trainset: LabelledSet, schema: dict[str, Any], *, k: int, seed: int) -> Judge:
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



def compile_judge(judge: Judge, trainset: LabelledSet, schema: dict[str, Any], optimizer: Any, *, devset, reflection_lm,
              seed: int, **optimizer_options: Any) -> Judge:
    """The judge compiled on ``trainset`` by ``optimizer`` (the judge itself for None)."""
    if optimizer is None:
        return judge
    if optimizer == "labeled":
        return labeled_few_shot(judge, trainset, schema, k=optimizer_options.get("max_demos", 3), seed=seed)
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


