"""A metric as a DSPy metric function, one object for every DSPy consumer (``Metric.as_metric``).

    metric = Faithfulness(lm="openai/gpt-4o-mini").as_metric(threshold=0.7)
    dspy.Evaluate(devset=dev, metric=metric)(program)            # the score
    dspy.BootstrapFewShot(metric=metric).compile(program, ...)   # a demo is kept only at score >= 0.7
    dspy.GEPA(metric=metric, reflection_lm=...).compile(...)     # the score and the judge's feedback text
    dspy.Refine(module, N=3, reward_fn=metric, threshold=0.7)    # the reward, with the feedback in its advice

Every call returns a ``MetricScore``: a ``dspy.Prediction(score=..., feedback=..., ...)`` (how SIMBA, GEPA
and Refine read a score with metadata) that is also a number wherever a number is read (sums, means,
comparisons, ``float()``), true only at or above the threshold wherever truth is tested (BootstrapFewShot's
``if success``, BootstrapFinetune's filter), and a plain mapping of JSON values to orjson, json and pickle
(SIMBA's and Refine's prompts serialise it with orjson). docs/optimising.md has the table of call sites.

Per call, in order: the sample is built from ``(example, pred)`` (``FieldResolver``); a field the program
never produces raises ``MetricConfigurationError``; no prediction at all (SIMBA passes None where the program
raised) and an empty output score ``output_floor`` without judging (counted in ``no_prediction`` and
``empty_outputs``); a sample already scored by this metric with the same judge state is not judged again
(counted in ``repeats``); a judge that cannot judge (its LM has no key, refuses, or cannot be reached after
its retries) raises ``JudgeUnavailableError``; a degraded judgment (unparsed verdicts, one of two judges, a
language the verifier does not cover) is counted in ``degraded``, said in the feedback, and raised as
``DegradedJudgmentError`` with ``on_degraded="fail"``.

The three errors derive from ``MetricStop``, a ``BaseException`` on purpose (like ``KeyboardInterrupt``):
DSPy's Evaluate and optimizers catch ``Exception`` per item and score it ``failure_score`` (0), which would
read a judge that cannot judge as a bad program. A ``MetricStop`` passes through them and stops the run with
one message, and the items still queued in DSPy's thread pool are cancelled before their program runs.

Fields are found by ``judges.metrics.fields`` (typed outputs read as text by one rule there); what a call
returns or raises is ``judges.metrics.score``.

Owns: the exported metric (calls, counts, cache, turning failures into stops). Must not judge (the metric
does).
"""

from __future__ import annotations

import numbers
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import dspy

from judges.lm.resolve import EMBEDDED_LM_NAME, judging_lm, lm_label
from judges.lm.served import PermanentLMError, RetryBudgetExhausted, failure_kind
from judges.metrics.fields import FieldNotFoundError, FieldResolver, as_text
from judges.metrics.score import (
    DegradedJudgmentError,
    JudgeUnavailableError,
    MetricConfigurationError,
    MetricScore,
    MetricStop,
    refuse_if_stopped,
    stopping,
)

#: What ``on_degraded`` takes: keep a degraded score (the default) or raise ``DegradedJudgmentError``.
ON_DEGRADED = ("record", "fail")
#: Distinct samples whose results one exported metric keeps (least recently used first out).
CACHE_SIZE = 4096


def checked_threshold(name: str, threshold: Any) -> float:
    """``threshold`` as a float in [0, 1] (every metric here scores in [0, 1]), or a ValueError naming the
    metric."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(f"{name}: as_metric threshold must be a number in [0, 1] (the metric's scores lie "
                         f"there), got {threshold!r}")
    return float(threshold)


def dspy_metric(metric: Any, *, threshold: float = 0.5, field_map: Mapping[str, str | Sequence[str]] | None = None,
                feedback: Any = None, on_degraded: str = "record", cache: bool = True) -> ExportedMetric:
    """``metric.as_metric(...)``: see the module docstring. Every parameter is checked here, before any call.
    The object's class is named after the metric, which is how ``dspy.Evaluate`` titles its table column."""
    threshold = checked_threshold(metric.name, threshold)
    if feedback is not None and not isinstance(feedback, bool):
        raise ValueError(f"{metric.name}: as_metric feedback must be True or False, got {feedback!r}")
    if on_degraded not in ON_DEGRADED:
        raise ValueError(f"{metric.name}: as_metric on_degraded={on_degraded!r} is not one of {list(ON_DEGRADED)}")
    if not isinstance(cache, bool):
        raise ValueError(f"{metric.name}: as_metric cache must be True or False, got {cache!r}")
    named = type(metric.name, (ExportedMetric,), {"__module__": __name__, "__qualname__": metric.name})
    return named(metric, threshold=threshold, field_map=field_map, on_degraded=on_degraded, cache=cache)


def _exported(metric: Any, threshold: float, field_map: Any, on_degraded: str, cache: bool) -> ExportedMetric:
    return dspy_metric(metric, threshold=threshold, field_map=field_map, on_degraded=on_degraded, cache=cache)


class ExportedMetric:
    """A metric as DSPy calls it: ``(example, pred, trace=None, pred_name=None, pred_trace=None)`` returns a
    ``MetricScore``. Made by ``Metric.as_metric``; counts what it did not judge (``empty_outputs``,
    ``no_prediction``, ``repeats``) and what it judged degraded (``degraded``); ``reset()`` sets them to 0 and
    forgets the cached verdicts. Pickles with its metric (a process-based runner gets fresh counts)."""

    COUNTERS = ("empty_outputs", "no_prediction", "degraded", "repeats")

    def __init__(self, metric: Any, *, threshold: float, field_map: Any, on_degraded: str, cache: bool):
        self.judge, self.threshold, self.on_degraded, self.cache = metric, threshold, on_degraded, cache
        self._resolver = FieldResolver(metric.sample_type, field_map)
        self.field_map = dict(field_map) if field_map is not None else None
        self.__name__ = metric.name
        self._lock = threading.Lock()
        self._results: OrderedDict[str, Future] = OrderedDict()
        self.reset()

    def reset(self) -> None:
        """Counters back to 0 and no cached verdict: the next run counts and judges from scratch."""
        with self._lock:
            for counter in self.COUNTERS:
                setattr(self, counter, 0)
            self._results.clear()

    def __reduce__(self):
        return (_exported, (self.judge, self.threshold, self.field_map, self.on_degraded, self.cache))

    def __repr__(self) -> str:
        return (f"{self.judge.name}.as_metric(threshold={self.threshold:g}, on_degraded={self.on_degraded!r}; "
                + ", ".join(f"{counter} {getattr(self, counter)}" for counter in self.COUNTERS) + ")")

    def _count(self, counter: str) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def _score(self, score: float, text: str, **extra: Any) -> MetricScore:
        if self.judge.lower_is_better:  # DSPy's optimizers maximise: they get 1 - score, said in the feedback
            score, text = 1.0 - score, f"1 - {self.judge.name} (lower is better) = {1.0 - score:.3f}. {text}"
        return MetricScore(score, self.threshold, text, **extra)

    def _floor(self, counter: str, why: str, advice: str = "") -> MetricScore:
        """The metric's floor for an output it does not judge, counted in ``counter`` and said in the feedback."""
        self._count(counter)
        floor = float(self.judge.output_floor)
        return self._score(floor, f"{why}: {self.judge.name} scores it {floor:g}, its floor, without judging.{advice}")

    def __call__(self, example, pred, trace=None, pred_name=None, pred_trace=None) -> MetricScore:
        metric = self.judge
        refuse_if_stopped()
        if pred is None:  # SIMBA scores an item whose program raised as metric(example, None)
            return self._floor("no_prediction", "The program produced no prediction (it raised an error)")
        try:
            sample, empty = self._resolver.resolve(example, pred, metric.required_fields)
        except FieldNotFoundError as err:
            raise stopping(MetricConfigurationError(f"{metric.name}: {err}")) from None
        if empty:
            return self._floor("empty_outputs", f"The program's {' and '.join(empty)} is empty", " Produce an answer.")
        result = self._judged(sample)
        text, degraded = metric.explain(result), degraded_reason(result)
        if degraded:
            self._count("degraded")
            if self.on_degraded == "fail":
                raise stopping(DegradedJudgmentError(
                    f"{metric.name}: the judgment is degraded ({degraded}); on_degraded='fail'"))
            judge = f"the judge ({result.judge_lm})" if result.get("judge_lm") else "the judge"
            note = f"The judgment is degraded ({degraded}): the score may reflect {judge} failing, not the answer"
            text = f"{text}\n{note}" if "\n" in text else f"{text}. {note}"
        if pred_name is not None and pred_trace:
            text = step_feedback(pred_name, pred_trace, sample, metric.required_fields) + "\n" + text
        parts = result.get("parts") if isinstance(result.get("parts"), Mapping) else None
        return self._score(result.score, text, degraded=degraded, judge_lm=result.get("judge_lm"),
                           objective_scores=parts)

    def _judged(self, sample) -> dspy.Prediction:
        """The metric's result for ``sample``, cached on the sample and the judge's state (its settings,
        compiled steps and the LM it judges with now), so a changed or recompiled judge judges again."""
        if not self.cache:
            return self._judge_now(sample)
        key = sample.model_dump_json() + "\x00" + self.judge.state_key()
        with self._lock:
            future, owner = self._results.get(key), False
            if future is None:
                future, owner = Future(), True
                self._results[key] = future
                while len(self._results) > CACHE_SIZE:
                    self._results.popitem(last=False)
            else:
                self._results.move_to_end(key)
                self.repeats += 1
        if not owner:
            return future.result()
        try:
            result = self._judge_now(sample)
        except BaseException as err:
            with self._lock:
                if self._results.get(key) is future:
                    del self._results[key]
            future.set_exception(err)
            raise
        future.set_result(result)
        return result

    def _judge_now(self, sample) -> dspy.Prediction:
        """The metric's result, its LM calls kept out of the program's trace (BootstrapFewShot turns every
        traced call into a demo candidate); an LM that cannot judge becomes ``JudgeUnavailableError``."""
        try:
            with dspy.context(trace=None):
                return self.judge.score(sample)
        except MetricStop:
            raise
        except Exception as err:
            cause = judge_lm_failure(err)
            if cause is None:
                raise
            lm = judge_lm_label(self.judge)
            raise stopping(JudgeUnavailableError(
                f"{self.judge.name}: its LM {lm} cannot judge ({cause}); the run stops rather than score answers 0. Fix "
                "the LM (its key, model name or endpoint), or give the judge another: lm=..., or "
                "judges.configure_judges(lm=...)")
            ) from err


def judge_lm_failure(error: BaseException) -> str | None:
    """Why ``error`` means the judge's LM cannot judge at all, or None when it is one item's failure: a
    permanent refusal (no key, authentication, billing, an unknown model, a bad request), or a transient one
    still failing after the retries (the LM cannot be reached)."""
    for err in _chain(error):
        if isinstance(err, (PermanentLMError, RetryBudgetExhausted)):
            return f"{type(err).__name__}: {err}"
        kind = failure_kind(err)
        if kind == "permanent":
            return f"{type(err).__name__}: {err}"
        if kind == "transient":
            return f"{type(err).__name__} after its retries: {err}"
    return None


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while error is not None and error not in seen and len(seen) < 8:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def judge_lm_label(metric: Any) -> str:
    """The LM ``metric`` judges with, for a message (parts of a combined metric listed)."""
    parts = getattr(metric, "metrics", None)
    if isinstance(parts, Mapping):
        return ", ".join(f"{name}: {judge_lm_label(part)}" for name, part in parts.items() if part.needs_lm) or "-"
    return lm_label(judging_lm(getattr(metric, "judge_lm", None))) or EMBEDDED_LM_NAME


def degraded_reason(result: dspy.Prediction) -> str | None:
    """Why a result is degraded: its steps or judges said so (``degraded``), or it could not be read at all
    (``out_of_language``: the verifier does not cover the answer's language)."""
    if result.get("degraded"):
        return result.degraded
    if result.get("out_of_language"):
        return result.get("undefined_reason") or f"the text is in {result.out_of_language!r}, not covered"
    return None


def step_feedback(pred_name: str, pred_trace: Any, sample: Any, fields: Sequence[str]) -> str:
    """What GEPA's named predictor had to do with the judged answer: the judged fields its outputs wrote (the
    judge's findings are then about that step's own words), or that it wrote none of them (its outputs fed
    later steps)."""
    outputs: dict[str, str] = {}
    for entry in pred_trace or []:
        try:
            _, _, produced = entry
            items = produced.items() if hasattr(produced, "items") else []
            outputs.update({str(k): as_text(v) for k, v in items})
        except (TypeError, ValueError):
            continue
    written = []
    for field in fields:
        value = getattr(sample, field, None)
        texts = value if isinstance(value, list) else [value]
        texts = [t for t in texts if isinstance(t, str) and t.strip()]
        for key, text in outputs.items():
            if text.strip() and any(text.strip() == t.strip() or (len(text) > 20 and text.strip() in t) for t in texts):
                written.append(f"the {field} (its output '{key}')")
                break
    if written:
        return f"Step '{pred_name}' wrote what the judge read: {', '.join(written)}; the findings below are about it."
    keys = ", ".join(f"'{k}'" for k in outputs) or "none"
    return (f"Step '{pred_name}' wrote none of the fields the judge read ({', '.join(fields)}); its outputs "
            f"({keys}) fed later steps, so the findings below concern it through them.")
