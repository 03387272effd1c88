"""Read-only SQL over one Parquet file (a sweep's results.parquet) as the view ``results``.

The connection is in memory, may read that one file and nothing else (external access off, the
file on the allow-list, configuration locked); user SQL goes through the same reading-statement
check as telemetry files (``storage.reader.user_query``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from storage.writer import StorageError

VIEW = "results"


def open_parquet(path: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with the view ``results`` over the Parquet file at ``path``."""
    p = Path(path)
    if not p.exists():
        raise StorageError(f"{p}: no such file")
    if p.is_dir():
        raise StorageError(f"{p}: is a directory, not a Parquet file")
    full = str(p.resolve())
    literal = "'" + full.replace("'", "''") + "'"
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"SET allowed_paths = [{literal}]")
        con.execute("SET enable_external_access = false")
        con.execute(f"CREATE VIEW {VIEW} AS SELECT * FROM read_parquet({literal})")
        con.sql(f"SELECT * FROM {VIEW} LIMIT 0").fetchall()
        con.execute("SET lock_configuration = true")
    except duckdb.Error as e:
        con.close()
        raise StorageError(f"{p}: not a readable Parquet file ({str(e).splitlines()[0]})") from e
    return con
