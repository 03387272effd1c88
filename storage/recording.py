"""The one check of a recording before it is used, as scenario files are checked before a run.

``check_recording`` looks at the file without opening it in DuckDB: a regular file (a pipe, a
folder or a device is refused from ``os.stat`` alone, so a FIFO never blocks a command), DuckDB's
magic bytes, and the file's size against the database header (a file cut inside a block, or
before the blocks the header points to, is refused before DuckDB reads past its end). ``check_contents`` then checks an open,
read-only connection: ``twin_meta`` with a schema version this version reads (this one or an older
one, read as this one: ``storage.reader``), and every table of that version's schema. ``reading`` turns a DuckDB error met while a command reads a recording (a block
overwritten after the header, say) into one line naming the file.

Every refusal is a ``RecordingError`` (a ``StorageError``): one line naming the file and what is
wrong with it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import duckdb

from storage.errors import StorageError

# DuckDB's file layout (duckdb/storage/storage_info.hpp, format of the v1.x and 2.x releases): a
# main header block of 4096 bytes ("DUCK" at offset 8, after an 8-byte checksum), then two
# database headers of 4096 bytes each (checksum, iteration, meta block, free list, block count,
# block allocation size, ...), the one with the higher iteration current; the data blocks follow.
MAGIC = b"DUCK"
MAGIC_OFFSET = 8
HEADER_BLOCK = 4096
HEADERS_END = 3 * HEADER_BLOCK
MAX_BLOCK = 1 << 30  # DuckDB's blocks are powers of two far below this
_DB_HEADER = struct.Struct("<QqqqQQ")  # checksum, iteration, meta, free list, blocks, block size
# A metadata pointer (meta, free list) holds its block's id in the low 56 bits and the metadata
# entry's index within the block in the high 8 (DuckDB's MetaBlockPointer); -1: none.
_BLOCK_ID = (1 << 56) - 1


class RecordingError(StorageError):
    """A file given as a recording is not a readable AI Factory Twin recording."""


def _kind(mode: int) -> str | None:
    """What a file that is not a regular file is, in words (``None``: a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_regular_file(path: str | Path, what: str = "recording") -> os.stat_result:
    """``os.stat`` of ``path`` if it is a regular file; a ``RecordingError`` naming what it is
    otherwise (missing, a directory, a pipe, a device, unreadable). Never opens the file."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise RecordingError(f"{p}: no such file") from None
    except OSError as e:
        raise RecordingError(f"{p}: cannot read: {e.strerror or e}") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise RecordingError(f"{p}: is {kind}, not a {what} file")
    return st


def is_duckdb_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file that starts like a DuckDB database (no DuckDB opened)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return False
        with open(path, "rb") as f:
            head = f.read(MAGIC_OFFSET + len(MAGIC))
    except OSError:
        return False
    return head[MAGIC_OFFSET:] == MAGIC


def check_recording(path: str | Path) -> Path:
    """Check a recording's file before DuckDB opens it (module doc); return its path."""
    p = Path(path)
    st = check_regular_file(p)
    try:
        # O_NONBLOCK: the file was a regular file a moment ago; should it have been swapped for a
        # pipe since, the open still returns at once.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise RecordingError(f"{p}: cannot read: {e.strerror or e}") from None
    try:
        if _kind(os.fstat(fd).st_mode) is not None:
            raise RecordingError(f"{p}: is not a regular file")
        head = os.pread(fd, HEADERS_END, 0)
    except OSError as e:
        raise RecordingError(f"{p}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if not head:
        raise RecordingError(f"{p}: an empty file, not a recording")
    if head[MAGIC_OFFSET : MAGIC_OFFSET + len(MAGIC)] != MAGIC:
        raise RecordingError(f"{p}: not a DuckDB file (no DuckDB header), so not a recording")
    if len(head) < HEADERS_END:
        raise RecordingError(f"{p}: cut short ({len(head):,} bytes, smaller than DuckDB's headers)")
    headers = [_DB_HEADER.unpack_from(head, off) for off in (HEADER_BLOCK, 2 * HEADER_BLOCK)]
    _, _, meta, free_list, blocks, block_size = max(headers, key=lambda h: h[1])
    if not (HEADER_BLOCK <= block_size <= MAX_BLOCK and block_size & (block_size - 1) == 0):
        raise RecordingError(f"{p}: damaged: its DuckDB header is unreadable (block size {block_size:,})")
    body = st.st_size - HEADERS_END
    # Part of a block inside the blocks the header counts: the file was cut. Past them it is an
    # extension a full disk stopped half-way (the run's last commit failed; what the header
    # counts is intact and readable).
    if body % block_size and body < blocks * block_size:
        raise RecordingError(
            f"{p}: cut short: {st.st_size:,} bytes, {body % block_size:,} bytes into a "
            f"{block_size:,}-byte block (its header counts {blocks:,} blocks)"
        )
    # The header's block count may exceed the blocks in the file: a checkpoint cuts free blocks off
    # the file's end without lowering the count (a complete 168 h gpu-vs-asic recording: 146
    # blocks on disk, 149 counted; DuckDB 2.0.1 reads all of it). The blocks DuckDB reads first,
    # the catalog's and the free list's, must be there.
    pointed = [ptr & _BLOCK_ID for ptr in (meta, free_list) if ptr >= 0]
    need = HEADERS_END + (max(pointed, default=-1) + 1) * block_size
    if st.st_size < need:
        raise RecordingError(
            f"{p}: cut short: {st.st_size:,} bytes where its header points to block "
            f"{max(pointed):,} ({need:,} bytes)"
        )
    return p


def schema_version(con: duckdb.DuckDBPyConnection, path: str | Path) -> int:
    """The schema version recorded in ``twin_meta``; ``RecordingError`` if there is none or it
    is not a number."""
    try:
        row = next(iter(con.sql("SELECT value FROM twin_meta WHERE key = 'schema_version'").fetchall()), None)
    except duckdb.CatalogException:
        raise RecordingError(
            f"{path}: a DuckDB file, but not an AI Factory Twin run (no twin_meta table)"
        ) from None
    except duckdb.Error as e:
        raise RecordingError(f"{path}: twin_meta unreadable: {str(e).splitlines()[0]}") from None
    if row is None:
        raise RecordingError(f"{path}: not an AI Factory Twin run (no schema version recorded)")
    text = str(row[0]).strip()
    if not text.isdecimal():
        raise RecordingError(f"{path}: twin_meta schema_version {row[0]!r} is not a version number")
    return int(text)


def check_contents(
    con: duckdb.DuckDBPyConnection, path: str | Path, tables: Iterable[str] | None = None
) -> None:
    """A recording opened read-only: a schema version this version reads and ``tables`` (default:
    every table of the schema) present. ``RecordingError`` naming what is wrong."""
    from twin.spec.telemetry import SCHEMA_VERSION, TABLES

    have = schema_version(con, path)
    if have > SCHEMA_VERSION:
        raise RecordingError(
            f"{path}: telemetry schema v{have} is newer than this version of twin reads "
            f"(v{SCHEMA_VERSION}); update twin to read it"
        )
    if have < 1:
        raise RecordingError(f"{path}: telemetry schema v{have} was never written by twin")
    # An older file is read as this version's schema (``storage.reader.presentation_sql``): it must
    # hold the tables its own version had.
    from storage.schema import ADDED_IN

    expected = [t for t in (TABLES if tables is None else tables) if ADDED_IN.get(t, 1) <= have]
    try:
        present = {str(r[0]) for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
        present |= {str(r[0]) for r in con.sql("SELECT view_name FROM duckdb_views()").fetchall()}
    except duckdb.Error as e:
        raise RecordingError(f"{path}: catalogue unreadable: {str(e).splitlines()[0]}") from None
    missing = [t for t in expected if t not in present]
    if missing:
        raise RecordingError(
            f"{path}: schema v{have} recording without its table{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (damaged or edited)"
        )
    if "runs" in present:
        # What no run writes, and what every reader divides by: a run's step.
        try:
            bad = con.sql(
                "SELECT run_id, dt_s FROM runs WHERE dt_s IS NULL OR dt_s <= 0 ORDER BY started_at LIMIT 1"
            ).fetchall()
        except duckdb.Error as e:
            raise RecordingError(f"{path}: runs unreadable: {str(e).splitlines()[0]}") from None
        if bad:
            raise RecordingError(
                f"{path}: run {str(bad[0][0])!r:.80} has dt_s {bad[0][1]} (a step must be positive; damaged or edited)"
            )


@contextlib.contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """DuckDB errors while a command reads the recording ``path`` (a damaged block, say) become
    one line naming it (an interrupt stays an interrupt)."""
    try:
        yield
    except duckdb.InterruptException:
        raise
    except duckdb.Error as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RecordingError(f"{path}: unreadable recording: {first}") from e
