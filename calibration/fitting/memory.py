"""Memory alignment: a judge that remembers the people who labelled it (``fit(optimizer="memory")``).

Two halves, after MLflow's MemAlign (2026), each of which can be switched off:

* Episodic memory: every labelled training item is kept with the judge's own run on it. At scoring time
  the ``k`` items most similar to the input (cosine of the configured embedder; ties by order, so
  retrieval is deterministic) become demos of the steps they fit: the judge's own steps on that item where
  its final verdict agreed with the person, else demos the person's label makes right for the verdict step
  (``Judge.label_consistent_demos``: AspectCritic's verdict, a rating, Faithfulness's per-claim verdicts).
  An item never retrieves itself (the calibrator is fitted on the training items' scores, which must not
  see their own labels).
* Semantic memory: the LM reads the rationales of the items the judge got wrong (why the person decided
  otherwise) and distils at most ``max_guidelines`` short guidelines; they are appended to every step's
  instructions (at most ``max_guideline_chars`` in all), listed in the report and saved with the program.

Both are saved in the compiled judge's JSON (no pickle): the guidelines inside the program's instructions,
the episodes under ``"memory"``. The memory is recomputed never; only its embeddings are, on first use.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any

import dspy
import numpy as np

from calibration.data.labelled import LabelledSet
from judges.lm.embeddings import resolve_embedder
from judges.lm.resolve import judge_context, resolve_lm
from judges.metrics.base import Judge
from judges.run.records import jsonable

__all__ = ["DistilGuidelines", "Episode", "EpisodicMemory", "GUIDELINES_HEADER", "align_with_memory", "episode_text",
           "with_guidelines"]

GUIDELINES_HEADER = "Guidelines from the people who labelled this task:"
_KEY_CHARS = 2000  # of an item's inputs, embedded to find similar items


class DistilGuidelines(dspy.Signature):
    """People labelled items that a judge also scored. Read the cases where the judge disagreed with them
    and the people's reasons, and write a few short guidelines that would have made the judge agree. Each
    guideline is one general sentence about how to judge (not about one item, no names from one case)."""

    task: str = dspy.InputField(desc="the judge's instructions")
    cases: list[str] = dspy.InputField(desc="per disagreement: the item, the judge's and the person's verdict, why")
    guidelines: list[str] = dspy.OutputField(desc="one sentence each")


def episode_text(judge: Judge, sample: Any) -> str:
    """What an item is retrieved by: its forward inputs, field by field, cut to a bounded length."""
    parts = []
    for name, value in judge._forward_inputs(sample).items():
        if value is None:
            continue
        text = "\n".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        parts.append(f"{name}: {text}")
    return "\n".join(parts)[:_KEY_CHARS]


@dataclass
class Episode:
    """A labelled item remembered: the text it is found by, its label on [0, 1], whether the judge agreed
    with the person, and the demos it gives each step (step name -> that step's inputs and outputs)."""

    text: str
    label: float
    agreed: bool
    demos: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "label": self.label, "agreed": self.agreed, "demos": jsonable(self.demos)}

    @classmethod
    def from_dict(cls, data: Any, index: int) -> Episode:
        if (not isinstance(data, dict) or not isinstance(data.get("text"), str)
                or not isinstance(data.get("label"), (int, float)) or not isinstance(data.get("demos"), dict)
                or not all(isinstance(d, dict) for d in data["demos"].values())):
            raise ValueError(f"compiled judge file: memory episode {index} must be an object with 'text', "
                             "'label' and 'demos' (step name -> demo object)")
        return cls(data["text"], float(data["label"]), bool(data.get("agreed")), data["demos"])


class EpisodicMemory:
    """Labelled episodes and the ``k`` most similar ones as demos for a new input."""

    def __init__(self, episodes: list[Episode], *, k: int = 3, embeddings: Any = None):
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"memory: k must be a positive int, got {k!r}")
        self.episodes, self.k, self.embeddings = list(episodes), k, embeddings
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()

    def _matrix(self) -> np.ndarray:
        """The episodes' embeddings (unit rows, ``Embedder.embed``), computed on first use."""
        with self._lock:
            if self._vectors is None:
                self._vectors = resolve_embedder(self.embeddings).embed([e.text for e in self.episodes])
            return self._vectors

    def nearest(self, text: str) -> list[int]:
        """Indices of the ``k`` episodes most similar to ``text`` (most similar first; never ``text``'s own)."""
        if not self.episodes:
            return []
        similarity = self._matrix() @ resolve_embedder(self.embeddings).embed([text])[0]
        order = sorted(range(len(self.episodes)), key=lambda i: (-round(float(similarity[i]), 6), i))
        return [i for i in order if self.episodes[i].text != text][: self.k]

    def demos_for(self, text: str) -> dict[str, list[dict[str, Any]]]:
        """Step name -> demos from the nearest episodes, the most similar one last (closest to the input)."""
        demos: dict[str, list[dict[str, Any]]] = {}
        for i in reversed(self.nearest(text)):
            for step, demo in self.episodes[i].demos.items():
                demos.setdefault(step, []).append(demo)
        return demos

    def program_for(self, judge: Judge, sample: Any) -> Judge:
        """``judge`` with the nearest episodes' demos put before its own on each step they fit. A shallow
        copy per call (the LM and settings are shared, the predictors' demo lists are not), so concurrent
        calls never see each other's demos."""
        demos = self.demos_for(episode_text(judge, sample))
        if not demos:
            return judge
        program = copy.copy(judge)
        for name, predictor in judge.named_predictors():
            if name in demos and "." not in name:
                step = copy.copy(predictor)
                step.demos = [dspy.Example(**d) for d in demos[name]] + list(predictor.demos)
                object.__setattr__(program, name, step)
        return program

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "episodes": [e.to_dict() for e in self.episodes]}

    @classmethod
    def from_dict(cls, data: Any, *, embeddings: Any = None) -> EpisodicMemory:
        if not isinstance(data, dict) or not isinstance(data.get("episodes"), list):
            raise ValueError("compiled judge file: 'memory' must be an object with 'k' and 'episodes'")
        episodes = [Episode.from_dict(e, i) for i, e in enumerate(data["episodes"])]
        return cls(episodes, k=data.get("k", 3), embeddings=embeddings)


def with_guidelines(judge: Judge, guidelines: list[str]) -> Judge:
    """A copy of ``judge`` whose every step's instructions end with the guidelines."""
    program = judge.deepcopy()
    if guidelines:
        block = "\n\n" + GUIDELINES_HEADER + "\n" + "\n".join(f"- {g}" for g in guidelines)
        for _, predictor in program.named_predictors():
            predictor.signature = predictor.signature.with_instructions(predictor.signature.instructions + block)
    return program


def _run_with_trace(judge: Judge, sample: Any) -> tuple[float, dict[str, dict[str, Any]]]:
    """The judge's score on ``sample`` and each step's inputs and outputs on that run (the last call of a
    step that ran several times, e.g. AspectCritic's votes)."""
    names = {id(p): name for name, p in judge.named_predictors()}
    with dspy.context(trace=[]):
        result = judge.score(sample)
        trace = list(dspy.settings.trace)
    steps = {}
    for predictor, inputs, outputs in trace:
        if id(predictor) in names:
            fields = {k: inputs[k] for k in predictor.signature.input_fields if k in inputs}
            fields.update({k: outputs[k] for k in predictor.signature.output_fields if k in outputs})
            steps[names[id(predictor)]] = jsonable(fields)
    return float(result.score), steps


def _agrees(score: float, target: float, kind: str) -> bool:
    return (score >= 0.5) == (target >= 0.5) if kind == "binary" else abs(score - target) <= 0.25


def _distilled(judge: Judge, cases: list[str], *, max_guidelines: int, max_chars: int) -> list[str]:
    """At most ``max_guidelines`` distinct guidelines, ``max_chars`` characters in all, from the judge's LM."""
    task = "\n".join(p.signature.instructions for _, p in judge.named_predictors())
    with judge_context(judge.judge_lm, judge.judge_adapter):
        out = dspy.Predict(DistilGuidelines)(task=task, cases=cases)
    kept, used = [], 0
    for line in dict.fromkeys(" ".join(str(g).split()) for g in out.guidelines or []):
        if not line or len(kept) == max_guidelines or used + len(line) > max_chars:
            continue
        kept.append(line)
        used += len(line)
    return kept


def align_with_memory(judge: Judge, data: LabelledSet, targets: list[float], *, kind: str, episodic: bool = True,
                      semantic: bool = True, k: int = 3, max_guidelines: int = 5, max_guideline_chars: int = 600,
                      embeddings: Any = None) -> tuple[Judge, EpisodicMemory | None, dict[str, Any]]:
    """The judge with guidelines from people's rationales, its episodic memory of ``data`` (labels scaled
    to [0, 1] in ``targets``), and a report: how many items the judge agreed with, how many episodes give
    demos, the guidelines. An item the judge fails on is left out of memory (counted in the report)."""
    if not (episodic or semantic):
        raise ValueError("fit(optimizer='memory'): episodic and semantic memory are both off; turn one on")
    resolve_lm(judge.judge_lm)  # an unusable LM fails here, before any item is run
    episodes, cases, failed = [], [], 0
    for i, (sample, target) in enumerate(zip(data.dataset, targets)):
        try:
            score, steps = _run_with_trace(judge, sample)
        except Exception:  # a weak LM fails on some items; they are counted, not remembered
            failed += 1
            continue
        agreed = _agrees(score, target, kind)
        text = episode_text(judge, sample)
        demos = steps if agreed else judge.label_consistent_demos(judge._forward_inputs(sample), steps, target)
        episodes.append(Episode(text, float(target), agreed, demos))
        rationale = data.rationale(i)
        if not agreed and rationale:
            cases.append(f"{text[:600]}\nThe judge scored {score:.2f}; the person's label is {target:.2f} "
                         f"(0-1 scale). The person's reason: {rationale}")
    guidelines = (_distilled(judge, cases, max_guidelines=max_guidelines, max_chars=max_guideline_chars)
                  if semantic and cases else [])
    report = {"episodic": episodic, "semantic": semantic, "k": k, "items": len(data), "failed": failed,
              "agreed": sum(e.agreed for e in episodes), "episodes_with_demos": sum(bool(e.demos) for e in episodes),
              "rationales_of_disagreements": len(cases), "guidelines": guidelines}
    if semantic and not cases:
        report["note"] = "no item the judge got wrong carries a rationale: no guidelines were distilled"
    memory = EpisodicMemory([e for e in episodes if e.demos], k=k, embeddings=embeddings) if episodic else None
    return with_guidelines(judge, guidelines), memory, report
