"""EvaluationDataset: a homogeneous list of samples, with loaders and writers for every common format.

Formats: a list of samples or dicts, pandas DataFrames, Hugging Face ``datasets.Dataset``, JSONL and CSV
files, and ``dspy.Example`` lists. Lists and dicts inside a sample (contexts, rubrics, messages) are kept
as Python objects in memory, JSONL and pandas; CSV cells and Arrow (Hugging Face) columns store them as
JSON text, which the loaders decode again, so every format round-trips exactly.

Must not score samples or call an LM.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from judges.data.samples import MultiTurnSample, SampleValidationError, SingleTurnSample

#: Older column names (Ragas 0.1 and common RAG datasets) and the field each one maps to.
#: ``ground_truths`` was a list of strings: a one-element list becomes that string, a longer one the list of
#: acceptable alternatives. A row carrying both an old name and its new name is rejected as ambiguous.
LEGACY_COLUMNS: dict[str, str] = {
    "question": "user_input",
    "answer": "response",
    "contexts": "retrieved_contexts",
    "ground_truth": "reference",
    "ground_truths": "reference",
}

#: Fields a DSPy program under evaluation receives as inputs; the rest are labels.
DEFAULT_INPUT_KEYS: tuple[str, ...] = ("user_input",)


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def normalize_row(row: dict[str, Any], *, index: int | None = None, reference_separator: str | None = None) -> dict[str, Any]:
    """Rename legacy columns, drop missing cells (None/NaN), return a fresh dict. With ``reference_separator``
    (opt-in, e.g. ``"/"`` for EVOUNA-style "June Carter Cash/June Cash"), a reference string is split into
    its alternatives (stripped, empty parts dropped)."""
    out: dict[str, Any] = {}
    source: dict[str, str] = {}
    problems = []
    for key, value in row.items():
        if _is_missing(value):
            continue
        if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
            value = value.tolist()  # numpy arrays from pandas / Arrow
        target = LEGACY_COLUMNS.get(key, key)
        if key == "ground_truths" and isinstance(value, list):
            value = value[0] if len(value) == 1 else value
        if target in out:
            problems.append((index, key, f"columns '{source[target]}' and '{key}' both map to '{target}'; keep one"))
            continue
        out[target] = value
        source[target] = key
    if problems:
        raise SampleValidationError(problems)
    if reference_separator and isinstance(out.get("reference"), str):
        parts = [part.strip() for part in out["reference"].split(reference_separator) if part.strip()]
        out["reference"] = parts[0] if len(parts) == 1 else parts
    return out


def _looks_like_messages(value: Any) -> bool:
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return False
    return isinstance(value, list) and all(isinstance(m, dict) and "content" in m for m in value)


def _sample_type_for(row: dict[str, Any]) -> type[SingleTurnSample] | type[MultiTurnSample]:
    """A list of messages as ``user_input`` (or reference tool calls) means a multi-turn sample."""
    user_input = row.get("user_input")
    if "reference_tool_calls" in row or (isinstance(user_input, list) and user_input and not isinstance(user_input[0], str)):
        return MultiTurnSample
    if _looks_like_messages(user_input):
        return MultiTurnSample
    return SingleTurnSample


#: List fields whose items are texts: a plain-text cell (not JSON) there is read as a one-item list.
TEXT_LIST_FIELDS = ("retrieved_contexts", "reference_contexts", "multi_responses", "reference_topics",
                    "retrieved_context_ids", "reference_context_ids")


def _decode_json_cells(row: dict[str, Any], sample_type, *, index: int | None,
                       plain: Counter | None = None) -> dict[str, Any]:
    """CSV/Arrow store list and dict fields as JSON text: decode the ones the sample type declares. A cell of
    plain text in a list-of-texts field (a knowledge column of one passage) is that one text, a one-item list,
    counted in ``plain`` per field so that the caller can say it once."""
    out = dict(row)
    reference = out.get("reference")
    if isinstance(reference, str) and reference.lstrip().startswith('["'):  # alternatives stored as JSON text
        try:
            decoded = json.loads(reference)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, list) and all(isinstance(v, str) for v in decoded):
            out["reference"] = decoded
    for name in sample_type.json_fields:
        value = out.get(name)
        if isinstance(value, str) and name in TEXT_LIST_FIELDS and not value.lstrip().startswith(("[", "{")):
            out[name] = [value]
            if plain is not None:
                plain[name] += 1
            continue
        if isinstance(value, str):
            try:
                out[name] = json.loads(value)
            except json.JSONDecodeError as err:
                raise SampleValidationError(
                    [(index, name, f"expected JSON text for a list/dict field, could not decode it: {err.msg}")]
                ) from None
    return out


def read_csv_rows(path: str | Path) -> tuple[list[dict[str, Any]], list[int]]:
    """The rows of a CSV file with a header line, as dicts (an empty cell is None), and each row's line
    number. A row whose cell count differs from the header's is refused, naming its line and both counts
    (``csv.DictReader`` would file the extra cells under the key None). utf-8-sig: a byte-order mark
    (Excel's "CSV UTF-8") is not part of the first column's name."""
    rows, lines = [], []
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None) or []
            twice = sorted({name for name in header if header.count(name) > 1})
            if twice:
                raise SampleValidationError([(None, "<header>", (
                    f"{path}: the header names the column(s) {', '.join(map(repr, twice))} more than once; "
                    "give each column its own name"))])
            for cells in _csv_rows(reader):
                if len(cells) != len(header):
                    raise SampleValidationError([(len(rows), "<line>", (
                        f"{path}: line {reader.line_num} has {len(cells)} cells where the header has {len(header)} "
                        f"columns ({', '.join(header)})"))])
                rows.append({k: (v if v != "" else None) for k, v in zip(header, cells)})
                lines.append(reader.line_num)
        except csv.Error as err:
            hint = (f" (a cell over {csv.field_size_limit():,} characters, the most CSV reads here; JSONL takes cells "
                    "of any length)" if "field limit" in str(err) else "")
            raise SampleValidationError([(len(rows), "<line>", f"{path}: near line {reader.line_num}: {err}{hint}")]) \
                from None
    return rows, lines


def _csv_rows(reader):
    """The reader's rows, empty lines skipped."""
    for cells in reader:
        if cells:
            yield cells


class EvaluationDataset(Sequence):
    """A homogeneous collection of :class:`SingleTurnSample` or :class:`MultiTurnSample`."""

    def __init__(
        self,
        samples: Iterable[SingleTurnSample | MultiTurnSample | dict[str, Any]],
        sample_type: type[SingleTurnSample] | type[MultiTurnSample] | None = None,
        *,
        reference_separator: str | None = None,
    ):
        parsed = []
        problems: list[tuple[int | None, str, str]] = []
        #: Per list-of-texts field, how many plain-text cells were read as one-item lists.
        self.plain_text_lists: Counter = Counter()
        #: Each sample's id in the user's file (``from_jsonl`` / ``from_csv`` with ``id_column``), else None.
        self.ids: list[str] | None = None
        for i, item in enumerate(samples):
            try:
                if isinstance(item, (SingleTurnSample, MultiTurnSample)):
                    sample = item
                elif isinstance(item, dict):
                    row = normalize_row(item, index=i, reference_separator=reference_separator)
                    kind = sample_type or _sample_type_for(row)
                    sample = kind.parse(_decode_json_cells(row, kind, index=i, plain=self.plain_text_lists), index=i)
                else:
                    raise SampleValidationError(
                        [(i, "<sample>", f"expected a dict or a sample, got {type(item).__name__}")]
                    )
            except SampleValidationError as err:
                problems.extend(err.problems)
                continue
            if sample_type is None:
                sample_type = type(sample)
            elif type(sample) is not sample_type:
                problems.append(
                    (i, "<sample>", f"is a {type(sample).__name__}, but the dataset holds {sample_type.__name__}s")
                )
                continue
            parsed.append(sample)
        if problems:
            raise SampleValidationError(problems)
        self.samples: list[SingleTurnSample | MultiTurnSample] = parsed
        self.sample_type = sample_type

    # --- sequence protocol ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return EvaluationDataset(self.samples[index])
        return self.samples[index]

    def __iter__(self) -> Iterator[SingleTurnSample | MultiTurnSample]:
        return iter(self.samples)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EvaluationDataset) and self.samples == other.samples

    def __repr__(self) -> str:
        kind = self.sample_type.__name__ if self.sample_type else "no samples"
        return f"EvaluationDataset({len(self)} x {kind})"

    def features(self) -> list[str]:
        """The fields that at least one sample sets."""
        seen: dict[str, None] = {}
        for sample in self.samples:
            for key in sample.to_dict():
                seen.setdefault(key, None)
        return list(seen)

    # --- lists ---------------------------------------------------------------------------------
    @classmethod
    def from_list(cls, rows: Iterable[dict[str, Any] | SingleTurnSample | MultiTurnSample], *,
                  reference_separator: str | None = None) -> EvaluationDataset:
        return cls(rows, reference_separator=reference_separator)

    def to_list(self) -> list[dict[str, Any]]:
        return [sample.to_dict() for sample in self.samples]

    # --- pandas --------------------------------------------------------------------------------
    @classmethod
    def from_pandas(cls, frame, *, reference_separator: str | None = None) -> EvaluationDataset:
        return cls(frame.to_dict(orient="records"), reference_separator=reference_separator)

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.to_list())

    # --- Hugging Face datasets -----------------------------------------------------------------
    @classmethod
    def from_hf_dataset(cls, dataset, *, reference_separator: str | None = None) -> EvaluationDataset:
        return cls(dataset.to_list(), reference_separator=reference_separator)

    def to_hf_dataset(self):
        """A ``datasets.Dataset``; list/dict fields of multi-turn samples and rubrics become JSON text."""
        from datasets import Dataset

        return Dataset.from_list(self._rows_with_json_cells(arrow=True))

    # --- files ---------------------------------------------------------------------------------
    @classmethod
    def from_jsonl(cls, path: str | Path, *, reference_separator: str | None = None,
                   id_column: str | None = None) -> EvaluationDataset:
        """One sample per line; ``id_column``: a column naming each sample, kept as ``ids``, not a field."""
        rows, lines = [], []
        with open(path, encoding="utf-8-sig") as handle:  # -sig: a byte-order mark is not data
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise SampleValidationError(
                        [(len(rows), "<line>", f"{path}:{line_number} is not valid JSON: {err.msg}")]
                    ) from None
                except RecursionError:
                    raise SampleValidationError(
                        [(len(rows), "<line>", f"{path}:{line_number} is nested too deeply to read")]) from None
                lines.append(line_number)
        return cls._with_ids(rows, lines, path, id_column, reference_separator)

    def to_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        with open(path, "w", encoding="utf-8") as handle:
            for row in self.to_list():
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        return path

    @classmethod
    def from_csv(cls, path: str | Path, *, reference_separator: str | None = None,
                 id_column: str | None = None) -> EvaluationDataset:
        """One sample per row after the header; ``id_column`` as in ``from_jsonl``."""
        rows, lines = read_csv_rows(path)
        return cls._with_ids(rows, lines, path, id_column, reference_separator)

    @classmethod
    def _with_ids(cls, rows: list[Any], lines: list[int], path: str | Path, id_column: str | None,
                  reference_separator: str | None) -> EvaluationDataset:
        """The dataset of ``rows`` (read from ``path``, at file ``lines``), ``id_column`` taken out of every row
        into ``ids``: each row must have one, and no two the same."""
        ids = []
        if id_column is not None:
            for row, line in zip(rows, lines):
                if not isinstance(row, dict) or row.get(id_column) in (None, ""):
                    raise SampleValidationError([(None, id_column, f"{path}:{line} has no value in the id column")])
                ids.append(str(row.pop(id_column)))
            repeated = sorted(item for item, count in Counter(ids).items() if count > 1)
            if repeated:
                raise SampleValidationError([(None, id_column, f"{path}: the id column repeats {repeated[:3]}")])
        dataset = cls(rows, reference_separator=reference_separator)
        dataset.ids = ids or None
        return dataset

    def to_csv(self, path: str | Path) -> Path:
        path = Path(path)
        rows = self._rows_with_json_cells(arrow=False)
        columns = list(dict.fromkeys(key for row in rows for key in row))
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
        return path

    def _rows_with_json_cells(self, *, arrow: bool) -> list[dict[str, Any]]:
        # CSV cells hold text only, so every list/dict becomes JSON. Arrow can hold lists of strings,
        # but not dicts with varying keys (rubrics, tool args) nor mixed-type lists: those become JSON.
        keep_native = {"retrieved_contexts", "reference_contexts", "multi_responses", "reference_topics"}
        fields = self.features()
        rows = []
        for sample in self.samples:
            data = sample.to_dict(exclude_none=False)
            row = {}
            for name in fields:
                value = data.get(name)
                if name in sample.json_fields and value is not None and not (arrow and name in keep_native):
                    value = json.dumps(value, ensure_ascii=False)
                elif name == "reference" and isinstance(value, list):  # alternatives: JSON text in a text column
                    value = json.dumps(value, ensure_ascii=False)
                row[name] = value
            rows.append(row)
        return rows

    # --- DSPy ----------------------------------------------------------------------------------
    def to_examples(self, input_keys: Sequence[str] = DEFAULT_INPUT_KEYS) -> list:
        """``dspy.Example`` per sample, with ``input_keys`` marked as inputs (the rest are labels)."""
        import dspy

        examples = []
        for sample in self.samples:
            data = {name: getattr(sample, name) for name in type(sample).model_fields if getattr(sample, name) is not None}
            keys = [k for k in input_keys if k in data]
            examples.append(dspy.Example(**data).with_inputs(*keys))
        return examples

    @classmethod
    def from_examples(cls, examples: Iterable[Any]) -> EvaluationDataset:
        """Samples from ``dspy.Example`` objects (legacy field names are accepted too)."""
        rows = []
        for example in examples:
            data = example.toDict() if hasattr(example, "toDict") else dict(example)
            rows.append(data)
        return cls(rows)
