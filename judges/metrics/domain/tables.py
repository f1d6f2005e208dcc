"""Comparing tables: DataCompyScore (row or column precision / recall / F1 via datacompy).

Owns: reading CSV tables from sample fields and comparing them. Must not call an LM.
"""

from __future__ import annotations

import io
from typing import Any, ClassVar

import dspy

from judges.data.samples import SampleValidationError
from judges.metrics.base import Metric


class DataCompyScore(Metric):
    """Agreement of two CSV tables, ``response`` against ``reference``, with datacompy.

    ``mode="row"``: rows equal in every shared column (rows are paired by position, or by
    ``join_columns``); precision = matching rows / response rows, recall = matching rows / reference rows.
    ``mode="column"``: columns whose values all match; precision over the response's columns, recall over
    the reference's. Ragas's spellings ``"rows"`` / ``"columns"`` are accepted too. ``metric`` picks
    precision, recall or f1 (0.0 when both are 0). ``abs_tol`` and ``rel_tol`` are datacompy's numeric
    tolerances. A missing value matches a missing value: when a column is numeric on one side and text on
    the other (an all-empty column reads as numbers), both sides are compared as text, where datacompy
    1.x would count NaN vs NaN as a mismatch. A reference that is not a CSV table is a validation error
    naming the field (bad input); a response that is not one is a bad answer: 0.0, with the parser's
    complaint in ``not_a_table``.
    """

    first_use_imports: ClassVar[tuple[str, ...]] = ("pandas", "datacompy")

    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference")

    def __init__(
        self,
        *,
        mode: str = "row",
        metric: str = "f1",
        join_columns: list[str] | str | None = None,
        abs_tol: float = 0.0,
        rel_tol: float = 0.0,
    ):
        mode = {"rows": "row", "columns": "column"}.get(mode, mode)
        if mode not in ("row", "column"):
            raise ValueError(f"data_compy_score: mode={mode!r} is not one of ['column', 'columns', 'row', 'rows']")
        if metric not in ("precision", "recall", "f1"):
            raise ValueError(f"data_compy_score: metric={metric!r} is not one of ['f1', 'precision', 'recall']")
        self.mode, self.metric = mode, metric
        self.join_columns, self.abs_tol, self.rel_tol = join_columns, abs_tol, rel_tol

    def _table(self, text: str, field: str) -> Any:
        import pandas as pd

        try:
            frame = pd.read_csv(io.StringIO(text))
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
            raise SampleValidationError([(None, field, f"is not a CSV table: {err}")], metric=self.name) from None
        if frame.shape[1] == 0 or frame.shape[0] == 0:
            raise SampleValidationError([(None, field, "is a CSV table without rows or columns")], metric=self.name)
        return frame

    def _score(self, sample) -> dspy.Prediction:
        references = [self._table(text, "reference") for text in sample.reference_alternatives()]
        try:
            response = self._table(sample.response, "response")
        except SampleValidationError as err:
            return dspy.Prediction(score=0.0, precision=0.0, recall=0.0, f1=0.0, matched=0,
                                   not_a_table=err.problems[0][2])
        results = [self._compare(reference, response) for reference in references]
        best = max(range(len(results)), key=lambda i: results[i].score)
        if len(results) > 1:
            results[best]["matched_reference"] = best
        return results[best]

    def _compare(self, reference: Any, response: Any) -> dspy.Prediction:
        import datacompy

        reference, response = _same_kinds(reference, response)
        options: dict[str, Any] = dict(abs_tol=self.abs_tol, rel_tol=self.rel_tol)
        if self.join_columns is None:
            options["on_index"] = True
        else:
            options["join_columns"] = self.join_columns
        compare = datacompy.PandasCompare(reference, response, **options)
        if self.mode == "row":
            matched = compare.count_matching_rows()
            recall, precision = matched / reference.shape[0], matched / response.shape[0]
        else:
            matched = sum(1 for column in compare.column_stats if column["unequal_cnt"] == 0)
            recall, precision = matched / reference.shape[1], matched / response.shape[1]
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        score = {"precision": precision, "recall": recall, "f1": f1}[self.metric]
        return dspy.Prediction(
            score=float(score), precision=float(precision), recall=float(recall), f1=float(f1), matched=int(matched)
        )


def _same_kinds(reference: Any, response: Any) -> tuple[Any, Any]:
    """The two tables with every shared column that is numeric on one side only turned into text on both
    (missing values stay missing), so datacompy compares like with like and NaN matches NaN."""
    import pandas as pd

    reference, response = reference.copy(), response.copy()
    for column in set(reference.columns) & set(response.columns):
        numeric = (pd.api.types.is_numeric_dtype(reference[column]), pd.api.types.is_numeric_dtype(response[column]))
        if numeric[0] != numeric[1]:
            for frame in (reference, response):
                frame[column] = frame[column].astype("string")
    return reference, response
