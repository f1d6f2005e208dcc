"""Several metrics as one: their weighted mean, their product or their minimum.

    metric = CombinedMetric({"faithful": FaithfulnessWithVerifier(), "correct": StringPresence()},
                            rule="product").as_metric(threshold=0.5)

The combination is a metric like any other: one score, one threshold while an optimizer bootstraps (the
product is tested, not each part: ``faith(e, p, t) * correct(e, p, t)`` by hand thresholds each part and
multiplies two bools), and one feedback text holding every part's. Each part keeps its own LM, settings and
rules for undefined cases.

    rule        score                                   use it when
    "mean"      sum(w_i * s_i) / sum(w_i)               partial credit on each part is worth something
    "product"   prod(s_i)                               every part must hold (a faithful wrong answer is 0)
    "minimum"   min(s_i)                                the weakest part decides, on its own scale

Owns: ``CombinedMetric``. Must not define a metric of its own.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import dspy

from judges.data.samples import SampleValidationError
from judges.lm.resolve import lm_identity
from judges.metrics.base import Metric, checked_name, state_digest

#: How the parts' scores make one.
RULES = ("mean", "product", "minimum")


class CombinedMetric(Metric):
    """One score from several metrics (``metrics``: a mapping of name to metric, or a list named by each
    metric's ``name``) by ``rule``; ``weights`` (the mean only) by name or in order, non-negative, not all 0."""

    def __init__(self, metrics: Mapping[str, Metric] | Sequence[Metric], *, rule: str = "mean",
                 weights: Mapping[str, float] | Sequence[float] | None = None):
        parts = dict(metrics) if isinstance(metrics, Mapping) else {}
        if not isinstance(metrics, Mapping):
            for metric in metrics:
                if not isinstance(metric, Metric):
                    break
                if metric.name in parts:
                    raise ValueError(f"combined metric: two parts are named {metric.name!r}; give a mapping of "
                                     "names, or name one with .named(...)")
                parts[metric.name] = metric
        if len(parts) < 2 or not all(isinstance(m, Metric) for m in parts.values()):
            given = list(metrics.values()) if isinstance(metrics, Mapping) else (
                list(metrics) if isinstance(metrics, Sequence) and not isinstance(metrics, str) else [metrics])
            described = ", ".join(m.name if isinstance(m, Metric) else type(m).__name__ for m in given[:6])
            raise ValueError("combined metric: metrics must be two or more metrics (a mapping of names to metrics, "
                             f"or a list of them), got {len(given)} ({described}); a single metric needs no "
                             "CombinedMetric: call its own as_metric()")
        for name in parts:
            checked_name("combined metric: a part's", name)
        if rule not in RULES:
            raise ValueError(f"combined metric: rule={rule!r} is not one of {list(RULES)}")
        types = {m.sample_type for m in parts.values()}
        if len(types) > 1:
            raise ValueError("combined metric: the parts score different samples (" + ", ".join(
                f"{name}: {m.sample_type.__name__}" for name, m in parts.items()) + ")")
        self.metrics, self.rule = parts, rule
        self.weights = self._checked_weights(weights)
        self.sample_type = next(iter(types))
        self.required_fields = tuple(dict.fromkeys(f for m in parts.values() for f in m.required_fields))
        self.allow_empty = tuple(f for f in self.required_fields
                                 if all(f in m.allow_empty or f not in m.required_fields for m in parts.values()))
        self.output_floor = self.combine({name: float(m.output_floor) for name, m in parts.items()})
        self.needs_lm = any(m.needs_lm for m in parts.values())
        self.needs_embeddings = any(m.needs_embeddings for m in parts.values())
        self.needs_verifier = any(getattr(m, "needs_verifier", False) for m in parts.values())

    def _checked_weights(self, weights: Any) -> dict[str, float] | None:
        if weights is None:
            return None
        if self.rule != "mean":
            raise ValueError(f"combined metric: weights apply to rule='mean' only, not {self.rule!r}")
        names = list(self.metrics)
        if isinstance(weights, Mapping):
            unknown = sorted(set(weights) - set(names))
            if unknown or set(weights) != set(names):
                raise ValueError(f"combined metric: weights must name each part ({names}), got {sorted(weights)}")
            given = dict(weights)
        else:
            given = list(weights)
            if len(given) != len(names):
                raise ValueError(f"combined metric: {len(given)} weights for {len(names)} parts")
            given = dict(zip(names, given))
        for name, w in given.items():
            if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w) or w < 0:
                raise ValueError(f"combined metric: the weight of {name!r} must be a number >= 0, got {w!r}")
        if not any(given.values()):
            raise ValueError("combined metric: the weights are all 0")
        return {name: float(w) for name, w in given.items()}

    @property
    def name(self) -> str:
        return self.alias or f"{self.rule}_of_" + "_and_".join(self.metrics)

    def combine(self, scores: Mapping[str, float]) -> float:
        """The rule applied to the parts' scores (by name)."""
        if self.rule == "product":
            return math.prod(scores.values())
        if self.rule == "minimum":
            return min(scores.values())
        weights = self.weights or dict.fromkeys(scores, 1.0)
        return sum(weights[name] * s for name, s in scores.items()) / sum(weights.values())

    def get_params(self) -> dict[str, Any]:
        return {"metrics": {name: {"class": f"{type(m).__module__}.{type(m).__qualname__}", "params": m.get_params()}
                            for name, m in self.metrics.items()},
                "rule": self.rule, "weights": self.weights}

    def model_identity(self) -> dict[str, Any]:
        """Each part's own models (a verifier's weights) and own LM, where it has them: a run file records the
        run's LM for the combination, not the LMs its parts bring."""
        out = {}
        for name, metric in self.metrics.items():
            identity = dict(metric.model_identity())
            if metric.needs_lm and getattr(metric, "judge_lm", None) is not None:
                identity["lm"] = lm_identity(metric.judge_lm, getattr(metric, "judge_adapter", None))
            if identity:
                out[name] = identity
        return out

    def state_key(self) -> str:
        """Each part's ``state_key`` and the rule: a part recompiled or judging with another LM changes it."""
        return state_digest({"rule": self.rule, "weights": self.weights,
                        "parts": {name: metric.state_key() for name, metric in self.metrics.items()}})

    def validate_sample(self, sample: Any, index: int | None = None):
        """The sample as each part checks it: one error lists every part's problems."""
        problems, checked = [], sample
        for name, metric in self.metrics.items():
            try:
                checked = metric.validate_sample(sample, index=index)
            except SampleValidationError as err:
                problems += [(i, field, f"{message} ({name})") for i, field, message in err.problems]
        if problems:
            raise SampleValidationError(list(dict.fromkeys(problems)), metric=self.name)
        return checked

    def _score(self, sample) -> dspy.Prediction:
        results = {name: metric.score(sample) for name, metric in self.metrics.items()}
        scores = {name: float(result.score) for name, result in results.items()}
        out = dspy.Prediction(score=self.combine(scores), rule=self.rule, parts=scores, part_results=results)
        degraded = [f"{name}: {r.degraded}" for name, r in results.items() if r.get("degraded")]
        if degraded:
            out["degraded"] = "; ".join(degraded)
        lms = sorted({r.judge_lm for r in results.values() if r.get("judge_lm")})
        if lms:
            out["judge_lm"] = ", ".join(lms)
        return out

    def feedback(self, result: dspy.Prediction) -> str:
        weights = self.weights or {}
        parts = ", ".join(f"{name} {s:.2f}" + (f" (weight {weights[name]:g})" if weights else "")
                          for name, s in result.parts.items())
        lines = [f"{self.name} = {result.score:.2f}, the {self.rule} of {parts}"]
        lines += [f"- {name}: {self.metrics[name].explain(r)}" for name, r in result.part_results.items()]
        return "\n".join(lines)
