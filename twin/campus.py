"""A campus: several halls (buildings) under one substation and one grid connection.

Each hall is the model of one hall (``twin.floor.build``: a ``Simulation`` for one system, a
``Floor`` for several), with its own rows, CDUs, cooling plant and power chain (PDU, UPS, its
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
                ``twin.telemetry.CAMPUS_MERGE``: the plants' units add up, their temperatures
                and free-cooling share are weighted by each hall's IT power), ``hall_ts`` one
                row per hall, entity ids campus-wide.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from twin import capping, rng, site, telemetry
from twin.design import Design
from twin.facility import EVENT_KINDS as FACILITY_EVENT_KINDS
from twin.floor import Floor, FloorTopology, _concat, _JobsView, _sort_by_time, merge_factory
from twin.params import FactoryParams, HallParams, ScheduledEvent
from twin.sim import EVENT_KINDS, Frames, Simulation, run_steps

# The largest number of halls on one campus.
MAX_HALLS = 64
# Plant events: a hall's plant (``hall:K``) or every hall's.
_PLANT_KINDS = ("chiller_trip", "cooling_tower_loss", "cooling_restore")
_TARGET_RE = re.compile(r"^(row|ultraserver|server|chip):([0-9]+)$")
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


def _build_hall(p: FactoryParams) -> Simulation | Floor:
    return Floor(p) if len(p.hall.rows) > 1 else Simulation(p)


class Campus:
    """Several halls with the public face of ``twin.sim.Simulation`` (``advance``, ``inject``,
    ``t_s``, ``design``, ``topo``, the per-chip arrays)."""

    def __init__(self, params: FactoryParams) -> None:
        n = len(params.halls)
        if not 1 <= n <= MAX_HALLS:
            raise ValueError(f"halls: {n} halls; a campus holds 1..{MAX_HALLS}")
        self.p = params
        self.dt_s = int(params.dt_s)
        self.svc_hall = service_halls(params)
        self.halls: list[Simulation | Floor] = []
        for k in range(n):
            hp = hall_params(params, k)
            m = _build_hall(hp)
            # One site: every hall's weather is the campus's (its own copy of the same stream).
            weather = site.SiteModel(hp.site, rng.streams(params.seed).weather)
            if isinstance(m, Floor):
                m.pools[0].site = weather
            else:
                m.site = weather
            self.halls.append(m)
        # Job ids unique across the campus: every system pool of every hall numbers its own.
        pools = [pl for h in self.halls for pl in (h.pools if isinstance(h, Floor) else [h])]
        for g, pl in enumerate(pools):
            pl.jobs.number(len(pools), g)
        self.off: dict[str, list[int]] = {}
        for level in ("chip", "server", "ultraserver", "row"):
            sizes = [self._count(h, level) for h in self.halls]
            self.off[level] = [int(x) for x in np.concatenate([[0], np.cumsum(sizes)])]
        self.sys_off = [
            int(x) for x in np.concatenate([[0], np.cumsum([len(self._systems(h)) for h in self.halls])])
        ]
        us_row = np.concatenate([h.topo.us_row + self.off["row"][k] for k, h in enumerate(self.halls)])
        chip_us = np.concatenate(
            [h.topo.chip_us + self.off["ultraserver"][k] for k, h in enumerate(self.halls)]
        )
        t0 = self.halls[0].topo
        self.topo = FloorTopology(
            self.off["ultraserver"][-1],
            self.off["chip"][-1],
            self.off["row"][-1],
            us_row.astype(np.int32),
            chip_us.astype(np.int32),
            t0.chips_per_us,
            t0.servers_per_us,
        )
        self.hall_us = np.repeat(np.arange(n, dtype=np.int32), np.diff(self.off["ultraserver"]))
        self.hall_row = np.repeat(np.arange(n, dtype=np.int32), np.diff(self.off["row"]))
        self.sys = self.halls[0].sys
        self.systems = [s for h in self.halls for s in self._systems(h)]
        self.design = self._design()
        self.cap_w = float(params.power.campus_cap_w) if params.power.campus_cap_w > 0 else math.inf
        self._it_w = [h.design.design_it_w for h in self.halls]  # IT power per hall, last step
        self._fac_w: list[float] = []  # facility power per hall, last step (none before the first)
        self.t_s = 0
        self._pending: list[tuple[int, int, ScheduledEvent, str]] = []
        self._event_seq = 0
        for ev in params.events:
            self._push_event(ev, "scenario")
        self.last: dict[str, float] = {}

    @staticmethod
    def _count(h: Simulation | Floor, level: str) -> int:
        if isinstance(h, Floor):
            return h.off[level][-1]
        return int(getattr(h.topo, level + "s"))

    @staticmethod
    def _systems(h: Simulation | Floor) -> list[str]:
        return list(h.systems) if isinstance(h, Floor) else [h.sys.key]

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
    def _cat(self, name: str) -> npt.NDArray[Any]:
        return np.concatenate([getattr(h, name) for h in self.halls])

    @property
    def chip_clock(self) -> npt.NDArray[np.float64]:
        return self._cat("chip_clock")

    @property
    def chip_power(self) -> npt.NDArray[np.float64]:
        return self._cat("chip_power")

    @property
    def chip_activity(self) -> npt.NDArray[np.float64]:
        return self._cat("chip_activity")

    @property
    def chip_tj(self) -> npt.NDArray[np.float64]:
        return self._cat("chip_tj")

    @property
    def chip_hw_failed(self) -> npt.NDArray[np.bool_]:
        return self._cat("chip_hw_failed")

    def chip_job_ids(self) -> npt.NDArray[np.int32]:
        return np.concatenate([h.chip_job_ids() for h in self.halls])

    @property
    def jobs(self) -> _JobsView:
        """The campus's job tables read as one (every system pool of every hall); read-only."""
        return _JobsView([pl for h in self.halls for pl in (h.pools if isinstance(h, Floor) else [h])])

    def queue_view(self, limit: int = 50) -> list[tuple[int, str, int, int]]:
        rows = [r for h in self.halls for r in h.queue_view(limit)]
        return sorted(rows, key=lambda r: -r[3])[:limit]

    # ------------------------------------------------------------------ events
    def _push_event(self, ev: ScheduledEvent, source: str) -> None:
        if ev.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {ev.kind!r}; expected one of {', '.join(EVENT_KINDS)}")
        heapq.heappush(self._pending, (int(ev.time_s), self._event_seq, ev, source))
        self._event_seq += 1

    def inject(self, kind: str, target: str = "", value: float = 0.0, duration_s: int = 0) -> ScheduledEvent:
        """Queue an operator event (targets numbered across the campus); applied at the next step."""
        ev = ScheduledEvent(self.t_s, kind, str(target), float(value), int(duration_s))
        self._push_event(ev, "operator")
        return ev

    def _locate(self, level: str, index: int) -> tuple[int, int]:
        """(hall, index in the hall) of a campus-wide index at ``level``."""
        off = self.off[level]
        if not 0 <= index < off[-1]:
            raise ValueError(f"{level} {index} out of range 0..{off[-1] - 1}")
        k = int(np.searchsorted(off, index, side="right")) - 1
        return k, index - off[k]

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
                k, r = self._locate("row", int(target.split(":", 1)[-1]))
                return [(k, dataclasses.replace(ev, target=f"row:{r}" if kind == "power_cap" else str(r)))]
            return [(k, ev) for k in range(len(self.halls))]
        if kind == "inference_surge":
            names = [s.name for s in self.p.services]
            k = self.svc_hall[names.index(target)] if target in names else 0
            return [(k, ev)]
        level = kind.split("_", 1)[1]
        k, local = self._locate(level, int(target))
        return [(k, dataclasses.replace(ev, target=str(local)))]

    # ------------------------------------------------------------------ step
    def _step(self, recs: list[Any], i: int) -> None:
        t = self.t_s
        while self._pending and self._pending[0][0] <= t:
            _, _, ev, source = heapq.heappop(self._pending)
            for k, local in self.route(ev):
                self.halls[k]._push_event(dataclasses.replace(local, time_s=t), source)
        capped = math.isfinite(self.cap_w)
        if capped and not self._fac_w:  # the first step: shares in proportion to design IT
            self._share_cap(reclock=False)
        for h, rec in zip(self.halls, recs, strict=True):
            h.step(rec, i)
        self._it_w = [self._hall_w(h, rec, i, "it_power_w") for h, rec in zip(self.halls, recs, strict=True)]
        self._fac_w = [
            self._hall_w(h, rec, i, "facility_power_w") for h, rec in zip(self.halls, recs, strict=True)
        ]
        if capped:  # the next step's shares, and the next clocks of the halls they move
            self._share_cap(reclock=True)
        self.t_s = t + self.dt_s

    def _share_cap(self, reclock: bool) -> None:
        for h, share in zip(self.halls, self._cap_shares(), strict=True):
            fac = h.pools[0].facility if isinstance(h, Floor) else h.facility
            fac.set_site_cap(self.cap_w * share)
            if reclock and not isinstance(h, Floor):  # a floor re-shares among its systems next step
                fac.reclock_for_site_cap()

    def _cap_shares(self) -> list[float]:
        """Each hall's share of the campus cap for this step, from the last step: the halls'
        IT targets under one cap (``capping.shared_targets``: every busy chip of the campus at
        the same clock) in facility watts at each hall's own ratio of facility to IT power,
        normalised so the shares sum to 1. Before the first step: in proportion to design IT."""
        bases = [self._hall_basis(h) for h in self.halls]
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

    @staticmethod
    def _hall_basis(h: Simulation | Floor) -> tuple[float, float, float]:
        facs = [pl.facility for pl in h.pools] if isinstance(h, Floor) else [h.facility]
        it, now, full = (sum(b) for b in zip(*(f.cap_basis for f in facs), strict=True))
        return it, now, full

    @staticmethod
    def _hall_w(h: Simulation | Floor, rec: Any, i: int, col: str) -> float:
        recs = rec if isinstance(h, Floor) else [rec]
        return float(sum(r.f[col][i] for r in recs))

    # ------------------------------------------------------------------ public
    def refresh_jobs(self) -> None:
        """As ``Simulation.refresh_jobs``, for every hall."""
        for h in self.halls:
            h.refresh_jobs()

    def advance(self, steps: int, stop: Callable[[], bool] | None = None) -> Frames:
        """Run ``steps`` steps; return the campus's telemetry frames. ``stop`` as for
        ``Simulation.advance`` (asked after each step; the frames hold the steps run)."""
        recs: list[Any] = [h.begin(steps) for h in self.halls]
        ran = run_steps(self._step, recs, steps, stop)
        per = [h.end(rec, ran) for h, rec in zip(self.halls, recs, strict=True)]
        frames = self._merge(per, ran)
        if ran:
            self.last = {k: float(v[-1]) for k, v in frames["factory_ts"].items()}
        return frames

    # ------------------------------------------------------------------ merging the halls' frames
    def _merge(self, per: list[Frames], steps: int) -> Frames:
        out: Frames = {}
        fac = merge_factory([f["factory_ts"] for f in per], telemetry.CAMPUS_MERGE)
        caps = np.stack([np.asarray(f["factory_ts"]["facility_cap_w"]) for f in per])
        fac["facility_cap_w"] = np.full(steps, self.cap_w) if math.isfinite(self.cap_w) else caps.sum(axis=0)
        out["factory_ts"] = fac
        sys_frames = []
        for k, f in enumerate(per):
            s = dict(f["system_ts"])
            s["system_id"] = np.asarray(s["system_id"]) + np.int32(self.sys_off[k])
            s["hall_id"] = np.full(len(s["time_s"]), k, dtype=np.int32)
            sys_frames.append(s)
        out["system_ts"] = self._interleave(sys_frames, ())
        out["ultraserver_ts"] = self._interleave(
            [f["ultraserver_ts"] for f in per], (("ultraserver_id", "ultraserver"), ("row_id", "row"))
        )
        rows = []
        for k, f in enumerate(per):
            r = dict(f["row_ts"])
            r["hall_id"] = np.full(len(r["time_s"]), k, dtype=np.int32)
            rows.append(r)
        out["row_ts"] = self._interleave(rows, (("row_id", "row"),))
        halls = []
        for k, f in enumerate(per):
            h = dict(f["hall_ts"])
            h["hall_id"] = np.full(len(h["time_s"]), k, dtype=np.int32)
            halls.append(h)
        out["hall_ts"] = self._interleave(halls, ())
        if all("chip_ts" in f for f in per):
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
        """The halls' rows of a per-entity table, time major (every hall's rows of one recorded
        time, in campus order, then the next); entity ids shifted to the campus's numbering."""
        t0 = np.asarray(frames[0]["time_s"])
        slots = len(np.unique(t0))
        out: dict[str, Any] = {}
        for col in frames[0]:
            parts = []
            for k, f in enumerate(frames):
                a = np.asarray(f[col])
                for name, level in ids:
                    if col == name:
                        a = a + np.asarray(self.off[level][k], dtype=a.dtype)
                parts.append(a.reshape(slots, -1) if slots else a)
            merged = np.concatenate(parts, axis=1).ravel() if slots else np.concatenate(parts)
            out[col] = list(merged) if isinstance(frames[0][col], list) else merged
        return out

    def _services(self, per: list[Frames], steps: int) -> dict[str, Any]:
        ns = len(self.p.services)
        ids = [[j for j, h in enumerate(self.svc_hall) if h == k] for k in range(len(self.halls))]
        frames = [(k, f["service_ts"]) for k, f in enumerate(per) if "service_ts" in f]
        out: dict[str, Any] = {}
        for col in frames[0][1]:
            if col == "service":
                grid = np.empty((steps, ns), dtype=object)
            else:
                grid = np.zeros((steps, ns), dtype=np.asarray(frames[0][1][col]).dtype)
            for k, f in frames:
                grid[:, ids[k]] = np.asarray(f[col], dtype=grid.dtype).reshape(steps, len(ids[k]))
            out[col] = list(grid.ravel()) if col == "service" else grid.ravel()
        out["service_id"] = np.tile(np.arange(ns, dtype=np.int32), steps)
        return out

    def _events(self, evs: list[dict[str, Any]]) -> dict[str, Any]:
        """The halls' events in time order, each naming its hall; targets in campus numbering."""
        rows = []
        for k, e in enumerate(evs):
            for r in range(len(e["time_s"])):
                target = self._campus_target(e["target"][r], k)
                arg = e["arg"][r]
                if e["source"][r] != "model" and arg == "" and e["kind"][r] in FACILITY_EVENT_KINDS:
                    arg = f"hall:{k}"
                elif arg:
                    arg = self._campus_arg(e["kind"][r], arg, k)
                rows.append(
                    (
                        int(e["time_s"][r]),
                        k,
                        r,
                        e["kind"][r],
                        target,
                        f"hall {k}: {e['detail'][r]}",
                        e["source"][r],
                        arg,
                        float(e["value"][r]),
                        int(e["duration_s"][r]),
                    )
                )
        rows.sort(key=lambda x: (x[0], x[1], x[2]))
        return {
            "time_s": np.array([x[0] for x in rows], dtype=np.int64),
            "kind": [x[3] for x in rows],
            "target": [x[4] for x in rows],
            "detail": [x[5] for x in rows],
            "source": [x[6] for x in rows],
            "arg": [x[7] for x in rows],
            "value": np.array([x[8] for x in rows], dtype=np.float64),
            "duration_s": np.array([x[9] for x in rows], dtype=np.int64),
        }

    def _campus_target(self, target: str, k: int) -> str:
        m = _TARGET_RE.match(target)
        if m is None:
            return f"hall:{k}" if target in ("plant", "factory", "facility", "") else target
        return f"{m.group(1)}:{int(m.group(2)) + self.off[m.group(1)][k]}"

    def _campus_arg(self, kind: str, arg: str, k: int) -> str:
        if arg.startswith("row:"):
            return self._campus_target(arg, k)
        if kind == "cdu_pump_failure" and arg.isdigit():
            return str(int(arg) + self.off["row"][k])
        level = kind.split("_", 1)[1] if "_" in kind else ""
        if level in ("chip", "server", "ultraserver") and arg.isdigit():
            return str(int(arg) + self.off[level][k])
        return arg


__all__ = ["MAX_HALLS", "Campus", "hall_chips", "hall_params", "service_halls"]
