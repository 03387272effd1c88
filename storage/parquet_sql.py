"""Read-only SQL over one Parquet file (a sweep's results.parquet) as the view ``results``.

The connection is in memory and sandboxed like a telemetry file (``storage.sandbox``: no
extensions, no spilling, a memory limit, configuration locked); the one file it may read is that
Parquet file (on DuckDB's allow-list, all other external access off). User SQL then goes through
``storage.sandbox.UserSql`` like any other (``twin sql``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from storage.errors import StorageError
from storage.sandbox import SANDBOX_CONFIG, Limits

VIEW = "results"


def open_parquet(path: str | Path, limits: Limits | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with the view ``results`` over the Parquet file at ``path``."""
    p = Path(path)
    if not p.exists():
        raise StorageError(f"{p}: no such file")
    if p.is_dir():
        raise StorageError(f"{p}: is a directory, not a Parquet file")
    lim = limits or Limits()
    literal = "'" + str(p.resolve()).replace("'", "''") + "'"
    # External access goes off after the allow-list is set (DuckDB refuses the list afterwards).
    config = {k: v for k, v in SANDBOX_CONFIG.items() if k != "enable_external_access"}
    con = duckdb.connect(":memory:", config={**config, "memory_limit": f"{lim.memory_bytes}B"})
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
