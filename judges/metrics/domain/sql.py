"""SQL queries: LLMSQLEquivalence (an LLM verdict) checked by executing both queries on throw-away SQLite
databases filled with seeded random rows.

Owns: the SQL-equivalence step, schema parsing, and the bounded, read-only execution. Must not touch a
database other than the in-memory ones it makes.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import dspy

from judges.metrics.base import Judge


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
