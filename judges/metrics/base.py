"""The one contract every metric shares, LLM-judged or not.

    result = Metric().score(sample)          # dspy.Prediction; result.score is a float
    result = await Metric().ascore(sample)
    metric = Metric().as_metric()            # plain DSPy metric: (example, pred, trace=None)
    Metric.required_fields                   # what a sample must carry

A deterministic metric subclasses :class:`Metric` and implements ``_score(sample)``. An LLM judge
subclasses :class:`Judge` (a ``dspy.Module``) and implements ``forward(...)`` whose parameter names are
sample fields; ``score`` validates the sample, picks the LM and adapter, and calls the module.

Must not define a metric of the catalogue, or choose an LM (``judges.lm.resolve``).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any, ClassVar

import dspy

from judges.data.samples import MultiTurnSample, SampleValidationError, SingleTurnSample
from judges.lm.resolve import judge_context


class InputTooLargeError(ValueError):
    """An input beyond a metric's documented size guard (e.g. ROUGE-L's ``max_lcs_cells``): the item fails
    with this named error instead of taking minutes or gigabytes."""


def snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class Metric:
    """Base of every metric: validation up front, ``score``/``ascore``, export as a DSPy metric."""

    #: Sample fields a metric reads; a sample missing one is rejected before any LM call.
    required_fields: ClassVar[tuple[str, ...]] = ()
    #: Required fields that may be empty (e.g. no reference tool calls: the agent should call none); the
    #: metric's docstring gives its rule for them.
    allow_empty: ClassVar[tuple[str, ...]] = ()
    #: The score of a program that answered nothing (an empty or missing output inside ``as_metric``):
    #: the lowest score the metric gives. Every metric here scores in [0, 1] with higher better.
    output_floor: ClassVar[float] = 0.0
    #: The sample type the metric scores.
    sample_type: ClassVar[type] = SingleTurnSample
    needs_lm: ClassVar[bool] = False
    needs_embeddings: ClassVar[bool] = False
    #: Modules the metric imports when first built or used (kept out of ``import judges``): a worker process
    #: imports them before it times the metric's first item (``judges.run.processes``).
    first_use_imports: ClassVar[tuple[str, ...]] = ()

    #: Set by ``named``: the name this metric goes by in a run (its records, summary and scores columns).
    alias: str | None = None

    @property
    def name(self) -> str:
        return self.alias or snake_case(type(self).__name__)

    def named(self, alias: str) -> Metric:
        """This metric under ``alias`` (letters, digits, ``_ . -``), so two of one kind with different settings
        can share a run: ``evaluate(data, [RougeScore().named("rouge_l"), RougeScore(rouge_type="rouge1")])``.
        Returns the metric itself; the alias is not a setting (``get_params`` leaves it out)."""
        if not isinstance(alias, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}", alias):
            raise ValueError(f"{self.name}: alias {alias!r} must be 1-100 letters, digits, '_', '.' or '-'")
        self.alias = alias
        return self

    #: Constructor arguments that are runtime resources, not settings (never saved with a judge).
    _runtime_params: ClassVar[tuple[str, ...]] = ("lm", "adapter", "embeddings", "arg_comparison")
    #: Settings added after judges were first saved, each with the value that scores as those judges did:
    #: a saved judge without one is rebuilt with it, not with today's default.
    saved_before: ClassVar[dict[str, Any]] = {}

    def get_params(self) -> dict[str, Any]:
        """The constructor's settings as given (scikit-learn's convention): enough to rebuild the metric
        with ``type(metric)(**params)``. Runtime resources (LM, adapter, embedder) are left out."""
        params = {}
        for name, parameter in inspect.signature(type(self).__init__).parameters.items():
            if name == "self" or name in self._runtime_params or parameter.kind in (
                    parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if hasattr(self, name):
                value = getattr(self, name)
                if isinstance(value, Enum):
                    value = value.value
                params[name] = list(value) if isinstance(value, tuple) else value
        return params

    def model_identity(self) -> dict[str, Any]:
        """What the scores depend on beyond ``get_params``: the models a metric loads itself (a verifier's
        weights and scoring settings), so a run file refuses to resume with changed ones. The LM and the
        embedder a metric runs with are added by the run file itself (``judges.run.records.metric_config``),
        since they may come from the run rather than the metric."""
        return {}

    # --- validation --------------------------------------------------------------------------
    def validate_sample(self, sample: Any, index: int | None = None):
        """Return the sample as ``sample_type``; raise SampleValidationError naming metric, index, field."""
        if isinstance(sample, dict):
            try:
                sample = self.sample_type.parse(sample, index=index)
            except SampleValidationError as err:
                raise SampleValidationError(err.problems, metric=self.name) from None
        if not isinstance(sample, self.sample_type):
            raise SampleValidationError(
                [(index, "<sample>", f"expected a {self.sample_type.__name__}, got {type(sample).__name__}")],
                metric=self.name,
            )
        missing = sample.missing_fields(self.required_fields, self.allow_empty)
        if missing:
            raise SampleValidationError(
                [(index, field, "is required by this metric but missing or empty") for field in missing],
                metric=self.name,
            )
        return sample

    def validate_dataset(self, samples: Sequence[Any]) -> None:
        """Check every sample at once; one error lists every problem."""
        problems = []
        for i, sample in enumerate(samples):
            try:
                self.validate_sample(sample, index=i)
            except SampleValidationError as err:
                problems.extend(err.problems)
        if problems:
            raise SampleValidationError(problems, metric=self.name)

    # --- scoring -----------------------------------------------------------------------------
    def score(self, sample: SingleTurnSample | MultiTurnSample | dict[str, Any]) -> dspy.Prediction:
        return self._score(self.validate_sample(sample))

    async def ascore(self, sample: SingleTurnSample | MultiTurnSample | dict[str, Any]) -> dspy.Prediction:
        # LM engines here are blocking; a worker thread keeps the event loop free (contextvars copied).
        return await asyncio.to_thread(self.score, sample)

    def _score(self, sample) -> dspy.Prediction:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} must implement _score(sample)")

    def feedback(self, result: dspy.Prediction) -> str:
        """Text explaining a result (GEPA learns from it); judges override with their reasons."""
        return f"{self.name} = {result.score:.3f}"

    def explain(self, result: dspy.Prediction) -> str:
        """``feedback``, or for a result the metric could not define (an empty response scored its floor
        without judging: no step ran, so none of the steps' fields exist) the score and the reason."""
        if result.get("undefined_reason"):
            return f"{self.name} = {float(result.score):.2f} ({result.undefined_reason})"
        return self.feedback(result)

    # --- export ------------------------------------------------------------------------------
    def as_metric(
        self,
        *,
        threshold: float = 0.5,
        field_map: Mapping[str, str | Sequence[str]] | None = None,
        feedback: bool = False,
    ) -> Callable[..., Any]:
        """A plain DSPy metric ``(example, pred, trace=None, pred_name=None, pred_trace=None)``.

        Returns the score (float) when ``trace`` is None and ``score >= threshold`` (bool) while an
        optimizer bootstraps demos. With ``feedback=True`` it returns ``dspy.Prediction(score,
        feedback)`` for GEPA. ``field_map`` says where each sample field comes from, e.g.
        ``{"response": "pred.summary", "user_input": "example.question"}``.

        A program that answers nothing is a bad answer, not an error: when a field the metric reads
        from ``pred`` is there but None or empty (``""``, ``[]``), the metric returns ``output_floor``
        (0.0) without an LM call, says so in the feedback, and counts it in ``metric.empty_outputs``
        (even where the metric has a rule for empty inputs: an optimizer must never be rewarded for
        silence). A misconfiguration is still an error, raised on the first call before any
        LM call: a field the program never produces (no such attribute on ``pred``) or a ``field_map``
        pointing nowhere.
        """
        resolver = FieldResolver(self.sample_type, field_map)
        judge = self
        lock = threading.Lock()

        def metric(example, pred, trace=None, pred_name=None, pred_trace=None):
            sample, empty = resolver.resolve(example, pred, judge.required_fields)
            if empty:
                with lock:
                    metric.empty_outputs += 1
                score = float(judge.output_floor)
                text = (f"The program's {' and '.join(empty)} is empty: {judge.name} scores it {score:g}, "
                        "its floor, without judging. Produce an answer.")
                if feedback:
                    return dspy.Prediction(score=score, feedback=text)
                return score if trace is None else bool(score >= threshold)
            result = judge.score(sample)
            if feedback:
                return dspy.Prediction(score=float(result.score), feedback=judge.explain(result))
            if trace is None:
                return float(result.score)
            return bool(result.score >= threshold)

        metric.__name__ = self.name
        metric.__qualname__ = self.name
        metric.judge = self
        metric.empty_outputs = 0
        return metric


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


class FieldResolver:
    """Builds a sample from a DSPy ``(example, pred)`` pair following a field map."""

    def __init__(self, sample_type: type, field_map: Mapping[str, str | Sequence[str]] | None = None):
        self.sample_type = sample_type
        self.sources: dict[str, tuple[str, ...]] = {}
        for name in sample_type.model_fields:
            default = DEFAULT_FIELD_SOURCES.get(name, (f"pred.{name}", f"example.{name}"))
            self.sources[name] = default
        for name, spec in (field_map or {}).items():
            if name not in sample_type.model_fields:
                raise ValueError(f"field_map: '{name}' is not a {sample_type.__name__} field")
            specs = (spec,) if isinstance(spec, str) else tuple(spec)
            for path in specs:
                if not path.startswith(("example.", "pred.")):
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
        that no source has at all is a misconfiguration: SampleValidationError naming where it looked."""
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
            raise SampleValidationError([
                (None, name, f"not found: looked at {', '.join(self.sources[name])}; the program never produces "
                             f"it; say where it is with field_map={{'{name}': 'pred.<attribute>'}}")
                for name in missing
            ])
        for name in empty_outputs:
            data[name] = [] if str(self.sample_type.model_fields[name].annotation).startswith("list") else ""
        return self.sample_type.parse(data), empty_outputs

    def sample(self, example: Any, pred: Any, required: Sequence[str] = ()):
        """The sample a metric scores for ``(example, pred)`` (see ``resolve``)."""
        return self.resolve(example, pred, required)[0]

    def _coerce(self, name: str, value: Any) -> Any:
        annotation = str(self.sample_type.model_fields[name].annotation)
        if annotation.startswith("list[str]") and isinstance(value, str):
            return [value]
        if hasattr(value, "toDict"):
            return value.toDict()
        return value


class Judge(Metric, dspy.Module):
    """An LLM-judged metric: a ``dspy.Module`` whose predictors are named, compilable steps.

    ``lm`` may be None (``dspy.settings.lm`` if configured, else the embedded default), a LiteLLM model
    string, a path to a GGUF file, ``"embedded"``, or a ``dspy.LM``. ``adapter`` overrides the adapter
    the LM is used with (the embedded engine defaults to JSON with grammar-constrained decoding).
    ``use_logprobs=True`` asks the LM for token log-probabilities on verdict steps and scores with
    P(verdict) instead of 0/1 (the LM must support logprobs; the embedded one does).

    Empty inputs: an empty ``response`` is a bad answer, scored ``output_floor`` (0.0) with an
    ``undefined_reason`` and no LM call; every other required input (contexts, a reference, a rubric)
    must be non-empty and is refused before any LM call otherwise: a judge needs something to judge
    against, and an LM asked to judge against nothing returns noise.
    """

    allow_empty: ClassVar[tuple[str, ...]] = ("response",)

    needs_lm: ClassVar[bool] = True
    #: Top alternatives asked for per token when ``use_logprobs`` is on.
    top_logprobs: ClassVar[int] = 10

    def __init__(self, *, lm: Any = None, adapter: Any = None, use_logprobs: bool = False):
        dspy.Module.__init__(self)
        self.judge_lm = lm
        self.judge_adapter = adapter
        self.use_logprobs = use_logprobs

    def __setattr__(self, name: str, value: Any) -> None:
        # MIPROv2 stores its best trial's metric as ``program.score``, which would shadow ``score()``.
        if name == "score" and not callable(value):
            name = "optimizer_score"
        super().__setattr__(name, value)

    def label_demo(self, inputs: dict[str, Any], label: float) -> dict[str, Any] | None:
        """A demo for the judge's verdict step built from a human label (``label`` scaled to [0, 1]), for
        LabeledFewShot; None where no single step's output is the label (multi-step judges)."""
        return None

    def label_consistent_demos(self, inputs: dict[str, Any], steps: dict[str, dict[str, Any]],
                               label: float) -> dict[str, dict[str, Any]]:
        """Demos made right by a person's label (scaled to [0, 1]) for the steps that decide the verdict,
        from the judge's own run on an item where its score disagreed with that person. ``inputs`` are the
        judge's forward inputs, ``steps`` each step's inputs and outputs on that run. Default: the
        ``label_demo`` for every step whose fields it fills; {} where no step's output can be made to agree
        with the label without guessing (memory alignment then keeps only the item's rationale)."""
        demo = self.label_demo(inputs, label)
        if demo is None:
            return {}
        return {name: demo for name, predictor in self.named_predictors()
                if set(predictor.signature.fields) <= set(demo)}

    def verdict_config(self) -> dict[str, Any]:
        """The per-call LM config for verdict steps."""
        return {"logprobs": True, "top_logprobs": self.top_logprobs} if self.use_logprobs else {}

    #: How a reference with alternatives reaches the judge's steps: "alternatives" (listed as such, for
    #: judges reading the reference as a whole), "closest_to_response" or "closest_to_contexts" (the one
    #: alternative the response, or the contexts, cover best, for judges that break it into claims).
    reference_view: ClassVar[str] = "alternatives"

    def _forward_inputs(self, sample) -> dict[str, Any]:
        params = inspect.signature(type(self).forward).parameters  # (self.forward warns in DSPy)
        inputs = {name: getattr(sample, name) for name in params if name in type(sample).model_fields}
        if isinstance(inputs.get("reference"), list):
            if self.reference_view == "closest_to_response":
                inputs["reference"] = sample.closest_reference(sample.response or "")
            elif self.reference_view == "closest_to_contexts":
                inputs["reference"] = sample.closest_reference(" ".join(sample.retrieved_contexts or []))
            else:
                inputs["reference"] = sample.reference_for_prompt()
        return inputs

    def _score(self, sample) -> dspy.Prediction:
        if "response" in self.required_fields and not (sample.response or "").strip():
            return dspy.Prediction(score=float(self.output_floor), undefined_reason=(
                "the response is empty: nothing to judge; scored the floor without an LM call"))
        with judge_context(self.judge_lm, self.judge_adapter):
            return self(**self._forward_inputs(sample))
