"""Loaders for the real human-labelled sets in shared/data (BEGIN, EVOUNA, tau-bench, SummEval, Cranfield),
and for the BEGIN slice bundled with the package.

The data files are read where they are (``$DSPY_JUDGES_DATA``, else ``../shared/data`` beside the
project); nothing from them is copied into the repository. Each loader maps its source's labels to a
``LabelledSet`` and says how in its docstring.

Owns: reading those files. Must not fit or score anything.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calibration.data.labelled import LabelledSet
from judges.data.dataset import EvaluationDataset
from judges.data.samples import (
    AIMessage,
    HumanMessage,
    MultiTurnSample,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
)


def data_dir() -> Path:
    """Where the labelled data lives: ``$DSPY_JUDGES_DATA`` or ``<project>/../shared/data``."""
    env = os.environ.get("DSPY_JUDGES_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(f"labelled data folder not found: {path} (set DSPY_JUDGES_DATA to its location)")
    return path


BEGIN_FILES = {"wow": "begin_dev_wow.tsv", "cmu": "begin_dev_cmu.tsv", "tc": "begin_dev_tc.tsv"}


def load_begin(parts: Sequence[str] = ("wow", "cmu", "tc"), limit: int | None = None) -> LabelledSet:
    """BEGIN: is a dialogue response fully attributable to its knowledge passage? (Dziri et al. 2022)

    knowledge -> retrieved_contexts, message -> user_input, response -> response; label 1 for "Fully
    attributable", 0 for "Not fully attributable" and "Generic". Rows in file order, ``limit`` per set.
    The shipped verifier trained on the CMU-DoG and Topical-Chat turns (all but the bundled slice's):
    ``fit``, ``compare_on_heldout`` and the CLI leave those out (``without_shipped_training``), and count them.
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


def load_begin_slice() -> LabelledSet:
    """The 60-row BEGIN slice bundled with the package (balanced; CC BY 4.0 parts only; see
    ``calibration/data/SOURCE.md``): runs on a fresh machine without ``shared/data``."""
    from importlib import resources

    path = resources.files("calibration.data") / "begin_slice.jsonl"
    with resources.as_file(path) as file:
        return LabelledSet.from_jsonl(file, name="begin_slice",
                                      source="BEGIN (google/BEGIN-dataset) WoW + CMU-DoG, CC BY 4.0")


EVOUNA_SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")


def load_evouna(systems: Sequence[str] = EVOUNA_SYSTEMS, limit: int | None = None,
                context_system: str | None = None) -> LabelledSet:
    """EVOUNA (NQ): is a QA system's answer correct given the gold answer? (Wang et al. 2023)

    question -> user_input, answer_<sys> -> response, golden_answer -> reference (EVOUNA lists acceptable
    aliases as "a/b/c": kept as a list of alternatives); label = the human verdict judge_<sys>. Unjudged answers and questions flagged
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
            aliases = [a.strip() for a in str(item["golden_answer"]).split("/") if a.strip()]
            reference = aliases[0] if len(aliases) == 1 else aliases
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


SUMMEVAL_ASPECTS = ("coherence", "consistency", "fluency", "relevance")


def load_summeval(aspect: str = "consistency", limit: int | None = None) -> LabelledSet:
    """SummEval: expert 1-5 scores (mean of 3 experts) of CNN/DailyMail summaries (Fabbri et al. 2021).

    article -> reference_contexts, summary -> response; label = the aspect's mean score (continuous, 1-5).
    """
    if aspect not in SUMMEVAL_ASPECTS:
        raise ValueError(f"load_summeval: aspect={aspect!r} is not one of {list(SUMMEVAL_ASPECTS)}")
    samples, labels, meta = [], [], []
    with open(data_dir() / "summeval" / "summeval.jsonl", encoding="utf-8") as handle:
        for line in itertools.islice(handle, limit):
            row = json.loads(line)
            samples.append(SingleTurnSample(response=row["summary"], reference_contexts=[row["article"]]))
            labels.append(float(row[aspect]))
            meta.append({k: row.get(k) for k in ("article_id", "summary_id")})
    return LabelledSet(f"summeval_{aspect}", EvaluationDataset(samples), labels, "continuous",
                       "SummEval (via maiush/PPairS), MIT", meta, label_range=(1.0, 5.0))


def _smart_records(path: Path) -> list[dict[str, str]]:
    records, current, field_name = [], None, None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(".I "):
            current = {"id": line[3:].strip()}
            records.append(current)
            field_name = None
        elif line.startswith(".") and len(line) == 2 and current is not None:
            field_name = line[1]
            current[field_name] = ""
        elif current is not None and field_name:
            current[field_name] += line.strip() + " "
    return records


def load_cranfield(limit: int | None = None) -> LabelledSet:
    """Cranfield: graded relevance of aeronautics abstracts to queries (Cleverdon 1967).

    query -> user_input, the judged document (title + abstract) -> retrieved_contexts; label = relevance on
    0..4 (ordinal): grade 1 (complete answer) -> 4, 2 -> 3, 3 -> 2, 4 -> 1, -1 (not relevant) -> 0. Queries are
    numbered 1..225 in file order, not by their .I ids (see cranqrel.readme).
    """
    folder = data_dir() / "cranfield"
    queries = [q.get("W", "").strip() for q in _smart_records(folder / "cran.qry")]
    documents = {d["id"]: (d.get("T", "").strip() + ". " + d.get("W", "").strip()) for d in _smart_records(folder / "cran.all.1400")}
    samples, labels, meta = [], [], []
    for line in (folder / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        query_no, doc_id, grade = int(parts[0]), parts[1], int(parts[2])
        if not 1 <= query_no <= len(queries) or doc_id not in documents:
            continue
        samples.append(SingleTurnSample(user_input=queries[query_no - 1], retrieved_contexts=[documents[doc_id]]))
        labels.append(0 if grade < 0 else 5 - grade)
        meta.append({"query": query_no, "doc": doc_id, "grade": grade})
        if limit is not None and len(samples) >= limit:
            break
    return LabelledSet("cranfield", EvaluationDataset(samples), labels, "ordinal",
                       "Cranfield collection (via noramtboraas/information-retrieval)", meta)
