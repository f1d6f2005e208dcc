"""Our compile-and-calibrate method as an MLflow alignment optimizer: ``judge.align(traces, optimizer=...)``.

    judge = make_judge(name="correct", instructions="Is {{ outputs }} a correct answer to {{ inputs }}?", ...)
    aligned = judge.align(traces, optimizer=DspyJudgesAligner(lm=lm, optimizer="labeled"))
    aligned(inputs=..., outputs=...)          # Feedback from our compiled, calibrated judge

The traces' HUMAN feedback named like the judge are the labels (``judges_app.mlflow_labels``); the judge of
our catalogue that is fitted (``calibration.fitting.fit``) is the one given, or else an ``AspectCritic``
whose definition is the MLflow judge's instructions. The aligned judge is an MLflow ``Judge`` scoring with
the resulting ``CompiledJudge`` (its ``compiled`` attribute; ``alignment_report`` says which traces were
left out and why). It is named ``<judge's short name>_aln`` (or the aligner's ``name=``), never the human
label's name: its Feedback would otherwise fill the people's column in MLflow's UI.

Owns: the optimizer and the judge it returns. Must not implement fitting (``calibration.fitting``).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from mlflow.entities import Feedback
from mlflow.genai.judges.base import AlignmentOptimizer, Judge, JudgeField
from mlflow.genai.scorers.base import ScorerKind
from pydantic import PrivateAttr

from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.fit import fit
from judges.lm.resolve import lm_name
from judges.lm.served import litellm_model
from judges.metrics.base import Metric
from judges.metrics.custom import AspectCritic
from judges_app.mlflow_labels import SkipReport, labelled_rows, labelled_set
from judges_app.mlflow_scorers import ALIGNED, check_feedback_name, metric_identity, score_as_feedback, short_name

logger = logging.getLogger(__name__)


class CalibratedMlflowJudge(Judge):
    """An MLflow ``Judge`` that scores with a ``CompiledJudge`` (what ``DspyJudgesAligner.align`` returns).

    Its Feedback is ``judges_app.mlflow_scorers.score_as_feedback``'s: the calibrated score as value, under
    ``name`` (default ``<compiled judge's short name>_aln``), which may not be ``assessment``, the name of the
    human label it was aligned on."""

    metric_spec: dict[str, Any] = {}
    judge_instructions: str = ""
    _compiled: CompiledJudge = PrivateAttr()
    _report: SkipReport | None = PrivateAttr(default=None)

    def __init__(self, compiled: CompiledJudge, *, name: str | None = None, assessment: str | None = None,
                 instructions: str = "", report: SkipReport | None = None, **data: Any):
        name = check_feedback_name(short_name(compiled.name, ALIGNED) if name is None else name, assessment)
        super().__init__(name=name, metric_spec=metric_identity(compiled), judge_instructions=instructions, **data)
        self._compiled = compiled
        self._report = report

    @property
    def kind(self) -> ScorerKind:
        return ScorerKind.CLASS

    @property
    def compiled(self) -> CompiledJudge:
        return self._compiled

    @property
    def alignment_report(self) -> SkipReport | None:
        return self._report

    @property
    def instructions(self) -> str:
        return self.judge_instructions or f"dspy-judges {self._compiled.name}, compiled and calibrated"

    @property
    def feedback_value_type(self) -> Any:
        return float

    def get_input_fields(self) -> list[JudgeField]:
        return [JudgeField(name="inputs", description="the request the app answered", value_type=dict),
                JudgeField(name="outputs", description="the app's answer", value_type=dict),
                JudgeField(name="expectations", description="reference answer or facts, when the metric needs "
                                                            "them", value_type=dict)]

    def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: Any = None,
                 trace: Any = None) -> Feedback:
        return score_as_feedback(self._compiled, inputs=inputs, outputs=outputs, expectations=expectations,
                                 trace=trace, name=self.name, judge=short_name(self._compiled.name, ALIGNED))


def critic_for(judge: Judge, lm: Any = None) -> AspectCritic:
    """An ``AspectCritic`` judging what the MLflow ``judge``'s instructions describe (its template
    variables such as ``{{ outputs }}`` read as plain words)."""
    definition = re.sub(r"\{\{\s*(\w+)\s*\}\}", r"the \1", judge.instructions).strip()
    return AspectCritic(name=judge.name, definition=definition, lm=lm)


class DspyJudgesAligner(AlignmentOptimizer):
    """Align an MLflow judge with our method: compile our judge on the traces' human labels and calibrate
    it (``calibration.fitting.fit`` with ``optimizer``, ``calibrator``, ``seed`` and ``fit_options``).

    ``metric`` is the judge of our catalogue to fit (default: ``critic_for(judge, lm)``); ``lm`` the LM it judges
    with (default: the MLflow judge's own model, ``judging_lm``); ``label_kind`` is
    the feedback's scale ("binary": booleans / yes-no words / 0-1). The aligned judge is named ``name``,
    default ``<judge's short name>_aln``; the judge's own name is the human label's and is refused."""

    def __init__(self, metric: Metric | None = None, *, lm: Any = None, optimizer: Any = "labeled",
                 calibrator: str | None = "isotonic", label_kind: str = "binary", seed: int = 0,
                 name: str | None = None, **fit_options: Any):
        if metric is not None and not (isinstance(metric, Metric) and metric.needs_lm):
            raise TypeError(f"DspyJudgesAligner: metric must be an LLM judge of the catalogue, got {metric!r}")
        if name is not None:
            check_feedback_name(name, None)
        self.metric, self.lm, self.optimizer, self.name = metric, lm, optimizer, name
        self.calibrator, self.label_kind, self.seed = calibrator, label_kind, seed
        self.fit_options = fit_options

    def judging_lm(self, judge: Judge) -> Any:
        """The LM the fitted judge judges with: the aligner's ``lm=``, else the MLflow judge's own model (its
        model URI read as LiteLLM's ``openai:/gpt-4o-mini`` -> ``openai/gpt-4o-mini``), as MLflow's own
        aligners do. None only for a judge with no model, which then judges with the judges' setting."""
        if self.lm is not None:
            return self.lm
        model = getattr(judge, "model", None)
        return litellm_model(model) if isinstance(model, str) and model else None

    def align(self, judge: Judge, traces: list[Any]) -> CalibratedMlflowJudge:
        name = check_feedback_name(self.name or short_name(judge.name, ALIGNED), judge.name)  # before any fitting
        lm = self.judging_lm(judge)
        metric = self.metric if self.metric is not None else critic_for(judge, lm)
        own = metric.judge_lm
        logger.info("aligning %s: our judge judges with %s (the compiled judge's report['lm'] keeps it)", judge.name,
                    own if isinstance(own, str) else lm_name(own) if own is not None else "the judges' LM setting")
        rows, report = labelled_rows(traces, assessment=judge.name, label_kind=self.label_kind,
                                     required_fields=metric.required_fields)
        data = labelled_set(rows, report, name=f"align/{judge.name}", label_kind=self.label_kind)
        compiled = fit(metric, data, optimizer=self.optimizer, calibrator=self.calibrator, seed=self.seed,
                       **self.fit_options)
        return CalibratedMlflowJudge(compiled, name=name, assessment=judge.name, instructions=judge.instructions,
                                     report=report)
