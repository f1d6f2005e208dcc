"""Human-labelled sets: samples plus one human label each, and loaders for the real sets in shared/data.

The data files are read where they are (``$DSPY_JUDGES_DATA``, else ``../shared/data`` beside the
project); nothing from them is copied into the repository.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judges.dataset import EvaluationDataset
from judges.samples import (
    AIMessage,
    HumanMessage,
    MultiTurnSample,
    SampleValidationError,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
)


def data_dir() -> Path:
    """Where the labelled data lives: ``$DSPY_JUDGES_DATA`` or ``<project>/../shared/data``."""
    env = os.environ.get("DSPY_JUDGES_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(f"labelled data folder not found: {path} (set DSPY_JUDGES_DATA to its location)")
    return path


LABEL_KINDS = ("binary", "ordinal", "continuous")
#: The optional column of a labelled file that says why the person gave the label.
RATIONALE = "rationale"


@dataclass
class LabelledSet:
    """Samples with a human label each. ``kind`` is "binary" (0/1), "ordinal" (ordered integers) or
    "continuous"; ``source`` says where the data came from (keep its attribution when publishing).

    Every label is checked against ``kind`` when the set is made, before any judge sees it: a finite
    number; 0 or 1 for binary sets; a whole number for ordinal ones. ``label_range`` is the scale's
    (low, high): declared (SummEval's 1-5) or else taken from all the set's labels; subsets and splits keep
    the whole set's range, so a test label is never put on a scale fitted to the train split only."""

    name: str
    dataset: EvaluationDataset
    labels: list[Any]
    kind: str = "binary"
    source: str = ""
    meta: list[dict[str, Any]] = field(default_factory=list)
    label_range: tuple[float, float] | None = None
    #: How each row is named in errors (a file and line); default "<name>: row i".
    row_names: list[str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if len(self.labels) != len(self.dataset):
            raise ValueError(f"{self.name}: {len(self.dataset)} samples but {len(self.labels)} labels")
        if self.kind not in LABEL_KINDS:
            raise ValueError(f"{self.name}: kind={self.kind!r} is not one of binary, ordinal, continuous")
        for i, value in enumerate(self.labels):
            problem = _label_problem(value, self.kind)
            if problem:
                where = self.row_names[i] if self.row_names else f"{self.name}: row {i}"
                raise ValueError(f"{where}: label {value!r} {problem}")
        self.labels = [int(v) if self.kind != "continuous" else float(v) for v in self.labels]
        if self.label_range is None:
            self.label_range = (0.0, 1.0) if self.kind == "binary" else (
                (float(min(self.labels)), float(max(self.labels))) if self.labels else (0.0, 1.0))
        low, high = (float(v) for v in self.label_range)
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(f"{self.name}: label_range {self.label_range!r} is not (low, high) with low <= high")
        outside = [v for v in self.labels if not low <= v <= high]
        if outside:
            raise ValueError(f"{self.name}: label {outside[0]!r} is outside the declared range {low:g}-{high:g}")
        self.label_range = (low, high)

    def __len__(self) -> int:
        return len(self.labels)

    # --- generic sources: rows holding sample fields plus a label column --------------------------
    @classmethod
    def from_records(cls, rows: Sequence[dict[str, Any]], *, label: str = "label", kind: str = "binary",
                     name: str = "labelled", source: str = "", label_range: tuple[float, float] | None = None,
                     row_names: Sequence[str] | None = None, reference_separator: str | None = None) -> LabelledSet:
        """Rows holding the sample's fields plus ``label`` (and, optionally, ``rationale``: why the person
        decided so, kept in ``meta``); a missing or invalid label is an error naming the row
        (``row_names[i]``, e.g. a file and line, else "<name>: row i") and the value."""
        samples, labels, rationales = [], [], []
        names = list(row_names) if row_names is not None else [f"{name}: row {i}" for i in range(len(rows))]
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ValueError(f"{names[i]}: expected an object of sample fields and '{label}', got "
                                 f"{type(row).__name__}")
            row = dict(row)
            if label not in row or row[label] is None or (isinstance(row[label], float) and math.isnan(row[label])):
                raise ValueError(f"{names[i]} has no '{label}' value")
            labels.append(_as_number(row.pop(label), names[i], label))
            rationale = row.pop(RATIONALE, None)
            if rationale is not None and not isinstance(rationale, str):
                raise ValueError(f"{names[i]}: '{RATIONALE}' must be text, got {type(rationale).__name__}")
            rationales.append(rationale.strip() if isinstance(rationale, str) and rationale.strip() else None)
            samples.append(row)
        if not samples:
            raise ValueError(f"{name}: no labelled rows")
        try:
            dataset = EvaluationDataset(samples, reference_separator=reference_separator)
        except SampleValidationError as err:  # name the file and line of each problem, not a sample index
            raise ValueError("\n".join(f"{names[i] if i is not None else name}, field '{field}': {message}"
                                       for i, field, message in err.problems)) from None
        meta = [{RATIONALE: r} if r else {} for r in rationales] if any(rationales) else []
        return cls(name, dataset, labels, kind, source, meta, label_range=label_range, row_names=names)

    @classmethod
    def from_jsonl(cls, path: str | Path, **kwargs) -> LabelledSet:
        rows, names = [], []
        with open(path, encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line, parse_constant=_no_constant))
                except (json.JSONDecodeError, ValueError) as err:
                    raise ValueError(f"{path}: line {number} is not valid JSON ({err})") from None
                names.append(f"{path}: line {number}")
        return cls.from_records(rows, row_names=names, **kwargs)

    @classmethod
    def from_csv(cls, path: str | Path, **kwargs) -> LabelledSet:
        # utf-8-sig: a byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name
        with open(path, encoding="utf-8-sig", newline="") as handle:
            rows = [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(handle)]
        # line numbers of the file (header is line 1), for rows without quoted line breaks
        return cls.from_records(rows, row_names=[f"{path}: line {i + 2}" for i in range(len(rows))], **kwargs)

    @classmethod
    def from_pandas(cls, frame, **kwargs) -> LabelledSet:
        return cls.from_records(frame.to_dict(orient="records"), **kwargs)

    @classmethod
    def from_hf_dataset(cls, dataset, **kwargs) -> LabelledSet:
        return cls.from_records(dataset.to_list(), **kwargs)

    def rationale(self, index: int) -> str | None:
        """Why the person labelled item ``index`` as they did, when the data says."""
        return (self.meta[index].get(RATIONALE) if self.meta and index < len(self.meta) else None) or None

    def subset(self, indices: Sequence[int]) -> LabelledSet:
        indices = list(indices)
        return LabelledSet(
            name=self.name,
            dataset=EvaluationDataset([self.dataset[i] for i in indices]),
            labels=[self.labels[i] for i in indices],
            kind=self.kind,
            source=self.source,
            meta=[self.meta[i] for i in indices] if self.meta else [],
            label_range=self.label_range,
            row_names=[self.row_names[i] for i in indices] if self.row_names else None,
        )


def _label_problem(value: Any, kind: str) -> str | None:
    """Why ``value`` is not a label of ``kind`` (None when it is one)."""
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(float(value)):
        return "is not a finite number"
    if kind == "binary" and float(value) not in (0.0, 1.0):
        return "is not 0 or 1 (binary labels; use --label-kind ordinal or continuous for a scale)"
    if kind == "ordinal" and not float(value).is_integer():
        return "is not a whole number (ordinal labels; use --label-kind continuous)"
    return None


def _as_number(value: Any, index: str, field_name: str) -> float | int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes"):
        return 1
    if text in ("false", "no"):
        return 0
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{index}: '{field_name}' = {value!r} is not a number or true/false") from None
    if not math.isfinite(number):
        raise ValueError(f"{index}: '{field_name}' = {value!r} is not a finite number")
    return int(number) if number.is_integer() else number


def _no_constant(name: str):
    """``json.loads`` hook: NaN, Infinity and -Infinity are not JSON numbers; refuse them."""
    raise ValueError(f"{name} is not a finite number")


@dataclass
class Split:
    train: LabelledSet
    dev: LabelledSet
    test: LabelledSet


def split(data: LabelledSet, *, dev: float = 0.2, test: float = 0.3, seed: int = 0) -> Split:
    """Seeded train/dev/test split, stratified by label (binary and ordinal sets; continuous labels are
    stratified by quartile). ``dev=0`` gives an empty dev set."""
    from sklearn.model_selection import train_test_split

    indices = np.arange(len(data))
    strata = _strata(data)
    rest, test_idx = train_test_split(indices, test_size=test, random_state=seed, stratify=strata)
    rest_strata = None if strata is None else strata[rest]
    if dev <= 0:
        train_idx, dev_idx = rest, []
    else:
        train_idx, dev_idx = train_test_split(rest, test_size=dev / (1 - test), random_state=seed, stratify=rest_strata)
    return Split(data.subset(sorted(train_idx)), data.subset(sorted(dev_idx)), data.subset(sorted(test_idx)))


def balanced_indices(labels: Sequence[int], n: int, rng: np.random.Generator) -> list[int]:
    """``n`` sorted positions of binary ``labels``, half of each label where there are enough (the rest
    from the other label); label-0 items are drawn first from ``rng``, then label-1 items."""
    labels = np.asarray(labels)
    pools = [np.where(labels == value)[0] for value in (0, 1)]
    positives = min(len(pools[1]), n - min(len(pools[0]), n // 2))
    take = [n - positives, positives]
    return sorted(i for pool, k in zip(pools, take) for i in rng.choice(pool, size=k, replace=False).tolist())


def balanced_sample(data: LabelledSet, n: int, *, seed: int = 0) -> LabelledSet:
    """A seeded sample of ``n`` items of a binary set, half of each label where the set allows
    (the rest from the other label); items stay in file order."""
    if data.kind != "binary":
        raise ValueError(f"{data.name}: balanced_sample needs binary labels, these are {data.kind}")
    if n > len(data):
        raise ValueError(f"{data.name}: asked for {n} items, the set has {len(data)}")
    return data.subset(balanced_indices(data.labels, n, np.random.default_rng(seed)))


def k_fold(data: LabelledSet, *, k: int = 5, seed: int = 0) -> list[tuple[LabelledSet, LabelledSet]]:
    """Seeded, stratified k-fold (train, held-out) pairs: for sets under ~100 items, where one split
    leaves too few items to measure on."""
    from sklearn.model_selection import KFold, StratifiedKFold

    strata = _strata(data)
    folds = (StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(data)), strata)
             if strata is not None else KFold(k, shuffle=True, random_state=seed).split(np.zeros(len(data))))
    return [(data.subset(sorted(a)), data.subset(sorted(b))) for a, b in folds]


def _strata(data: LabelledSet):
    labels = np.asarray(data.labels, dtype=float)
    if data.kind == "continuous":
        labels = np.digitize(labels, np.quantile(labels, [0.25, 0.5, 0.75]))
    _, counts = np.unique(labels, return_counts=True)
    return labels if counts.min() >= 2 else None  # a class with one item cannot be stratified


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


def load_begin_slice() -> LabelledSet:
    """The 60-row BEGIN slice bundled with the package (balanced; CC BY 4.0 parts only; see
    ``calibration/data/SOURCE.md``): runs on a fresh machine without ``shared/data``."""
    from importlib import resources

    path = resources.files("calibration") / "data" / "begin_slice.jsonl"
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
