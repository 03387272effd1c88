"""The time-stepped factory simulation.

``Simulation.advance(n)`` runs ``n`` fixed steps of ``dt_s`` integer seconds and returns the
telemetry frames of those steps (``table -> column -> array``, column names as in
``twin.telemetry``; ``run_id`` is added by storage). State is struct-of-arrays over chips,
servers and UltraServers; only jobs and events (a few per simulated hour) are handled one by one.

Events are the one way anything changes the twin: scheduled events from the scenario and events
injected live (``inject``) are applied at the start of the next step and recorded, so a live
session replayed headlessly with its recorded events gives identical telemetry. Same parameters and
seed give bit-identical frames.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from twin import site, workload
from twin.facility import EVENT_KINDS as FACILITY_EVENT_KINDS
from twin.facility import Facility, FacilityStep
from twin.params import FactoryParams, ScheduledEvent
from twin.topology import Topology, build

Frames = dict[str, dict[str, Any]]

QUEUED, RUNNING, DONE = 0, 1, 2
STATE_NAMES = ("queued", "running", "done")
TRAINING, INFERENCE = 0, 1
KIND_NAMES = ("training", "inference")

EVENT_KINDS = (
    *FACILITY_EVENT_KINDS,
    "fail_chip",
    "fail_server",
    "fail_ultraserver",
    "repair_chip",
    "repair_server",
    "repair_ultraserver",
    "inference_surge",
)
# Events that the model itself generates (never injected; regenerated from the seed on replay).
MODEL_EVENT_KINDS = ("chip_failed", "chip_repaired", "job_start", "job_end", "job_interrupted")


class JobTable:
    """Struct-of-arrays job store that grows by doubling."""

    FIELDS: ClassVar[dict[str, Any]] = {
        "kind": np.int8,
        "chips": np.int32,
        "params": np.float64,
        "tokens": np.float64,
        "work": np.float64,
        "done": np.float64,
        "ckpt_done": np.float64,
        "ckpt_time": np.int64,
        "lost": np.float64,
        "submit": np.int64,
        "start": np.int64,
        "end": np.int64,
        "state": np.int8,
        "spanned": np.int32,
        "mfu": np.float64,
        "rate": np.float64,
        "activity": np.float64,
        "restarts": np.int32,
        "service": np.int32,
    }

    def __init__(self, capacity: int = 256) -> None:
        self.n = 0
        self.names: list[str] = []
        self.precision: list[str] = []
        self.a: dict[str, npt.NDArray[Any]] = {k: np.zeros(capacity, dtype=t) for k, t in self.FIELDS.items()}

    def add(self, name: str, precision: str, **values: float) -> int:
        if self.n == len(self.a["kind"]):
            for k, arr in self.a.items():
                grown = np.zeros(2 * len(arr), dtype=arr.dtype)
                grown[: self.n] = arr[: self.n]
                self.a[k] = grown
        j = self.n
        self.n += 1
        for k in self.a:
            self.a[k][j] = 0
        self.a["start"][j] = -1
        self.a["end"][j] = -1
        self.a["service"][j] = -1
        for k, v in values.items():
            self.a[k][j] = v
        self.names.append(name)
        self.precision.append(precision)
        return j


@dataclass(frozen=True)
class WorkloadStep:
    train_flops: float  # model FLOP/s delivered to training this step
    tokens_s: float
    requests_s: float
    dropped_s: float
    inference_jobs: npt.NDArray[np.bool_]  # per job: is an inference replica
    running_training: int


@dataclass
class ServiceState:
    replicas: list[int]
    roof: workload.Roofline
    surge: float = 1.0
    surge_until_s: int = -1


class Simulation:
    def __init__(self, params: FactoryParams) -> None:
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
        seeds = np.random.SeedSequence(params.seed).spawn(4)
        self.rng_weather, self.rng_arrivals, self.rng_failures, self.rng_jobs = (
            np.random.default_rng(s) for s in seeds
        )
        self.t_s = 0
        self.chip_owner = np.full(n, -1, dtype=np.int32)
        self.chip_failed = np.zeros(n, dtype=bool)
        self.chip_repair_at = np.full(n, -1, dtype=np.int64)
        self.chip_clock = np.ones(n)
        self.chip_power = np.zeros(n)
        self.chip_activity = np.zeros(n)
        self.chip_tj = np.full(n, params.cooling.supply_setpoint_c)
        self.site = site.SiteModel(params.site, self.rng_weather)
        self.facility = Facility(params, self.topo, self.sys, self.acc)
        self.jobs = JobTable()
        self.queue: deque[int] = deque()
        self._dirty: set[int] = set()
        self._events: list[tuple[int, str, str, str, str]] = []
        self._pending: list[tuple[int, int, ScheduledEvent, str]] = []
        self._event_seq = 0
        for ev in params.events:
            self._push_event(ev, "scenario")

        self.train_peak = self.acc.peak(params.training.precision)
        self.services: list[ServiceState] = []
        for si, sp in enumerate(params.services):
            roof = workload.roofline(sp, self.acc)
            reps = []
            for _ in range(sp.replicas):
                j = self.jobs.add(
                    sp.name,
                    sp.precision,
                    kind=INFERENCE,
                    chips=sp.chips_per_replica,
                    params=sp.params,
                    service=si,
                    submit=0,
                )
                self.queue.append(j)
                self._dirty.add(j)
                reps.append(j)
            self.services.append(ServiceState(reps, roof))
        # Chips left for training once every inference replica is placed: the largest gang the
        # hall can ever run (a bigger one would block a FIFO queue for good).
        reserved = sum(sp.replicas * sp.chips_per_replica for sp in params.services)
        if reserved > self.topo.chips:
            raise ValueError(f"inference replicas need {reserved} chips but the hall has {self.topo.chips}")
        self.training_capacity_chips = self.topo.chips - reserved
        self.last: dict[str, float] = {}

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

    def _log(self, kind: str, target: str, detail: str, source: str = "model") -> None:
        self._events.append((self.t_s, kind, target, detail, source))

    def _target_chips(self, kind: str, target: str) -> npt.NDArray[np.int64]:
        idx = int(target)
        level = kind.split("_", 1)[1]
        if level == "chip":
            if not 0 <= idx < self.topo.chips:
                raise ValueError(f"chip {idx} out of range 0..{self.topo.chips - 1}")
            return np.array([idx])
        if level == "server":
            if not 0 <= idx < self.topo.servers:
                raise ValueError(f"server {idx} out of range 0..{self.topo.servers - 1}")
            c = self.topo.chips_per_server
            return np.arange(idx * c, (idx + 1) * c)
        if not 0 <= idx < self.topo.ultraservers:
            raise ValueError(f"ultraserver {idx} out of range 0..{self.topo.ultraservers - 1}")
        c = self.topo.chips_per_us
        return np.arange(idx * c, (idx + 1) * c)

    def _apply(self, ev: ScheduledEvent, source: str) -> None:
        kind = ev.kind
        if kind in FACILITY_EVENT_KINDS:
            target, detail = self.facility.apply(ev, self.t_s)
            self._log(kind, target, detail, source)
            return
        target = f"{kind.split('_', 1)[1]}:{ev.target}" if kind != "inference_surge" else ev.target
        if kind.startswith("fail_"):
            chips = self._target_chips(kind, ev.target)
            repair = self.t_s + ev.duration_s if ev.duration_s > 0 else -1
            self._fail_chips(chips, repair)
            detail = f"{len(chips)} chips failed" + (f", repair in {ev.duration_s} s" if repair >= 0 else "")
        elif kind.startswith("repair_"):
            chips = self._target_chips(kind, ev.target)
            self._repair_chips(chips)
            detail = f"{len(chips)} chips repaired"
        else:  # inference_surge
            factor = ev.value if ev.value > 0 else 2.0
            until = self.t_s + (ev.duration_s if ev.duration_s > 0 else 3600)
            for si, st in enumerate(self.services):
                if not ev.target or self.p.services[si].name == ev.target:
                    st.surge, st.surge_until_s = factor, until
            detail = f"x{factor:g} request rate until t={until} s"
        self._log(kind, target, detail, source)

    # ------------------------------------------------------------------ failures
    def _fail_chips(self, chips: npt.NDArray[np.int64], repair_at: int) -> None:
        newly = chips[~self.chip_failed[chips]]
        self.chip_failed[chips] = True
        self.chip_repair_at[chips] = repair_at
        owners = np.unique(self.chip_owner[newly])
        for j in owners[owners >= 0]:
            self._interrupt(int(j))

    def _repair_chips(self, chips: npt.NDArray[np.int64]) -> None:
        self.chip_failed[chips] = False
        self.chip_repair_at[chips] = -1

    def _interrupt(self, j: int) -> None:
        a = self.jobs.a
        self.chip_owner[self.chip_owner == j] = -1
        lost = a["done"][j] - a["ckpt_done"][j]
        a["lost"][j] += lost
        a["done"][j] = a["ckpt_done"][j]
        a["state"][j] = QUEUED
        a["restarts"][j] += 1
        a["activity"][j] = 0.0
        a["rate"][j] = 0.0
        self._dirty.add(j)
        # Interrupted work goes back to the front; inference replicas ahead of training.
        if a["kind"][j] == INFERENCE:
            self.queue.appendleft(j)
        else:
            pos = 0
            while pos < len(self.queue) and a["kind"][self.queue[pos]] == INFERENCE:
                pos += 1
            self.queue.insert(pos, j)
        self._log(
            "job_interrupted", f"job:{j}", f"{self.jobs.names[j]} lost {lost:.3g} FLOP since checkpoint"
        )

    # ------------------------------------------------------------------ scheduling
    def _place(self, need: int) -> tuple[npt.NDArray[np.int64], int] | None:
        """Gang placement: best-fit inside one UltraServer when the gang fits in one; otherwise
        the fewest UltraServers, emptiest first. Returns chip indices and UltraServers spanned."""
        free = (self.chip_owner < 0) & ~self.chip_failed
        per_us = np.bincount(self.topo.chip_us, weights=free, minlength=self.topo.ultraservers)
        if per_us.sum() < need:
            return None
        c = self.topo.chips_per_us
        if need <= c:
            fits = np.flatnonzero(per_us >= need)
            if len(fits):
                us = int(fits[np.argmin(per_us[fits])])
                chips = np.flatnonzero(free[us * c : (us + 1) * c])[:need] + us * c
                return chips, 1
        order = np.argsort(-per_us, kind="stable")
        taken: list[npt.NDArray[np.int64]] = []
        left = need
        for us in order:
            if left <= 0 or per_us[us] <= 0:
                break
            chips = np.flatnonzero(free[us * c : (us + 1) * c])[:left] + us * c
            taken.append(chips)
            left -= len(chips)
        return np.concatenate(taken), len(taken)

    def _schedule(self) -> None:
        """Strict FIFO: start the head while it fits; stop at the first job that does not."""
        a = self.jobs.a
        while self.queue:
            j = self.queue[0]
            placed = self._place(int(a["chips"][j]))
            if placed is None:
                return
            chips, spanned = placed
            self.queue.popleft()
            self.chip_owner[chips] = j
            a["state"][j] = RUNNING
            a["start"][j] = self.t_s
            a["spanned"][j] = spanned
            if a["kind"][j] == TRAINING:
                mfu = workload.placement_mfu(self.p.training, spanned)
                a["mfu"][j] = mfu
                a["rate"][j] = workload.training_rate_flop_s(int(a["chips"][j]), self.train_peak, mfu)
                a["ckpt_time"][j] = self.t_s
            self._dirty.add(j)
            self._log(
                "job_start",
                f"job:{j}",
                f"{self.jobs.names[j]} on {len(chips)} chips, {spanned} UltraServer(s)",
            )

    def _arrivals(self) -> None:
        tp = self.p.training
        if self.training_capacity_chips <= 0:
            return
        lam = tp.arrivals_per_day * self.dt_s / 86400.0
        for _ in range(int(self.rng_arrivals.poisson(lam))):
            d = workload.draw_job(tp, self.train_peak, self.rng_jobs, self.training_capacity_chips)
            j = self.jobs.add(
                d.model,
                tp.precision,
                kind=TRAINING,
                chips=d.chips,
                params=d.params,
                tokens=d.tokens,
                work=workload.training_flop(d.params, d.tokens),
                submit=self.t_s,
            )
            self.queue.append(j)
            self._dirty.add(j)

    # ------------------------------------------------------------------ step
    def _step(self, rec: _Recorder, i: int) -> None:
        """One step: events, then the workload (who runs where, how busy), then the physics
        (power, cooling, plant), then the record."""
        t = self.t_s
        while self._pending and self._pending[0][0] <= t:
            _, _, ev, source = heapq.heappop(self._pending)
            self._apply(ev, source)
        w = self._workload()
        ph = self._physics(w)
        self._record(rec, i, w, ph)
        self.t_s = t + self.dt_s

    # ------------------------------------------------------------------ workload
    def _workload(self) -> WorkloadStep:
        """Failures and repairs, arrivals, scheduling, training progress, inference serving.
        Sets each running job's ``activity``; returns the step's workload KPIs."""
        p, t, dt = self.p, self.t_s, self.dt_s
        a = self.jobs.a
        # Repairs due and random failures (Poisson over alive chips).
        due = np.flatnonzero((self.chip_repair_at >= 0) & (self.chip_repair_at <= t))
        if len(due):
            self._repair_chips(due)
            self._log("chip_repaired", f"chips:{len(due)}", f"{len(due)} chips back in service")
        alive = ~self.chip_failed
        n_alive = int(alive.sum())
        lam = n_alive * p.failures.chip_hazard_per_h * dt / 3600.0
        k = int(self.rng_failures.poisson(lam)) if lam > 0 else 0
        if k:
            victims = self.rng_failures.choice(np.flatnonzero(alive), size=min(k, n_alive), replace=False)
            repair_s = int(p.failures.repair_time_h * 3600)
            for c in victims:
                self._log(
                    "chip_failed",
                    f"chip:{int(c)}",
                    f"UltraServer {int(self.topo.chip_us[c])}, repair in {repair_s} s",
                )
            self._fail_chips(victims.astype(np.int64), t + repair_s)

        self._arrivals()
        self._schedule()

        # Training progress (gang runs at its slowest chip's clock; no progress during restart).
        n = self.jobs.n
        kind = a["kind"][:n]
        state = a["state"][:n]
        run_train = np.flatnonzero((state == RUNNING) & (kind == TRAINING))
        train_flops = 0.0
        if len(run_train):
            clock = np.ones(n)
            if (self.chip_clock < 1.0).any():
                owned = self.chip_owner >= 0
                np.minimum.at(clock, self.chip_owner[owned], self.chip_clock[owned])
            restarting = (a["restarts"][run_train] > 0) & (
                t < a["start"][run_train] + p.training.restart_cost_s
            )
            rate = a["rate"][run_train] * clock[run_train] * ~restarting
            remaining = a["work"][run_train] - a["done"][run_train]
            delivered = np.minimum(rate * dt, remaining)
            a["done"][run_train] += delivered
            train_flops = float(delivered.sum()) / dt
            a["activity"][run_train] = np.where(restarting, 0.1, p.training.activity)
            ck = (t + dt - a["ckpt_time"][run_train]) >= p.training.checkpoint_interval_s
            if ck.any():
                jj = run_train[ck]
                a["ckpt_done"][jj] = a["done"][jj]
                a["ckpt_time"][jj] = t + dt
            finished = run_train[a["done"][run_train] >= a["work"][run_train] * (1 - 1e-12)]
            for j in finished:
                self._finish(int(j))

        # Inference: served = min(demand, capacity of running replicas).
        tokens_s = req_s = dropped_s = 0.0
        inf_chip_mask_jobs = np.zeros(max(n, 1), dtype=bool)
        for si, st in enumerate(self.services):
            sp = p.services[si]
            if st.surge_until_s >= 0 and t >= st.surge_until_s:
                st.surge, st.surge_until_s = 1.0, -1
            lam_s = workload.diurnal_rate(sp, t) * st.surge
            reps = np.asarray(st.replicas)
            up = reps[a["state"][reps] == RUNNING]
            cap = len(up) * st.roof.requests_per_s
            served = min(lam_s, cap)
            rho = served / cap if cap > 0 else 0.0
            act = rho * (
                st.roof.prefill_share * p.training.activity + (1 - st.roof.prefill_share) * sp.decode_activity
            )
            a["activity"][up] = act
            inf_chip_mask_jobs[reps] = True
            tokens_s += served * sp.output_tokens
            req_s += lam_s
            dropped_s += lam_s - served
        return WorkloadStep(train_flops, tokens_s, req_s, dropped_s, inf_chip_mask_jobs, len(run_train))

    # ------------------------------------------------------------------ physics
    def _physics(self, w: WorkloadStep) -> FacilityStep:
        """Chip utilisation -> power, heat, temperatures, plant and power chain (``twin.facility``).
        Thermal trips take chips offline; the clocks decided here apply to the next step's work
        and power alike."""
        a = self.jobs.a
        owner = self.chip_owner
        util = np.where(owner >= 0, a["activity"][np.maximum(owner, 0)], 0.0)
        cond = self.site.step(self.t_s, self.dt_s)
        ph = self.facility.step(util, ~self.chip_failed, cond, self.t_s, self.dt_s)
        for kind, target, detail in self.facility.log:
            self._log(kind, target, detail)
        self.facility.log.clear()
        if len(ph.tripped_chips):
            self._fail_chips(ph.tripped_chips, -1)
        if len(ph.recovered_chips):
            self._repair_chips(ph.recovered_chips)
        self.chip_clock = self.facility.clock
        self.chip_activity, self.chip_power, self.chip_tj = ph.act_chip, ph.chip_p, ph.tj
        return ph

    # ------------------------------------------------------------------ record
    def _record(self, rec: _Recorder, i: int, w: WorkloadStep, ph: FacilityStep) -> None:
        p, t, dt = self.p, self.t_s, self.dt_s
        a = self.jobs.a
        topo = self.topo
        owner = self.chip_owner
        owned = owner >= 0
        act_chip, chip_p, tj = ph.act_chip, ph.chip_p, ph.tj
        it_w, facility_w, pue = ph.it_w, ph.facility_w, ph.pue
        # Energy per token: inference chips' share of IT, grossed up by PUE.
        inf_chips = owned & w.inference_jobs[np.maximum(owner, 0)]
        inf_it = float(chip_p[inf_chips].sum()) * (it_w / max(float(chip_p.sum()), 1.0))
        j_per_tok = inf_it * pue / w.tokens_s if w.tokens_s > 0 else float("nan")
        energy_j = facility_w * dt
        busy = owned & (act_chip > 0)
        cp = p.cooling
        rec.factory(
            i,
            t=t,
            it=it_w,
            fac=facility_w,
            cool=ph.cooling_w,
            loss=ph.loss_w,
            pue=pue,
            chip=ph.chip_w,
            psu_loss=ph.psu_loss_w,
            pdu_loss=ph.pdu_loss_w,
            ups_loss=ph.ups_loss_w,
            tx_loss=ph.transformer_loss_w,
            chiller=ph.chiller_w,
            pumps=ph.pumps_w,
            fans=ph.fans_w,
            free=ph.free_fraction,
            cop=ph.cop,
            water=ph.water_l,
            fw_supply=ph.fw_supply_c,
            unmet=ph.unmet_heat_w,
            cap=ph.facility_cap_w if np.isfinite(ph.facility_cap_w) else np.nan,
            throttled=ph.throttled_chips,
            clock=float(ph.clock[busy].mean()) if busy.any() else 1.0,
            alloc=int(owned.sum()),
            busy=int(busy.sum()),
            failed=int(self.chip_failed.sum()),
            act=float(act_chip.mean()),
            queue=sum(1 for q in self.queue if a["kind"][q] == TRAINING),
            running=w.running_training,
            train=w.train_flops,
            tok=w.tokens_s,
            req=w.requests_s,
            drop=w.dropped_s,
            jpt=j_per_tok,
            outdoor=ph.cond.drybulb_c,
            wetbulb=ph.cond.wetbulb_c,
            rh=ph.cond.rel_humidity,
            supply=cp.supply_setpoint_c,
            ret=float(ph.us_return_c.mean()),
            tmax=float(tj.max()),
            price=ph.cond.price_usd_per_mwh,
            carbon=ph.cond.carbon_g_per_kwh,
            cost=energy_j / 3.6e9 * ph.cond.price_usd_per_mwh,
            co2=energy_j / 3.6e6 * ph.cond.carbon_g_per_kwh / 1000.0,
            energy=energy_j,
        )
        us_busy = np.bincount(topo.chip_us, weights=busy, minlength=topo.ultraservers)
        us_failed = np.bincount(topo.chip_us, weights=self.chip_failed, minlength=topo.ultraservers)
        us_act = topo.per_us(act_chip) / topo.chips_per_us
        us_tmax = tj.reshape(topo.ultraservers, topo.chips_per_us).max(axis=1)
        us_clock = topo.per_us(ph.clock) / topo.chips_per_us
        rec.ultraserver(i, t, ph.us_it, us_busy, us_failed, us_act, us_tmax, ph.us_return_c, us_clock)
        si = p.chip_sample_interval_s
        if si > 0 and t % si < dt:
            rec.chips(t, owner, act_chip, chip_p, tj, self.chip_failed)

    def _finish(self, j: int) -> None:
        a = self.jobs.a
        self.chip_owner[self.chip_owner == j] = -1
        a["state"][j] = DONE
        a["end"][j] = self.t_s + self.dt_s
        a["activity"][j] = 0.0
        a["rate"][j] = 0.0
        self._dirty.add(j)
        self._log("job_end", f"job:{j}", f"{self.jobs.names[j]} done, {a['work'][j]:.3g} FLOP")

    # ------------------------------------------------------------------ public
    def advance(self, steps: int) -> Frames:
        """Run ``steps`` steps; return their telemetry frames."""
        rec = _Recorder(steps, self.topo)
        for i in range(steps):
            self._step(rec, i)
        frames = rec.frames()
        frames["jobs"] = self._job_rows()
        frames["events"] = self._event_rows()
        if steps:
            self.last = {k: float(v[-1]) for k, v in frames["factory_ts"].items()}
        return frames

    def queue_view(self, limit: int = 50) -> list[tuple[int, str, int, int]]:
        """First queued jobs: (job_id, name, chips, wait_s)."""
        a = self.jobs.a
        out = []
        for j in list(self.queue)[:limit]:
            out.append((j, self.jobs.names[j], int(a["chips"][j]), self.t_s - int(a["submit"][j])))
        return out

    def _job_rows(self) -> dict[str, Any]:
        ids = np.array(sorted(self._dirty), dtype=np.int64)
        self._dirty.clear()
        a = self.jobs.a
        return {
            "job_id": ids.astype(np.int32),
            "kind": [KIND_NAMES[int(a["kind"][j])] for j in ids],
            "name": [self.jobs.names[j] for j in ids],
            "chips": a["chips"][ids],
            "precision": [self.jobs.precision[j] for j in ids],
            "params": a["params"][ids],
            "tokens": a["tokens"][ids],
            "work_flop": a["work"][ids],
            "done_flop": a["done"][ids],
            "lost_flop": a["lost"][ids],
            "submit_time_s": a["submit"][ids],
            "start_time_s": a["start"][ids],
            "end_time_s": a["end"][ids],
            "state": [STATE_NAMES[int(a["state"][j])] for j in ids],
            "ultraservers_spanned": a["spanned"][ids],
            "mfu": a["mfu"][ids],
            "restarts": a["restarts"][ids],
        }

    def _event_rows(self) -> dict[str, Any]:
        ev = self._events
        self._events = []
        return {
            "time_s": np.array([e[0] for e in ev], dtype=np.int64),
            "kind": [e[1] for e in ev],
            "target": [e[2] for e in ev],
            "detail": [e[3] for e in ev],
            "source": [e[4] for e in ev],
        }


FACTORY_FIELDS = {
    "time_s": ("t", np.int64),
    "it_power_w": ("it", np.float64),
    "facility_power_w": ("fac", np.float64),
    "cooling_power_w": ("cool", np.float64),
    "power_loss_w": ("loss", np.float64),
    "pue": ("pue", np.float64),
    "chip_power_w": ("chip", np.float64),
    "psu_loss_w": ("psu_loss", np.float64),
    "pdu_loss_w": ("pdu_loss", np.float64),
    "ups_loss_w": ("ups_loss", np.float64),
    "transformer_loss_w": ("tx_loss", np.float64),
    "chiller_power_w": ("chiller", np.float64),
    "pump_power_w": ("pumps", np.float64),
    "fan_power_w": ("fans", np.float64),
    "free_cooling_fraction": ("free", np.float64),
    "chiller_cop": ("cop", np.float64),
    "water_l": ("water", np.float64),
    "facility_water_supply_c": ("fw_supply", np.float64),
    "unmet_heat_w": ("unmet", np.float64),
    "facility_cap_w": ("cap", np.float64),
    "throttled_chips": ("throttled", np.int32),
    "mean_clock": ("clock", np.float64),
    "chips_total": ("total", np.int32),
    "chips_allocated": ("alloc", np.int32),
    "chips_busy": ("busy", np.int32),
    "chips_failed": ("failed", np.int32),
    "activity": ("act", np.float64),
    "queue_jobs": ("queue", np.int32),
    "running_jobs": ("running", np.int32),
    "training_flops": ("train", np.float64),
    "tokens_per_s": ("tok", np.float64),
    "requests_per_s": ("req", np.float64),
    "requests_dropped_per_s": ("drop", np.float64),
    "energy_per_token_j": ("jpt", np.float64),
    "outdoor_temp_c": ("outdoor", np.float64),
    "outdoor_wetbulb_c": ("wetbulb", np.float64),
    "outdoor_rh": ("rh", np.float64),
    "coolant_supply_c": ("supply", np.float64),
    "coolant_return_c": ("ret", np.float64),
    "max_chip_temp_c": ("tmax", np.float64),
    "price_usd_per_mwh": ("price", np.float64),
    "carbon_g_per_kwh": ("carbon", np.float64),
    "cost_usd": ("cost", np.float64),
    "co2_kg": ("co2", np.float64),
    "energy_j": ("energy", np.float64),
}


class _Recorder:
    """Preallocated per-advance telemetry buffers."""

    def __init__(self, steps: int, topo: Topology) -> None:
        self.topo = topo
        self.f = {key: np.zeros(steps, dtype=dt) for key, (_, dt) in FACTORY_FIELDS.items()}
        self.f["chips_total"][:] = topo.chips
        m = steps * topo.ultraservers
        self.u: dict[str, npt.NDArray[Any]] = {
            "time_s": np.zeros(m, dtype=np.int64),
            "ultraserver_id": np.tile(np.arange(topo.ultraservers, dtype=np.int32), steps),
            "row_id": np.tile(topo.us_row, steps),
            "power_w": np.zeros(m),
            "chips_busy": np.zeros(m, dtype=np.int32),
            "chips_failed": np.zeros(m, dtype=np.int32),
            "activity": np.zeros(m, dtype=np.float32),
            "max_chip_temp_c": np.zeros(m, dtype=np.float32),
            "coolant_return_c": np.zeros(m, dtype=np.float32),
            "clock": np.zeros(m, dtype=np.float32),
        }
        self.c: list[dict[str, npt.NDArray[Any]]] = []
        self._keys = {short: key for key, (short, _) in FACTORY_FIELDS.items()}

    def factory(self, i: int, **values: float) -> None:
        for short, v in values.items():
            self.f[self._keys[short]][i] = v

    def ultraserver(self, i: int, t: int, *cols: npt.NDArray[Any]) -> None:
        n = self.topo.ultraservers
        s = slice(i * n, (i + 1) * n)
        self.u["time_s"][s] = t
        for name, col in zip(
            ("power_w", "chips_busy", "chips_failed", "activity", "max_chip_temp_c", "coolant_return_c", "clock"),
            cols,
            strict=True,
        ):
            self.u[name][s] = col

    def chips(
        self,
        t: int,
        owner: npt.NDArray[Any],
        act: npt.NDArray[Any],
        pw: npt.NDArray[Any],
        tj: npt.NDArray[Any],
        failed: npt.NDArray[Any],
    ) -> None:
        n = self.topo.chips
        self.c.append(
            {
                "time_s": np.full(n, t, dtype=np.int64),
                "chip_id": np.arange(n, dtype=np.int32),
                "ultraserver_id": self.topo.chip_us,
                "job_id": owner.copy(),
                "neuroncore_utilization": act.astype(np.float32),
                "chip_power_w": pw.astype(np.float32),
                "t_junction_c": tj.astype(np.float32),
                "failed": failed.copy(),
            }
        )

    def frames(self) -> Frames:
        out: Frames = {"factory_ts": self.f, "ultraserver_ts": self.u}
        if self.c:
            out["chip_ts"] = {k: np.concatenate([c[k] for c in self.c]) for k in self.c[0]}
        return out


def steps_for(duration_s: float, dt_s: int) -> int:
    return int(math.ceil(duration_s / dt_s))
