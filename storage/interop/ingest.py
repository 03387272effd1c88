"""Real telemetry -> observed samples (time, entity, metric, value, unit, source, quality).

Every parser maps a format's fields to the twin's quantities through the mapping table
(``storage.interop.mapping``) and returns an Arrow table of ``OBSERVED``'s columns plus the count
of samples whose field the twin does not map (counted, never fatal) and of lines it could not
read. Parsing is vectorised: the Prometheus text and CSV with Arrow's compute kernels over all
lines at once, JSON documents by walking their structure (one Python step per entity, not per
sample where the format groups samples, as neuron-monitor's per-core maps do).

``normalise`` then brings a batch to the recording's terms: units to the quantity's canonical
unit, counters to rates (a drop is a reset: the rate restarts from the new value), exact
duplicates dropped, series sorted by time, and a quality per sample:

    good         as read
    invalid      NaN or infinite (value NULL)
    clock        time more than ``FAR_S`` from the ingest's clock (far past or future)
    gap          more than ``GAP_FACTOR`` sampling intervals after the series' previous sample
    rate         a counter's rate over the interval before it
    reset        a counter's rate right after a reset
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.interop.mapping import BY_NAME, FIELDS, JOB_STATES, UNIT_OFFSETS, UNITS, Field

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


def _by_field(fmt: str) -> dict[str, Field]:
    out: dict[str, Field] = {}
    for f in FIELDS:
        if f.fmt == fmt:
            out.setdefault(f.field, f)
    return out


def _table(
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


def _to_canonical(f: Field, raw: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], str]:
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


# ---------------------------------------------------------------------- Prometheus text
_LABEL = r'(?:^|,)\s*{0}="(?P<v>(?:[^"\\]|\\.)*)"'
# A sample line: name{labels} value [timestamp], single blanks (as exporters write it); a label
# value holding "}" or a line of other blanks does not match and is counted malformed.
_LINE = r"^(?P<name>[^{ ]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>[^ ]+)(?: (?P<ts>[^ ]+))?$"
_NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
_VALUE = r"^[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|NaN|Inf|inf)$"
_TS = r"^(?:-?[0-9]{1,16})?$"


def _label(labels: pa.Array, name: str) -> pa.Array:
    """The value of label ``name`` in each labels text (null where absent), by Arrow's regex."""
    s = pc.extract_regex(labels, _LABEL.format(re.escape(name)))
    return pc.struct_field(s, [0])


def parse_prometheus_text(text: str, source: str, now_us: int) -> Parsed:
    """Prometheus / OpenMetrics text exposition (a DCGM exporter's, kube-state-metrics', a
    scrape saved to a file). Samples without a timestamp get ``now_us``.

    One regular-expression kernel over every line gives the samples' columns; everything after
    it is Arrow and NumPy over those columns: the names and label sets are each worked out once
    per distinct value (a handful of names; a label set per chip) and taken back to the rows."""
    # The lines without a Python string each: Arrow splits the text.
    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten().cast(pa.string())
    skip = pc.or_(pc.equal(lines, ""), pc.starts_with(lines, "#"))
    # The line's shape (a regular expression without alternatives: the fast path of the regex
    # engine), then its parts checked on their own, short, strings.
    m = pc.extract_regex(lines, _LINE)
    names, labels, values, ts = (pc.fill_null(pc.struct_field(m, [k]), "") for k in range(4))
    ok = pc.and_kleene(
        pc.and_kleene(pc.is_valid(m), pc.match_substring_regex(names, _NAME)),
        pc.and_kleene(pc.match_substring_regex(values, _VALUE), pc.match_substring_regex(ts, _TS)),
    )
    ok = pc.fill_null(ok, False)
    n_ok = int(pc.sum(ok.cast(pa.int64())).as_py() or 0)
    malformed = len(lines) - n_ok - int(pc.sum(pc.and_not(skip, ok).cast(pa.int64())).as_py() or 0)
    if not n_ok:
        return Parsed(empty(), "prometheus-text", 0, malformed)
    # The label sets as codes before filtering: only the codes (not the long texts) are copied.
    lcode = labels.dictionary_encode()
    lidx = lcode.indices
    if n_ok < len(lines):
        names, values, ts, lidx = (a.filter(ok) for a in (names, values, ts, lidx))
    byf = {**_by_field("dcgm"), **_by_field("kube-state-metrics")}
    ncode = names.dictionary_encode()
    dnames = ncode.dictionary.to_pylist()
    nidx = ncode.indices.to_numpy(zero_copy_only=False)
    fields = [byf.get(n) for n in dnames]
    known = np.array([f is not None for f in fields], dtype=bool)
    counts = np.bincount(nidx, minlength=len(dnames))
    unmapped_names = {
        n: int(c) for n, c, k in zip(dnames, counts.tolist(), known.tolist(), strict=True) if not k
    }
    keep = known[nidx]
    sel = pa.array(keep)
    nidx = nidx[keep]
    lidx, values, ts = lidx.filter(sel), values.filter(sel), ts.filter(sel)
    # Per name: how its values become the quantity's (linear: / scale; flag: > 0; counter: x
    # the unit's factor, a rate later), its metric and unit, and where its entity comes from.
    per = [
        (
            (_to_canonical(f, np.array([1.0]))[0][0], f.codec, f.fmt == "dcgm")
            if f is not None
            else (1.0, "linear", True)
        )
        for f in fields
    ]
    factor = np.array([p[0] for p in per])[nidx]
    flag = np.array([p[1] == "flag" for p in per])[nidx]
    is_dcgm = np.array([p[2] for p in per])[nidx]
    metric_of = pa.array(
        [BY_NAME[f.quantity].name + (".counter" if f.codec == "counter" else "") if f else "" for f in fields]
    )
    unit_of = pa.array([_to_canonical(f, np.array([1.0]))[1] if f else "" for f in fields])
    take = pa.array(nidx)
    # Entities: once per distinct label set.
    uniq = lcode.dictionary
    host = pc.fill_null(_label(uniq, "Hostname"), "host")
    gpu = pc.fill_null(_label(uniq, "gpu"), "0")
    ent_dcgm = pc.binary_join_element_wise(host, pc.binary_join_element_wise("chip", gpu, ""), "/")
    ent_ksm = pc.fill_null(_label(uniq, "job_name"), "job")
    entity = pc.if_else(pa.array(is_dcgm), pc.take(ent_dcgm, lidx), pc.take(ent_ksm, lidx))
    entity = pc.utf8_slice_codeunits(entity, 0, MAX_LABEL_CHARS)
    has_ts = pc.not_equal(ts, "")
    t_ms = pc.if_else(
        has_ts, pc.cast(pc.if_else(has_ts, ts, "0"), pa.int64()), pa.scalar(now_us // 1000, pa.int64())
    )
    time_us = pc.multiply(t_ms, 1000).to_numpy(zero_copy_only=False)
    raw = pc.cast(pc.replace_substring(values, "Inf", "inf"), pa.float64()).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore", over="ignore"):
        v = np.where(flag, (raw > 0).astype(np.float64), raw * factor)
        # kube-state-metrics' times are the samples' times.
        time_us = np.where(~is_dcgm & np.isfinite(v), v * 1e6, time_us).astype(np.int64)
    table = _table(time_us, entity, pc.take(metric_of, take), v, pc.take(unit_of, take), source)
    return Parsed(table, "prometheus-text", sum(unmapped_names.values()), int(malformed), unmapped_names)


# ---------------------------------------------------------------------- JSON documents
def _iso_us(s: Any) -> int | None:
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


def _num(x: Any) -> float:
    if isinstance(x, bool) or x is None:
        return math.nan
    if isinstance(x, dict) and "number" in x:  # Slurm's {set, infinite, number}
        return _num(x["number"]) if x.get("set", True) and not x.get("infinite") else math.nan
    if isinstance(x, (int, float)):
        try:
            return float(x)
        except OverflowError:  # an integer beyond any float
            return math.nan
    return math.nan


class _Rows:
    def __init__(self) -> None:
        self.t: list[int] = []
        self.e: list[str] = []
        self.m: list[str] = []
        self.v: list[float] = []
        self.u: list[str] = []
        self.unmapped = 0
        self.malformed = 0

    def add(self, f: Field, t: int, entity: str, raw: list[float]) -> None:
        v, unit = _to_canonical(f, np.asarray(raw))
        self.t.extend([t] * len(raw))
        self.e.extend([entity] if len(raw) == 1 else [f"{entity}{i}" for i in range(len(raw))])
        self.m.extend([f.quantity] * len(raw))
        self.v.extend(v.tolist())
        self.u.extend([unit] * len(raw))

    def table(self, source: str) -> pa.Table:
        return _table(self.t, self.e, self.m, self.v, self.u, source)


_NEURON_TOP = ("timestamp", "neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info")


def parse_neuron_monitor(docs: list[dict[str, Any]], source: str, now_us: int) -> Parsed:
    fu = next(f for f in FIELDS if f.fmt == "neuron-monitor" and f.quantity == "chip.utilization")
    ff = next(f for f in FIELDS if f.fmt == "neuron-monitor" and f.quantity == "chip.failed")
    t_l: list[np.ndarray[Any, Any]] = []
    e_l: list[list[str]] = []
    m_l: list[list[str]] = []
    v_l: list[np.ndarray[Any, Any]] = []
    unmapped = malformed = 0
    for doc in docs:
        try:
            t = _iso_us(doc.get("timestamp")) or now_us
            inst = doc.get("instance_info") or {}
            host = str(inst.get("instance_id") or inst.get("instance_name") or "host")[:MAX_LABEL_CHARS]
            parts: list[tuple[Field, list[str], np.ndarray[Any, Any]]] = []
            for rt in doc.get("neuron_runtime_data") or []:
                rep = (rt or {}).get("report") or {}
                unmapped += sum(1 for k in rep if k != "neuroncore_counters")
                cores = ((rep.get("neuroncore_counters") or {}).get("neuroncores_in_use")) or {}
                keys = [str(k)[:16] for k in cores if str(k).isdigit()]
                raw = np.array([_num((cores[k] or {}).get("neuroncore_utilization")) for k in keys])
                parts.append((fu, keys, raw))
            sysd = doc.get("system_data") or {}
            unmapped += sum(1 for k in sysd if k != "neuron_hw_counters")
            devs = (sysd.get("neuron_hw_counters") or {}).get("neuron_devices") or []
            devs = [d for d in devs if isinstance(d, dict) and isinstance(d.get("neuron_device_index"), int)]
            parts.append(
                (
                    ff,
                    [str(d["neuron_device_index"]) for d in devs],
                    np.array([_num(d.get("mem_ecc_uncorrected")) for d in devs]),
                )
            )
            unmapped += sum(1 for k in doc if k not in _NEURON_TOP)
        except (AttributeError, TypeError, ValueError):  # a document of the wrong shape
            malformed += 1
            continue
        for f, keys, raw in parts:
            t_l.append(np.full(len(keys), t))
            e_l.append([f"{host}/chip{k}" for k in keys])
            m_l.append([f.quantity] * len(keys))
            v_l.append(_to_canonical(f, raw)[0] if len(raw) else np.array([]))
    if not v_l:
        return Parsed(empty(), "neuron-monitor", unmapped, malformed)
    v = np.concatenate(v_l) if v_l else np.array([])
    units = [BY_NAME[m].unit for ms in m_l for m in ms]
    ents = [e for es in e_l for e in es]
    mets = [m for ms in m_l for m in ms]
    tab = _table(np.concatenate(t_l), ents, mets, v, units, source)
    return Parsed(tab, "neuron-monitor", unmapped, malformed)


_REDFISH_LEAF = re.compile(
    r"/redfish/v1/(Chassis|PowerEquipment/RackPDUs|ThermalEquipment/CDUs)/([^/]+)/(.+)$"
)


def parse_redfish(docs: list[dict[str, Any]], source: str, now_us: int) -> Parsed:
    """Redfish resources (each with its ``@odata.id``): the mapped readings of each."""
    rows = _Rows()
    fields = [f for f in FIELDS if f.fmt == "redfish"]
    for doc in docs:
        try:
            oid = str(doc.get("@odata.id", ""))
            m = _REDFISH_LEAF.search(oid.split("#")[0])
            if not m:
                continue
            entity, rest = m.group(2)[:MAX_LABEL_CHARS], m.group(3)
            t = _iso_us(((doc.get("Oem") or {}).get("Twin") or {}).get("Timestamp")) or now_us
            hit = False
            for f in fields:
                path, _, prop = f.field.partition("#")
                if not path.endswith("/" + rest) or path.split("/")[0] != m.group(1).split("/")[0]:
                    continue
                x: Any = doc
                for part in prop.split("."):
                    idx = re.fullmatch(r"(\w+)\[(\d+)\]", part)
                    if idx:
                        lst = x.get(idx.group(1)) if isinstance(x, dict) else None
                        x = (
                            lst[int(idx.group(2))]
                            if isinstance(lst, list) and len(lst) > int(idx.group(2))
                            else None
                        )
                    else:
                        x = x.get(part) if isinstance(x, dict) else None
                if x is not None:
                    rows.add(f, t, entity, [_num(x)])
                    hit = True
            if not hit:
                rows.unmapped += 1
        except (AttributeError, TypeError, ValueError, IndexError):  # the wrong shape
            rows.malformed += 1
    return Parsed(rows.table(source), "redfish", rows.unmapped, rows.malformed)


def parse_slurm(doc: dict[str, Any], source: str, now_us: int) -> Parsed:
    rows = _Rows()
    byq = {f.quantity: f for f in FIELDS if f.fmt == "slurm"}
    t = now_us
    jobs = doc.get("jobs")
    jobs = [] if jobs is None else jobs
    if not isinstance(jobs, list):  # the document's shape is wrong: nothing to read in it
        rows.malformed += 1
        jobs = []
    for j in jobs:
        try:
            if not isinstance(j, dict) or not isinstance(j.get("job_id"), int):
                rows.unmapped += 1
                continue
            ent = f"job{j['job_id']}"
            tm = j.get("time") or {}
            vals = {
                "job.submit_time": tm.get("submission", j.get("submit_time")),
                "job.start_time": tm.get("start", j.get("start_time")),
                "job.end_time": tm.get("end", j.get("end_time")),
            }
            for q, raw in vals.items():
                x = _num(raw)
                if math.isfinite(x) and x > 0:
                    rows.add(byq[q], t, ent, [x])
            alloc = (j.get("tres") or {}).get("allocated") or []
            chips = [a.get("count") for a in alloc if isinstance(a, dict) and a.get("type") == "gres"]
            if chips:
                rows.add(byq["job.chips"], t, ent, [_num(chips[0])])
            st = (
                (j.get("state") or {}).get("current")
                if isinstance(j.get("state"), dict)
                else j.get("job_state")
            )
            if isinstance(st, list) and st and st[0] in JOB_STATES:
                rows.add(byq["job.state"], t, ent, [float(JOB_STATES.index(st[0]))])
            rows.unmapped += sum(
                1
                for k in j
                if k
                not in (
                    "job_id",
                    "time",
                    "tres",
                    "state",
                    "job_state",
                    "name",
                    "partition",
                    "nodes",
                    "submit_time",
                    "start_time",
                    "end_time",
                )
            )
        except (AttributeError, TypeError, ValueError, IndexError):  # the wrong shape
            rows.malformed += 1
    return Parsed(rows.table(source), "slurm", rows.unmapped, rows.malformed)


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
    ts = pa.chunked_array([ts]) if isinstance(ts, pa.Array) else ts
    t = pc.strptime(
        pc.replace_substring(pc.fill_null(ts, ""), "Z", "+0000"),
        format="%Y-%m-%dT%H:%M:%S%z",
        unit="us",
        error_is_null=True,
    )
    bad_t = pc.is_null(t).combine_chunks() if isinstance(t, pa.ChunkedArray) else pc.is_null(t)
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
    exact, pats = _point_index()
    enc = _one_chunk(pc.dictionary_encode(pc.fill_null(point, "")))
    uniq = enc.dictionary.to_pylist()
    idx = enc.indices.to_numpy(zero_copy_only=False)
    # One step per distinct point, not per sample: its field, entity, metric and the field's factor.
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
    known = np.array([f is not None for f in fld], dtype=bool)
    k_row = known[idx] if idx.size else np.zeros(0, dtype=bool)
    bad_np = bad_t.to_numpy(zero_copy_only=False) if len(bad_t) else np.zeros(0, dtype=bool)
    mapped = k_row & ~bad_np
    unmapped_n = int((~k_row).sum())
    malformed = int((bad_np & k_row).sum())
    raw = vals.to_numpy(zero_copy_only=False).astype(np.float64)
    # The value in the quantity's unit: by the row's own unit when it names one of the quantity's
    # (a BMS that reports W where the table says kW), else by the field's scale.
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
    flag = np.array([bool(f and f.codec == "flag") for f in fld])[idx] if idx.size else np.zeros(0, bool)
    value = np.where(flag, (raw > 0).astype(np.float64), raw * factor + offset)
    sel = pa.array(mapped)
    take = pa.array(idx[mapped])
    qual: Any = "good"
    if status is not None:
        st = pc.fill_null(status, "good").filter(sel)
        qual = pc.if_else(pc.equal(st, "good"), "good", "source_bad")
    tab = _table(
        t.filter(sel).cast(pa.int64()).to_numpy(zero_copy_only=False),
        pc.take(pa.array(ent_u, pa.string()), take),
        pc.take(pa.array(met_u, pa.string()), take),
        value[mapped],
        pc.take(pa.array(unit_u, pa.string()), take),
        source,
        qual,
    )
    return Parsed(tab, fmt, int(unmapped_n), int(malformed))


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
        tu = _iso_us(ts[-1])
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


# ---------------------------------------------------------------------- sniffing
def sniff(data: bytes) -> str:
    """The format of a file's content: neuron-monitor, redfish, slurm (JSON), prometheus-text,
    bms-csv. ``IngestError`` when it is none of them."""
    head = data[:4096].lstrip()
    if head.startswith(b"{") or head.startswith(b"["):
        if b'"neuron_runtime_data"' in data[: 1 << 20] or b'"neuron_hardware_info"' in data[: 1 << 20]:
            return "neuron-monitor"
        if b'"@odata.id"' in head:
            return "redfish"
        if b'"jobs"' in data[: 1 << 20]:
            return "slurm"
        raise IngestError("JSON of no known format (not neuron-monitor, Redfish or Slurm)")
    first = head.split(b"\n", 1)[0].strip()
    if first.lower().startswith(b"timestamp,point,value"):
        return "bms-csv"
    if (
        head.startswith(b"# HELP")
        or head.startswith(b"# TYPE")
        or re.match(rb"[a-zA-Z_:][a-zA-Z0-9_:]*(\{|[ \t])", head)
    ):
        return "prometheus-text"
    raise IngestError(
        "not a known telemetry format (neuron-monitor, Redfish, Slurm JSON, Prometheus text, BMS CSV)"
    )


def parse_bytes(data: bytes, source: str, now_us: int, fmt: str | None = None) -> Parsed:
    """Parse a file's content by its sniffed format (or ``fmt``: a later chunk of a text file
    whose format its start told); ``IngestError`` naming ``source`` otherwise."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise IngestError(
            f"{source}: {len(data):,} bytes, above the {MAX_DOCUMENT_BYTES:,}-byte limit of one document"
        )
    try:
        fmt = fmt or sniff(data)
    except IngestError as e:
        if data.lstrip()[:1] in (b"{", b"["):  # JSON of no known format, or no JSON at all
            _json_docs(data.decode("utf-8", "replace"), source)
        raise IngestError(f"{source}: {e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise IngestError(f"{source}: not UTF-8 text (byte {e.start})") from None
    if fmt == "prometheus-text":
        return parse_prometheus_text(text, source, now_us)
    if fmt == "bms-csv":
        return parse_bms_csv(text, source)
    docs = _json_docs(text, source)
    if fmt == "neuron-monitor":
        return parse_neuron_monitor(docs, source, now_us)
    if fmt == "redfish":
        return parse_redfish(docs, source, now_us)
    if len(docs) != 1:
        raise IngestError(f"{source}: a Slurm document is one JSON object")
    return parse_slurm(docs[0], source, now_us)


def _json_docs(text: str, source: str) -> list[dict[str, Any]]:
    """One JSON document, a list of them, or one a line (neuron-monitor's stream)."""
    try:
        doc = json.loads(text, parse_constant=lambda c: None)
        docs = doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError as e:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) < 2:
            raise IngestError(
                f"{source}: malformed JSON (line {e.lineno}, column {e.colno}: {e.msg})"
            ) from None
        docs = []
        for i, ln in enumerate(lines, 1):
            try:
                docs.append(json.loads(ln, parse_constant=lambda c: None))
            except json.JSONDecodeError as e2:
                raise IngestError(f"{source}: malformed JSON on line {i} ({e2.msg})") from None
    except RecursionError:
        raise IngestError(f"{source}: JSON nested too deeply") from None
    bad = [d for d in docs if not isinstance(d, dict)]
    if bad:
        raise IngestError(f"{source}: a document is a JSON {type(bad[0]).__name__}, not an object")
    return docs


# ---------------------------------------------------------------------- normalising
@dataclass
class Normalised:
    table: pa.Table
    duplicates: int = 0
    invalid: int = 0
    clock: int = 0
    gaps: int = 0
    resets: int = 0


def _codes(col: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, Any]:
    """Integer codes of a string column's values (equal values, equal codes), without copying
    the strings of a column of several chunks."""
    if isinstance(col, pa.Array):
        return np.asarray(pc.dictionary_encode(col).indices.to_numpy(zero_copy_only=False))
    if col.num_chunks == 1:
        return np.asarray(pc.dictionary_encode(col.chunk(0)).indices.to_numpy(zero_copy_only=False))
    enc = pc.dictionary_encode(col).unify_dictionaries()
    return np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in enc.chunks])


def normalise(tab: pa.Table, now_us: int) -> Normalised:
    """Sort each series by time, drop exact duplicates, flag the samples (module doc) and turn
    counters (metric ``*.counter``) into rates. Vectorised over the whole batch."""
    if not len(tab):
        return Normalised(tab)
    # Series together, each in time order: a sort by the codes of entity and metric (their order
    # of appearance: grouping needs no alphabet) and time.
    key_e, key_m = _codes(tab.column("entity")), _codes(tab.column("metric"))
    t = tab.column("time").cast(pa.int64()).to_numpy()
    order = np.lexsort((t, key_m, key_e))
    if not (order[1:] > order[:-1]).all():
        tab, key_e, key_m, t = tab.take(pa.array(order)), key_e[order], key_m[order], t[order]
    v = tab.column("value").to_numpy(zero_copy_only=False).astype(np.float64)
    same_series = np.r_[False, (key_e[1:] == key_e[:-1]) & (key_m[1:] == key_m[:-1])]
    dup = same_series & np.r_[False, t[1:] == t[:-1]]
    if dup.any():
        keep = ~dup
        tab, t, v, same_series = tab.filter(pa.array(keep)), t[keep], v[keep], same_series[keep]
    invalid = ~np.isfinite(v)
    far = np.abs(t - now_us) > FAR_S * 1_000_000
    dt = np.r_[0, np.diff(t)].astype(np.float64)
    dt[~same_series] = np.nan
    # A gap: longer than GAP_FACTOR x the series' median interval.
    sid = np.cumsum(~same_series) - 1
    med = np.full(int(sid.max()) + 1 if sid.size else 0, np.nan)
    finite_dt = np.isfinite(dt)
    if finite_dt.any():
        order = np.lexsort((dt[finite_dt], sid[finite_dt]))
        s_sid = sid[finite_dt][order]
        s_dt = dt[finite_dt][order]
        starts = np.r_[0, np.flatnonzero(np.diff(s_sid)) + 1]
        counts = np.diff(np.r_[starts, s_sid.size])
        med[s_sid[starts]] = s_dt[starts + counts // 2]
    with np.errstate(invalid="ignore"):
        gap = finite_dt & (dt > GAP_FACTOR * np.where(np.isnan(med[sid]), np.inf, med[sid]))
    metric = tab.column("metric").combine_chunks()
    is_counter = pc.ends_with(metric, ".counter").to_numpy(zero_copy_only=False)
    reset = np.zeros(len(v), dtype=bool)
    keep2 = np.ones(len(v), dtype=bool)
    if is_counter.any():
        dv = np.r_[np.nan, np.diff(v)]
        reset = is_counter & same_series & (dv < 0)
        inc = np.where(reset, v, dv)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = inc / (dt / 1e6)
        v = np.where(is_counter, rate, v)
        keep2 = ~(is_counter & ~same_series)  # a counter's first sample has no rate
        metric = pc.replace_substring(metric, ".counter", "")
    quality = tab.column("quality").combine_chunks()
    good = pc.equal(quality, "good").to_numpy(zero_copy_only=False)
    for mask, word in (
        (good & is_counter, "rate"),
        (good & gap, "gap"),
        (reset, "reset"),
        (far, "clock"),
        (~np.isfinite(v) | invalid, "invalid"),
    ):
        if mask.any():
            quality = pc.if_else(pa.array(mask), pa.scalar(word), quality)
    unit = tab.column("unit").combine_chunks()
    if is_counter.any():
        names = pc.unique(metric).to_pylist()
        canon = pa.array([BY_NAME[n].unit if n in BY_NAME else "" for n in names], pa.string())
        idx = pc.index_in(metric, pa.array(names, pa.string()))
        unit = pc.if_else(pa.array(is_counter), pc.take(canon, idx), unit)
    fin = np.isfinite(v)
    val = pa.array(np.where(fin, v, 0.0), mask=~fin)
    tab = tab.set_column(tab.schema.get_field_index("value"), "value", val)
    tab = tab.set_column(tab.schema.get_field_index("metric"), "metric", metric)
    tab = tab.set_column(tab.schema.get_field_index("unit"), "unit", unit)
    tab = tab.set_column(tab.schema.get_field_index("quality"), "quality", quality)
    if not keep2.all():
        tab = tab.filter(pa.array(keep2))
    k = keep2
    return Normalised(
        tab,
        int(dup.sum()),
        int((~fin & k).sum()),
        int((far & fin & k).sum()),
        int((gap & k).sum()),
        int(reset.sum()),
    )


def csv_escape(s: str) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow([s])
    return buf.getvalue().strip()


_CARRY = "\x00carry"  # the source of a counter's previous sample carried into the next batch


class Normaliser:
    """``normalise`` over a stream of batches: a counter's last sample is carried into the next
    batch, so its rate over the boundary is not lost (the first sample of a series is the only
    one without a rate)."""

    def __init__(self) -> None:
        self._last: pa.Table | None = None

    def __call__(self, tab: pa.Table, now_us: int) -> Normalised:
        carried = self._last is not None and len(self._last) > 0
        if carried:
            tab = pa.concat_tables([self._last, tab])
        raw = tab
        n = normalise(tab, now_us)
        # A carried sample is the first of its series (dropped as such) unless the batch went
        # back in time: then it is taken out here.
        if carried and pc.any(pc.equal(n.table.column("source"), _CARRY)).as_py():
            n.table = n.table.filter(pc.not_equal(n.table.column("source"), _CARRY))
        self._last = _last_counters(raw)
        return n


def _last_counters(tab: pa.Table) -> pa.Table | None:
    """The latest raw sample of every counter series of ``tab`` (source marked carried)."""
    if not len(tab):
        return None
    is_c = pc.ends_with(tab.column("metric"), ".counter")
    c = tab.filter(is_c)
    if not len(c):
        return None
    e, m = _codes(c.column("entity")), _codes(c.column("metric"))
    t = c.column("time").cast(pa.int64()).to_numpy()
    order = np.lexsort((t, m, e))
    e, m = e[order], m[order]
    last = np.r_[(e[1:] != e[:-1]) | (m[1:] != m[:-1]), True]
    out = c.take(pa.array(order[last]))
    return out.set_column(
        out.schema.get_field_index("source"), "source", pa.repeat(pa.scalar(_CARRY), len(out))
    )
