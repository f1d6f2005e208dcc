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
``reflection_lm``), ``None`` (no compiling), or any DSPy optimizer instance. Multi-step judges such as
Faithfulness have no step whose output is the label, so "labeled" refuses them with a clear error.

Calibrators (scikit-learn), fitted on the judge's scores on ``calibration_set`` (default: the training
set): ``"isotonic"``, ``"platt"`` (logistic on the raw score), ``"stacked"`` (logistic or linear on inputs
chosen by forward selection under 5-fold cross-validation among the judge's raw score and cheap signals:
token overlap, reference-token recall, embedding similarity, the judge's intermediate counts; Platt
scaling when no signal helps; the judge's score itself is dropped when it adds nothing), or ``None``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dspy
import numpy as np

from calibration.datasets import LabelledSet
from judges.base import Judge, Metric
from judges.evaluation import _jsonable
from judges.language import tokenize
from judges.models import judge_context, resolve_lm

FORMAT = "dspy-judges/compiled-judge"
FORMAT_VERSION = 1


# ------------------------------------------------------------------------------------------------
# Labels <-> [0, 1]
# ------------------------------------------------------------------------------------------------
def label_schema(data: LabelledSet) -> dict[str, Any]:
    labels = np.asarray(data.labels, float)
    low, high = (0.0, 1.0) if data.kind == "binary" else (float(labels.min()), float(labels.max()))
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
                    f"{score:.2f}. " + (judge.feedback(pred) if hasattr(judge, "feedback") else ""))
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
# Cheap signals and calibrators
# ------------------------------------------------------------------------------------------------
def _evidence(sample) -> str:
    return "\n".join(sample.retrieved_contexts or sample.reference_contexts or []) or (sample.reference or "")


def token_overlap(sample, result=None) -> float:
    """Share of the response's tokens (CJK characters, words) that occur in the evidence text."""
    response = tokenize(sample.response or "")
    evidence = set(tokenize(_evidence(sample)))
    return sum(t in evidence for t in response) / len(response) if response else 0.0


def reference_token_recall(sample, result=None) -> float:
    """Share of the reference's tokens found in the response: does the answer contain the gold answer?
    A reference listing alternatives as "a / b" takes the best alternative."""
    if not sample.reference or not sample.response:
        return 0.0
    response = set(tokenize(sample.response))
    best = 0.0
    for alternative in sample.reference.split(" / "):
        tokens = tokenize(alternative)
        if tokens:
            best = max(best, sum(t in response for t in tokens) / len(tokens))
    return best


def embedding_similarity(sample, result=None) -> float:
    from judges.models import resolve_embedder

    evidence = _evidence(sample)
    if not sample.response or not evidence:
        return 0.0
    return float(resolve_embedder().similarity([sample.response], [evidence])[0, 0])


def claim_count(sample, result=None) -> float:
    return float(len((result or {}).get("claims", []) or []))


def unsupported_count(sample, result=None) -> float:
    return float(sum(not v["supported"] for v in (result or {}).get("verdicts", []) or []))


FEATURES: dict[str, Callable[[Any, Any], float]] = {
    "token_overlap": token_overlap,
    "reference_token_recall": reference_token_recall,
    "embedding_similarity": embedding_similarity,
    "claim_count": claim_count,
    "unsupported_count": unsupported_count,
}


def feature_matrix(names: Sequence[str], samples: Sequence[Any], results: Sequence[Any]) -> np.ndarray | None:
    """The cheap signals ``names`` of each (sample, judge result), one row per sample; None for no names."""
    if not names:
        return None
    return np.array([[FEATURES[f](s, r) for f in names] for s, r in zip(samples, results)], float)


class Calibrator:
    """Raw judge score (plus cheap signals) -> calibrated score on the label scale's [0, 1]."""

    def __init__(self, kind: str | None, binary: bool, features: Sequence[str] = ()):
        if kind not in (None, "isotonic", "platt", "stacked"):
            raise ValueError(f"calibrator={kind!r} is not one of None, 'isotonic', 'platt', 'stacked'")
        self.kind, self.binary, self.features = kind, binary, list(features)
        self.use_raw = True  # False when the stacked selection found the judge's own score adds nothing
        self.params: dict[str, Any] = {}
        self.note = ""

    def _design(self, raw: np.ndarray, extra: np.ndarray | None) -> np.ndarray:
        columns = [raw] if self.use_raw else []
        if extra is not None and self.features:
            columns += list(np.asarray(extra, float).T)
        return np.column_stack(columns)

    def fit(self, raw: Sequence[float], target: Sequence[float], extra: np.ndarray | None = None) -> Calibrator:
        raw, target = np.asarray(raw, float), np.asarray(target, float)
        if self.kind is None:
            return self
        if self.binary and len(set((target >= 0.5).tolist())) < 2:
            raise ValueError("calibration set holds one label class only; a calibrator needs both")
        if self.kind == "isotonic":
            from sklearn.isotonic import IsotonicRegression

            model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, target)
            self.params = {"x": model.X_thresholds_.tolist(), "y": model.y_thresholds_.tolist()}
            return self
        if self.kind == "stacked" and extra is not None and self.features:
            return self._fit_stacked(raw, target, np.asarray(extra, float))
        return self._fit_linear(raw[:, None], target)

    def _fit_stacked(self, raw: np.ndarray, target: np.ndarray, extra: np.ndarray) -> Calibrator:
        """Forward selection among the judge's score and the cheap signals: add the input that lowers the
        5-fold cross-validated loss most, stop when none does. So a signal is kept only when it adds
        agreement, and the judge's own score only when it does (a judge no better than chance is dropped
        rather than allowed to add noise)."""
        columns = {"judge score": raw, **{f: extra[:, i] for i, f in enumerate(self.features)}}
        chosen: list[str] = []
        best = self._cv_loss(np.empty((len(raw), 0)), target)
        plain = self._cv_loss(raw[:, None], target)
        while len(chosen) < len(columns):
            trials = {c: self._cv_loss(np.column_stack([columns[k] for k in chosen + [c]]), target)
                      for c in columns if c not in chosen}
            candidate = min(trials, key=trials.get)
            if trials[candidate] >= best - 1e-4:
                break
            chosen.append(candidate)
            best = trials[candidate]
        if not chosen or chosen == ["judge score"]:
            self.features = []
            self.note = (f"stacked dropped: no cheap signal lowered the cross-validated loss below {plain:.4f} "
                         f"(judge score alone); Platt scaling used")
            return self._fit_linear(raw[:, None], target)
        self.use_raw = "judge score" in chosen
        self.features = [f for f in self.features if f in chosen]
        self.note = (f"stacked kept {chosen} by forward selection: cross-validated loss {best:.4f} vs "
                     f"{plain:.4f} for the judge score alone"
                     + ("" if self.use_raw else "; the judge's own score did not lower it and is not used"))
        return self._fit_linear(self._design(raw, extra[:, [list(columns)[1:].index(f) for f in self.features]]),
                                target)

    def _model(self):
        from sklearn.linear_model import LinearRegression, LogisticRegression

        return LogisticRegression(C=1.0, max_iter=1000) if self.binary else LinearRegression()

    def _fit_linear(self, x: np.ndarray, target: np.ndarray) -> Calibrator:
        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale[scale == 0] = 1.0
        model = self._model().fit((x - mean) / scale, (target >= 0.5).astype(int) if self.binary else target)
        self.params = {"mean": mean.tolist(), "scale": scale.tolist(),
                       "coef": np.ravel(model.coef_).tolist(), "intercept": float(np.ravel([model.intercept_])[0])}
        return self

    def _cv_loss(self, x: np.ndarray, target: np.ndarray) -> float:
        from sklearn.metrics import log_loss, mean_squared_error
        from sklearn.model_selection import cross_val_predict
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        folds = max(2, min(5, int(min(np.bincount((target >= 0.5).astype(int)))) if self.binary else 5))
        model = make_pipeline(StandardScaler(), self._model())
        if x.shape[1] == 0:  # the intercept alone: predict the base rate / the mean
            labels = (target >= 0.5).astype(int) if self.binary else target
            base = np.full(len(target), labels.mean())
            return (float(log_loss(labels, base, labels=[0, 1])) if self.binary
                    else float(mean_squared_error(target, base)))
        if self.binary:
            labels = (target >= 0.5).astype(int)
            p = cross_val_predict(model, x, labels, cv=folds, method="predict_proba")[:, 1]
            return float(log_loss(labels, p, labels=[0, 1]))
        return float(mean_squared_error(target, cross_val_predict(model, x, target, cv=folds)))

    def predict(self, raw: Sequence[float], extra: np.ndarray | None = None) -> np.ndarray:
        raw = np.asarray(raw, float)
        if self.kind is None:
            return raw
        if self.kind == "isotonic":
            return np.interp(raw, self.params["x"], self.params["y"])
        x = (self._design(raw, extra) - np.asarray(self.params["mean"])) / np.asarray(self.params["scale"])
        z = x @ np.asarray(self.params["coef"]) + self.params["intercept"]
        return 1.0 / (1.0 + np.exp(-z)) if self.binary else np.clip(z, 0.0, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "binary": self.binary, "features": self.features, "use_raw": self.use_raw,
                "params": self.params, "note": self.note}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibrator:
        unknown = [f for f in data.get("features", []) if f not in FEATURES]
        if unknown:
            raise ValueError(f"calibrator uses unknown features {unknown}")
        calibrator = cls(data["kind"], data["binary"], data.get("features", []))
        calibrator.params, calibrator.note = data.get("params", {}), data.get("note", "")
        calibrator.use_raw = bool(data.get("use_raw", True))
        return calibrator


# ------------------------------------------------------------------------------------------------
# The compiled judge
# ------------------------------------------------------------------------------------------------
class CompiledJudge(Metric):
    """A judge (compiled or not) plus a score calibrator, usable like any metric and saved as JSON."""

    def __init__(self, judge: Judge, calibrator: Calibrator | None = None, schema: dict[str, Any] | None = None,
                 report: dict[str, Any] | None = None):
        self.judge = judge
        self.calibrator = calibrator or Calibrator(None, binary=True)
        self.schema = schema or {"kind": "binary", "low": 0.0, "high": 1.0}
        self.report = report or {}
        self.required_fields = judge.required_fields
        self.allow_empty = judge.allow_empty
        self.sample_type = judge.sample_type
        self.needs_lm, self.needs_embeddings = judge.needs_lm, judge.needs_embeddings or (
            "embedding_similarity" in self.calibrator.features)

    @property
    def name(self) -> str:
        return self.judge.name

    def features_of(self, sample, result) -> np.ndarray | None:
        return feature_matrix(self.calibrator.features, [sample], [result])

    def _score(self, sample) -> dspy.Prediction:
        result = self.judge.score(sample)
        calibrated = float(self.calibrator.predict([result.score], self.features_of(sample, result))[0])
        out = dspy.Prediction(**{k: v for k, v in result.items() if k != "score"})
        out["score"], out["raw_score"] = calibrated, float(result.score)
        return out

    def label_value(self, score: float) -> float:
        """A calibrated score on the human label's own scale (e.g. 1-5 for SummEval)."""
        return self.schema["low"] + score * (self.schema["high"] - self.schema["low"])

    def feedback(self, result: dspy.Prediction) -> str:
        return self.judge.feedback(result)

    # --- JSON, no pickle ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        body = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "judge": {"class": f"{type(self.judge).__module__}.{type(self.judge).__qualname__}",
                      "params": _jsonable(self.judge.get_params()),
                      "program": _jsonable(self.judge.dump_state()) if isinstance(self.judge, dspy.Module) else {}},
            "calibrator": self.calibrator.to_dict(),
            "label_schema": self.schema,
            "report": _jsonable(self.report),
        }
        body["checksum"] = _checksum(body)
        return body

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1), encoding="utf-8")
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, lm: Any = None, embeddings: Any = None) -> CompiledJudge:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a compiled judge file (expected format '{FORMAT}')")
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"compiled judge format version {data.get('version')} is not supported "
                             f"(this library reads version {FORMAT_VERSION})")
        if data.get("checksum") != _checksum({k: v for k, v in data.items() if k != "checksum"}):
            raise ValueError("compiled judge file was modified after it was saved (checksum mismatch)")
        module_name, _, class_name = data["judge"]["class"].rpartition(".")
        if not module_name.startswith("judges."):
            raise ValueError(f"refusing to load judge class {data['judge']['class']!r}: only judges.* classes load")
        try:
            judge_class = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            raise ValueError(f"judge class {data['judge']['class']!r} does not exist in this version") from None
        params = dict(data["judge"]["params"])
        accepted = inspect.signature(judge_class.__init__).parameters
        unknown = [p for p in params if p not in accepted]
        if unknown:
            raise ValueError(f"{class_name} does not take the saved parameters {unknown} in this version")
        for resource, value in (("lm", lm), ("embeddings", embeddings)):
            if value is not None and resource in accepted:
                params[resource] = value
        judge = judge_class(**params)
        if data["judge"].get("program"):
            judge.load_state(data["judge"]["program"])
        return cls(judge, Calibrator.from_dict(data["calibrator"]), data["label_schema"], data.get("report"))

    @classmethod
    def load(cls, path: str | Path, *, lm: Any = None, embeddings: Any = None) -> CompiledJudge:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err.msg}") from None
        return cls.from_dict(data, lm=lm, embeddings=embeddings)


def _checksum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------------
# fit()
# ------------------------------------------------------------------------------------------------
def judge_scores(judge: Metric, data: LabelledSet, *, progress: bool = False,
                 desc: str | None = None) -> tuple[np.ndarray, list[Any]]:
    """The judge's raw scores on every item (a failed item scores 0.5, the uninformative middle, and its
    result is ``{"error": ...}``) and the Predictions behind them; ``progress`` shows a progress bar."""
    scores, results = [], []
    items = data.dataset
    if progress:
        from tqdm.auto import tqdm

        items = tqdm(items, desc=desc or judge.name, unit="item")
    for sample in items:
        try:
            result = judge.score(sample)
            scores.append(float(result.score))
            results.append(result)
        except Exception as err:  # a weak LM may still fail on an item; the set goes on
            scores.append(0.5)
            results.append({"error": f"{type(err).__name__}: {err}"})
    return np.asarray(scores), results


def fit(
    judge: Judge,
    trainset: LabelledSet,
    *,
    optimizer: Any = "bootstrap",
    calibrator: str | None = "isotonic",
    features: Sequence[str] = ("token_overlap", "reference_token_recall", "embedding_similarity", "claim_count",
                               "unsupported_count"),
    devset: LabelledSet | None = None,
    calibration_set: LabelledSet | None = None,
    reflection_lm: Any = None,
    seed: int = 0,
    progress: bool = False,
    **optimizer_options: Any,
) -> CompiledJudge:
    """Compile ``judge`` against ``trainset``'s human labels, then fit a score calibrator. See the module
    docstring for how steps are supervised and which optimizers and calibrators exist."""
    schema = label_schema(trainset)
    compiled = judge
    report: dict[str, Any] = {"optimizer": optimizer if isinstance(optimizer, (str, type(None))) else type(optimizer).__name__,
                              "train_size": len(trainset), "seed": seed}
    if optimizer == "labeled":
        compiled = _labeled_few_shot(judge, trainset, schema, k=optimizer_options.get("max_demos", 3), seed=seed)
        report["demos"] = {name: len(p.demos) for name, p in compiled.named_predictors()}
    elif optimizer is not None:
        wants_feedback = optimizer == "gepa" or type(optimizer).__name__ == "GEPA"
        metric = agreement_metric(judge, schema, feedback=wants_feedback)
        teleprompter = (make_optimizer(optimizer, metric, n_train=len(trainset), lm=resolve_lm(judge.judge_lm),
                                       reflection_lm=reflection_lm, seed=seed, **optimizer_options)
                        if isinstance(optimizer, str) else optimizer)
        train = judge_examples(judge, trainset)
        kwargs: dict[str, Any] = {"trainset": train}
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
        report["demos"] = {name: len(p.demos) for name, p in compiled.named_predictors()}
    result = CompiledJudge(compiled, Calibrator(None, binary=schema["kind"] == "binary"), schema, report)
    if calibrator is not None:
        fit_on = calibration_set or trainset
        raw, results = judge_scores(compiled, fit_on, progress=progress, desc="scoring the calibration set")
        chosen = list(features) if calibrator == "stacked" else []
        cal = Calibrator(calibrator, binary=schema["kind"] == "binary", features=chosen)
        extra = feature_matrix(chosen, fit_on.dataset, results)
        cal.fit(raw, scaled(fit_on.labels, schema), extra)
        result.calibrator = cal
        result.needs_embeddings = result.needs_embeddings or "embedding_similarity" in cal.features
        report["calibrator"] = {"kind": calibrator, "fitted_on": len(fit_on), "note": cal.note}
    return result
