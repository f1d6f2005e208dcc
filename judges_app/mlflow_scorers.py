"""Our metrics and compiled judges as MLflow 3 GenAI scorers, and MLflow's evaluation fields as our samples.

    scorer = as_mlflow_scorer(ExactMatch())                       # or a CompiledJudge, a .json, a models:/ URI
    mlflow.genai.evaluate(data=traces, scorers=[scorer, ResponseLength(max_length=500)])

MLflow hands a scorer ``inputs``, ``outputs``, ``expectations`` and the ``trace``; ``sample_fields`` turns
them into ``SingleTurnSample`` fields (the question, the answer, the reference, the RETRIEVER spans'
documents). The scorer returns MLflow ``Feedback``: the score rounded to 3 decimals as ``value`` (or "yes" /
"no" with a ``threshold``; the exact score in ``metadata["raw_value"]``, the judge's own in
``metadata["raw_score"]``), what decided the score as ``rationale``, the judge's full name, LM, checksum,
``undefined_reason`` and ``degraded`` as ``metadata``, and the source MLflow's own judges give: ``LLM_JUDGE``
with the model URI (``CODE`` with the Feedback's name for a metric without an LM). A sample missing a field
the metric needs gets a Feedback whose ``error`` names the field and where MLflow carries it, never a score.

Names (the UI's column for the Feedback) show whole where the traces list cuts them (about 14 characters):
a judge's stem (``FEEDBACK_NAMES``, else its own name, at most 10 characters), plus ``_cal`` for a
``CompiledJudge`` with a calibrator, ``_opt`` without one, ``_aln`` for a judge aligned by
``judges_app.mlflow_align``. A
``name=`` given keeps that name; where the human label's name is known, a name equal to it is refused.

The judge's own DSPy calls are not traced (``mlflow.tracing.context(enabled=False)`` around each score):
with ``mlflow.dspy.autolog()`` on they would become traces in the app's experiment.

Owns: the MLflow field -> sample field mapping, the scorer and its Feedback's names and sources. Must not fit
or calibrate anything (``calibration.fitting``) nor read labels (``judges_app.mlflow_labels``).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import (
    AssessmentError,
    AssessmentSource,
    AssessmentSourceType,
    Feedback,
    SpanType,
)
from mlflow.environment_variables import MLFLOW_GENAI_EVAL_ENABLE_SCORER_TRACING
from mlflow.genai.judges import CategoricalRating
from mlflow.genai.scorers import Scorer
from pydantic import PrivateAttr

from calibration.fitting.compiled import CompiledJudge
from judges.data.samples import SampleValidationError
from judges.lm.files import EMBEDDED
from judges.lm.resolve import judging_lm
from judges.lm.resolve import lm_name as model_name
from judges.metrics.base import Metric
from judges_app.mlflow_fields import MlflowFieldError, missing_field_message, sample_fields
from judges_app.tracking import MlflowSourceError, check_reachable, default_tracking_uri, load_compiled_judge

#: MLflow model URIs ``log_compiled_judge`` models are loaded from.
MODEL_URI_SCHEMES = ("models:/", "runs:/", "mlflow-artifacts:/")
#: A Feedback name's stem is at most this long: with a mark it still shows whole in MLflow 3's traces list at
#: its default column width (about 14 characters of text; tests/test_mlflow_ui.py renders every name to check).
STEM_CHARS = 10
#: What a Feedback's name adds to the judge's stem: a compiled judge with a calibrator, one with optimised steps
#: only, an aligned one. Their first letters differ, so a column cut after ``_`` and one letter still tells.
CALIBRATED, COMPILED, ALIGNED = "_cal", "_opt", "_aln"
#: The stems of catalogue judges whose own name is longer than ``STEM_CHARS``: short, distinct and visible where
#: MLflow's UI cuts a column's name. The full name stays in the Feedback's ``metadata["judge"]``.
FEEDBACK_NAMES = {
    "agent_goal_accuracy_with_reference": "goal_ref", "agent_goal_accuracy_without_reference": "goal_noref",
    "answer_accuracy": "answer_acc", "answer_correctness": "ans_corr", "answer_relevancy": "answer_rel",
    "aspect_critic": "critic", "bleu_score": "bleu", "chrf_score": "chrf", "context_entity_recall": "ctx_entity",
    "context_precision": "ctx_prec", "context_recall": "ctx_recall", "context_relevance": "ctx_relev",
    "context_relevancy": "ctx_needed", "context_utilization": "ctx_util", "data_compy_score": "data_comp",
    "embedding_alignment": "emb_align", "exact_match": "exact", "factual_correctness": "fact_corr",
    "faithfulness": "faithful", "faithfulness_with_verifier": "faith_vrf", "faithfulnesswith_hhem": "faith_hhem",
    "id_based_context_precision": "id_prec", "id_based_context_recall": "id_recall", "instance_rubrics": "own_rubric",
    "llm_context_precision_with_reference": "prec_ref", "llm_context_precision_without_reference": "prec_noref",
    "llm_context_recall": "llm_recall", "llmsql_equivalence": "sql_equiv", "noise_sensitivity": "noise_sens",
    "non_llm_context_precision_with_reference": "nollm_prec", "non_llm_context_recall": "nollm_rec",
    "non_llm_string_similarity": "nollm_sim", "novel_bigram_support": "bigram_sup", "quoted_spans_alignment": "quote_span",
    "response_groundedness": "grounded", "response_relevancy": "relevancy", "rouge_score": "rouge",
    "rubrics_score": "rubrics", "semantic_similarity": "semantic", "simple_criteria_score": "criteria",
    "string_presence": "contains", "summarization_score": "summary", "tool_call_accuracy": "tool_acc",
    "tool_call_f1": "tool_f1", "topic_adherence_score": "on_topic", "unsupported_specifics": "unsup_spec",
    "weakest_sentence_support": "weak_sent",
}
#: Digits a Feedback's ``value`` keeps (``metadata["raw_value"]`` keeps them all).
VALUE_DIGITS = 3


def lm_name(metric: Metric) -> str:
    """The judge's LM as a name, chosen as ``judges.lm.resolve.resolve_lm`` chooses it: its own, else the
    judges' setting, else DSPy's configured LM, else "embedded"; "" for a metric without an LM."""
    if not metric.needs_lm:
        return ""
    lm = judging_lm(getattr(metric, "judge_lm", None))
    if lm is None:
        return EMBEDDED
    return lm if isinstance(lm, str) else model_name(lm)


def short_name(name: str, mark: str = "") -> str:
    """The Feedback name of judge ``name`` with ``mark`` (``_cal``, ``_opt``, ``_aln`` or none): its stem (a
    catalogue judge's from ``FEEDBACK_NAMES``, else the name itself, cut to ``STEM_CHARS``) and the mark."""
    stem = FEEDBACK_NAMES.get(name, name)
    return (stem if len(stem) <= STEM_CHARS else stem[:STEM_CHARS].rstrip("_")) + mark


def feedback_name(metric: Metric) -> str:
    """The name ``metric``'s Feedback goes by when none is given: its stem (``exact_match``; ``faith_vrf`` for
    ``faithfulness_with_verifier``); a ``CompiledJudge``'s plus ``_cal`` (``_opt`` without a calibrator), so the
    raw and the calibrated judge fill two columns whose names differ where the UI cuts."""
    if isinstance(metric, CompiledJudge):
        return short_name(metric.name, CALIBRATED if metric.calibrator.kind is not None else COMPILED)
    return short_name(metric.name)


def judge_feedback_names(metric: Metric) -> dict[str, str]:
    """Every name a judge of ours writes Feedback under, each with whose it is: ``metric``'s own, compiled,
    calibrated and aligned columns and every catalogue metric's (a scorer of any of them may write there)."""
    from judges.metrics.catalogue import metric_classes  # the whole catalogue: imported when a name is checked

    taken: dict[str, str] = {}
    for name in [*sorted(metric_classes()), metric.name]:
        taken[name] = f"judge {name}"
        for mark, what in (("", "its values"), (COMPILED, "its compiled values"), (CALIBRATED, "its calibrated values"),
                           (ALIGNED, "its aligned values")):
            taken[short_name(name, mark)] = f"judge {name}: {what}"
    return taken


def check_feedback_name(name: str, assessment: str | None) -> str:
    """``name``, unless it is empty or ``assessment`` (the human label's name, when known): the judge's
    values would then show in the person's column of MLflow's UI. ValueError naming both."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"feedback name must be a non-empty string, got {name!r}")
    if assessment is not None and name == assessment:
        raise ValueError(f"feedback name {name!r} is the name of the human label (assessment {assessment!r}): the "
                         f"judge's values would show in the person's column; pick another name")
    return name


def mlflow_model_uri(model: str) -> str:
    """A LiteLLM model string in MLflow's spelling (``openai/gpt-4o-mini`` -> ``openai:/gpt-4o-mini``); a name
    without a provider (``embedded``) as it is."""
    provider, slash, rest = model.partition("/")
    return f"{provider}:/{rest}" if slash and provider and rest and ":" not in provider else model


def judge_source(judge: str, metric: Metric, result: Any = None) -> AssessmentSource:
    """Where a Feedback came from, as MLflow's own judges say it: ``LLM_JUDGE`` with the model URI the result
    was judged with (else the one the judge would use), or ``CODE`` with the Feedback's name for a metric
    without an LM. Which judge of ours it was is in the Feedback's ``metadata["judge"]``."""
    if not metric.needs_lm:
        return AssessmentSource(source_type=AssessmentSourceType.CODE, source_id=judge)
    model = (result.get("judge_lm") if result is not None else None) or lm_name(metric)
    return AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=mlflow_model_uri(model))


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """No MLflow trace from the judge's own calls inside (DSPy autolog, ``@mlflow.trace``): they are not the
    app's. Per context (a context variable), so the app traced in another thread of ``evaluate`` still is.
    Inside MLflow's own scorer span (``MLFLOW_GENAI_EVAL_ENABLE_SCORER_TRACING``) the calls stay traced:
    they land in that scorer's trace, which MLflow tags as one."""
    span = mlflow.get_current_active_span() if MLFLOW_GENAI_EVAL_ENABLE_SCORER_TRACING.get() else None
    if span is not None and span.span_type == SpanType.EVALUATOR:
        yield
        return
    with mlflow.tracing.context(enabled=False):
        yield


def metric_identity(metric: Metric) -> dict[str, Any]:
    """What identifies a metric (JSON): its class and settings, and a compiled judge's checksum."""
    if isinstance(metric, CompiledJudge):
        return {"class": "CompiledJudge", **metric.get_params()}
    return {"class": f"{type(metric).__module__}.{type(metric).__qualname__}",
            "params": json.loads(json.dumps(metric.get_params(), default=str))}


class DspyJudgesScorer(Scorer):
    """An MLflow scorer that scores with one of our metrics or compiled judges (see ``as_mlflow_scorer``).

    ``metric_spec`` (JSON: class, settings, checksum) is what MLflow's evaluation hashes as the scorer's
    definition. Its name, and its Feedback's, is ``name`` or ``feedback_name(metric)``; ``threshold`` makes its
    Feedback pass/fail. ``register()`` refuses with the way that works: MLflow rebuilds registered custom
    scorers from their source text, which cannot carry a judge's LM, so a ``@scorer`` function that builds this
    scorer in its body is registered instead (docs/cli.md)."""

    metric_spec: dict[str, Any] = {}
    threshold: float | None = None
    _metric: Metric = PrivateAttr()

    def __init__(self, metric: Metric, *, name: str | None = None, threshold: float | None = None, **data: Any):
        name = check_feedback_name(name, None) if name is not None else feedback_name(metric)
        threshold = check_threshold(threshold)
        spec = {**metric_identity(metric), **({"threshold": threshold} if threshold is not None else {})}
        super().__init__(name=name, metric_spec=spec, threshold=threshold, **data)
        self._metric = metric

    @property
    def metric(self) -> Metric:
        return self._metric

    def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: Any = None,
                 trace: Any = None) -> Feedback:
        return score_as_feedback(self._metric, inputs=inputs, outputs=outputs, expectations=expectations,
                                 trace=trace, name=self.name, threshold=self.threshold)

    def register(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"scorer {self.name!r}: MLflow registers only built-in and @scorer-decorated scorers, rebuilt from their "
            "source text, which cannot carry a judge's LM. Register a @scorer function that builds this scorer "
            "inside its body (imports included), with MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS=true on a store you trust: "
            "the recipe is in docs/cli.md, 'Registering for monitoring'")


def _error_feedback(name: str, source: AssessmentSource, code: str, message: str) -> Feedback:
    return Feedback(name=name, source=source, error=AssessmentError(error_code=code, error_message=message))


def rationale_of(metric: Metric, result: Any) -> str:
    """What decided the score: the metric's explanation (a ``CompiledJudge``'s names the calibrated value, the
    calibrator, and the judge's own score and words on that raw score, undefined results included)."""
    return metric.explain(result)


def score_as_feedback(metric: Metric, *, inputs: Any = None, outputs: Any = None, expectations: Any = None,
                      trace: Any = None, name: str | None = None, judge: str | None = None,
                      threshold: float | None = None) -> Feedback:
    """Score one MLflow evaluation row with ``metric``: its Feedback, or a Feedback with an ``error`` naming
    the missing or unreadable field (no score is made up). ``name`` is the Feedback's (default
    ``feedback_name(metric)``), ``judge`` the judge its source names (default the same). With ``threshold``
    the value is MLflow's ``"yes"`` (score at or above it) or ``"no"``, the score kept in
    ``metadata["score"]``, as MLflow's Ragas scorers give it: MLflow's summary then shows a pass rate."""
    judge = judge or feedback_name(metric)
    name = name or judge
    trace_id = getattr(getattr(trace, "info", None), "trace_id", None)
    where = f" (trace {trace_id})" if trace_id else ""
    try:
        sample = metric.validate_sample(sample_fields(inputs, outputs, expectations, trace))
    except SampleValidationError as err:  # its message names the metric and the field; the hint, the fix
        return _error_feedback(name, judge_source(judge, metric), "MISSING_FIELD", f"{missing_field_message(err)}{where}")
    except MlflowFieldError as err:
        return _error_feedback(name, judge_source(judge, metric), "UNREADABLE_FIELD", f"{metric.name}: {err}{where}")
    with untraced():
        result = metric.score(sample)
    source = judge_source(judge, metric, result)
    score = float(result.score)
    if not math.isfinite(score):
        return _error_feedback(name, source, "UNDEFINED_SCORE", f"{metric.name}{where}: score {score} "
                               f"({result.get('undefined_reason') or 'no reason given'})")
    raw_score = float(result.raw_score) if isinstance(metric, CompiledJudge) else score
    metadata = {"judge": metric.name, "judge_lm": result.get("judge_lm") or lm_name(metric),
                "raw_value": repr(score), "raw_score": repr(raw_score)}
    if isinstance(metric, CompiledJudge):
        metadata["checksum"] = metric.get_params()["checksum"]
        if metric.calibrator.kind is not None:
            metadata["calibrated_probability"] = repr(score)
            # a calibrator that dropped the judge's score: two such columns are cheap signals, not two judges
            metadata["judge_score_used"] = str(bool(metric.calibrator.use_raw)).lower()
            metadata["calibrator"] = metric.calibrator.describe()
    undefined = result.get("undefined_reason")
    if undefined:  # the judge did not judge (e.g. an empty answer scored its floor): the rationale says so
        metadata["undefined_reason"] = str(undefined)
    if result.get("degraded"):  # scored from fewer steps or judges than designed: which and why
        metadata["degraded"] = str(result.degraded)
    value: Any = round(score, VALUE_DIGITS)
    if threshold is not None:
        metadata.update(threshold=repr(threshold), score=repr(score))
        value = CategoricalRating.YES if score >= threshold else CategoricalRating.NO
    return Feedback(name=name, value=value, rationale=rationale_of(metric, result), source=source, metadata=metadata)


def check_threshold(threshold: Any) -> float | None:
    """``threshold`` as a float in [0, 1], or None; ValueError naming it otherwise."""
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be a number in [0, 1] (every score is), got {threshold!r}")
    return float(threshold)


def as_mlflow_scorer(metric: Metric | str | Path, *, name: str | None = None, lm: Any = None,
                     embeddings: Any = None, run_dir: str | Path = "runs", threshold: float | None = None,
                     aggregations: list[Any] | None = None) -> DspyJudgesScorer:
    """An MLflow GenAI scorer (``mlflow.genai.scorers.Scorer``) scoring with ``metric``: a metric of the
    catalogue or a ``CompiledJudge`` (used as given), the path of a compiled judge's JSON file, or the
    URI of a model logged by ``judges_app.tracking.log_compiled_judge`` (``models:/...``, ``runs:/...``,
    read from ``default_tracking_uri(run_dir)``, which must answer at once: MLflow's client would retry a
    server that is down for minutes). ``lm`` / ``embeddings`` are attached to a loaded judge. The scorer's
    name is ``name`` or ``feedback_name`` (``<short name>_cal`` for a compiled judge). ``threshold``: pass/fail
    Feedback (``"yes"`` / ``"no"``, the score in its metadata), as MLflow's built-in judges give;
    ``aggregations``: MLflow's (``["mean", "p90"]`` ...), as every MLflow scorer takes them."""
    options = {"name": name, "threshold": threshold, "aggregations": aggregations}
    if isinstance(metric, Metric):
        return DspyJudgesScorer(metric, **options)
    if not isinstance(metric, (str, Path)):
        raise TypeError(f"as_mlflow_scorer: metric must be a Metric, a compiled judge's .json path or a model URI, "
                        f"got {type(metric).__name__}")
    text = str(metric)
    if text.startswith(MODEL_URI_SCHEMES):
        try:  # load_compiled_judge checks the store, and a model registry of its own if one is set, at once
            return DspyJudgesScorer(load_compiled_judge(text, lm=lm, embeddings=embeddings, run_dir=run_dir),
                                    **options)
        except MlflowSourceError as err:
            raise MlflowSourceError(f"as_mlflow_scorer: cannot load {text}: {err}") from None
    if not Path(text).is_file():
        raise ValueError(f"as_mlflow_scorer: {text!r} is neither a compiled judge file nor a model URI "
                         f"({', '.join(MODEL_URI_SCHEMES)})")
    return DspyJudgesScorer(CompiledJudge.load(text, lm=lm, embeddings=embeddings), **options)
