"""Reading telemetry files: safe opening, read-only user SQL, and the queries the product uses.

Files open read-only in the sandbox of ``storage.sandbox`` (no file system access beyond the file,
no extensions, configuration locked, a memory limit). User SQL runs through
``storage.sandbox.UserSql`` (only statements that read, a time limit); errors become
``storage.errors.QueryError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from storage.errors import StorageError
from storage.kpis import run_kpis
from storage.sandbox import Limits, UserSql, connect
from twin.telemetry import SCHEMA_VERSION


def open_run_file(path: str | Path, limits: Limits | None = None) -> duckdb.DuckDBPyConnection:
    """Open a telemetry file read-only, sandboxed, with the memory limit of ``limits``; raise
    ``StorageError`` with a clear reason if it is missing, not a DuckDB file, not a twin run, or
    from an incompatible version."""
    p = Path(path)
    if not p.exists():
        raise StorageError(f"{p}: no such file")
    if p.is_dir():
        raise StorageError(f"{p}: is a directory, not a telemetry file")
    try:
        con, _ = connect(p, read_only=True, limits=limits or Limits())
    except duckdb.IOException as e:
        msg = str(e)
        if "lock" in msg.lower():
            raise StorageError(
                f"{p}: the file is open for writing by another process (a run in progress)"
            ) from e
        raise StorageError(f"{p}: not a DuckDB telemetry file ({msg.splitlines()[0]})") from e
    except duckdb.Error as e:
        raise StorageError(f"{p}: cannot open: {str(e).splitlines()[0]}") from e
    try:
        row = next(iter(con.sql("SELECT value FROM twin_meta WHERE key = 'schema_version'").fetchall()), None)
    except duckdb.Error:
        con.close()
        raise StorageError(
            f"{p}: a DuckDB file, but not an AI Factory Twin run (no twin_meta table)"
        ) from None
    if row is None:
        con.close()
        raise StorageError(f"{p}: not an AI Factory Twin run (no schema version recorded)")
    if int(row[0]) != SCHEMA_VERSION:
        con.close()
        raise StorageError(
            f"{p}: telemetry schema v{row[0]}, this version of twin reads v{SCHEMA_VERSION}; "
            "re-run the scenario with this version"
        )
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
