"""Calibrators: a judge's raw score (plus cheap signals) -> a calibrated score on the label scale's [0, 1].

``"isotonic"``, ``"platt"`` (logistic on the raw score), ``"stacked"`` (logistic or linear on inputs chosen
by forward selection under 5-fold cross-validation among the judge's raw score and cheap signals; Platt
scaling when no signal helps; the judge's score itself is dropped when it adds nothing), or ``None``.
A calibrator saves as a plain dict (``to_dict`` / ``from_dict``), never a pickle.

Forward selection (``selection="judge_first"``, the default) takes the judge's score first, when it lowers the
loss on its own by more than its standard error, unless another input's loss is lower than the judge's alone by
more than the standard error of that difference: on a few labels a cheap signal can beat a good judge by chance,
and a calibrator built on it then ranks worse than the judge it was meant to calibrate. After that, as under
``"one_se"``, an input joins only when it lowers the cross-validated loss by more than the standard error of that
gain over the items. ``"one_se"`` (the default before) also lets a
signal come first by any margin; ``"any_gain"`` keeps any input that lowers the loss at all (it overfits small
label sets more readily). docs/agreement-log.md has the trials behind each.

Monotone (``monotone=True``, the default): the linear and logistic fits keep each input's weight on the
side its direction says (``calibration.signals.DIRECTIONS``: more token overlap never lowers the
calibrated score, more unsupported claims never raise it), so a calibrator fitted on one data set cannot
learn a sign that only held by chance there. The range of every input seen at fit time is kept;
``out_of_range`` reports the share of new inputs outside it (a calibrator extrapolating to data unlike its
training data is a warning, not a silent number).

Must not score samples: it maps scores (and signals) computed elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear, minimize
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import check_cv
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from calibration.fitting.signals import DIRECTIONS, FEATURES

#: How forward selection decides that an input lowers the cross-validated loss (``Calibrator(selection=...)``).
SELECTION_RULES = ("one_se", "any_gain", "judge_first")


def _standard_error(gain: np.ndarray) -> float:
    """The standard error of a per-item gain's mean (at least 1e-4): what a gain must beat to count."""
    return max(1e-4, float(gain.std(ddof=1) / np.sqrt(len(gain))))


def _bounds(signs: Sequence[int]) -> list[tuple[float | None, float | None]]:
    return [(0.0, None) if s > 0 else (None, 0.0) if s < 0 else (None, None) for s in signs]


class SignedLogistic(ClassifierMixin, BaseEstimator):
    """L2-regularised logistic regression (scikit-learn's objective at ``C``) whose weights keep the
    ``signs`` given (+1 non-negative, -1 non-positive, 0 free)."""

    def __init__(self, signs: Sequence[int] = (), C: float = 1.0):
        self.signs, self.C = signs, C

    def fit(self, x, y):
        x, y = np.asarray(x, float), np.asarray(y, float)
        d = x.shape[1]

        def loss(params):
            w, b = params[:-1], params[-1]
            z = x @ w + b
            value = np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * (w @ w) / self.C
            residual = expit(z) - y
            return value, np.append(x.T @ residual + w / self.C, residual.sum())

        signs = list(self.signs) if len(self.signs) == d else [0] * d
        result = minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B", bounds=_bounds(signs) + [(None, None)])
        self.coef_, self.intercept_ = result.x[None, :-1], np.array([result.x[-1]])
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, x):
        p = expit(np.asarray(x, float) @ self.coef_[0] + self.intercept_[0])
        return np.column_stack([1 - p, p])

    def predict(self, x):
        return (self.predict_proba(x)[:, 1] >= 0.5).astype(int)


class SignedLinear(RegressorMixin, BaseEstimator):
    """Least squares with an intercept whose weights keep the ``signs`` given."""

    def __init__(self, signs: Sequence[int] = ()):
        self.signs = signs

    def fit(self, x, y):
        x, y = np.asarray(x, float), np.asarray(y, float)
        d = x.shape[1]
        signs = list(self.signs) if len(self.signs) == d else [0] * d
        lows, highs = zip(*[(-np.inf if lo is None else lo, np.inf if hi is None else hi)
                            for lo, hi in _bounds(signs) + [(None, None)]])
        fitted = lsq_linear(np.column_stack([x, np.ones(len(x))]), y, bounds=(lows, highs))
        self.coef_, self.intercept_ = fitted.x[:-1], fitted.x[-1]
        return self

    def predict(self, x):
        return np.asarray(x, float) @ self.coef_ + self.intercept_


def _non_finite(value: Any, where: str) -> str | None:
    """Where in ``value`` (nested lists and dicts) a number is NaN or infinite; None when none is."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) else f"{where} = {value!r}"
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite(item, f"{where}[{key!r}]")
        if found:
            return found
    return None


class Calibrator:
    """Raw judge score (plus cheap signals) -> calibrated score on the label scale's [0, 1]."""

    def __init__(self, kind: str | None, binary: bool, features: Sequence[str] = (), monotone: bool = True,
                 selection: str = "judge_first"):
        if kind not in (None, "isotonic", "platt", "stacked"):
            raise ValueError(f"calibrator={kind!r} is not one of None, 'isotonic', 'platt', 'stacked'")
        if selection not in SELECTION_RULES:
            raise ValueError(f"calibrator selection={selection!r} is not one of {', '.join(map(repr, SELECTION_RULES))}")
        self.kind, self.binary, self.features = kind, binary, list(features)
        self.monotone = bool(monotone)
        self.selection = selection
        self.use_raw = True  # False when the stacked selection found the judge's own score adds nothing
        self.params: dict[str, Any] = {}
        self.ranges: dict[str, list[float]] = {}  # input -> [min, max] seen at fit time
        self.note = ""

    def _inputs(self) -> list[str]:
        """The names of the design matrix's columns, in order."""
        return (["judge score"] if self.use_raw else []) + list(self.features)

    def describe(self) -> str:
        """What maps the judge's score to the calibrated one, in words: "stacked on judge score,
        embedding_alignment", "isotonic on judge score", "none"."""
        if self.kind is None:
            return "none"
        inputs = ["judge score"] if self.kind in ("isotonic", "platt") else self._inputs()
        return f"{self.kind} on {', '.join(inputs) or 'a constant'}"

    def out_of_range(self, raw: Sequence[float], extra: np.ndarray | None = None, tolerance: float = 1e-9) -> dict[str, float]:
        """Per input, the share of these items whose value lies outside the range seen at fit time (only
        inputs with some outside)."""
        if self.kind in (None, "isotonic") or not self.ranges:
            return {}
        design = self._design(np.asarray(raw, float), extra)
        shares = {}
        for i, name in enumerate(self._inputs()):
            low, high = self.ranges.get(name, [-np.inf, np.inf])
            outside = float(np.mean((design[:, i] < low - tolerance) | (design[:, i] > high + tolerance)))
            if outside > 0:
                shares[name] = outside
        return shares

    def _design(self, raw: np.ndarray, extra: np.ndarray | None) -> np.ndarray:
        columns = [raw] if self.use_raw else []
        if extra is not None and self.features:
            columns += list(np.asarray(extra, float).T)
        return np.column_stack(columns)

    def fit(self, raw: Sequence[float], target: Sequence[float], extra: np.ndarray | None = None) -> Calibrator:
        """Fit on the judge's ``raw`` scores (and the signals' ``extra`` columns) to ``target`` in [0, 1].
        BLAS runs on one thread here: the problems are a few columns of a few hundred rows, where a pool of
        BLAS threads waits on itself (and, on a busy machine, on the other processes) far longer than the
        arithmetic takes."""
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit(np.asarray(raw, float), np.asarray(target, float), extra)

    def _fit(self, raw: np.ndarray, target: np.ndarray, extra: np.ndarray | None) -> Calibrator:
        if self.kind is None:
            return self
        if self.binary and len(set((target >= 0.5).tolist())) < 2:
            raise ValueError("calibration set holds one label class only; a calibrator needs both")
        if self.kind == "isotonic":
            model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, target)
            self.params = {"x": model.X_thresholds_.tolist(), "y": model.y_thresholds_.tolist()}
            return self
        if self.kind == "stacked" and extra is not None and self.features:
            return self._fit_stacked(raw, target, np.asarray(extra, float))
        self.features = []
        return self._fit_linear(raw[:, None], target, ["judge score"])

    def _fit_stacked(self, raw: np.ndarray, target: np.ndarray, extra: np.ndarray) -> Calibrator:
        """Forward selection among the judge's score and the cheap signals: add the input that lowers the
        5-fold cross-validated loss most, stop when none does by enough (``selection``: ``"one_se"``, by
        more than the standard error of the per-item gain; ``"any_gain"``, by any amount; ``"judge_first"``,
        as ``"one_se"``, with the judge's score first unless a signal beats it by more than that error). So a
        signal is kept only when it adds agreement, and the judge's own score only when it does (a judge no better
        than chance is dropped rather than allowed to add noise). The one-standard-error rule keeps an
        input only when its gain is larger than the gain's own noise on these items: on 40 labels, a fourth
        input that lowers the loss by chance is left out, and a simpler calibrator travels better."""
        columns = {"judge score": raw, **{f: extra[:, i] for i, f in enumerate(self.features)}}
        chosen: list[str] = []
        best_items = self._cv_losses(np.empty((len(raw), 0)), target, [])
        plain_items = self._cv_losses(raw[:, None], target, ["judge score"])
        plain = float(plain_items.mean())
        judge_gain = best_items - plain_items  # the judge alone against the base rate
        while len(chosen) < len(columns):
            trials = {c: self._cv_losses(np.column_stack([columns[k] for k in chosen + [c]]), target, chosen + [c])
                      for c in columns if c not in chosen}
            candidate = min(trials, key=lambda c: trials[c].mean())
            if self.selection == "judge_first" and not chosen and candidate != "judge score" \
                    and judge_gain.mean() > _standard_error(judge_gain) \
                    and (plain_items - trials[candidate]).mean() <= _standard_error(plain_items - trials[candidate]):
                # a judge that counts on its own, and a signal no better than it beyond its noise: the judge first
                candidate = "judge score"
            gain = best_items - trials[candidate]
            needed = 1e-4 if self.selection == "any_gain" else _standard_error(gain)
            if gain.mean() <= needed:
                break
            chosen.append(candidate)
            best_items = trials[candidate]
        best = float(best_items.mean())
        if not chosen or chosen == ["judge score"]:
            self.features = []
            self.note = (f"stacked dropped: no cheap signal lowered the cross-validated loss below {plain:.4f} "
                         f"(judge score alone); Platt scaling used")
            return self._fit_linear(raw[:, None], target, ["judge score"])
        self.use_raw = "judge score" in chosen
        self.features = [f for f in self.features if f in chosen]
        self.note = (f"stacked kept {chosen} by forward selection ({self.selection}): cross-validated loss {best:.4f} vs "
                     f"{plain:.4f} for the judge score alone"
                     + ("" if self.use_raw else "; the judge's own score did not lower it and is not used"))
        return self._fit_linear(self._design(raw, extra[:, [list(columns)[1:].index(f) for f in self.features]]),
                                target, self._inputs())

    def _model(self, inputs: Sequence[str]):
        if not self.monotone:
            return LogisticRegression(C=1.0, max_iter=1000) if self.binary else LinearRegression()
        signs = [DIRECTIONS.get(name, 0) for name in inputs]
        return SignedLogistic(signs) if self.binary else SignedLinear(signs)

    def _fit_linear(self, x: np.ndarray, target: np.ndarray, inputs: Sequence[str]) -> Calibrator:
        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale[scale == 0] = 1.0
        model = self._model(inputs).fit((x - mean) / scale, (target >= 0.5).astype(int) if self.binary else target)
        self.params = {"mean": mean.tolist(), "scale": scale.tolist(),
                       "coef": np.ravel(model.coef_).tolist(), "intercept": float(np.ravel([model.intercept_])[0])}
        self.ranges = {name: [float(x[:, i].min()), float(x[:, i].max())] for i, name in enumerate(inputs)}
        return self

    def _cv_loss(self, x: np.ndarray, target: np.ndarray, inputs: Sequence[str]) -> float:
        """The 5-fold cross-validated loss (log-loss for binary labels, squared error otherwise)."""
        return float(self._cv_losses(x, target, inputs).mean())

    def _cv_losses(self, x: np.ndarray, target: np.ndarray, inputs: Sequence[str]) -> np.ndarray:
        """Each item's loss under 5-fold cross-validation (its prediction from the folds without it)."""
        # at most 5 folds, and no more than the smallest class (binary) or the items (otherwise) allow
        folds = max(2, min(5, int(min(np.bincount((target >= 0.5).astype(int)))) if self.binary else len(target)))
        labels = (target >= 0.5).astype(int) if self.binary else target
        if x.shape[1] == 0:  # the intercept alone: predict the base rate / the mean
            predicted = np.full(len(target), labels.mean())
        else:  # cross_val_predict's folds and fits, without its per-fold cloning and dispatch (which cost more
            # than these fits of a few columns; forward selection runs this once per candidate and step).
            # Binary labels get stratified folds: each fold holds both classes whatever the items' order.
            predicted = np.empty(len(target))
            splits = check_cv(folds, labels, classifier=self.binary).split(x, labels)
            for train, test in splits:
                scaler = StandardScaler().fit(x[train])
                model = self._model(inputs).fit(scaler.transform(x[train]), labels[train])
                held = scaler.transform(x[test])
                predicted[test] = model.predict_proba(held)[:, 1] if self.binary else model.predict(held)
        if not self.binary:
            return (target - predicted) ** 2
        p = np.clip(predicted, 1e-15, 1 - 1e-15)  # a finite loss for a confident miss
        return -(labels * np.log(p) + (1 - labels) * np.log(1 - p))

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
                "monotone": self.monotone, "selection": self.selection, "params": self.params, "ranges": self.ranges,
                "note": self.note}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibrator:
        if not isinstance(data, dict) or "kind" not in data or "binary" not in data:
            raise ValueError(f"calibrator: expected an object with 'kind' and 'binary', got {data!r:.80}")
        unknown = [f for f in data.get("features", []) if f not in FEATURES]
        if unknown:
            raise ValueError(f"calibrator uses unknown features {unknown}")
        calibrator = cls(data["kind"], data["binary"], data.get("features", []), bool(data.get("monotone", False)),
                         data.get("selection", "any_gain"))
        bad = _non_finite(data.get("params", {}), "params")
        if bad:
            raise ValueError(f"calibrator: {bad} is not a finite number; the calibrator would score every item NaN "
                             "(refit it)")
        calibrator.params, calibrator.note = data.get("params", {}), data.get("note", "")
        calibrator.ranges = data.get("ranges", {})
        calibrator.use_raw = bool(data.get("use_raw", True))
        return calibrator
