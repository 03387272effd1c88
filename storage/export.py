"""Export a recording as hive-partitioned Parquet for Spark, Trino, pandas, polars and DuckDB.

Layout: ``DIR/table=<table>/day=<YYYY-MM-DD>/part-<n>.parquet``. The day is the UTC calendar day of
the row (``ts`` for time series, the submit time for jobs, the start for runs). Every column keeps
its description and unit in the Parquet field metadata (``unit``, ``description``) and in the file's
key-value metadata (``ai_factory_twin.columns``, JSON), and ``ts`` sits next to ``time_s``.

The export streams: rows are read in Arrow batches and appended to one open Parquet writer per day,
so memory stays flat for any run length. Everything is written into a hidden directory next to DIR
and renamed into place at the end (``storage.paths.atomic_dir``): an interrupted or failed export
(a full disk, say) leaves nothing half-written. An existing DIR is replaced only with
``overwrite`` and only when it holds nothing but an earlier export (``export_dir_problem``).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from storage.errors import StorageError
from storage.paths import atomic_dir, check_output
from storage.schema import arrow_schema, columns
from twin.spec.telemetry import TABLES

BATCH_ROWS = 262_144
MAX_OPEN_WRITERS = 32  # per table; the least recently used day's part is closed beyond this
_US_PER_DAY = 86_400 * 1_000_000
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_DAY_DIR = re.compile(r"day=[0-9]{4}-[0-9]{2}-[0-9]{2}")
_PART_FILE = re.compile(r"part-[0-9]{4,}\.parquet")


class ExportError(StorageError):
    """An export could not be made (bad arguments or destination)."""


@dataclass(frozen=True)
class Bound:
    """A time bound: seconds since the run's start, or a calendar instant."""

    seconds: float | None = None
    instant: _dt.datetime | None = None

    def sql(self) -> tuple[str, Any]:
        """SQL for the bound in seconds since each run's start (needs ``r.start``), and its parameter."""
        if self.instant is not None:
            return "(epoch(?::TIMESTAMPTZ) - epoch(r.start))", self.instant
        return "?::DOUBLE", self.seconds


def parse_bound(text: str, option: str) -> Bound:
    """``--from``/``--to``: seconds since the start (``3600``, ``90m``, ``6h``, ``2d``) or an ISO 8601
    date-time with a zone (``2026-01-06T00:00:00Z``)."""
    m = _DURATION.match(text)
    if m:
        return Bound(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])
    try:
        t = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ExportError(
            f"{option} {text!r}: not a time (seconds since the start such as 3600, 90m, 6h, 2d, "
            "or an ISO 8601 date-time with a zone such as 2026-01-06T00:00:00Z)"
        ) from None
    if t.tzinfo is None:
        raise ExportError(f"{option} {text!r}: an ISO date-time needs a zone (Z or +02:00)")
    return Bound(instant=t)


def check_window(
    lo: Bound | None, hi: Bound | None, texts: tuple[str | None, str | None] = (None, None)
) -> None:
    """``--from`` must come before ``--to`` (rows from ``lo``, before ``hi``): an empty window is
    refused (bounds of the same kind; an instant against seconds depends on each run's start)."""
    if lo is None or hi is None:
        return
    a, b = (lo.seconds, hi.seconds) if lo.seconds is not None else (lo.instant, hi.instant)
    if a is None or b is None:
        return
    if a >= b:  # type: ignore[operator]
        shown = [t if t is not None else "" for t in texts]
        raise ExportError(f"--from {shown[0]} is not before --to {shown[1]}: no row is in the window")


def export_schema(table: str) -> pa.Schema:
    """The table's Arrow schema with ``ts`` moved next to ``time_s``."""
    schema = arrow_schema(table)
    names = schema.names
    if "ts" in names and "time_s" in names:
        names = [n for n in names if n != "ts"]
        names.insert(names.index("time_s") + 1, "ts")
    return pa.schema([schema.field(n) for n in names])


def _file_metadata(table: str) -> dict[bytes, bytes]:
    cols = {c.name: {"unit": c.unit, "description": c.description} for c in columns(table)}
    return {
        b"ai_factory_twin.table": table.encode(),
        b"ai_factory_twin.columns": json.dumps(cols, ensure_ascii=False).encode(),
    }


def _select(table: str, lo: Bound | None, hi: Bound | None) -> tuple[str, list[Any]]:
    """The export query of one table: its columns in export order plus ``_day_us`` (the partition
    instant, µs since the epoch), filtered to [lo, hi) in seconds since each run's start."""
    names = ", ".join(f"t.{n}" for n in export_schema(table).names)
    names_t = {c.name for c in TABLES[table]}
    if "time_s" in names_t:
        day, t_lo, t_hi = "epoch_us(t.ts)", "t.time_s", "t.time_s"
    elif table == "jobs":
        # A job belongs to [lo, hi) when it was submitted before hi and had not ended before lo.
        day = "epoch_us(r.start) + t.submit_time_s * 1000000"
        t_lo, t_hi = "CASE WHEN t.end_time_s < 0 THEN 1e300 ELSE t.end_time_s END", "t.submit_time_s"
    else:  # runs
        day, t_lo, t_hi = "epoch_us(t.start)", None, None
    where: list[str] = []
    params: list[Any] = []
    if lo is not None and t_lo is not None:
        expr, p = lo.sql()
        where.append(f"{t_lo} >= {expr}")
        params.append(p)
    if hi is not None and t_hi is not None:
        expr, p = hi.sql()
        where.append(f"{t_hi} < {expr}")
        params.append(p)
    src = "runs t" if table == "runs" else f"{table} t JOIN runs r USING (run_id)"
    q = f"SELECT {names}, {day} AS _day_us FROM {src}"
    if where:
        q += " WHERE " + " AND ".join(where)
    return q, params


class _DayWriters:
    """One open Parquet writer per day of one table, least recently used closed beyond a limit."""

    def __init__(self, root: Path, table: str, schema: pa.Schema) -> None:
        self.root = root / f"table={table}"
        self.schema = schema.with_metadata(_file_metadata(table))
        self.open: OrderedDict[str, pq.ParquetWriter] = OrderedDict()
        self.parts: dict[str, int] = {}
        self.rows = 0

    def write(self, day: str, tb: pa.Table) -> None:
        w = self.open.get(day)
        if w is None:
            if len(self.open) >= MAX_OPEN_WRITERS:
                _, old = self.open.popitem(last=False)
                old.close()
            n = self.parts.get(day, 0)
            self.parts[day] = n + 1
            d = self.root / f"day={day}"
            d.mkdir(parents=True, exist_ok=True)
            w = pq.ParquetWriter(d / f"part-{n:04d}.parquet", self.schema, compression="zstd")
            self.open[day] = w
        else:
            self.open.move_to_end(day)
        w.write_table(tb)
        self.rows += tb.num_rows

    def close(self) -> None:
        for w in self.open.values():
            w.close()
        self.open.clear()


def _days(day_us: pa.Array) -> npt.NDArray[np.int64]:
    """Days since the epoch (UTC) of instants in µs since the epoch."""
    us = np.asarray(day_us.to_numpy(zero_copy_only=False), dtype=np.int64)
    return us // _US_PER_DAY


def _day_label(days: int) -> str:
    return (_dt.date(1970, 1, 1) + _dt.timedelta(days=days)).isoformat()


def export_dir_problem(d: Path) -> str | None:
    """Why ``d`` is not an earlier export that may be replaced (``None``: it is one): it holds
    only ``table=<table>/day=<YYYY-MM-DD>/part-<n>.parquet``, nothing else and no links."""
    try:
        for t in d.iterdir():
            if t.is_symlink() or not t.is_dir() or t.name.removeprefix("table=") not in TABLES:
                return f"holds {t.name}, so it is not an export"
            for day in t.iterdir():
                if day.is_symlink() or not day.is_dir() or not _DAY_DIR.fullmatch(day.name):
                    return f"holds {t.name}/{day.name}, so it is not an export"
                for f in day.iterdir():
                    if f.is_symlink() or not f.is_file() or not _PART_FILE.fullmatch(f.name):
                        return f"holds {t.name}/{day.name}/{f.name}, so it is not an export"
    except OSError as e:
        return f"cannot read: {e.strerror or e}"
    return None


def check_dest(dest: str | Path, inputs: list[Path] | tuple[Path, ...] = (), overwrite: bool = False) -> Path:
    """The export's destination checked (``storage.paths.check_output``) against ``inputs``."""
    return check_output(
        dest, inputs, overwrite=overwrite, what="", kind="dir", replaceable=export_dir_problem
    )


def export(
    con: duckdb.DuckDBPyConnection,
    dest: str | Path,
    tables: list[str] | None = None,
    lo: Bound | None = None,
    hi: Bound | None = None,
    overwrite: bool = False,
) -> dict[str, int]:
    """Write the tables of an open recording to ``dest`` (which must not exist or be empty, or,
    with ``overwrite``, hold an earlier export); return the rows written per table."""
    names = list(TABLES) if not tables else tables
    unknown = [t for t in names if t not in TABLES]
    if unknown:
        raise ExportError(f"--tables: no table {unknown[0]!r} (tables: {', '.join(TABLES)})")
    out = check_dest(dest, overwrite=overwrite)
    counts: dict[str, int] = {}
    with atomic_dir(out) as tmp:
        for table in names:
            schema = export_schema(table)
            q, params = _select(table, lo, hi)
            writers = _DayWriters(tmp, table, schema)
            try:
                reader = con.sql(q, params=params).to_arrow_reader(BATCH_ROWS)
                for batch in reader:
                    if not batch.num_rows:
                        continue
                    days = _days(batch.column("_day_us"))
                    data = pa.Table.from_batches([batch]).drop_columns(["_day_us"]).cast(schema)
                    uniq = np.unique(days)
                    for d in uniq:
                        part = data if len(uniq) == 1 else data.filter(pa.array(days == d))
                        writers.write(_day_label(int(d)), part)
                if not writers.rows:  # an empty table still gets a file, so its schema is known
                    ((first_us,),) = con.sql("SELECT min(epoch_us(start)) FROM runs").fetchall()
                    day = _days(pa.array([first_us or 0], pa.int64()))[0]
                    writers.write(_day_label(int(day)), schema.empty_table())
            finally:
                writers.close()
            counts[table] = writers.rows
    return counts
