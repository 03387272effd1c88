"""A campus: several halls (buildings) under one substation and one grid connection.

Each hall is the model of one hall (``twin.compose.hall.Hall``: one pool per system on its
floor), with its own rows, CDUs, cooling plant and power chain (PDU, UPS, its
transformer). The campus composes them one level up, step by step:

1. events       a target on the campus (row, UltraServer, server, chip: numbered across the
                campus hall by hall, in the order of ``[[halls]]``) goes to its hall in the
                hall's own numbering; ``hall:K`` names a hall's plant or its facility cap; a
                plant event without a target reaches every hall; a service by name goes to the
                hall that runs it.
2. work         each hall's own: batch arrivals at the campus rate shared by the halls' chips
                (each hall draws its share), service ``i`` in hall ``i mod H``.
3. site         one weather, price and carbon: every hall's site model is seeded as the campus.
4. physics      each hall's own (plant on its own heat, chain on its own power); the campus's
                grid power is the sum of the halls' facility power. A campus cap
                (``power.campus_cap_w``) is shared from the last step's load so that every busy
                chip of the campus runs at one clock (``capping.shared_targets``; ``_cap_shares``:
                each hall's IT target in facility watts at its own ratio, normalised so the
                shares always sum to the campus cap; the lower of that and the hall's own). The
                shares for the next step are set after each step, and a hall whose share moved
                while its cap binds solves its next clocks again; each hall holds its share
                inside the step.
5. record       each hall records its own rows; ``factory_ts`` is the campus (merged by
                each column's campus rule, ``twin.spec.telemetry.Column.campus``: the plants' units add up, their temperatures
                and free-cooling share are weighted by each hall's IT power), ``hall_ts`` one
                row per hall, entity ids campus-wide; ``grid_ts`` each hall's sub-step power and
                the grid connection's (their sum through the connection's storage, ``twin.compose.grid``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from twin.compose import grid
from twin.compose.floorplan import FloorPlan, HallTopology
from twin.compose.hall import EVENT_KINDS, Hall, run_steps
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
)
from twin.compose.record import Frames, Recorder
from twin.physics import capping
from twin.physics.design import Design
from twin.physics.facility import EVENT_KINDS as FACILITY_EVENT_KINDS
from twin.spec.params import FactoryParams, HallParams, ScheduledEvent

# The largest number of halls on one campus.
MAX_HALLS = 64
_HALL_RE = re.compile(r"^hall:([0-9]+)$")


def hall_chips(h: HallParams) -> int:
    return sum(r.ultraservers * r.system.chips for r in h.pools())


def _hall_seed(seed: int, k: int) -> int:
    """Hall ``k``'s seed: the campus's for the first hall, an independent child for the others
    (distinct from the children a floor gives its systems)."""
    if k == 0:
        return seed
    return int(np.random.SeedSequence([seed, 1 << 32, k]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def service_halls(p: FactoryParams) -> list[int]:
    """The hall of each service: service ``i`` in hall ``i mod H``."""
    return [i % len(p.halls) for i in range(len(p.services))]


def hall_params(p: FactoryParams, k: int) -> FactoryParams:
    """Hall ``k``'s own parameters: its floor, its share of the batch arrivals (by chips; a job
    trace goes to the first hall), its services, no events (the campus hands them over)."""
    chips = [hall_chips(h) for h in p.halls]
    tr = p.training
    training = dataclasses.replace(
        tr, arrivals_per_day=tr.arrivals_per_day * chips[k] / sum(chips), trace=tr.trace if k == 0 else None
    )
    svc = service_halls(p)
    return dataclasses.replace(
        p,
        hall=p.halls[k],
        halls=(),
        seed=_hall_seed(p.seed, k),
        training=training,
        services=tuple(s for s, h in zip(p.services, svc, strict=True) if h == k),
        events=(),
        power=dataclasses.replace(p.power, campus_cap_w=0.0),
        cooling=p.halls[k].cooling or p.cooling,
    )


class Campus(Composite):
    """Several halls with the public face of a hall (``advance``, ``inject``, ``t_s``, ``design``,
    ``topo``, the per-chip arrays); it splits the parameters, shares the campus cap and routes
    events, and every hall steps itself (``twin.compose.hall.Hall``)."""

    def __init__(self, params: FactoryParams, floors: tuple[FloorPlan, ...] | None = None) -> None:
        """``floors``: each hall's floor plan (``floorplan.plan`` of ``hall_params``), as the
        scenario checks worked them out; None: worked out by each hall."""
        n = len(params.halls)
        if not 1 <= n <= MAX_HALLS:
            raise ValueError(f"halls: {n} halls; a campus holds 1..{MAX_HALLS}")
        self.p = params
        self.dt_s = int(params.dt_s)
        self.svc_hall = service_halls(params)
        # One site: every hall's weather is the campus's (its own copy of the same stream).
        if floors is not None and len(floors) != n:
            raise ValueError(f"{len(floors)} floor plans for a campus of {n} halls")
        self.halls: list[Hall] = [
            Hall(hall_params(params, k), params.seed, floors[k] if floors else None) for k in range(n)
        ]
        # Job ids unique across the campus: every system pool of every hall numbers its own.
        pools = [pl for h in self.halls for pl in h.pools]
        for g, pl in enumerate(pools):
            pl.jobs.number(len(pools), g)
        self.num = Numbering(
            {lv: [h.num.total(lv) for h in self.halls] for lv in ("chip", "server", "ultraserver", "row")}
        )
        off = self.num.off
        self.sys_off = [
            int(x) for x in np.concatenate([[0], np.cumsum([len(h.systems) for h in self.halls])])
        ]
        us_row = np.concatenate([h.topo.us_row + off["row"][k] for k, h in enumerate(self.halls)])
        chip_us = np.concatenate([h.topo.chip_us + off["ultraserver"][k] for k, h in enumerate(self.halls)])
        t0 = self.halls[0].topo
        self.topo = HallTopology(
            self.num.total("ultraserver"),
            self.num.total("chip"),
            self.num.total("row"),
            us_row.astype(np.int32),
            chip_us.astype(np.int32),
            t0.chips_per_us,
            t0.servers_per_us,
        )
        self.hall_us = np.repeat(np.arange(n, dtype=np.int32), np.diff(off["ultraserver"]))
        self.hall_row = np.repeat(np.arange(n, dtype=np.int32), np.diff(off["row"]))
        self.sys = self.halls[0].sys
        self.systems = [s for h in self.halls for s in h.systems]
        self.svc_ids = [[j for j, h in enumerate(self.svc_hall) if h == k] for k in range(n)]
        self.design = self._design()
        self.cap_w = float(params.power.campus_cap_w) if params.power.campus_cap_w > 0 else math.inf
        self._it_w = [h.design.design_it_w for h in self.halls]  # IT power per hall, last step
        self._fac_w: list[float] = []  # facility power per hall, last step (none before the first)
        self.t_s = -params.warmup_s  # the clock starts before the recording by the warm-up
        self.events = EventQueue(EVENT_KINDS)
        for ev in params.events:
            self.events.push(ev, "scenario")
        self.last: dict[str, float] = {}
        self.connection = grid.Connection(params.grid, self.topo.chips, int(params.grid_interval_s))

    def _design(self) -> Design:
        d0 = self.halls[0].design
        ds = [h.design for h in self.halls]
        return dataclasses.replace(
            d0,
            system="+".join(dict.fromkeys(self.systems)),
            ultraservers=self.topo.ultraservers,
            rows=self.topo.rows,
            chips=self.topo.chips,
            design_it_w=sum(d.design_it_w for d in ds),
            facility_loop_mass_kg=sum(d.facility_loop_mass_kg for d in ds),
            facility_design_flow_kg_s=sum(d.facility_design_flow_kg_s for d in ds),
            ups_rating_w=sum(d.ups_rating_w for d in ds),
        )

    # ------------------------------------------------------------------ per-chip views

    @property
    def jobs(self) -> JobsView:
        """The campus's job tables read as one (every system pool of every hall); read-only."""
        return JobsView([t for h in self.halls for t in h.job_tables()])

    def _parts(self) -> list[Hall]:
        return self.halls

    def job_tables(self) -> list[Any]:
        return [t for h in self.halls for t in h.job_tables()]

    # ------------------------------------------------------------------ events

    def route(self, ev: ScheduledEvent) -> list[tuple[int, ScheduledEvent]]:
        """The hall(s) an event concerns, each with the event in the hall's own numbering."""
        kind, target = ev.kind, ev.target
        m = _HALL_RE.match(target)
        if m is not None:
            k = int(m.group(1))
            if not 0 <= k < len(self.halls):
                raise ValueError(f"hall {k} out of range 0..{len(self.halls) - 1}")
            return [(k, dataclasses.replace(ev, target=""))]
        if kind in FACILITY_EVENT_KINDS:
            if target.startswith("row:") or (kind == "cdu_pump_failure" and target.isdigit()):
                k, r = self.num.locate("row", int(target.split(":", 1)[-1]))
                return [(k, dataclasses.replace(ev, target=f"row:{r}" if kind == "power_cap" else str(r)))]
            return [(k, ev) for k in range(len(self.halls))]
        if kind == "inference_surge":
            names = [s.name for s in self.p.services]
            return [(self.svc_hall[names.index(target)] if target in names else 0, ev)]
        k, local = self.num.locate(kind.split("_", 1)[1], int(target))
        return [(k, dataclasses.replace(ev, target=str(local)))]

    # ------------------------------------------------------------------ step
    def _step(self, recs: list[list[Recorder]], i: int) -> None:
        t = self.t_s
        for ev, source in self.events.due(t):
            for k, local in self.route(ev):
                self.halls[k].events.push(dataclasses.replace(local, time_s=t), source)
        capped = math.isfinite(self.cap_w)
        if capped and not self._fac_w:  # the first step: shares in proportion to design IT
            self._share_cap(reclock=False)
        for h, rec in zip(self.halls, recs, strict=True):
            h.step(rec, i)
        self._it_w = [h.recorded(rec, i, "it_power_w") for h, rec in zip(self.halls, recs, strict=True)]
        self._fac_w = [
            h.recorded(rec, i, "facility_power_w") for h, rec in zip(self.halls, recs, strict=True)
        ]
        if capped:  # the next step's shares, and the next clocks of the halls they move
            self._share_cap(reclock=True)
        self.t_s = t + self.dt_s

    def _share_cap(self, reclock: bool) -> None:
        for h, share in zip(self.halls, self._cap_shares(), strict=True):
            h.set_site_cap(self.cap_w * share, reclock)

    def _cap_shares(self) -> list[float]:
        """Each hall's share of the campus cap for this step, from the last step: the halls'
        IT targets under one cap (``capping.shared_targets``: every busy chip of the campus at
        the same clock) in facility watts at each hall's own ratio of facility to IT power,
        normalised so the shares sum to 1. Before the first step: in proportion to design IT."""
        bases = [h.cap_basis() for h in self.halls]
        if not self._fac_w or any(b[0] <= 0 for b in bases):
            tot = sum(self._it_w)
            return [w / tot if tot > 0 else 1.0 / len(self.halls) for w in self._it_w]
        it_target = self.cap_w * sum(self._it_w) / sum(self._fac_w)
        targets = capping.shared_targets(bases, it_target)
        w = [
            tg * f / it if it > 0 else 0.0 for tg, f, it in zip(targets, self._fac_w, self._it_w, strict=True)
        ]
        tot = sum(w)
        return [x / tot for x in w] if tot > 0 else [1.0 / len(self.halls)] * len(self.halls)

    # ------------------------------------------------------------------ public

    def advance(self, steps: int, stop: Callable[[], bool] | None = None) -> Frames:
        """Run ``steps`` steps; return the campus's telemetry frames. ``stop`` as for
        ``Hall.advance`` (asked after each step; the frames hold the steps run)."""
        recs = [h.begin(steps) for h in self.halls]
        ran = run_steps(self._step, recs, steps, stop)
        per = [h.end(rec, ran) for h, rec in zip(self.halls, recs, strict=True)]
        frames = self._merge(per, ran)
        if all("grid_ts" in f for f in per):  # the halls' sub-step power and the connection's
            frames["grid_ts"] = grid.connection_rows([f["grid_ts"] for f in per], self.connection)
        if ran:
            self.last = {k: float(v[-1]) for k, v in frames["factory_ts"].items()}
        return frames

    # ------------------------------------------------------------------ merging the halls' frames
    def _merge(self, per: list[Frames], steps: int) -> Frames:
        num = self.num
        out: Frames = {}
        fac = merge_rows("factory_ts", [f["factory_ts"] for f in per], campus=True)
        caps = np.stack([np.asarray(f["factory_ts"]["facility_cap_w"]) for f in per])
        fac["facility_cap_w"] = np.full(steps, self.cap_w) if math.isfinite(self.cap_w) else caps.sum(axis=0)
        out["factory_ts"] = fac
        sys_frames = []
        for k, f in enumerate(per):
            s = dict(f["system_ts"])
            s["system_id"] = np.asarray(s["system_id"]) + np.int32(self.sys_off[k])
            s["hall_id"] = np.full(len(s["time_s"]), k, dtype=np.int32)
            sys_frames.append(s)
        out["system_ts"] = interleave(sys_frames, (), num)
        out["ultraserver_ts"] = interleave(
            [f["ultraserver_ts"] for f in per], (("ultraserver_id", "ultraserver"), ("row_id", "row")), num
        )
        out["row_ts"] = interleave(
            [_with_hall(f["row_ts"], k) for k, f in enumerate(per)], (("row_id", "row"),), num
        )
        out["hall_ts"] = interleave([_with_hall(f["hall_ts"], k) for k, f in enumerate(per)], (), num)
        if all("chip_ts" in f for f in per):
            out["chip_ts"] = interleave(
                [f["chip_ts"] for f in per], (("chip_id", "chip"), ("ultraserver_id", "ultraserver")), num
            )
        if self.p.services:
            out["service_ts"] = merge_services([f.get("service_ts") for f in per], self.svc_ids, steps)
        out["jobs"] = concat([f["jobs"] for f in per])
        out["events"] = merge_events(
            [f["events"] for f in per],
            num,
            target=self._campus_target,
            detail=lambda d, k: f"hall {k}: {d}",
            default_arg=lambda kind, source, k: (
                f"hall:{k}" if source != "model" and kind in FACILITY_EVENT_KINDS else ""
            ),
        )
        out["failures"] = merge_failures([f["failures"] for f in per], num)
        out["interruptions"] = sort_by_time(concat([f["interruptions"] for f in per]))
        return out

    def _campus_target(self, target: str, k: int) -> str:
        if target in ("plant", "factory", "facility", ""):
            return f"hall:{k}"
        return self.num.target(target, k)


def _with_hall(frame: dict[str, Any], k: int) -> dict[str, Any]:
    out = dict(frame)
    out["hall_id"] = np.full(len(out["time_s"]), k, dtype=np.int32)
    return out


__all__ = ["MAX_HALLS", "Campus", "hall_chips", "hall_params", "service_halls"]
