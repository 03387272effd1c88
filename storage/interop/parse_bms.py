"""Building-management points (CSV export, broker messages) -> observed samples."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.interop.mapping import BY_NAME, FIELDS, UNIT_OFFSETS, UNITS, Field
from storage.interop.parsed import (
    MAX_LABEL_CHARS,
    IngestError,
    Parsed,
    iso_us,
    observed_table,
)


def parse_bms_csv(text: str, source: str) -> Parsed:
    """A BMS trend export (Timestamp,Point,Value,Units,Status)."""
    import pyarrow.csv as pacsv

    try:
        tab = pacsv.read_csv(
            io.BytesIO(text.encode()),
            convert_options=pacsv.ConvertOptions(
                column_types={
                    "Timestamp": pa.string(),
                    "Point": pa.string(),
                    "Value": pa.string(),
                    "Units": pa.string(),
                    "Status": pa.string(),
                },
                strings_can_be_null=True,
            ),
            parse_options=pacsv.ParseOptions(invalid_row_handler=lambda r: "skip"),
        )
    except pa.ArrowInvalid as e:
        raise IngestError(f"{source}: not a BMS CSV trend export ({str(e).splitlines()[0][:160]})") from None
    missing = {"Timestamp", "Point", "Value"} - set(tab.column_names)
    if missing:
        raise IngestError(f"{source}: BMS CSV without column {sorted(missing)[0]!r}")
    return _bms_table(
        tab.column("Timestamp"),
        tab.column("Point"),
        tab.column("Value"),
        tab.column("Units") if "Units" in tab.column_names else None,
        tab.column("Status") if "Status" in tab.column_names else None,
        source,
        "bms-csv",
    )


def _point_index() -> tuple[dict[str, Field], list[tuple[re.Pattern[str], Field]]]:
    exact, pats = {}, []
    for f in FIELDS:
        if f.fmt != "bms":
            continue
        if "<id>" in f.field:
            pats.append((re.compile("^" + re.escape(f.field).replace("<id>", "([^/]+)") + "$"), f))
        else:
            exact[f.field] = f
    return exact, pats


def _one_chunk(a: Any) -> Any:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def _bms_table(ts: Any, point: Any, value: Any, units: Any, status: Any, source: str, fmt: str) -> Parsed:
    t, bad_t = _bms_times(ts)
    vals = pc.cast(
        pc.if_else(
            pc.match_substring_regex(
                pc.fill_null(value, ""), r"^[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+|nan|NaN|inf|Inf)$"
            ),
            value,
            pa.scalar(None, pa.string()),
        ),
        pa.float64(),
    )
    enc = _one_chunk(pc.dictionary_encode(pc.fill_null(point, "")))
    uniq = enc.dictionary.to_pylist()
    idx = enc.indices.to_numpy(zero_copy_only=False)
    fld, ent_u, met_u, unit_u = _resolve_points(uniq)
    known = np.array([f is not None for f in fld], dtype=bool)
    k_row = known[idx] if idx.size else np.zeros(0, dtype=bool)
    bad_np = bad_t.to_numpy(zero_copy_only=False) if len(bad_t) else np.zeros(0, dtype=bool)
    mapped = k_row & ~bad_np
    unmapped_n = int((~k_row).sum())
    malformed = int((bad_np & k_row).sum())
    raw = vals.to_numpy(zero_copy_only=False).astype(np.float64)
    factor, offset = _unit_factors(units, fld, unit_u, idx)
    flag = np.array([bool(f and f.codec == "flag") for f in fld])[idx] if idx.size else np.zeros(0, bool)
    value = np.where(flag, (raw > 0).astype(np.float64), raw * factor + offset)
    sel = pa.array(mapped)
    take = pa.array(idx[mapped])
    qual: Any = "good"
    if status is not None:
        st = pc.fill_null(status, "good").filter(sel)
        qual = pc.if_else(pc.equal(st, "good"), "good", "source_bad")
    tab = observed_table(
        t.filter(sel).cast(pa.int64()).to_numpy(zero_copy_only=False),
        pc.take(pa.array(ent_u, pa.string()), take),
        pc.take(pa.array(met_u, pa.string()), take),
        value[mapped],
        pc.take(pa.array(unit_u, pa.string()), take),
        source,
        qual,
    )
    return Parsed(tab, fmt, int(unmapped_n), int(malformed))


def _bms_times(ts: Any) -> tuple[Any, Any]:
    """The samples' ISO times in us (null where unreadable) and the unreadable mask."""
    ts = pa.chunked_array([ts]) if isinstance(ts, pa.Array) else ts
    t = pc.strptime(
        pc.replace_substring(pc.fill_null(ts, ""), "Z", "+0000"),
        format="%Y-%m-%dT%H:%M:%S%z",
        unit="us",
        error_is_null=True,
    )
    bad_t = pc.is_null(t).combine_chunks() if isinstance(t, pa.ChunkedArray) else pc.is_null(t)
    return t, bad_t


def _resolve_points(uniq: list[str]) -> tuple[list[Field | None], list[str], list[str], list[str]]:
    """One step per distinct point, not per sample: its field, entity, metric and unit."""
    exact, pats = _point_index()
    fld: list[Field | None] = []
    ent_u, met_u, unit_u = [], [], []
    for p in uniq:
        f = exact.get(p)
        ent = "site"
        if f is None:
            for pat, g in pats:
                mm = pat.match(p)
                if mm:
                    f, ent = g, mm.group(1)[:MAX_LABEL_CHARS]
                    break
        fld.append(f)
        ent_u.append(ent)
        met_u.append(f.quantity if f else "")
        unit_u.append(BY_NAME[f.quantity].unit if f else "")
    return fld, ent_u, met_u, unit_u


def _unit_factors(units: Any, fld: list[Field | None], unit_u: list[str], idx: Any) -> tuple[Any, Any]:
    """Each sample's factor and offset to its quantity's unit: by the row's own unit when it
    names one of the quantity's (a BMS that reports W where the table says kW), else by the
    field's scale."""
    scale_u = np.array([f.scale if f else 1.0 for f in fld])
    canon_u = np.array(unit_u, dtype=object)
    factor = 1.0 / scale_u[idx] if idx.size else np.zeros(0)
    offset = np.zeros(idx.size)
    if units is not None and idx.size:
        uenc = _one_chunk(pc.dictionary_encode(pc.fill_null(units, "")))
        names = uenc.dictionary.to_pylist()
        uidx = uenc.indices.to_numpy(zero_copy_only=False)
        ucanon = np.array([UNITS.get(n, ("?", 1.0))[0] for n in names], dtype=object)
        ufac = np.array([UNITS.get(n, ("?", 1.0))[1] for n in names])
        uoff = np.array([UNIT_OFFSETS.get(n, 0.0) for n in names])
        own = ucanon[uidx] == canon_u[idx]
        factor = np.where(own, ufac[uidx], factor)
        offset = np.where(own, uoff[uidx], 0.0)
    return factor, offset


def parse_bms_messages(msgs: list[tuple[str, bytes, int]], source: str, site_prefix: str = "bms/") -> Parsed:
    """MQTT BMS messages (topic, payload, receipt time in us): JSON {value, unit, timestamp,
    quality}. A payload that is not such an object is counted malformed."""
    ts, pts, vals, units, stat, offs = [], [], [], [], [], []
    malformed = 0
    for topic, payload, recv_us in msgs:
        try:
            d = json.loads(payload)
            if not isinstance(d, dict):
                raise ValueError
        except (ValueError, RecursionError):
            malformed += 1
            continue
        parts = topic.split("/", 2)
        pts.append(parts[2] if len(parts) == 3 and parts[0] + "/" == site_prefix else topic)
        ts.append(d.get("timestamp") if isinstance(d.get("timestamp"), str) else None)
        v = d.get("value")
        vals.append(
            None
            if isinstance(v, bool) or not isinstance(v, (int, float))
            else repr(float(v)).replace("inf", "inf")
        )
        units.append(str(d.get("unit", ""))[:32])
        stat.append(str(d.get("quality", "good"))[:32])
        tu = iso_us(ts[-1])
        if tu is not None:
            offs.append((recv_us - tu) / 1e6)
    p = _bms_table(
        pa.array(ts, pa.string()),
        pa.array(pts, pa.string()),
        pa.array(vals, pa.string()),
        pa.array(units, pa.string()),
        pa.array(stat, pa.string()),
        source,
        "bms",
    )
    p.malformed += malformed
    p.offsets_s = offs
    return p
