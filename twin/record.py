"""Per-advance telemetry buffers: each telemetry table's numeric columns preallocated for the
steps of one advance (``twin.telemetry`` lays them out), filled step by step, cut to the steps
run and handed out as frames (``table -> column -> array``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from twin import telemetry
from twin.cluster import WorkStep
from twin.topology import Topology

Frames = dict[str, dict[str, Any]]


def columns_of(cls: type, table: str = "factory_ts") -> tuple[str, ...]:
    """The columns of ``table`` that a step's result type carries under their own names (its
    dataclass fields and properties), in the table's order: what the record copies by name."""
    names = {f.name for f in dataclasses.fields(cls)} | {
        k for k, v in vars(cls).items() if isinstance(v, property)
    }
    return tuple(c.name for c in telemetry.TABLES[table] if c.name in names)


# The tiers of per-entity tables, each recorded at its own interval.
TIERS = ("ultraserver_ts", "row_ts", "hall_ts")

_NP_DTYPES: dict[str, Any] = {
    "int8": np.int8,
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
    "bool": np.bool_,
}


def due(times: npt.NDArray[np.int64], dt: int, interval_s: int) -> npt.NDArray[np.bool_]:
    """Steps (starting at ``times``) on which a tier recorded every ``interval_s`` is due: the
    first step at or after each multiple of the interval (every step when it is at most ``dt``;
    never when it is 0)."""
    if interval_s <= 0:
        return np.zeros(len(times), dtype=bool)
    out: npt.NDArray[np.bool_] = times % interval_s < dt
    return out


def buffers(table: str, rows: int, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Zeroed buffers for the numeric columns of a telemetry table (``twin.telemetry``)."""
    return {
        c.name: np.zeros(rows, dtype=_NP_DTYPES[c.dtype])
        for c in telemetry.TABLES[table]
        if c.dtype in _NP_DTYPES and c.name not in skip
    }


class Recorder:
    """Preallocated per-advance telemetry buffers, laid out from ``twin.telemetry``."""

    _US_COLS = (
        "power_w",
        "chips_busy",
        "chips_failed",
        "tripped",
        "activity",
        "max_chip_temp_c",
        "coolant_return_c",
        "clock",
        "cdu_flow_fraction",
    )

    def __init__(
        self,
        steps: int,
        topo: Topology,
        services: tuple[str, ...] = (),
        tiers: dict[str, npt.NDArray[np.bool_]] | None = None,
    ) -> None:
        self.topo = topo
        every = np.ones(steps, dtype=bool)
        tiers = tiers or {}
        # Slot of each step in a tier's buffers (-1: not recorded that step).
        self.slot = {t: np.where(m, np.cumsum(m) - 1, -1) for t in TIERS for m in (tiers.get(t, every),)}
        n_us, n_row, n_hall = (int((self.slot[t] >= 0).sum()) for t in TIERS)
        self.svc_names = services
        ns = steps * len(services)
        self.s: dict[str, Any] = buffers("service_ts", ns)
        self.s["service_id"] = np.tile(np.arange(len(services), dtype=np.int32), steps)
        self.s["service"] = list(services) * steps
        self.f = buffers("factory_ts", steps)
        self.f["chips_total"][:] = topo.chips
        m = n_us * topo.ultraservers
        self.u: dict[str, npt.NDArray[Any]] = buffers("ultraserver_ts", m)
        self.u["ultraserver_id"] = np.tile(np.arange(topo.ultraservers, dtype=np.int32), n_us)
        self.u["row_id"] = np.tile(topo.us_row, n_us)
        self.r: dict[str, npt.NDArray[Any]] = buffers("row_ts", n_row * topo.rows)
        self.r["row_id"] = np.tile(np.arange(topo.rows, dtype=np.int32), n_row)
        self.r["ultraservers"] = np.tile(
            np.bincount(topo.us_row, minlength=topo.rows).astype(np.int32), n_row
        )
        self.h: dict[str, npt.NDArray[Any]] = buffers("hall_ts", n_hall)
        self.h["ultraservers"][:] = topo.ultraservers
        # First UltraServer of each row (UltraServers are numbered row by row).
        self._row_start = np.flatnonzero(np.r_[True, topo.us_row[1:] != topo.us_row[:-1]])
        self._row_nus = np.diff(np.r_[self._row_start, topo.ultraservers])  # UltraServers per row
        self.c: list[dict[str, npt.NDArray[Any]]] = []

    def factory(self, i: int, **values: float) -> None:
        for name, v in values.items():
            self.f[name][i] = v

    def ultraserver(self, i: int, t: int, *cols: npt.NDArray[Any]) -> None:
        """Step ``i``'s UltraServer rows and the row and hall aggregates of them, in each tier
        due this step. Counts and power are summed, temperatures reduced by max, activity,
        clock and return temperature averaged (over chips, chips and UltraServers)."""
        topo = self.topo
        k = int(self.slot["ultraserver_ts"][i])
        if k >= 0:
            n = topo.ultraservers
            s = slice(k * n, (k + 1) * n)
            self.u["time_s"][s] = t
            for name, col in zip(self._US_COLS, cols, strict=True):
                self.u[name][s] = col
        kr, kh = int(self.slot["row_ts"][i]), int(self.slot["hall_ts"][i])
        if kr < 0 and kh < 0:
            return
        power, busy, failed, tripped, act, tmax, ret, clock = cols[:8]
        if kr >= 0:
            st, nus = self._row_start, self._row_nus
            s = slice(kr * topo.rows, (kr + 1) * topo.rows)
            r = self.r
            r["time_s"][s] = t
            r["power_w"][s] = np.add.reduceat(power, st)
            r["chips_busy"][s] = np.add.reduceat(busy, st)
            r["chips_failed"][s] = np.add.reduceat(failed, st)
            r["ultraservers_tripped"][s] = np.add.reduceat(tripped.astype(np.int32), st)
            r["activity"][s] = np.add.reduceat(act, st) / nus
            r["max_chip_temp_c"][s] = np.maximum.reduceat(tmax, st)
            r["coolant_return_c"][s] = np.add.reduceat(ret, st) / nus
            r["clock"][s] = np.add.reduceat(clock, st) / nus
        if kh >= 0:
            h = self.h
            h["time_s"][kh] = t
            h["power_w"][kh] = power.sum()
            h["chips_busy"][kh] = busy.sum()
            h["chips_failed"][kh] = failed.sum()
            h["ultraservers_tripped"][kh] = np.count_nonzero(tripped)
            h["activity"][kh] = act.mean()
            h["max_chip_temp_c"][kh] = tmax.max()
            h["coolant_return_c"][kh] = ret.mean()
            h["clock"][kh] = clock.mean()

    def chips(
        self,
        t: int,
        owner: npt.NDArray[Any],
        act: npt.NDArray[Any],
        pw: npt.NDArray[Any],
        tj: npt.NDArray[Any],
        failed: npt.NDArray[Any],
        clock: npt.NDArray[Any],
    ) -> None:
        n = self.topo.chips
        self.c.append(
            {
                "time_s": np.full(n, t, dtype=np.int64),
                "chip_id": np.arange(n, dtype=np.int32),
                "ultraserver_id": self.topo.chip_us,
                "job_id": owner,
                "neuroncore_utilization": act.astype(np.float32),
                "chip_power_w": pw.astype(np.float32),
                "t_junction_c": tj.astype(np.float32),
                "failed": failed.copy(),
                "clock": clock.astype(np.float32),
            }
        )

    def services(self, i: int, t: int, dt: int, w: WorkStep, power_w: npt.NDArray[np.float64]) -> None:
        """One ``service_ts`` row per service for step ``i``."""
        s = self.s
        k0 = i * len(self.svc_names)
        for k, (st, (warm, starting, active)) in enumerate(zip(w.svc, w.replicas, strict=True)):
            r = k0 + k
            s["time_s"][r] = t
            s["requests_arrived"][r] = st.arrived
            s["requests_served"][r] = st.served
            s["requests_dropped"][r] = st.dropped
            s["requests_queued"][r] = st.queued
            s["request_rate_per_s"][r] = st.arrived / dt
            s["replicas_running"][r] = warm
            s["replicas_starting"][r] = starting
            s["replicas_target"][r] = active
            s["tokens_per_s"][r] = st.tokens_s
            s["input_tokens_per_s"][r] = st.input_tokens_s
            s["ttft_p50_s"][r], s["ttft_p90_s"][r], s["ttft_p99_s"][r] = st.ttft_s
            s["tpot_p50_s"][r], s["tpot_p90_s"][r], s["tpot_p99_s"][r] = st.tpot_s
            s["slo_met"][r] = st.slo_met
            decided = st.served + st.dropped
            s["slo_attainment"][r] = st.slo_met / decided if decided else np.nan
            s["occupancy"][r] = st.occupancy
            s["kv_cache_fraction"][r] = st.kv_fraction
            s["utilization"][r] = st.utilization
            s["power_w"][r] = power_w[k]

    def frames(self, ran: int | None = None) -> Frames:
        """The buffers as frames; ``ran``: only the first ``ran`` steps were run (an advance that
        stopped early), the rows of the others are cut off."""
        if ran is not None and ran < len(self.f["time_s"]):
            self._cut(ran)
        out: Frames = {"factory_ts": self.f, "ultraserver_ts": self.u, "row_ts": self.r, "hall_ts": self.h}
        if self.svc_names:
            out["service_ts"] = self.s
        if self.c:
            out["chip_ts"] = {k: np.concatenate([c[k] for c in self.c]) for k in self.c[0]}
        return out

    def _cut(self, ran: int) -> None:
        topo = self.topo
        per_step = {"ultraserver_ts": topo.ultraservers, "row_ts": topo.rows, "hall_ts": 1}
        for name, buf in (("ultraserver_ts", self.u), ("row_ts", self.r), ("hall_ts", self.h)):
            rows = int((self.slot[name][:ran] >= 0).sum()) * per_step[name]
            for k in buf:
                buf[k] = buf[k][:rows]
        self.f = {k: v[:ran] for k, v in self.f.items()}
        ns = ran * len(self.svc_names)
        self.s = {k: v[:ns] for k, v in self.s.items()}
