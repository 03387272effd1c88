"""Reading telemetry files: safe opening, read-only user SQL, and the queries the product uses.

Files open read-only in the sandbox of ``storage.sandbox`` (no file system access beyond the file,
no extensions, configuration locked, a memory limit). User SQL runs through
``storage.sandbox.UserSql`` (only statements that read, a time limit); errors become
``storage.errors.QueryError``.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from storage.errors import StorageError
from storage.kpis import run_kpis
from storage.parts import PART_TABLES, access_config, check_listed, is_parts_backed, listed, moved_views_sql
from storage.recording import RecordingError, check_contents, check_recording, schema_version
from storage.sandbox import Limits, UserSql, connect
from storage.schema import DEFAULT_START, DUCKDB_TYPES, START, TS, columns
from twin.spec.telemetry import SCHEMA_VERSION, TABLES, Column

READ_THREADS = 1


def open_run_file(
    path: str | Path, limits: Limits | None = None, tables: Iterable[str] | None = None
) -> duckdb.DuckDBPyConnection:
    """Open a telemetry file read-only, sandboxed, with the memory limit of ``limits``, after the
    checks of ``storage.recording`` (a regular DuckDB file, whole; a twin schema this version
    reads with ``tables``, default all of them); raise a ``StorageError`` with a clear reason
    otherwise."""
    p = check_recording(path)
    try:
        # File access to the recording's parts folder only (its time series; ``storage.parts``).
        # One thread: a sum over several Parquet parts (or row groups) then adds in one order, so
        # the same recording gives the same KPIs to the last bit on every read (with more, the
        # partial sums of parallel scans meet in whatever order the threads finish).
        con, _ = connect(
            p,
            read_only=True,
            limits=limits or Limits(),
            extra_config={"threads": READ_THREADS},
            allowed_directories=access_config(p),
        )
    except duckdb.IOException as e:
        msg = str(e)
        if "lock" in msg.lower():
            raise StorageError(
                f"{p}: the file is open for writing by another process (a run in progress)"
            ) from e
        raise RecordingError(f"{p}: not a readable DuckDB telemetry file ({msg.splitlines()[0]})") from e
    except duckdb.Error as e:
        raise RecordingError(f"{p}: cannot open: {str(e).splitlines()[0]}") from e
    try:
        check_contents(con, p, tables)
        if is_parts_backed(con):
            check_listed(p, listed(con))
        script = presentation_sql(con, p)
        if script:
            con.execute(script)
            _PRESENTED[con] = script
    except BaseException:
        con.close()
        raise
    return con


# The temporary views a connection of ``open_run_file`` reads its recording through (by connection):
# a DuckDB cursor is a connection of its own, which does not see them, so ``cursor`` gives it the same.
_PRESENTED: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, str] = weakref.WeakKeyDictionary()


def cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor on ``con`` (for another thread) that sees the recording as ``con`` does: an older
    file upgraded, a moved one's parts where they are now (``presentation_sql``)."""
    cur = con.cursor()
    script = _PRESENTED.get(con)
    if script:
        try:
            cur.execute(script)
        except BaseException:
            cur.close()
            raise
    return cur


def presentation_sql(con: duckdb.DuckDBPyConnection, path: str | Path) -> str:
    """What a reader of the recording ``path`` sees through temporary views (the file is never
    changed), as one script; empty if it reads the file as stored.

    An older file (schema v1-v10) is read as this version's schema, as the writer's migrations would
    leave it (``storage.schema.migrations``): every table with every column of this version, a
    column the file lacks NULL, a table it lacks empty, and the summary views of ``storage.kpis``
    over them. A recording moved or copied since it was written reads its parts where they are now
    (``storage.parts.moved_views_sql``)."""
    from storage.kpis import cost_by_day_view_sql, run_summary_view_sql, system_summary_view_sql

    # The summary views stored in the file read its stored views (a view binds the names in it to
    # the file's objects, not to temporary views), so they are made again over the temporary ones.
    kpi_views = [
        sql.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW", 1)
        for sql in (run_summary_view_sql(), cost_by_day_view_sql(), system_summary_view_sql())
    ]
    if schema_version(con, path) >= SCHEMA_VERSION:
        moved = moved_views_sql(con, path)
        return ";\n".join([*moved, *kpi_views] if moved else [])
    db = str(con.sql("SELECT current_database()").fetchall()[0][0])
    have: dict[str, list[str]] = {}
    for table, column in con.sql(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = 'main' "
        "ORDER BY table_name, column_index",
        params=[db],
    ).fetchall():
        have.setdefault(str(table), []).append(str(column))
    qdb = '"' + db.replace('"', '""') + '"'
    out = []
    for table in TABLES:
        cols = columns(table)
        found = have.get(table, [])
        if found == [c.name for c in cols]:
            continue  # as this version has it (read as stored: its rowid too, the events' order)
        names = ", ".join(c.name if c.name in found else f"{_missing(c)} AS {c.name}" for c in cols)
        if found and table not in PART_TABLES:
            # The run and job tables and the event logs are read in the order they were written
            # (``rowid``), which a view does not have: a temporary copy in that order does.
            out.append(
                f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT {names} FROM {qdb}.main.{table} ORDER BY rowid"
            )
            continue
        source = f" FROM {qdb}.main.{table}" if found else " WHERE false"
        out.append(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT {names}{source}")
    return ";\n".join(out + kpi_views)


def user_query(con: duckdb.DuckDBPyConnection, sql: str, limits: Limits | None = None) -> pa.Table:
    """Run user SQL on a file opened by ``open_run_file`` (the last statement's result is
    returned) inside ``limits``; refuse anything that writes."""
    return UserSql(con, limits or Limits(), strict=False).run(sql).table


def runs(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = (
        con.sql("SELECT * FROM runs ORDER BY started_at").to_arrow_table().to_pylist()
    )
    return rows


def latest_run_id(con: duckdb.DuckDBPyConnection) -> str:
    row = next(iter(con.sql("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchall()), None)
    if row is None:
        raise StorageError("the file holds no run")
    return str(row[0])


def kpi_summary(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """Whole-run KPIs of a run (defined once, in ``storage.kpis``), with the display units the
    outputs give them in (``run_kpis``)."""
    return run_kpis(con, run_id)


def _missing(col: Column) -> str:
    """The value an older file reads for a column its version did not have: NULL, but for calendar
    time. A file older than calendar time (v1) ran before any scenario had a ``start``, so its runs
    start where a scenario without one does (``storage.schema.DEFAULT_START``), and ``ts`` follows."""
    if col is START:
        return f"TIMESTAMPTZ '{DEFAULT_START.isoformat()}'"
    if col is TS:
        return f"TIMESTAMPTZ '{DEFAULT_START.isoformat()}' + to_seconds(time_s)"
    return f"CAST(NULL AS {DUCKDB_TYPES[col.dtype]})"
