"""People's labels kept in MLflow: human feedback on traces read as a ``LabelledSet``, and labels written back.

    data, skipped = labels_from_mlflow("my-app", assessment="correct")     # HUMAN Feedback named "correct"
    print(skipped.summary())                                              # traces left out, and why
    export_pool("my-app", "pool.jsonl")                                   # unlabelled traces for `label`
    log_label(trace_id, name="correct", value=1, labeller="ana")          # a label back onto its trace

A trace gives the sample fields ``judges_app.mlflow_scorers.sample_fields`` reads (root span inputs and
outputs, RETRIEVER documents, the trace's expectations) and its label is the latest valid HUMAN
``Feedback`` of that name: a boolean, a number, or a yes/no, true/false, pass/fail word. A trace without
the fields the judge needs is skipped and counted, never guessed; so is a judge's own trace (a scorer's,
or a call of one of our judges traced by DSPy autolog), which is not the app's; a label of another shape
is an error naming the trace and the value.

Owns: reading traces and feedback from a tracking store, writing labels to it. Must not score or fit.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import AssessmentSource, Expectation, Feedback, SpanType
from mlflow.exceptions import MlflowException
from mlflow.tracing.constant import TraceTagKey

from calibration.data.labelled import LABEL_KINDS, LabelledSet
from judges.data.dataset import EvaluationDataset
from judges.metrics.catalogue import class_names
from judges.run.records import write_replacing
from judges_app.mlflow_fields import MlflowFieldError, sample_fields
from judges_app.tracking import MlflowSourceError, check_reachable

#: Human feedback words read as binary labels.
TRUE_WORDS = ("yes", "y", "true", "pass", "passed", "correct", "good", "1")
FALSE_WORDS = ("no", "n", "false", "fail", "failed", "incorrect", "bad", "0")
#: The pool column that says which trace a pool row came from.
TRACE_ID = "trace_id"
#: Why a judge's own trace is left out (``SkipReport.skipped``).
JUDGE_TRACE = "a judge's own call, not the app's"


@dataclass
class SkipReport:
    """What reading an experiment's traces found: how many, how many labelled, and every trace left out
    with the reason (``skipped[reason] = [trace ids]``)."""

    traces: int = 0
    labelled: int = 0
    pooled: int = 0  # export_pool: traces written to the pool (unlabelled)
    without_feedback: list[str] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, trace_id: str) -> None:
        self.skipped.setdefault(reason, []).append(trace_id)

    @property
    def n_skipped(self) -> int:
        return sum(len(ids) for ids in self.skipped.values())

    def summary(self) -> str:
        if self.pooled:
            parts = [f"{self.traces} traces read, {self.pooled} written to the pool"]
        else:
            parts = [f"{self.traces} traces read, {self.labelled} labelled",
                     f"{len(self.without_feedback)} without the feedback"]
        parts += [f"{len(ids)} skipped: {reason} (e.g. {ids[0]})" for reason, ids in self.skipped.items()]
        return "; ".join(parts)


# --- the tracking store ----------------------------------------------------------------------------
def tracking_client(tracking_uri: str | None = None) -> tuple[mlflow.MlflowClient, str]:
    """A client for ``tracking_uri`` (default: MLflow's current one), checked to answer."""
    uri = tracking_uri or mlflow.get_tracking_uri()
    check_reachable(uri)
    return mlflow.MlflowClient(tracking_uri=uri), uri


def experiment_id(client: mlflow.MlflowClient, experiment: str) -> str:
    """The id of the active experiment named ``experiment`` (or whose id it is)."""
    if not isinstance(experiment, str) or not experiment.strip():
        raise MlflowSourceError(f"experiment must be a name or an id, got {experiment!r}")
    found = client.get_experiment_by_name(experiment)
    if found is None and experiment.isdigit():
        try:
            found = client.get_experiment(experiment)
        except MlflowException:
            found = None
    if found is None or found.lifecycle_stage != "active":
        raise MlflowSourceError(f"no active MLflow experiment {experiment!r} at {client.tracking_uri}")
    return found.experiment_id


def search_traces(client: mlflow.MlflowClient, experiment: str, filter_string: str | None = None) -> Iterator[Any]:
    """Every trace of ``experiment`` (matching ``filter_string``), spans and assessments included."""
    location = experiment_id(client, experiment)
    token = None
    while True:
        try:
            page = client.search_traces(locations=[location], filter_string=filter_string, max_results=500,
                                        include_spans=True, page_token=token)
        except MlflowException as err:
            raise MlflowSourceError(f"searching the traces of {experiment!r} failed: {err.message}") from None
        yield from page
        token = page.token
        if not token:
            return


# --- one trace -------------------------------------------------------------------------------------
def _latest_valid(assessments: Sequence[Any]) -> Any:
    live = [a for a in assessments if a.valid is not False]
    return max(live, key=lambda a: a.create_time_ms or 0) if live else None


def human_feedback(trace: Any, assessment: str) -> Feedback | None:
    """The latest valid HUMAN ``Feedback`` named ``assessment`` on ``trace``, or None."""
    return _latest_valid([a for a in trace.info.assessments or [] if isinstance(a, Feedback)
                          and a.name == assessment and a.source is not None and a.source.source_type == "HUMAN"])


def expectations_of(trace: Any) -> dict[str, Any]:
    """The trace's expectations, the latest valid one per name."""
    names = {a.name for a in trace.info.assessments or [] if isinstance(a, Expectation)}
    latest = {name: _latest_valid([a for a in trace.info.assessments if isinstance(a, Expectation) and a.name == name])
              for name in sorted(names)}
    return {name: expectation.value for name, expectation in latest.items() if expectation is not None}


def _root(trace: Any) -> Any:
    return next((span for span in trace.data.spans if span.parent_id is None), None)


def is_judge_trace(trace: Any) -> bool:
    """Whether ``trace`` records a judge rather than the app: MLflow tagged it as a scorer's, its root span is
    an EVALUATOR, or its root span is a call of one of our catalogue's judges (``Faithfulness.forward``, as
    DSPy autolog names it; our scorers no longer trace, but older runs did)."""
    if TraceTagKey.SOURCE_SCORER_NAME in (trace.info.tags or {}):
        return True
    root = _root(trace)
    if root is None:
        return False
    if root.span_type == SpanType.EVALUATOR:
        return True
    owner, _, method = root.name.rpartition(".")
    return method in ("forward", "__call__") and owner in _judge_class_names()


@functools.cache
def _judge_class_names() -> frozenset[str]:
    return frozenset(cls.__name__ for cls in class_names().values())


def trace_sample_fields(trace: Any) -> dict[str, Any]:
    """Sample fields from a trace: its root span's inputs and outputs, its RETRIEVER documents, its
    expectations (``judges_app.mlflow_scorers.sample_fields``)."""
    root = _root(trace)
    inputs, outputs = (root.inputs, root.outputs) if root is not None else (None, None)
    try:
        return sample_fields(inputs, outputs, expectations_of(trace), trace)
    except MlflowFieldError as err:
        raise MlflowSourceError(f"trace {trace.info.trace_id}: {err}") from None


def label_value(value: Any, trace_id: str, kind: str) -> float | int:
    """A human feedback value as a label of ``kind``: booleans (binary), numbers, yes/no-like words
    (binary) or numeric text; anything else is an error naming the trace and the value."""
    if isinstance(value, bool):
        if kind == "binary":
            return int(value)
    elif isinstance(value, (int, float)):
        if math.isfinite(value):
            return value
    elif isinstance(value, str):
        word = value.strip().lower()
        if kind == "binary" and word in TRUE_WORDS + FALSE_WORDS:
            return int(word in TRUE_WORDS)
        try:
            number = float(word)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return int(number) if number.is_integer() else number
    expected = "a boolean, 0/1 or a yes/no, true/false, pass/fail word" if kind == "binary" else "a finite number"
    raise MlflowSourceError(f"trace {trace_id}: human feedback value {value!r} ({type(value).__name__}) is not a "
                            f"{kind} label; expected {expected}")


def _missing(fields: dict[str, Any], required: Sequence[str]) -> list[str]:
    return [name for name in required if fields.get(name) in (None, "", [])]


def labelled_rows(traces: Sequence[Any] | Iterator[Any], *, assessment: str, label_kind: str = "binary",
                  required_fields: Sequence[str] = ("response",)) -> tuple[list[dict[str, Any]], SkipReport]:
    """One row per trace with the feedback: sample fields, ``label``, ``rationale`` and ``trace_id``."""
    if label_kind not in LABEL_KINDS:
        raise ValueError(f"label_kind={label_kind!r} is not one of {', '.join(LABEL_KINDS)}")
    rows, report = [], SkipReport()
    for trace in traces:
        report.traces += 1
        trace_id = trace.info.trace_id
        if is_judge_trace(trace):
            report.skip(JUDGE_TRACE, trace_id)
            continue
        feedback = human_feedback(trace, assessment)
        if feedback is None:
            report.without_feedback.append(trace_id)
            continue
        if feedback.error is not None and feedback.value is None:
            raise MlflowSourceError(f"trace {trace_id}: human feedback {assessment!r} holds an error, not a label "
                                    f"({feedback.error.error_message})")
        label = label_value(feedback.value, trace_id, label_kind)
        fields = trace_sample_fields(trace)
        missing = _missing(fields, required_fields)
        if missing:
            report.skip(f"no {', '.join(missing)}", trace_id)
            continue
        rows.append({**fields, "label": label, "rationale": feedback.rationale, TRACE_ID: trace_id})
    report.labelled = len(rows)
    return rows, report


def labelled_set(rows: list[dict[str, Any]], report: SkipReport, *, name: str, label_kind: str = "binary",
                 label_range: tuple[float, float] | None = None, source: str = "") -> LabelledSet:
    """``labelled_rows``' rows as a ``LabelledSet`` whose ``meta`` keeps each item's trace id."""
    if not rows:
        raise MlflowSourceError(f"{name}: no trace has usable human feedback ({report.summary()})")
    trace_ids = [row.pop(TRACE_ID) for row in rows]
    try:
        data = LabelledSet.from_records(rows, kind=label_kind, name=name, source=source, label_range=label_range,
                                        row_names=[f"trace {t}" for t in trace_ids])
    except ValueError as err:
        raise MlflowSourceError(str(err)) from None
    data.meta = [{**(data.meta[i] if data.meta else {}), TRACE_ID: t} for i, t in enumerate(trace_ids)]
    return data


def labels_from_mlflow(experiment: str, *, assessment: str, filter_string: str | None = None,
                       tracking_uri: str | None = None, label_kind: str = "binary",
                       label_range: tuple[float, float] | None = None,
                       required_fields: Sequence[str] = ("response",)) -> tuple[LabelledSet, SkipReport]:
    """The traces of ``experiment`` (a name or id) with HUMAN feedback ``assessment``, as a ``LabelledSet``
    (one item per trace: the latest such feedback), plus the report of traces left out: those without
    the feedback, and those lacking one of ``required_fields`` (counted, never guessed)."""
    if not isinstance(assessment, str) or not assessment.strip():
        raise ValueError(f"labels_from_mlflow: assessment must be a feedback name, got {assessment!r}")
    client, uri = tracking_client(tracking_uri)
    rows, report = labelled_rows(search_traces(client, experiment, filter_string), assessment=assessment,
                                 label_kind=label_kind, required_fields=required_fields)
    data = labelled_set(rows, report, name=f"{experiment}/{assessment}", label_kind=label_kind,
                        label_range=label_range, source=uri)
    return data, report


# --- pools and labels written back ---------------------------------------------------------------------
def export_pool(experiment: str, path: str | Path, *, filter_string: str | None = None,
                tracking_uri: str | None = None, required_fields: Sequence[str] = ("response",)) -> SkipReport:
    """Write the traces of ``experiment`` as a pool JSONL for ``dspy-judges label`` (sample fields plus
    ``trace_id``), skipping and counting traces without ``required_fields``. Written whole or not at all."""
    client, _ = tracking_client(tracking_uri)
    report, rows = SkipReport(), []
    for trace in search_traces(client, experiment, filter_string):
        report.traces += 1
        if is_judge_trace(trace):
            report.skip(JUDGE_TRACE, trace.info.trace_id)
            continue
        fields = trace_sample_fields(trace)
        missing = _missing(fields, required_fields)
        if missing:
            report.skip(f"no {', '.join(missing)}", trace.info.trace_id)
            continue
        rows.append({**fields, TRACE_ID: trace.info.trace_id})
    if not rows:
        raise MlflowSourceError(f"{experiment}: no trace has the fields {list(required_fields)} ({report.summary()})")
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    write_replacing(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))
    report.pooled = len(rows)
    return report


def pool_with_trace_ids(path: str | Path) -> tuple[EvaluationDataset, list[str]]:
    """A pool JSONL whose every row carries a ``trace_id``: the samples and, in order, their trace ids."""
    rows, trace_ids = [], []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise ValueError(f"{path}: line {number} is not valid JSON") from None
        except RecursionError:
            raise ValueError(f"{path}: line {number} is nested too deeply to read") from None
        if not isinstance(row, dict) or not isinstance(row.get(TRACE_ID), str) or not row[TRACE_ID]:
            raise ValueError(f"{path}: line {number} has no '{TRACE_ID}' (export the pool with export_pool)")
        trace_ids.append(row.pop(TRACE_ID))
        rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no items")
    return EvaluationDataset(rows), trace_ids


def log_label(trace_id: str, *, name: str, value: Any, labeller: str, rationale: str | None = None,
              tracking_uri: str | None = None) -> Any:
    """Log a person's label on its trace as HUMAN feedback ``name`` from ``labeller``; the Assessment."""
    if not isinstance(labeller, str) or not labeller.strip():
        raise ValueError(f"log_label: labeller must name the person, got {labeller!r}")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri or previous)
    try:
        return mlflow.log_feedback(trace_id=trace_id, name=name, value=value, rationale=rationale,
                                   source=AssessmentSource(source_type="HUMAN", source_id=labeller))
    finally:
        mlflow.set_tracking_uri(previous)
