"""Reading telemetry files: safe opening, read-only user SQL, and the queries the product uses.

Files open read-only in the sandbox of ``storage.sandbox`` (no file system access beyond the file,
no extensions, configuration locked, a memory limit). User SQL runs through
``storage.sandbox.UserSql`` (only statements that read, a time limit); errors become
``storage.errors.QueryError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from storage.errors import StorageError
from storage.kpis import run_kpis
from storage.parts import access_config, check_listed, follow_move, is_parts_backed, listed
from storage.recording import RecordingError, check_contents, check_recording
from storage.sandbox import Limits, UserSql, connect

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
            follow_move(con, p)
    except BaseException:
        con.close()
        raise
    return con


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
