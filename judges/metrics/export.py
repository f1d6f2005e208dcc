"""A metric as a DSPy metric function, one object for every optimizer (``Metric.as_metric``).

    metric = Faithfulness(lm="openai/gpt-4o-mini").as_metric(threshold=0.7)
    dspy.Evaluate(devset=dev, metric=metric)(program)            # the score, a float
    dspy.BootstrapFewShot(metric=metric).compile(program, ...)   # a demo is kept only at score >= 0.7
    dspy.GEPA(metric=metric, reflection_lm=...).compile(...)     # the score and the judge's feedback text

Every call returns a ``MetricScore``: a float that is the score wherever a number is read (Evaluate's mean,
MIPROv2's and GEPA's bookkeeping, SIMBA's buckets, ``metric_threshold``) and is true only at or above the
threshold wherever truth is tested (BootstrapFewShot's ``if success``, MIPROv2's and SIMBA's demo
bootstrapping, BootstrapFinetune's filter). It carries the judge's feedback text where GEPA reads it
(``.feedback`` and ``["feedback"]``). Why one object: DSPy's optimizers call a metric in ways that look
alike (GEPA's trace-capturing minibatches and BootstrapFewShot both pass a trace and no predictor name), so
a metric cannot choose a float or a bool from its arguments without misleading one of them.

Per call, in order: the sample is built from ``(example, pred)`` (``FieldResolver``); a field the program
never produces raises ``MetricConfigurationError`` (it derives from ``BaseException`` so that DSPy's
per-item error handling lets it through: one clear error instead of one log line per item and "Execution
cancelled"); an empty output scores ``output_floor`` without judging (counted in ``empty_outputs``); a
sample already scored by this metric function is not judged again (counted in ``repeats``: GEPA scores the
same predictions for its feedback); a degraded judgment (unparsed verdicts, one of two judges) is counted in
``degraded``, said in the feedback, and raised as ``DegradedJudgmentError`` with ``on_degraded="fail"``.

Typed program outputs are scored by this rule (``as_text``): a number becomes its shortest text (``3``, not
``3.0``; ``0.1``), a bool ``True`` / ``False``, a dict or pydantic model compact JSON; a list fills a field of
texts (contexts) item by item, is read as alternatives where a field takes them (``reference``) and is
joined one item a line where a field takes one text (``response``).

Owns: the exported function, its return type and the field lookup. Must not judge (the metric does).
"""

from __future__ import annotations

import json
import numbers
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import dspy

from judges.data.samples import SampleValidationError

#: What ``on_degraded`` takes: keep a degraded score (the default) or raise ``DegradedJudgmentError``.
ON_DEGRADED = ("record", "fail")
#: Distinct samples whose results one exported metric keeps (least recently used first out).
CACHE_SIZE = 4096


class MetricConfigurationError(BaseException):
    """The metric cannot be built from this program's outputs (a field it never produces, a field map that
    points nowhere). A ``BaseException`` on purpose, like ``KeyboardInterrupt``: DSPy's Evaluate and
    optimizers catch ``Exception`` per item, which would log it once per item and then stop with a
    generic message; a configuration error is no item's failure. Catch it by name."""


class FieldNotFoundError(SampleValidationError):
    """A sample field no source in ``(example, pred)`` holds (``FieldResolver.resolve``)."""


class DegradedJudgmentError(ValueError):
    """``on_degraded="fail"``: the judge scored from fewer steps or judges than designed (which and why)."""


class MetricScore(float):
    """A metric's score as DSPy's optimizers read it: a float (the score) whose truth is ``score >=
    threshold``, with the judge's ``feedback`` text (also as ``self["feedback"]``, GEPA's way), whether it
    ``passed``, the ``threshold``, ``degraded`` (why the judgment is degraded, or None) and ``judge_lm``
    (the LM that judged, or None for metrics without one)."""

    def __new__(cls, score: float, threshold: float = 0.5, feedback: str = "", *, degraded: str | None = None,
                judge_lm: str | None = None) -> MetricScore:
        value = super().__new__(cls, score)
        value.score, value.threshold, value.feedback = float(score), float(threshold), str(feedback)
        value.degraded, value.judge_lm = degraded, judge_lm
        return value

    @property
    def passed(self) -> bool:
        return float(self) >= self.threshold

    def __bool__(self) -> bool:
        return self.passed

    #: What ``self[key]`` and ``get`` read.
    FIELDS = ("score", "feedback", "threshold", "passed", "degraded", "judge_lm")

    def keys(self) -> list[str]:
        return ["score", "feedback"]

    def __getitem__(self, key: str) -> Any:
        if key not in self.FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:  # GEPA writes a missing feedback back
        if key not in ("score", "feedback"):
            raise KeyError(key)
        setattr(self, key, float(value) if key == "score" else str(value))

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.FIELDS else default

    def __reduce__(self):
        return (_rebuilt_score, (float(self), self.threshold, self.feedback, self.degraded, self.judge_lm))


def _rebuilt_score(score, threshold, feedback, degraded, judge_lm) -> MetricScore:
    return MetricScore(score, threshold, feedback, degraded=degraded, judge_lm=judge_lm)


def checked_threshold(name: str, threshold: Any) -> float:
    """``threshold`` as a float in [0, 1] (every metric here scores in [0, 1]), or a ValueError naming the
    metric."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(f"{name}: as_metric threshold must be a number in [0, 1] (the metric's scores lie "
                         f"there), got {threshold!r}")
    return float(threshold)


def dspy_metric(metric: Any, *, threshold: float = 0.5, field_map: Mapping[str, str | Sequence[str]] | None = None,
                feedback: Any = None, on_degraded: str = "record", cache: bool = True) -> Callable[..., MetricScore]:
    """``metric.as_metric(...)``: see the module docstring. Every parameter is checked here, before any call."""
    threshold = checked_threshold(metric.name, threshold)
    if feedback is not None and not isinstance(feedback, bool):
        raise ValueError(f"{metric.name}: as_metric feedback must be True or False, got {feedback!r}")
    if on_degraded not in ON_DEGRADED:
        raise ValueError(f"{metric.name}: as_metric on_degraded={on_degraded!r} is not one of {list(ON_DEGRADED)}")
    if not isinstance(cache, bool):
        raise ValueError(f"{metric.name}: as_metric cache must be True or False, got {cache!r}")
    resolver = FieldResolver(metric.sample_type, field_map)
    lock = threading.Lock()
    results: OrderedDict[str, Future] = OrderedDict()

    def count(counter: str) -> None:
        with lock:
            setattr(scorer, counter, getattr(scorer, counter) + 1)

    def judged(sample) -> dspy.Prediction:
        if not cache:
            return _score_untraced(metric, sample)
        key = sample.model_dump_json()
        with lock:
            future, owner = results.get(key), False
            if future is None:
                future, owner = Future(), True
                results[key] = future
                while len(results) > CACHE_SIZE:
                    results.popitem(last=False)
            else:
                results.move_to_end(key)
                scorer.repeats += 1
        if not owner:
            return future.result()
        try:
            result = _score_untraced(metric, sample)
        except BaseException as err:
            with lock:
                results.pop(key, None)
            future.set_exception(err)
            raise
        future.set_result(result)
        return result

    def scorer(example, pred, trace=None, pred_name=None, pred_trace=None) -> MetricScore:
        try:
            sample, empty = resolver.resolve(example, pred, metric.required_fields)
        except FieldNotFoundError as err:
            raise MetricConfigurationError(f"{metric.name}: {err}") from None
        if empty:
            count("empty_outputs")
            floor = float(metric.output_floor)
            return MetricScore(floor, threshold, f"The program's {' and '.join(empty)} is empty: {metric.name} "
                                                 f"scores it {floor:g}, its floor, without judging. Produce an answer.")
        result = judged(sample)
        text, degraded = metric.explain(result), result.get("degraded")
        if degraded:
            count("degraded")
            if on_degraded == "fail":
                raise DegradedJudgmentError(f"{metric.name}: the judgment is degraded ({degraded}); on_degraded='fail'")
            judge = f"the judge ({result.judge_lm})" if result.get("judge_lm") else "the judge"
            text += f". The judgment is degraded ({degraded}): the score may reflect {judge} failing, not the answer"
        return MetricScore(result.score, threshold, text, degraded=degraded, judge_lm=result.get("judge_lm"))

    scorer.__name__ = scorer.__qualname__ = metric.name
    scorer.judge, scorer.threshold, scorer.on_degraded = metric, threshold, on_degraded
    scorer.empty_outputs = scorer.degraded = scorer.repeats = 0
    return scorer


def _score_untraced(metric: Any, sample) -> dspy.Prediction:
    """The metric's result, its LM calls kept out of the program's trace (BootstrapFewShot turns every
    traced call into a demo candidate)."""
    with dspy.context(trace=None):
        return metric.score(sample)


#: Where a sample field is looked up in ``(example, pred)`` when the field map does not say.
DEFAULT_FIELD_SOURCES: dict[str, tuple[str, ...]] = {
    "user_input": ("example.user_input", "example.question", "pred.user_input"),
    "response": ("pred.response", "pred.answer", "pred.output"),
    "retrieved_contexts": (
        "pred.retrieved_contexts",
        "pred.contexts",
        "pred.context",
        "example.retrieved_contexts",
        "example.contexts",
        "example.context",
    ),
    "reference": ("example.reference", "example.answer", "example.ground_truth"),
    "reference_contexts": ("example.reference_contexts",),
}


_ABSENT = object()


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or (
        isinstance(value, (list, tuple, dict)) and len(value) == 0)


def as_text(value: Any) -> str:
    """A typed program output as the text a metric reads (the rule in the module docstring)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return str(int(number)) if number.is_integer() and abs(number) < 1e16 else repr(number)
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif hasattr(value, "toDict"):
        value = value.toDict()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


class FieldResolver:
    """Builds a sample from a DSPy ``(example, pred)`` pair following a field map."""

    def __init__(self, sample_type: type, field_map: Mapping[str, str | Sequence[str]] | None = None):
        self.sample_type = sample_type
        self.sources: dict[str, tuple[str, ...]] = {}
        for name in sample_type.model_fields:
            default = DEFAULT_FIELD_SOURCES.get(name, (f"pred.{name}", f"example.{name}"))
            self.sources[name] = default
        if field_map is not None and not isinstance(field_map, Mapping):
            raise ValueError(f"field_map must be a mapping of sample fields to 'example.<attr>' / 'pred.<attr>' "
                             f"paths, got {type(field_map).__name__}")
        for name, spec in (field_map or {}).items():
            if name not in sample_type.model_fields:
                raise ValueError(f"field_map: '{name}' is not a {sample_type.__name__} field")
            specs = (spec,) if isinstance(spec, str) else tuple(spec)
            for path in specs:
                if not isinstance(path, str) or not path.startswith(("example.", "pred.")):
                    raise ValueError(f"field_map['{name}'] = {path!r}: paths start with 'example.' or 'pred.'")
            self.sources[name] = specs

    @staticmethod
    def _lookup(obj: Any, attr: str) -> Any:
        """``obj``'s ``attr``, or ``_ABSENT`` when it has no such key or attribute (None is a value)."""
        if obj is None:
            return _ABSENT
        if isinstance(obj, Mapping):
            return obj.get(attr, _ABSENT)
        try:
            if hasattr(obj, "keys") and attr in obj.keys():
                return obj[attr]
        except (KeyError, TypeError):
            pass
        try:
            return getattr(obj, attr, _ABSENT)
        except Exception:  # a Prediction raises for unknown attributes in some DSPy versions
            return _ABSENT

    def resolve(self, example: Any, pred: Any, required: Sequence[str] = ()) -> tuple[Any, list[str]]:
        """The sample, and the required fields the program left empty: present on ``pred`` (an attribute
        the field map points at) but None or empty, with no non-empty source before them. A required field
        that no source has at all is a misconfiguration: ``FieldNotFoundError`` naming where it looked; a value
        of the wrong type is a ``SampleValidationError`` naming the field."""
        objects = {"example": example, "pred": pred}
        data: dict[str, Any] = {}
        empty_outputs: list[str] = []
        for name, paths in self.sources.items():
            seen_empty_output = False
            for path in paths:
                owner, _, attr = path.partition(".")
                value = self._lookup(objects[owner], attr)
                if value is _ABSENT:
                    continue
                if _is_empty(value):
                    if owner == "pred":
                        seen_empty_output = True
                        continue
                    if value is None:
                        continue
                data[name] = self._coerce(name, value)
                break
            if name not in data and seen_empty_output and name in required:
                empty_outputs.append(name)
        missing = [name for name in required if name not in data and name not in empty_outputs]
        if missing:
            raise FieldNotFoundError([
                (None, name, f"not found: looked at {', '.join(self.sources[name])}; the program never produces "
                             f"it; say where it is with field_map={{'{name}': 'pred.<attribute>'}}")
                for name in missing
            ])
        for name in empty_outputs:
            data[name] = [] if self._kind(name) in ("texts", "list") else ""
        return self.sample_type.parse(data), empty_outputs

    def sample(self, example: Any, pred: Any, required: Sequence[str] = ()):
        """The sample a metric scores for ``(example, pred)`` (see ``resolve``)."""
        return self.resolve(example, pred, required)[0]

    def _kind(self, name: str) -> str:
        """How a field takes text: "texts" (a list of texts), "alternatives" (a text or a list of them),
        "text" (one text), "list" (messages, ids: taken as they are) or "other" (taken as it is)."""
        annotation = str(self.sample_type.model_fields[name].annotation).replace(" ", "")
        if annotation.startswith("list[str]"):
            return "texts"
        if annotation.startswith("str|list[str]"):
            return "alternatives"
        if annotation.startswith("str"):
            return "text"
        return "list" if annotation.startswith("list") else "other"

    def _coerce(self, name: str, value: Any) -> Any:
        kind = self._kind(name)
        if kind in ("list", "other"):
            return value.toDict() if hasattr(value, "toDict") else value
        if isinstance(value, (list, tuple)):
            texts = [as_text(item) for item in value]
            if kind == "text":
                return "\n".join(texts)
            return texts
        text = as_text(value)
        return [text] if kind == "texts" else text
