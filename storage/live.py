"""Reading a recording while its run is still being written.

DuckDB lets one process hold a database file for writing and no other process open it, not even
read-only. So while a run writes ``FILE``, the writer also publishes every committed transaction as
Parquet parts in a sidecar directory ``FILE.live/``, removed when the run closes:

    FILE.live/manifest.json                    run row, committed time, the parts of every table
    FILE.live/table=<table>/part-<seq>-<level>.parquet

Each part is written under a temporary name and renamed, then the manifest is replaced the same
way, so a reader never sees half a part or a part the manifest does not vouch for. Parts are merged
in the background of the writer thread (16 parts of one level into one of the next), so a table
never has more than a few dozen files however long the run; merged-away parts are deleted after a
grace period so a reader that just read the manifest can still scan them.

``open_for_reading`` opens the file itself when it can; when the file is held by a running writer
and a sidecar exists, it opens an in-memory DuckDB with the same tables as views over the parts
the manifest lists (the jobs and runs tables keep the latest row per key, as the writer's upserts
do). External access is allowed for the sidecar directory only, then the configuration is locked,
so user SQL can no more reach other files than on a finished recording.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
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
from storage.reader import open_run_file
from storage.sandbox import SANDBOX_CONFIG, Limits, UserResult, UserSql, UserSqlRunner
from storage.schema import DUCKDB_TYPES, arrow_schema, columns, comment_sql, migrations
from storage.writer import latest_per_key
from twin.telemetry import SCHEMA_VERSION, TABLES, UPSERT_KEYS

MANIFEST = "manifest.json"
FANOUT = 16  # parts of one level merged into one part of the next
# A merged part's row groups: commits gathered up to this much data (at most this many rows).
ROW_GROUP_BYTES = 16 << 20
ROW_GROUP_ROWS = 1 << 20
GRACE_S = 300.0  # merged-away parts stay on disk this long for readers that listed them
FORMAT = "ai-factory-twin-live"


def _parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """Fast Parquet for short-lived parts: LZ4, dictionaries only for text (run ids, names)."""
    return {"compression": "lz4", "use_dictionary": [f.name for f in schema if pa.types.is_string(f.type)]}


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

    @property
    def name(self) -> str:
        return f"part-{self.seq:09d}-{self.level}.parquet"


class LivePublisher:
    """Publishes a run's committed batches as Parquet parts next to its file (see module doc).

    Called by the writer thread after every commit (``on_commit``). A failure to publish (disk
    full, directory removed) never fails the run: publishing stops and the sidecar is removed, so
    readers report the run as unreadable until it ends instead of showing stale data as current.
    """

    def __init__(self, path: str | Path) -> None:
        # Nothing touches the disk before the first commit: by then the writer holds the file, so
        # a sidecar found here was left behind by a killed run, not published by a live one.
        self.dir = live_dir(path)
        self.created = False
        self.seq = 0
        self.parts: dict[str, list[_Part]] = {t: [] for t in TABLES if t != "runs"}
        self._doomed: list[tuple[float, Path]] = []
        self.error: BaseException | None = None
        self.closed = False

    # ---------------------------------------------------------------- writer thread
    def on_commit(self, tables: dict[str, pa.Table], run: dict[str, Any]) -> None:
        if self.error is not None or self.closed:
            return
        try:
            if not self.created:
                if self.dir.exists():  # left behind by a run that was killed
                    shutil.rmtree(self.dir)
                self.dir.mkdir(mode=0o700)
                self.created = True
            self.seq += 1
            for table, tb in tables.items():
                if table in self.parts and tb.num_rows:
                    part = _Part(self.seq, 0)
                    self._write(table, part, tb)
                    self.parts[table].append(part)
                    self._merge(table)
            self._write_manifest(run)
            self._collect()
        except Exception as e:  # publishing is best effort; the run goes on
            self.error = e
            if self.created and self.dir.is_dir():
                shutil.rmtree(self.dir, ignore_errors=True)

    def close(self) -> None:
        """Remove the sidecar (the file itself is readable again once its writer has closed)."""
        self.closed = True
        if self.created and self.dir.is_dir():
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---------------------------------------------------------------- internals
    def _table_dir(self, table: str) -> Path:
        d = self.dir / f"table={table}"
        d.mkdir(exist_ok=True)
        return d

    def _write(self, table: str, part: _Part, tb: pa.Table) -> None:
        d = self._table_dir(table)
        tmp = d / f".{part.name}.tmp"
        pq.write_table(tb, tmp, **_parquet_options(tb.schema))
        _replace_atomically(tmp, d / part.name)

    def _merge(self, table: str) -> None:
        parts = self.parts[table]
        while len(parts) >= FANOUT and len({p.level for p in parts[-FANOUT:]}) == 1:
            group = parts[-FANOUT:]
            merged = _Part(group[-1].seq, group[-1].level + 1)
            d = self._table_dir(table)
            tmp = d / f".{merged.name}.tmp"
            schema = arrow_schema(table)
            # Upsert tables (jobs): only each key's last row survives the merge, as in the file.
            keep = (
                _latest_masks([d / p.name for p in group], UPSERT_KEYS[table])
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
            "seq": self.seq,
            "committed_s": run.get("sim_time_s"),
            "run": _jsonable_run(run),
            "tables": {t: [f"table={t}/{p.name}" for p in ps] for t, ps in self.parts.items()},
        }
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
                self._current = UserSql(reading.con.cursor(), self.limits, strict=True)
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
    except StorageError as e:
        if not (live_dir(path) / MANIFEST).is_file():
            raise
        try:
            return open_live(path, snapshot, limits)
        except StorageError:
            raise e from None


def _read_manifest(d: Path) -> dict[str, Any]:
    for _ in range(5):  # the manifest is replaced atomically; retry only a vanishing sidecar
        try:
            m: dict[str, Any] = json.loads((d / MANIFEST).read_text())
            return m
        except FileNotFoundError:
            time.sleep(0.05)
        except (OSError, ValueError, RecursionError) as e:
            raise StorageError(f"{d}: unreadable live manifest ({str(e)[:200]})") from e
    raise StorageError(f"{d}: the run closed while opening its live view; open the file again")


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _ddl(table: str) -> str:
    return f"CREATE TABLE {table} ({', '.join(f'{c.name} {DUCKDB_TYPES[c.dtype]}' for c in columns(table))})"


def _create_table(con: duckdb.DuckDBPyConnection, table: str, files: list[str], snapshot: bool) -> None:
    """Create ``table`` over its published parts ``files``: a view (a table when ``snapshot``)
    keeping the latest row per key of an upserted table, or an empty table if none was published."""
    names = ", ".join(c.name for c in columns(table))
    if not files:
        con.execute(_ddl(table))
    else:
        src = (
            f"read_parquet([{', '.join(_sql_str(f) for f in files)}], hive_partitioning = false, "
            "filename = true, file_row_number = true)"
        )
        q = f"SELECT {names} FROM {src}"
        if table in UPSERT_KEYS:  # latest row per key wins, as in the file
            keys = ", ".join(UPSERT_KEYS[table])
            q += (
                f" QUALIFY row_number() OVER (PARTITION BY {keys} "
                "ORDER BY filename DESC, file_row_number DESC) = 1"
            )
        con.execute(f"CREATE {'TABLE' if snapshot else 'VIEW'} {table} AS {q}")


def _check_manifest(d: Path, m: dict[str, Any]) -> None:
    """``StorageError`` unless the manifest has the shape a writer gives it: a run row (its id,
    status, system, time step and chips, and a start, if any, in ISO 8601), parts that are files
    of the sidecar by relative name, and a whole number of committed seconds."""
    run, tables, committed = m.get("run"), m.get("tables", {}), m.get("committed_s")
    why = ""
    if not isinstance(run, dict) or not all(
        isinstance(run.get(k), str) for k in ("run_id", "status", "system")
    ):
        why = "no run row"
    elif not all(
        isinstance(run.get(k), int) and not isinstance(run.get(k), bool) for k in ("dt_s", "chips_total")
    ):
        why = "the run row's dt_s or chips_total is not a whole number"
    elif not isinstance(tables, dict) or not all(
        isinstance(v, list)
        and all(isinstance(f, str) and not os.path.isabs(f) and ".." not in f.split("/") for f in v)
        for v in tables.values()
    ):
        why = "its parts are not files of the live view"
    elif committed is not None and (
        not isinstance(committed, int) or isinstance(committed, bool) or committed < 0
    ):
        why = f"committed_s {committed!r} is not a number of seconds"
    elif run.get("start") is not None:
        try:
            _dt.datetime.fromisoformat(str(run["start"]))
        except ValueError:
            why = f"run start {run['start']!r} is not a time"
    if why:
        raise StorageError(f"{d}: damaged live manifest ({why})")


def open_live(path: str | Path, snapshot: bool = False, limits: Limits | None = None) -> Reading:
    """An in-memory, sandboxed DuckDB over the parts a running writer published (module doc)."""
    d = live_dir(path).resolve()
    m = _read_manifest(d)
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise StorageError(f"{d}: not an AI Factory Twin live view")
    _check_manifest(d, m)
    if m.get("schema_version") != SCHEMA_VERSION:
        raise StorageError(
            f"{path}: run in progress with telemetry schema v{m.get('schema_version')}, this version of "
            f"twin reads v{SCHEMA_VERSION}"
        )
    # The sandbox of every telemetry database, except that reading the published parts needs file
    # access, which is then limited to their directory (before the configuration is locked).
    config = {k: v for k, v in SANDBOX_CONFIG.items() if k != "enable_external_access"}
    config["memory_limit"] = f"{(limits or Limits()).memory_bytes}B"
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
        con.register("_run", pa.Table.from_pylist([run], schema=arrow_schema("runs")))
        con.execute("INSERT INTO runs SELECT * FROM _run")
        con.unregister("_run")
        for table in TABLES:
            if table == "runs":
                continue
            _create_table(con, table, [str(d / f) for f in m["tables"].get(table, [])], snapshot)
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
