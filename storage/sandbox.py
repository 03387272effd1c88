"""The sandbox every telemetry database runs in, and the one way SQL typed by a user runs.

DuckDB enforces the sandbox itself, from the moment a file is created or opened: no file system
access beyond the database's own files, no extension installing or auto-loading, no community or
unsigned extensions, no spilling to temporary files, a memory limit, and a locked configuration
(no ``SET``, ``PRAGMA`` or ``enable_logging``/``enable_profiling`` can change a setting). One
cursor is set aside for user SQL. A run's database, while it is written, has a small memory limit
of its own (``WRITER_MEMORY``), which bounds its block cache, and DuckDB's own temporary directory
(``FILE.tmp``, at most ``WRITER_TEMP_MAX``, removed on close) so that at the limit it can set a
buffer aside instead of failing the run; the live console's queries then run
in a sandbox of their own over what the run has published, with the user's limit
(``storage.liveread.LiveUserSql``). Queries that do run on the writer's database share its limit, and
the writer wins: when an insert runs short, it stops the user's query and tries again.

User SQL (``twin sql`` and the console's SQL screen, live or replay) goes through
``UserSql.run`` only: the statement check of ``storage.sqlguard.check_user_sql`` first (a second
wall with clear messages), then the statements on that cursor with a time limit (a timer thread
interrupts the query) and the memory limit; the user sees both limits.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import duckdb
import pyarrow as pa

from storage.errors import QueryError
from storage.runlock import crash_point

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY = "2GB"
# The memory limit of a run's own database while it is written. DuckDB keeps every block it has
# written or read cached until the database's memory limit is reached, so this limit, not the
# run's length, bounds the writer's memory. The writer inserts Arrow batches and the live panels
# read recent history, both streaming; the live console's queries run in a sandbox of their own
# with the user's limit (``storage.liveread.LiveUserSql``).
WRITER_MEMORY = "128MB"
# The most the run's database may set aside in its temporary directory (``FILE.tmp``) at that
# limit; a long run sets aside next to nothing (written blocks are re-read from the file itself).
WRITER_TEMP_MAX = "4GB"
# The memory limits a user may give, as the refusal names them (decimal units, as DuckDB's own).
MIN_MEMORY_BYTES = 16 * 10**6  # 16MB
MAX_MEMORY_BYTES = 10**15  # 1PB

SANDBOX_CONFIG: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "temp_directory": "",  # no spilling: the memory limit is a limit, and nothing is written beside the file
}

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "PB": 10**15,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
    "TIB": 1 << 40,
    "PIB": 1 << 50,
}


def parse_memory(text: str) -> int:
    """Bytes of a memory size such as ``512MB``, ``2GB`` or ``1.5GiB``; ``ValueError`` otherwise."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m.group(2).upper() if m else ""
    if not m or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a memory size (e.g. 512MB, 2GB)")
    n = int(float(m.group(1)) * _UNITS[unit])
    if not MIN_MEMORY_BYTES <= n <= MAX_MEMORY_BYTES:
        raise ValueError(f"{text!r} is outside 16MB … 1PB")
    return n


def _mem_text(n: int) -> str:
    for unit, size in (("GB", 10**9), ("MB", 10**6)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class Limits:
    """What one user query may use: wall time [s] and memory [bytes]."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_bytes: int = parse_memory(DEFAULT_MEMORY)

    def __post_init__(self) -> None:
        if not (self.timeout_s > 0 and self.timeout_s < 1e7):
            raise ValueError(f"time limit {self.timeout_s!r} s must be positive and finite")
        if not MIN_MEMORY_BYTES <= self.memory_bytes <= MAX_MEMORY_BYTES:
            raise ValueError(f"memory limit {self.memory_bytes!r} bytes is outside 16MB … 1PB")

    @property
    def memory_text(self) -> str:
        return _mem_text(self.memory_bytes)

    def text(self) -> str:
        return f"limits {self.timeout_s:g} s · {self.memory_text}"


def connect(
    path: str | Path,
    *,
    read_only: bool,
    limits: Limits,
    extra_config: dict[str, Any] | None = None,
    allowed_directories: list[str] | None = None,
) -> tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection]:
    """Open (or create) a database in the sandbox with the memory limit of ``limits``:
    ``(connection, user cursor)``; the configuration is locked for every connection of it.
    ``allowed_directories``: the only file access granted (a recording's parts,
    ``storage.parts.access_config``), set before external access is turned off."""
    config = {**SANDBOX_CONFIG, "memory_limit": f"{limits.memory_bytes}B", **(extra_config or {})}
    if allowed_directories:
        del config["enable_external_access"]
    con = duckdb.connect(str(path), read_only=read_only, config=config)
    try:
        if allowed_directories:
            try:
                con.execute(
                    "SET allowed_directories = ["
                    + ", ".join("'" + d.replace("'", "''") + "'" for d in allowed_directories)
                    + "]"
                )
                con.execute("SET enable_external_access = false")
            except duckdb.InvalidInputException:
                # A database this process already holds open shares its (locked) configuration:
                # it must be sandboxed already.
                row = con.sql("SELECT current_setting('enable_external_access')").fetchall()
                if not (row and row[0][0] is False):
                    raise
        _lock_configuration(con)
        user = con.cursor()
    except BaseException:
        con.close()
        raise
    return con, user


def _lock_configuration(con: duckdb.DuckDBPyConnection) -> None:
    """Lock the configuration; a second connection to a database this process already holds open
    shares its (already locked) configuration."""
    try:
        con.execute("SET lock_configuration = true")
    except duckdb.InvalidInputException:
        row = con.sql("SELECT current_setting('lock_configuration')").fetchall()
        if not (row and row[0][0] is True):
            raise


@dataclass
class UserResult:
    table: pa.Table
    statements: int
    truncated: bool  # more rows than max_rows (not fetched)
    wall_s: float


class UserSqlRunner(Protocol):
    """What the SQL console calls: ``UserSql`` or ``storage.liveread.LiveUserSql``."""

    limits: Limits
    strict: bool

    def run(
        self, sql: str, max_rows: int | None = None, cancelled: Callable[[], bool] | None = None
    ) -> UserResult: ...

    def interrupt(self) -> None: ...

    def make_room(self) -> None: ...

    def swap_cursor(self, reopen: Callable[[], duckdb.DuckDBPyConnection]) -> bool: ...

    def close(self) -> None: ...


class UserSql:
    """SQL typed by a user, on the database's user cursor, inside its limits (one query at a time).

    ``strict`` (a live session, where the database is the writer's): the statement check also
    refuses table functions outside a short list and functions that act on the database."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, limits: Limits, strict: bool) -> None:
        self._cur = cursor
        self.limits = limits
        self.strict = strict
        self._lock = threading.Lock()
        self._why = ""
        self._running = False

    def run(
        self, sql: str, max_rows: int | None = None, cancelled: Callable[[], bool] | None = None
    ) -> UserResult:
        """Run ``sql`` (the last statement's result is returned, up to ``max_rows`` rows);
        ``QueryError`` with one clear line if it is refused, fails, hits a limit or is cancelled."""
        # Imported on first use (storage.sqlguard imports nothing of this module, so not to break
        # a circle): ``twin sql`` starts this in a thread before its Ctrl-C handling is in place
        # (tui/cli_sql.py), and a first query that reaches its statements sooner widens the window
        # in which a Ctrl-C leaves the connection busy instead of cancelling the query.
        from storage.sqlguard import check_user_sql

        with self._lock:
            t0 = time.perf_counter()
            self._why = ""
            self._running = True
            timer = threading.Timer(self.limits.timeout_s, self._interrupt, args=("timeout",))
            timer.daemon = True
            timer.start()
            try:
                stmts = check_user_sql(self._cur, sql, self.strict)
                crash_point("sql:running")
                table, truncated = self._execute(stmts, max_rows, cancelled)
            except duckdb.InterruptException:
                raise QueryError(self._interrupted_text()) from None
            except duckdb.OutOfMemoryException:
                raise QueryError(
                    f"the query needs more memory than its {self.limits.memory_text} limit "
                    "(filter or aggregate more, or raise the limit)"
                ) from None
            except duckdb.Error as e:
                text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                if "INTERRUPT" in text.upper():
                    raise QueryError(self._interrupted_text()) from None
                raise QueryError(text) from None
            finally:
                self._running = False
                timer.cancel()
            return UserResult(table, len(stmts), truncated, time.perf_counter() - t0)

    def _execute(
        self, stmts: list[str], max_rows: int | None, cancelled: Callable[[], bool] | None
    ) -> tuple[pa.Table, bool]:
        cur = self._cur
        result: pa.Table = pa.table({})
        truncated = False
        for i, stmt in enumerate(stmts):
            if self._why:  # interrupted before the statement started
                raise duckdb.InterruptException(self._why)
            rel = cur.sql(stmt)
            if rel is None:
                result = pa.table({})
                continue
            if i < len(stmts) - 1:
                rel.to_arrow_table()
                continue
            reader = rel.to_arrow_reader(100_000)
            batches, rows = [], 0
            try:
                for batch in reader:
                    if self._why or (cancelled is not None and cancelled()):
                        self._why = self._why or "cancel"
                        raise duckdb.InterruptException("cancelled")
                    batches.append(batch)
                    rows += batch.num_rows
                    if max_rows is not None and rows >= max_rows:
                        truncated = rows > max_rows or next(iter(reader), None) is not None
                        break
            finally:
                reader.close()
            result = pa.Table.from_batches(batches, schema=reader.schema)
            if max_rows is not None and result.num_rows > max_rows:
                result = result.slice(0, max_rows)
        return result, truncated

    def _interrupted_text(self) -> str:
        if self._why == "timeout":
            return f"the query was stopped at its {self.limits.timeout_s:g} s time limit"
        if self._why == "writer":
            return (
                f"the query was stopped: the live run needed the memory (the {self.limits.memory_text} "
                "limit is shared with it)"
            )
        return "cancelled"

    def _interrupt(self, why: str) -> None:
        if self._running:
            self._why = self._why or why
            try:
                self._cur.interrupt()
            except duckdb.Error:
                pass

    def interrupt(self) -> None:
        """Cancel the running query (from another thread); it ends with ``QueryError('cancelled')``."""
        self._interrupt("cancel")

    def make_room(self) -> None:
        """The writer ran short of memory: stop the user's query and return once it has ended."""
        self._interrupt("writer")
        with self._lock:
            pass

    def swap_cursor(self, reopen: Callable[[], duckdb.DuckDBPyConnection]) -> bool:
        """Between queries: ``reopen()`` (which closes this cursor's connection) and use the cursor
        it returns. False, and nothing done, while a query runs (the caller tries again later)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self._cur = reopen()
            return True
        finally:
            self._lock.release()

    def close(self) -> None:
        """Stop a running query and close the cursor."""
        self.interrupt()
        with self._lock:
            try:
                self._cur.close()
            except duckdb.Error:
                pass
