"""Calibrators: a judge's raw score (plus cheap signals) -> a calibrated score on the label scale's [0, 1].

``"isotonic"``, ``"platt"`` (logistic on the raw score), ``"stacked"`` (logistic or linear on inputs chosen
by forward selection under 5-fold cross-validation among the judge's raw score and cheap signals; Platt
scaling when no signal helps; the judge's score itself is dropped when it adds nothing), or ``None``.
A calibrator saves as a plain dict (``to_dict`` / ``from_dict``), never a pickle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import log_loss, mean_squared_error
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from calibration.signals import FEATURES


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
        return LogisticRegression(C=1.0, max_iter=1000) if self.binary else LinearRegression()

    def _fit_linear(self, x: np.ndarray, target: np.ndarray) -> Calibrator:
        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale[scale == 0] = 1.0
        model = self._model().fit((x - mean) / scale, (target >= 0.5).astype(int) if self.binary else target)
        self.params = {"mean": mean.tolist(), "scale": scale.tolist(),
                       "coef": np.ravel(model.coef_).tolist(), "intercept": float(np.ravel([model.intercept_])[0])}
        return self

    def _cv_loss(self, x: np.ndarray, target: np.ndarray) -> float:
        # at most 5 folds, and no more than the smallest class (binary) or the items (otherwise) allow
        folds = max(2, min(5, int(min(np.bincount((target >= 0.5).astype(int)))) if self.binary else len(target)))
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
        if not isinstance(data, dict) or "kind" not in data or "binary" not in data:
            raise ValueError(f"calibrator: expected an object with 'kind' and 'binary', got {data!r:.80}")
        unknown = [f for f in data.get("features", []) if f not in FEATURES]
        if unknown:
            raise ValueError(f"calibrator uses unknown features {unknown}")
        calibrator = cls(data["kind"], data["binary"], data.get("features", []))
        calibrator.params, calibrator.note = data.get("params", {}), data.get("note", "")
        calibrator.use_raw = bool(data.get("use_raw", True))
        return calibrator
