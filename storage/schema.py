"""Arrow schema and DuckDB DDL derived from the column specs in ``twin.telemetry``.

Schema changes are ordered migrations recorded in ``twin_meta``; a file written by a newer,
incompatible version is refused with a clear message.
"""

from __future__ import annotations

import pyarrow as pa

from storage.kpis import cost_by_day_view_sql, run_summary_view_sql
from twin.telemetry import SCHEMA_VERSION, TABLES, UPSERT_KEYS, Column

ARROW_TYPES: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
}
DUCKDB_TYPES = {
    "int8": "TINYINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "float32": "REAL",
    "float64": "DOUBLE",
    "string": "VARCHAR",
    "bool": "BOOLEAN",
}


def arrow_schema(table: str) -> pa.Schema:
    return pa.schema(
        [
            pa.field(c.name, ARROW_TYPES[c.dtype], metadata={"unit": c.unit, "description": c.description})
            for c in TABLES[table]
        ]
    )


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def create_table_sql(table: str) -> str:
    cols = [f"{c.name} {DUCKDB_TYPES[c.dtype]}" for c in TABLES[table]]
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
        v1.append(create_table_sql(table))
        v1.extend(comment_sql(table, c) for c in TABLES[table])
    # Views for the questions people ask most.
    v1.append(run_summary_view_sql())
    # v2: cost-of-ownership columns of factory_ts (a v1 file gains them; new files have them).
    v2 = []
    for name in ("capex_usd", "fixed_opex_usd", "water_cost_usd", "inference_chips"):
        col = next(c for c in TABLES["factory_ts"] if c.name == name)
        v2.append(f"ALTER TABLE factory_ts ADD COLUMN IF NOT EXISTS {name} {DUCKDB_TYPES[col.dtype]}")
        v2.append(comment_sql("factory_ts", col))
    v2.append(cost_by_day_view_sql())
    return [v1, v2]


assert len(migrations()) == SCHEMA_VERSION
