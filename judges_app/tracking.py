"""MLflow tracking for evaluate / calibrate / experiment runs; nothing needs a server by default.

    with tracked_run("faithfulness", "bootstrap-platt", params={"fit": {"optimizer": "bootstrap"}}):
        result = evaluate(dataset, [judge])      # DSPy calls inside the run become MLflow traces
        log_evaluation(result)                   # <metric>.mean, .std, ... plus the per-sample JSONL
        log_agreement(report, "calibrated")      # calibrated.accuracy, calibrated.accuracy.ci_low, ...
        info = log_compiled_judge(compiled)      # JSON artifact + pyfunc model
    compiled = load_compiled_judge(info.model_uri, lm=lm)

The store is ``$MLFLOW_TRACKING_URI`` when set (a server, a database), else ``sqlite:///runs/mlflow.db``
with artifacts in ``runs/mlartifacts/`` beside it (MLflow's own default would put them in ``./mlruns``).

Must not score or fit: it logs what the other floors produced.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import dspy
import mlflow
import mlflow.pyfunc
import numpy as np
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.tracking._tracking_service import utils as tracking_utils
from mlflow.types.schema import Array, ColSpec, Schema
from mlflow.utils.autologging_utils import autologging_is_disabled

import judges
from calibration.agreement.record import CalibrationRun
from calibration.agreement.stats import AgreementReport
from calibration.fitting.compiled import CompiledJudge
from judges.run.records import jsonable
from judges.run.result import EvaluationResult
from judges.run.usage import usage_tokens

MAX_PARAM_VALUE = 6000  # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
MAX_KEY = 250  # mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH
ARTIFACT_KEY = "compiled_judge"  # the JSON's name among the pyfunc model's artifacts
#: The logged model's code (MLflow's models-from-code: a file to run on loading, no pickle).
MODEL_CODE = ("import mlflow\nfrom judges_app.tracking import CompiledJudgeModel\n"
              "mlflow.models.set_model(CompiledJudgeModel())\n")


def default_tracking_uri(run_dir: str | Path = "runs") -> str:
    """``$MLFLOW_TRACKING_URI`` if set, else a SQLite store ``<run_dir>/mlflow.db`` (run_dir is created)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    folder = Path(run_dir).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


class MlflowSourceError(ValueError):
    """The tracking store cannot give what was asked: no such experiment, a server that does not answer,
    feedback that is not a label, a model it cannot serve. The message says which trace and value, or which
    address."""


def check_reachable(tracking_uri: str, timeout: float = 5.0) -> None:
    """Raise MlflowSourceError at once when ``tracking_uri`` is a server that does not answer ``/health``
    within ``timeout`` seconds (MLflow's own client retries for minutes). Every entry point that points
    MLflow at a store passes here (``_using_tracking_uri``)."""
    if not tracking_uri or not tracking_uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=timeout) as answer:
            if answer.status == 200:
                return
            problem = f"HTTP {answer.status}"
    except (OSError, ValueError) as err:
        problem = str(err)
    raise MlflowSourceError(f"the MLflow tracking server {tracking_uri} does not answer ({problem})")


def tracking_problem(run_dir: str | Path = "runs", timeout: float = 5.0) -> str | None:
    """Why a run could not be logged where ``default_tracking_uri(run_dir)`` points, checked in a moment
    before any work (MLflow itself retries a read-only store for ~100 s, or fails after the work): a
    SQLite store whose folder, file or artifact folder is not writable, a file store likewise, or a
    tracking server that does not answer ``/health``. None when logging can go ahead."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(run_dir).absolute() / 'mlflow.db'}"
    if uri.startswith(("http://", "https://")):
        try:
            check_reachable(uri, timeout)
        except MlflowSourceError as err:
            return str(err)
        return None
    if uri.startswith("sqlite:///") and ":memory:" not in uri:
        db = Path(unquote(uri[len("sqlite:///"):]).split("?")[0]).absolute()
        places = [db.parent, db.parent / "mlartifacts"]
    elif uri.startswith("file:") or "://" not in uri:
        places = [Path(unquote(uri.removeprefix("file://").removeprefix("file:"))).absolute()]
        db = None
    else:
        return None  # another store (a database server ...): MLflow reports its own errors
    for place in places:
        existing = next((p for p in (place, *place.parents) if p.exists()), None)
        if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            return f"MLflow cannot write to {place} (not writable)"
    if db is not None and db.exists() and not os.access(db, os.W_OK):
        return f"MLflow cannot write to {db} (read-only file)"
    return None


def metric_key(name: str) -> str:
    """``name`` as a metric/param key MLflow accepts everywhere: characters other than letters, digits and
    ``_ - . / space`` become ``_``; empty, ``.`` and ``..`` path segments are dropped or escaped."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"metric_key: expected a non-empty name, got {name!r}")
    cleaned = re.sub(r"[^\w.\- /]", "_", name.strip())
    parts = ["__" if part == ".." else part for part in cleaned.split("/") if part not in ("", ".")]
    key = "/".join(parts)
    if not key or len(key) > MAX_KEY:
        raise ValueError(f"metric_key: {name!r} gives an empty key or one over {MAX_KEY} characters")
    return key


def _slug(name: str) -> str:
    """A file-name-safe version of ``name`` (artifact folders)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "unnamed"


def flatten_params(params: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested dicts become dotted keys (made valid by ``metric_key``); non-scalar values are JSON; values are
    cut to MLflow's length limit."""
    flat: dict[str, str] = {}
    for name, value in params.items():
        key = metric_key(f"{prefix}.{name}" if prefix else str(name))
        if isinstance(value, dict) and value:
            items = flatten_params(value, key).items()
        elif isinstance(value, (str, int, float, bool, type(None))):
            items = [(key, str(value))]
        else:
            items = [(key, json.dumps(jsonable(value), ensure_ascii=False, sort_keys=True))]
        for k, v in items:
            if k in flat:
                raise ValueError(f"params: the key {k!r} occurs twice after flattening")
            flat[k] = v if len(v) <= MAX_PARAM_VALUE else v[: MAX_PARAM_VALUE - 3] + "..."
    return flat


def data_hash(items: Iterable[Any]) -> str:
    """A 16-hex-digit sha256 of a canonical JSON of ``items``: samples as ``to_dict()`` (so a sample and its
    dict hash alike), other pydantic models via ``model_dump()``, dicts and lists as they are."""
    if isinstance(items, (str, bytes, dict)):
        raise TypeError(f"data_hash: expected an iterable of items, got a {type(items).__name__}")

    def canonical(value: Any) -> Any:
        if hasattr(value, "model_dump") and hasattr(value, "to_dict"):
            return canonical(value.to_dict())
        if hasattr(value, "model_dump"):
            return canonical(value.model_dump())
        if isinstance(value, dict):
            return {str(k): canonical(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [canonical(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, (str, int, float, bool, type(None))):
            return value
        raise TypeError(f"data_hash: cannot hash a {type(value).__name__} (give dicts or pydantic models)")

    text = json.dumps([canonical(item) for item in items], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """For a local SQLite store: ``<db folder>/mlartifacts/<experiment>``; else None (the server decides)."""
    if not tracking_uri.startswith("sqlite:///") or ":memory:" in tracking_uri:
        return None
    db = Path(unquote(tracking_uri[len("sqlite:///"):]).split("?")[0]).absolute()
    return str(db.parent / "mlartifacts" / _slug(experiment))


@contextlib.contextmanager
def _using_tracking_uri(uri: str) -> Iterator[None]:
    """Point MLflow at ``uri`` inside the block; afterwards restore the URI and ``$MLFLOW_TRACKING_URI``
    as they were (``mlflow.set_tracking_uri`` also writes the environment variable)."""
    check_reachable(uri)  # a server that is down fails now, not after MLflow's minutes of retries
    previous, previous_env = getattr(tracking_utils, "_tracking_uri", None), os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)
        if previous_env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = previous_env


@contextlib.contextmanager
def tracked_run(experiment: str, run_name: str | None = None, *, params: dict[str, Any] | None = None,
                tags: dict[str, Any] | None = None, run_dir: str | Path = "runs",
                autolog: bool = True) -> Iterator[mlflow.ActiveRun]:
    """An MLflow run in ``experiment`` (created if missing) with ``params`` (flattened) and ``tags``; with
    ``autolog`` DSPy calls inside become traces of the run. The run ends FAILED if an exception escapes;
    the tracking URI and DSPy's settings are restored afterwards."""
    if not isinstance(experiment, str) or not experiment.strip():
        raise ValueError(f"tracked_run: experiment must be a non-empty name, got {experiment!r}")
    if mlflow.active_run() is not None:
        raise RuntimeError(f"tracked_run: run {mlflow.active_run().info.run_id} is still active; end it first")
    flat = flatten_params(params or {})
    uri = default_tracking_uri(run_dir)
    with _using_tracking_uri(uri):
        client = mlflow.MlflowClient(uri)
        found = client.get_experiment_by_name(experiment)
        if found is not None and found.lifecycle_stage != "active":
            raise ValueError(f"tracked_run: experiment {experiment!r} is deleted; restore it or pick another name")
        experiment_id = found.experiment_id if found else client.create_experiment(
            experiment, artifact_location=_artifact_location(uri, experiment))
        run = mlflow.start_run(experiment_id=experiment_id, run_name=run_name,
                               tags={str(k): str(v) for k, v in (tags or {}).items()})
        # switch DSPy autologging on only if it is off, and back off afterwards (autolog also turns DSPy's
        # usage tracking on globally: restored too)
        status, toggled = "FINISHED", autolog and autologging_is_disabled("dspy")
        usage_before = dspy.settings.track_usage
        try:
            if flat:
                mlflow.log_params(flat)
            if toggled:
                mlflow.dspy.autolog(silent=True)
            yield run
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        except BaseException:
            status = "FAILED"
            raise
        finally:
            mlflow.flush_trace_async_logging()  # traces reach this store before the URI changes back
            if toggled:
                mlflow.dspy.autolog(disable=True, silent=True)
                dspy.settings.configure(track_usage=usage_before)
            mlflow.end_run(status=status)


def _require_run(what: str) -> None:
    if mlflow.active_run() is None:  # MLflow's fluent API would silently start a run of its own
        raise RuntimeError(f"{what}: no active MLflow run; call it inside tracked_run(...)")


def log_evaluation(result: EvaluationResult, *, prefix: str = "") -> None:
    """Log ``result.summary()`` as metrics (``[prefix.]<metric>.mean`` ...) and the per-sample JSONL plus
    ``summary.json`` as artifacts under ``<prefix>/`` (``evaluation/`` without a prefix)."""
    if not isinstance(result, EvaluationResult):
        raise TypeError(f"log_evaluation: expected an EvaluationResult, got {type(result).__name__}")
    _require_run("log_evaluation")
    head = f"{prefix}." if prefix else ""
    summary = result.summary()
    metrics: dict[str, float] = {}
    for name in result.metric_names:
        for stat in ("mean", "std", "failures", "undefined", "lm_calls", "unrecorded_calls", "cached_calls", "input_tokens", "output_tokens", "cost",
                     "latency_p50", "latency_p95"):
            if summary[name][stat] is not None:
                metrics[metric_key(f"{head}{name}.{stat}")] = float(summary[name][stat])
    for stat in ("wall_seconds", "samples_per_second", "failures"):
        if summary["_overall"][stat] is not None:
            metrics[metric_key(f"{head}{stat}")] = float(summary["_overall"][stat])
    mlflow.log_metrics(metrics)
    folder = _slug(prefix) if prefix else "evaluation"
    with tempfile.TemporaryDirectory() as tmp:
        result.to_jsonl(Path(tmp) / "records.jsonl")
        (Path(tmp) / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
        mlflow.log_artifacts(tmp, artifact_path=folder)


def log_agreement(report: AgreementReport, prefix: str) -> None:
    """Log each statistic of an ``AgreementReport`` as ``<prefix>.<stat>`` with ``.ci_low``/``.ci_high``
    (None values skipped), ``<prefix>.n``, and the report as ``agreement/<prefix>.json``."""
    if not isinstance(report, AgreementReport):
        raise TypeError(f"log_agreement: expected an AgreementReport, got {type(report).__name__}")
    _require_run("log_agreement")
    metrics = {metric_key(f"{prefix}.n"): float(report.n)}
    for stat, values in report.stats.items():
        for suffix, field in (("", "value"), (".ci_low", "low"), (".ci_high", "high")):
            if values.get(field) is not None:
                metrics[metric_key(f"{prefix}.{stat}{suffix}")] = float(values[field])
    mlflow.log_metrics(metrics)
    mlflow.log_dict(report.to_dict(), f"agreement/{_slug(prefix)}.json")


def log_calibration(run: CalibrationRun, compiled: dict[str, CompiledJudge], run_file: Path,
                    report: Path | None = None) -> None:
    """Log a calibrate run: agreement per scorer, seconds, LM calls / tokens / cost per phase, the saved
    ``calibration_run.json``, each compiled judge (JSON + pyfunc model) and the HTML report's folder."""
    _require_run("log_calibration")
    for scorer, agreement_report in run.agreement.items():
        log_agreement(agreement_report, scorer)
    for scorer, seconds in run.meta.get("seconds", {}).items():
        mlflow.log_metric(metric_key(f"{scorer}.seconds"), seconds)
    for phase, usage in run.meta.get("usage", {}).items():
        mlflow.log_metric(metric_key(f"{phase}.lm_calls"), usage["lm_calls"])
        mlflow.log_metric(metric_key(f"{phase}.cached_calls"), usage.get("cached_calls", 0))
        for kind, count in usage_tokens(usage).items():
            mlflow.log_metric(metric_key(f"{phase}.{kind}"), count)
        if usage.get("cost") is not None:
            mlflow.log_metric(metric_key(f"{phase}.cost"), usage["cost"])
    mlflow.log_artifact(str(run_file))
    for label, judge in compiled.items():
        log_compiled_judge(judge, name=f"compiled_{label}")
    if report is not None:
        mlflow.log_artifacts(str(Path(report).parent), artifact_path="report")


class CompiledJudgeModel(mlflow.pyfunc.PythonModel):
    """A compiled judge as an MLflow pyfunc: ``predict`` takes a DataFrame of sample columns (user_input,
    response, retrieved_contexts, reference, ...) and returns the calibrated scores. The LM and embedder
    come from ``load_model(..., model_config={"judge_lm": ..., "judge_embeddings": ...})`` or else DSPy's
    settings (``dspy.context(lm=...)``) and the library's defaults."""

    def load_context(self, context) -> None:
        config = context.model_config or {}
        self.compiled = CompiledJudge.load(context.artifacts[ARTIFACT_KEY], lm=config.get("judge_lm"),
                                           embeddings=config.get("judge_embeddings"))

    def predict(self, context, model_input: pd.DataFrame, params=None) -> list[float]:
        rows = model_input.to_dict(orient="records") if hasattr(model_input, "to_dict") else list(model_input)
        samples = [{k: v for k, v in row.items() if not _missing(v)} for row in rows]
        return [float(self.compiled.score(sample).score) for sample in samples]


def _missing(value: Any) -> bool:
    """None or a pandas NaN (a column this row has no value for)."""
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


#: Sample field types a model signature can state, as MLflow column types.
SIGNATURE_TYPES = {"str | None": "string", "list[str] | None": Array("string")}


def judge_signature(compiled: CompiledJudge) -> ModelSignature | None:
    """The logged model's signature, from the judge's sample fields: the fields it needs as required columns,
    the other text fields as optional ones (MLflow drops columns a signature does not name), one score out.
    Given, so MLflow need not infer it from a prediction, which would call the judge's LM. None when a field
    the judge needs has a type a signature cannot state (e.g. a rubric mapping): MLflow then infers it."""
    columns = []
    for field_name, info in compiled.sample_type.model_fields.items():
        kind = SIGNATURE_TYPES.get(str(info.annotation))
        required = field_name in compiled.required_fields
        if kind is None:
            if required:
                return None
            continue
        columns.append(ColSpec(kind, field_name, required=required))
    return ModelSignature(inputs=Schema(columns), outputs=Schema([ColSpec("double")]))


def log_compiled_judge(compiled: CompiledJudge, *, name: str = "compiled_judge"):
    """Log a ``CompiledJudge`` as ``<name>.json`` in the run's artifacts and as a pyfunc model ``name``;
    returns MLflow's ``ModelInfo`` (``.model_uri`` loads it back)."""
    if not isinstance(compiled, CompiledJudge):
        raise TypeError(f"log_compiled_judge: expected a CompiledJudge, got {type(compiled).__name__}")
    _require_run("log_compiled_judge")
    with tempfile.TemporaryDirectory() as tmp:
        path = compiled.save(Path(tmp) / f"{_slug(name)}.json")
        mlflow.log_artifact(str(path))
        code = Path(tmp) / "compiled_judge_model.py"
        code.write_text(MODEL_CODE, encoding="utf-8")
        return mlflow.pyfunc.log_model(
            name=_slug(name), python_model=str(code), artifacts={ARTIFACT_KEY: str(path)},
            signature=judge_signature(compiled),
            model_config={"judge_lm": None, "judge_embeddings": None},  # keys load_model(model_config=) may set
            # explicit requirements: MLflow's inference would import-trace the model (slow, may hit the network)
            pip_requirements=[f"mlflow=={mlflow.__version__}", f"dspy=={dspy.__version__}",
                              f"dspy-judges=={judges.__version__}"])


def load_compiled_judge(model_uri: str, *, lm: Any = None, embeddings: Any = None, run_dir: str | Path = "runs"):
    """The ``CompiledJudge`` inside a model logged by ``log_compiled_judge`` (``models:/...``, ``runs:/...``
    or a local path), read from ``default_tracking_uri(run_dir)``, with ``lm``/``embeddings`` attached. A
    tracking server or registry that does not answer fails within seconds (``MlflowSourceError``)."""
    if str(model_uri).startswith("models:/"):
        check_reachable(os.environ.get("MLFLOW_REGISTRY_URI", ""))  # a registry of its own, when one is set
    with _using_tracking_uri(default_tracking_uri(run_dir)), tempfile.TemporaryDirectory() as tmp:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=tmp))
        flavor = mlflow.models.Model.load(str(local)).flavors.get("python_function", {})
        entry = (flavor.get("artifacts") or {}).get(ARTIFACT_KEY)
        if entry is None:
            raise ValueError(f"{model_uri} is not a compiled judge model (no '{ARTIFACT_KEY}' artifact)")
        return CompiledJudge.load(local / entry["path"], lm=lm, embeddings=embeddings)
