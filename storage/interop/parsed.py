"""Parsed telemetry batches: the observed schema, the parsers' limits and error, and the table
builder and unit conversion every format's parser shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.interop.mapping import BY_NAME, FIELDS, UNIT_OFFSETS, UNITS, Field

OBSERVED = pa.schema(
    [
        pa.field("time", pa.timestamp("us", tz="UTC")),
        pa.field("entity", pa.string()),
        pa.field("metric", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("unit", pa.string()),
        pa.field("source", pa.string()),
        pa.field("quality", pa.string()),
    ]
)
FAR_S = 366 * 86400  # a sample more than a year from now is stamped by a wrong clock
GAP_FACTOR = 3.0
MAX_LABEL_CHARS = 1024  # a longer label value is cut (and the sample flagged) to bound memory
# One JSON document (or text chunk): a larger one is refused with an error. Parsing holds about
# 13 times a text's size at its peak (bench: 260 MB for a 19 MB DCGM scrape), so text files
# are read in chunks (``sources.TEXT_CHUNK_BYTES``) and a JSON document is kept below this.
MAX_DOCUMENT_BYTES = 64 << 20


class IngestError(ValueError):
    """Input that cannot be read at all (one line naming the source and what is wrong)."""


@dataclass
class Parsed:
    table: pa.Table
    fmt: str
    unmapped: int = 0
    malformed: int = 0
    unmapped_names: dict[str, int] = field(default_factory=dict)
    offsets_s: list[float] = field(default_factory=list)  # receipt - sample time, where both known


def by_field(fmt: str) -> dict[str, Field]:
    out: dict[str, Field] = {}
    for f in FIELDS:
        if f.fmt == fmt:
            out.setdefault(f.field, f)
    return out


def observed_table(
    time_us: Any, entity: Any, metric: Any, value: Any, unit: Any, source: str, quality: Any = "good"
) -> pa.Table:
    n = len(value)
    return pa.table(
        {
            "time": col(np.asarray(time_us, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")),
            "entity": col(entity).cast(pa.string()),
            "metric": col(metric).cast(pa.string()),
            "value": col(np.asarray(value, dtype=np.float64)),
            "unit": col(unit).cast(pa.string()),
            "source": pa.repeat(pa.scalar(source), n) if n else pa.array([], pa.string()),
            "quality": (pa.repeat(pa.scalar(quality), n) if n else pa.array([], pa.string()))
            if isinstance(quality, str)
            else col(quality),
        },
        schema=OBSERVED,
    )


def col(x: Any) -> Any:
    """An Arrow array of ``x`` (as is when it is one)."""
    return x if isinstance(x, (pa.Array, pa.ChunkedArray)) else pa.array(x)


def empty(source: str = "") -> pa.Table:
    return OBSERVED.empty_table()


def to_canonical(f: Field, raw: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], str]:
    """A format's values of field ``f`` in the quantity's canonical unit."""
    q = BY_NAME[f.quantity]
    x = np.asarray(raw, dtype=np.float64)
    if f.codec == "flag":
        return (x > 0).astype(np.float64), q.unit
    if f.codec == "counter":  # the counter in its base unit; normalise turns it into a rate
        base, k = UNITS.get(f.unit, (f.unit, 1.0))
        return x * k, base
    if f.unit in UNITS and UNITS[f.unit][0] == q.unit:
        return x * UNITS[f.unit][1] + UNIT_OFFSETS.get(f.unit, 0.0), q.unit
    return x / f.scale, q.unit


def iso_us(s: Any) -> int | None:
    if not isinstance(s, str):
        return None
    try:
        arr = pc.strptime(pa.array([s.replace("Z", "+00:00")]), format="%Y-%m-%dT%H:%M:%S%z", unit="us")
        return int(arr.cast(pa.int64())[0].as_py())
    except (pa.ArrowInvalid, ValueError):
        try:
            import datetime as _dt

            d = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
            if d.tzinfo is None:
                d = d.replace(tzinfo=_dt.UTC)
            return int(d.timestamp() * 1e6)
        except ValueError:
            return None
