"""Domain metrics: comparing tables (datacompy), summaries, SQL queries."""

from __future__ import annotations

import io
import re
from typing import Any, ClassVar

import dspy

from judges.base import Judge, Metric
from judges.models import output_constraints
from judges.samples import SampleValidationError


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


# --------------------------------------------------------------------------------------------------
# Summarization
# --------------------------------------------------------------------------------------------------
class ExtractKeyphrases(dspy.Signature):
    """List the key phrases of the text: the names, numbers, events and facts a good summary must keep."""

    text: str = dspy.InputField()
    keyphrases: list[str] = dspy.OutputField()


class GenerateClosedQuestions(dspy.Signature):
    """Write yes/no questions about the key phrases whose answer, according to the text, is yes."""

    text: str = dspy.InputField()
    keyphrases: list[str] = dspy.InputField()
    questions: list[str] = dspy.OutputField()


class AnswerFromSummary(dspy.Signature):
    """Answer each question using only the summary: true if the summary says so, false if it does not.
    One answer per question, in order."""

    summary: str = dspy.InputField()
    questions: list[str] = dspy.InputField()
    answers: list[bool] = dspy.OutputField()


class SummarizationScore(Judge):
    """How much of the text's key content the summary keeps, and how short it is.

    Steps: ``extract_keyphrases`` from the text (``reference_contexts`` joined), ``generate_questions``
    whose answer is yes per the text, ``answer_questions`` from the summary alone (``response``).
    QA = questions the summary answers yes / questions; conciseness = 1 - min(len(summary), len(text)) /
    len(text) in characters. score = (1 - coeff) * QA + coeff * conciseness with ``coeff=0.5`` (Ragas'
    default), or QA alone with ``length_penalty=False``. No question generated: 0.0, with an
    ``undefined_reason``.
    """

    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference_contexts")

    def __init__(self, *, lm: Any = None, length_penalty: bool = True, coeff: float = 0.5,
                 max_questions: int = 10, adapter: Any = None):
        if not 0.0 <= coeff <= 1.0:
            raise ValueError(f"summarization_score: coeff must be in [0, 1], got {coeff!r}")
        super().__init__(lm=lm, adapter=adapter)
        self.length_penalty, self.coeff, self.max_questions = length_penalty, coeff, max_questions
        self.extract_keyphrases = dspy.Predict(ExtractKeyphrases)
        self.generate_questions = dspy.Predict(GenerateClosedQuestions)
        self.answer_questions = dspy.Predict(AnswerFromSummary)

    def forward(self, response: str, reference_contexts: list[str]):
        text = "\n".join(reference_contexts)
        keyphrases = list(dict.fromkeys(k.strip() for k in self.extract_keyphrases(text=text).keyphrases if k.strip()))
        with output_constraints(questions={"maxItems": self.max_questions}):
            questions = [q.strip() for q in self.generate_questions(text=text, keyphrases=keyphrases).questions if q.strip()]
        conciseness = 1.0 - min(len(response), len(text)) / len(text)
        if not questions:
            return dspy.Prediction(score=0.0, qa_score=None, conciseness=conciseness, keyphrases=keyphrases,
                                   questions=[], answers=[], undefined_reason="no question was generated from the text")
        with output_constraints(answers={"minItems": len(questions), "maxItems": len(questions)}):
            answers = [bool(a) for a in self.answer_questions(summary=response, questions=questions).answers]
        answers = (answers + [False] * len(questions))[: len(questions)]
        qa = sum(answers) / len(questions)
        score = (1 - self.coeff) * qa + self.coeff * conciseness if self.length_penalty else qa
        return dspy.Prediction(score=score, qa_score=qa, conciseness=conciseness, keyphrases=keyphrases,
                               questions=questions, answers=answers)

    def feedback(self, result: dspy.Prediction) -> str:
        missed = [q for q, a in zip(result.questions, result.answers) if not a]
        text = f"summarization = {result.score:.2f} (QA {result.qa_score}, conciseness {result.conciseness:.2f})"
        return text + ("; the summary does not answer: " + " | ".join(missed) if missed else "")


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


# --------------------------------------------------------------------------------------------------
# SQL equivalence
# --------------------------------------------------------------------------------------------------
class JudgeSQLEquivalence(dspy.Signature):
    """Explain what each SQL query returns on the given schema, then decide whether the two queries are
    semantically equivalent: they return the same rows on every possible database content."""

    database_schema: str = dspy.InputField()
    reference_sql: str = dspy.InputField()
    candidate_sql: str = dspy.InputField()
    reference_explanation: str = dspy.OutputField()
    candidate_explanation: str = dspy.OutputField()
    equivalent: bool = dspy.OutputField()


_TEXT_TABLE = re.compile(r"^\s*(?:table|表|テーブル)?\s*([A-Za-z_]\w*)\s*[:：(]\s*(.+?)\)?\s*$", re.IGNORECASE)


def schema_tables(schema_texts: list[str]) -> dict[str, list[tuple[str, str, bool]]]:
    """Tables from DDL (``CREATE TABLE ...``) or lines like ``table t: a INT, b VARCHAR`` -> {table:
    [(column, type, primary_key)]}. Text that is neither is skipped."""
    import sqlglot
    from sqlglot import exp

    tables: dict[str, list[tuple[str, str, bool]]] = {}
    for text in schema_texts:
        statements = []
        try:
            statements = [s for s in sqlglot.parse(text) if isinstance(s, exp.Create)]
        except sqlglot.errors.ParseError:
            pass
        if not statements:
            for line in text.splitlines():
                match = _TEXT_TABLE.match(line)
                if not match:
                    continue
                try:
                    statements.append(sqlglot.parse_one(f"CREATE TABLE {match.group(1)} ({match.group(2)})"))
                except sqlglot.errors.ParseError:
                    continue
        for create in statements:
            table = create.find(exp.Table)
            if table is None:
                continue
            columns = []
            for column in create.find_all(exp.ColumnDef):
                kind = column.args.get("kind")
                primary = any(isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint)
                              for c in column.args.get("constraints") or [])
                columns.append((column.name, kind.sql() if kind is not None else "TEXT", primary))
            if columns:
                tables[table.name] = columns
    return tables


def _random_rows(columns: list[tuple[str, str, bool]], rng, n_rows: int) -> list[tuple]:
    has_primary = any(primary for _, _, primary in columns)
    rows = []
    for i in range(n_rows):
        row = []
        for position, (name, kind, primary) in enumerate(columns):
            kind = kind.upper()
            is_key = primary or (not has_primary and position == 0 and name.lower().endswith("id"))
            if is_key:
                row.append(i + 1)
            elif rng.random() < 0.1:
                row.append(None)  # NULLs tell COUNT(col) from COUNT(*), = from IS
            elif name.lower().endswith("id"):
                row.append(rng.randint(1, 4))  # few distinct ids: joins match, groups repeat
            elif any(t in kind for t in ("INT", "BOOL")):
                row.append(rng.randint(0, 9))
            elif any(t in kind for t in ("DEC", "NUM", "FLOAT", "REAL", "DOUBLE", "MONEY")):
                row.append(round(rng.uniform(0, 100), 2))
            elif "DATE" in kind or "TIME" in kind:
                row.append(f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}")
            else:
                row.append(f"{name}_{rng.randint(1, 3)}")
        rows.append(tuple(row))
    return rows


#: SQLite's own limits on the throw-away databases (``sqlite3.Connection.setlimit``): no string or blob
#: over 1 MB (``zeroblob(999999999)`` fails at once instead of allocating GBs), no SQL text over 100 KB,
#: no attached database.
SQLITE_LIMITS = {"SQLITE_LIMIT_LENGTH": 1_000_000, "SQLITE_LIMIT_SQL_LENGTH": 100_000, "SQLITE_LIMIT_ATTACHED": 0}
#: What a compared query may do (``set_authorizer``): read tables, call functions, recurse; nothing else
#: (no ATTACH, PRAGMA, write, schema change or transaction).
_READ_ACTIONS = ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_FUNCTION", "SQLITE_RECURSIVE")


def _read_only(connection) -> None:
    import sqlite3

    allowed = {getattr(sqlite3, name) for name in _READ_ACTIONS}
    connection.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in allowed else sqlite3.SQLITE_DENY)


def _one_statement(sql: str, dialect: str | None, which: str) -> tuple[str | None, str]:
    """``sql`` transpiled to SQLite, or (None, why) when it cannot be parsed or holds more than one statement
    (``SELECT ...; DROP TABLE t`` would otherwise be judged on its first statement only)."""
    import sqlglot

    try:
        statements = [s for s in sqlglot.transpile(sql, read=dialect, write="sqlite") if s.strip()]
    except sqlglot.errors.ParseError as err:
        return None, f"could not parse the {which} SQL: {str(err).splitlines()[0]}"
    if len(statements) != 1:
        return None, f"the {which} SQL holds {len(statements)} statements; one query is compared"
    return statements[0], ""


def execution_equivalence(
    candidate_sql: str,
    reference_sql: str,
    tables: dict[str, list[tuple[str, str, bool]]],
    *,
    dialect: str | None = None,
    trials: int = 3,
    rows_per_table: int = 12,
    time_limit: float = 2.0,
    max_rows: int = 10_000,
    seed: int = 0,
) -> tuple[bool | None, str]:
    """Run both queries on ``trials`` throw-away in-memory SQLite databases filled with seeded random
    rows and compare the results: as lists when the reference orders its rows, else as multisets.
    Returns (True/False, note), or (None, why) when the check cannot run (no usable schema, a schema SQLite
    cannot load, or the reference itself fails or breaks a limit).

    Bounded: the queries may only read (an authorizer denies ATTACH, PRAGMA, writes and schema changes),
    each is interrupted after ``time_limit`` seconds, SQLite refuses strings and blobs over 1 MB and SQL over
    100 KB (``SQLITE_LIMITS``), results are read up to ``max_rows`` rows, and a query of more than one
    statement is not run. A candidate that breaks a limit is not equivalent (False)."""
    import random
    import sqlite3
    import time as _time

    import sqlglot

    if not tables:
        return None, "no table definitions found in the schema"
    reference, why = _one_statement(reference_sql, dialect, "reference")
    if reference is None:
        return None, why
    candidate, why = _one_statement(candidate_sql, dialect, "candidate")
    if candidate is None:
        return (None, why) if why.startswith("could not parse") else (False, why)
    ordered = sqlglot.parse_one(reference, read="sqlite").args.get("order") is not None
    rng = random.Random(seed)
    all_empty = True
    for trial in range(trials):
        connection = sqlite3.connect(":memory:")
        try:
            for limit, value in SQLITE_LIMITS.items():
                connection.setlimit(getattr(sqlite3, limit), value)
            try:
                for table, columns in tables.items():
                    definition = ", ".join(f'"{name}" {kind}' for name, kind, _ in columns)
                    connection.execute(f'CREATE TABLE "{table}" ({definition})')
                    marks = ", ".join("?" * len(columns))
                    connection.executemany(f'INSERT INTO "{table}" VALUES ({marks})',
                                           _random_rows(columns, rng, rows_per_table))
            except sqlite3.Error as err:
                return None, f"SQLite cannot load the schema ({err}); no execution check"
            _read_only(connection)
            results = []
            for which, sql in (("reference", reference), ("candidate", candidate)):
                deadline = _time.monotonic() + time_limit
                connection.set_progress_handler(lambda: int(_time.monotonic() > deadline), 1000)
                try:
                    cursor = connection.execute(sql)
                    rows = cursor.fetchmany(max_rows + 1)
                except sqlite3.Error as err:
                    reason = "ran over the time limit" if "interrupted" in str(err) else f"failed on SQLite: {err}"
                    if which == "reference":
                        return None, f"the reference query {reason}"
                    return False, f"the candidate query {reason}"
                if len(rows) > max_rows:
                    return (None, f"the reference query returns more than {max_rows} rows") if which == "reference" \
                        else (False, f"the candidate query returns more than {max_rows} rows")
                results.append(rows)
        finally:
            connection.close()
        expected, got = ([tuple(_rounded(v) for v in row) for row in rows] for rows in results)
        all_empty = all_empty and not expected and not got
        same = expected == got if ordered else sorted(expected, key=repr) == sorted(got, key=repr)
        if not same:
            return False, f"results differ on random database {trial + 1} of {trials}"
    note = f"same results on {trials} random databases"
    return True, note + (" (all empty: weak evidence)" if all_empty else "")


def _rounded(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


class LLMSQLEquivalence(Judge):
    """1.0 when the LM judges the response SQL equivalent to the reference SQL on the schema given in
    ``reference_contexts``.

    Beyond the LM: when the schema can be read (DDL or ``table t: col TYPE, ...`` lines), both queries also
    run on throw-away in-memory SQLite databases with random rows (``execution_equivalence``); the result
    is reported as ``execution_equivalent`` with ``agree`` saying whether it matches the LM's verdict. A
    difference found by execution is proof of non-equivalence; equal results are evidence, not proof.
    ``use_execution=True`` scores with the execution result where it is available. With reference
    alternatives (several acceptable queries), the LM sees them listed and execution agrees when the
    response matches any of them.
    """

    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference", "reference_contexts")

    def __init__(self, *, lm: Any = None, dialect: str | None = None, execute: bool = True,
                 use_execution: bool = False, adapter: Any = None):
        super().__init__(lm=lm, adapter=adapter)
        self.dialect, self.execute, self.use_execution = dialect, execute, use_execution
        self.judge_equivalence = dspy.Predict(JudgeSQLEquivalence)

    def _forward_inputs(self, sample) -> dict[str, Any]:
        return {**super()._forward_inputs(sample), "alternatives": sample.reference_alternatives()}

    def forward(self, response: str, reference: str, reference_contexts: list[str], alternatives: list[str] | None = None):
        verdict = self.judge_equivalence(database_schema="\n".join(reference_contexts), reference_sql=reference,
                                         candidate_sql=response)
        llm_equivalent = bool(verdict.equivalent)
        executed, note = None, "execution check disabled"
        if self.execute:
            tables = schema_tables(reference_contexts)
            for query in alternatives or [reference]:
                executed, note = execution_equivalence(response, query, tables, dialect=self.dialect)
                if executed:
                    break
        use = self.use_execution and executed is not None
        return dspy.Prediction(
            score=float(executed if use else llm_equivalent),
            llm_equivalent=llm_equivalent,
            execution_equivalent=executed,
            agree=None if executed is None else executed == llm_equivalent,
            execution_note=note,
            reference_explanation=verdict.reference_explanation,
            candidate_explanation=verdict.candidate_explanation,
        )
