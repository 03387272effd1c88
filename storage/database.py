"""A run's database file: opened in the sandbox, created whole, its schema and its ``runs`` row.

The one place a writable telemetry database is opened (``open_database``) and a new one is born
(``create_file``: under a temporary name beside it, schema and run row committed and checkpointed,
then renamed into place, so a kill at any moment leaves no file or a valid one). Also what a
failed run leaves behind: whether the environment or a bug failed it (``is_environment_error``)
and its reason in ``twin_meta`` (``failure_reason``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import duckdb

from storage.errors import StorageError, StorageIOError
from storage.parts import PART_TABLES, access_config, empty_views_sql
from storage.runlock import crash_point
from storage.sandbox import WRITER_TEMP_MAX, Limits, connect
from storage.schema import columns, migrations, new_file_sql
from twin.spec.telemetry import SCHEMA_VERSION

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
# The live console's queries run in sandboxes of their own (``storage.liveread.LiveUserSql``).
WRITER_THREADS = 1


# Block size of new files [bytes]: DuckDB's smallest (its default is 256 KiB). A file that keeps
# its time series as Parquet parts holds only small tables (runs, jobs, the event logs, twin_meta,
# twin_parts), and the tables' data, each primary-key index, the catalog and the blocks a
# checkpoint frees each take whole blocks, so a small run's file is mostly part-filled blocks
# (``bench/bench_writepath.py``, product/empty); a campus's large jobs table grows only a little
# with small blocks, for about the same CPU. Readable by DuckDB 1.2 and later
# (``bench/check_duckdb1.py``); only applies when the file is created.
BLOCK_SIZE = 16 << 10


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


def reopened(
    con: duckdb.DuckDBPyConnection, path: str | Path, limits: Limits, user_sql: Any
) -> duckdb.DuckDBPyConnection | None:
    """Checkpoint, close and reopen a run's database; the new connection, or None when nothing was
    done: the checkpoint failed (e.g. a full disk: the write-ahead log keeps what was committed) or
    the user's SQL cursor is in a query (``user_sql.swap_cursor``; the caller tries again later).
    What is committed stays; the user cursor moves to the new connection."""
    try:
        con.execute("CHECKPOINT")
    except duckdb.Error:
        return None
    new: list[duckdb.DuckDBPyConnection] = []

    def reopen() -> duckdb.DuckDBPyConnection:
        con.close()
        fresh, user_cur = open_database(path, limits)
        new.append(fresh)
        return user_cur

    return new[0] if user_sql.swap_cursor(reopen) else None


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


def end_run(con: duckdb.DuckDBPyConnection, run: dict[str, Any], status: str, why: str = "") -> None:
    """In the open transaction: ``run`` (its row, updated) ends with ``status`` at the end of the
    last step in its tables, and a failed run's reason ``why`` (if any) is kept."""
    # The end of the last step in the tables (a step's time_s is its start).
    row = con.sql(
        "SELECT coalesce(max(time_s) + ?, 0) FROM factory_ts WHERE run_id = ?",
        params=[int(run.get("dt_s") or 0), str(run["run_id"])],
    ).fetchall()
    run.update(status=status, finished_at=utc_now(), sim_time_s=int(row[0][0]))
    # Only these three change after the row is written when the file is opened (an UPDATE: a
    # quarter of the cost of writing the row again).
    ((n,),) = con.execute(
        "UPDATE runs SET status = ?, finished_at = ?, sim_time_s = ? WHERE run_id = ?",
        [status, run["finished_at"], run["sim_time_s"], str(run["run_id"])],
    ).fetchall()
    if n != 1:
        upsert_run(con, run)
    if status == "failed" and why:
        con.execute("INSERT OR REPLACE INTO twin_meta VALUES (?, ?)", [failure_key(str(run["run_id"])), why])


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


def create_file(path: Path, run: dict[str, Any], db_limits: Limits) -> None:
    """Create the run file ``path`` under a temporary name beside it: its schema (the process's
    template once there is one, ``_template``) and ``run``'s row committed, checkpointed and
    closed, then renamed into place (replacing an old file)."""
    folder = path.parent
    base = f".{path.name}.creating-"
    for stale in folder.glob(base + "*"):  # left by a run killed while creating (we hold the lock)
        stale.unlink(missing_ok=True)
    tmp = folder / f"{base}{os.getpid()}"
    crash_point("create:start")
    template = _template()
    try:
        if template is not None:
            with open(tmp, "wb") as f:
                f.write(template)
        con, _ = open_database(tmp, db_limits)
    except (StorageError, OSError) as e:  # e.g. a full disk: nothing of the new file stays behind
        for left in (tmp, Path(str(tmp) + ".wal"), Path(str(tmp) + ".tmp")):
            if left.is_dir():
                shutil.rmtree(left, ignore_errors=True)
            else:
                left.unlink(missing_ok=True)
        why = e.strerror or str(e) if isinstance(e, OSError) else str(e).split(": ", 2)[-1]
        raise StorageError(f"{path}: cannot create: {why}") from (e.__cause__ or e)
    try:
        crash_point("create:connected")
        if template is None:
            # The process's first new file: its schema, checkpointed, is the template of the
            # next ones (``_template``); then the run row.
            init_schema(con)
            con.execute("CHECKPOINT")
            _keep_template(tmp.read_bytes())
        con.execute("BEGIN")
        insert_run(con, run)  # (a new file's runs is empty: no upsert needed)
        con.execute("COMMIT")
        crash_point("create:schema")
        con.execute("CHECKPOINT")
        crash_point("create:checkpointed")
    except (duckdb.Error, OSError) as e:
        con.close()
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)
        why = e.strerror or str(e) if isinstance(e, OSError) else str(e).strip().splitlines()[0]
        raise StorageError(f"{path}: cannot create: {why}") from e
    con.close()
    crash_point("create:closed")
    # A write-ahead log beside the output belongs to the file being replaced (or to one deleted
    # while it ran); DuckDB would replay it onto the new file.
    Path(str(path) + ".wal").unlink(missing_ok=True)
    crash_point("create:old_wal_removed")
    try:
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"{path}: cannot create: {e.strerror or e}") from e
    _fsync_dir(folder)
    crash_point("create:renamed")
