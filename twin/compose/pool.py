"""A pool: the UltraServers of one system in a hall, with everything that is per chip.

A pool holds one homogeneous system's topology, its work state (``twin.work.cluster``: chips'
ownership and health, jobs, queues, services), its facility part (``twin.physics.facility``: clocks,
rack loops, protection, caps and timed effects) and its fixed cost rates. It does not step
itself: the hall (``twin.compose.hall``) drives its pools through one step, phase by phase, with one
site, one plant and one power chain on their sums. The phases a pool takes part in:

- ``apply``: one event in the pool's own numbering (failures, repairs, drains, surges, a cap
  or a cooling fault on its rows);
- ``work``: what runs where and how active it is (``Cluster.prepare``);
- ``book``: the step's batch work, once, at the clocks the chips ran at (``Cluster.book``);
- ``after_physics``: thermal trips and recoveries back to the work state;
- ``record``: the pool's own rows (factory, UltraServers, rows, services, chip samples).
"""

from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from twin.compose.record import Frames, Recorder, columns_of, due, named
from twin.physics.design import Design, derive
from twin.physics.facility import EVENT_KINDS as FACILITY_EVENT_KINDS
from twin.physics.facility import Facility, FacilityStep
from twin.physics.plant import UNIT_COLUMNS, PlantState
from twin.spec import rng, tco
from twin.spec.events import Events
from twin.spec.params import FactoryParams, ScheduledEvent
from twin.spec.topology import Topology, build
from twin.work import outages, routing, serving
from twin.work.chips import Load
from twin.work.cluster import Cluster, WorkStep
from twin.work.jobs import JobTable

# One events-table row: (time, kind, target, detail, source, raw target, value, duration).
EventRow = tuple[int, str, str, str, str, str, float, int]
# The factory_ts columns the physics step and the work step carry under their own names.
PHYSICS_COLUMNS = columns_of(FacilityStep)
WORK_COLUMNS = columns_of(WorkStep)


class PoolRow(NamedTuple):
    """The ``factory_ts`` columns ``Pool.record`` derives itself (the pool's counts, the site's
    conditions and the step's costs), each field the column of its name (built by keyword)."""

    time_s: int
    chips_total: int
    mean_clock: float
    chips_allocated: int
    chips_busy: int
    chips_failed: int
    ultraservers_tripped: int
    activity: float
    queue_jobs: int
    coolant_return_c: float
    max_chip_temp_c: float
    outdoor_temp_c: float
    outdoor_wetbulb_c: float
    outdoor_rh: float
    price_usd_per_mwh: float
    carbon_g_per_kwh: float
    cost_usd: float
    co2_kg: float
    energy_j: float
    capex_usd: float
    fixed_opex_usd: float
    water_cost_usd: float


class WorkRow(NamedTuple):
    """The workload columns of ``factory_ts`` the work step does not carry (``Pool._record_work``),
    each field the column of its name (built by keyword)."""

    chips_free: int
    chips_drained: int
    ultraservers_free: int
    fragmentation: float
    failures: int
    preemptions: int
    inference_power_w: float
    inference_chips: int
    energy_per_token_j: float


# A step's factory_ts row, in the order its values come (``Recorder.factory``).
FACTORY_ORDER = PHYSICS_COLUMNS + UNIT_COLUMNS + WORK_COLUMNS + named(PoolRow) + named(WorkRow)
_PHYSICS = attrgetter(*PHYSICS_COLUMNS)
_FACILITY_W = PHYSICS_COLUMNS.index("facility_power_w")
_UNITS = attrgetter(*UNIT_COLUMNS)
_WORK = attrgetter(*WORK_COLUMNS)


class Pool:
    """One system's UltraServers (``params.hall`` is a hall of that one system)."""

    def __init__(
        self,
        params: FactoryParams,
        design: Design | None = None,
        plant: PlantState | None = None,
        owns_plant: bool = True,
    ) -> None:
        """``plant``: the hall's one plant state (None: a plant of the pool's own);
        ``owns_plant``: the plant's faults are this pool's effects (a hall's first pool)."""
        self.p = params
        hall = params.hall
        self.sys = hall.system
        self.acc = hall.accelerator
        self.dt_s = int(params.dt_s)
        if self.dt_s < 1:
            raise ValueError("dt_s must be a positive integer number of seconds")
        self.topo: Topology = build(
            hall.ultraservers, self.sys.chips, self.sys.servers, hall.ultraservers_per_row
        )
        n = self.topo.chips
        # The pool's fixed facts, derived once (a one-system hall records them as ``runs.design_json``).
        self.design: Design = design or derive(params)
        # Fixed cost rates of ownership (capital, maintenance, staff; twin.spec.tco).
        self.costs = tco.cost_rates(self.sys, hall.ultraservers, self.design.design_it_w, params.tco)
        self.rngs = rng.streams(params.seed)
        self.t_s = -params.warmup_s  # the clock starts before the recording by the warm-up
        self.cluster = Cluster(params, self.topo, self.acc, self.rngs)
        self.chip_owner = self.cluster.chip_owner
        self.chip_failed = self.cluster.chip_failed
        self.chip_repair_at = self.cluster.chip_repair_at
        self.jobs: JobTable = self.cluster.jobs
        self.chip_clock = np.ones(n)
        self._chip_power0 = np.zeros(n)
        self._chip_activity0 = np.zeros(n)
        self._chip_tj0 = np.full(n, params.cooling.supply_setpoint_c)
        self._ph: FacilityStep | None = None  # the last physics step
        self.facility = Facility(params, self.topo, self.sys, self.acc, self.design, plant, owns_plant)
        self._events: list[EventRow] = []
        self._released = False  # a job ended in the step being booked (``book``)
        # The record's caches: a full clock per UltraServer, the free-chip counts (for the chip
        # pool's ``ver``) and the failed chips' total (for the counts it was summed from).
        self._ones_us = np.ones(self.topo.ultraservers)
        self._counts: tuple[int, int, int, float] = (0, 0, 0, 0.0)
        self._counts_ver = -1
        self._failed_of: npt.NDArray[np.int64] | None = None
        self._failed_sum = 0
        self._staging: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]] | None = None  # ``Recorder``'s

    # ------------------------------------------------------------------ per-chip views
    @property
    def queue(self) -> list[int]:
        """Batch jobs waiting, in the scheduling policy's order (replica requests: ``cluster``)."""
        return self.cluster.queue

    @property
    def chip_power(self) -> npt.NDArray[np.float64]:
        """Power of every chip at the last step [W] (built when asked: the model needs only its
        UltraServer sums)."""
        return self._ph.chip_p if self._ph is not None else self._chip_power0

    @property
    def chip_activity(self) -> npt.NDArray[np.float64]:
        """Work rate of every chip at the last step [-] (built when asked)."""
        return self._ph.act_chip if self._ph is not None else self._chip_activity0

    @property
    def chip_hw_failed(self) -> npt.NDArray[np.bool_]:
        """Chips with a hardware fault (``chip_failed`` also holds chips of tripped UltraServers,
        which are off, not failed)."""
        return self.cluster.chip_hw_failed

    def chip_job_ids(self) -> npt.NDArray[np.int32]:
        """The job id on each chip (-1 idle); ``chip_owner`` holds job-table slots."""
        # The ids by slot, then -1: an idle chip's slot -1 takes the last.
        ids = np.append(self.jobs.a["id"], -1).astype(np.int32, copy=False)
        out: npt.NDArray[np.int32] = ids.take(self.chip_owner)
        return out

    @property
    def chip_tj(self) -> npt.NDArray[np.float64]:
        """Junction temperature of every chip in the last step [°C] (derived on demand)."""
        return self._ph.chip_tj() if self._ph is not None else self._chip_tj0

    @property
    def us_tripped(self) -> npt.NDArray[np.bool_]:
        """UltraServers powered off by thermal protection."""
        return self.facility.trips.us_tripped

    def utilisation(self) -> Load:
        """The step's load: each chip's utilisation is its job's activity (0 idle or
        unpowered), per (UltraServer, job) segment, per chip when asked (``twin.work.chips.Load``)."""
        ch = self.facility.chips
        return self.cluster.pool.load(self.jobs.a["activity"], ch.p_scale, ch.hg)

    # ------------------------------------------------------------------ events
    def log(
        self, kind: str, target: str, detail: str, source: str = "model", ev: ScheduledEvent | None = None
    ) -> None:
        """Record an event. Applied scenario/operator events keep their arguments (raw target,
        value, duration) so a recording can be re-run with exactly the same what-ifs."""
        if ev is None:
            self._events.append((self.t_s, kind, target, detail, source, "", 0.0, 0))
        else:
            self._events.append((self.t_s, kind, target, detail, source, ev.target, ev.value, ev.duration_s))

    def log_all(self, events: Events) -> None:
        """Record the events a phase reported (``log`` of each, in one pass)."""
        if events:
            t = self.t_s
            self._events += [
                (t, kind, target, detail, "model", "", 0.0, 0) for kind, target, detail in events
            ]

    def apply(self, ev: ScheduledEvent, source: str) -> None:
        """Phase 1 for one event (target in the pool's own numbering): apply it, record it and
        the events it caused."""
        kind = ev.kind
        if kind in FACILITY_EVENT_KINDS:
            target, detail = self.facility.apply(ev, self.t_s)
            self.chip_clock = self.facility.clock  # protection may have re-clocked the chips
            self.log(kind, target, detail, source, ev)
            return
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
        self.log(kind, target, detail, source, ev)
        self.log_all(caused)

    # ------------------------------------------------------------------ step phases
    def work(self, t: int, router: routing.Router | None = None) -> WorkStep:
        """Phase 2: what runs where this step and how active it is (the services served at the
        clocks the step begins with); batch work is booked after the physics (``book``).
        ``router``: a hall's front door routes its arrivals with it (``twin.work.routing``)."""
        # The shared read-only all-ones clock: nothing capped or hot (no minimum to take).
        full = self.chip_clock is self.facility.chips.ones
        w, work_events = self.cluster.prepare(t, self.dt_s, self.chip_clock, full, router)
        self.log_all(work_events)
        return w

    def book(self, w: WorkStep, clock: npt.NDArray[np.float64], full_clock: bool = False) -> WorkStep:
        """Phase 4b: the step's batch work, booked once at the clocks the chips ran at (``clock``:
        caps and junction protection inside the step included; ``full_clock``: all of them 1),
        so work and power use one clock."""
        allocated = self.cluster.n_alloc
        w, work_events = self.cluster.book(w, self.t_s, self.dt_s, clock, full_clock)
        self._released = self.cluster.n_alloc < allocated  # a job ended (its chips worked till then)
        self.log_all(work_events)
        return w

    def after_physics(self, ph: FacilityStep) -> None:
        """Thermal trips take chips offline (their jobs are interrupted); the clocks decided here
        apply to the next step's work and power alike."""
        self.log_all(ph.events)
        if len(ph.tripped_chips):
            caused: Events = []
            outages.fail_chips(self.cluster, caused, ph.tripped_chips, -1, "thermal", self.t_s)
            self.log_all(caused)
        if len(ph.recovered_chips):
            outages.recover_thermal(self.cluster, ph.recovered_chips)
        self.chip_clock = self.facility.clock
        self._ph = ph

    # ------------------------------------------------------------------ record
    def record(self, rec: Recorder, i: int, w: WorkStep, ph: FacilityStep) -> None:
        """Phase 5: this step's rows of the pool (``twin.compose.record``). The physics' and the work's
        results are copied by their column names; what is left is derived here. The
        ``factory_ts`` row is one tuple in the order of ``FACTORY_ORDER``, each value given by
        its column's name."""
        t, dt = self.t_s, self.dt_s
        topo = self.topo
        c = topo.chips_per_us
        cl = self.cluster
        # Busy = held by a job and doing work. Only a job's chips have activity; ownership changed
        # since the physics read it only when a job ended or a thermal trip interrupted jobs.
        owner = self.chip_owner if self._released or len(ph.tripped_chips) else None
        us_busy = ph.us_busy(owner)
        us_failed = cl.failed_counts()[1]
        mean_clock, us_clock = self._clocks(ph, owner)
        phys = _PHYSICS(ph)
        row = self._pool_row(ph, phys[_FACILITY_W] * dt, us_busy, us_failed, mean_clock)
        rec.factory(i, phys + _UNITS(ph.units) + _WORK(w) + row + self._record_work(rec, w, ph))
        rec.ultraserver(
            i,
            t,
            ph.us_it,
            us_busy,
            us_failed,
            ph.us_off,
            ph.us_act / c,
            ph.us_tj_max,
            ph.us_return_c,
            us_clock,
            self.facility.racks.us_flow(self.facility.row_flow_fraction)[0],
        )
        si = self.p.chip_sample_interval_s
        if si > 0 and t % si < dt:  # a chip sample is due
            self._record_chips(rec, ph)
        self.t_s = t + dt  # the step is done: the pool's clock at its end

    def _clocks(
        self, ph: FacilityStep, owner: npt.NDArray[np.int32] | None
    ) -> tuple[float, npt.NDArray[np.float64]]:
        """The busy chips' mean clock (1 with none busy) and each UltraServer's mean clock."""
        if ph.full_clock:
            return 1.0, self._ones_us
        busy = ph.busy_chips(owner)
        mean_clock = float(ph.clock[busy].mean()) if busy.any() else 1.0
        return mean_clock, self.topo.per_us(ph.clock) / self.topo.chips_per_us

    def _pool_row(
        self,
        ph: FacilityStep,
        energy_j: float,
        us_busy: npt.NDArray[np.int64],
        us_failed: npt.NDArray[np.int64],
        mean_clock: float,
    ) -> PoolRow:
        """The columns of the ``factory_ts`` row derived here: chip and UltraServer counts and
        means, the site's conditions and what the step's ``energy_j`` cost (electricity, CO2,
        ownership)."""
        t, dt = self.t_s, self.dt_s
        topo, cl = self.topo, self.cluster
        cond, costs = ph.cond, self.costs
        add = np.add.reduce
        return PoolRow(
            time_s=t,
            chips_total=topo.chips,
            mean_clock=mean_clock,
            chips_allocated=cl.n_alloc,
            chips_busy=int(add(us_busy)),
            chips_failed=self._failed_total(us_failed),
            ultraservers_tripped=int(np.count_nonzero(ph.us_off)),
            activity=float(add(ph.us_act)) / topo.chips,
            queue_jobs=len(cl.queue),
            coolant_return_c=float(add(ph.us_return_c))
            / topo.ultraservers,  # the mean, as ``ndarray.mean`` takes it
            max_chip_temp_c=float(np.maximum.reduce(ph.us_tj_max)),
            outdoor_temp_c=cond.drybulb_c,
            outdoor_wetbulb_c=cond.wetbulb_c,
            outdoor_rh=cond.rel_humidity,
            price_usd_per_mwh=cond.price_usd_per_mwh,
            carbon_g_per_kwh=cond.carbon_g_per_kwh,
            cost_usd=energy_j / 3.6e9 * cond.price_usd_per_mwh,
            co2_kg=energy_j / 3.6e6 * cond.carbon_g_per_kwh / 1000.0,
            energy_j=energy_j,
            capex_usd=costs.capex_usd_per_s * dt,
            fixed_opex_usd=costs.fixed_opex_usd_per_s * dt,
            water_cost_usd=ph.water_l * costs.water_usd_per_l,
        )

    def _failed_total(self, us_failed: npt.NDArray[np.int64]) -> int:
        """Chips with a hardware fault (the sum of ``us_failed``, recounted when it changed)."""
        if us_failed is not self._failed_of:
            self._failed_of, self._failed_sum = us_failed, int(us_failed.sum())
        return self._failed_sum

    def _record_chips(self, rec: Recorder, ph: FacilityStep) -> None:
        """A ``chip_ts`` sample: every chip's job, activity, power, junction, health and clock."""
        rec.chips(
            self.t_s, self.chip_job_ids(), ph.act_chip, ph.chip_p, ph.chip_tj(), self.chip_hw_failed, ph.clock
        )

    def _record_work(self, rec: Recorder, w: WorkStep, ph: FacilityStep) -> WorkRow:
        """The workload columns of ``factory_ts`` the work step does not carry (``WorkRow``), and this step's ``service_ts`` rows. Energy per token: the
        facility power attributed to inference replicas (their chips' share of IT, grossed up
        by PUE)."""
        cl = self.cluster
        gross = ph.facility_power_w / ph.chip_power_w if ph.chip_power_w > 0 else 0.0  # = IT per chip W x PUE
        svc_w = serving.service_power_w(cl, ph.pw, gross)
        inf_w = float(np.add.reduce(svc_w))
        pool = cl.pool
        if self._counts_ver != pool.ver:  # free chips change only with ownership or availability
            self._counts, self._counts_ver = cl.us_counts(), pool.ver
        if w.svc:
            rec.services(self.t_s, self.dt_s, w, svc_w)
        free, drained, us_free, fragmentation = self._counts
        return WorkRow(
            chips_free=free,
            chips_drained=drained,
            ultraservers_free=us_free,
            fragmentation=fragmentation,
            failures=cl.step_failures,
            preemptions=cl.step_preemptions,
            inference_power_w=inf_w,
            inference_chips=serving.replica_chips(cl),
            energy_per_token_j=inf_w / w.tokens_per_s if w.tokens_per_s > 0 else float("nan"),
        )

    # ------------------------------------------------------------------ advances
    def recorder(self, steps: int) -> Recorder:
        """The buffers of the next ``steps`` steps, each tier due at its own interval."""
        p = self.p
        times = self.t_s + self.dt_s * np.arange(steps, dtype=np.int64)
        rec = Recorder(
            steps,
            self.topo,
            tuple(s.name for s in p.services),
            tiers={
                "ultraserver_ts": due(times, self.dt_s, p.ultraserver_interval_s),
                "row_ts": due(times, self.dt_s, p.row_interval_s),
                "hall_ts": due(times, self.dt_s, p.hall_interval_s),
            },
            times=times,
            order=FACTORY_ORDER,
            staging=self._staging,
        )
        self._staging = rec.staging
        return rec

    def frames(self, rec: Recorder, ran: int | None = None) -> Frames:
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

    def _event_rows(self) -> dict[str, object]:
        ev = self._events
        self._events = []
        return event_table(ev)


def event_table(ev: list[EventRow]) -> dict[str, object]:
    """The events table's columns from its rows."""
    t, kind, target, detail, source, arg, value, duration = zip(*ev, strict=True) if ev else ((),) * 8
    return {
        "time_s": np.array(t, dtype=np.int64),
        "kind": list(kind),
        "target": list(target),
        "detail": list(detail),
        "source": list(source),
        "arg": list(arg),
        "value": np.array(value, dtype=np.float64),
        "duration_s": np.array(duration, dtype=np.int64),
    }
