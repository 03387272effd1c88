"""A hall: the one step driver. One or several system pools on one site, one cooling plant, one
power chain and one grid connection.

Composition: each system in the hall is a homogeneous pool (``twin.compose.pool.Pool``: its topology,
work state, per-chip arrays and rack loops), so every hot path stays vectorised over that
system's chips; a hall of one system is a hall with one pool. The hall steps its pools phase by
phase and owns what they share. One step [t, t + dt):

1. events       scenario and operator events due at t. A target in the hall (row, UltraServer,
                server, chip: numbered across the hall in the order of ``[[hall.rows]]``; a
                service by name) goes to its pool with the pool's own index; plant faults and the
                facility cap to the first pool, which owns the plant; ``cooling_restore`` to every
                pool.
2. work         what runs where and how active it is: failures and repairs, drains, arrivals,
                autoscaling, scheduling, restarts, and the services at the clocks the step
                begins with (``Cluster.prepare``). The first pool is the hall's front door:
                batch jobs arrive there and ``twin.work.routing`` sends each to a pool's queue.
3. site         weather, price and carbon at t, once for the hall.
4. physics      this step's clocks and what they draw: each pool's own part
                (``Facility.step_it``: chip and IT power, caps inside the step, rack loops,
                junction protection, loop trips). A facility cap shared by several pools gives
                every busy chip of the hall one clock (``capping.shared_targets``).
   work booked  each pool's batch work of the step, once, at the clocks its chips ran at
                (``Cluster.book``: progress, checkpoints, jobs that end).
   plant        the plant once on the summed heat and the power chain once on the summed IT and
                cooling power; then each pool's clocks for the next step; thermal trips and
                recoveries go back to the work state.
5. record       each pool records its own rows with the plant's and the chain's power, water and
                losses shared in proportion to its IT power; the hall's rows are merged from
                them (by each column's rule, ``twin.spec.telemetry.Column.merge``; one pool's are the hall's), ``system_ts``
                holds the pools' own. With ``grid_interval_s``, the step's facility power within
                the step from its training gangs' iterations (``twin.compose.grid``: per gang, not per
                chip; its mean over the step is the step's power) for ``grid_ts``.

A campus (several halls under one substation) composes halls one level up (``twin.compose.campus``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from twin.compose import grid
from twin.compose.floorplan import FloorPlan, HallTopology, hall_plant, plan
from twin.compose.parts import (
    Composite,
    EventQueue,
    JobsView,
    Numbering,
    concat,
    interleave,
    merge_events,
    merge_failures,
    merge_rows,
    merge_services,
    sort_by_time,
    system_rows,
)
from twin.compose.pool import Pool
from twin.compose.record import Frames, Recorder
from twin.physics import capping, plant, power, site
from twin.physics.design import Design
from twin.physics.facility import EVENT_KINDS as FACILITY_EVENT_KINDS
from twin.physics.facility import FacilityStep, ItStep
from twin.physics.plant import PlantState
from twin.spec import rng, telemetry
from twin.spec.params import FactoryParams, ScheduledEvent, SystemRows
from twin.spec.topology import Topology
from twin.work import routing
from twin.work.jobs import JobTable

# The plant's figures every pool of a hall carries as they are (the hall's: temperatures, COP,
# free-cooling share, units); the others are shared among the pools by IT power.
_SAME = frozenset(c.name for c in telemetry.TABLES["factory_ts"] if c.merge == "same")

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


def _router(pools: list[Pool], facts: list[routing.PoolFacts], params: FactoryParams) -> routing.Router:
    """The front door's router over several pools (pool 0 draws every arrival and routes it)."""
    return routing.Router(
        [pl.cluster for pl in pools],
        facts,
        params.scheduler.routing,
        params.power,
        params.site.price_usd_per_mwh,
    )


def _numbering(pools: list[Pool]) -> Numbering:
    """The hall-wide numbering of the pools' chips, servers, UltraServers and rows."""
    return Numbering(
        {
            lv: [int(getattr(pl.topo, lv + "s")) for pl in pools]
            for lv in ("chip", "server", "ultraserver", "row")
        }
    )


class Hall(Composite):
    """The model of one hall: ``advance``, ``inject``, ``t_s``, ``design``, ``topo``, the per-chip
    arrays across its pools. ``weather_seed``: the seed of the site's weather (a campus gives
    every hall its own). ``floor``: the floor plan of ``params`` (``floorplan.plan``), as the
    scenario checks worked it out; None: worked out here."""

    def __init__(
        self, params: FactoryParams, weather_seed: int | None = None, floor: FloorPlan | None = None
    ) -> None:
        if floor is None:
            floor = plan(params)
        elif floor.hall != params.hall or len(floor.svc_pool) != len(params.services):
            raise ValueError("the floor plan given is not the plan of this hall's parameters")
        self.p = params
        self.dt_s = int(params.dt_s)
        rows: tuple[SystemRows, ...] = params.hall.pools()
        self.systems = [r.system.key for r in rows]
        k = len(rows)
        # Services: each on one pool, chosen by the routing policy (the plan's).
        facts = list(floor.facts)
        self.svc_pool = list(floor.svc_pool)
        # The hall's one plant state: every pool's facility reads it, the first pool's faults
        # move its units (``Facility.owns_plant``).
        self.plant_state = PlantState.initial(params.cooling)
        self.pools: list[Pool] = [
            Pool(pp, d, plant=self.plant_state, owns_plant=i == 0)
            for i, (pp, d) in enumerate(zip(floor.pools, floor.designs, strict=True))
        ]
        for i, pl in enumerate(self.pools):
            pl.jobs.number(k, i)
        # The front door's router (pool 0 draws every arrival and routes it); None: one pool.
        self.router = _router(self.pools, facts, params) if k > 1 else None
        # A cap shared by the pools: each pool's last step as the cap reads it
        # (``capping.basis``) and its IT target over its proportional share, handed to its
        # step as values (``capping.CapShare``).
        self._bases: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)] * k
        self._scales: list[float] = [1.0] * k
        self.num = _numbering(self.pools)
        # One pool: its own topology (servers, rows, chips); several: the hall's index arrays.
        self.topo: HallTopology | Topology = self.pools[0].topo if k == 1 else self._topology()
        # One plant design for the hall's pools and one UPS rating for its power chain.
        facs = [pl.facility for pl in self.pools]
        self.plant_design = hall_plant(facs)
        self.ups_rating_w = sum(f.design.ups_rating_w for f in facs) if k > 1 else facs[0].design.ups_rating_w
        # Global service index of each pool's services.
        self.svc_ids = [[j for j, q in enumerate(self.svc_pool) if q == i] for i in range(k)]
        self.sys = self.pools[0].sys
        self.design = self._design()
        self.site = site.SiteModel(
            params.site, rng.streams(params.seed if weather_seed is None else weather_seed).weather
        )
        self.t_s = -params.warmup_s  # the clock starts before the recording by the warm-up
        self._last_w = 0.0  # the hall's facility power, last step (0 before the first)
        self._shared_cap_w = math.inf  # the cap the systems' shares were last set for
        self.events = EventQueue(EVENT_KINDS)
        for ev in params.events:
            self.events.push(ev, "scenario")
        self.last: dict[str, float] = {}
        self._init_grid(params)

    def _init_grid(self, params: FactoryParams) -> None:
        """Sub-step power at the grid connection (``twin.compose.grid``; off unless
        grid_interval_s > 0)."""
        tau = int(params.grid_interval_s)
        if tau and self.dt_s % tau:
            raise ValueError(f"telemetry.grid_interval_s = {tau} must divide dt_s = {self.dt_s}")
        self.grid = grid.GridRecorder(tau, params.grid) if tau else None
        self.connection = grid.Connection(params.grid, self.topo.chips, tau)

    def _topology(self) -> HallTopology:
        off = self.num.off
        us_row = np.concatenate([pl.topo.us_row + off["row"][i] for i, pl in enumerate(self.pools)])
        chip_us = np.concatenate([pl.topo.chip_us + off["ultraserver"][i] for i, pl in enumerate(self.pools)])
        t0 = self.pools[0].topo
        return HallTopology(
            self.num.total("ultraserver"),
            self.num.total("chip"),
            self.num.total("row"),
            us_row.astype(np.int32),
            chip_us.astype(np.int32),
            t0.chips_per_us,
            t0.servers_per_us,
        )

    def _design(self) -> Design:
        """The hall's Design: one pool's own; for several, the first system's shape fields with
        the hall's sizes and the plant's and UPS's design values (each pool keeps its own)."""
        d0 = self.pools[0].design
        if len(self.pools) == 1:
            return d0
        v = self.plant_design
        return dataclasses.replace(
            d0,
            system="+".join(self.systems),
            accelerator="+".join(pl.acc.key for pl in self.pools),
            ultraservers=self.topo.ultraservers,
            rows=self.topo.rows,
            chips=self.topo.chips,
            design_it_w=v.design_it_w,
            facility_loop_mass_kg=v.fw_mass_kg,
            facility_design_flow_kg_s=v.fw_flow_design,
            chiller_unit_w=v.chiller_unit_w,
            ups_rating_w=self.ups_rating_w,
        )

    @property
    def pool(self) -> Pool:
        """The hall's only pool (a hall of one system)."""
        if len(self.pools) != 1:
            raise ValueError(f"a hall of {len(self.pools)} systems has no single pool")
        return self.pools[0]

    # ------------------------------------------------------------------ per-chip views

    @property
    def jobs(self) -> JobTable | JobsView:
        """The hall's job table (several pools: their tables read as one, a read-only copy)."""
        if len(self.pools) == 1:
            return self.pools[0].jobs
        return JobsView([pl.jobs for pl in self.pools])

    def _parts(self) -> list[Pool]:
        return self.pools

    def job_tables(self) -> list[JobTable]:
        return [pl.jobs for pl in self.pools]

    # ------------------------------------------------------------------ events

    def route(self, ev: ScheduledEvent) -> list[tuple[int, ScheduledEvent]]:
        """The pool(s) an event concerns, each with the event in the pool's own numbering (a hall
        of one pool: as given). ``cooling_restore`` reaches every pool."""
        kind, target = ev.kind, ev.target
        if len(self.pools) == 1:
            return [(0, ev)]
        if kind == "cooling_restore":
            return [(k, ev) for k in range(len(self.pools))]
        if kind in FACILITY_EVENT_KINDS:
            row = target if kind == "cdu_pump_failure" else (target if target.startswith("row") else "")
            if kind in ("power_cap", "cdu_pump_failure") and row:
                k, r = self.num.locate("row", int(row.split(":", 1)[-1]))
                return [(k, dataclasses.replace(ev, target=f"row:{r}" if kind == "power_cap" else str(r)))]
            return [(0, ev)]
        if kind == "inference_surge":
            names = [s.name for s in self.p.services]
            return [(self.svc_pool[names.index(target)] if target in names else 0, ev)]
        k, local_i = self.num.locate(kind.split("_", 1)[1], int(target))
        return [(k, dataclasses.replace(ev, target=str(local_i)))]

    def _apply(self, ev: ScheduledEvent, source: str) -> None:
        for k, local in self.route(ev):
            if k == 0 or ev.kind != "cooling_restore":
                self.pools[k].apply(local, source)
            else:  # the plant's restore is recorded once, by the pool that owns the plant
                self.pools[k].facility.apply(local, self.t_s)

    # ------------------------------------------------------------------ step
    def step(self, recs: list[Recorder], i: int) -> None:
        """Step ``i`` of the steps ``recs`` were begun for (module docstring)."""
        t, dt = self.t_s, self.dt_s
        pools = self.pools
        for ev, source in self.events.due(t):
            self._apply(ev, source)
        works = [pl.work(t, self.router if k == 0 else None) for k, pl in enumerate(pools)]
        cond = self.site.step(t, dt)
        shared = len(pools) > 1
        if shared and pools[0].facility.cap.facility_w != self._shared_cap_w:
            # A cap that arrived or changed since the last step: its shares from that step's figures.
            self._share_cap(self._bases, self._last_w)
        parts = [self._step_it(k, pl, cond) for k, pl in enumerate(pools)]
        # The step's clocks are known (caps and protection inside the step): its batch work, once.
        works = [
            pl.book(w, p.heat.clock, p.heat.full_clock) for pl, w, p in zip(pools, works, parts, strict=True)
        ]
        it_w = sum(p.it_w for p in parts)
        plant_out = plant.run(
            self.plant_design,
            self.plant_state,
            self._cdu_flow(),
            sum(p.to_fw_w for p in parts),
            sum(p.air_heat_w for p in parts),
            cond,
            dt,
        )
        cooling_w = plant_out.cooling_w
        losses = power.chain_losses(it_w, cooling_w, self.ups_rating_w, self.p.power)
        facility_w = power.facility_w(it_w, cooling_w, losses.total_w)
        if shared:
            bases = [
                capping.basis(
                    pl.facility,
                    p.load,
                    p.heat.clock,
                    p.heat.full_clock,
                    p.it_w,
                    p.heat.pw.us_gact,
                    pl.facility.chips.p_scale,
                )
                for pl, p in zip(pools, parts, strict=True)
            ]
            self._share_cap(bases, facility_w)
        steps = self._finish(parts, plant_out, losses, it_w, facility_w, cond)
        if self.grid is not None:  # the step's waveform, from its gangs as booked
            factor = grid.marginal_factor(it_w, cooling_w, self.ups_rating_w, self.p.power)
            self.grid.step(pools, [p.heat.clock for p in parts], t, dt, facility_w, factor)
        self._last_w = facility_w
        for pl, rec, ph, w in zip(pools, recs, steps, works, strict=True):
            pl.after_physics(ph)
            pl.record(rec, i, w, ph)
        self.t_s = t + dt

    def _step_it(self, k: int, pl: Pool, cond: site.Conditions) -> ItStep:
        # A run's first step has no last step to convert a facility cap into IT watts with: it
        # asks the plant and the chain what this step's IT power would cost instead.
        first = cond if self._last_w == 0.0 else None
        return pl.facility.step_it(pl.utilisation(), self.t_s, self.dt_s, first, self._share(k))

    def _share(self, k: int) -> capping.CapShare | None:
        """Pool ``k``'s part of the hall's cap for its step (None: a hall of one pool). The
        hall's cap is the first pool's, after its timed effects at the step's start: the
        first pool's step takes its own, every other pool's the first's."""
        if len(self.pools) == 1:
            return None
        cap = None if k == 0 else self.pools[0].facility.cap.facility_w
        return capping.CapShare(cap, self._scales[k])

    def _cdu_flow(self) -> float:
        """The UltraServer loops' summed CDU flow fraction (what the CDU pumps drive) [-]."""
        if len(self.pools) == 1:
            return self.pools[0].facility.cdu_flow()
        rff = np.concatenate([pl.facility.row_flow_fraction for pl in self.pools])
        return plant.cdu_flow(self.plant_design, rff, self.topo.us_row)

    def _finish(
        self,
        parts: list[ItStep],
        plant_out: plant.PlantResult,
        losses: power.ChainLosses,
        it_w: float,
        facility_w: float,
        cond: site.Conditions,
    ) -> list[FacilityStep]:
        """Each pool's clocks for the next step and its record of this one, with the plant's
        and the chain's power shared in proportion to its IT power."""
        pools = self.pools
        if len(pools) == 1:
            return [pools[0].facility.finish_step(parts[0], plant_out, losses, facility_w, cond)]
        design = [pl.facility.plant_design.design_it_w for pl in pools]
        out = []
        for k, (pl, part) in enumerate(zip(pools, parts, strict=True)):
            share = part.it_w / it_w if it_w > 0 else design[k] / sum(design)
            own = plant_out.share(share, _SAME)
            pl_losses = power.ChainLosses(
                losses.pdu_w * share, losses.ups_w * share, losses.transformer_w * share
            )
            out.append(pl.facility.finish_step(part, own, pl_losses, facility_w, cond, self._share(k)))
        return out

    def _share_cap(self, bases: list[tuple[float, float, float]], facility_w: float) -> None:
        """One cap for the hall's pools: every busy chip under it gets the same clock
        (``capping.shared_targets``). Each pool's IT target, from a step's ``bases`` and the
        hall's facility power then, as a scale on its proportional share of the cap, which its
        next clocks and the check inside the next step apply."""
        cap = self._shared_cap_w = self.pools[0].facility.cap.facility_w
        self._bases = bases
        if not (math.isfinite(cap) and facility_w > 0):
            self._scales = [1.0] * len(bases)
            return
        targets = capping.shared_targets(bases, cap * sum(b[0] for b in bases) / facility_w)
        props = [cap * b[0] / facility_w for b in bases]
        self._scales = [tg / prop if prop > 0 else 1.0 for tg, prop in zip(targets, props, strict=True)]

    # ------------------------------------------------------------------ a campus's share of its cap
    def set_site_cap(self, cap_w: float, reclock: bool) -> None:
        """The campus's share of its cap for this hall from the next clocks on. One pool solves
        its next clocks again for it (``reclock``: the share moved after the step); several
        pools re-share the cap among them at the start of the next step."""
        fac = self.pools[0].facility
        fac.set_site_cap(cap_w)
        if reclock and len(self.pools) == 1:
            fac.reclock_for_site_cap()

    def cap_basis(self) -> tuple[float, float, float]:
        """The hall's last step as a shared cap reads it (``capping.basis``, summed over pools)."""
        bases = self._bases if len(self.pools) > 1 else [self.pools[0].facility.cap.basis]
        it, now, full = (sum(b) for b in zip(*bases, strict=True))
        return it, now, full

    @staticmethod
    def recorded(recs: list[Recorder], i: int, col: str) -> float:
        """A factory_ts column of step ``i`` summed over the pools (IT or facility power)."""
        return float(sum(r.value(i, col) for r in recs))

    # ------------------------------------------------------------------ public
    def advance(self, steps: int, stop: Callable[[], bool] | None = None) -> Frames:
        """Run ``steps`` steps; return their telemetry frames (``table -> column -> array``, column
        names as in ``twin.spec.telemetry``; ``run_id`` is added by storage). ``stop`` is asked after
        each step: when it returns true, the advance ends there (the frames hold the steps run)."""
        recs = self.begin(steps)
        ran = run_steps(self.step, recs, steps, stop)
        frames = self.end(recs, ran)
        if "grid_ts" in frames:  # a hall of its own is its grid connection
            frames["grid_ts"] = grid.connection_rows([frames["grid_ts"]], self.connection)
        return frames

    def begin(self, steps: int) -> list[Recorder]:
        """Each pool's buffers for the next ``steps`` steps (a campus drives halls so)."""
        return [pl.recorder(steps) for pl in self.pools]

    def end(self, recs: list[Recorder], ran: int) -> Frames:
        """The frames of the first ``ran`` steps recorded in ``recs``."""
        per = [pl.frames(rec, ran) for pl, rec in zip(self.pools, recs, strict=True)]
        frames = self._merge(per, ran)
        if ran:
            self.last = {k: float(v[-1]) for k, v in frames["factory_ts"].items()}
        if self.grid is not None:  # this hall's sub-step power (hall_id and the connection: the caller's)
            frames["grid_ts"] = self.grid.take(self.t_s - ran * self.dt_s, ran)
        return frames

    # ------------------------------------------------------------------ merging the pools' frames
    def _merge(self, per: list[Frames], steps: int) -> Frames:
        """The hall's frames from its pools' (one pool's are the hall's)."""
        num = self.num
        factory = [f["factory_ts"] for f in per]
        out: Frames = {
            "factory_ts": merge_rows("factory_ts", factory),
            "system_ts": system_rows(factory, self.systems),
        }
        out["ultraserver_ts"] = interleave(
            [f["ultraserver_ts"] for f in per], (("ultraserver_id", "ultraserver"), ("row_id", "row")), num
        )
        out["row_ts"] = interleave([f["row_ts"] for f in per], (("row_id", "row"),), num)
        out["hall_ts"] = merge_rows("hall_ts", [f["hall_ts"] for f in per])
        if "chip_ts" in per[0]:
            out["chip_ts"] = interleave(
                [f["chip_ts"] for f in per], (("chip_id", "chip"), ("ultraserver_id", "ultraserver")), num
            )
        if self.p.services:
            svc = [f.get("service_ts") for f in per]
            out["service_ts"] = (
                svc[0] if len(per) == 1 and svc[0] is not None else merge_services(svc, self.svc_ids, steps)
            )
        if len(per) == 1:
            for table in ("jobs", "events", "failures", "interruptions"):
                out[table] = per[0][table]
            return out
        out["jobs"] = concat([f["jobs"] for f in per])
        out["events"] = merge_events([f["events"] for f in per], num)
        out["failures"] = merge_failures([f["failures"] for f in per], num)
        out["interruptions"] = sort_by_time(concat([f["interruptions"] for f in per]))
        return out


def run_steps(step: Callable[[Any, int], None], rec: Any, steps: int, stop: Callable[[], bool] | None) -> int:
    """Run ``step(rec, i)`` for i < ``steps``, asking ``stop`` after each (not after the last);
    returns how many ran."""
    for i in range(steps):
        step(rec, i)
        if stop is not None and i + 1 < steps and stop():
            return i + 1
    return steps
