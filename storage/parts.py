"""Where a recording keeps its time series: Parquet parts beside the DuckDB file, behind views.

    FILE                                   DuckDB: runs, jobs, twin_meta, twin_parts, and one view
                                           per time-series table (factory_ts, ultraserver_ts, ...)
    FILE.parts/run_id=<run>/table=<table>/part-<seq>-<level>.parquet

A run's writer stores each commit's rows of a time-series table as one Parquet part (the columns
of ``storage.schema.batch_schema``: not ``run_id``, which the folder's name and the view carry
once) and merges small parts into larger ones as the run goes on (``storage.live``). Parquet
because it is what the rows cost to write: on the same batches DuckDB's own insert takes several
times the CPU of a Parquet part and leaves a larger file (``bench/bench_writepath.py``).

``twin_parts`` lists, for every run and table, the parts that hold its rows; it is changed in the
same DuckDB transaction as ``runs.sim_time_s`` and the views, so the file always names exactly the
parts of what it says is committed. A part is written (and renamed into place) before the
transaction that lists it, and a merged-away part is deleted only after the transaction that
stops listing it; a run killed at any moment leaves a file whose views read everything committed,
and at worst parts no view reads (removed the next time a run writes to the file).

The views name their parts relative to ``FILE.parts`` (DuckDB's ``file_search_path``), so the file
and its folder move together. Other tools:

    duckdb FILE  ->  SET file_search_path = 'FILE.parts'; SELECT ... FROM ultraserver_ts
    polars       ->  pl.scan_parquet('FILE.parts/*/table=ultraserver_ts/*.parquet', hive_partitioning=True)
    pandas       ->  pd.read_parquet('FILE.parts/run_id=<run>/table=ultraserver_ts')

A file that an earlier version created (schema v10 or older: its time series are DuckDB tables)
keeps them as tables when a run is appended to it.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb

from storage.errors import StorageError
from storage.schema import DUCKDB_TYPES, columns, comment_sql
from twin.spec.telemetry import TABLES, UPSERT_KEYS

SUFFIX = ".parts"
CATALOG = "twin_parts"
# The tables stored as parts: the time series (``*_ts``). The runs, the upserted jobs and the event
# logs (a few rows a step at most, read in the order they were written) stay DuckDB tables.
PART_TABLES = tuple(t for t in TABLES if t.endswith("_ts") and t not in UPSERT_KEYS)
BASE_KEY = "parts_dir"  # twin_meta: the folder the stored views name their parts in
RUN_DIR = re.compile(r"run_id=([A-Za-z0-9][A-Za-z0-9._+-]{0,199})")
PART_NAME = re.compile(r"part-[0-9]{9}-[0-9]{1,3}\.parquet")
# A part being written, before its rename into place.
_OWN_TMP = re.compile(r"\.part-[0-9]{9}-[0-9]{1,3}\.parquet\.tmp")


def parts_dir(path: str | Path) -> Path:
    """The folder of a recording's parts: ``FILE.parts`` beside ``FILE``."""
    p = Path(path)
    return p.with_name(p.name + SUFFIX)


def run_dir_name(run_id: str) -> str:
    """The folder of one run's parts (``run_id=<run>``, the Hive-style name other readers turn into
    a ``run_id`` column); ``StorageError`` for a run id that cannot name a folder safely."""
    name = f"run_id={run_id}"
    if not RUN_DIR.fullmatch(name):
        raise StorageError(
            f"run id {run_id!r:.80} cannot name its parts' folder (letters, digits, '.', '_', '+', '-'; "
            "up to 200 characters, not starting with a sign or dot)"
        )
    return name


def part_rel(run_id: str, table: str, part: str) -> str:
    """A part's path as the views and ``twin_parts`` name it: relative to ``FILE.parts``."""
    return f"{run_dir_name(run_id)}/table={table}/{part}"


def sync_catalog(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    before: Mapping[str, Mapping[str, int]],
    now: Mapping[str, Mapping[str, int]],
) -> None:
    """``twin_parts`` gains the run's parts listed in ``now`` and not ``before`` and loses those
    merged away (by table: part -> rows), in the caller's transaction. One statement each, not one
    a row, which made commits slow."""
    gone = [
        part_rel(run_id, t, rel.split("/")[-1]) for t in now for rel in before.get(t, {}) if rel not in now[t]
    ]
    new = [
        (run_id, t, part_rel(run_id, t, rel.split("/")[-1]), n)
        for t in now
        for rel, n in now[t].items()
        if rel not in before.get(t, {})
    ]
    if gone:
        con.execute(f"DELETE FROM {CATALOG} WHERE run_id = ? AND list_contains(?, path)", [run_id, gone])
    if new:
        con.execute(
            f"INSERT INTO {CATALOG} VALUES {', '.join(['(?, ?, ?, ?)'] * len(new))}",
            [v for row in new for v in row],
        )


def is_part_rel(rel: str) -> bool:
    """Is ``rel`` (named in ``twin_parts``) a path the writer names
    (``run_id=<run>/table=<table>/part-<seq>-<level>.parquet``: no absolute path, no ``..``)?"""
    bits = rel.split("/")
    return (
        len(bits) == 3
        and bool(RUN_DIR.fullmatch(bits[0]))
        and bits[1].startswith("table=")
        and bits[1].removeprefix("table=") in PART_TABLES
        and bool(PART_NAME.fullmatch(bits[2]))
    )


def run_folders(path: str | Path) -> list[str]:
    """The run folders found in ``FILE.parts`` (plain folders with a run folder's name; a symbolic
    link or anything else is left out, so no file access is ever granted through it)."""
    return sorted(
        e.name
        for e in _entries(parts_dir(path))
        if RUN_DIR.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
    )


def base_of(path: str | Path) -> str:
    """``FILE.parts`` as an absolute path (the folder it is in resolved: how the views name it)."""
    d = parts_dir(path)
    return os.path.join(os.path.realpath(d.parent), d.name)


def access_config(path: str | Path) -> list[str]:
    """The only directory a connection to ``FILE`` may read (and a writer write) files in: its
    parts folder, allowed before external access is turned off (``storage.sandbox.connect``)."""
    return [base_of(path) + os.sep]


def is_parts_backed(con: duckdb.DuckDBPyConnection) -> bool:
    """Does the file keep its time series as parts (its ``factory_ts`` is a view)?"""
    rows = con.sql(
        "SELECT count(*) FROM duckdb_views() WHERE view_name = 'factory_ts' AND database_name = current_database()"
    ).fetchall()
    return bool(rows[0][0])


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


# The writer's part names as a glob (``PART_NAME``): nothing else in a table folder is ever opened
# (a temporary name, a stray copy, a link planted there).
PART_GLOB = "part-" + "[0-9]" * 9 + "-*.parquet"
# Characters a glob gives meaning to: a parts folder whose path holds one is named part by part.
_GLOB = re.compile(r"[*?\[\]{}]")


def view_sql(table: str, parts: Mapping[str, list[str]], base: str, temp: bool = False) -> str:
    """The view of ``table`` over its parts, ``{run_id: [path relative to FILE.parts, ...]}`` (runs
    without parts left out), named absolute under ``base``: every stored column in the schema's
    order, each run's rows given its id. With no parts at all, an empty relation of the same
    columns and types. ``temp``: a temporary view (a reader's, over a recording that moved).

    Each run's rows are the parts in its table folder that ``twin_parts`` lists (a glob filtered by
    file name), so the view stays the same while the run commits and merges parts; only a run's
    first part of a table changes it (``storage.writer``). Under a folder whose name a glob would
    misread, the view names the parts one by one instead (and changes at every commit)."""
    cols = columns(table)
    empty = ", ".join(f"CAST(NULL AS {DUCKDB_TYPES[c.dtype]}) AS {c.name}" for c in cols)
    selects = [f"SELECT {empty} WHERE false"]
    for run_id, files in sorted(parts.items()):
        if not files:
            continue
        names = ", ".join(
            f"{_sql_str(run_id)}::VARCHAR AS run_id" if c.name == "run_id" else c.name for c in cols
        )
        if by_glob(base):
            folder = f"{base}/{run_dir_name(run_id)}/table={table}"
            listed_sql = (
                f"SELECT {_sql_str(base + '/')} || path FROM {CATALOG} "
                f"WHERE run_id = {_sql_str(run_id)} AND table_name = {_sql_str(table)}"
            )
            selects.append(
                f"SELECT {names} FROM read_parquet({_sql_str(folder + '/' + PART_GLOB)}, "
                f"hive_partitioning = false, filename = true) WHERE filename IN ({listed_sql})"
            )
        else:
            src = ", ".join(_sql_str(f"{base}/{f}") for f in files)
            selects.append(f"SELECT {names} FROM read_parquet([{src}], hive_partitioning = false)")
    # The empty relation first fixes the columns' types; UNION ALL keeps every row.
    return f"CREATE OR REPLACE {'TEMP ' if temp else ''}VIEW {table} AS " + " UNION ALL ".join(selects)


def by_glob(base: str) -> bool:
    """Do the views find their parts by a glob under ``base`` (its name has no glob character)?"""
    return not _GLOB.search(base)


@functools.cache
def view_comments_sql(table: str) -> str:
    """The comments of the view of ``table``'s columns, as one script (a replaced view loses them)."""
    return ";\n".join(comment_sql(table, c) for c in columns(table))


@functools.cache
def empty_views_sql() -> str:
    """Every time-series view with no parts, with its columns' comments, as one script: a new
    file's views until its run's first commit."""
    return ";\n".join(f"{view_sql(t, {}, '')};\n{view_comments_sql(t)}" for t in PART_TABLES)


def replace_views(con: duckdb.DuckDBPyConnection, tables: Iterable[str], base: str) -> None:
    """(Re)create the views of ``tables`` over the parts ``twin_parts`` lists, with their columns'
    comments: one query of the list and one script (each statement has a fixed cost in DuckDB,
    and the views of a new file's first commit are ~200 statements)."""
    tables = list(tables)
    if tables:
        parts = catalogs(con, tables)
        con.execute(";\n".join(f"{view_sql(t, parts[t], base)};\n{view_comments_sql(t)}" for t in tables))


def catalog(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, list[str]]:
    """The parts ``twin_parts`` lists for ``table``, by run, in the order they were written."""
    return catalogs(con, [table])[table]


def catalogs(con: duckdb.DuckDBPyConnection, tables: Iterable[str]) -> dict[str, dict[str, list[str]]]:
    """``catalog`` of each of ``tables``, in one query."""
    out: dict[str, dict[str, list[str]]] = {t: {} for t in tables}
    for table, run_id, rel in con.sql(
        f"SELECT table_name, run_id, path FROM {CATALOG} WHERE list_contains(?, table_name) "
        "ORDER BY table_name, run_id, path",
        params=[list(out)],
    ).fetchall():
        out[str(table)].setdefault(str(run_id), []).append(str(rel))
    return out


def listed(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Every part path ``twin_parts`` lists (relative to ``FILE.parts``)."""
    return {str(r[0]) for r in con.sql(f"SELECT path FROM {CATALOG}").fetchall()}


def remove_unlisted(path: str | Path, keep: set[str]) -> int:
    """Delete what a killed run left in ``FILE.parts`` that no view reads: parts not in ``keep``
    and the temporary names of parts, in run folders of the writer's naming only (anything else
    there is not ours and stays). Only while holding the recording's run lock. Returns the count."""
    d = parts_dir(path)
    n = 0
    for run in run_folders(path):
        for tdir in _entries(d / run):
            if not (tdir.name.startswith("table=") and tdir.is_dir(follow_symlinks=False)):
                continue
            for f in _entries(Path(tdir.path)):
                rel = f"{run}/{tdir.name}/{f.name}"
                ours = PART_NAME.fullmatch(f.name) or _OWN_TMP.fullmatch(f.name)
                if ours and rel not in keep and f.is_file(follow_symlinks=False):
                    os.unlink(f.path)
                    n += 1
            _rmdir_if_empty(Path(tdir.path))  # a table no view reads any more
        _rmdir_if_empty(d / run)  # e.g. the run of a replaced file
    return n


def _rmdir_if_empty(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:  # not empty (or already gone)
        pass


def leftover_problem(path: str | Path) -> str | None:
    """Why ``FILE.parts`` beside the run output ``path`` is not provably a parts folder this program
    wrote (``None``: it is absent, or holds only run folders of table folders of parts and their
    temporary names, no links; a table folder of the recorded time series or of the live-only
    parts of the other tables), which a run may then clean up as its own."""
    d = parts_dir(path)
    why = folder_problem(d)
    if why is not None or not os.path.lexists(d):
        return why
    try:
        for run in scan(d):
            if not (RUN_DIR.fullmatch(run.name) and run.is_dir(follow_symlinks=False)):
                return f"holds {run.name}, which a run does not write"
            for tdir in scan(Path(run.path)):
                if not (
                    tdir.name.startswith("table=")
                    and tdir.name.removeprefix("table=") in TABLES
                    and tdir.name != "table=runs"
                    and tdir.is_dir(follow_symlinks=False)
                ):
                    return f"holds {run.name}/{tdir.name}, which a run does not write"
                for f in scan(Path(tdir.path)):
                    if not (
                        (PART_NAME.fullmatch(f.name) or _OWN_TMP.fullmatch(f.name))
                        and f.is_file(follow_symlinks=False)
                    ):
                        return f"holds {run.name}/{tdir.name}/{f.name}, which a run does not write"
    except OSError as e:
        return f"cannot read: {e.strerror or e}"
    return None


def scan(d: str | Path) -> list[os.DirEntry[str]]:
    """The entries of the folder ``d`` (the directory handle closed at once)."""
    with os.scandir(d) as it:
        return list(it)


def _entries(d: Path) -> list[os.DirEntry[str]]:
    """``scan``, with nothing for a folder that is not there."""
    try:
        return scan(d)
    except (FileNotFoundError, NotADirectoryError):
        return []


def folder_problem(d: Path) -> str | None:
    """Why ``d`` is not a plain folder (a link or a file is not; ``None``: it is, or it is not there)."""
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot read: {e.strerror or e}"
    return None if stat.S_ISDIR(st.st_mode) else "not a folder"


def check_listed(path: str | Path, rels: Iterable[str]) -> None:
    """Every path ``twin_parts`` lists is a part name of the writer's and a plain file in
    ``FILE.parts`` (not a link); ``StorageError`` naming the first that is not."""
    d = parts_dir(path)
    for rel in rels:
        if not is_part_rel(rel):
            raise StorageError(f"{path}: {CATALOG} lists {rel!r:.100}, which is not a part name")
        run, tdir, _ = rel.split("/")
        for q, is_dir in ((d, True), (d / run, True), (d / run / tdir, True), (d / rel, False)):
            try:
                st = os.lstat(q)
            except FileNotFoundError:
                raise StorageError(f"{path}: its part {rel} is missing from {d}") from None
            except OSError as e:
                raise StorageError(f"{q}: cannot read: {e.strerror or e}") from None
            # A symbolic link (to anywhere) is neither a plain folder nor a plain file.
            if not (stat.S_ISDIR(st.st_mode) if is_dir else stat.S_ISREG(st.st_mode)):
                raise StorageError(f"{q}: not a plain {'folder' if is_dir else 'file'}")


def stored_base(con: duckdb.DuckDBPyConnection) -> str | None:
    rows = con.sql("SELECT value FROM twin_meta WHERE key = ?", params=[BASE_KEY]).fetchall()
    return str(rows[0][0]) if rows else None


def moved_views_sql(con: duckdb.DuckDBPyConnection, path: str | Path) -> list[str]:
    """A reader's views of a recording that moved (or was copied) since it was written: the stored
    views name the parts where they were written, so temporary views of the same names name them
    where they are now (``FILE.parts`` beside ``FILE``). None if it has not moved."""
    base = base_of(path)
    if stored_base(con) in (None, base):
        return []
    parts = catalogs(con, PART_TABLES)
    return [view_sql(table, parts[table], base, temp=True) for table in PART_TABLES]
