"""A compiled judge: a judge (compiled or not) plus its score calibrator, scored like any metric and saved
as JSON (never a pickle).

    compiled.save("faithfulness.json"); CompiledJudge.load("faithfulness.json", lm=lm)
    compiled.score(sample).score       # calibrated; .raw_score is the judge's own

The file records the LM the judge was compiled and calibrated with (``report["lm"]``): its demos and its
calibrator fit that LM's scores. Loading it with another LM warns (``CompiledLMWarning``), or refuses with
``strict=True`` (``CompiledLMError``); a judge loaded without an LM is checked the first time it scores.

A judge aligned with ``optimizer="memory"`` carries its episodic memory (``calibration.memory``): the
labelled items whose nearest ones become demos at scoring time, saved under ``"memory"``.

Must not import or call anything a file names beyond the catalogue's metric classes.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import warnings
from pathlib import Path
from typing import Any

import dspy
import numpy as np

from calibration.fitting.calibrators import Calibrator
from calibration.fitting.memory import EpisodicMemory
from calibration.fitting.signals import feature_matrix
from judges.lm.embeddings import embedder_identity
from judges.lm.files import EMBEDDED
from judges.lm.verifier import EMBEDDED_INT8
from judges.lm.resolve import lm_label, lm_name, resolve_lm
from judges.metrics.base import Judge, Metric
from judges.metrics.catalogue import class_names
from judges.run.records import jsonable, write_replacing

FORMAT = "dspy-judges/compiled-judge"
FORMAT_VERSION = 1


class CompiledLMWarning(UserWarning):
    """A compiled judge runs with another LM than the one it was compiled and calibrated with."""


class CompiledLMError(ValueError):
    """``strict=True``: a compiled judge was loaded with another LM than the one it was compiled with."""


class CompiledJudge(Metric):
    """A judge (compiled or not) plus a score calibrator, usable like any metric and saved as JSON."""

    def __init__(self, judge: Judge, calibrator: Calibrator | None = None, schema: dict[str, Any] | None = None,
                 report: dict[str, Any] | None = None, memory: EpisodicMemory | None = None, *,
                 strict: bool = False):
        self.judge = judge
        self.strict = strict
        self._lm_checked = False
        self.memory = memory
        self.calibrator = calibrator or Calibrator(None, binary=True)
        self.schema = schema or {"kind": "binary", "low": 0.0, "high": 1.0}
        self.report = report or {}
        self.required_fields = judge.required_fields
        self.allow_empty = judge.allow_empty
        self.sample_type = judge.sample_type
        self.needs_lm, self.needs_embeddings = judge.needs_lm, judge.needs_embeddings or (
            "embedding_similarity" in self.calibrator.features) or memory is not None

    @property
    def name(self) -> str:
        return self.alias or self.judge.name

    @property
    def judge_lm(self) -> Any:
        """The judge's own LM (None: the run's), as for any judge; what Ray workers rebuild it with."""
        return self.judge.judge_lm

    @property
    def judge_adapter(self) -> Any:
        """The judge's own adapter (None: the one its LM calls for), as run files record it."""
        return getattr(self.judge, "judge_adapter", None)

    @property
    def embeddings(self) -> Any:
        """The judge's own embeddings setting (None: the run's)."""
        return getattr(self.judge, "embeddings", None)

    @property
    def uses_run_embedder(self) -> bool:
        """Whether a feature embeds with the run's embedder (``embedding_similarity`` does) whatever the
        judge's own: the run file then records that embedder too."""
        return "embedding_similarity" in self.calibrator.features

    def model_identity(self) -> dict[str, Any]:
        """The judge's own models (a verifier's weights), and the memory's embedder when it has one of its
        own (else it embeds with the run's, which the run file records as this judge's embedder)."""
        identity = dict(self.judge.model_identity())
        memory = self.memory.embeddings if self.memory is not None else None
        if memory is not None and memory is not self.embeddings:
            identity["memory_embedder"] = embedder_identity(memory)
        return identity

    def get_params(self) -> dict[str, Any]:
        """What identifies this compiled judge (run files, MLflow params): the judge's class and settings and
        the checksum of the whole compiled program (instructions, demos, calibrator)."""
        body = self.to_dict()
        return {"judge": body["judge"]["class"], "judge_params": body["judge"]["params"], "checksum": body["checksum"]}

    @property
    def compiled_lm(self) -> str | None:
        """The name of the LM this judge was compiled and calibrated with (None: no LM step, or an older file)."""
        return self.report.get("lm") if isinstance(self.report, dict) else None

    def check_lm(self, running: str | None) -> None:
        """Warn (or, ``strict``, raise ``CompiledLMError``) when ``running`` is not the LM it was compiled with."""
        self._lm_checked = True
        if running is None or self.compiled_lm is None or running == self.compiled_lm:
            return
        message = (f"{self.name} was compiled and calibrated with the LM {self.compiled_lm} and runs with {running}: "
                   f"its demos and calibrator fit the other LM's scores (calibrate again with this LM)")
        if self.strict:
            raise CompiledLMError(message)
        warnings.warn(message, CompiledLMWarning, stacklevel=3)

    def features_of(self, sample, result) -> np.ndarray | None:
        return feature_matrix(self.calibrator.features, [sample], [result])

    def _score(self, sample) -> dspy.Prediction:
        if not self._lm_checked and self.needs_lm:
            self.check_lm(lm_name(resolve_lm(self.judge.judge_lm)))
        program = self.memory.program_for(self.judge, sample) if self.memory is not None else self.judge
        result = program.score(sample)
        calibrated = float(self.calibrator.predict([result.score], self.features_of(sample, result))[0])
        out = dspy.Prediction(**{k: v for k, v in result.items() if k != "score"})
        out["score"], out["raw_score"] = calibrated, float(result.score)
        return out

    def uncalibrated(self) -> CompiledJudge:
        """The compiled program as it scores, memory included, without the calibrator (raw scores)."""
        plain = CompiledJudge(self.judge, None, self.schema, self.report, self.memory, strict=self.strict)
        plain._lm_checked = self._lm_checked
        return plain

    def label_value(self, score: float) -> float:
        """A calibrated score on the human label's own scale (e.g. 1-5 for SummEval)."""
        return self.schema["low"] + score * (self.schema["high"] - self.schema["low"])

    def feedback(self, result: dspy.Prediction) -> str:
        """The calibrated score, what calibrated it and from what, then the judge's own explanation of its raw
        score (its reasons read the raw score: "faithfulness = 0.40 (mean; ...)" is the judge's, not the
        calibrated value)."""
        own = dspy.Prediction(**{k: v for k, v in result.items() if k not in ("score", "raw_score")})
        own["score"] = result.get("raw_score", result.score)
        explained = self.judge.explain(own)
        if self.calibrator.kind is None:
            return explained
        fitted = self.report.get("calibrator", {}) if isinstance(self.report, dict) else {}
        source = (f", fitted on {fitted['fitted_on']} labelled items" + (f" of {fitted['fitted_on_sets']}"
                  if fitted.get("fitted_on_sets") else "")) if fitted.get("fitted_on") else ""
        if not self.calibrator.use_raw:  # the fitted calibrator dropped the judge's score: say so, never imply it
            signals = ", ".join(self.calibrator.features) or "no signal"
            return (f"{self.name} = {result.score:.2f}, from cheap signals only ({signals}; {self.calibrator.describe()}"
                    f"{source}): the calibrator does not use the judge's own score (it added nothing when fitted), "
                    f"so this value is not the judge's. The judge, for reference: {explained}")
        return (f"{self.name} = {result.score:.2f}, calibrated ({self.calibrator.describe()}{source}) from the "
                f"judge's own score {own.score:.2f}. The judge: {explained}")

    def explain(self, result: dspy.Prediction) -> str:
        """``feedback`` for every result, an undefined one too: the judge's own ``explain`` gives its raw score
        and reason beside the calibrated value and the calibrator."""
        return self.feedback(result)

    # --- JSON, no pickle ---------------------------------------------------------------------------
    def to_dict(self, relative_to: str | Path | None = None) -> dict[str, Any]:
        """The compiled judge as JSON values; a model folder it names (a fine-tuned verifier) inside
        ``relative_to`` (the folder the file is saved in) is written relative to it, so the run folder can move."""
        params = jsonable(self.judge.get_params())
        for key in MODEL_FOLDER_PARAMS:
            folder = params.get(key)
            if relative_to is not None and _is_folder_path(folder):
                try:
                    params[key] = Path(folder).resolve().relative_to(Path(relative_to).resolve()).as_posix()
                except ValueError:
                    params[key] = str(Path(folder).resolve())
        body = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "judge": {"class": f"{type(self.judge).__module__}.{type(self.judge).__qualname__}",
                      "params": params,
                      "program": jsonable(self.judge.dump_state()) if isinstance(self.judge, dspy.Module) else {}},
            "calibrator": self.calibrator.to_dict(),
            "label_schema": self.schema,
            "report": jsonable(self.report),
        }
        if self.memory is not None:
            body["memory"] = self.memory.to_dict()
        body["checksum"] = checksum(body)
        return body

    def save(self, path: str | Path) -> Path:
        text = json.dumps(self.to_dict(relative_to=Path(path).parent), ensure_ascii=False, indent=1)
        return write_replacing(path, lambda file: file.write_text(text, encoding="utf-8"))

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, lm: Any = None, embeddings: Any = None,
                  strict: bool = False, base: str | Path | None = None) -> CompiledJudge:
        """The compiled judge ``to_dict`` wrote. A relative model folder (a fine-tuned verifier) is found
        beside the file (``base``, its folder) first, then from the working directory."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a compiled judge file (expected format '{FORMAT}')")
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"compiled judge format version {data.get('version')} is not supported "
                             f"(this library reads version {FORMAT_VERSION})")
        if data.get("checksum") != checksum({k: v for k, v in data.items() if k != "checksum"}):
            raise ValueError("compiled judge file was modified after it was saved (checksum mismatch)")
        judge_data = data.get("judge")
        if not isinstance(judge_data, dict):
            raise ValueError("compiled judge file: 'judge' must be an object with 'class' and 'params'")
        judge_class = registered_judge_class(judge_data.get("class"))
        params = checked_params(judge_class, judge_data.get("params"))
        for key in MODEL_FOLDER_PARAMS:
            folder = params.get(key)
            if _is_folder_path(folder) and not Path(folder).is_absolute():
                found = [c for c in ([Path(base) / folder] if base is not None else []) + [Path(folder)] if c.is_dir()]
                if found:
                    params[key] = str(found[0].resolve())
        calibrator = Calibrator.from_dict(data.get("calibrator"))
        schema = data.get("label_schema")
        if (not isinstance(schema, dict) or schema.get("kind") not in ("binary", "ordinal", "continuous")
                or not all(isinstance(schema.get(k), (int, float)) for k in ("low", "high"))
                or not schema["high"] > schema["low"]):
            raise ValueError(f"compiled judge file: label_schema {schema!r} is not {{kind, low < high}}")
        accepted = inspect.signature(judge_class.__init__).parameters
        for resource, value in (("lm", lm), ("embeddings", embeddings)):
            if value is not None and resource in accepted:
                params[resource] = value
        judge = judge_class(**params)
        if judge_data.get("program"):
            try:
                judge.load_state(judge_data["program"])
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                raise ValueError(f"compiled judge file: its program does not fit {judge_class.__name__} "
                                 f"({type(err).__name__}: {err}); steps are {[n for n, _ in judge.named_predictors()]}") from None
        memory = EpisodicMemory.from_dict(data["memory"], embeddings=embeddings) if data.get("memory") else None
        compiled = cls(judge, calibrator, schema, data.get("report"), memory, strict=strict)
        if lm is not None and compiled.needs_lm:
            compiled.check_lm(lm_label(lm))
        return compiled

    @classmethod
    def load(cls, path: str | Path, *, lm: Any = None, embeddings: Any = None, strict: bool = False) -> CompiledJudge:
        if Path(path).is_dir():
            raise ValueError(f"{path} is a directory, not a compiled judge file")
        if Path(path).exists() and not Path(path).is_file():
            raise ValueError(f"{path} is not a regular file (a device, pipe or socket), not a compiled judge file")
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err.msg}") from None
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not text (a binary file?), not a compiled judge file") from None
        except RecursionError:
            raise ValueError(f"{path} is nested too deeply to be a compiled judge file") from None
        return cls.from_dict(data, lm=lm, embeddings=embeddings, strict=strict, base=Path(path).parent)


#: Judge settings that may name a model folder on disk (a fine-tuned verifier).
MODEL_FOLDER_PARAMS = ("verifier", "multilingual_verifier")


def _is_folder_path(value: Any) -> bool:
    """A judge setting that names a model folder rather than a shipped model ("embedded", "embedded-int8")."""
    return isinstance(value, str) and value not in (EMBEDDED, EMBEDDED_INT8) and bool(value.strip())


def registered_judge_class(name: Any) -> type[Metric]:
    """The catalogue's metric class whose dotted name is ``name`` (``judges.metrics.rag.answer.Faithfulness``,
    or the name files saved before the library had rooms carry, ``judges.rag.Faithfulness``). Nothing is
    imported or called on the way: a name that is not one of the library's metric classes
    (``judges.run.run_file.RunFile``, ``judges_app.cli.main``, ``os.system``) is refused."""
    classes = class_names()
    if not isinstance(name, str) or name not in classes:
        raise ValueError(f"refusing to load judge class {name!r}: not one of the library's metric classes "
                         "(judges.metrics.catalogue.metric_classes())")
    return classes[name]


def checked_params(judge_class: type, params: Any) -> dict[str, Any]:
    """``params`` checked against ``judge_class``'s constructor before it is called: a JSON object whose
    keys are named settings of the constructor (no runtime resource such as ``lm``), with every
    required setting present. A setting the class added later (``saved_before``) and the file lacks takes
    the value the judge was saved with, not today's default."""
    if not isinstance(params, dict):
        raise ValueError(f"compiled judge file: the params of {judge_class.__name__} must be an object, "
                         f"got {type(params).__name__}")
    signature = inspect.signature(judge_class.__init__)
    settings = {name for name, p in signature.parameters.items()
                if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    unknown = sorted(k for k in params if k not in settings or k in judge_class._runtime_params)
    if unknown:
        raise ValueError(f"{judge_class.__name__} does not take the saved parameters {unknown} in this version")
    missing = sorted(name for name in settings - set(judge_class._runtime_params)
                     if signature.parameters[name].default is inspect.Parameter.empty and name not in params)
    if missing:
        raise ValueError(f"compiled judge file: {judge_class.__name__} needs the parameters {missing}")
    return {**getattr(judge_class, "saved_before", {}), **params}


def checksum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
