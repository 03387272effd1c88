"""Reading a recording while its run is still being written (``storage.live`` publishes it).

``open_for_reading`` opens the file itself when it can; when the file is held by a running writer
and a sidecar exists, it opens an in-memory DuckDB with the same tables as views over the parts
the manifest lists (the jobs and runs tables keep the latest row per key, as the writer's upserts
do). External access is allowed for the sidecar directory only, then the configuration is locked,
so user SQL can no more reach other files than on a finished recording. The manifest is checked
before any path in it is touched (``check_manifest``).
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from storage.errors import QueryError, StorageError
from storage.live import LivePublisher, live_dir
from storage.manifest import MANIFEST, parts_base, read_manifest
from storage.reader import READ_THREADS, open_run_file
from storage.reader import cursor as reader_cursor
from storage.sandbox import SANDBOX_CONFIG, Limits, UserResult, UserSql, UserSqlRunner
from storage.schema import DUCKDB_TYPES, arrow_schema, batch_keys, columns, comment_sql, migrations
from twin.spec.telemetry import SCHEMA_VERSION, TABLES, UPSERT_KEYS


@dataclass
class Reading:
    """A read-only, sandboxed connection on a recording and whether its run is still in progress."""

    con: duckdb.DuckDBPyConnection
    path: Path
    in_progress: bool = False
    committed_s: int | None = None

    @property
    def note(self) -> str:
        if not self.in_progress:
            return ""
        t = f" up to t={self.committed_s:,} s" if self.committed_s is not None else ""
        return f"{self.path}: run in progress; showing what is committed{t}"

    def close(self) -> None:
        self.con.close()


def open_for_reading(path: str | Path, snapshot: bool = False, limits: Limits | None = None) -> Reading:
    """Open a recording for reading: the file itself (``storage.reader.open_run_file``), or, while a
    run holds it for writing, what the run has published next to it. ``snapshot`` copies the
    published rows into memory (for a reader that queries for a long time, such as the replay)."""
    try:
        return Reading(open_run_file(path, limits), Path(path))
    except StorageError:
        if not os.path.lexists(live_dir(path) / MANIFEST):
            raise
    # The file is held by its writer (or gone): what the run published, whose problems, such as
    # a damaged manifest, are the ones to report.
    return open_live(path, snapshot, limits)


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _ddl(table: str) -> str:
    return f"CREATE TABLE {table} ({', '.join(f'{c.name} {DUCKDB_TYPES[c.dtype]}' for c in columns(table))})"


def _create_table(
    con: duckdb.DuckDBPyConnection, table: str, files: list[str], snapshot: bool, run_id: str | None
) -> None:
    """Create ``table`` over its published parts ``files``: a view (a table when ``snapshot``)
    keeping the latest row per key of an upserted table, or an empty table if none was published.
    The parts hold one run's rows without ``run_id`` (``batch_schema``); the view gives every row
    the manifest's run id."""
    rid = "NULL" if run_id is None else _sql_str(run_id)
    names = ", ".join(f"{rid}::VARCHAR AS run_id" if c.name == "run_id" else c.name for c in columns(table))
    if not files:
        con.execute(_ddl(table))
    else:
        src = (
            f"read_parquet([{', '.join(_sql_str(f) for f in files)}], hive_partitioning = false, "
            "filename = true, file_row_number = true)"
        )
        q = f"SELECT {names} FROM {src}"
        if table in UPSERT_KEYS:  # latest row per key wins, as in the file
            keys = ", ".join(batch_keys(table))
            q += (
                f" QUALIFY row_number() OVER (PARTITION BY {keys} "
                "ORDER BY filename DESC, file_row_number DESC) = 1"
            )
        con.execute(f"CREATE {'TABLE' if snapshot else 'VIEW'} {table} AS {q}")


def open_live(path: str | Path, snapshot: bool = False, limits: Limits | None = None) -> Reading:
    """An in-memory, sandboxed DuckDB over the parts a running writer published (module doc)."""
    sidecar = live_dir(path)
    if sidecar.is_symlink() or not sidecar.is_dir():
        raise StorageError(f"{sidecar}: not a plain folder, so not a live view")
    m = read_manifest(sidecar.resolve())  # checked (``check_manifest``) before any part is touched
    d = parts_base(sidecar.resolve(), m)
    # The sandbox of every telemetry database, except that reading the published parts needs file
    # access, which is then limited to their directory (before the configuration is locked).
    config = {k: v for k, v in SANDBOX_CONFIG.items() if k != "enable_external_access"}
    config["memory_limit"] = f"{(limits or Limits()).memory_bytes}B"
    config["threads"] = READ_THREADS  # the same sums as the finished file gives (storage.reader)
    con = duckdb.connect(":memory:", config=config)
    try:
        con.execute(f"SET allowed_directories = [{_sql_str(str(d) + os.sep)}]")
        con.execute("SET enable_external_access = false")
        con.execute("CREATE TABLE twin_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.execute(
            "INSERT INTO twin_meta VALUES ('schema_version', ?), ('format', 'ai-factory-twin'), "
            "('live', 'true')",
            [str(SCHEMA_VERSION)],
        )
        con.execute(_ddl("runs"))
        run = dict(m["run"])
        if run.get("start"):
            run["start"] = _dt.datetime.fromisoformat(run["start"])
        try:
            row = pa.Table.from_pylist([run], schema=arrow_schema("runs"))
        except (pa.ArrowException, ValueError, OverflowError) as e:
            raise StorageError(f"{path}: run in progress; its live manifest's run row: {e}") from None
        con.register("_run", row)
        con.execute("INSERT INTO runs SELECT * FROM _run")
        con.unregister("_run")
        for table in TABLES:
            if table == "runs":
                continue
            files = [str(d / f) for f in m["tables"].get(table, [])]
            _create_table(con, table, files, snapshot, run.get("run_id"))
            for c in columns(table):
                con.execute(comment_sql(table, c))
        for c in columns("runs"):
            con.execute(comment_sql("runs", c))
        for stmt in (s for stmts in migrations() for s in stmts):
            if stmt.startswith("CREATE OR REPLACE VIEW"):
                con.execute(stmt)
        con.execute("SET lock_configuration = true")
    except (duckdb.Error, pa.ArrowException, TypeError, ValueError) as e:  # a damaged sidecar
        con.close()
        raise StorageError(
            f"{path}: run in progress; its live view could not be read ({(str(e).splitlines() or [''])[0]})"
        ) from e
    except BaseException:
        con.close()
        raise
    return Reading(con, Path(path), in_progress=True, committed_s=m.get("committed_s"))


class LiveUserSql:
    """The live console's SQL: each query in a sandbox of its own (``open_live``: an in-memory
    DuckDB over what the run has published, the user's limits, the strict statement check), closed
    when the query ends. The query's memory is its own and returned when it ends, and the run's
    database keeps its small limit (``storage.sandbox.WRITER_MEMORY``), so a long live session
    stays flat. Where nothing is published (publishing failed) queries go to ``fallback``, the
    writer's own user cursor, within the writer's limit."""

    strict = True

    def __init__(
        self, publisher: LivePublisher, path: str | Path, limits: Limits, fallback: UserSqlRunner
    ) -> None:
        self.publisher = publisher
        self.path = Path(path)
        self.limits = limits
        self.fallback = fallback
        self._lock = threading.Lock()  # one query at a time
        self._current: UserSql | None = None
        self._closed = False

    def run(
        self, sql: str, max_rows: int | None = None, cancelled: Callable[[], bool] | None = None
    ) -> UserResult:
        with self._lock:
            if self._closed:
                raise QueryError("the run has ended; open its file to query it")
            reading = None
            if self.publisher.error is None and self.publisher.created:
                try:
                    reading = open_live(self.path, limits=self.limits)
                except StorageError:
                    reading = None  # e.g. the sidecar went away with a publishing failure
            if reading is None:
                return self.fallback.run(sql, max_rows, cancelled)
            try:
                self._current = UserSql(reader_cursor(reading.con), self.limits, strict=True)
                if self._closed:  # closed while the sandbox opened
                    raise QueryError("cancelled")
                return self._current.run(sql, max_rows, cancelled)
            finally:
                us, self._current = self._current, None
                if us is not None:
                    us.close()
                reading.close()

    def interrupt(self) -> None:
        us = self._current
        if us is not None:
            us.interrupt()
        self.fallback.interrupt()

    def make_room(self) -> None:
        """Only a query on the writer's database shares its memory."""
        self.fallback.make_room()

    def swap_cursor(self, reopen: Callable[[], duckdb.DuckDBPyConnection]) -> bool:
        """Only the fallback's cursor is on the writer's database."""
        return self.fallback.swap_cursor(reopen)

    def close(self) -> None:
        self._closed = True
        self.interrupt()
        with self._lock:
            self.fallback.close()
