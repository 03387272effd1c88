"""The time-stepped factory simulation: one run state, one Design, the step as a pipeline.

``Simulation.advance(n)`` runs ``n`` fixed steps of ``dt_s`` integer seconds and returns the
telemetry frames of those steps (``table -> column -> array``, column names as in
``twin.telemetry``; ``run_id`` is added by storage). Same parameters and seed give bit-identical
frames; a live session replayed headlessly with its recorded events gives identical telemetry.

The run state: the work state ``cluster`` (``twin.cluster``: chips' ownership and health, job
table, queues, drains, services), the physics state ``facility`` (``twin.facility``: clocks,
loops, plant, protection, timed effects), the site ``site`` (weather, price, carbon), pending
events, and the random streams (``twin.rng``: one SeedSequence, one child per subsystem). The
``design`` (``twin.design``) is derived once from the parameters and never changes.

One step [t, t + dt), phase by phase (reads -> writes; every phase returns its events, which are
recorded in this order):

1. events       pending scenario/operator events due at t -> timed effects (caps, cooling faults,
                surges), failures/repairs/drains; an event that changes CDU flow re-solves the
                chips' clocks at once (``_apply``).
2. work         ``Cluster.step`` (``twin.cluster``), in order: repairs due and random failures
                (failures stream) -> drains -> batch arrivals (arrivals, jobs streams) ->
                service requests and autoscaling (services stream) -> scheduling and placement
                -> batch progress at the chips' clocks -> serving. Reads the clocks decided for
                this step; writes ownership, job states and each job's activity.
3. site         weather, price, carbon at t (weather stream).
4. physics      ``Facility.step`` (``twin.facility``): chip power at the clocks (capping, DVFS)
                -> hosts, rectifiers -> rack loops -> junction temperatures and protection
                (throttle within the step, shutdown past the limit; re-solved once at the
                protected clocks) -> loop trips -> plant (economizer, chillers, pumps, fans,
                water) -> power chain (PDU, UPS, transformer) -> clocks for the next step (power
                caps, thermal equilibrium). When protection slowed chips inside the step, the
                batch work of the step is taken at the clocks they ran at
                (``cluster.rescale_progress``). Thermal trips and recoveries go back to the
                work state (their jobs are interrupted).
5. record       one factory_ts row, one ultraserver_ts row per UltraServer, one service_ts row
                per service, chip_ts samples; at the end of ``advance``: jobs rows (finished
                jobs then leave memory), events, failures, interruptions.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from twin import outages, rng, serving, site, tco, telemetry
from twin.cluster import Cluster, WorkStep, rescale_progress
from twin.design import Design, derive
from twin.events import Events
from twin.facility import EVENT_KINDS as FACILITY_EVENT_KINDS
from twin.facility import Facility, FacilityStep
from twin.jobs import (  # noqa: F401  (job-state names re-exported for callers)
    DONE,
    INFERENCE,
    QUEUED,
    RUNNING,
    STATE_NAMES,
    STOPPED,
    TRAINING,
    JobTable,
)
from twin.params import KIND_NAMES, FactoryParams, ScheduledEvent  # noqa: F401
from twin.topology import Topology, build

Frames = dict[str, dict[str, Any]]

EVENT_KINDS = (
    *FACILITY_EVENT_KINDS,
    "fail_chip",
    "fail_server",
    "fail_ultraserver",
    "repair_chip",
    "repair_server",
    "repair_ultraserver",
    "drain_ultraserver",
    "undrain_ultraserver",
    "inference_surge",
)

# The workload step's result (``twin.serving``): FLOP/s, tokens, requests, per-service steps.
WorkloadStep = WorkStep


class Simulation:
    def __init__(self, params: FactoryParams) -> None:
        self.p = params
        hall = params.hall
        if len(hall.rows) > 1:
            raise ValueError("a hall of several systems ([[hall.rows]]) is built by twin.floor.build")
        self.sys = hall.system
        self.acc = hall.accelerator
        self.dt_s = int(params.dt_s)
        if self.dt_s < 1:
            raise ValueError("dt_s must be a positive integer number of seconds")
        self.topo: Topology = build(
            hall.ultraservers, self.sys.chips, self.sys.servers, hall.ultraservers_per_row
        )
        n = self.topo.chips
        # The run's fixed facts, derived once (recorded with the run as ``runs.design_json``).
        self.design: Design = derive(params)
        # Fixed cost rates of ownership (capital, maintenance, staff; twin.tco).
        self.costs = tco.cost_rates(self.sys, hall.ultraservers, self.design.design_it_w, params.tco)
        self.rngs = rng.streams(params.seed)
        self.t_s = 0
        # The work state (jobs, queue, scheduler, failures, services) and its chip arrays; the
        # physics reads them.
        self.cluster = Cluster(params, self.topo, self.acc, self.rngs)
        self.chip_owner = self.cluster.chip_owner
        self.chip_failed = self.cluster.chip_failed
        self.chip_repair_at = self.cluster.chip_repair_at
        self.jobs: JobTable = self.cluster.jobs
        self.chip_clock = np.ones(n)
        self._chip_power0 = np.zeros(n)
        self.chip_activity = np.zeros(n)
        self._chip_tj0 = np.full(n, params.cooling.supply_setpoint_c)
        self._ph: FacilityStep | None = None  # the last physics step
        self.site = site.SiteModel(params.site, self.rngs.weather)
        self.facility = Facility(params, self.topo, self.sys, self.acc, self.design)
        self._events: list[tuple[int, str, str, str, str, str, float, int]] = []
        self._pending: list[tuple[int, int, ScheduledEvent, str]] = []
        self._event_seq = 0
        for ev in params.events:
            self._push_event(ev, "scenario")

        self.last: dict[str, float] = {}

    @property
    def queue(self) -> list[int]:
        """Batch jobs waiting, in the scheduling policy's order (replica requests: ``cluster``)."""
        return self.cluster.queue

    @property
    def training_capacity_chips(self) -> int:
        return self.cluster.training_capacity_chips

    @property
    def chip_power(self) -> npt.NDArray[np.float64]:
        """Power of every chip at the last step [W] (built when asked: the model needs only its
        UltraServer sums)."""
        return self._ph.chip_p if self._ph is not None else self._chip_power0

    @property
    def chip_hw_failed(self) -> npt.NDArray[np.bool_]:
        """Chips with a hardware fault (``chip_failed`` also holds chips of tripped UltraServers,
        which are off, not failed)."""
        return self.cluster.chip_hw_failed

    def chip_job_ids(self) -> npt.NDArray[np.int32]:
        """The job id on each chip (-1 idle); ``chip_owner`` holds job-table slots."""
        owner = self.chip_owner
        out: npt.NDArray[np.int32] = np.where(owner >= 0, self.jobs.a["id"][np.maximum(owner, 0)], -1).astype(
            np.int32
        )
        return out

    @property
    def chip_tj(self) -> npt.NDArray[np.float64]:
        """Junction temperature of every chip in the last step [°C] (derived on demand)."""
        return self._ph.chip_tj() if self._ph is not None else self._chip_tj0

    @property
    def us_tripped(self) -> npt.NDArray[np.bool_]:
        """UltraServers powered off by thermal protection."""
        return self.facility.us_tripped

    # ------------------------------------------------------------------ events
    def _push_event(self, ev: ScheduledEvent, source: str) -> None:
        if ev.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {ev.kind!r}; expected one of {', '.join(EVENT_KINDS)}")
        heapq.heappush(self._pending, (int(ev.time_s), self._event_seq, ev, source))
        self._event_seq += 1

    def inject(self, kind: str, target: str = "", value: float = 0.0, duration_s: int = 0) -> ScheduledEvent:
        """Queue an operator event; it is applied at the start of the next step and recorded."""
        ev = ScheduledEvent(self.t_s, kind, str(target), float(value), int(duration_s))
        self._push_event(ev, "operator")
        return ev

    def _log(
        self, kind: str, target: str, detail: str, source: str = "model", ev: ScheduledEvent | None = None
    ) -> None:
        """Record an event. Applied scenario/operator events keep their arguments (raw target,
        value, duration) so a recording can be re-run with exactly the same what-ifs."""
        if ev is None:
            self._events.append((self.t_s, kind, target, detail, source, "", 0.0, 0))
        else:
            self._events.append((self.t_s, kind, target, detail, source, ev.target, ev.value, ev.duration_s))

    def _record_events(self, events: Events) -> None:
        for kind, target, detail in events:
            self._log(kind, target, detail)

    def _apply(self, ev: ScheduledEvent, source: str) -> Events:
        """Phase 1 for one event: apply it, record it; returns the events it caused."""
        kind = ev.kind
        if kind in FACILITY_EVENT_KINDS:
            target, detail = self.facility.apply(ev, self.t_s)
            self.chip_clock = self.facility.clock  # protection may have re-clocked the chips
            self._log(kind, target, detail, source, ev)
            return []
        cl, t = self.cluster, self.t_s
        caused: Events = []
        level = kind.split("_", 1)[1]
        target = f"{level}:{ev.target}" if kind != "inference_surge" else ev.target
        if kind.startswith("fail_"):
            detail = outages.inject_failure(cl, caused, level, int(ev.target), ev.duration_s, t, source)
        elif kind.startswith("repair_"):
            chips = outages.target_chips(cl, level, int(ev.target))
            outages.repair_chips(cl, chips)
            detail = f"{len(chips)} chips repaired"
        elif kind == "drain_ultraserver":
            # value: grace period [h] before running jobs are evicted; duration: maintenance.
            detail = outages.drain(cl, int(ev.target), int(round(ev.value * 3600)), ev.duration_s, t)
        elif kind == "undrain_ultraserver":
            detail = outages.undrain(cl, int(ev.target))
        else:  # inference_surge
            factor = ev.value if ev.value > 0 else 2.0
            until = t + (ev.duration_s if ev.duration_s > 0 else 3600)
            serving.surge(cl, ev.target, factor, t, until)
            detail = f"x{factor:g} request rate until t={until} s"
        self._log(kind, target, detail, source, ev)
        return caused

    # ------------------------------------------------------------------ step
    def _step(self, rec: _Recorder, i: int) -> None:
        """One step, phase by phase (module docstring)."""
        t = self.t_s
        self._events_due(t)
        clock = self.chip_clock
        w = self._work(t, clock)
        ph, w = self._physics(w, clock)
        self._record(rec, i, w, ph)
        self.t_s = t + self.dt_s

    def _events_due(self, t: int) -> None:
        """Phase 1: pending events due at ``t`` are applied and recorded."""
        while self._pending and self._pending[0][0] <= t:
            _, _, ev, source = heapq.heappop(self._pending)
            self._record_events(self._apply(ev, source))

    def _work(self, t: int, clock: npt.NDArray[np.float64]) -> WorkStep:
        """Phase 2: the work state's step at this step's clocks."""
        w, work_events = self.cluster.step(t, self.dt_s, clock)
        self._record_events(work_events)
        return w

    def _utilisation(self) -> npt.NDArray[np.float64]:
        """Each chip's utilisation is its job's activity: one gather through the job table, with
        a trailing 0 that idle chips (owner -1) pick up."""
        util: npt.NDArray[np.float64] = np.append(self.jobs.a["activity"], 0.0).take(self.chip_owner)
        return util

    def _physics(self, w: WorkStep, clock: npt.NDArray[np.float64]) -> tuple[FacilityStep, WorkStep]:
        """Phases 3-4: site, then chip utilisation -> power, heat, temperatures, plant and power
        chain (``twin.facility``), then what the physics did to the work (``_after_physics``)."""
        util = self._utilisation()
        cond = self.site.step(self.t_s, self.dt_s)
        ph = self.facility.step(util, ~self.chip_failed, cond, self.t_s, self.dt_s)
        return ph, self._after_physics(ph, w, clock)

    def _after_physics(self, ph: FacilityStep, w: WorkStep, clock: npt.NDArray[np.float64]) -> WorkStep:
        """When junction protection slowed chips inside the step, the batch work of the step is
        taken at the clocks the chips really ran at (work and power use the same clock). Thermal
        trips take chips offline; the clocks decided here apply to the next step's work and power
        alike."""
        if ph.protected:
            d_train, d_job = rescale_progress(self.cluster, self.t_s, self.dt_s, clock, ph.clock)
            w = dataclasses.replace(w, train_flops=w.train_flops - d_train, job_flops=w.job_flops - d_job)
        self._record_events(ph.events)
        if len(ph.tripped_chips):
            caused: Events = []
            outages.fail_chips(self.cluster, caused, ph.tripped_chips, -1, "thermal", self.t_s)
            self._record_events(caused)
        if len(ph.recovered_chips):
            outages.recover_thermal(self.cluster, ph.recovered_chips)
        self.chip_clock = self.facility.clock
        self.chip_activity, self._ph = ph.act_chip, ph
        return w

    # ------------------------------------------------------------------ record
    def _record(self, rec: _Recorder, i: int, w: WorkloadStep, ph: FacilityStep) -> None:
        p, t, dt = self.p, self.t_s, self.dt_s
        topo = self.topo
        owner = self.chip_owner
        nus, c = topo.ultraservers, topo.chips_per_us
        act_chip = ph.act_chip
        it_w, facility_w, pue = ph.it_w, ph.facility_w, ph.pue
        # Energy per token: the facility power attributed to inference replicas (their chips'
        # share of IT, grossed up by PUE), recorded with the other workload columns.
        inf_w = self._record_work(rec, i, w, ph)
        j_per_tok = inf_w / w.tokens_s if w.tokens_s > 0 else float("nan")
        energy_j = facility_w * dt
        # Busy = held by a job and doing work. Only a job's chips have activity; ownership changed
        # since the physics read it only when a thermal trip interrupted jobs this step.
        busy = act_chip > 0
        if len(ph.tripped_chips):
            busy &= owner >= 0
        us_busy = np.add.reduce(
            busy.view(np.uint8).reshape(nus, c), axis=1, dtype=np.int64
        )  # ~2x count_nonzero
        cp = p.cooling
        hw_failed = self.cluster.chip_hw_failed
        us_failed = self.cluster.failed_counts()[1]
        tripped_us = ph.us_off
        if ph.full_clock:
            mean_clock, us_clock = 1.0, np.ones(nus)
        else:
            mean_clock = float(ph.clock[busy].mean()) if busy.any() else 1.0
            us_clock = topo.per_us(ph.clock) / c
        rec.factory(
            i,
            time_s=t,
            it_power_w=it_w,
            facility_power_w=facility_w,
            cooling_power_w=ph.cooling_w,
            power_loss_w=ph.loss_w,
            pue=pue,
            chip_power_w=ph.chip_w,
            psu_loss_w=ph.psu_loss_w,
            pdu_loss_w=ph.pdu_loss_w,
            ups_loss_w=ph.ups_loss_w,
            transformer_loss_w=ph.transformer_loss_w,
            chiller_power_w=ph.chiller_w,
            pump_power_w=ph.pumps_w,
            fan_power_w=ph.fans_w,
            free_cooling_fraction=ph.free_fraction,
            chiller_cop=ph.cop,
            water_l=ph.water_l,
            facility_water_supply_c=ph.fw_supply_c,
            unmet_heat_w=ph.unmet_heat_w,
            facility_cap_w=ph.facility_cap_w if np.isfinite(ph.facility_cap_w) else np.nan,
            throttled_chips=ph.throttled_chips,
            mean_clock=mean_clock,
            chips_allocated=self.cluster.n_alloc,
            **ph.units,
            chips_busy=int(us_busy.sum()),
            chips_failed=int(us_failed.sum()),
            ultraservers_tripped=int(tripped_us.sum()),
            activity=float(ph.us_act.sum()) / topo.chips,
            queue_jobs=len(self.cluster.queue),
            running_jobs=w.running_training,
            training_flops=w.train_flops,
            tokens_per_s=w.tokens_s,
            requests_per_s=w.requests_s,
            requests_dropped_per_s=w.dropped_s,
            energy_per_token_j=j_per_tok,
            outdoor_temp_c=ph.cond.drybulb_c,
            outdoor_wetbulb_c=ph.cond.wetbulb_c,
            outdoor_rh=ph.cond.rel_humidity,
            coolant_supply_c=cp.supply_setpoint_c,
            coolant_return_c=float(ph.us_return_c.mean()),
            max_chip_temp_c=float(ph.us_tj_max.max()),
            price_usd_per_mwh=ph.cond.price_usd_per_mwh,
            carbon_g_per_kwh=ph.cond.carbon_g_per_kwh,
            cost_usd=energy_j / 3.6e9 * ph.cond.price_usd_per_mwh,
            co2_kg=energy_j / 3.6e6 * ph.cond.carbon_g_per_kwh / 1000.0,
            energy_j=energy_j,
            capex_usd=self.costs.capex_usd_per_s * dt,
            fixed_opex_usd=self.costs.fixed_opex_usd_per_s * dt,
            water_cost_usd=ph.water_l * self.costs.water_usd_per_l,
        )
        us_act = ph.us_act / c
        rec.ultraserver(
            i,
            t,
            ph.us_it,
            us_busy,
            us_failed,
            tripped_us,
            us_act,
            ph.us_tj_max,
            ph.us_return_c,
            us_clock,
            self.facility.row_flow_fraction[topo.us_row],
        )
        si = p.chip_sample_interval_s
        if si > 0 and t % si < dt:
            rec.chips(t, self.chip_job_ids(), act_chip, ph.chip_p, ph.chip_tj(), hw_failed, ph.clock)

    def _record_work(self, rec: _Recorder, i: int, w: WorkloadStep, ph: FacilityStep) -> float:
        """Workload columns of ``factory_ts`` and this step's ``service_ts`` rows; returns the
        facility power attributed to inference [W]."""
        cl = self.cluster
        gross = ph.facility_w / ph.chip_w if ph.chip_w > 0 else 0.0  # = IT per chip W x PUE
        svc_w = serving.service_power_w(cl, ph.pw.chip_p_at, gross)
        inf_w = float(svc_w.sum())
        free, drained, whole, frag = cl.us_counts()
        rec.factory(
            i,
            job_flops=w.job_flops,
            requests_served_per_s=w.served_s,
            requests_queued=w.requests_queued,
            chips_free=free,
            chips_drained=drained,
            ultraservers_free=whole,
            fragmentation=frag,
            failures=cl.step_failures,
            preemptions=cl.step_preemptions,
            inference_power_w=inf_w,
            inference_chips=serving.replica_chips(cl),
        )
        if w.svc:
            rec.services(i, self.t_s, self.dt_s, w, svc_w)
        return inf_w

    # ------------------------------------------------------------------ public
    def advance(self, steps: int, stop: Callable[[], bool] | None = None) -> Frames:
        """Run ``steps`` steps; return their telemetry frames. ``stop`` is asked after each step:
        when it returns true, the advance ends there (the frames hold the steps run), so a caller
        can run many steps in one advance and still act after any one of them."""
        rec = self.begin(steps)
        ran = run_steps(self._step, rec, steps, stop)
        return self.end(rec, ran)

    # A campus (``twin.campus``) drives its halls step by step: ``begin``, ``step`` per step,
    # ``end``; ``advance`` is exactly these three.
    def begin(self, steps: int) -> _Recorder:
        """The buffers of the next ``steps`` steps."""
        return self._recorder(steps)

    def step(self, rec: _Recorder, i: int) -> None:
        """Step ``i`` of the steps ``rec`` was begun for."""
        self._step(rec, i)

    def end(self, rec: _Recorder, ran: int) -> Frames:
        """The frames of the first ``ran`` steps recorded in ``rec``."""
        frames = self._frames(rec, ran)
        frames["system_ts"] = telemetry.system_rows([frames["factory_ts"]], [self.sys.key])
        if ran:
            self.last = {k: float(v[-1]) for k, v in frames["factory_ts"].items()}
        return frames

    def _recorder(self, steps: int) -> _Recorder:
        p = self.p
        times = self.t_s + self.dt_s * np.arange(steps, dtype=np.int64)
        return _Recorder(
            steps,
            self.topo,
            tuple(s.name for s in p.services),
            tiers={
                "ultraserver_ts": _due(times, self.dt_s, p.ultraserver_interval_s),
                "row_ts": _due(times, self.dt_s, p.row_interval_s),
                "hall_ts": _due(times, self.dt_s, p.hall_interval_s),
            },
        )

    def _frames(self, rec: _Recorder, ran: int | None = None) -> Frames:
        """The frames of the steps recorded in ``rec`` (its first ``ran``: an advance that stopped
        early) with the jobs, events, failures and interruptions since the last call."""
        frames = rec.frames(ran)
        frames["jobs"] = self.cluster.job_rows(self.t_s)
        frames["events"] = self._event_rows()
        frames.update(self.cluster.event_tables())
        return frames

    def queue_view(self, limit: int = 50) -> list[tuple[int, str, int, int]]:
        """First waiting jobs, replica requests first: (job_id, name, chips, wait_s)."""
        return self.cluster.queue_view(self.t_s, limit)

    def refresh_jobs(self) -> None:
        """The next advance writes every waiting and running job's row, however long since the
        last (``jobs_interval_s``): the end of a run."""
        self.cluster._jobs_due = self.t_s

    def _event_rows(self) -> dict[str, Any]:
        ev = self._events
        self._events = []
        return {
            "time_s": np.array([e[0] for e in ev], dtype=np.int64),
            "kind": [e[1] for e in ev],
            "target": [e[2] for e in ev],
            "detail": [e[3] for e in ev],
            "source": [e[4] for e in ev],
            "arg": [e[5] for e in ev],
            "value": np.array([e[6] for e in ev], dtype=np.float64),
            "duration_s": np.array([e[7] for e in ev], dtype=np.int64),
        }


def run_steps(step: Callable[[Any, int], None], rec: Any, steps: int, stop: Callable[[], bool] | None) -> int:
    """Run ``step(rec, i)`` for i < ``steps``, asking ``stop`` after each (not after the last);
    returns how many ran."""
    for i in range(steps):
        step(rec, i)
        if stop is not None and i + 1 < steps and stop():
            return i + 1
    return steps


_NP_DTYPES: dict[str, Any] = {
    "int8": np.int8,
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
    "bool": np.bool_,
}


def _due(times: npt.NDArray[np.int64], dt: int, interval_s: int) -> npt.NDArray[np.bool_]:
    """Steps (starting at ``times``) on which a tier recorded every ``interval_s`` is due: the
    first step at or after each multiple of the interval (every step when it is at most ``dt``;
    never when it is 0)."""
    if interval_s <= 0:
        return np.zeros(len(times), dtype=bool)
    out: npt.NDArray[np.bool_] = times % interval_s < dt
    return out


def _buffers(table: str, rows: int, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Zeroed buffers for the numeric columns of a telemetry table (``twin.telemetry``)."""
    return {
        c.name: np.zeros(rows, dtype=_NP_DTYPES[c.dtype])
        for c in telemetry.TABLES[table]
        if c.dtype in _NP_DTYPES and c.name not in skip
    }


class _Recorder:
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
        self.s: dict[str, Any] = _buffers("service_ts", ns)
        self.s["service_id"] = np.tile(np.arange(len(services), dtype=np.int32), steps)
        self.s["service"] = list(services) * steps
        self.f = _buffers("factory_ts", steps)
        self.f["chips_total"][:] = topo.chips
        m = n_us * topo.ultraservers
        self.u: dict[str, npt.NDArray[Any]] = _buffers("ultraserver_ts", m)
        self.u["ultraserver_id"] = np.tile(np.arange(topo.ultraservers, dtype=np.int32), n_us)
        self.u["row_id"] = np.tile(topo.us_row, n_us)
        self.r: dict[str, npt.NDArray[Any]] = _buffers("row_ts", n_row * topo.rows)
        self.r["row_id"] = np.tile(np.arange(topo.rows, dtype=np.int32), n_row)
        self.r["ultraservers"] = np.tile(
            np.bincount(topo.us_row, minlength=topo.rows).astype(np.int32), n_row
        )
        self.h: dict[str, npt.NDArray[Any]] = _buffers("hall_ts", n_hall)
        self.h["ultraservers"][:] = topo.ultraservers
        # First UltraServer of each row (UltraServers are numbered row by row).
        self._row_start = np.flatnonzero(np.r_[True, topo.us_row[1:] != topo.us_row[:-1]])
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
            st = self._row_start
            nus = np.diff(np.r_[st, topo.ultraservers])
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

    def services(self, i: int, t: int, dt: int, w: WorkloadStep, power_w: npt.NDArray[np.float64]) -> None:
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


TIERS = ("ultraserver_ts", "row_ts", "hall_ts")


def steps_for(duration_s: float, dt_s: int) -> int:
    return int(math.ceil(duration_s / dt_s))
