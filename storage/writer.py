"""The telemetry writer: one background thread, large Arrow batches, one DuckDB transaction each.

Frames from the simulation are queued (bounded, so memory stays flat), converted to Arrow in the
writer thread, and inserted when enough rows have accumulated or enough wall time has passed. Every
flush is one committed transaction that also advances ``runs.sim_time_s``, so a run killed at any
moment leaves a readable file with everything committed so far and ``status = 'running'``.
"""

from __future__ import annotations

import datetime as _dt
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from storage.schema import DEFAULT_START, arrow_schema, columns, migrations, timestamps
from twin.telemetry import SCHEMA_VERSION, TABLES, UPSERT_KEYS

_STOP = object()

# On-disk format of new files: the oldest DuckDB storage version that keeps everything the file
# uses (tables, views, column comments). "v1.2.0" writes storage version 65, which DuckDB 1.2 and
# later 1.x releases (1.5.x reads 64-68) and 2.x all open; DuckDB 2.0's own default (999) is
# unreadable by every 1.x release. Only applies when the file is created.
STORAGE_COMPATIBILITY = "v1.2.0"


class StorageError(Exception):
    """A telemetry file could not be created, opened or written."""


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def init_schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("BEGIN")
    con.execute("CREATE TABLE IF NOT EXISTS twin_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    row = next(iter(con.sql("SELECT value FROM twin_meta WHERE key = 'schema_version'").fetchall()), None)
    have = int(row[0]) if row else 0
    if have > SCHEMA_VERSION:
        con.execute("ROLLBACK")
        raise StorageError(f"file has telemetry schema v{have}; this version writes v{SCHEMA_VERSION}")
    for stmts in migrations()[have:]:
        for s in stmts:
            con.execute(s)
    con.execute(
        "INSERT OR REPLACE INTO twin_meta VALUES ('schema_version', ?), ('format', 'ai-factory-twin')",
        [str(SCHEMA_VERSION)],
    )
    con.execute("COMMIT")


def to_arrow(table: str, run_id: str, cols: dict[str, Any], start: _dt.datetime = DEFAULT_START) -> pa.Table:
    schema = arrow_schema(table)
    n = None
    arrays: list[Any] = []
    for f in schema:
        if f.name == "run_id":
            arrays.append(None)
            continue
        if f.name == "ts" and "ts" not in cols:
            arrays.append(timestamps(start, cols["time_s"]))
            continue
        v = cols[f.name]
        # NaN is the model's "no value" (no cap, nothing served); the file stores NULL so that
        # max(), avg() and every reader treat it as missing, not as a number.
        arr = pa.array(v, type=f.type, from_pandas=pa.types.is_floating(f.type))
        n = len(arr)
        arrays.append(arr)
    n = n or 0
    arrays[schema.get_field_index("run_id")] = (
        pa.array([run_id] * n, type=pa.string()) if n else pa.array([], pa.string())
    )
    return pa.Table.from_arrays(arrays, schema=schema)


class TelemetryWriter:
    """Owns the write connection of one run file."""

    def __init__(
        self,
        path: str | Path,
        run: dict[str, Any],
        flush_rows: int = 500_000,
        flush_interval_s: float = 1.0,
        max_pending: int = 8,
        on_commit: Callable[[dict[str, pa.Table], dict[str, Any]], None] | None = None,
    ) -> None:
        # Called in the writer thread after every commit with the committed batches and the run row
        # (storage.live publishes them for readers while the file is locked).
        self.on_commit = on_commit
        self.path = Path(path)
        self.run_id = str(run["run_id"])
        self.flush_rows = flush_rows
        self.flush_interval_s = flush_interval_s
        try:
            self.con = duckdb.connect(
                str(self.path), config={"storage_compatibility_version": STORAGE_COMPATIBILITY}
            )
        except duckdb.Error as e:
            raise StorageError(f"{self.path}: cannot open for writing: {e}") from e
        try:
            init_schema(self.con)
        except BaseException:
            self.con.close()
            raise
        self.run = {c.name: run.get(c.name) for c in columns("runs")}
        self.start: _dt.datetime = run.get("start") or DEFAULT_START
        self.run["start"] = self.start
        self.run.update(status="running", started_at=utc_now(), finished_at="", sim_time_s=0)
        self.run["schema_version"] = SCHEMA_VERSION
        self._upsert_run()
        if on_commit is not None:
            on_commit({}, dict(self.run))
        self._q: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self._buf: dict[str, list[pa.Table]] = {t: [] for t in TABLES if t != "runs"}
        self._rows = 0
        self._sim_time_s = 0
        self._error: BaseException | None = None
        self.rows_written = 0
        self._thread = threading.Thread(target=self._loop, name="twin-writer", daemon=True)
        self._thread.start()

    # -------------------------------------------------------------- public
    def write(self, frames: dict[str, dict[str, Any]], sim_time_s: int) -> None:
        """Queue one advance's frames (blocks when the writer is behind)."""
        self._raise_if_failed()
        self._q.put((frames, sim_time_s))

    def flush(self) -> None:
        """Block until everything queued so far is committed."""
        done = threading.Event()
        self._q.put(done)
        while not done.wait(0.1):
            self._raise_if_failed()
        self._raise_if_failed()

    def close(self, status: str = "complete") -> None:
        """Commit what is queued, mark the run with ``status`` and close the file."""
        if self._thread.is_alive():
            self._q.put(_STOP)
            self._thread.join()
        try:
            if self._error is None:
                self.run.update(status=status, finished_at=utc_now(), sim_time_s=self._sim_time_s)
            else:
                self.run.update(status="failed", finished_at=utc_now())
            self._upsert_run()
            self.con.execute("CHECKPOINT")
        finally:
            self.con.close()
        self._raise_if_failed()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor on the same database for a reader thread."""
        return self.con.cursor()

    # -------------------------------------------------------------- thread
    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise StorageError(f"{self.path}: telemetry write failed: {self._error}") from self._error

    def _loop(self) -> None:
        last = time.monotonic()
        try:
            while True:
                timeout = max(0.05, self.flush_interval_s - (time.monotonic() - last))
                try:
                    item = self._q.get(timeout=timeout)
                except queue.Empty:
                    item = None
                if item is _STOP:
                    self._flush()
                    return
                if isinstance(item, threading.Event):
                    self._flush()
                    last = time.monotonic()
                    item.set()
                    continue
                if item is not None:
                    frames, t = item
                    self._sim_time_s = t
                    for table, cols in frames.items():
                        tb = to_arrow(table, self.run_id, cols, self.start)
                        if tb.num_rows:
                            self._buf[table].append(tb)
                            self._rows += tb.num_rows
                if self._rows >= self.flush_rows or (
                    time.monotonic() - last >= self.flush_interval_s and (self._rows or item is not None)
                ):
                    self._flush()
                    last = time.monotonic()
        except BaseException as e:  # surfaced to the producer on its next call
            self._error = e
            while True:  # drain so a blocked producer wakes up
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, threading.Event):
                    item.set()

    def _flush(self) -> None:
        con = self.con
        committed: dict[str, pa.Table] = {}
        con.execute("BEGIN")
        for table, parts in self._buf.items():
            if not parts:
                continue
            tb = committed[table] = pa.concat_tables(parts)
            con.register("_batch", tb)
            if table in UPSERT_KEYS:
                keys = ", ".join(UPSERT_KEYS[table])
                con.execute(
                    f"INSERT OR REPLACE INTO {table} SELECT * EXCLUDE (_seq) FROM "
                    f"(SELECT *, row_number() OVER () AS _seq FROM _batch) "
                    f"QUALIFY row_number() OVER (PARTITION BY {keys} ORDER BY _seq DESC) = 1"
                )
            else:
                con.execute(f"INSERT INTO {table} SELECT * FROM _batch")
            con.unregister("_batch")
            self.rows_written += tb.num_rows
            parts.clear()
        self.run["sim_time_s"] = self._sim_time_s
        self._upsert_run()
        con.execute("COMMIT")
        self._rows = 0
        if self.on_commit is not None:
            self.on_commit(committed, dict(self.run))

    def _upsert_run(self) -> None:
        cols = [c.name for c in columns("runs")]
        self.con.execute(
            f"INSERT OR REPLACE INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
            [self.run[c] for c in cols],
        )
