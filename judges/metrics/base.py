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
import functools
import hashlib
import inspect
import json
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, ClassVar

import dspy

from judges.data.samples import MultiTurnSample, SampleValidationError, SingleTurnSample
from judges.lm.resolve import judge_context, judging_lm_key, lm_name
from judges.metrics.export import ExportedMetric, dspy_metric


class InputTooLargeError(ValueError):
    """An input beyond a metric's documented size guard (e.g. ROUGE-L's ``max_lcs_cells``): the item fails
    with this named error instead of taking minutes or gigabytes."""


def state_digest(parts: Any) -> str:
    """A short digest of JSON-able ``parts`` (sorted keys; anything else by its text)."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def checked_name(owner: str, name: Any) -> str:
    """``name`` if it can name a metric: a non-empty string of at most 100 characters with no path separator
    (``/``, ``\\``), control character or NUL, not starting with ``.``. A name ends up in column names, run
    records and, slugged, in output file names (``judges_app.cli.outputs.path_part``); a name that reads as
    a path (``x/../../elsewhere``) is refused where the metric is made or loaded, not where it is written."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{owner}: name must be a non-empty string, got {name!r}")
    if len(name) > 100 or name.startswith(".") or re.search(r"[/\\\x00-\x1f\x7f]", name):
        raise ValueError(f"{owner}: name {name!r} must be at most 100 characters, without '/', '\\', control "
                         "characters, or a leading '.'")
    return name


@functools.cache  # a metric's name is asked for every record of a run
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
    #: True for the few metrics where a lower score is better (noise sensitivity): their ``output_floor`` is 1.0,
    #: and ``as_metric`` gives DSPy ``1 - score``, since DSPy's optimizers maximise their metric.
    lower_is_better: ClassVar[bool] = False
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
        with ``type(metric)(**params)``. Runtime resources (LM, adapter, embedder) are left out, and so is a
        setting added later (``saved_before``) while it holds both its default and the value judges scored
        with before it existed: run files and compiled judges saved before it then still match."""
        params = {}
        for name, parameter in inspect.signature(type(self).__init__).parameters.items():
            if name == "self" or name in self._runtime_params or parameter.kind in (
                    parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if hasattr(self, name):
                value = getattr(self, name)
                if isinstance(value, Enum):
                    value = value.value
                if name in self.saved_before and value == self.saved_before[name] == parameter.default:
                    continue
                params[name] = list(value) if isinstance(value, tuple) else value
        return params

    def model_identity(self) -> dict[str, Any]:
        """What the scores depend on beyond ``get_params``: the models a metric loads itself (a verifier's
        weights and scoring settings), so a run file refuses to resume with changed ones. The LM and the
        embedder a metric runs with are added by the run file itself (``judges.run.records.metric_config``),
        since they may come from the run rather than the metric."""
        return {}

    def state_key(self) -> str:
        """What this metric's verdict on a sample depends on, as a digest: its class, settings and models, the
        LM it judges with now (a judge), and its compiled steps (instructions, demos). An exported metric's
        cache keys on it, so a judge given another LM or recompiled judges again."""
        parts: dict[str, Any] = {"class": f"{type(self).__module__}.{type(self).__qualname__}",
                                 "params": self.get_params(), "models": self.model_identity()}
        if self.needs_lm:
            parts["lm"] = judging_lm_key(getattr(self, "judge_lm", None))
        if isinstance(self, dspy.Module):
            parts["program"] = self.dump_state()
        return state_digest(parts)

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
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Called as DSPy calls a metric, ``metric(example, pred, trace=None, ...)``, a metric is its own
        default ``as_metric()`` (``dspy.Evaluate(metric=Faithfulness())`` works, as with DSPy's
        ``SemanticF1()``); a judge called with its inputs by keyword runs its steps (``dspy.Module``)."""
        if args or not isinstance(self, dspy.Module):
            exported = self.__dict__.get("_default_metric")
            if exported is None or exported.judge is not self:  # a copied judge makes its own
                exported = self.__dict__["_default_metric"] = self.as_metric()
            return exported(*args, **kwargs)
        return dspy.Module.__call__(self, **kwargs)

    def as_metric(
        self,
        *,
        threshold: float = 0.5,
        field_map: Mapping[str, str | Sequence[str]] | None = None,
        feedback: bool | None = None,
        on_degraded: str = "record",
        cache: bool = True,
    ) -> ExportedMetric:
        """A plain DSPy metric ``(example, pred, trace=None, pred_name=None, pred_trace=None)`` for
        ``dspy.Evaluate`` and every optimizer, with no flag to choose per optimizer (``judges.metrics.export``).

        Each call returns a ``MetricScore``: the score as a float, true only at ``score >= threshold`` (what
        bootstrapping optimizers test), with the judge's reasons as ``.feedback`` (what GEPA reads).
        ``field_map`` says where each sample field comes from, e.g. ``{"response": "pred.summary",
        "user_input": "example.question"}``. ``on_degraded="fail"`` raises ``DegradedJudgmentError`` where
        the judge scored from fewer steps or judges than designed. ``cache=False`` judges a repeated
        (example, prediction) pair again. ``feedback`` is accepted for code written before every result
        carried feedback; it changes nothing.

        A program that answers nothing is a bad answer, not an error: when a field the metric reads from
        ``pred`` is there but None or empty (``""``, ``[]``), the metric returns ``output_floor`` (0.0)
        without judging, says so in the feedback, and counts it in ``metric.empty_outputs``. A
        misconfiguration is ``MetricConfigurationError``, raised on the first call before any LM call: a field
        the program never produces (no such attribute on ``pred``) or a ``field_map`` pointing nowhere.
        Parameters are checked here, when the metric is made.
        """
        return dspy_metric(self, threshold=threshold, field_map=field_map, feedback=feedback,
                           on_degraded=on_degraded, cache=cache)


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
        return self.judged(**self._forward_inputs(sample))

    def judged(self, **inputs: Any) -> dspy.Prediction:
        """``self(**inputs)`` on the judge's LM (``judge_context``), the result recording that LM's name as
        ``judge_lm``."""
        with judge_context(self.judge_lm, self.judge_adapter, judge=self.name) as lm:
            result = self(**inputs)
        result["judge_lm"] = lm_name(lm)
        return result
