"""Per-advance telemetry buffers: each telemetry table's numeric columns for the steps of one
advance (``twin.spec.telemetry`` lays them out), filled step by step, cut to the steps run and
handed out as frames (``table -> column -> array``).

The per-step scalars (a ``factory_ts`` row, a service's ``service_ts`` row) are kept as one
tuple per step in a fixed column order (``FACTORY_ORDER`` and the like) and turned into typed
columns once per advance: a step writes one tuple instead of a buffer element per column. Every
value passes through float64 on the way (exact for the counts and times a step records, far
below 2**53; float32 columns round from the same double as a direct store would), so the frames
are those of storing each value in its column directly. A step's per-UltraServer columns are
staged in one block and the UltraServer, row and hall tiers made from the staged steps once per
advance (``Recorder._tiers``) into preallocated arrays; each tier's time column is filled when
the buffers are laid out, the steps' times being known."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from twin.spec import telemetry
from twin.spec.topology import Topology
from twin.work.serving import WorkStep

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
    """Zeroed buffers for the numeric columns of a telemetry table (``twin.spec.telemetry``)."""
    return {
        c.name: np.zeros(rows, dtype=_NP_DTYPES[c.dtype])
        for c in telemetry.TABLES[table]
        if c.dtype in _NP_DTYPES and c.name not in skip
    }


def _numeric(table: str) -> tuple[str, ...]:
    return tuple(c.name for c in telemetry.TABLES[table] if c.dtype in _NP_DTYPES)


def _columns(table: str, order: tuple[str, ...], rows: list[Any], n: int) -> dict[str, Any]:
    """Typed columns (in ``table``'s order) of ``n`` per-step tuples whose values follow
    ``order`` (``_typed``)."""
    return _typed(table, order, np.array(rows[:n], dtype=np.float64).reshape(n, len(order)))


def _typed(table: str, order: tuple[str, ...], m: npt.NDArray[np.float64]) -> dict[str, Any]:
    """Typed columns (in ``table``'s order) of the rows of ``m``, its columns in the order
    ``order`` names. A numeric column of ``table`` that ``order`` does not name is an error: the
    model did not produce it, and a zero in its place would read as a measurement."""
    at = {name: k for k, name in enumerate(order)}
    missing = [c.name for c in telemetry.TABLES[table] if c.dtype in _NP_DTYPES and c.name not in at]
    if missing:
        raise ValueError(f"{table}: the model produced no {', '.join(missing)}")
    out: dict[str, Any] = {}
    for c in telemetry.TABLES[table]:
        if c.dtype in _NP_DTYPES:
            out[c.name] = m[:, at[c.name]].astype(_NP_DTYPES[c.dtype])
    return out


def named(row: type, table: str = "factory_ts") -> tuple[str, ...]:
    """The field names of ``row`` (a ``NamedTuple`` built by keyword: each value goes by its
    column's name), checked to be columns of ``table``."""
    fields: tuple[str, ...] = row._fields  # type: ignore[attr-defined]
    names = {c.name for c in telemetry.TABLES[table]}
    stray = [f for f in fields if f not in names]
    if stray:
        raise ValueError(f"{row.__name__}: {', '.join(stray)} not columns of {table}")
    return fields


class HallRow(NamedTuple):
    """``hall_ts``: what the steps record of the hall's UltraServers (``Recorder._tiers``), each
    field the column of its name (built by keyword; a hall's own rows are hall 0: a campus
    numbers its halls, ``twin.compose.campus``)."""

    time_s: Any
    hall_id: Any
    ultraservers: Any
    power_w: Any
    chips_busy: Any
    chips_failed: Any
    ultraservers_tripped: Any
    activity: Any
    max_chip_temp_c: Any
    coolant_return_c: Any
    clock: Any


class ServiceRow(NamedTuple):
    """``service_ts``: a service's row of a step (``Recorder.services``), each field the column
    of its name (built by keyword)."""

    time_s: int
    service_id: int
    requests_arrived: float
    requests_served: float
    requests_dropped: float
    requests_queued: float
    request_rate_per_s: float
    replicas_running: int
    replicas_starting: int
    replicas_target: int
    tokens_per_s: float
    input_tokens_per_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    slo_met: float
    slo_attainment: float
    occupancy: float
    kv_cache_fraction: float
    utilization: float
    power_w: float


HALL_ORDER = named(HallRow, "hall_ts")
SERVICE_ORDER = named(ServiceRow, "service_ts")


class Recorder:
    """Per-advance telemetry buffers, laid out from ``twin.spec.telemetry``. ``order``: the
    ``factory_ts`` columns of a step's row (``factory``) in the order its values come.

    A step's UltraServer columns are kept as they come (float64 and int64 blocks, one per
    step that a per-entity tier is due) and the tiers are made from them once per advance
    (``frames``): the UltraServer rows typed, the rows' and the hall's sums and maxima in
    one reduction over the advance's steps, the same additions in the same order as step by
    step (each step's columns reduced along their own contiguous axis)."""

    # The staged columns: floats and counts (``ultraserver``), the tier's column of each.
    _VALS = ("power_w", "activity", "coolant_return_c", "clock", "max_chip_temp_c", "cdu_flow_fraction")
    _CNTS = ("chips_busy", "chips_failed", "tripped")

    def __init__(
        self,
        steps: int,
        topo: Topology,
        services: tuple[str, ...] = (),
        tiers: dict[str, npt.NDArray[np.bool_]] | None = None,
        times: npt.NDArray[np.int64] | None = None,
        order: tuple[str, ...] = (),
        staging: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]] | None = None,
    ) -> None:
        """``staging``: the last advance's ``staging`` blocks, taken again when they have room
        (their memory is in use already: no fresh pages to fault in every advance)."""
        self.topo = topo
        self.steps = steps
        every = np.ones(steps, dtype=bool)
        tiers = tiers or {}
        times = np.zeros(steps, dtype=np.int64) if times is None else times
        # Slot of each step in a tier's buffers (-1: not recorded that step).
        self.slot = {t: np.where(m, np.cumsum(m) - 1, -1) for t in TIERS for m in (tiers.get(t, every),)}
        # Slot of each step in the staged blocks (-1: no tier due that step).
        due = np.logical_or.reduce([self.slot[t] >= 0 for t in TIERS])
        self._stage = np.where(due, np.cumsum(due) - 1, -1)
        self._stage_at: list[int] = self._stage.tolist()
        n_us, n_row = (int((self.slot[t] >= 0).sum()) for t in TIERS[:2])
        self.svc_names = services
        self.order = order
        self._at = {name: k for k, name in enumerate(order)}
        self._f: list[Any] = [None] * steps  # a factory_ts row per step
        self._s: list[tuple[Any, ...]] = []  # service_ts rows, step by step
        n, nr = topo.ultraservers, topo.rows
        m = n_us * n
        self.u: dict[str, npt.NDArray[Any]] = buffers("ultraserver_ts", m)
        self.u["ultraserver_id"] = np.tile(np.arange(n, dtype=np.int32), n_us)
        self.u["row_id"] = np.tile(topo.us_row, n_us)
        self.u["time_s"] = np.repeat(times[self.slot["ultraserver_ts"] >= 0], n)
        self.r: dict[str, npt.NDArray[Any]] = buffers("row_ts", n_row * nr)
        self.r["row_id"] = np.tile(np.arange(nr, dtype=np.int32), n_row)
        self.r["ultraservers"] = np.tile(np.bincount(topo.us_row, minlength=nr).astype(np.int32), n_row)
        self.r["time_s"] = np.repeat(times[self.slot["row_ts"] >= 0], nr)
        # First UltraServer of each row (UltraServers are numbered row by row).
        self._row_start = np.flatnonzero(np.r_[True, topo.us_row[1:] != topo.us_row[:-1]])
        # UltraServers per row, as floats: a row's mean divides by it (as by the count, exactly).
        self._row_nus = np.diff(np.r_[self._row_start, topo.ultraservers]).astype(np.float64)
        self.c: list[dict[str, npt.NDArray[Any]]] = []
        # The staged UltraServer columns (``_VALS``, ``_CNTS``; column, step staged, UltraServer)
        # and the time of each step staged.
        k = int(due.sum())
        if staging is None or staging[0].shape[1] < k or staging[0].shape[2] != n:
            staging = (np.empty((len(self._VALS), k, n)), np.empty((len(self._CNTS), k, n), dtype=np.int64))
        self.staging = staging  # every staged step's columns are written before they are read
        self._vals, self._cnts = staging[0][:, :k], staging[1][:, :k]
        self._t = np.zeros(k, dtype=np.int64)

    def factory(self, i: int, row: tuple[Any, ...]) -> None:
        """Step ``i``'s ``factory_ts`` row, its values in the order ``order`` names."""
        self._f[i] = row

    def value(self, i: int, col: str) -> float:
        """A ``factory_ts`` value of step ``i`` as recorded."""
        return float(self._f[i][self._at[col]])

    def ultraserver(
        self,
        i: int,
        t: int,
        power: npt.NDArray[np.float64],
        busy: npt.NDArray[np.int64],
        failed: npt.NDArray[np.int64],
        tripped: npt.NDArray[np.bool_],
        act: npt.NDArray[np.float64],
        tmax: npt.NDArray[np.float64],
        ret: npt.NDArray[np.float64],
        clock: npt.NDArray[np.float64],
        cdu_flow: npt.NDArray[np.float64],
    ) -> None:
        """Step ``i``'s UltraServer columns (at time ``t``), kept when a tier is due this step;
        its UltraServer rows and the row and hall aggregates of them come with the frames."""
        k = self._stage_at[i]
        if k < 0:
            return
        v, c = self._vals, self._cnts
        v[0, k], v[1, k], v[2, k], v[3, k], v[4, k], v[5, k] = power, act, ret, clock, tmax, cdu_flow
        c[0, k], c[1, k], c[2, k] = busy, failed, tripped
        self._t[k] = t

    def _tiers(self, ran: int) -> dict[str, Any]:
        """The UltraServer and row tiers' buffers of the first ``ran`` steps filled from the
        staged columns, and the hall tier's columns. Counts and power are summed, temperatures
        reduced by max, activity, clock and return temperature averaged (over chips, chips and
        UltraServers)."""
        topo, stage = self.topo, self._stage[:ran]

        def staged(tier: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
            ks = stage[self.slot[tier][:ran] >= 0]
            if len(ks) == len(self._t):  # every step staged (ks = 0, 1, ...): no copy
                return self._vals, self._cnts, ks
            return self._vals[:, ks], self._cnts[:, ks], ks

        def put(buf: npt.NDArray[Any], values: npt.NDArray[Any]) -> None:
            buf.reshape(values.shape)[:] = values  # one pass, typed as the buffer

        v, c, _ = staged("ultraserver_ts")
        for j, name in enumerate(self._VALS):
            put(self.u[name], v[j])
        for j, name in enumerate(self._CNTS):
            put(self.u[name], c[j])
        v, c, _ = staged("row_ts")
        if v.shape[1]:
            st, r = self._row_start, self.r
            rs, rc = np.add.reduceat(v[:4], st, axis=2), np.add.reduceat(c, st, axis=2)
            means = rs[1:] / self._row_nus  # activity, return, clock: over the row's UltraServers
            put(r["power_w"], rs[0])
            put(r["chips_busy"], rc[0])
            put(r["chips_failed"], rc[1])
            put(r["ultraservers_tripped"], rc[2])
            put(r["activity"], means[0])
            put(r["max_chip_temp_c"], np.maximum.reduceat(v[4], st, axis=1))
            put(r["coolant_return_c"], means[1])
            put(r["clock"], means[2])
        v, c, ks = staged("hall_ts")
        # Means as ``ndarray.mean`` takes them: the sum, then over the count.
        n = topo.ultraservers
        hs, hc = np.add.reduce(v[:4], axis=2), np.add.reduce(c, axis=2)
        cols = HallRow(
            time_s=self._t[ks],
            hall_id=np.zeros(len(ks)),
            ultraservers=np.full(len(ks), n),
            power_w=hs[0],
            chips_busy=hc[0],
            chips_failed=hc[1],
            ultraservers_tripped=hc[2],
            activity=hs[1] / n,
            max_chip_temp_c=np.maximum.reduce(v[4], axis=1, initial=-np.inf),  # -inf: none (no step due)
            coolant_return_c=hs[2] / n,
            clock=hs[3] / n,
        )
        return _typed("hall_ts", HALL_ORDER, np.stack(cols, axis=1).astype(np.float64, copy=False))

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

    def services(self, t: int, dt: int, w: WorkStep, power_w: npt.NDArray[np.float64]) -> None:
        """One ``service_ts`` row per service for the next step (``SERVICE_ORDER``)."""
        rows = self._s
        for k, (st, (warm, starting, active)) in enumerate(zip(w.svc, w.replicas, strict=True)):
            decided = st.served + st.dropped
            ttft, tpot = st.ttft_s, st.tpot_s
            rows.append(
                ServiceRow(
                    time_s=t,
                    service_id=k,
                    requests_arrived=st.arrived,
                    requests_served=st.served,
                    requests_dropped=st.dropped,
                    requests_queued=st.queued,
                    request_rate_per_s=st.arrived / dt,
                    replicas_running=warm,
                    replicas_starting=starting,
                    replicas_target=active,
                    tokens_per_s=st.tokens_s,
                    input_tokens_per_s=st.input_tokens_s,
                    ttft_p50_s=ttft[0],
                    ttft_p90_s=ttft[1],
                    ttft_p99_s=ttft[2],
                    tpot_p50_s=tpot[0],
                    tpot_p90_s=tpot[1],
                    tpot_p99_s=tpot[2],
                    slo_met=st.slo_met,
                    slo_attainment=st.slo_met / decided if decided else np.nan,
                    occupancy=st.occupancy,
                    kv_cache_fraction=st.kv_fraction,
                    utilization=st.utilization,
                    power_w=power_w[k],
                )
            )

    def frames(self, ran: int | None = None) -> Frames:
        """The buffers as frames; ``ran``: only the first ``ran`` steps were run (an advance that
        stopped early), the rows of the others are cut off."""
        ran = self.steps if ran is None else min(ran, self.steps)
        if ran < self.steps:
            self._cut(ran)
        f = _columns("factory_ts", self.order, self._f, ran)
        h = self._tiers(ran)
        out: Frames = {"factory_ts": f, "ultraserver_ts": self.u, "row_ts": self.r, "hall_ts": h}
        if self.svc_names:
            ns = len(self.svc_names)
            s = _columns("service_ts", SERVICE_ORDER, self._s, ran * ns)
            s["service"] = list(self.svc_names) * ran
            out["service_ts"] = s
        if self.c:
            c = self.c
            out["chip_ts"] = c[0] if len(c) == 1 else {k: np.concatenate([s[k] for s in c]) for k in c[0]}
        return out

    def _cut(self, ran: int) -> None:
        topo = self.topo
        per_step = {"ultraserver_ts": topo.ultraservers, "row_ts": topo.rows}
        for name, buf in (("ultraserver_ts", self.u), ("row_ts", self.r)):
            rows = int((self.slot[name][:ran] >= 0).sum()) * per_step[name]
            for k in buf:
                buf[k] = buf[k][:rows]
