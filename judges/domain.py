"""Domain metrics: comparing tables (datacompy)."""

from __future__ import annotations

import io
from typing import Any, ClassVar

import dspy

from judges.base import Metric
from judges.samples import SampleValidationError


class DataCompyScore(Metric):
    """Agreement of two CSV tables, ``response`` against ``reference``, with datacompy.

    ``mode="row"``: rows equal in every shared column (rows are paired by position, or by
    ``join_columns``); precision = matching rows / response rows, recall = matching rows / reference rows.
    ``mode="column"``: columns whose values all match; precision over the response's columns, recall over
    the reference's. ``metric`` picks precision, recall or f1 (0.0 when both are 0). ``abs_tol`` and
    ``rel_tol`` are datacompy's numeric tolerances. Text that is not a CSV table is reported as a
    validation error naming the field.
    """

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
        if mode not in ("row", "column"):
            raise ValueError(f"data_compy_score: mode={mode!r} is not one of ['column', 'row']")
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
        import datacompy

        reference = self._table(sample.reference, "reference")
        response = self._table(sample.response, "response")
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
