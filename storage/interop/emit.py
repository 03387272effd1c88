"""The twin's recorded frames in the formats of a real floor (``storage.interop.mapping``).

``FloorState.update(frames)`` takes each commit's frames (the runner's ``on_chunk`` hook, as the
metrics endpoint does) and keeps the latest step of every entity, the jobs by id and the chips'
energy counters. The renderers turn it into documents:

    prometheus_text(state)       DCGM exporter series per chip, kube-state-metrics job series
    neuron_reports(state, t)     one neuron-monitor report per UltraServer (a Trainium server)
    redfish(state, path)         (``storage.interop.emit_redfish``) the Redfish resource at ``path``
    slurm_sacct(state), slurm_squeue(state)
    bms_points(state, t)         (topic, payload) of every BMS point

Every field name, unit, scale and rounding comes from the mapping table. The sinks that keep a
history (files, the MQTT broker) get every recorded step; the HTTP endpoints serve the latest.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from storage.interop.mapping import (
    FLAG_VALUES,
    TWIN_JOB_STATES,
    Field,
    fields,
    quantity,
)
from storage.schema import DEFAULT_START

Arr = np.ndarray[Any, Any]
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def field_of(fmt: str, qty: str, codec: str | None = None) -> Field:
    """The field of ``fmt`` that carries ``qty`` (the first; with ``codec``, the one of it)."""
    for f in fields(fmt):
        if f.quantity == qty and codec in (None, f.codec):
            return f
    raise KeyError(f"{fmt} has no {codec} field for {qty}")


def encode(f: Field, v: Arr) -> Arr:
    """Twin values -> the format's values (scale or flag, then the format's rounding)."""
    x = np.asarray(v, dtype=np.float64)
    if f.codec == "flag":
        return np.where(x > 0, FLAG_VALUES.get(f.fmt, 1.0), 0.0)
    y = x * f.scale
    return np.round(y, f.decimals) if f.decimals is not None else y


def encode1(f: Field, v: float) -> float:
    """``encode`` of one value (no array: a point at a time is cheaper in plain floats)."""
    x = float(v)
    if f.codec == "flag":
        return FLAG_VALUES.get(f.fmt, 1.0) if x > 0 else 0.0
    y = x * f.scale
    return round(y, f.decimals) if f.decimals is not None and math.isfinite(y) else y


def _num(x: float) -> str:
    """A Prometheus text value (NaN and infinities as the format spells them)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


def _json_num(x: float, decimals: int | None) -> float | int | None:
    """A JSON number (None for a non-finite value: JSON has none)."""
    if not math.isfinite(x):
        return None
    if decimals == 0:
        return int(round(x))
    return float(x)


class FloorState:
    """The latest step of every entity the formats report, from the run's frames."""

    def __init__(self, start: _dt.datetime = DEFAULT_START, system: str = "trainium3") -> None:
        self.start = start
        self.system = system
        self.time_s: int | None = None
        self.factory: dict[str, float] = {}
        self.us: dict[str, Arr] = {}
        self.rows: dict[str, Arr] = {}
        self.chips: dict[str, Arr] = {}
        self.jobs: dict[int, dict[str, Any]] = {}
        self.chips_t: int | None = None  # the step of the latest chip sample (chip_ts is sampled)
        self._energy_mj = np.zeros(0)  # by chip id: cumulative energy (the DCGM counter), mJ
        self._chip_t = np.zeros(0, dtype=np.int64)  # by chip id: time of its last sample (-1: none)
        self.version = 0

    def unix(self, time_s: float) -> float:
        return (self.start - _EPOCH).total_seconds() + float(time_s)

    def iso(self, time_s: float) -> str:
        return (self.start + _dt.timedelta(seconds=float(time_s))).isoformat().replace("+00:00", "Z")

    # ------------------------------------------------------------------ feeding
    def steps(self, frames: dict[str, dict[str, Any]], every: bool = True) -> Iterator[FloorState]:
        """Take a commit's frames one recorded step at a time, yielding the state after each
        (for the sinks that keep a history). ``every=False``: only the steps the state needs
        (the chip samples, for the energy counters, and the last step)."""
        index = {
            t: _by_time(frames.get(t, {})) for t in ("factory_ts", "ultraserver_ts", "chip_ts", "row_ts")
        }
        times: set[int] = set()
        for table, ix in index.items():
            if every or table == "chip_ts":
                times.update(ix)
            elif ix:
                times.add(max(ix))
        for step in sorted(times):
            self._take(frames, index, step)
            yield self
        if "jobs" in frames:
            self._take_jobs(frames["jobs"])

    def update(self, frames: dict[str, dict[str, Any]]) -> None:
        for _ in self.steps(frames, every=False):
            pass

    def _take(self, frames: dict[str, dict[str, Any]], index: dict[str, dict[int, Arr]], t: int) -> None:
        def at(table: str, cols: tuple[str, ...]) -> dict[str, Arr] | None:
            rows = index[table].get(t)
            if rows is None:
                return None
            fr = frames[table]
            return {c: np.asarray(fr[c])[rows] for c in cols if c in fr}

        fac = frames.get("factory_ts", {})
        idx = index["factory_ts"].get(t)
        if idx is not None:
            i = int(idx[-1])
            self.factory = {
                c: float(np.asarray(v)[i]) for c, v in fac.items() if c != "time_s" and _numeric(v)
            }
        us = at(
            "ultraserver_ts",
            (
                "ultraserver_id",
                "row_id",
                "power_w",
                "max_chip_temp_c",
                "coolant_return_c",
                "cdu_flow_fraction",
            ),
        )
        if us is not None:
            self.us = us
        rows = at("row_ts", ("row_id", "power_w"))
        if rows is not None:
            self.rows = rows
        chips = at(
            "chip_ts",
            (
                "chip_id",
                "ultraserver_id",
                "neuroncore_utilization",
                "chip_power_w",
                "t_junction_c",
                "clock",
                "failed",
            ),
        )
        if chips is not None:
            self.chips = self._with_local(chips, t)
            self.chips_t = t
        self.time_s = t
        self.version += 1

    def _with_local(self, c: dict[str, Arr], t: int) -> dict[str, Arr]:
        """Chip index within its UltraServer (chip-id order) and the DCGM energy counter: the
        chip's power times the time since its last sample, added up (so the counter's rate over a
        sample interval is the power at its end)."""
        cid = c["chip_id"].astype(np.int64)
        us = c["ultraserver_id"].astype(np.int64)
        order = np.lexsort((cid, us))
        local = np.empty_like(cid)
        s_us = us[order]
        first = np.r_[0, np.flatnonzero(np.diff(s_us)) + 1]
        starts = np.repeat(first, np.diff(np.r_[first, s_us.size]))
        local[order] = np.arange(s_us.size) - starts
        c["local"] = local
        # Per chip id (dense, from 0): the energy so far and the time of the last sample.
        if cid.size and int(cid.max()) >= self._energy_mj.size:
            grow = int(cid.max()) + 1 - self._energy_mj.size
            self._energy_mj = np.r_[self._energy_mj, np.zeros(grow)]
            self._chip_t = np.r_[self._chip_t, np.full(grow, -1, dtype=np.int64)]
        power = np.asarray(c["chip_power_w"], dtype=np.float64)
        prev = self._chip_t[cid]
        add = np.where((prev >= 0) & np.isfinite(power), power * (t - prev) * 1e3, 0.0)
        self._energy_mj[cid] += add
        self._chip_t[cid] = t
        energy = self._energy_mj[cid].copy()
        c["energy_mj"] = energy
        return c

    def _take_jobs(self, jobs: dict[str, Any]) -> None:
        ids = np.asarray(jobs.get("job_id", ()))
        for i, jid in enumerate(ids.tolist()):
            self.jobs[int(jid)] = {k: (v[i] if len(v) else None) for k, v in jobs.items()}
        self.version += 1


def _by_time(fr: dict[str, Any]) -> dict[int, Arr]:
    """A table's row indices by step (rows in their order), from one sort of its times."""
    ts = np.asarray(fr.get("time_s", ()), dtype=np.int64)
    if not ts.size:
        return {}
    order = np.argsort(ts, kind="stable")
    uniq, starts = np.unique(ts[order], return_index=True)
    return {int(u): part for u, part in zip(uniq.tolist(), np.split(order, starts[1:]), strict=True)}


def _numeric(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind in "biuf"


# ---------------------------------------------------------------------- Prometheus text
def _chip_labels(state: FloorState) -> list[str]:
    c = state.chips
    return [
        f'gpu="{k}",UUID="TWIN-chip-{cid}",device="neuron{k}",modelName="{state.system}",Hostname="us{u}"'
        for k, cid, u in zip(
            c["local"].tolist(), c["chip_id"].tolist(), c["ultraserver_id"].tolist(), strict=True
        )
    ]


_DCGM_COLUMNS = {
    "chip.power": "chip_power_w",
    "chip.temperature": "t_junction_c",
    "chip.clock": "clock",
    "chip.utilization": "neuroncore_utilization",
    "chip.failed": "failed",
}


def prometheus_text(state: FloorState) -> str:
    """DCGM exporter series for every chip of the latest sample (labels as the exporter's), and the
    kube-state-metrics job series; no timestamps (Prometheus stamps a scrape as the exporters
    are scraped)."""
    out: list[str] = []
    if state.chips:
        labels = _chip_labels(state)
        for f in fields("dcgm"):
            q = quantity(f.quantity)
            col = _DCGM_COLUMNS[q.name]
            kind = "counter" if f.codec == "counter" else "gauge"
            vals = (
                encode(f, state.chips["energy_mj"]) if f.codec == "counter" else encode(f, state.chips[col])
            )
            out.append(f"# HELP {f.field} {q.description} ({f.unit}).")
            out.append(f"# TYPE {f.field} {kind}")
            out.extend(f"{f.field}{{{lab}}} {_num(v)}" for lab, v in zip(labels, vals.tolist(), strict=True))
    if state.jobs:
        for f in fields("kube-state-metrics"):
            q = quantity(f.quantity)
            out.append(f"# HELP {f.field} {q.description}.")
            out.append(f"# TYPE {f.field} gauge")
            for jid, j in sorted(state.jobs.items()):
                v = j.get(q.column)
                if v is None or (isinstance(v, float) and not math.isfinite(v)) or int(v) < 0:
                    continue
                out.append(f'{f.field}{{namespace="twin",job_name="job{jid}"}} {_num(round(state.unix(v)))}')
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- neuron-monitor
def neuron_reports(state: FloorState) -> list[dict[str, Any]]:
    """One neuron-monitor report per UltraServer at the latest chip sample. The twin models each
    chip as one NeuronCore (its utilisation), index = the chip's index in its UltraServer.
    ``timestamp`` is the twin's addition: neuron-monitor's stream carries none (its reader stamps
    each report as it arrives)."""
    c = state.chips
    if not c or state.chips_t is None or state.chips_t != state.time_s:
        return []
    fu = field_of("neuron-monitor", "chip.utilization")
    ff = field_of("neuron-monitor", "chip.failed")
    util = encode(fu, c["neuroncore_utilization"])
    failed = encode(ff, c["failed"])
    out = []
    for u in np.unique(c["ultraserver_id"]).tolist():
        m = c["ultraserver_id"] == u
        local = c["local"][m].tolist()
        cores = {
            str(k): {"neuroncore_utilization": _json_num(v, fu.decimals)}
            for k, v in zip(local, util[m].tolist(), strict=True)
        }
        devices = [
            {
                "neuron_device_index": k,
                "mem_ecc_corrected": 0,
                "mem_ecc_uncorrected": int(f),
                "sram_ecc_corrected": 0,
                "sram_ecc_uncorrected": 0,
            }
            for k, f in zip(local, failed[m].tolist(), strict=True)
        ]
        out.append(_neuron_report(state, state.iso(state.time_s), u, cores, devices))
    return out


# ---------------------------------------------------------------------- Slurm
def _slurm_job(state: FloorState, jid: int, j: dict[str, Any], squeue: bool) -> dict[str, Any]:
    def t(col: str) -> int:
        v = j.get(col)
        return 0 if v is None or int(v) < 0 else int(round(state.unix(int(v))))

    def num(x: int) -> Any:  # squeue's numbers are {set, infinite, number} objects
        return {"set": x > 0, "infinite": False, "number": x} if squeue else x

    state_name = TWIN_JOB_STATES.get(str(j.get("state")), "PENDING")
    chips = int(j.get("chips") or 0)
    nodes = str(j.get("ultraservers") or "")
    doc: dict[str, Any] = {
        "job_id": jid,
        "name": str(j.get("name") or f"job{jid}"),
        "partition": str(j.get("system") or state.system),
        "nodes": ",".join(f"us{n}" for n in nodes.split(",") if n.strip().isdigit()),
        "tres": {
            "allocated": [{"type": "gres", "name": "neuron", "id": 1001, "count": chips}]
            if t("start_time_s")
            else [],
            "requested": [{"type": "gres", "name": "neuron", "id": 1001, "count": chips}],
        },
    }
    times = {
        "submission": num(t("submit_time_s")),
        "start": num(t("start_time_s")),
        "end": num(t("end_time_s")),
    }
    if squeue:
        doc["job_state"] = [state_name]
        doc.update(
            {"submit_time": times["submission"], "start_time": times["start"], "end_time": times["end"]}
        )
    else:
        doc["state"] = {"current": [state_name], "reason": "None"}
        doc["time"] = times
    return doc


def slurm_sacct(state: FloorState) -> dict[str, Any]:
    """``sacct --json``: every job the run has recorded (the latest row of each)."""
    return {
        "meta": {"plugin": {"type": "openapi/slurmctld", "data_parser": "data_parser/v0.0.40"}},
        "jobs": [_slurm_job(state, jid, j, False) for jid, j in sorted(state.jobs.items())],
        "errors": [],
        "warnings": [],
    }


def slurm_squeue(state: FloorState) -> dict[str, Any]:
    """``squeue --json``: the jobs pending or running."""
    live = {k: j for k, j in state.jobs.items() if str(j.get("state")) in ("queued", "running")}
    return {
        "meta": {"plugin": {"type": "openapi/slurmctld", "data_parser": "data_parser/v0.0.40"}},
        "jobs": [_slurm_job(state, jid, j, True) for jid, j in sorted(live.items())],
        "errors": [],
        "warnings": [],
    }


def _neuron_report(
    state: FloorState, stamp: str, u: int, cores: dict[str, Any], devices: list[dict[str, Any]]
) -> dict[str, Any]:
    """One UltraServer's neuron-monitor report of its cores' and devices' readings."""
    return {
        "timestamp": stamp,
        "neuron_runtime_data": [
            {
                "pid": 0,
                "neuron_runtime_tag": "twin",
                "error": "",
                "report": {
                    "neuroncore_counters": {"period": 1.0, "neuroncores_in_use": cores, "error": ""},
                },
            }
        ],
        "system_data": {
            "neuron_hw_counters": {"period": 1.0, "neuron_devices": devices, "error": ""},
        },
        "instance_info": {
            "instance_name": f"us{u}",
            "instance_id": f"us{u}",
            "instance_type": state.system,
            "error": "",
        },
        "neuron_hardware_info": {
            "neuron_device_type": state.system,
            "neuron_device_count": len(devices),
            "neuroncore_per_device_count": 1,
            "error": "",
        },
    }


# ---------------------------------------------------------------------- BMS
_BMS_SITE_COLUMNS = {
    "site.power": "facility_power_w",
    "site.it_power": "it_power_w",
    "site.chiller_power": "chiller_power_w",
    "site.chilled_water_supply_temperature": "chilled_water_supply_c",
    "site.facility_water_supply_temperature": "facility_water_supply_c",
}
_BMS_CDU_COLUMNS = {"cdu.return_temperature": "coolant_return_c", "cdu.flow": "cdu_flow_fraction"}


def bms_points(state: FloorState, site: str = "site") -> list[tuple[str, dict[str, Any]]]:
    """Every BMS point at the latest step: (topic, payload {value, unit, timestamp, quality})."""
    if state.time_s is None:
        return []
    ts = state.iso(state.time_s)
    out: list[tuple[str, dict[str, Any]]] = []

    def point(f: Field, path: str, v: float) -> None:
        x = encode1(f, v)
        ok = math.isfinite(x)
        out.append(
            (
                f"bms/{site}/{path}",
                {
                    "value": x if ok else None,
                    "unit": f.unit,
                    "timestamp": ts,
                    "quality": "good" if ok else "bad",
                },
            )
        )

    for f in fields("bms"):
        if f.quantity in _BMS_SITE_COLUMNS and _BMS_SITE_COLUMNS[f.quantity] in state.factory:
            point(f, f.field, state.factory[_BMS_SITE_COLUMNS[f.quantity]])
        elif f.quantity == "cdu.supply_temperature":
            for u in state.us.get("ultraserver_id", np.array([])).tolist():
                point(f, f.field.replace("<id>", f"cdu{u}"), state.factory.get("coolant_supply_c", math.nan))
        elif f.quantity in _BMS_CDU_COLUMNS and state.us:
            col = state.us[_BMS_CDU_COLUMNS[f.quantity]]
            for u, v in zip(state.us["ultraserver_id"].tolist(), col.tolist(), strict=True):
                point(f, f.field.replace("<id>", f"cdu{u}"), v)
    return out


def bms_csv_lines(state: FloorState) -> list[str]:
    """The BMS points of the latest step as trend-export CSV rows (no header)."""
    return [
        f"{p['timestamp']},{topic.split('/', 2)[2]},{'' if p['value'] is None else p['value']},{p['unit']},{p['quality']}"
        for topic, p in bms_points(state)
    ]


BMS_CSV_HEADER = "Timestamp,Point,Value,Units,Status"


def dumps(doc: Any) -> str:
    """Strict JSON (non-finite numbers were made null by the renderers)."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False)
