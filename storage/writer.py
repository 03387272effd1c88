"""The telemetry writer: one background thread, large Arrow batches, one DuckDB transaction each.

Frames from the simulation are queued in a backlog bounded in bytes (``Backlog``: when the writer
falls behind, a slow disk say, the simulation waits instead of memory growing), converted to Arrow
in the writer thread, and inserted when enough rows or bytes have accumulated or enough wall time
has passed. Every
flush is one committed transaction that also advances ``runs.sim_time_s``, so a run killed at any
moment leaves a readable file with everything committed so far and ``status = 'running'``.

A new file is born complete (``storage.database.create_file``). The output is locked
(``storage.runlock``) for the run's life. The database runs in the sandbox of ``storage.sandbox``
from its creation; its user cursor serves the live SQL console (``TelemetryWriter.user_sql``).
When a write fails (a full disk), the run is recorded ``failed`` with ``sim_time_s`` equal to the
last step actually in the tables, and why in ``twin_meta`` (key ``failure:<run_id>``, one line:
``SELECT value FROM twin_meta WHERE key = 'failure:' || run_id``); the caller gets a
``StorageIOError`` (the environment failed) or the error itself (a bug).
"""

from __future__ import annotations

import datetime as _dt
import queue
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from storage.batches import Backlog, batch_arrow, frames_nbytes
from storage.database import (
    create_file,
    end_run,
    error_line,
    init_schema,
    is_environment_error,
    open_database,
    reopened,
    utc_now,
)
from storage.errors import StorageError, StorageIOError
from storage.live import LivePublisher
from storage.parts import (
    BASE_KEY,
    PART_TABLES,
    base_of,
    by_glob,
    is_parts_backed,
    listed,
    remove_unlisted,
    replace_views,
    stored_base,
    sync_catalog,
)
from storage.runlock import LockedError, RunLock, crash_point
from storage.sandbox import WRITER_MEMORY, Limits, UserSql, UserSqlRunner, parse_memory
from storage.schema import DEFAULT_START, batch_keys, columns
from storage.upsert import latest_per_key
from twin.spec.telemetry import SCHEMA_VERSION, TABLES, UPSERT_KEYS

_STOP = object()

# A batch's rows with the run's id: one constant in the statement, not a column of the batch (a
# string repeated on every row, built, copied and compared by DuckDB for nothing).
_WITH_RUN_ID = "SELECT $1::VARCHAR AS run_id, * FROM _batch"

# Rows of an upsert table (jobs) per INSERT OR REPLACE: a campus's flush may carry every waiting
# job (tens of thousands), and one statement over them all needed more than the run database's
# memory limit; chunks of a few thousand stay well within it.
UPSERT_CHUNK_ROWS = 4096


# Commits between reopenings of the run's database (a checkpoint, then a new connection): DuckDB
# keeps memory per commit of the jobs table's INSERT OR REPLACE that only closing the database
# gives back, so a run of years grew by tens of MB a simulated year; reopened, it stays flat
# (``bench/bench_memory.py --upserts``). Not while a reader thread holds a cursor on it.
RECYCLE_COMMITS = 250


class TelemetryWriter:
    """Owns the write connection of one run file (and its lock) until ``close``.

    ``if_exists``: ``"append"`` adds the run to an existing twin file, ``"error"`` refuses an
    existing file, ``"replace"`` replaces it (never a file another live run holds).

    Memory: frames wait in ``backlog`` (at most ``max_backlog_bytes``; ``write`` blocks beyond),
    then as Arrow in the writer thread until ``flush_rows`` rows or ``flush_bytes`` bytes (or
    ``flush_interval_s``) are reached and they are committed. The bytes bound memory; the rows
    bound is set high enough that the bytes govern (about 1.2 M rows of the UltraServer and chip
    series in 64 MB, their batches carrying no ``run_id``): DuckDB's cost per row falls with the
    size of an insert, and so does the file's (fewer part-filled row groups;
    ``bench/bench_writepath.py``); larger flushes would save little more for much more memory."""

    def __init__(
        self,
        path: str | Path,
        run: dict[str, Any],
        flush_rows: int = 4_000_000,
        flush_interval_s: float = 1.0,
        max_backlog_bytes: int = 128 << 20,
        flush_bytes: int = 64 << 20,
        if_exists: str = "append",
        limits: Limits | None = None,
        live: bool = False,
    ) -> None:
        # ``live``: publish what is committed for readers in other processes while the file is
        # locked (``storage.live``): the parts' manifest, and of a file that keeps its time series
        # in DuckDB (created before schema v11), copies of the batches as parts.
        self.path = Path(path)
        self.run_id = str(run["run_id"])
        self.flush_rows = flush_rows
        self.flush_bytes = flush_bytes
        self.flush_interval_s = flush_interval_s
        # ``limits``: the user's queries. The database itself gets the small ``WRITER_MEMORY``
        # limit (at most the user's), which bounds its block cache however long the run.
        self.limits = limits or Limits()
        self.db_limits = Limits(
            self.limits.timeout_s, min(self.limits.memory_bytes, parse_memory(WRITER_MEMORY))
        )
        self.start: _dt.datetime = run.get("start") or DEFAULT_START
        self.run = {c.name: run.get(c.name) for c in columns("runs")}
        self.run.update(start=self.start, status="running", started_at=utc_now(), finished_at="")
        self.run.update(sim_time_s=0, schema_version=SCHEMA_VERSION)
        user_cur = self._lock_and_open(if_exists)
        # User SQL on this database (its limit); ``storage.liveread.LiveUserSql`` replaces it in a
        # live session with a sandbox of its own per query.
        self.user_sql: UserSqlRunner = UserSql(user_cur, self.db_limits, strict=True)

        self._open_publisher(live)
        self.backlog = Backlog(max_backlog_bytes)
        self._buf: dict[str, list[pa.Table]] = {t: [] for t in TABLES if t != "runs"}
        self._rows = 0
        self._buf_bytes = 0
        self._sim_time_s = 0
        self._error: BaseException | None = None
        self.rows_written = 0
        self.flushes = 0
        self.reopened = 0  # times the database was reopened (``RECYCLE_COMMITS``)
        self._cursors_out = 0  # reader cursors handed out (``cursor``): the database stays open
        self._thread = threading.Thread(target=self._loop, name="twin-writer", daemon=True)
        self._thread.start()

    def _open_publisher(self, live: bool) -> None:
        """Where the run's time series go: Parquet parts (``storage.parts``) published for live
        readers, or DuckDB tables (a file created before schema v11) with copies as parts when
        ``live``."""
        self.parts_backed = is_parts_backed(self.con)
        self._base = ""
        self._moved = False
        self._in_view: set[str] = set()  # tables whose view reads this run's parts
        self._cataloged: dict[str, dict[str, int]] = {}  # the run's parts twin_parts lists, by table
        self.publisher: LivePublisher | None = None
        if self.parts_backed:
            # What a killed run left that no view reads (we hold the lock).
            remove_unlisted(self.path, listed(self.con))
            # The views name the parts where they are now (the file may have moved since a run
            # was last appended): every view is rewritten at the first commit.
            self._base = base_of(self.path)
            self._moved = stored_base(self.con) != self._base
            self.publisher = LivePublisher(self.path, run_id=self.run_id, manifest=live)
            self.publisher.prepare()  # the run's folder, so the first manifest names it
            self.publisher.committed(dict(self.run))
        elif live:
            self.publisher = LivePublisher(self.path)
            self.publisher.on_commit({}, dict(self.run))

    def _lock_and_open(self, if_exists: str) -> duckdb.DuckDBPyConnection:
        """Take the file's run lock, then create the file (or check the existing one against
        ``if_exists``) and open ``self.con`` on it; the user cursor. A failure after the lock is
        taken releases it (closing the connection if it was opened)."""
        try:
            self._lock = RunLock(self.path)
        except LockedError as e:
            raise StorageError(
                f"{self.path}: another run (process {e}) is writing this file; choose another output"
            ) from None
        except OSError as e:
            raise StorageError(f"{self.path}: cannot lock for writing: {e.strerror or e}") from e
        try:
            exists = self.path.exists()
            if exists and if_exists == "error":
                raise StorageError(f"{self.path}: already exists (choose another --out or pass --overwrite)")
            if exists and self.path.is_dir():
                raise StorageError(f"{self.path}: is a directory")
            if not exists or if_exists == "replace":
                create_file(self.path, self.run, self.db_limits)
            crash_point("writer:open")
            self.con, user_cur = open_database(self.path, self.db_limits)
            try:
                if exists and if_exists != "replace":
                    init_schema(self.con, self.run)
            except BaseException:
                self.con.close()
                raise
            return user_cur
        except BaseException:
            self._lock.release()
            raise

    # -------------------------------------------------------------- public
    def write(self, frames: dict[str, dict[str, Any]], sim_time_s: int) -> None:
        """Queue one advance's frames; blocks while the backlog is full (the writer is behind)."""
        self._raise_if_failed()
        if not self.backlog.put((frames, sim_time_s), frames_nbytes(frames)):
            self._raise_if_failed()

    def flush(self) -> None:
        """Block until everything queued so far is committed."""
        done = threading.Event()
        if not self.backlog.put(done, 0):
            self._raise_if_failed()
        while not done.wait(0.1):
            self._raise_if_failed()
        self._raise_if_failed()

    def close(self, status: str = "complete", reason: str = "") -> None:
        """Commit what is queued, mark the run with ``status`` (``failed`` if a write failed) and
        the last step in its tables, close the file and release its lock. A failed run's reason
        (``reason``, else the write error) is kept in ``twin_meta`` under ``failure:<run_id>``."""
        crash_point("close:begin")
        if self._thread.is_alive():
            self.backlog.put(_STOP, 0)
            self._thread.join()
        self.user_sql.close()  # stops a console query still running, and its cursor
        try:
            self._record_end(status if self._error is None else "failed", reason)
            try:
                self.con.execute("CHECKPOINT")
            except duckdb.Error:
                pass  # e.g. a full disk: the write-ahead log keeps what was committed
        finally:
            self.con.close()
            try:
                if self.publisher is not None:
                    self.publisher.close()
            finally:
                self._lock.release()
        self._raise_if_failed()

    def _record_end(self, status: str, reason: str = "") -> None:
        """The final ``runs`` row, its ``sim_time_s`` read back from the tables, and a failed run's
        reason; on a write error, again with the lock's reserve space freed, then on a fresh
        connection (best effort: the file itself may be what fails)."""
        for attempt in range(3):
            try:
                if attempt == 2:
                    self.con.close()
                    self.con, _ = open_database(self.path, self.db_limits)
                why = error_line(self._error) if self._error is not None else reason
                self.con.execute("BEGIN")
                end_run(self.con, self.run, status, why)
                self.con.execute("COMMIT")
                return
            except (duckdb.Error, StorageError) as e:
                try:
                    self.con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                if self._error is None:
                    self._error = e
                self._lock.free_reserve()
                status = "failed"

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor on the same database for a reader thread (the database is no longer reopened
        while the run goes on: closing it would close the cursor)."""
        self._cursors_out += 1
        return self.con.cursor()

    # -------------------------------------------------------------- thread
    def _raise_if_failed(self) -> None:
        """Raise the writer thread's error in the caller: ``StorageIOError`` when the environment
        failed (a full or read-only disk, a file-size limit, no memory), else the error itself
        (a bug)."""
        e = self._error
        if e is None:
            return
        if is_environment_error(e):
            raise StorageIOError(f"{self.path}: telemetry write failed: {error_line(e)}") from e
        raise e

    def _loop(self) -> None:
        last = time.monotonic()
        try:
            while True:
                timeout = max(0.05, self.flush_interval_s - (time.monotonic() - last))
                try:
                    item = self.backlog.get(timeout)
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
                        tb = batch_arrow(table, cols, self.start)
                        if tb.num_rows:
                            self._buf[table].append(tb)
                            self._rows += tb.num_rows
                            self._buf_bytes += tb.nbytes
                if (
                    self._rows >= self.flush_rows
                    or self._buf_bytes >= self.flush_bytes
                    or (time.monotonic() - last >= self.flush_interval_s and (self._rows or item is not None))
                ):
                    self._flush()
                    last = time.monotonic()
        except BaseException as e:  # surfaced to the producer on its next call
            self._error = e
            for item in self.backlog.abandon():  # a blocked producer wakes up and sees the error
                if isinstance(item, threading.Event):
                    item.set()

    def _flush(self) -> None:
        try:
            self._flush_once()
        except duckdb.OutOfMemoryException:
            # A console query may hold the memory: stop it and try once more.
            self._rollback()
            self.user_sql.make_room()
            try:
                self._flush_once()
            except BaseException:
                self._rollback()
                raise
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        try:
            self.con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        if self.parts_backed and self.publisher is not None:
            # The parts stored for the failed transaction: no view reads them (a retry stores its
            # batches again), so they go; the parts the file lists stay.
            self.publisher.abort()
            self._in_view.clear()  # the views that transaction replaced are as they were

    def _insert(self, sql: str, tb: pa.Table) -> None:
        """Run ``sql`` over ``tb`` registered as ``_batch`` with the run's id as its parameter
        (columns go by name, whatever order migrations left)."""
        con = self.con
        con.register("_batch", tb)
        try:
            con.execute(sql, [self.run_id])
        finally:
            try:
                con.unregister("_batch")
            except duckdb.Error:
                pass  # a failed statement aborted the transaction: its own error goes on

    def _flush_once(self) -> None:
        """Commit what is buffered: the parts stored first (each renamed into place whole), then
        one transaction that inserts the other tables' rows, lists the parts and moves the run's
        ``sim_time_s``."""
        crash_point("flush:begin")
        batches = {t: pa.concat_tables(ps) for t, ps in self._buf.items() if ps}
        changed = self._store_parts(batches)
        self.con.execute("BEGIN")
        committed = self._insert_batches(batches)
        changed, now = self._list_parts(changed)
        self.run["sim_time_s"] = self._sim_time_s
        self._upsert_run()
        crash_point("flush:inserted")
        self.con.execute("COMMIT")
        self._committed(changed, now, committed)

    def _store_parts(self, batches: dict[str, pa.Table]) -> list[str]:
        """Store the batches as parts (a file that keeps its time series as parts); the tables
        whose parts changed."""
        if not self.parts_backed:
            return []
        assert self.publisher is not None
        # Live readers also get the rows the file keeps in DuckDB tables (jobs, events, failures,
        # interruptions) as parts of the run's folder: no other process can open the file while
        # the run writes. They are not the recording's (not listed; removed when the run closes).
        shown = batches if self.publisher.publish else {t: batches[t] for t in PART_TABLES if t in batches}
        stored = self.publisher.store(shown)
        crash_point("flush:parts")
        return [t for t in stored if t in PART_TABLES]

    def _insert_batches(self, batches: dict[str, pa.Table]) -> dict[str, pa.Table]:
        """Insert (or upsert) the rows the file keeps in DuckDB tables, in the open transaction;
        every table's rows as committed."""
        committed: dict[str, pa.Table] = {}
        for table, tb in batches.items():
            if table in UPSERT_KEYS:
                # The latest row of a key wins (a job is written again as it moves on): one row per
                # key, in chunks, so a statement's memory does not grow with a campus's queue.
                tb = latest_per_key(tb, batch_keys(table))
                for start in range(0, tb.num_rows, UPSERT_CHUNK_ROWS):
                    self._insert(
                        f"INSERT OR REPLACE INTO {table} BY NAME {_WITH_RUN_ID}",
                        tb.slice(start, UPSERT_CHUNK_ROWS),
                    )
            elif not (self.parts_backed and table in PART_TABLES):
                self._insert(f"INSERT INTO {table} BY NAME {_WITH_RUN_ID}", tb)
            committed[table] = tb
        return committed

    def _list_parts(self, changed: list[str]) -> tuple[list[str], dict[str, dict[str, int]]]:
        """In the open transaction: ``twin_parts`` and the views follow the parts of the tables
        that ``changed`` (all of them when the file moved); those tables and their parts now."""
        if self._moved:
            changed = sorted(set(changed) | set(PART_TABLES))
            self._in_view.clear()
            self.con.execute("INSERT OR REPLACE INTO twin_meta VALUES (?, ?)", [BASE_KEY, self._base])
        now: dict[str, dict[str, int]] = {}
        if changed:
            assert self.publisher is not None
            now = {t: dict(self.publisher.listing(t)) for t in changed}
            sync_catalog(self.con, self.run_id, self._cataloged, now)
        listed_tables = {t for t in changed if now[t]}
        # A view changes only with the run's first part of its table (or every commit where the
        # parts are named one by one: ``storage.parts.view_sql``).
        stale = [t for t in changed if t not in self._in_view or not by_glob(self._base)]
        replace_views(self.con, stale, self._base)
        # (A view made before the run's first part of its table does not read it.)
        self._in_view.update(t for t in stale if t in listed_tables)
        return changed, now

    def _committed(
        self, changed: list[str], now: dict[str, dict[str, int]], committed: dict[str, pa.Table]
    ) -> None:
        """After the commit: the parts listed are the run's for good, the buffers are empty, and
        the live readers are told."""
        if changed:
            self._cataloged.update(now)
        self._moved = False
        if self.publisher is not None and self.parts_backed:
            self.publisher.settle()  # what it stored is listed now: never taken back
        for parts in self._buf.values():
            parts.clear()
        self.flushes += 1
        self.rows_written += sum(tb.num_rows for tb in committed.values())
        self._rows = 0
        self._buf_bytes = 0
        crash_point("flush:committed")
        if self.parts_backed:
            assert self.publisher is not None
            self.publisher.committed(dict(self.run))
        elif self.publisher is not None:
            self.publisher.on_commit(committed, dict(self.run))
        if self.flushes % RECYCLE_COMMITS == 0 and not self._cursors_out:
            con = reopened(self.con, self.path, self.db_limits, self.user_sql)
            if con is not None:
                self.con, self.reopened = con, self.reopened + 1

    def _upsert_run(self) -> None:
        # A commit moves only the simulated time the run reached (its row was written whole when
        # the file was opened, and is again when the run ends).
        self.con.execute(
            "UPDATE runs SET sim_time_s = ? WHERE run_id = ?", [self.run["sim_time_s"], self.run_id]
        )
