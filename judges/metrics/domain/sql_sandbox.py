"""The execution half of SQL equivalence, run in a child process that the parent kills at the time limit.

    python -I -S sql_sandbox.py  < job.json      # one JSON job in, JSON lines out

A job: ``{"reference": sql, "candidate": sql, "tables": {name: [[column, type, primary], ...]}, "ordered":
bool, "trials": n, "rows_per_table": n, "time_limit": s, "max_rows": n, "seed": n}`` (both queries already
one SQLite statement). Before each query the child writes ``{"running": "reference"|"candidate"}``; at the
end ``{"result": [true|false|null, note]}``. SQLite's progress handler interrupts a query between steps;
one slow step (a single huge ``printf``) is never between steps, so the parent (``sql.execution_equivalence``)
also kills the child when a query runs past ``time_limit``. Started with ``-I -S`` it imports the standard
library only, so it costs a bare interpreter start.

Owns: filling throw-away in-memory databases with seeded random rows and comparing the two queries' rows.
Must not import the package (it runs by path in a bare interpreter) or touch any database it did not make.
"""

import json
import random
import sqlite3
import sys
import time

#: SQLite's own limits on the throw-away databases (``sqlite3.Connection.setlimit``): no string or blob
#: over 1 MB (``zeroblob(999999999)`` fails at once instead of allocating GBs), no SQL text over 100 KB,
#: no attached database.
SQLITE_LIMITS = {"SQLITE_LIMIT_LENGTH": 1_000_000, "SQLITE_LIMIT_SQL_LENGTH": 100_000, "SQLITE_LIMIT_ATTACHED": 0}
#: What a compared query may do (``set_authorizer``): read tables, call functions, recurse; nothing else
#: (no ATTACH, PRAGMA, write, schema change or transaction).
READ_ACTIONS = ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_FUNCTION", "SQLITE_RECURSIVE")


def random_rows(columns, rng, n_rows):
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


def read_only(connection):
    allowed = {getattr(sqlite3, name) for name in READ_ACTIONS}
    connection.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in allowed else sqlite3.SQLITE_DENY)


def rounded(value):
    return round(value, 6) if isinstance(value, float) else value


def announce(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def compare(job):
    """(True/False/None, note): see ``sql.execution_equivalence``."""
    rng = random.Random(job["seed"])
    all_empty = True
    for trial in range(job["trials"]):
        connection = sqlite3.connect(":memory:")
        try:
            for limit, value in SQLITE_LIMITS.items():
                connection.setlimit(getattr(sqlite3, limit), value)
            try:
                for table, columns in job["tables"].items():
                    definition = ", ".join(f'"{name}" {kind}' for name, kind, _ in columns)
                    connection.execute(f'CREATE TABLE "{table}" ({definition})')
                    marks = ", ".join("?" * len(columns))
                    connection.executemany(f'INSERT INTO "{table}" VALUES ({marks})',
                                           random_rows(columns, rng, job["rows_per_table"]))
            except sqlite3.Error as err:
                return None, f"SQLite cannot load the schema ({err}); no execution check"
            read_only(connection)
            results = []
            for which in ("reference", "candidate"):
                announce({"running": which})
                deadline = time.monotonic() + job["time_limit"]
                connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
                try:
                    rows = connection.execute(job[which]).fetchmany(job["max_rows"] + 1)
                except sqlite3.Error as err:
                    reason = "ran over the time limit" if "interrupted" in str(err) else f"failed on SQLite: {err}"
                    return (None, f"the reference query {reason}") if which == "reference" \
                        else (False, f"the candidate query {reason}")
                if len(rows) > job["max_rows"]:
                    return (None, f"the reference query returns more than {job['max_rows']} rows") \
                        if which == "reference" else (False, f"the candidate query returns more than {job['max_rows']} rows")
                results.append(rows)
        finally:
            connection.close()
        expected, got = ([tuple(rounded(v) for v in row) for row in rows] for rows in results)
        all_empty = all_empty and not expected and not got
        same = expected == got if job["ordered"] else sorted(expected, key=repr) == sorted(got, key=repr)
        if not same:
            return False, f"results differ on random database {trial + 1} of {job['trials']}"
    note = f"same results on {job['trials']} random databases"
    return True, note + (" (all empty: weak evidence)" if all_empty else "")


if __name__ == "__main__":
    announce({"result": list(compare(json.loads(sys.stdin.read())))})
