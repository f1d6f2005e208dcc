"""Tool-call metrics on multi-turn agent conversations, without an LM.

The agent's tool calls are every ``AIMessage.tool_calls`` in order; the reference is
``reference_tool_calls``. Calls pair up only when their names are equal; a pair earns its argument score.

ToolCallAccuracy = (sum of argument scores over the best pairing) / max(#agent calls, #reference calls)

* ``strict_order=True`` (default): the pairing must keep both orders (a weighted longest common
  subsequence), so a reordered call loses credit. ``strict_order=False``: any pairing (maximum-weight
  bipartite matching), so order does not matter.
* Missing calls lower the score through the reference count, extra calls through the agent count.
* Argument score of a pair: the mean agreement over the union of both calls' argument names (an argument
  only one side has scores 0); two calls without arguments agree fully. Agreement is exact equality by
  default, or any ``arg_comparison`` scoring 0..1: a metric such as ``NonLLMStringSimilarity()`` or a
  function ``(agent_value, reference_value) -> float``.

Unlike Ragas, which multiplies by a 0/1 "sequence aligned" flag, a single misplaced call here costs its
share rather than the whole score. Both lists empty scores 1.0; exactly one empty scores 0.0.

Must not call an LM or execute the tools.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from decimal import Context, Decimal, InvalidOperation
from typing import Any, ClassVar

import dspy
import numpy as np

from judges.data.samples import MultiTurnSample, SingleTurnSample, ToolCall
from judges.metrics import text
from judges.metrics.base import Metric


def _number_text(value: Any) -> str | None:
    """The canonical text of a finite number given as a number or as text (``1``, ``1.0``, ``"1.00"`` and
    ``"1e0"`` all give ``"1"``); None for anything else."""
    try:  # float.__repr__: the shortest exact text of a float (NumPy's float64 repr is "np.float64(1.0)")
        number = Decimal(value.strip() if isinstance(value, str) else float.__repr__(value) if isinstance(value, float)
                         else value)
    except (InvalidOperation, ValueError, TypeError):
        return None
    if not number.is_finite() or abs(number.adjusted()) > 60:  # "1e999999999" is not expanded to a billion digits
        return None
    return format(number.normalize(Context(prec=200)), "f")  # exact: the default 28 digits would round long ids


def canonical_argument(value: Any) -> Any:
    """A hashable form of an argument value under one rule shared by both tool metrics: a bool is not a
    number (``True`` differs from ``1``), a number and its text are the same argument and compare by value
    (``75``, ``75.0`` and ``"75"``; most tools parse them alike), and lists and objects compare element by
    element. A list is not its printed text (``["a"]`` differs from ``"['a']"``)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float, str)):
        number = _number_text(value)
        return ("number", number) if number is not None else ("text", str(value))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(canonical_argument(v) for v in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted((str(k), canonical_argument(v)) for k, v in value.items())))
    return ("text", str(value))


def _exact(a: Any, b: Any) -> float:
    return float(canonical_argument(a) == canonical_argument(b))


def _text_metric(config: dict[str, Any]) -> Metric:
    """A text metric (``judges.metrics.text``) from ``{"metric": class name, "params": {...}}``, as ``get_params``
    writes a metric given as ``arg_comparison``."""
    cls = getattr(text, str(config.get("metric")), None)
    if not (isinstance(cls, type) and issubclass(cls, Metric) and cls.__module__ == text.__name__):
        raise ValueError(f"arg_comparison: {config.get('metric')!r} is not a text metric of judges.metrics.text")
    return cls(**dict(config.get("params") or {}))


def _comparison_function(arg_comparison: Any) -> Callable[[Any, Any], float]:
    if arg_comparison is None:
        return _exact
    if isinstance(arg_comparison, str):
        raise ValueError(f"arg_comparison={arg_comparison!r} names a function, which cannot be rebuilt from its "
                         "name; pass the function itself")
    if hasattr(arg_comparison, "similarity"):  # e.g. NonLLMStringSimilarity
        return lambda a, b: float(arg_comparison.similarity(str(a), str(b)))
    if isinstance(arg_comparison, Metric):
        return lambda a, b: float(arg_comparison.score(SingleTurnSample(response=str(a), reference=str(b))).score)
    if callable(arg_comparison):
        return lambda a, b: float(arg_comparison(a, b))
    raise TypeError("arg_comparison must be None, a metric scoring response vs reference, or a callable")


def _ordered_alignment(weights: np.ndarray, allowed: np.ndarray) -> list[tuple[int, int]]:
    """Order-preserving pairing maximising the total weight (weighted LCS by dynamic programming)."""
    n, m = weights.shape
    best = np.zeros((n + 1, m + 1))
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            best[i, j] = max(best[i - 1, j], best[i, j - 1])
            if allowed[i - 1, j - 1]:
                best[i, j] = max(best[i, j], best[i - 1, j - 1] + weights[i - 1, j - 1] + 1e-9)
    pairs = []
    i, j = n, m
    while i > 0 and j > 0:
        if allowed[i - 1, j - 1] and np.isclose(best[i, j], best[i - 1, j - 1] + weights[i - 1, j - 1] + 1e-9):
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif best[i - 1, j] >= best[i, j - 1]:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def _unordered_alignment(weights: np.ndarray, allowed: np.ndarray) -> list[tuple[int, int]]:
    from scipy.optimize import linear_sum_assignment

    # A name match is worth more than any non-match even when its arguments all differ.
    rows, cols = linear_sum_assignment(np.where(allowed, weights + 1.0, 0.0), maximize=True)
    return sorted((int(r), int(c)) for r, c in zip(rows, cols) if allowed[r, c])


class ToolCallAccuracy(Metric):
    """How well the agent's tool calls match the reference calls: names in order, then arguments."""

    first_use_imports: ClassVar[tuple[str, ...]] = ("scipy.optimize",)

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "reference_tool_calls")
    allow_empty: ClassVar[tuple[str, ...]] = ("reference_tool_calls",)
    sample_type: ClassVar[type] = MultiTurnSample

    _runtime_params: ClassVar[tuple[str, ...]] = ("lm", "adapter", "embeddings")

    def __init__(self, *, strict_order: bool = True, arg_comparison: Any = None):
        if isinstance(arg_comparison, dict):  # as get_params() writes a metric
            arg_comparison = _text_metric(arg_comparison)
        self.strict_order = strict_order
        self.arg_comparison = arg_comparison
        self._compare = _comparison_function(arg_comparison)

    def get_params(self) -> dict[str, Any]:
        """As ``Metric.get_params``; a metric given as ``arg_comparison`` is written as ``{"metric": class
        name, "params": ...}`` (rebuilt by the constructor), a function by its name (the constructor
        refuses to rebuild that: it fails loudly rather than compare arguments differently)."""
        params = super().get_params()
        value = self.arg_comparison
        if isinstance(value, Metric):
            params["arg_comparison"] = {"metric": type(value).__name__, "params": value.get_params()}
        elif value is not None:
            params["arg_comparison"] = f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
        return params

    def argument_score(self, call: ToolCall, reference: ToolCall) -> float:
        names = set(call.args) | set(reference.args)
        if not names:
            return 1.0
        return sum(self._compare(call.args[k], reference.args[k]) for k in names if k in call.args and k in reference.args) / len(names)

    def _score(self, sample) -> dspy.Prediction:
        calls, reference = sample.tool_calls(), list(sample.reference_tool_calls)
        if not calls or not reference:
            score = float(not calls and not reference)
            return dspy.Prediction(score=score, pairs=[], missing=list(range(len(reference))), extra=list(range(len(calls))))
        allowed = np.array([[c.name == r.name for r in reference] for c in calls])
        weights = np.array(
            [[self.argument_score(c, r) if allowed[i, j] else 0.0 for j, r in enumerate(reference)] for i, c in enumerate(calls)]
        )
        align = _ordered_alignment if self.strict_order else _unordered_alignment
        pairs = align(weights, allowed)
        score = sum(weights[i, j] for i, j in pairs) / max(len(calls), len(reference))
        paired_calls = {i for i, _ in pairs}
        paired_refs = {j for _, j in pairs}
        return dspy.Prediction(
            score=float(score),
            pairs=[(i, j, float(weights[i, j])) for i, j in pairs],
            missing=[j for j in range(len(reference)) if j not in paired_refs],
            extra=[i for i in range(len(calls)) if i not in paired_calls],
            tool_calls=calls,
        )

    def feedback(self, result: dspy.Prediction) -> str:
        parts = [f"tool call accuracy {result.score:.2f}"]
        if result.missing:
            parts.append(f"reference calls not made (or out of order): {result.missing}")
        if result.extra:
            parts.append(f"agent calls not in the reference (or out of order): {result.extra}")
        weak = [(i, j) for i, j, w in result.pairs if w < 1.0]
        if weak:
            parts.append(f"calls with differing arguments (agent index, reference index): {weak}")
        return "; ".join(parts)


def _call_key(call: ToolCall) -> tuple[str, Any]:
    return call.name, canonical_argument(call.args)


class ToolCallF1(Metric):
    """F1 between the agent's and the reference tool calls as multisets of (name, arguments); order is
    ignored, arguments compare as in ToolCallAccuracy (``canonical_argument``). Both empty: 1.0.

    A multiset, where Ragas uses a set: calling the same tool twice with the same arguments when the
    reference calls it once is one true positive and one false positive here (precision 0.5), while
    Ragas counts the duplicate away (precision 1.0). A repeated call costs a real agent time and money."""

    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "reference_tool_calls")
    allow_empty: ClassVar[tuple[str, ...]] = ("reference_tool_calls",)
    sample_type: ClassVar[type] = MultiTurnSample

    def _score(self, sample) -> dspy.Prediction:
        predicted = Counter(_call_key(c) for c in sample.tool_calls())
        reference = Counter(_call_key(c) for c in sample.reference_tool_calls)
        if not predicted and not reference:
            return dspy.Prediction(score=1.0, precision=1.0, recall=1.0, true_positives=0)
        tp = sum((predicted & reference).values())
        precision = tp / sum(predicted.values()) if predicted else 0.0
        recall = tp / sum(reference.values()) if reference else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return dspy.Prediction(score=f1, precision=precision, recall=recall, true_positives=tp)
