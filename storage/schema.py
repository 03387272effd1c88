"""Arrow schema and DuckDB DDL derived from the column specs in ``twin.spec.telemetry``.

Schema changes are ordered migrations recorded in ``twin_meta``; a file written by a newer,
incompatible version is refused with a clear message.

Calendar time is storage's own: ``runs.start`` (the scenario's start, an instant) and a ``ts``
column in every time-series table, computed when a batch is built (``ts = start + time_s``), so the
model keeps counting seconds.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from storage.kpis import cost_by_day_view_sql, run_summary_view_sql, system_summary_view_sql
from twin.spec.telemetry import PLANT_UNIT_COLUMNS, SCHEMA_VERSION, TABLES, UPSERT_KEYS, Column

# What each schema version changed, for the migrations of older files (the tables and columns
# themselves are ``twin.spec.telemetry``'s).
# Tables that a schema version after the first added (created by that version's migration).
ADDED_IN: dict[str, int] = {"row_ts": 3, "hall_ts": 3, "system_ts": 5, "grid_ts": 10}
# Columns added to existing tables in schema v5 (an older file gains them by ALTER TABLE).
V5_COLUMNS = (("jobs", "system"),)
# Columns added to existing tables in schema v7 (campuses: the hall of each row and system).
V7_COLUMNS = (("row_ts", "hall_id"), ("system_ts", "hall_id"))
# Columns added to factory_ts in schema v8 (the heat balance: an older file gains them).
V8_COLUMNS = (
    ("factory_ts", "heat_rejected_w"),
    ("factory_ts", "heat_stored_w"),
    ("factory_ts", "unrejected_fraction"),
    ("factory_ts", "chilled_water_supply_c"),
)
# Columns schema v9 adds: prompt tokens and the prefill time share of inference (the split of
# its cost between input and output tokens).
V9_COLUMNS = (("factory_ts", "input_tokens_per_s"), ("factory_ts", "prefill_time_share"))
# Columns of factory_ts added in schema v4 (an older file gains them by ALTER TABLE).
COST_COLUMNS = ("capex_usd", "fixed_opex_usd", "water_cost_usd", "inference_chips")
# Every column schema v6 adds (an older file gains them by ALTER TABLE), by table.
V6_COLUMNS: dict[str, tuple[str, ...]] = {
    "factory_ts": PLANT_UNIT_COLUMNS,
    "ultraserver_ts": ("cdu_flow_fraction",),
}

ARROW_TYPES: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "timestamptz": pa.timestamp("us", tz="UTC"),
}
DUCKDB_TYPES = {
    "int8": "TINYINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "float32": "REAL",
    "float64": "DOUBLE",
    "string": "VARCHAR",
    "bool": "BOOLEAN",
    "timestamptz": "TIMESTAMPTZ",
}

# A scenario without a start begins on Monday 2026-06-29 00:00 UTC (the scenario key ``start``):
# day 180 of the year, the default weather day (``site.start_day_of_year``), and a Monday, the
# first day of the time-of-use week.
DEFAULT_START = _dt.datetime(2026, 6, 29, tzinfo=_dt.UTC)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
START = Column("start", "timestamptz", "", "Calendar time of time_s = 0 (the scenario's start)")
TS = Column("ts", "timestamptz", "", "Calendar time of the step: runs.start + time_s")


def columns(table: str) -> tuple[Column, ...]:
    """Every column of a table as stored: the model's, then storage's calendar-time column."""
    cols = TABLES[table]
    if table == "runs":
        return (*cols, START)
    if any(c.name == "time_s" for c in cols):
        return (*cols, TS)
    return cols


def timestamps(start: _dt.datetime, time_s: npt.NDArray[np.int64] | list[int]) -> pa.Array:
    """``start + time_s`` as a UTC timestamp array (microseconds), vectorised."""
    if start.tzinfo is None:
        raise ValueError("start must carry a time zone")
    start_us = (start - _EPOCH) // _dt.timedelta(microseconds=1)
    us = np.asarray(time_s, dtype=np.int64) * 1_000_000 + start_us
    return pa.array(us, type=ARROW_TYPES["timestamptz"])


def arrow_schema(table: str) -> pa.Schema:
    return pa.schema(
        [
            pa.field(c.name, ARROW_TYPES[c.dtype], metadata={"unit": c.unit, "description": c.description})
            for c in columns(table)
        ]
    )


def batch_schema(table: str) -> pa.Schema:
    """The columns a run's batch of ``table`` carries: every stored column but ``run_id``, which is
    one value for the whole run and is added where the batch is stored (the writer's INSERT, the
    live view's SELECT) instead of being repeated on every row."""
    schema = arrow_schema(table)
    return schema.remove(schema.get_field_index("run_id"))


def batch_keys(table: str) -> tuple[str, ...]:
    """The upsert key of ``table`` within one run (``UPSERT_KEYS`` without ``run_id``)."""
    return tuple(k for k in UPSERT_KEYS[table] if k != "run_id")


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def create_table_sql(table: str) -> str:
    cols = [f"{c.name} {DUCKDB_TYPES[c.dtype]}" for c in TABLES[table]]  # v1 columns
    if table in UPSERT_KEYS:
        cols.append(f"PRIMARY KEY ({', '.join(UPSERT_KEYS[table])})")
    return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(cols)})"


def comment_sql(table: str, col: Column) -> str:
    unit = f" [{col.unit}]" if col.unit else ""
    return f"COMMENT ON COLUMN {table}.{col.name} IS {_sql_str(col.description + unit)}"


def migrations() -> list[list[str]]:
    """Ordered migrations; index + 1 is the schema version they bring the file to."""
    v1 = ["CREATE TABLE IF NOT EXISTS twin_meta (key VARCHAR PRIMARY KEY, value VARCHAR)"]
    for table in TABLES:
        if table not in ADDED_IN:
            v1.append(create_table_sql(table))
            v1.extend(comment_sql(table, c) for c in TABLES[table])
    # Views for the questions people ask most.
    v1.append(run_summary_view_sql())
    # v2: calendar time, as the last column of each table (ALTER appends).
    v2 = []
    for table in TABLES:
        if table in ADDED_IN:
            continue
        for c in columns(table)[len(TABLES[table]) :]:
            v2.append(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {c.name} {DUCKDB_TYPES[c.dtype]}")
            v2.append(comment_sql(table, c))
    out = [v1, v2]
    # v3: the tables it adds, with storage's calendar-time column.
    out.append(_added_tables(3))
    # v4: cost-of-ownership columns of factory_ts (an older file gains them; a new file has them
    # from v1's CREATE TABLE, so these are no-ops there) and the cost_by_day view.
    v4 = []
    for name in COST_COLUMNS:
        col = next(c for c in TABLES["factory_ts"] if c.name == name)
        v4.append(f"ALTER TABLE factory_ts ADD COLUMN IF NOT EXISTS {name} {DUCKDB_TYPES[col.dtype]}")
        v4.append(comment_sql("factory_ts", col))
    v4.append(cost_by_day_view_sql())
    out.append(v4)
    # v5: mixed floors: system_ts, and the system column of jobs (a no-op on a new file).
    v5 = _added_tables(5) + _added_columns(V5_COLUMNS)
    v5.append(system_summary_view_sql())
    out.append(v5)
    # v6: the cooling plant's units (factory_ts) and each UltraServer's CDU flow (ultraserver_ts).
    out.append(_added_columns((t, n) for t, names in V6_COLUMNS.items() for n in names))
    # v7: campuses: the hall of each row_ts and system_ts row (a no-op on a new file).
    out.append(_added_columns(V7_COLUMNS))
    # v8: the heat balance of the water in factory_ts (a no-op on a new file).
    out.append(_added_columns(V8_COLUMNS))
    # v9: prompt tokens and the prefill time share of inference in factory_ts (a no-op on a new
    # file; an older file reads NULL for its steps: its input-token KPIs are empty).
    out.append(_added_columns(V9_COLUMNS))
    # v10: sub-step power of the halls and the grid connection (grid_ts).
    out.append(_added_tables(10))
    # v11: the parts that hold the time series of a file created from v11 on (``storage.parts``;
    # an older file keeps its tables, and this list stays empty).
    out.append(
        [
            "CREATE TABLE IF NOT EXISTS twin_parts (run_id VARCHAR, table_name VARCHAR, path VARCHAR, "
            "rows BIGINT, PRIMARY KEY (run_id, table_name, path))",
            "COMMENT ON TABLE twin_parts IS 'The Parquet parts (paths relative to FILE.parts) that hold "
            "each run''s rows of each time-series view'",
        ]
    )
    return out


def new_file_sql(views: Iterable[str]) -> list[str]:
    """The statements that give a new file this version's schema at once (what replaying
    ``migrations`` from v1 leaves, without the no-op steps): every table but ``views`` (made by the
    caller as views, ``storage.parts``) with all its columns and their comments, then the views of
    ``storage.kpis`` and ``twin_parts``. ``tests/test_storage.py`` checks the two agree."""
    skip = set(views)
    out = ["CREATE TABLE IF NOT EXISTS twin_meta (key VARCHAR PRIMARY KEY, value VARCHAR)"]
    for table in TABLES:
        if table in skip:
            continue
        cols = [f"{c.name} {DUCKDB_TYPES[c.dtype]}" for c in columns(table)]
        if table in UPSERT_KEYS:
            cols.append(f"PRIMARY KEY ({', '.join(UPSERT_KEYS[table])})")
        out.append(f"CREATE TABLE {table} ({', '.join(cols)})")
        out.extend(comment_sql(table, c) for c in columns(table))
    out += [run_summary_view_sql(), cost_by_day_view_sql(), system_summary_view_sql()]
    out += migrations()[-1]  # v11: twin_parts
    return out


def _added_columns(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """The statements adding each (table, column) of ``pairs`` to an older file, with its comment."""
    v: list[str] = []
    for table, name in pairs:
        col = next(c for c in TABLES[table] if c.name == name)
        v.append(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {DUCKDB_TYPES[col.dtype]}")
        v.append(comment_sql(table, col))
    return v


def _added_tables(version: int) -> list[str]:
    """The statements creating the tables schema ``version`` adds, with storage's calendar-time
    column."""
    v: list[str] = []
    for table in (t for t, added in ADDED_IN.items() if added == version):
        v.append(create_table_sql(table))
        v.extend(comment_sql(table, c) for c in TABLES[table])
        for c in columns(table)[len(TABLES[table]) :]:
            v.append(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {c.name} {DUCKDB_TYPES[c.dtype]}")
            v.append(comment_sql(table, c))
    return v


assert len(migrations()) == SCHEMA_VERSION
