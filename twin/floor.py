"""A mixed floor: rows of different systems on one plant, one power chain and one grid connection.

Composition: each system on the floor is a homogeneous pool, a ``twin.sim.Simulation`` of its own
(its Topology, work state, per-chip arrays and rack loops), so every hot path stays vectorised
over that system's chips. The floor drives the pools phase by phase and owns what they share:

1. events       a target on the floor (row, UltraServer, server, chip: numbered across the
                floor in the order of ``[[hall.rows]]``; a service by name) goes to its pool
                with the pool's own index; plant faults and the facility cap to the first pool,
                which owns the plant; ``cooling_restore`` to every pool.
2. work         each pool's work step at its clocks. The first pool is the floor's front door:
                batch jobs arrive there and ``twin.routing`` sends each to a pool's queue.
3. site         once for the floor (the first pool's site model, seeded as the floor).
4. physics      each pool's own part (``Facility.step_it``: chip and IT power, rack loops,
                protection, loop trips); then the plant once on the summed heat and the power
                chain once on the summed IT and cooling power; then each pool's clocks for the
                next step. A facility cap is shared so that every busy chip of the floor runs
                at one clock (``capping.shared_targets``): each pool's chips slow to meet their
                share of the floor's IT target, inside the step when its load rose.
5. record       each pool records its own rows with the plant's and the chain's power, water
                and losses shared in proportion to its IT power; the floor's rows are merged
                from them (``twin.telemetry.FLOOR_MERGE``), ``system_ts`` holds the pools' own.

A campus (several halls under one substation) composes the same way one level up
(``twin.campus``).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from twin import capping, plant, power, routing, telemetry
from twin.design import Design, derive
from twin.facility import EVENT_KINDS as FACILITY_EVENT_KINDS
from twin.facility import PlantState
from twin.params import FactoryParams, HallParams, ScheduledEvent, SystemRows
from twin.sim import EVENT_KINDS, Frames, Simulation, run_steps

if TYPE_CHECKING:
    from twin.campus import Campus

# The largest number of different systems on one floor (each is a pool with its own arrays).
MAX_SYSTEMS = 8


def build(p: FactoryParams) -> Simulation | Floor | Campus:
    """The model of a site: a ``Simulation`` for a hall of one system, a ``Floor`` for a hall of
    several, a ``twin.campus.Campus`` for several halls."""
    if p.halls:
        from twin.campus import Campus

        return Campus(p)
    return Floor(p) if len(p.hall.rows) > 1 else Simulation(p)


def check(hall: HallParams) -> None:
    """A mixed floor's rows make sense together (ValueError naming ``hall.rows``)."""
    rows = hall.rows
    if len(rows) > MAX_SYSTEMS:
        raise ValueError(f"hall.rows: {len(rows)} systems; a floor may mix at most {MAX_SYSTEMS}")
    keys = [r.system.key for r in rows]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"hall.rows: system {dup[0]!r} appears twice; give it once with its total count")
    liquid = {r.system.liquid_fraction > 0 for r in rows}
    if len(liquid) > 1:
        raise ValueError(
            "hall.rows: liquid-cooled and air-cooled systems on one floor are not modelled "
            "(one plant serves either CDUs or CRAHs first); keep one kind per floor"
        )


def pool_facts(p: FactoryParams) -> list[routing.PoolFacts]:
    """What routing needs of each system on the floor (its design sizes its TCO rates)."""
    out = []
    for r in p.hall.pools():
        hp = HallParams(r.system, r.accelerator, r.ultraservers, r.ultraservers_per_row)
        d = derive(dataclasses.replace(p, hall=hp))
        out.append(routing.pool_facts(r.system, r.accelerator, r.ultraservers, d.design_it_w, p.tco))
    return out


def service_pools(p: FactoryParams, facts: list[routing.PoolFacts]) -> list[int]:
    """The pool of each service (ValueError naming ``services[i]`` when none can hold it)."""
    out = []
    for i, s in enumerate(p.services):
        try:
            out.append(routing.service_pool(s, facts, p.scheduler.routing, p.power, p.site.price_usd_per_mwh))
        except ValueError as e:
            raise ValueError(f"services[{i}]: {e}") from None
    return out


def _pool_seed(seed: int, k: int) -> int:
    """Pool ``k``'s seed: the floor's for the first pool (a one-system floor is that system's
    hall), an independent child of it for the others."""
    if k == 0:
        return seed
    return int(np.random.SeedSequence([seed, k]).generate_state(1, np.uint64)[0] >> np.uint64(1))


@dataclasses.dataclass(frozen=True)
class FloorTopology:
    """The floor's sizes and index arrays across its pools (UltraServers and rows numbered pool
    by pool, in the order of ``[[hall.rows]]``)."""

    ultraservers: int
    chips: int
    rows: int
    us_row: npt.NDArray[np.int32]
    chip_us: npt.NDArray[np.int32]
    # The first system's shape (views that draw one grid of UltraServers use it).
    chips_per_us: int = 0
    servers_per_us: int = 0


class _PlantView:
    """The plant as the whole floor presents it to ``twin.plant``: the first pool's plant state
    and the floor's design values (sums of the pools'; the CDU pump figure is the mean per
    UltraServer, the plant's pumps scale it by the number of flowing UltraServers)."""

    def __init__(self, pools: list[Simulation], us_row: npt.NDArray[np.int32]) -> None:
        f0 = pools[0].facility
        facs = [pl.facility for pl in pools]
        self._facs = facs
        self.cp = f0.cp
        self.plant: PlantState = f0.plant
        self.lf = max(f.lf for f in facs)
        self.fw_setpoint_c = f0.fw_setpoint_c
        self.econ_unit_effectiveness = f0.econ_unit_effectiveness
        self.design_it_w = sum(f.design_it_w for f in facs)
        self.design_liquid_w = sum(f.design_liquid_w for f in facs)
        self.fw_flow_design = sum(f.fw_flow_design for f in facs)
        self.fw_mass_kg = sum(f.fw_mass_kg for f in facs)
        self.fw_pump_design_w = sum(f.fw_pump_design_w for f in facs)
        self.fan_design_w = sum(f.fan_design_w for f in facs)
        self.ups_rating_w = sum(f.ups_rating_w for f in facs)
        cp = self.cp
        self.chiller_unit_w = self.design_it_w / max(cp.chiller_units - cp.chiller_redundancy, 1)
        nus = sum(f.topo.ultraservers for f in facs)
        self.cdu_pump_design_w = (
            f0.cdu_pump_design_w
            if len(facs) == 1
            else sum(f.cdu_pump_design_w * f.topo.ultraservers for f in facs) / nus
        )
        self.topo = FloorTopology(nus, 0, 0, us_row, np.zeros(0, dtype=np.int32))

    @property
    def row_flow_fraction(self) -> npt.NDArray[np.float64]:
        return np.concatenate([f.row_flow_fraction for f in self._facs])


class _JobsView:
    """The pools' job tables concatenated, for readers of ``Simulation.jobs`` (``a``, ``names``,
    ``n``): a copy, taken when asked."""

    def __init__(self, pools: list[Simulation]) -> None:
        tabs = [pl.jobs for pl in pools]
        self.n = sum(t.n for t in tabs)
        self.names = [x for t in tabs for x in t.names[: t.n]]
        self.precision = [x for t in tabs for x in t.precision[: t.n]]
        self.a = {k: np.concatenate([t.a[k][: t.n] for t in tabs]) for k in tabs[0].a}


_TARGET_RE = re.compile(r"^(row|ultraserver|server|chip):([0-9]+)$")


class Floor:
    """A mixed floor with the public face of ``twin.sim.Simulation`` (``advance``, ``inject``,
    ``t_s``, ``design``, ``topo``, the per-chip arrays)."""

    def __init__(self, params: FactoryParams) -> None:
        check(params.hall)
        self.p = params
        self.dt_s = int(params.dt_s)
        rows: tuple[SystemRows, ...] = params.hall.pools()
        self.systems = [r.system.key for r in rows]
        k = len(rows)
        # Services: each on one pool, chosen by the routing policy.
        facts = pool_facts(params)
        policy = params.scheduler.routing
        price = params.site.price_usd_per_mwh
        self.svc_pool = service_pools(params, facts)
        self.pools: list[Simulation] = []
        for i, r in enumerate(rows):
            hp = HallParams(r.system, r.accelerator, r.ultraservers, r.ultraservers_per_row)
            training = params.training
            if i > 0:  # the front door (pool 0) draws every arrival and routes it
                training = dataclasses.replace(training, arrivals_per_day=0.0, trace=None)
            pp = dataclasses.replace(
                params,
                hall=hp,
                seed=_pool_seed(params.seed, i),
                training=training,
                services=tuple(s for s, q in zip(params.services, self.svc_pool, strict=True) if q == i),
                events=(),
            )
            self.pools.append(Simulation(pp))
        for i, pl in enumerate(self.pools):
            pl.jobs.number(k, i)
            if i > 0:
                pl.facility.plant = self.pools[0].facility.plant
                pl.facility.owns_plant = False
        front = self.pools[0].cluster
        front.router = routing.Router([pl.cluster for pl in self.pools], facts, policy, params.power, price)
        # Offsets of each pool's chips, servers, UltraServers and rows on the floor.
        self.off: dict[str, list[int]] = {}
        for level in ("chip", "server", "ultraserver", "row"):
            sizes = [int(getattr(pl.topo, level + "s")) for pl in self.pools]
            self.off[level] = [int(x) for x in np.concatenate([[0], np.cumsum(sizes)])]
        us_row = np.concatenate([pl.topo.us_row + self.off["row"][i] for i, pl in enumerate(self.pools)])
        chip_us = np.concatenate(
            [pl.topo.chip_us + self.off["ultraserver"][i] for i, pl in enumerate(self.pools)]
        )
        self.topo = FloorTopology(
            self.off["ultraserver"][-1],
            self.off["chip"][-1],
            self.off["row"][-1],
            us_row.astype(np.int32),
            chip_us.astype(np.int32),
            self.pools[0].topo.chips_per_us,
            self.pools[0].topo.servers_per_us,
        )
        self.plant_view = _PlantView(self.pools, self.topo.us_row)
        # Global service index of each pool's services.
        self.svc_ids = [[j for j, q in enumerate(self.svc_pool) if q == i] for i in range(k)]
        self.sys = self.pools[0].sys
        self.design = self._design()
        self.t_s = 0
        self._last_w = 0.0  # the floor's facility power, last step (0 before the first)
        self._shared_cap_w = math.inf  # the cap the systems' shares were last set for
        self._pending: list[tuple[int, int, ScheduledEvent, str]] = []
        self._event_seq = 0
        for ev in params.events:
            self._push_event(ev, "scenario")
        self.last: dict[str, float] = {}

    def _design(self) -> Design:
        """The floor's Design: the first system's shape fields with the floor's sizes and the
        plant's and UPS's design values (the per-system designs are each pool's)."""
        d0 = self.pools[0].design
        v = self.plant_view
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
            ups_rating_w=v.ups_rating_w,
        )

    # ------------------------------------------------------------------ per-chip views
    @property
    def chip_clock(self) -> npt.NDArray[np.float64]:
        return np.concatenate([pl.chip_clock for pl in self.pools])

    @property
    def chip_power(self) -> npt.NDArray[np.float64]:
        return np.concatenate([pl.chip_power for pl in self.pools])

    @property
    def chip_activity(self) -> npt.NDArray[np.float64]:
        return np.concatenate([pl.chip_activity for pl in self.pools])

    @property
    def chip_tj(self) -> npt.NDArray[np.float64]:
        return np.concatenate([pl.chip_tj for pl in self.pools])

    @property
    def chip_hw_failed(self) -> npt.NDArray[np.bool_]:
        return np.concatenate([pl.chip_hw_failed for pl in self.pools])

    def chip_job_ids(self) -> npt.NDArray[np.int32]:
        return np.concatenate([pl.chip_job_ids() for pl in self.pools])

    @property
    def jobs(self) -> _JobsView:
        """The floor's job tables read as one (slots of each pool in turn); read-only."""
        return _JobsView(self.pools)

    def queue_view(self, limit: int = 50) -> list[tuple[int, str, int, int]]:
        rows = [r for pl in self.pools for r in pl.queue_view(limit)]
        return sorted(rows, key=lambda r: -r[3])[:limit]

    # ------------------------------------------------------------------ events
    def _push_event(self, ev: ScheduledEvent, source: str) -> None:
        if ev.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {ev.kind!r}; expected one of {', '.join(EVENT_KINDS)}")
        heapq.heappush(self._pending, (int(ev.time_s), self._event_seq, ev, source))
        self._event_seq += 1

    def inject(self, kind: str, target: str = "", value: float = 0.0, duration_s: int = 0) -> ScheduledEvent:
        """Queue an operator event (targets numbered across the floor); applied at the next step."""
        ev = ScheduledEvent(self.t_s, kind, str(target), float(value), int(duration_s))
        self._push_event(ev, "operator")
        return ev

    def _locate(self, level: str, index: int) -> tuple[int, int]:
        """(pool, index in the pool) of a floor-wide index at ``level``."""
        off = self.off[level]
        if not 0 <= index < off[-1]:
            raise ValueError(f"{level} {index} out of range 0..{off[-1] - 1}")
        k = int(np.searchsorted(off, index, side="right")) - 1
        return k, index - off[k]

    def _apply(self, ev: ScheduledEvent, source: str) -> None:
        """Hand an event to the pool(s) it concerns, in the pool's own numbering."""
        kind, target = ev.kind, ev.target
        if kind == "cooling_restore":
            self.pools[0]._record_events(self.pools[0]._apply(ev, source))
            for pl in self.pools[1:]:
                pl.facility.apply(ev, self.t_s)
            return
        if kind in FACILITY_EVENT_KINDS:
            row = target if kind == "cdu_pump_failure" else (target if target.startswith("row") else "")
            if kind in ("power_cap", "cdu_pump_failure") and row:
                k, r = self._locate("row", int(row.split(":", 1)[-1]))
                local = f"row:{r}" if kind == "power_cap" else str(r)
                pl = self.pools[k]
                pl._record_events(pl._apply(dataclasses.replace(ev, target=local), source))
                return
            self.pools[0]._record_events(self.pools[0]._apply(ev, source))
            return
        if kind == "inference_surge":
            names = [s.name for s in self.p.services]
            k = self.svc_pool[names.index(target)] if target in names else 0
            self.pools[k]._record_events(self.pools[k]._apply(ev, source))
            return
        level = kind.split("_", 1)[1]
        k, local_i = self._locate(level, int(target))
        pl = self.pools[k]
        pl._record_events(pl._apply(dataclasses.replace(ev, target=str(local_i)), source))

    # ------------------------------------------------------------------ step
    def _step(self, recs: list[Any], i: int) -> None:
        t, dt = self.t_s, self.dt_s
        pools = self.pools
        while self._pending and self._pending[0][0] <= t:
            _, _, ev, source = heapq.heappop(self._pending)
            self._apply(ev, source)
        clocks = [pl.chip_clock for pl in pools]
        works = [pl._work(t, c) for pl, c in zip(pools, clocks, strict=True)]
        cond = pools[0].site.step(t, dt)
        if pools[0].facility.facility_cap_w != self._shared_cap_w:
            # A cap that arrived or changed since the last step: its shares from that step's figures.
            self._share_cap([pl.facility.cap_basis for pl in pools], self._last_w)
        parts = []
        for k, pl in enumerate(pools):
            if k:  # the floor's cap (the first system's, after its timed effects at t) binds every system
                pl.facility.facility_cap_w = pools[0].facility.facility_cap_w
            parts.append(pl.facility.step_it(pl._utilisation(), ~pl.chip_failed, t, dt))
        it_w = sum(p.it_w for p in parts)
        plant_out = plant.plant_step(
            cast(Any, self.plant_view),
            sum(p.to_fw_w for p in parts),
            sum(p.air_heat_w for p in parts),
            cond,
            dt,
        )
        cooling_w = plant_out["chiller_w"] + plant_out["pumps_w"] + plant_out["fans_w"]
        losses = power.chain_losses(it_w, cooling_w, self.plant_view.ups_rating_w, self.p.power)
        facility_w = it_w + cooling_w + losses.total_w
        cap = pools[0].facility.facility_cap_w
        bases = [
            capping.basis(pl.facility, p.util, p.heat.clock, p.heat.full_clock, p.it_w, p.heat.pw.us_act)
            for pl, p in zip(pools, parts, strict=True)
        ]
        self._share_cap(bases, facility_w)
        self._last_w = facility_w
        design = [pl.facility.design_it_w for pl in pools]
        for k, (pl, part) in enumerate(zip(pools, parts, strict=True)):
            share = part.it_w / it_w if it_w > 0 else design[k] / sum(design)
            shared = {
                key: (v if key in ("free_fraction", "cop", *plant.UNIT_COLUMNS) else v * share)
                for key, v in plant_out.items()
            }
            pl_losses = power.ChainLosses(
                losses.pdu_w * share, losses.ups_w * share, losses.transformer_w * share
            )
            pl.facility.facility_cap_w = cap
            ph = pl.facility.finish_step(part, shared, pl_losses, facility_w, cond)
            w = pl._after_physics(ph, works[k], clocks[k])
            pl._record(recs[k], i, w, ph)
            pl.t_s = t + dt
        self.t_s = t + dt

    def _share_cap(self, bases: list[tuple[float, float, float]], facility_w: float) -> None:
        """One cap for the floor: every busy chip under it gets the same clock
        (``capping.shared_targets``). Each system's IT target, from a step's ``bases`` and the
        floor's facility power then, as a scale on its proportional share of the cap, which its
        next clocks and the check inside the next step apply."""
        cap = self._shared_cap_w = self.pools[0].facility.facility_cap_w
        for pl, b in zip(self.pools, bases, strict=True):
            pl.facility.cap_basis = b
        if not (math.isfinite(cap) and facility_w > 0):
            for pl in self.pools:
                pl.facility.cap_it_scale = 1.0
            return
        targets = capping.shared_targets(bases, cap * sum(b[0] for b in bases) / facility_w)
        for pl, b, tg in zip(self.pools, bases, targets, strict=True):
            prop = cap * b[0] / facility_w
            pl.facility.cap_it_scale = tg / prop if prop > 0 else 1.0

    # ------------------------------------------------------------------ public
    def advance(self, steps: int, stop: Callable[[], bool] | None = None) -> Frames:
        """Run ``steps`` steps; return the floor's telemetry frames. ``stop`` as for
        ``Simulation.advance`` (asked after each step; the frames hold the steps run)."""
        recs = self.begin(steps)
        ran = run_steps(self._step, recs, steps, stop)
        return self.end(recs, ran)

    def refresh_jobs(self) -> None:
        """As ``Simulation.refresh_jobs``, for every pool."""
        for pl in self.pools:
            pl.refresh_jobs()

    def begin(self, steps: int) -> list[Any]:
        """Each pool's buffers for the next ``steps`` steps (``twin.campus`` drives halls so)."""
        return [pl._recorder(steps) for pl in self.pools]

    def step(self, recs: list[Any], i: int) -> None:
        self._step(recs, i)

    def end(self, recs: list[Any], ran: int) -> Frames:
        """The frames of the first ``ran`` steps recorded in ``recs``."""
        per = [pl._frames(rec, ran) for pl, rec in zip(self.pools, recs, strict=True)]
        frames = self._merge(per, ran)
        if ran:
            self.last = {k: float(v[-1]) for k, v in frames["factory_ts"].items()}
        return frames

    # ------------------------------------------------------------------ merging the pools' frames
    def _merge(self, per: list[Frames], steps: int) -> Frames:
        out: Frames = {}
        factory = [f["factory_ts"] for f in per]
        out["factory_ts"] = merge_factory(factory)
        out["system_ts"] = telemetry.system_rows(factory, self.systems)
        for table, ids in (
            ("ultraserver_ts", (("ultraserver_id", "ultraserver"), ("row_id", "row"))),
            ("row_ts", (("row_id", "row"),)),
        ):
            out[table] = self._interleave([f[table] for f in per], ids)
        out["hall_ts"] = _merge_hall([f["hall_ts"] for f in per])
        if "chip_ts" in per[0]:
            out["chip_ts"] = self._interleave(
                [f["chip_ts"] for f in per], (("chip_id", "chip"), ("ultraserver_id", "ultraserver"))
            )
        if self.p.services:
            out["service_ts"] = self._services(per, steps)
        out["jobs"] = _concat([f["jobs"] for f in per])
        out["events"] = self._events([f["events"] for f in per])
        fails = []
        for k, f in enumerate(per):
            fr = dict(f["failures"])
            fr["target_id"] = np.array(
                [int(x) + self.off[lv][k] for x, lv in zip(fr["target_id"], fr["level"], strict=True)],
                dtype=np.int32,
            )
            fails.append(fr)
        out["failures"] = _sort_by_time(_concat(fails))
        out["interruptions"] = _sort_by_time(_concat([f["interruptions"] for f in per]))
        return out

    def _interleave(self, frames: list[dict[str, Any]], ids: tuple[tuple[str, str], ...]) -> dict[str, Any]:
        """Rows of the pools' per-entity tables, time major: every pool's rows of one recorded
        time, in floor order, then the next; entity ids shifted to the floor's numbering."""
        n = [len(pl_frame["time_s"]) for pl_frame in frames]
        slots = len(np.unique(frames[0]["time_s"])) if n[0] else 0
        out: dict[str, Any] = {}
        for col in frames[0]:
            parts = []
            for k, f in enumerate(frames):
                a = np.asarray(f[col])
                for name, level in ids:
                    if col == name:
                        a = a + np.asarray(self.off[level][k], dtype=a.dtype)
                parts.append(a.reshape(slots, -1) if slots else a.reshape(0, 0))
            out[col] = (
                np.concatenate(parts, axis=1).ravel()
                if slots
                else np.concatenate([np.asarray(f[col]) for f in frames])
            )
        return out

    def _services(self, per: list[Frames], steps: int) -> dict[str, Any]:
        ns = len(self.p.services)
        frames = [(k, f["service_ts"]) for k, f in enumerate(per) if "service_ts" in f]
        out: dict[str, Any] = {}
        for col in frames[0][1]:
            if col == "service":
                grid = np.empty((steps, ns), dtype=object)
            else:
                grid = np.zeros((steps, ns), dtype=np.asarray(frames[0][1][col]).dtype)
            for k, f in frames:
                grid[:, self.svc_ids[k]] = np.asarray(f[col], dtype=grid.dtype).reshape(
                    steps, len(self.svc_ids[k])
                )
            out[col] = list(grid.ravel()) if col == "service" else grid.ravel()
        out["service_id"] = np.tile(np.arange(ns, dtype=np.int32), steps)
        return out

    def _events(self, evs: list[dict[str, Any]]) -> dict[str, Any]:
        rows = []
        for k, e in enumerate(evs):
            for r in range(len(e["time_s"])):
                kind = e["kind"][r]
                rows.append(
                    (
                        int(e["time_s"][r]),
                        kind,
                        self._global_target(e["target"][r], k),
                        e["detail"][r],
                        e["source"][r],
                        self._global_arg(kind, e["arg"][r], k),
                        float(e["value"][r]),
                        int(e["duration_s"][r]),
                    )
                )
        rows.sort(key=lambda r: r[0])
        return {
            "time_s": np.array([r[0] for r in rows], dtype=np.int64),
            "kind": [r[1] for r in rows],
            "target": [r[2] for r in rows],
            "detail": [r[3] for r in rows],
            "source": [r[4] for r in rows],
            "arg": [r[5] for r in rows],
            "value": np.array([r[6] for r in rows], dtype=np.float64),
            "duration_s": np.array([r[7] for r in rows], dtype=np.int64),
        }

    def _global_target(self, target: str, k: int) -> str:
        m = _TARGET_RE.match(target)
        if m is None:
            return target
        return f"{m.group(1)}:{int(m.group(2)) + self.off[m.group(1)][k]}"

    def _global_arg(self, kind: str, arg: str, k: int) -> str:
        """An event's argument as given, in the floor's numbering (for re-runs)."""
        if not arg:
            return arg
        if kind == "power_cap" or kind == "cdu_pump_failure":
            if arg.startswith("row:"):
                return self._global_target(arg, k)
            return str(int(arg) + self.off["row"][k]) if kind == "cdu_pump_failure" and arg.isdigit() else arg
        if "_" in kind and kind.split("_", 1)[1] in ("chip", "server", "ultraserver") and arg.isdigit():
            return str(int(arg) + self.off[kind.split("_", 1)[1]][k])
        return arg


def merge_factory(rows: list[dict[str, Any]], rules: dict[str, str] | None = None) -> dict[str, Any]:
    """The floor's ``factory_ts`` from its systems' rows (``rules``: ``twin.telemetry.FLOOR_MERGE``
    unless given, as a campus gives ``CAMPUS_MERGE``)."""
    out: dict[str, Any] = {}
    rules = telemetry.FLOOR_MERGE if rules is None else rules
    for c in telemetry.TABLES["factory_ts"]:
        if c.name not in rows[0]:
            continue
        rule = rules.get(c.name, "sum")
        stack = np.stack([r[c.name] for r in rows])
        if rule == "same":
            out[c.name] = stack[0]
        elif rule == "max":
            out[c.name] = stack.max(axis=0)
        elif rule == "sum":
            out[c.name] = stack.sum(axis=0).astype(stack.dtype)
    for name, rule in rules.items():
        if name not in rows[0]:
            continue
        if rule.startswith("ratio:"):
            num, den = rule[6:].split("/")
            with np.errstate(divide="ignore", invalid="ignore"):
                out[name] = np.where(out[den] > 0, out[num] / out[den], np.nan)
        elif rule.startswith("mean:"):
            wcol = rule[5:]
            v = np.stack([r[name] for r in rows]).astype(np.float64)
            w = np.stack([r[wcol] for r in rows]).astype(np.float64)
            tot = w.sum(axis=0)
            if len(rows) == 1:
                mean = v[0]
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    mean = np.where(tot > 0, (v * w).sum(axis=0) / tot, v.mean(axis=0))
            out[name] = mean.astype(np.asarray(rows[0][name]).dtype)
    return {c.name: out[c.name] for c in telemetry.TABLES["factory_ts"] if c.name in out}


def _merge_hall(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The hall tier over the floor: counts and power summed, temperature max, activity, return
    temperature and clock averaged over UltraServers."""
    out: dict[str, Any] = {}
    nus = np.stack([r["ultraservers"] for r in rows]).astype(np.float64)
    for col in rows[0]:
        stack = np.stack([r[col] for r in rows])
        if col in ("time_s", "hall_id"):
            out[col] = stack[0]
        elif col == "max_chip_temp_c":
            out[col] = stack.max(axis=0)
        elif col in ("activity", "coolant_return_c", "clock"):
            out[col] = ((stack * nus).sum(axis=0) / np.maximum(nus.sum(axis=0), 1)).astype(stack.dtype)
        else:
            out[col] = stack.sum(axis=0).astype(stack.dtype)
    return out


def _concat(frames: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in frames[0]:
        if isinstance(frames[0][col], list):
            out[col] = [x for f in frames for x in f[col]]
        else:
            out[col] = np.concatenate([np.asarray(f[col]) for f in frames])
    return out


def _sort_by_time(f: dict[str, Any]) -> dict[str, Any]:
    order = np.argsort(np.asarray(f["time_s"]), kind="stable")
    return {k: ([v[i] for i in order] if isinstance(v, list) else np.asarray(v)[order]) for k, v in f.items()}


__all__ = ["Floor", "FloorTopology", "build", "check", "merge_factory"]
