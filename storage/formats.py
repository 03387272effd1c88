"""Query results and summaries in the formats other tools read: strict JSON, JSON Lines, CSV, Parquet.

Strict means what every JSON parser accepts: numbers as numbers (DuckDB's 128-bit integer sums
arrive as ``Decimal`` and become integers), ``null`` for a missing value (never a bare ``NaN`` or
``Infinity``), date-times as ISO 8601 strings with their zone.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
from typing import IO, Any

import pyarrow as pa

TABLE_FORMATS = ("table", "csv", "json", "jsonl", "parquet")


def jsonable(v: Any) -> Any:
    """``v`` with every value JSON can carry exactly as itself (recursively)."""
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, decimal.Decimal):
        if not v.is_finite():
            return None
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    if isinstance(v, _dt.datetime | _dt.date | _dt.time):
        return v.isoformat()
    if isinstance(v, _dt.timedelta):
        return v.total_seconds()
    if isinstance(v, bytes):
        return v.hex()
    if hasattr(v, "item"):  # NumPy scalars
        return jsonable(v.item())
    return str(v)


def dumps(v: Any) -> str:
    """One line of strict JSON."""
    return json.dumps(jsonable(v), allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def _iso_interval(v: Any) -> str:
    """A month-day-nanosecond interval as ISO 8601 (``P1M2DT3.5S``)."""
    secs = decimal.Decimal(v.nanoseconds) / 1_000_000_000
    return f"P{v.months}M{v.days}DT{secs.normalize():f}S"


def flat_for_csv(table: pa.Table) -> pa.Table:
    """``table`` with the columns CSV cannot hold as text: every nested one (LIST, STRUCT, MAP,
    UNION) as JSON (``[1,2]``, ``{"a":1}``), an INTERVAL as ISO 8601 (``P0M1DT0S``); NULL stays
    an empty cell."""
    for i, f in enumerate(table.schema):
        if pa.types.is_map(f.type):
            conv: Any = lambda v: dumps(dict(v))  # noqa: E731 - [(key, value), ...] as an object
        elif pa.types.is_nested(f.type):
            conv = dumps
        elif pa.types.is_interval(f.type):
            conv = _iso_interval
        else:
            continue
        text = pa.array(
            [None if v is None else conv(v) for v in table.column(i).to_pylist()], type=pa.string()
        )
        table = table.set_column(i, pa.field(f.name, pa.string()), text)
    return table


def write_table(table: pa.Table, fmt: str, out: IO[bytes]) -> None:
    """Write a query result to a binary stream as csv (nested values as JSON text), json (one
    array), jsonl or parquet."""
    if fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(flat_for_csv(table), out)
    elif fmt == "json":
        out.write(b"[")
        for i, batch in enumerate(table.to_batches(max_chunksize=10_000)):
            rows = batch.to_pylist()
            for j, row in enumerate(rows):
                sep = b"," if i or j else b""
                out.write(sep + b"\n" + dumps(row).encode())
        out.write(b"\n]\n")
    elif fmt == "jsonl":
        for batch in table.to_batches(max_chunksize=10_000):
            out.write(b"".join(dumps(row).encode() + b"\n" for row in batch.to_pylist()))
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, out, compression="zstd")
    else:
        raise ValueError(f"unknown format {fmt!r}")
