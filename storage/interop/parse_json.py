"""JSON documents (neuron-monitor, Redfish, Slurm) -> observed samples, by walking their
structure (one Python step per entity, not per sample where the format groups samples)."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pyarrow as pa

from storage.interop.mapping import BY_NAME, FIELDS, JOB_STATES, Field
from storage.interop.parsed import (
    MAX_LABEL_CHARS,
    Parsed,
    empty,
    iso_us,
    observed_table,
    to_canonical,
)


# ---------------------------------------------------------------------- JSON documents
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
        v, unit = to_canonical(f, np.asarray(raw))
        self.t.extend([t] * len(raw))
        self.e.extend([entity] if len(raw) == 1 else [f"{entity}{i}" for i in range(len(raw))])
        self.m.extend([f.quantity] * len(raw))
        self.v.extend(v.tolist())
        self.u.extend([unit] * len(raw))

    def table(self, source: str) -> pa.Table:
        return observed_table(self.t, self.e, self.m, self.v, self.u, source)


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
            t = iso_us(doc.get("timestamp")) or now_us
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
            v_l.append(to_canonical(f, raw)[0] if len(raw) else np.array([]))
    if not v_l:
        return Parsed(empty(), "neuron-monitor", unmapped, malformed)
    v = np.concatenate(v_l) if v_l else np.array([])
    units = [BY_NAME[m].unit for ms in m_l for m in ms]
    ents = [e for es in e_l for e in es]
    mets = [m for ms in m_l for m in ms]
    tab = observed_table(np.concatenate(t_l), ents, mets, v, units, source)
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
            t = iso_us(((doc.get("Oem") or {}).get("Twin") or {}).get("Timestamp")) or now_us
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
