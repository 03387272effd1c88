"""Reading a recording while its run is still being written.

DuckDB lets one process hold a database file for writing and no other process open it, not even
read-only. So while a run writes ``FILE``, the writer also publishes every committed transaction as
Parquet parts in a sidecar directory ``FILE.live/``, removed when the run closes:

    FILE.live/manifest.json                    run row, committed time, the parts of every table
    FILE.live/table=<table>/part-<seq>-<level>.parquet

Each part is written under a temporary name and renamed, then the manifest is replaced the same
way, so a reader never sees half a part or a part the manifest does not vouch for. Parts are merged
in the background of the writer thread (16 parts of one level into one of the next), so a table
of small commits never has more than a few dozen files however long the run; a commit's part as
large as a merged part's row group is never merged (a large hall's: one file a commit, each at
least ``ROW_GROUP_BYTES``). Merged-away parts are deleted after a grace period so a reader that
just read the manifest can still scan them.

``open_for_reading`` opens the file itself when it can; when the file is held by a running writer
and a sidecar exists, it opens an in-memory DuckDB with the same tables as views over the parts
the manifest lists (the jobs and runs tables keep the latest row per key, as the writer's upserts
do). External access is allowed for the sidecar directory only, then the configuration is locked,
so user SQL can no more reach other files than on a finished recording.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.errors import QueryError, StorageError
from storage.parts import PART_NAME, PART_TABLES, folder_problem, parts_dir, run_dir_name, scan
from storage.parts import SUFFIX as PARTS_SUFFIX
from storage.reader import READ_THREADS, open_run_file
from storage.reader import cursor as reader_cursor
from storage.sandbox import SANDBOX_CONFIG, Limits, UserResult, UserSql, UserSqlRunner
from storage.schema import (
    DUCKDB_TYPES,
    arrow_schema,
    batch_keys,
    batch_schema,
    columns,
    comment_sql,
    migrations,
)
from storage.upsert import latest_per_key
from twin.spec.telemetry import SCHEMA_VERSION, TABLES, UPSERT_KEYS

MANIFEST = "manifest.json"
FANOUT = 16  # parts of one level merged into one part of the next
# A merged part's row groups: commits gathered up to this much data (at most this many rows).
ROW_GROUP_BYTES = 16 << 20
ROW_GROUP_ROWS = 1 << 20
GRACE_S = 300.0  # merged-away parts stay on disk this long for readers that listed them
FORMAT = "ai-factory-twin-live"


# The parts' codec: they live only while the run does. LZ4 (``bench/bench_writepath.py``).
PART_COMPRESSION = "lz4"


def _parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """Fast Parquet for short-lived parts: ``PART_COMPRESSION``, dictionaries only for text."""
    return {
        "compression": PART_COMPRESSION,
        "use_dictionary": [f.name for f in schema if pa.types.is_string(f.type)],
    }


def _latest_masks(paths: list[Path], keys: tuple[str, ...]) -> list[np.ndarray]:
    """For each part (in order), which of its rows is the last of its key over all the parts:
    a job is published again at every commit that writes it, and a merge keeps its newest row."""
    tables = [pq.read_table(p, columns=list(keys)) for p in paths]
    sizes = [t.num_rows for t in tables]
    both = pa.concat_tables(tables).append_column("_pos", pa.array(np.arange(sum(sizes))))
    last = latest_per_key(both, keys).column("_pos").to_numpy()
    mask = np.zeros(sum(sizes), dtype=bool)
    mask[last] = True
    return np.split(mask, np.cumsum(sizes)[:-1])


def live_dir(path: str | Path) -> Path:
    p = Path(path)
    return p.with_name(p.name + ".live")


def _replace_atomically(tmp: Path, dest: Path) -> None:
    os.replace(tmp, dest)


def _jsonable_run(run: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, _dt.datetime) else v) for k, v in run.items()}


@dataclass
class _Part:
    seq: int  # last commit sequence number the part holds
    level: int
    rows: int = 0
    # A commit's part of at least ROW_GROUP_BYTES (a large hall's chip or UltraServer rows): its
    # row groups are already as large as a merge would make them, so merging it would only copy
    # it into a file with others (at a million chips, most of the day's bytes read and written
    # again). It is never merged; the parts after it merge as usual.
    settled: bool = False

    @property
    def name(self) -> str:
        return f"part-{self.seq:09d}-{self.level}.parquet"


class LivePublisher:
    """Publishes a run's committed batches as Parquet parts next to its file (see module doc).
    The parts carry the batches' columns (``batch_schema``: not ``run_id``, which the manifest's
    run row holds once and the views add to every row).

    Called by the writer thread after every commit (``on_commit``). A failure to publish (disk
    full, directory removed) never fails the run: publishing stops and the sidecar is removed, so
    readers report the run as unreadable until it ends instead of showing stale data as current.
    """

    def __init__(self, path: str | Path, run_id: str | None = None, manifest: bool = True) -> None:
        # Nothing touches the disk before the first commit: by then the writer holds the file, so
        # a sidecar found here was left behind by a killed run, not published by a live one.
        self.dir = live_dir(path)
        self.recording = Path(path).name
        # ``run_id`` given: the parts are the recording's own (``storage.parts``: kept in
        # ``FILE.parts/run_id=<run>/`` when the run closes, stored by the writer through ``store``
        # and ``committed``, whose errors are the run's); the sidecar holds only the manifest
        # (``manifest``: published for live readers).
        self.durable = run_id is not None
        self.publish = manifest or not self.durable
        self.part_dir = parts_dir(path) / run_dir_name(run_id) if run_id is not None else self.dir
        self.part_dir_rel = f"{self.recording}{PARTS_SUFFIX}/{self.part_dir.name}" if self.durable else None
        self.created = False
        self.seq = 0
        self.parts: dict[str, list[_Part]] = {t: [] for t in TABLES if t != "runs"}
        self._doomed: list[tuple[float, Path]] = []
        # The parts and doomed count as of the last commit, while parts stored since then wait for
        # the transaction that lists them (``None``: nothing pending).
        self._pending: tuple[dict[str, list[_Part]], int] | None = None
        self.error: BaseException | None = None
        self.closed = False

    # ---------------------------------------------------------------- writer thread
    def store(self, tables: dict[str, pa.Table]) -> list[str]:
        """Write one commit's batches as parts (merging as they accumulate), before the transaction
        that lists them; the tables whose parts changed. Errors are the run's (a durable store)."""
        self.prepare()
        if self._pending is None:
            self._pending = ({t: list(ps) for t, ps in self.parts.items()}, len(self._doomed))
        self.seq += 1
        changed = []
        for table, tb in tables.items():
            if table in self.parts and tb.num_rows:
                # The batch's columns in their order (a table as stored, with run_id, too).
                tb = tb.select(batch_schema(table).names)
                # (The upsert tables' parts always merge: only a merge keeps one row per job.)
                settled = table not in UPSERT_KEYS and tb.nbytes >= ROW_GROUP_BYTES
                part = _Part(self.seq, 0, tb.num_rows, settled)
                self._write(table, part, tb)
                self.parts[table].append(part)
                self._merge(table)
                changed.append(table)
        return changed

    def prepare(self) -> None:
        """Create the parts' folder (a durable store's run folder, or the sidecar) if not yet there."""
        if not self.created:
            self._create_dirs()

    def listing(self, table: str) -> list[tuple[str, int]]:
        """``table``'s parts as ``(path relative to the run's folder, rows)``."""
        return [(f"table={table}/{p.name}", p.rows) for p in self.parts[table]]

    def settle(self) -> None:
        """The transaction that lists the parts stored so far has committed: they are the file's."""
        self._pending = None

    def abort(self) -> None:
        """The transaction that was to list the parts stored since the last commit failed: forget
        them and delete their files (and a part cut short), so that the folder holds what the file
        lists; a part the file lists stays, even one a merge in the failed store had doomed."""
        if self._pending is None:
            return
        parts, doomed = self._pending
        self._pending = None
        listed = {(t, p.name) for t, ps in parts.items() for p in ps}
        gone = [self.part_dir / f"table={t}" / p.name for t, ps in self.parts.items() for p in ps]
        gone += [p for _, p in self._doomed[doomed:]]
        self.parts, self._doomed = parts, self._doomed[:doomed]
        for t in self.parts:
            d = self.part_dir / f"table={t}"
            with contextlib.suppress(OSError):
                gone += [Path(e.path) for e in scan(d) if _OWN_TMP.fullmatch(e.name)]
        for p in gone:
            if (p.parent.name.removeprefix("table="), p.name) not in listed:
                with contextlib.suppress(OSError):
                    p.unlink(missing_ok=True)

    def committed(self, run: dict[str, Any]) -> None:
        """After the transaction that lists the stored parts: publish the manifest (best effort:
        live readers only) and delete the parts merged away long enough ago."""
        self.settle()
        if self.publish and self.error is None:
            try:
                if not self.dir.is_dir():
                    self._create_sidecar()
                self._write_manifest(run)
            except Exception as e:
                self.error = e
                if self.dir.is_dir() and not self.dir.is_symlink():
                    shutil.rmtree(self.dir, ignore_errors=True)
        self._collect()

    def _create_sidecar(self) -> None:
        if os.path.lexists(self.dir):  # left behind by a run that was killed?
            why = leftover_problem(self.dir, self.recording)
            if why is not None:  # not provably ours: kept, and nothing is published
                raise StorageError(f"{self.dir}: {why}; not replaced")
            shutil.rmtree(self.dir)
        self.dir.mkdir(mode=0o700)

    def _create_dirs(self) -> None:
        if self.durable:
            self.part_dir.mkdir(parents=True, exist_ok=True)
        else:
            self._create_sidecar()
        self.created = True

    def on_commit(self, tables: dict[str, pa.Table], run: dict[str, Any]) -> None:
        """After a commit of a file that keeps its time series in DuckDB: publish its batches as
        parts for live readers (best effort)."""
        if self.error is not None or self.closed:
            return
        try:
            self.store(tables)
            self._write_manifest(run)
            self._collect()
        except Exception as e:  # publishing is best effort; the run goes on
            self.error = e
            if self.created and self.dir.is_dir() and not self.dir.is_symlink():
                shutil.rmtree(self.dir, ignore_errors=True)

    def close(self) -> None:
        """Remove the sidecar (the file itself is readable again once its writer has closed) and,
        of a durable store, the parts merged away."""
        self.closed = True
        if self.durable:
            for _, p in self._doomed:
                p.unlink(missing_ok=True)
            self._doomed = []
            # The parts of the tables the file keeps in DuckDB were for live readers only.
            for table in (t for t in self.parts if t not in PART_TABLES):
                for part in self.parts.get(table, []):
                    (self.part_dir / f"table={table}" / part.name).unlink(missing_ok=True)
                try:
                    (self.part_dir / f"table={table}").rmdir()
                except OSError:
                    pass
        if self.dir.is_dir() and not self.dir.is_symlink() and (self.created or self.durable):
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---------------------------------------------------------------- internals
    def _table_dir(self, table: str) -> Path:
        d = self.part_dir / f"table={table}"
        d.mkdir(exist_ok=True)
        return d

    def _write(self, table: str, part: _Part, tb: pa.Table) -> None:
        d = self._table_dir(table)
        tmp = d / f".{part.name}.tmp"
        pq.write_table(tb, tmp, **_parquet_options(tb.schema))
        _replace_atomically(tmp, d / part.name)

    def _merge(self, table: str) -> None:
        parts = self.parts[table]
        while (
            len(parts) >= FANOUT
            and len({p.level for p in parts[-FANOUT:]}) == 1
            and not any(p.settled for p in parts[-FANOUT:])
        ):
            group = parts[-FANOUT:]
            merged = _Part(group[-1].seq, group[-1].level + 1, sum(p.rows for p in group))
            d = self._table_dir(table)
            tmp = d / f".{merged.name}.tmp"
            schema = batch_schema(table)
            # Upsert tables (jobs): only each key's last row survives the merge, as in the file.
            keep = (
                _latest_masks([d / p.name for p in group], batch_keys(table))
                if table in UPSERT_KEYS
                else None
            )
            with pq.ParquetWriter(tmp, schema, **_parquet_options(schema)) as w:
                # A row group at a time, gathered into row groups of up to ROW_GROUP_BYTES: memory
                # stays flat however large the parts, and so does the footer, which would
                # otherwise list every commit's row group (a reader and the next merge hold it all).
                buf: list[pa.Table] = []
                size = 0
                for k, p in enumerate(group):
                    f = pq.ParquetFile(d / p.name)
                    at = 0
                    try:
                        for i in range(f.num_row_groups):
                            tb = f.read_row_group(i).cast(schema)
                            if keep is not None:
                                n = tb.num_rows
                                tb = tb.filter(pa.array(keep[k][at : at + n]))
                                at += n
                                merged.rows -= n - tb.num_rows
                            buf.append(tb)
                            size += tb.nbytes
                            if size >= ROW_GROUP_BYTES:
                                w.write_table(pa.concat_tables(buf), row_group_size=ROW_GROUP_ROWS)
                                buf, size = [], 0
                    finally:
                        f.close()
                if buf:
                    w.write_table(pa.concat_tables(buf), row_group_size=ROW_GROUP_ROWS)
            _replace_atomically(tmp, d / merged.name)
            del parts[-FANOUT:]
            parts.append(merged)
            now = time.monotonic()
            self._doomed.extend((now, d / p.name) for p in group)

    def _write_manifest(self, run: dict[str, Any]) -> None:
        manifest = {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "file": self.recording,
            "seq": self.seq,
            "committed_s": run.get("sim_time_s"),
            "run": _jsonable_run(run),
            "tables": {t: [f"table={t}/{p.name}" for p in ps] for t, ps in self.parts.items()},
        }
        if self.part_dir_rel is not None:
            manifest["dir"] = self.part_dir_rel
        tmp = self.dir / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(manifest))
        _replace_atomically(tmp, self.dir / MANIFEST)

    def _collect(self) -> None:
        now = time.monotonic()
        keep = []
        for t, p in self._doomed:
            if now - t >= GRACE_S:
                p.unlink(missing_ok=True)
            else:
                keep.append((t, p))
        self._doomed = keep


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


# -------------------------------------------------------------------- reading


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


MANIFEST_MAX_BYTES = 64 << 20  # far above any run's (a few hundred parts per table at most)
# The manifest's keys and their types (``None``: may be null); the first four are required.
MANIFEST_KEYS: dict[str, tuple[type, ...]] = {
    "format": (str,),
    "schema_version": (int,),
    "run": (dict,),
    "tables": (dict,),
    "file": (str,),
    "seq": (int,),
    "committed_s": (int, type(None)),
    "dir": (str,),
}
_REQUIRED = ("format", "schema_version", "run", "tables")
_TYPE_WORDS = {str: "text", int: "an integer", dict: "an object", type(None): "null"}
# A run-row value of each column type (``_jsonable_run``: instants as ISO text).
_RUN_TYPES: dict[str, tuple[type, ...]] = {
    "int8": (int,),
    "int32": (int,),
    "int64": (int,),
    "float32": (int, float),
    "float64": (int, float),
    "string": (str,),
    "bool": (bool,),
    "timestamptz": (str,),
}


_INT_BITS = {"int8": 8, "int32": 32, "int64": 64}


def _type_ok(v: Any, types: tuple[type, ...]) -> bool:
    """``isinstance`` where a JSON boolean is not a number."""
    if isinstance(v, bool) and bool not in types:
        return False
    return isinstance(v, types)


def check_manifest(d: Path, m: Any, recording: str | None = None) -> dict[str, Any]:
    """The live manifest of the sidecar ``d`` checked before any path in it is touched: the
    allowed keys with their types, this version's format and schema, a run row of the runs
    table's columns and types, parts named as the writer names them (``table=<table>/part-…``:
    plain names inside ``d``, no absolute path, no ``..``) that are regular files, not symbolic
    links; with ``recording``, the file it names. ``StorageError`` naming the key otherwise."""
    where = d / MANIFEST
    if not isinstance(m, dict):
        raise StorageError(f"{where}: not a live manifest (a JSON {type(m).__name__}, not an object)")
    unknown = sorted(set(m) - set(MANIFEST_KEYS))
    if unknown:
        raise StorageError(f"{where}: unknown key {unknown[0]!r}")
    for key in _REQUIRED:
        if key not in m:
            raise StorageError(f"{where}: no {key!r}")
    for key, types in MANIFEST_KEYS.items():
        if key in m and not _type_ok(m[key], types):
            want = " or ".join(_TYPE_WORDS[t] for t in types)
            raise StorageError(f"{where}: {key} {m[key]!r:.60} is not {want}")
    if m["format"] != FORMAT:
        raise StorageError(f"{where}: not an AI Factory Twin live view (format {m['format']!r:.60})")
    if m["schema_version"] != SCHEMA_VERSION:
        raise StorageError(
            f"{where}: run in progress with telemetry schema v{m['schema_version']}, this version of "
            f"twin reads v{SCHEMA_VERSION}"
        )
    for key in ("seq", "committed_s"):
        if isinstance(m.get(key), int) and m[key] < 0:
            raise StorageError(f"{where}: {key} {m[key]} is negative")
    if recording is not None and m.get("file") != recording:
        raise StorageError(f"{where}: names the recording {m.get('file')!r}, not {recording!r}")
    kinds = {c.name: c.dtype for c in columns("runs")}
    for k, v in m["run"].items():
        if k not in kinds:
            raise StorageError(f"{where}: run: unknown column {k!r:.60}")
        if v is not None and not _type_ok(v, _RUN_TYPES[kinds[k]]):
            raise StorageError(f"{where}: run.{k} {v!r:.60} is not of type {kinds[k]}")
        bits = _INT_BITS.get(kinds[k])
        if bits is not None and v is not None and not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
            raise StorageError(f"{where}: run.{k} {v!r:.60} is out of the range of {kinds[k]}")
        if v is not None and kinds[k] == "timestamptz":
            try:
                t = _dt.datetime.fromisoformat(v)
            except ValueError:
                raise StorageError(f"{where}: run.{k} {v!r:.60} is not an ISO 8601 date-time") from None
            if t.tzinfo is None:
                raise StorageError(f"{where}: run.{k} {v!r:.60} has no time zone")
    for table, parts in m["tables"].items():
        if table not in TABLES or table == "runs":
            raise StorageError(f"{where}: tables: unknown table {table!r:.60}")
        if not isinstance(parts, list):
            raise StorageError(f"{where}: tables.{table} is not a list of parts")
        for part in parts:
            prefix = f"table={table}/"
            if (
                not isinstance(part, str)
                or not part.startswith(prefix)
                or not PART_NAME.fullmatch(part[len(prefix) :])
            ):
                raise StorageError(
                    f"{where}: tables.{table}: {part!r:.80} is not a part name ({prefix}part-<seq>-<level>.parquet)"
                )
    base = parts_base(d, m)
    # Only now is anything named in it touched: the folders and parts must be what they seem.
    if base != d:
        for q in (base.parent, base):
            try:
                st = os.lstat(q)
            except OSError as e:
                raise StorageError(f"{where}: its parts' folder {q}: {e.strerror or e}") from None
            if not stat.S_ISDIR(st.st_mode):
                raise StorageError(f"{q}: not a plain folder")
    for table, parts in m["tables"].items():
        for part in parts:
            for q in (base / f"table={table}", base / part):
                try:
                    st = os.lstat(q)
                except FileNotFoundError:
                    raise StorageError(f"{where}: lists {part}, which is missing") from None
                except OSError as e:
                    raise StorageError(f"{q}: cannot read: {e.strerror or e}") from None
                folder = q.name.startswith("table=")
                # A symbolic link (to anywhere) is neither a plain folder nor a plain file.
                if not (stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)):
                    raise StorageError(f"{q}: not a plain {'folder' if folder else 'file'}")
    return m


def parts_base(d: Path, m: dict[str, Any]) -> Path:
    """The folder the manifest's parts are named in: the sidecar ``d`` itself, or (``dir``) the
    run's folder of the recording's parts (``storage.parts``), which must be exactly that."""
    if "dir" not in m:
        return d
    recording = d.name.removesuffix(".live")
    try:
        want = f"{recording}{PARTS_SUFFIX}/{run_dir_name(str(m['run'].get('run_id')))}"
    except StorageError as e:
        raise StorageError(f"{d / MANIFEST}: {e}") from None
    if m["dir"] != want:
        raise StorageError(f"{d / MANIFEST}: dir {m['dir']!r:.80} is not {want!r}")
    return d.parent / want


def _read_manifest(d: Path) -> dict[str, Any]:
    for _ in range(5):  # the manifest is replaced atomically; retry only a vanishing sidecar
        where = d / MANIFEST
        try:
            st = os.lstat(where)
            if not stat.S_ISREG(st.st_mode):  # a pipe would block, a link could lead anywhere
                raise StorageError(f"{where}: not a plain file")
            if st.st_size > MANIFEST_MAX_BYTES:
                raise StorageError(f"{where}: {st.st_size:,} bytes, not a live manifest")
            with open(where, "rb") as f:
                m: Any = json.loads(f.read(MANIFEST_MAX_BYTES + 1))
            return check_manifest(d, m)
        except FileNotFoundError:
            time.sleep(0.05)
        except (OSError, ValueError, RecursionError) as e:
            raise StorageError(f"{where}: unreadable live manifest ({str(e)[:120]})") from e
    raise StorageError(f"{d}: the run closed while opening its live view; open the file again")


# What a run's sidecar may hold (``LivePublisher``): its manifest, its tables' folders with parts,
# and the temporary names of both.
_OWN_TMP = re.compile(r"\.(manifest\.json|part-[0-9]{9}-[0-9]{1,3}\.parquet)\.tmp")


def leftover_problem(d: Path, recording: str) -> str | None:
    """Why the sidecar ``d`` is not provably a live view this program left for ``recording``
    (``None``: it is, and may be removed): a plain folder whose manifest is valid and names
    ``recording``, holding nothing but what a run writes there. (Its run is over: the caller
    holds the recording's lock.)"""
    why = folder_problem(d)
    if why is not None or not os.path.lexists(d):
        return why
    try:
        m = json.loads((d / MANIFEST).read_text()) if (d / MANIFEST).is_file() else None
        if m is not None:
            check_manifest(d, m, recording)
        for entry in scan(d):
            if entry.name == MANIFEST and entry.is_file(follow_symlinks=False):
                continue
            if _OWN_TMP.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                continue
            table = entry.name.removeprefix("table=")
            if entry.name.startswith("table=") and table in TABLES and entry.is_dir(follow_symlinks=False):
                for part in scan(entry.path):
                    if not (
                        part.is_file(follow_symlinks=False)
                        and (PART_NAME.fullmatch(part.name) or _OWN_TMP.fullmatch(part.name))
                    ):
                        return f"holds {entry.name}/{part.name}, which a run does not write"
                continue
            return f"holds {entry.name}, which a run does not write"
    except (OSError, ValueError, RecursionError) as e:
        return f"unreadable ({str(e)[:120]})"
    except StorageError as e:
        return str(e).removeprefix(f"{d / MANIFEST}: ")
    if m is None and scan(d):
        return "no manifest naming its recording"
    return None


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
    m = _read_manifest(sidecar.resolve())  # checked (``check_manifest``) before any part is touched
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
