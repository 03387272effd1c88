"""The telemetry writer: one background thread, large Arrow batches, one DuckDB transaction each.

Frames from the simulation are queued in a backlog bounded in bytes (``Backlog``: when the writer
falls behind, a slow disk say, the simulation waits instead of memory growing), converted to Arrow
in the writer thread, and inserted when enough rows or bytes have accumulated or enough wall time
has passed. Every
flush is one committed transaction that also advances ``runs.sim_time_s``, so a run killed at any
moment leaves a readable file with everything committed so far and ``status = 'running'``.

A new file is born complete: it is created under a temporary name in the same folder, its schema
(after a process's first new file, a copy of that file's) and ``runs`` row are committed and
checkpointed, and only then is it renamed into place — a kill at any moment leaves no file or a
valid run. The output is locked
(``storage.runlock``) for the run's life. The database runs in the sandbox of ``storage.sandbox``
from its creation; its user cursor serves the live SQL console (``TelemetryWriter.user_sql``).
When a write fails (a full disk), the run is recorded ``failed`` with ``sim_time_s`` equal to the
last step actually in the tables, and why in ``twin_meta`` (key ``failure:<run_id>``, one line:
``SELECT value FROM twin_meta WHERE key = 'failure:' || run_id``); the caller gets a
``StorageIOError`` (the environment failed) or the error itself (a bug).
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import queue
import shutil
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from storage.errors import StorageError, StorageIOError
from storage.live import LivePublisher
from storage.parts import (
    BASE_KEY,
    CATALOG,
    PART_TABLES,
    access_config,
    base_of,
    by_glob,
    empty_views_sql,
    is_parts_backed,
    listed,
    part_rel,
    remove_unlisted,
    replace_views,
    stored_base,
)
from storage.runlock import LockedError, RunLock, crash_point
from storage.sandbox import (
    WRITER_MEMORY,
    WRITER_TEMP_MAX,
    Limits,
    UserSql,
    UserSqlRunner,
    connect,
    parse_memory,
)
from storage.schema import (
    DEFAULT_START,
    arrow_schema,
    batch_keys,
    batch_schema,
    columns,
    migrations,
    new_file_sql,
    timestamps,
)
from storage.upsert import latest_per_key
from twin.spec.telemetry import SCHEMA_VERSION, TABLES, UPSERT_KEYS

_STOP = object()

# A batch's rows with the run's id: one constant in the statement, not a column of the batch (a
# string repeated on every row, built, copied and compared by DuckDB for nothing).
_WITH_RUN_ID = "SELECT $1::VARCHAR AS run_id, * FROM _batch"

# On-disk format of new files: DuckDB 1.4's, which the 1.4 LTS and 1.5 releases (1.5.x reads
# storage versions 64-68) and 2.x all open; DuckDB 2.0's own default (999) is unreadable by every
# 1.x release. Not older: with 1.2's format ("v1.2.0", version 65) every checkpoint needs memory
# that grows with the file, so a run at the database's memory limit fails after weeks to months
# (``bench/bench_memory.py``); from 1.4's on, the block cache stays within the limit. Only applies
# when the file is created.
STORAGE_COMPATIBILITY = "v1.4.0"


# Threads of a run's database. One: the writer is one background thread beside the simulation,
# and DuckDB's second thread cost more CPU than it saved and left more part-filled row groups, for
# about the same wall time (``bench/bench_writepath.py``: ``writer`` against ``writer/threads-2``).
# The live console's queries run in sandboxes of their own (``storage.live.LiveUserSql``).
WRITER_THREADS = 1


# Block size of new files [bytes]: DuckDB's smallest (its default is 256 KiB). A file that keeps
# its time series as Parquet parts holds only small tables (runs, jobs, the event logs, twin_meta,
# twin_parts), and the tables' data, each primary-key index, the catalog and the blocks a
# checkpoint frees each take whole blocks, so a small run's file is mostly part-filled blocks
# (``bench/bench_writepath.py``, product/empty); a campus's large jobs table grows only a little
# with small blocks, for about the same CPU. Readable by DuckDB 1.2 and later
# (``bench/check_duckdb1.py``); only applies when the file is created.
BLOCK_SIZE = 16 << 10


# Rows of an upsert table (jobs) per INSERT OR REPLACE: a campus's flush may carry every waiting
# job (tens of thousands), and one statement over them all needed more than the run database's
# memory limit; chunks of a few thousand stay well within it.
UPSERT_CHUNK_ROWS = 4096


# Commits between reopenings of the run's database (a checkpoint, then a new connection): DuckDB
# keeps memory per commit of the jobs table's INSERT OR REPLACE that only closing the database
# gives back, so a run of years grew by tens of MB a simulated year; reopened, it stays flat
# (``bench/bench_memory.py --upserts``). Not while a reader thread holds a cursor on it.
RECYCLE_COMMITS = 250


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def open_database(
    path: str | Path, limits: Limits
) -> tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection]:
    """Create or open a writable telemetry database in the sandbox: ``(connection, user cursor)``.
    The one place a writable database is opened; per-file options go in ``config``. File access:
    the recording's parts folder only (``storage.parts``)."""
    # DuckDB's own temporary directory beside the file (its default, ``FILE.tmp``, removed when the
    # database closes): with none, a database at its memory limit cannot set aside a buffer it
    # has no room for and a long run fails ("Unused blocks cannot be offloaded to disk") when its
    # written blocks reach the limit; with it, the limit bounds memory and the run goes on.
    config: dict[str, Any] = {
        "storage_compatibility_version": STORAGE_COMPATIBILITY,
        "temp_directory": f"{path}.tmp",
        "max_temp_directory_size": WRITER_TEMP_MAX,
        "default_block_size": BLOCK_SIZE,
    }
    if WRITER_THREADS:
        config["threads"] = WRITER_THREADS
    try:
        return connect(
            path, read_only=False, limits=limits, extra_config=config, allowed_directories=access_config(path)
        )
    except duckdb.Error as e:
        raise StorageError(f"{path}: cannot open for writing: {str(e).strip().splitlines()[0]}") from e


def init_schema(con: duckdb.DuckDBPyConnection, run_row: dict[str, Any] | None = None) -> None:
    """Bring the file's schema to this version (and record ``run_row``), in one transaction."""
    con.execute("BEGIN")
    con.execute("CREATE TABLE IF NOT EXISTS twin_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    row = next(iter(con.sql("SELECT value FROM twin_meta WHERE key = 'schema_version'").fetchall()), None)
    have = int(row[0]) if row else 0
    if have > SCHEMA_VERSION:
        con.execute("ROLLBACK")
        raise StorageError(f"file has telemetry schema v{have}; this version writes v{SCHEMA_VERSION}")
    if have == 0:
        # A new file: this version's schema at once, its time series as views over Parquet parts
        # (``storage.parts``), empty until the first commit.
        con.execute(_new_file_script())
    else:
        for stmts in migrations()[have:]:
            for s in stmts:
                con.execute(s)
        con.execute(_META_SQL)
    if run_row is not None:
        upsert_run(con, run_row)
    con.execute("COMMIT")


_META_SQL = (
    f"INSERT OR REPLACE INTO twin_meta VALUES ('schema_version', '{SCHEMA_VERSION}'), "
    "('format', 'ai-factory-twin')"
)


@functools.cache
def _new_file_script() -> str:
    """A new file's schema as one script, built once per process: the time series as views over
    Parquet parts (``storage.parts``), empty until the first commit (first: the summary views read
    them), every other table, the summary views, and the schema version."""
    return ";\n".join([empty_views_sql(), *new_file_sql(PART_TABLES), _META_SQL])


# A new file's schema is the same for every file a process creates: the first one's, checkpointed
# before its run row, is kept (a few hundred kB: the file's bytes) and copied as the start of the
# next ones, instead of DuckDB running its ~300 statements again (tables, views and their column
# comments). By the file's format (the settings that shape it).
_TEMPLATES: dict[tuple[str, int, int], bytes] = {}
_TEMPLATES_LOCK = threading.Lock()


def _template_key() -> tuple[str, int, int]:
    return (STORAGE_COMPATIBILITY, BLOCK_SIZE, SCHEMA_VERSION)


def _template() -> bytes | None:
    with _TEMPLATES_LOCK:
        return _TEMPLATES.get(_template_key())


def _keep_template(data: bytes) -> None:
    with _TEMPLATES_LOCK:
        _TEMPLATES[_template_key()] = data


# What an operating system says when it cannot write (strerror texts; DuckDB passes them on in
# its IO, transaction and fatal errors).
_ENVIRONMENT_TEXTS = (
    "No space left on device",
    "File too large",
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
    "Disk quota exceeded",
    "Too many open files",
    "Input/output error",
    "Cannot allocate memory",
    "Out of Memory",
    "out of memory",
    "Could not write file",
    "Could not read from file",
    "Could not truncate file",
    "Could not fsync",
)


def is_environment_error(e: BaseException) -> bool:
    """Did ``e`` (or what caused it) come from the environment (disk, permissions, memory, limits)
    rather than from a bug? An ``OSError``, a ``MemoryError``, DuckDB's IO and out-of-memory
    errors, and any DuckDB error quoting the operating system's reason."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError | MemoryError | StorageIOError):
            return True
        if isinstance(cur, duckdb.IOException | duckdb.OutOfMemoryException):
            return True
        if isinstance(cur, duckdb.Error) and any(t in str(cur) for t in _ENVIRONMENT_TEXTS):
            return True
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return False


def error_line(e: BaseException) -> str:
    """The first line of an error's message (its class name if it has none)."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename is not None else e.strerror
    return " ".join((str(e).strip().splitlines() or [type(e).__name__])[0].split())


def failure_key(run_id: str) -> str:
    """The ``twin_meta`` key of a failed run's reason."""
    return f"failure:{run_id}"


def failure_reason(con: duckdb.DuckDBPyConnection, run_id: str) -> str | None:
    """Why a run failed, as recorded when it ended (``None``: no reason recorded)."""
    rows = con.sql("SELECT value FROM twin_meta WHERE key = ?", params=[failure_key(run_id)]).fetchall()
    return str(rows[0][0]) if rows else None


def upsert_run(con: duckdb.DuckDBPyConnection, run: dict[str, Any], replace: bool = True) -> None:
    cols = [c.name for c in columns("runs")]
    con.execute(
        f"INSERT {'OR REPLACE ' if replace else ''}INTO runs ({', '.join(cols)}) "
        f"VALUES ({', '.join('?' for _ in cols)})",
        [run[c] for c in cols],
    )


def insert_run(con: duckdb.DuckDBPyConnection, run: dict[str, Any]) -> None:
    """``upsert_run`` of a run not yet in ``runs`` (DuckDB's INSERT OR REPLACE of the row costs
    several times a plain INSERT)."""
    upsert_run(con, run, replace=False)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def batch_arrow(table: str, cols: Mapping[str, Any], start: _dt.datetime = DEFAULT_START) -> pa.Table:
    """One advance's frame of ``table`` as Arrow with the columns of ``batch_schema``: the model's
    arrays and ``ts`` computed from ``time_s``; ``run_id``, one value for the whole run, is left to
    where the batch is stored."""
    schema, fields = _batch_fields(table)
    arrays: list[Any] = []
    for name, typ, floating, np_dtype in fields:
        if name == "ts" and "ts" not in cols:
            arrays.append(timestamps(start, cols["time_s"]))
            continue
        v = cols[name]
        # NaN is the model's "no value" (no cap, nothing served); the file stores NULL so that
        # max(), avg() and every reader treat it as missing, not as a number. An array already of
        # the column's type is taken as it is (naming the type is a large part of the conversion
        # of a wide table of few rows).
        if isinstance(v, np.ndarray) and v.dtype == np_dtype:
            if floating and v.ndim == 1:
                # NaN -> NULL as ``from_pandas`` does, without its scan of every value (most of an
                # UltraServer batch's conversion): any NaN makes the sum NaN, so
                # a sum that is not NaN means there is none and the array is taken as it is (no
                # copy); otherwise (a NaN, or +inf and -inf) a mask says which values are NULL.
                with np.errstate(invalid="ignore", over="ignore"):
                    has_nan = bool(np.isnan(np.add.reduce(v)))
                arrays.append(pa.array(v, mask=np.isnan(v)) if has_nan else pa.array(v, from_pandas=False))
            else:
                arrays.append(pa.array(v, from_pandas=floating))
        else:
            arrays.append(pa.array(v, type=typ, from_pandas=floating))
    return pa.Table.from_arrays(arrays, schema=schema)


@functools.cache
def _batch_fields(table: str) -> tuple[pa.Schema, tuple[tuple[str, pa.DataType, bool, Any], ...]]:
    """``batch_schema(table)`` and, per field, its name, type, whether it is a float and the NumPy
    dtype of that type (``None`` where there is none: text, timestamps)."""
    schema = batch_schema(table)
    fields = []
    for f in schema:
        try:
            np_dtype = np.dtype(f.type.to_pandas_dtype()) if not pa.types.is_timestamp(f.type) else None
        except NotImplementedError:
            np_dtype = None
        if pa.types.is_string(f.type):
            np_dtype = None
        fields.append((f.name, f.type, pa.types.is_floating(f.type), np_dtype))
    return schema, tuple(fields)


def to_arrow(table: str, run_id: str, cols: dict[str, Any], start: _dt.datetime = DEFAULT_START) -> pa.Table:
    """``table``'s rows as stored (``arrow_schema``): ``batch_arrow`` with ``run_id`` on every row."""
    tb = batch_arrow(table, cols, start)
    at = arrow_schema(table).get_field_index("run_id")
    field = arrow_schema(table).field(at)
    return tb.add_column(at, field, pa.repeat(pa.scalar(run_id, pa.string()), tb.num_rows))


def frames_nbytes(frames: Mapping[str, Mapping[str, Any]]) -> int:
    """Memory held by one advance's frames [bytes]: arrays exactly, lists of text as one pointer and
    one string object per value (an upper estimate: equal strings are often shared)."""
    n = 0
    for cols in frames.values():
        for v in cols.values():
            if isinstance(v, np.ndarray):
                n += v.nbytes
            elif isinstance(v, (list, tuple)):
                try:
                    chars = sum(map(len, v))
                except TypeError:
                    chars = 0
                n += 64 * len(v) + chars
            else:
                n += 64
    return n


class Backlog:
    """Items handed to the writer thread and not yet taken, bounded in bytes (back-pressure).

    ``put`` blocks while the items queued plus the new one would exceed ``max_bytes``, so a writer
    that falls behind holds the producer back instead of letting memory grow. One item larger than
    the bound on its own is let in when nothing else is queued (it could never fit otherwise): the
    bytes queued never exceed ``max(max_bytes, largest item)``. ``high_water`` is the most ever
    queued; ``waiting`` is set while a producer waits for room; ``abandon`` wakes and releases
    every waiting producer (the writer failed; nothing more is taken)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"backlog bound {max_bytes!r} bytes must be positive")
        self.max_bytes = max_bytes
        self._items: deque[tuple[Any, int]] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._abandoned = False
        self.high_water = 0
        self.waits = 0  # puts that had to wait for room
        self.waiting = threading.Event()

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any, nbytes: int) -> bool:
        """Queue ``item`` of ``nbytes`` once there is room; ``False`` if the backlog was abandoned."""
        with self._cond:
            if self._items and self._bytes + nbytes > self.max_bytes and not self._abandoned:
                self.waits += 1
                self.waiting.set()
                try:
                    while self._items and self._bytes + nbytes > self.max_bytes and not self._abandoned:
                        self._cond.wait()
                finally:
                    self.waiting.clear()
            if self._abandoned:
                return False
            self._items.append((item, nbytes))
            self._bytes += nbytes
            self.high_water = max(self.high_water, self._bytes)
            self._cond.notify_all()
            return True

    def get(self, timeout: float) -> Any:
        """The oldest item; ``queue.Empty`` if none arrives within ``timeout`` seconds."""
        with self._cond:
            if not self._items and not self._cond.wait_for(lambda: bool(self._items), timeout):
                raise queue.Empty
            item, nbytes = self._items.popleft()
            self._bytes -= nbytes
            self._cond.notify_all()
            return item

    def abandon(self) -> list[Any]:
        """Take nothing more: release waiting producers and return what was queued."""
        with self._cond:
            self._abandoned = True
            items = [it for it, _ in self._items]
            self._items.clear()
            self._bytes = 0
            self._cond.notify_all()
            return items


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
        self.run = {c.name: run.get(c.name) for c in columns("runs")}
        self.start: _dt.datetime = run.get("start") or DEFAULT_START
        self.run["start"] = self.start
        self.run.update(status="running", started_at=utc_now(), finished_at="", sim_time_s=0)
        self.run["schema_version"] = SCHEMA_VERSION
        user_cur = self._lock_and_open(if_exists)
        # User SQL on this database (its limit); ``storage.live.LiveUserSql`` replaces it in a
        # live session with a sandbox of its own per query.
        self.user_sql: UserSqlRunner = UserSql(user_cur, self.db_limits, strict=True)

        # The time series as Parquet parts (``storage.parts``), or in DuckDB tables (an older file).
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
                self._create()
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

    def _create(self) -> None:
        """Create the file under a temporary name beside it: its schema (the process's template
        once there is one, ``_template``) and run row committed, checkpointed and closed, then
        renamed into place (replacing an old file)."""
        folder = self.path.parent
        base = f".{self.path.name}.creating-"
        for stale in folder.glob(base + "*"):  # left by a run killed while creating (we hold the lock)
            stale.unlink(missing_ok=True)
        tmp = folder / f"{base}{os.getpid()}"
        crash_point("create:start")
        template = _template()
        try:
            if template is not None:
                with open(tmp, "wb") as f:
                    f.write(template)
            con, _ = open_database(tmp, self.db_limits)
        except (StorageError, OSError) as e:  # e.g. a full disk: nothing of the new file stays behind
            for left in (tmp, Path(str(tmp) + ".wal"), Path(str(tmp) + ".tmp")):
                if left.is_dir():
                    shutil.rmtree(left, ignore_errors=True)
                else:
                    left.unlink(missing_ok=True)
            why = e.strerror or str(e) if isinstance(e, OSError) else str(e).split(": ", 2)[-1]
            raise StorageError(f"{self.path}: cannot create: {why}") from (e.__cause__ or e)
        try:
            crash_point("create:connected")
            if template is None:
                # The process's first new file: its schema, checkpointed, is the template of the
                # next ones (``_template``); then the run row.
                init_schema(con)
                con.execute("CHECKPOINT")
                _keep_template(tmp.read_bytes())
            con.execute("BEGIN")
            insert_run(con, self.run)  # (a new file's runs is empty: no upsert needed)
            con.execute("COMMIT")
            crash_point("create:schema")
            con.execute("CHECKPOINT")
            crash_point("create:checkpointed")
        except (duckdb.Error, OSError) as e:
            con.close()
            tmp.unlink(missing_ok=True)
            Path(str(tmp) + ".wal").unlink(missing_ok=True)
            why = e.strerror or str(e) if isinstance(e, OSError) else str(e).strip().splitlines()[0]
            raise StorageError(f"{self.path}: cannot create: {why}") from e
        con.close()
        crash_point("create:closed")
        # A write-ahead log beside the output belongs to the file being replaced (or to one deleted
        # while it ran); DuckDB would replay it onto the new file.
        Path(str(self.path) + ".wal").unlink(missing_ok=True)
        crash_point("create:old_wal_removed")
        try:
            os.replace(tmp, self.path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise StorageError(f"{self.path}: cannot create: {e.strerror or e}") from e
        _fsync_dir(folder)
        crash_point("create:renamed")

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
                self.con.execute("BEGIN")
                # The end of the last step in the tables (a step's time_s is its start).
                row = self.con.sql(
                    "SELECT coalesce(max(time_s) + ?, 0) FROM factory_ts WHERE run_id = ?",
                    params=[int(self.run.get("dt_s") or 0), self.run_id],
                ).fetchall()
                self.run.update(status=status, finished_at=utc_now(), sim_time_s=int(row[0][0]))
                # Only these three change after the row is written when the file is opened (an
                # UPDATE: a quarter of the cost of writing the row again).
                ((n,),) = self.con.execute(
                    "UPDATE runs SET status = ?, finished_at = ?, sim_time_s = ? WHERE run_id = ?",
                    [status, self.run["finished_at"], self.run["sim_time_s"], self.run_id],
                ).fetchall()
                if n != 1:
                    upsert_run(self.con, self.run)
                why = error_line(self._error) if self._error is not None else reason
                if status == "failed" and why:
                    self.con.execute(
                        "INSERT OR REPLACE INTO twin_meta VALUES (?, ?)", [failure_key(self.run_id), why]
                    )
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
        con = self.con
        crash_point("flush:begin")
        batches = {t: pa.concat_tables(ps) for t, ps in self._buf.items() if ps}
        changed: list[str] = []
        if self.parts_backed:
            # The parts first (each renamed into place whole), then the transaction that lists them.
            assert self.publisher is not None
            # Live readers also get the rows the file keeps in DuckDB tables (jobs, events, failures,
            # interruptions) as parts of the run's folder: no other process can open the file while
            # the run writes. They are not the recording's (not listed; removed when the run closes).
            shown = (
                batches if self.publisher.publish else {t: batches[t] for t in PART_TABLES if t in batches}
            )
            stored = self.publisher.store(shown)
            changed = [t for t in stored if t in PART_TABLES]
            crash_point("flush:parts")
        con.execute("BEGIN")
        written = 0
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
            written += tb.num_rows
        if self._moved:
            changed = sorted(set(changed) | set(PART_TABLES))
            self._in_view.clear()
            con.execute("INSERT OR REPLACE INTO twin_meta VALUES (?, ?)", [BASE_KEY, self._base])
        listed_tables: set[str] = set()
        if changed:
            assert self.publisher is not None
            # ``twin_parts`` gains the run's new parts and loses those merged away (a commit adds a
            # part a table; one statement each, not one a row, which made commits slow).
            now = {t: dict(self.publisher.listing(t)) for t in changed}
            gone = [
                part_rel(self.run_id, t, rel.split("/")[-1])
                for t in changed
                for rel in self._cataloged.get(t, {})
                if rel not in now[t]
            ]
            new = [
                (self.run_id, t, part_rel(self.run_id, t, rel.split("/")[-1]), n)
                for t in changed
                for rel, n in now[t].items()
                if rel not in self._cataloged.get(t, {})
            ]
            if gone:
                con.execute(
                    f"DELETE FROM {CATALOG} WHERE run_id = ? AND list_contains(?, path)", [self.run_id, gone]
                )
            if new:
                con.execute(
                    f"INSERT INTO {CATALOG} VALUES {', '.join(['(?, ?, ?, ?)'] * len(new))}",
                    [v for row in new for v in row],
                )
            listed_tables = {t for t in changed if now[t]}
        # A view changes only with the run's first part of its table (or every commit where the
        # parts are named one by one: ``storage.parts.view_sql``).
        stale = [t for t in changed if t not in self._in_view or not by_glob(self._base)]
        replace_views(con, stale, self._base)
        # (A view made before the run's first part of its table does not read it.)
        self._in_view.update(t for t in stale if t in listed_tables)
        self.run["sim_time_s"] = self._sim_time_s
        self._upsert_run()
        crash_point("flush:inserted")
        con.execute("COMMIT")
        if changed:
            self._cataloged.update(now)
        self._moved = False
        if self.publisher is not None and self.parts_backed:
            self.publisher.settle()  # what it stored is listed now: never taken back
        for parts in self._buf.values():
            parts.clear()
        self.flushes += 1
        self.rows_written += written
        self._rows = 0
        self._buf_bytes = 0
        crash_point("flush:committed")
        if self.parts_backed:
            assert self.publisher is not None
            self.publisher.committed(dict(self.run))
        elif self.publisher is not None:
            self.publisher.on_commit(committed, dict(self.run))
        if self.flushes % RECYCLE_COMMITS == 0:
            self._reopen()

    def _reopen(self) -> None:
        """Checkpoint, close and reopen the run's database (what is committed stays; the user
        cursor moves to the new connection between queries, or the reopening waits for a later
        commit)."""
        if self._cursors_out:
            return
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error:
            return  # e.g. a full disk: the write-ahead log keeps what was committed; tried again later

        def reopen() -> duckdb.DuckDBPyConnection:
            self.con.close()
            self.con, user_cur = open_database(self.path, self.db_limits)
            return user_cur

        if self.user_sql.swap_cursor(reopen):
            self.reopened += 1

    def _upsert_run(self) -> None:
        # A commit moves only the simulated time the run reached (its row was written whole when
        # the file was opened, and is again when the run ends).
        self.con.execute(
            "UPDATE runs SET sim_time_s = ? WHERE run_id = ?", [self.run["sim_time_s"], self.run_id]
        )
