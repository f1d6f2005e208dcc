"""Human-labelled sets: samples plus one human label each, and loaders for the real sets in shared/data.

The data files are read where they are (``$DSPY_JUDGES_DATA``, else ``../shared/data`` beside the
project); nothing from them is copied into the repository.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judges.dataset import EvaluationDataset
from judges.samples import AIMessage, HumanMessage, MultiTurnSample, SingleTurnSample, ToolCall, ToolMessage


def data_dir() -> Path:
    """Where the labelled data lives: ``$DSPY_JUDGES_DATA`` or ``<project>/../shared/data``."""
    env = os.environ.get("DSPY_JUDGES_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(f"labelled data folder not found: {path} (set DSPY_JUDGES_DATA to its location)")
    return path


@dataclass
class LabelledSet:
    """Samples with a human label each. ``kind`` is "binary" (0/1), "ordinal" (ordered integers) or
    "continuous"; ``source`` says where the data came from (keep its attribution when publishing)."""

    name: str
    dataset: EvaluationDataset
    labels: list[Any]
    kind: str = "binary"
    source: str = ""
    meta: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self):
        if len(self.labels) != len(self.dataset):
            raise ValueError(f"{self.name}: {len(self.dataset)} samples but {len(self.labels)} labels")
        if self.kind not in ("binary", "ordinal", "continuous"):
            raise ValueError(f"{self.name}: kind={self.kind!r} is not one of binary, ordinal, continuous")

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, indices: Sequence[int]) -> LabelledSet:
        indices = list(indices)
        return LabelledSet(
            name=self.name,
            dataset=EvaluationDataset([self.dataset[i] for i in indices]),
            labels=[self.labels[i] for i in indices],
            kind=self.kind,
            source=self.source,
            meta=[self.meta[i] for i in indices] if self.meta else [],
        )


BEGIN_FILES = {"wow": "begin_dev_wow.tsv", "cmu": "begin_dev_cmu.tsv", "tc": "begin_dev_tc.tsv"}


def load_begin(parts: Sequence[str] = ("wow", "cmu", "tc"), limit: int | None = None) -> LabelledSet:
    """BEGIN: is a dialogue response fully attributable to its knowledge passage? (Dziri et al. 2022)

    knowledge -> retrieved_contexts, message -> user_input, response -> response; label 1 for "Fully
    attributable", 0 for "Not fully attributable" and "Generic". Rows in file order, ``limit`` per set.
    """
    samples, labels, meta = [], [], []
    for part in parts:
        if part not in BEGIN_FILES:
            raise ValueError(f"load_begin: part={part!r} is not one of {sorted(BEGIN_FILES)}")
        with open(data_dir() / "begin" / BEGIN_FILES[part], encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                samples.append(SingleTurnSample(user_input=row["message"], response=row["response"],
                                                retrieved_contexts=[row["knowledge"]]))
                labels.append(int(row["begin_label"] == "Fully attributable"))
                meta.append({"part": part, "model": row["model_name"], "begin_label": row["begin_label"]})
    if limit is not None:
        samples, labels, meta = samples[:limit], labels[:limit], meta[:limit]
    return LabelledSet("begin", EvaluationDataset(samples), labels, "binary",
                       "BEGIN (google/BEGIN-dataset), CC BY 4.0 / CDLA-Sharing-1.0", meta)


EVOUNA_SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")


def load_evouna(systems: Sequence[str] = EVOUNA_SYSTEMS, limit: int | None = None,
                context_system: str | None = None) -> LabelledSet:
    """EVOUNA (NQ): is a QA system's answer correct given the gold answer? (Wang et al. 2023)

    question -> user_input, answer_<sys> -> response, golden_answer -> reference (alternatives, split on
    "/", joined with " / "); label = the human verdict judge_<sys>. Unjudged answers and questions flagged
    "improper" are skipped. EVOUNA has no retrieved passages; ``context_system`` (e.g. "gpt4") puts that
    system's answer in ``retrieved_contexts`` when a metric needs some text to retrieve from.
    """
    for system in list(systems) + ([context_system] if context_system else []):
        if system not in EVOUNA_SYSTEMS:
            raise ValueError(f"load_evouna: system={system!r} is not one of {list(EVOUNA_SYSTEMS)}")
    with open(data_dir() / "evouna" / "NQ.json", encoding="utf-8") as handle:
        items = json.load(handle)

    def rows():
        for index, item in enumerate(items):
            if str(item.get("improper")).lower() == "true":
                continue
            reference = " / ".join(a.strip() for a in str(item["golden_answer"]).split("/") if a.strip())
            for system in systems:
                verdict, answer = item.get(f"judge_{system}"), item.get(f"answer_{system}")
                if not answer or str(verdict).lower() not in ("true", "false"):
                    continue
                sample = {"user_input": item["question"], "response": str(answer), "reference": reference}
                if context_system and item.get(f"answer_{context_system}"):
                    sample["retrieved_contexts"] = [str(item[f"answer_{context_system}"])]
                yield SingleTurnSample(**sample), int(str(verdict).lower() == "true"), {"question_index": index, "system": system}

    picked = list(itertools.islice(rows(), limit))
    return LabelledSet("evouna", EvaluationDataset([p[0] for p in picked]), [p[1] for p in picked], "binary",
                       "EVOUNA (wangcunxiang/QA-Eval), Apache-2.0", [p[2] for p in picked])


def tau_bench_sample(run: dict[str, Any]) -> MultiTurnSample:
    """One tau-bench run as a MultiTurnSample: the system prompt is dropped, assistant tool calls become
    ``ToolCall``s, the gold actions become ``reference_tool_calls`` and the user's instruction (the goal
    the simulated user was given) becomes ``reference``."""
    messages: list[Any] = []
    for message in run["traj"]:
        role = message.get("role")
        if role == "user":
            messages.append(HumanMessage(content=message.get("content") or ""))
        elif role == "assistant":
            calls = []
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                arguments = function.get("arguments") or "{}"
                calls.append(ToolCall(name=function.get("name", ""),
                                      args=json.loads(arguments) if isinstance(arguments, str) else arguments))
            messages.append(AIMessage(content=message.get("content") or "", tool_calls=calls or None))
        elif role == "tool":
            messages.append(ToolMessage(content=str(message.get("content") or "")))
    task = run["info"]["task"]
    return MultiTurnSample(
        user_input=messages,
        reference=task.get("instruction"),
        reference_tool_calls=[ToolCall(name=a["name"], args=a.get("kwargs") or {}) for a in task.get("actions", [])],
    )


def load_tau_bench(limit: int | None = None) -> LabelledSet:
    """tau-bench airline trajectories (GPT-4o agent, 50 tasks x 4 trials). Label: the run's reward, 1 when
    the database end state matched the goal. That is a programmatic check, not a human rating."""
    with open(data_dir() / "tau_bench" / "gpt-4o-airline.json", encoding="utf-8") as handle:
        runs = json.load(handle)[:limit]
    return LabelledSet(
        "tau_bench",
        EvaluationDataset([tau_bench_sample(run) for run in runs]),
        [int(float(run["reward"]) >= 1.0) for run in runs],
        "binary",
        "tau-bench (sierra-research/tau-bench), MIT; labels are task rewards",
        [{"task_id": run["task_id"], "trial": run.get("trial")} for run in runs],
    )
