"""Human-labelled sets: samples plus one human label each, and the splits and folds they are measured on.

Owns: ``LabelledSet`` (validated labels of one kind: binary, ordinal or continuous; optional rationales;
JSONL/CSV round trips), seeded splits, balanced samples and k-fold. Must not read the shared data files
(``calibration.data.loaders``) or score anything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judges.data.dataset import EvaluationDataset, read_csv_rows
from judges.data.samples import SampleValidationError, problem_lines
from judges.lm.verifier import files as verifier_files
from judges.run.records import sample_key

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
    #: What reading the set's source decided once for many rows (columns left out, plain-text lists), to say.
    notes: list[str] = field(default_factory=list, repr=False, compare=False)
    #: The people whose labels ``meta[i]["ratings"]`` holds, in order, when several labelled each item.
    raters: list[str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if len(self.labels) != len(self.dataset):
            raise ValueError(f"{self.name}: {len(self.dataset)} samples but {len(self.labels)} labels")
        if self.kind not in LABEL_KINDS:
            raise ValueError(f"{self.name}: kind={self.kind!r} is not one of binary, ordinal, continuous")
        for i, value in enumerate(self.labels):
            problem = _label_problem(value, self.kind)
            if problem:
                where = self.row_names[i] if self.row_names else f"{self.name}: row {i}"
                raise ValueError(f"{where}: label {value!r:.60} {problem}")
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
                     row_names: Sequence[str] | None = None, reference_separator: str | None = None,
                     columns: Mapping[str, str] | None = None, label_map: Mapping[str, float] | None = None,
                     id_column: str | None = None) -> LabelledSet:
        """Rows holding the sample's fields plus ``label`` (and, optionally, ``rationale``: why the person
        decided so, kept in ``meta``); a missing or invalid label is an error naming the row
        (``row_names[i]``, e.g. a file and line, else "<name>: row i") and the value.

        A file as it is: ``columns`` renames its columns to sample fields (``{"bot_reply": "response",
        "knowledge": "retrieved_contexts"}``; columns it does not name, other than the label, rationale and id,
        are left out, listed in ``notes``); ``label_map`` reads label words (``{"faithful": 1,
        "hallucinated": 0}``, case and spaces ignored); ``id_column`` names each item (``meta[i]["id"]``, default
        its row: ``item_id``). The same problem in many rows is said once, with a count and the first rows.

        Several people: ``label`` names several columns (``["a1", "a2"]`` or ``"a1,a2"``); each item's label is
        their majority (binary; a tie goes to 1, counted in ``notes``) or mean (rounded for ordinal labels), and
        every person's label is kept (``meta[i]["ratings"]``, ``raters``) for ``calibration.agreement.raters``."""
        names = list(row_names) if row_names is not None else [f"{name}: row {i}" for i in range(len(rows))]
        words = {str(k).strip().lower(): v for k, v in (label_map or {}).items()}
        notes: list[str] = []
        raters = [c.strip() for c in label.split(",")] if isinstance(label, str) and "," in label else (
            list(label) if isinstance(label, (list, tuple)) else None)
        if raters is not None:
            rows, label = _with_consensus(rows, raters, words, kind, names, notes), CONSENSUS
        if columns:
            unknown = sorted({c for row in rows if isinstance(row, dict) for c in row} - set(columns)
                             - {label, RATIONALE, id_column, RATINGS})
            if unknown:
                notes.append(f"columns left out (not named in columns): {', '.join(unknown)}")
        samples, labels, rationales, ids, ratings = [], [], [], [], []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ValueError(f"{names[i]}: expected an object of sample fields and '{label}', got "
                                 f"{type(row).__name__}")
            row = dict(row)
            if id_column is not None:
                if row.get(id_column) in (None, ""):
                    raise ValueError(f"{names[i]} has no '{id_column}' value (the id column)")
                ids.append(str(row.pop(id_column)))
            if columns:
                row = {columns.get(k, k): v for k, v in row.items() if k in columns or k in (label, RATIONALE)}
            if label not in row or row[label] is None or (isinstance(row[label], float) and math.isnan(row[label])):
                raise ValueError(f"{names[i]} has no '{label}' value")
            value = row.pop(label)
            ratings.append(row.pop(RATINGS, None))
            labels.append(_label_number(value, words, names[i], label))
            rationale = row.pop(RATIONALE, None)
            if rationale is not None and not isinstance(rationale, str):
                raise ValueError(f"{names[i]}: '{RATIONALE}' must be text, got {type(rationale).__name__}")
            rationales.append(rationale.strip() if isinstance(rationale, str) and rationale.strip() else None)
            samples.append(row)
        if not samples:
            raise ValueError(f"{name}: no labelled rows")
        if len(set(ids)) < len(ids):
            twice = sorted({v for v in ids if ids.count(v) > 1})[:3]
            raise ValueError(f"{name}: the id column '{id_column}' repeats {', '.join(map(repr, twice))}: give each "
                             "item its own id")
        try:
            dataset = EvaluationDataset(samples, reference_separator=reference_separator)
        except SampleValidationError as err:  # name the file and line of each problem, once per kind of problem
            lines = problem_lines(err.problems, lambda i: name if i is None else names[i])
            raise ValueError("\n".join(lines)) from None
        for field_name, count in dataset.plain_text_lists.items():
            notes.append(f"{count} '{field_name}' cells were plain text, each read as a list of one text")
        meta = [{} for _ in samples]
        for i, rationale in enumerate(rationales):
            if rationale:
                meta[i][RATIONALE] = rationale
        for i, item in enumerate(ids):
            meta[i]["id"] = item
        for i, given in enumerate(ratings):
            if given is not None:
                meta[i][RATINGS] = given
        return cls(name, dataset, labels, kind, source, meta if any(meta) else [], label_range=label_range,
                   row_names=names, notes=notes, raters=raters)

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
                except RecursionError:
                    raise ValueError(f"{path}: line {number} is nested too deeply to read") from None
                names.append(f"{path}: line {number}")
        return cls.from_records(rows, row_names=names, **kwargs)

    @classmethod
    def from_csv(cls, path: str | Path, **kwargs) -> LabelledSet:
        rows, lines = read_csv_rows(path)
        return cls.from_records(rows, row_names=[f"{path}: line {n}" for n in lines], **kwargs)

    @classmethod
    def from_pandas(cls, frame, **kwargs) -> LabelledSet:
        return cls.from_records(frame.to_dict(orient="records"), **kwargs)

    @classmethod
    def from_hf_dataset(cls, dataset, **kwargs) -> LabelledSet:
        return cls.from_records(dataset.to_list(), **kwargs)

    def ratings(self) -> list[list[float | None]]:
        """Every person's label of every item (None where one gave none), in ``raters`` order."""
        if not self.raters:
            raise ValueError(f"{self.name}: one label per item; give several label columns for raters")
        return [list(m.get(RATINGS) or [None] * len(self.raters)) for m in self.meta]

    def item_id(self, index: int) -> str:
        """Item ``index``'s id: its id column's value, else its row ("line 7" of a file, "row 3" otherwise)."""
        given = self.meta[index].get("id") if self.meta and index < len(self.meta) else None
        if given is not None:
            return str(given)
        row = self.row_names[index] if self.row_names else f"row {index}"
        return row.rsplit(": ", 1)[-1]

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
            raters=self.raters,
        )


#: The row key holding every person's label (several label columns), and the label made from them.
RATINGS, CONSENSUS = "ratings", "consensus label"


def _label_number(value: Any, words: dict[str, Any], where: str, column: str) -> float | int:
    """A label cell as a number: a label word read through ``words`` (case and spaces ignored), else the value."""
    if words and isinstance(value, str):
        if value.strip().lower() not in words:
            raise ValueError(f"{where}: label {value!r:.60} in '{column}' is none of the label words "
                             f"{', '.join(map(repr, words))} (label_map)")
        value = words[value.strip().lower()]
    return _as_number(value, where, column)


def _with_consensus(rows: Sequence[Any], raters: list[str], words: dict[str, Any], kind: str, names: Sequence[str],
                    notes: list[str]) -> list[Any]:
    """``rows`` with each person's label read (label words too) into ``RATINGS`` and their consensus into
    ``CONSENSUS``: the majority for binary labels (a tie goes to 1, counted), the mean otherwise (rounded for
    ordinal labels). A row where nobody labelled is an error naming it."""
    out, ties = [], 0
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            out.append(row)
            continue
        row = dict(row)
        given = []
        for rater in raters:
            value = row.pop(rater, None)
            if isinstance(value, float) and math.isnan(value) or value in (None, ""):
                given.append(None)
                continue
            given.append(_label_number(value, words, names[i], rater))
        present = [v for v in given if v is not None]
        if not present:
            raise ValueError(f"{names[i]} has no label in any of {', '.join(raters)}")
        if kind == "binary":
            ones = sum(present)
            ties += ones * 2 == len(present)
            row[CONSENSUS] = int(ones * 2 >= len(present))
        else:
            mean = float(np.mean(present))
            row[CONSENSUS] = int(math.floor(mean + 0.5)) if kind == "ordinal" else mean
        row[RATINGS] = given
        out.append(row)
    if ties:
        notes.append(f"{ties} items split evenly between people: labelled 1 (the consensus of a tie)")
    return out


def _label_problem(value: Any, kind: str) -> str | None:
    """Why ``value`` is not a label of ``kind`` (None when it is one)."""
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return "is not a finite number"
    try:
        if not math.isfinite(float(value)):
            return "is not a finite number"
    except OverflowError:  # an integer of hundreds of digits
        return "is too large to be a label"
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
    return [(data.subset(a), data.subset(b)) for a, b in k_fold_indices(data, k=k, seed=seed)]


def k_fold_indices(data: LabelledSet, *, k: int = 5, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """``k_fold``'s (train, held-out) index lists, sorted."""
    from sklearn.model_selection import KFold, StratifiedKFold

    strata = _strata(data)
    folds = (StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(data)), strata)
             if strata is not None else KFold(k, shuffle=True, random_state=seed).split(np.zeros(len(data))))
    return [(sorted(a.tolist()), sorted(b.tolist())) for a, b in folds]


def without_shipped_training(data: LabelledSet) -> tuple[LabelledSet, int]:
    """``data`` without the items the shipped verifier trained on (``judges.lm.verifier.files.trained_on``),
    and how many were dropped. The verifier is a judge, a baseline and a calibrator signal: measured or
    calibrated on its own training items it looks better than it is."""
    seen = verifier_files.trained_on()
    keep = [i for i, sample in enumerate(data.dataset) if verifier_files.trained_on_key(sample) not in seen]
    return (data if len(keep) == len(data) else data.subset(keep)), len(data) - len(keep)


def without_items(data: LabelledSet, keys: set[str] | frozenset[str]) -> tuple[LabelledSet, int]:
    """``data`` without the items whose sample key (``judges.run.records.sample_key``) is in ``keys`` (e.g. those
    a compiled judge was fitted on), and how many were left out."""
    keep = [i for i, sample in enumerate(data.dataset) if sample_key(sample) not in keys]
    return (data if len(keep) == len(data) else data.subset(keep)), len(data) - len(keep)


def _strata(data: LabelledSet):
    labels = np.asarray(data.labels, dtype=float)
    if data.kind == "continuous":
        labels = np.digitize(labels, np.quantile(labels, [0.25, 0.5, 0.75]))
    _, counts = np.unique(labels, return_counts=True)
    return labels if counts.min() >= 2 else None  # a class with one item cannot be stratified
