"""SQL queries: LLMSQLEquivalence (an LLM verdict) checked by executing both queries on throw-away SQLite
databases filled with seeded random rows.

Owns: the SQL-equivalence step, schema parsing, and the bounded, read-only execution. Must not touch a
database other than the in-memory ones it makes.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import dspy

from judges.metrics.base import Judge
from judges.metrics.domain.sql_sandbox import SQLITE_LIMITS

#: The longest SQL text (bytes) parsed here: the sandbox's own limit, so nothing is parsed that it would not
#: run. Parsing happens in the calling process, outside the sandbox's time limit.
MAX_SQL_BYTES = SQLITE_LIMITS["SQLITE_LIMIT_SQL_LENGTH"]


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
        if len(text.encode("utf-8")) > MAX_SQL_BYTES:  # not parsed: see MAX_SQL_BYTES
            continue
        statements = []
        try:
            statements = [s for s in sqlglot.parse(text) if isinstance(s, exp.Create)]
        except (sqlglot.errors.ParseError, RecursionError):  # RecursionError: nested too deeply to parse
            pass
        if not statements:
            for line in text.splitlines():
                match = _TEXT_TABLE.match(line)
                if not match:
                    continue
                try:
                    statements.append(sqlglot.parse_one(f"CREATE TABLE {match.group(1)} ({match.group(2)})"))
                except (sqlglot.errors.ParseError, RecursionError):
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


#: The child that executes the queries (``sql_sandbox``), run by path in a bare interpreter.
SANDBOX = Path(__file__).with_name("sql_sandbox.py")
#: Seconds a bare interpreter may take to start and load the random rows before the first query.
STARTUP_SECONDS = 10.0
#: Seconds past ``time_limit`` before a running query's child is killed (its own interrupt comes first).
KILL_GRACE = 0.5


def _run_sandboxed(job: dict[str, Any]) -> tuple[bool | None, str]:
    """``sql_sandbox.compare(job)`` in a child process, killed when a query runs ``time_limit`` +
    ``KILL_GRACE`` seconds: a query still running then is over the time limit (the reference's: no check;
    the candidate's: not equivalent)."""
    process = subprocess.Popen([sys.executable, "-I", "-S", str(SANDBOX)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    running, buffer, errors = None, b"", b""
    try:
        try:
            process.stdin.write(json.dumps(job).encode("utf-8"))
            process.stdin.close()
        except BrokenPipeError:  # the child died before reading its job: its stderr says why
            pass
        deadline = time.monotonic() + STARTUP_SECONDS
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    if running == "reference":
                        return None, "the reference query ran over the time limit (stopped)"
                    if running == "candidate":
                        return False, "the candidate query ran over the time limit (stopped)"
                    return None, f"the execution check did not start within {STARTUP_SECONDS:g} s"
                if not selector.select(left):
                    continue
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    if "result" in message:
                        verdict, note = message["result"]
                        return verdict, note
                    running = message["running"]
                    deadline = time.monotonic() + job["time_limit"] + KILL_GRACE
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        errors = process.stderr.read()[-500:]
        for stream in (process.stdin, process.stdout, process.stderr):
            stream.close()
    why = errors.decode("utf-8", "replace").strip().splitlines()
    return None, (f"the execution check stopped without a result (exit {process.returncode}"
                  + (f": {why[-1]}" if why else "") + ")")


def _one_statement(sql: str, dialect: str | None, which: str) -> tuple[str | None, str]:
    """``sql`` transpiled to SQLite, or (None, why) when it cannot be parsed or holds more than one statement
    (``SELECT ...; DROP TABLE t`` would otherwise be judged on its first statement only)."""
    import sqlglot

    size = len(sql.encode("utf-8"))
    if size > MAX_SQL_BYTES:
        return None, (f"the {which} SQL is {size:,} bytes, over the {MAX_SQL_BYTES:,}-byte limit the sandbox runs "
                      f"(sql_sandbox.SQLITE_LIMITS): not parsed")
    try:
        statements = [s for s in sqlglot.transpile(sql, read=dialect, write="sqlite") if s.strip()]
    except sqlglot.errors.ParseError as err:
        return None, f"could not parse the {which} SQL: {str(err).splitlines()[0]}"
    except RecursionError:
        return None, f"could not parse the {which} SQL: it is nested too deeply"
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

    Bounded: the queries run in a child process (``sql_sandbox``), killed when one runs ``time_limit``
    seconds (SQLite's own interrupt comes between steps; a single slow step, such as one huge ``printf``,
    is stopped by the kill); they may only read (an authorizer denies ATTACH, PRAGMA, writes and schema
    changes), SQLite refuses strings and blobs over 1 MB and SQL over
    100 KB (``sql_sandbox.SQLITE_LIMITS``), results are read up to ``max_rows`` rows, and a query of more than one
    statement is not run. A candidate that breaks a limit is not equivalent (False)."""
    import sqlglot

    if not tables:
        return None, "no table definitions found in the schema"
    reference, why = _one_statement(reference_sql, dialect, "reference")
    if reference is None:
        return None, why
    candidate, why = _one_statement(candidate_sql, dialect, "candidate")
    if candidate is None:
        return (None, why) if why.startswith("could not parse") else (False, why)  # over a limit: not equivalent
    ordered = sqlglot.parse_one(reference, read="sqlite").args.get("order") is not None
    return _run_sandboxed({"reference": reference, "candidate": candidate, "ordered": ordered,
                           "tables": {name: [list(c) for c in columns] for name, columns in tables.items()},
                           "trials": trials, "rows_per_table": rows_per_table, "time_limit": time_limit,
                           "max_rows": max_rows, "seed": seed})


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
            too_long = [len(t.encode("utf-8")) for t in reference_contexts if len(t.encode("utf-8")) > MAX_SQL_BYTES]
            if not tables and too_long:
                note = (f"the schema was not parsed: a schema text of {max(too_long):,} bytes is over the "
                        f"{MAX_SQL_BYTES:,}-byte limit SQL is read up to")
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
