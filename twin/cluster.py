"""The work side of the factory: who runs where, what waits, what fails and what is served.

``Cluster`` owns the chips' ownership and health, the job table, the batch queue and the replica
requests of the online services, the scheduler (``twin.scheduler``), random failures
(``twin.failures``), UltraServer drains and the services (``twin.services``). ``Simulation`` calls
``step`` once per time step and hands its events to ``apply``; the physics reads ``chip_owner``,
``chip_failed`` and each job's ``activity``.

Per-chip state is NumPy arrays; jobs are a struct-of-arrays table. Python loops run over jobs only
when something happens to them (arrival, start, end, interruption), never over chips. Free chips
per UltraServer are kept up to date incrementally, so a step in which nothing starts or ends costs
no scheduling at all.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from twin import failures, scheduler, services, workload
from twin.catalog import Accelerator
from twin.jobs import (
    DONE,
    FINETUNE,
    INFERENCE,
    KIND_CODE,
    PRETRAIN,
    QUEUED,
    RUNNING,
    SOURCES,
    STATE_NAMES,
    STOPPED,
    JobTable,
)
from twin.models import registry
from twin.params import JOB_CLASSES, KIND_NAMES, FactoryParams, JobClassParams
from twin.topology import Topology

RESTART_ACTIVITY = 0.1  # chips of a gang reloading its checkpoint (ASM)
NEVER = np.iinfo(np.int64).max // 2
DRAW_BATCH = 256  # jobs drawn per class at a time


@dataclass(frozen=True)
class WorkStep:
    """What the work did this step (the physics reads activities from the job table)."""

    train_flops: float  # FLOP/s delivered to pre-training and fine-tuning
    job_flops: float  # FLOP/s delivered to all batch jobs
    tokens_s: float
    requests_s: float  # requests arriving per second
    served_s: float
    dropped_s: float
    requests_queued: int
    running_training: int  # batch jobs running
    svc: tuple[services.ServiceStep, ...] = ()
    replicas: tuple[tuple[int, int, int], ...] = ()  # per service: warm, starting, not stopped


class Cluster:
    def __init__(
        self, p: FactoryParams, topo: Topology, acc: Accelerator, seed_seq: np.random.SeedSequence
    ) -> None:
        self.p = p
        self.topo = topo
        self.acc = acc
        self.models = registry(p.models)
        n, nus, c = topo.chips, topo.ultraservers, topo.chips_per_us
        self.cpu = c
        rng_arr, rng_jobs, rng_fail, rng_svc = (np.random.default_rng(s) for s in seed_seq.spawn(4))
        self.rng_arrivals, self.rng_jobs, self.rng_failures = rng_arr, rng_jobs, rng_fail
        self.chip_owner = np.full(n, -1, dtype=np.int32)
        self.chip_failed = np.zeros(n, dtype=bool)
        self.chip_repair_at = np.full(n, -1, dtype=np.int64)
        self.chip_hw_failed = np.zeros(n, dtype=bool)  # failed hardware (chip_failed = hw | tripped)
        self.chip_tripped = np.zeros(n, dtype=bool)  # powered off by a thermal trip
        self.chip_service = np.full(n, -1, dtype=np.int32)
        self.free = np.ones(n, dtype=bool)
        self.us_free = np.full(nus, c, dtype=np.int64)
        self.n_free = n
        self.us_drain = np.zeros(nus, dtype=bool)
        self.drain_deadline = np.full(nus, -1, dtype=np.int64)
        self.drain_maint_s = np.zeros(nus, dtype=np.int64)
        self.maint_until = np.full(nus, -2, dtype=np.int64)  # -2 not in maintenance, -1 open-ended
        self.next_repair = math.inf
        self.jobs = JobTable()
        self.placement: dict[int, npt.NDArray[np.int64]] = {}
        self.last_us: dict[int, str] = {}  # UltraServers of each job's latest placement
        self.queue: list[int] = []  # batch jobs waiting, in policy order
        self._qkeys: list[tuple[float, ...]] = []
        self.rqueue: list[int] = []  # replica requests waiting (always ahead of batch jobs)
        self.running: list[int] = []  # batch jobs running
        self._run_arr = np.zeros(0, dtype=np.int64)
        self._run_train = np.zeros(0, dtype=bool)
        self._run_dirty = False
        self._restart_until_max = -1
        # Owned chips grouped by job: (chip order, segment starts, job of each segment).
        self._seg: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        self._sched = True
        self.dirty: set[int] = set()
        self._evict_next: list[int] = []  # finished jobs recorded, to leave memory next time
        self.log: list[tuple[str, str, str]] = []
        self.failure_rows: list[tuple[int, str, int, str, int, int, int, str]] = []
        self.interrupt_rows: list[tuple[int, int, str, str, float, float, int, int]] = []
        self.step_failures = 0
        self.step_preemptions = 0
        self.cause_table = failures.cause_table(p.failures)
        self.sp = p.scheduler
        # Batch-job classes: codes, parameters and arrival rates.
        tp = p.training
        self.classes: list[tuple[int, JobClassParams]] = [
            (KIND_CODE[k], tp.job_class(k)) for k in JOB_CLASSES
        ]
        shares = np.array([cls.share for _, cls in self.classes], dtype=float)
        self.class_rate_s = tp.arrivals_per_day / 86400.0 * shares / max(shares.sum(), 1e-300)
        self.trace_next = 0
        self.rng_jobs_cls = rng_jobs.spawn(len(self.classes))
        self._draws: list[workload.JobDraws | None] = [None] * len(self.classes)
        self._draw_pos = [0] * len(self.classes)
        # Online services: a pool of replica slots each (the autoscaler's maximum).
        self.services: list[services.ServiceModel] = []
        self.replicas: list[list[int]] = []
        self.replica_arr: list[npt.NDArray[np.int64]] = []
        svc_rngs = rng_svc.spawn(max(len(p.services), 1)) if p.services else []
        reserved = 0
        for si, sp in enumerate(p.services):
            model = services.ServiceModel(sp, acc, svc_rngs[si], p.dt_s)
            self.services.append(model)
            slots = max(sp.replicas, sp.replicas_max if sp.autoscale else 0)
            ids = []
            for r in range(slots):
                j = self.jobs.add(
                    sp.name,
                    sp.precision,
                    kind=INFERENCE,
                    chips=sp.chips_per_replica,
                    params=sp.params,
                    service=si,
                    priority=sp.priority,
                    state=STOPPED,
                    source=SOURCES.index("service"),
                )
                if r < sp.replicas:
                    self._request_replica(j, 0, warm=True)
                ids.append(j)
                self.dirty.add(j)
            self.replicas.append(ids)
            self.replica_arr.append(np.asarray(ids, dtype=np.int64))
            reserved += sp.replicas * sp.chips_per_replica
        if reserved > n:
            raise ValueError(f"inference replicas need {reserved} chips but the hall has {n}")
        # The largest gang the hall can ever run once every initial replica is placed (a bigger
        # one would block a FIFO queue for good).
        self.training_capacity_chips = n - reserved
        self.nsvc = len(self.services)
        self.svc_power_w: npt.NDArray[np.float64] = np.zeros(self.nsvc)
        self._svc_chips: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    # ================================================================== chips
    def _refresh(self, chips: npt.NDArray[np.int64]) -> None:
        """Recompute schedulability of ``chips`` and the free counts of their UltraServers."""
        if not len(chips):
            return
        topo = self.topo
        self.free[chips] = (
            (self.chip_owner[chips] < 0) & ~self.chip_failed[chips] & ~self.us_drain[topo.chip_us[chips]]
        )
        c = self.cpu
        for u in np.unique(topo.chip_us[chips]):
            self.us_free[u] = int(np.count_nonzero(self.free[u * c : (u + 1) * c]))
        self.n_free = int(self.us_free.sum())
        self._sched = True

    def fail_chips(
        self, chips: npt.NDArray[np.int64], repair_at: int, cause: str = "thermal", t: int = 0
    ) -> int:
        """Take chips out of service; every job with a chip among them is interrupted. Hardware
        faults last until ``repair_at`` (-1: until a repair event; a chip already awaiting repair
        keeps the later time); ``cause == "thermal"`` (a trip of the physics) lasts until
        ``recover_thermal``. Returns the number of jobs interrupted."""
        chips = np.asarray(chips, dtype=np.int64)
        self.chip_failed[chips] = True
        if cause == "thermal":
            self.chip_tripped[chips] = True
        else:
            was = self.chip_hw_failed[chips]
            old = self.chip_repair_at[chips]
            new = np.full(len(chips), repair_at, dtype=np.int64)
            if repair_at >= 0:
                new = np.where(was & (old >= 0), np.maximum(old, repair_at), new)
                new = np.where(was & (old < 0), -1, new)  # an open-ended fault stays open
            self.chip_repair_at[chips] = new
            self.chip_hw_failed[chips] = True
            if repair_at >= 0:
                self.next_repair = min(self.next_repair, repair_at)
        owners = np.unique(self.chip_owner[chips])
        hit = [int(j) for j in owners[owners >= 0]]
        for j in hit:
            self._interrupt(j, t, "failure", cause)
        self._refresh(chips)
        return len(hit)

    def repair_chips(self, chips: npt.NDArray[np.int64]) -> None:
        """Hardware repaired (a chip still tripped by heat stays out until it recovers)."""
        chips = np.asarray(chips, dtype=np.int64)
        self.chip_hw_failed[chips] = False
        self.chip_repair_at[chips] = -1
        self.chip_failed[chips] = self.chip_tripped[chips]
        self._refresh(chips)

    def recover_thermal(self, chips: npt.NDArray[np.int64]) -> None:
        """Thermal trip over (a chip with a hardware fault stays out until repaired)."""
        chips = np.asarray(chips, dtype=np.int64)
        self.chip_tripped[chips] = False
        self.chip_failed[chips] = self.chip_hw_failed[chips]
        self._refresh(chips)

    def _random_failures(self, t: int, dt: int) -> None:
        fp = self.p.failures
        if fp.chip_hazard_per_h <= 0:
            return
        n_alive = self.topo.chips - int(np.count_nonzero(self.chip_failed))
        lam = failures.expected_failures(n_alive, fp.chip_hazard_per_h, dt)
        k = int(self.rng_failures.poisson(lam)) if lam > 0 else 0
        if k == 0:
            return
        d = failures.draw(~self.chip_failed, k, self.cause_table, fp.repair_sigma, self.rng_failures)
        topo = self.topo
        for chip, ci, rep in zip(d.chips.tolist(), d.cause.tolist(), d.repair_s.tolist(), strict=True):
            cause = self.cause_table.names[ci]
            blast = self.cause_table.blast[ci]
            self.step_failures += 1
            if blast == "job":
                j = int(self.chip_owner[chip])
                hit = 0
                if j >= 0:
                    self._interrupt(j, t, "failure", cause)
                    hit = 1
                self._failure_row(t, "chip", chip, cause, 0, 0, hit, "model")
                continue
            if blast == "server":
                s = int(topo.chip_server[chip])
                cps = topo.chips_per_server
                down = np.arange(s * cps, (s + 1) * cps, dtype=np.int64)
                down = down[~self.chip_failed[down]]
                hit = self.fail_chips(down, t + rep, cause, t)
                self._failure_row(t, "server", s, cause, len(down), rep, hit, "model")
            else:
                hit = self.fail_chips(np.array([chip], dtype=np.int64), t + rep, cause, t)
                self._failure_row(t, "chip", chip, cause, 1, rep, hit, "model")

    def _failure_row(
        self, t: int, level: str, idx: int, cause: str, down: int, repair_s: int, hit: int, source: str
    ) -> None:
        self.failure_rows.append((t, level, idx, cause, down, repair_s, hit, source))
        rep = f", repair in {repair_s / 3600:.1f} h" if repair_s > 0 else ""
        self.log.append(
            (
                "failure",
                f"{level}:{idx}",
                f"cause {cause}, {down} chip(s) down{rep}, {hit} job(s) interrupted",
            )
        )

    def _repairs_due(self, t: int) -> None:
        if t < self.next_repair:
            return
        due = np.flatnonzero((self.chip_repair_at >= 0) & (self.chip_repair_at <= t))
        if len(due):
            self.repair_chips(due)
            self.log.append(("chip_repaired", f"chips:{len(due)}", f"{len(due)} chips back in service"))
        pending = self.chip_repair_at[self.chip_repair_at >= 0]
        self.next_repair = float(pending.min()) if len(pending) else math.inf

    # ================================================================== events
    def inject_failure(self, level: str, idx: int, duration_s: int, t: int, source: str) -> str:
        chips = self.target_chips(level, idx)
        chips = chips[~self.chip_failed[chips]]
        repair = t + duration_s if duration_s > 0 else -1
        hit = self.fail_chips(chips, repair, "injected", t)
        self.step_failures += 1
        self.failure_rows.append((t, level, idx, "injected", len(chips), max(duration_s, 0), hit, source))
        return f"{len(chips)} chips failed, {hit} job(s) interrupted" + (
            f", repair in {duration_s} s" if repair >= 0 else ""
        )

    def target_chips(self, level: str, idx: int) -> npt.NDArray[np.int64]:
        topo = self.topo
        sizes = {
            "chip": (topo.chips, 1),
            "server": (topo.servers, topo.chips_per_server),
            "ultraserver": (topo.ultraservers, self.cpu),
        }
        count, width = sizes[level]
        if not 0 <= idx < count:
            raise ValueError(f"{level} {idx} out of range 0..{count - 1}")
        return np.arange(idx * width, (idx + 1) * width, dtype=np.int64)

    def drain(self, u: int, grace_s: int, maint_s: int, t: int) -> str:
        self.target_chips("ultraserver", u)
        self.us_drain[u] = True
        self.drain_deadline[u] = t + max(grace_s, 0)
        self.drain_maint_s[u] = max(maint_s, 0)
        self.maint_until[u] = -2
        self._refresh(self.target_chips("ultraserver", u))
        return (
            f"no new work; running jobs {'evicted now' if grace_s <= 0 else f'evicted after {grace_s} s'}; "
            + (f"maintenance {maint_s} s once empty" if maint_s > 0 else "until undrained")
        )

    def undrain(self, u: int) -> str:
        chips = self.target_chips("ultraserver", u)
        self.us_drain[u] = False
        self.maint_until[u] = -2
        self._refresh(chips)
        return "back in service"

    def _drains(self, t: int) -> None:
        c = self.cpu
        for u in np.flatnonzero(self.us_drain).tolist():
            if self.maint_until[u] == -2:  # draining
                owners = self.chip_owner[u * c : (u + 1) * c]
                busy = np.unique(owners[owners >= 0])
                if len(busy) and t >= self.drain_deadline[u]:
                    for j in busy.tolist():
                        self._interrupt(int(j), t, "drain", "maintenance")
                    busy = busy[:0]
                if not len(busy):
                    ms = int(self.drain_maint_s[u])
                    self.maint_until[u] = t + ms if ms > 0 else -1
                    self.log.append(
                        (
                            "maintenance_start",
                            f"ultraserver:{u}",
                            "drained" + (f", back in {ms} s" if ms > 0 else ""),
                        )
                    )
            elif self.maint_until[u] >= 0 and t >= self.maint_until[u]:
                self.undrain(u)
                self.log.append(("maintenance_end", f"ultraserver:{u}", "back in service"))

    def surge(self, target: str, factor: float, start: int, until: int) -> None:
        for si, st in enumerate(self.services):
            if not target or self.p.services[si].name == target:
                st.add_surge(factor, start, until)

    # ================================================================== queue
    def _key(self, j: int) -> tuple[float, ...]:
        a = self.jobs.a
        if self.sp.policy == "priority":
            return (-float(a["priority"][j]), float(a["submit"][j]), float(j))
        return (float(a["submit"][j]), float(j))

    def _enqueue(self, j: int) -> None:
        if len(self.queue) != len(self._qkeys):
            self._rebuild_queue()
        k = self._key(j)
        i = bisect.bisect_right(self._qkeys, k)
        self._qkeys.insert(i, k)
        self.queue.insert(i, j)
        self._sched = True

    def _rebuild_queue(self) -> None:
        """Jobs appended to ``queue`` from outside (tests, tools): put them in policy order."""
        a = self.jobs.a
        for j in self.queue:
            if a["queued_since"][j] == 0 and a["state"][j] == QUEUED and a["submit"][j] > 0:
                a["queued_since"][j] = a["submit"][j]
        pairs = sorted((self._key(j), j) for j in self.queue)
        self._qkeys = [k for k, _ in pairs]
        self.queue[:] = [j for _, j in pairs]
        self._sched = True

    def _request_replica(self, j: int, t: int, warm: bool = False) -> None:
        a = self.jobs.a
        a["state"][j] = QUEUED
        a["queued_since"][j] = t
        a["warm_at"][j] = -1 if warm else 0  # -1: starts warm (the run's initial replicas)
        key = (-int(a["priority"][j]), j)
        i = bisect.bisect_right([(-int(a["priority"][q]), q) for q in self.rqueue], key)
        self.rqueue.insert(i, j)
        self.dirty.add(j)
        self._sched = True

    def _stop_replica(self, j: int, t: int) -> None:
        a = self.jobs.a
        if a["state"][j] == QUEUED:
            self.rqueue.remove(j)
        elif a["state"][j] == RUNNING:
            self._release(j, t)
        a["state"][j] = STOPPED
        a["end"][j] = t
        a["activity"][j] = 0.0
        self.dirty.add(j)

    # ================================================================== scheduling
    def _start(self, j: int, t: int) -> bool:
        a = self.jobs.a
        need = int(a["chips"][j])
        if need > self.n_free:
            return False
        placed = scheduler.place(self.free, self.us_free, need, self.cpu, self.sp.placement)
        if placed is None:
            return False
        chips, spanned = placed
        self.chip_owner[chips] = j
        self.placement[j] = chips
        self.last_us[j] = (
            str(int(chips[0]) // self.cpu)
            if spanned == 1
            else ",".join(str(u) for u in np.unique(chips // self.cpu))
        )
        self._seg = None
        self.free[chips] = False
        if spanned == 1:
            self.us_free[int(chips[0]) // self.cpu] -= need
        else:
            self.us_free -= np.bincount(chips // self.cpu, minlength=len(self.us_free))
        self.n_free -= need
        self._sched = True
        a["state"][j] = RUNNING
        a["start"][j] = t
        if a["first_start"][j] < 0:
            a["first_start"][j] = t
        a["wait"][j] += t - a["queued_since"][j]
        a["spanned"][j] = spanned
        a["end"][j] = -1
        kind = int(a["kind"][j])
        if kind == INFERENCE:
            si = int(a["service"][j])
            self.chip_service[chips] = si
            self._svc_chips = None
            a["restart_until"][j] = t
            sp = self.p.services[si]
            a["warm_at"][j] = t if a["warm_at"][j] == -1 else t + int(round(sp.startup_s))
            a["activity"][j] = services.STARTING_ACTIVITY
        else:
            cls = self._class(kind)
            if a["mfu_base"][j] <= 0:
                a["mfu_base"][j] = workload.model_mfu(self.models.get(self.jobs.names[j]), cls)
            if a["ckpt_every"][j] < 0:
                a["ckpt_every"][j] = cls.checkpoint_interval_s if cls is not None else 1800
            mfu = workload.placement_mfu(
                float(a["mfu_base"][j]), spanned, self.p.training.cross_ultraserver_mfu_factor
            )
            a["mfu"][j] = mfu
            a["rate"][j] = workload.training_rate_flop_s(
                int(a["chips"][j]), self.acc.peak(self.jobs.precision[j]), mfu
            )
            a["ckpt_time"][j] = t
            every = int(a["ckpt_every"][j])
            a["ckpt_due"][j] = t + every if every > 0 else NEVER
            restart = self.p.training.restart_cost_s if a["restarts"][j] > 0 else 0
            a["restart_until"][j] = t + restart
            self._restart_until_max = max(self._restart_until_max, t + restart)
            work = float(a["work"][j])
            left = (work - a["done"][j]) / work if work > 0 else 0.0
            est = a["est"][j] if a["est"][j] > 0 else (work / a["rate"][j] if a["rate"][j] > 0 else 0.0)
            a["est_end"][j] = t + restart + est * left * self.sp.runtime_estimate_factor
            a["activity"][j] = RESTART_ACTIVITY if restart > 0 else self.p.training.activity
            self.running.append(j)
            self._run_dirty = True
        self.dirty.add(j)
        self.log.append(
            ("job_start", f"job:{self.jobs.id_of(j)}", f"{self.jobs.names[j]} on {len(chips)} chips, {spanned} UltraServer(s)")
        )
        return True

    def _class(self, kind: int) -> JobClassParams | None:
        name = KIND_NAMES[kind]
        return self.p.training.job_class(name) if name in JOB_CLASSES else None

    def _release(self, j: int, t_end: int) -> None:
        """Give a job's chips back (those not failed or drained become free) and book the time it
        held them."""
        a = self.jobs.a
        chips = self.placement.pop(j, None)
        if chips is None:
            chips = np.flatnonzero(self.chip_owner == j).astype(np.int64)
        self.chip_owner[chips] = -1
        if a["kind"][j] == INFERENCE:
            self.chip_service[chips] = -1
            self._svc_chips = None
        self._seg = None
        ok = ~self.chip_failed[chips]
        if self.us_drain.any():
            ok &= ~self.us_drain[chips // self.cpu]
        self.free[chips] = ok
        back = chips[ok]
        if len(back):
            self.us_free += np.bincount(back // self.cpu, minlength=len(self.us_free))
            self.n_free += len(back)
        self._sched = True
        a["run_s"][j] += t_end - a["start"][j]
        a["prog_s"][j] += max(0, t_end - a["restart_until"][j])
        if j in self.running:
            self.running.remove(j)
            self._run_dirty = True

    def _interrupt(self, j: int, t: int, reason: str, cause: str, by: int = -1) -> None:
        a = self.jobs.a
        self._release(j, t)
        lost = float(a["done"][j] - a["ckpt_done"][j])
        lost_s = float(a["prog_s"][j] - a["ckpt_prog_s"][j])
        a["lost"][j] += lost
        a["done"][j] = a["ckpt_done"][j]
        a["lost_s"][j] += lost_s
        a["prog_s"][j] = a["ckpt_prog_s"][j]
        a["restarts"][j] += 1
        if reason == "preemption":
            a["preemptions"][j] += 1
            self.step_preemptions += 1
        else:
            a["failures"][j] += 1
        a["activity"][j] = 0.0
        a["rate"][j] = 0.0
        jid = self.jobs.id_of(j)
        by_id = self.jobs.id_of(by) if by >= 0 else -1
        self.interrupt_rows.append((t, jid, reason, cause, lost, lost_s, int(a["chips"][j]), by_id))
        if a["kind"][j] == INFERENCE:
            self._request_replica(j, t)
        else:
            a["state"][j] = QUEUED
            a["queued_since"][j] = t
            self._enqueue(j)
        self.dirty.add(j)
        what = "preempted" if reason == "preemption" else "interrupted"
        by_s = f" by job:{by_id}" if by >= 0 else f" ({cause})"
        self.log.append(
            (
                f"job_{what}",
                f"job:{jid}",
                f"{self.jobs.names[j]} {what}{by_s}, lost {lost:.3g} FLOP since checkpoint",
            )
        )

    def _finish(self, j: int, t_end: int) -> None:
        a = self.jobs.a
        self._release(j, t_end)
        a["state"][j] = DONE
        a["end"][j] = t_end
        a["activity"][j] = 0.0
        a["rate"][j] = 0.0
        self.dirty.add(j)
        self.log.append(("job_end", f"job:{self.jobs.id_of(j)}", f"{self.jobs.names[j]} done, {a['work'][j]:.3g} FLOP"))

    def _preempt_for(self, j: int, t: int) -> bool:
        """Priority policy: free chips for ``j`` by preempting lower-priority preemptible batch
        jobs (least wasted work first). True if enough chips were freed."""
        a = self.jobs.a
        need = int(a["chips"][j]) - int(self.us_free.sum())
        if need <= 0 or not self.running:
            return False
        run = np.asarray(self.running, dtype=np.int64)
        ok = a["preemptible"][run] & (a["priority"][run] < a["priority"][j])
        if self.us_drain.any():  # chips on a draining UltraServer would not come free
            ok &= np.array([not self.us_drain[self.placement[int(v)] // self.cpu].any() for v in run])
        cand = run[ok]
        if not len(cand):
            return False
        waste = (a["done"][cand] - a["ckpt_done"][cand]) / np.maximum(a["rate"][cand], 1.0)
        cost = (waste + self.p.training.restart_cost_s) * a["chips"][cand]
        pick = scheduler.victims(
            need, a["chips"][cand].astype(np.int64), a["priority"][cand].astype(np.int64), cost
        )
        if not len(pick):
            return False
        for v in cand[pick].tolist():
            self._interrupt(int(v), t, "preemption", f"priority {int(a['priority'][j])}", by=j)
        return True

    def _schedule(self, t: int) -> None:
        if len(self.queue) != len(self._qkeys):
            self._rebuild_queue()
        if not self._sched:
            return
        self._sched = False
        a = self.jobs.a
        policy = self.sp.policy
        head_need = -1
        while self.rqueue:
            j = self.rqueue[0]
            if self._start(j, t) or (policy == "priority" and self._preempt_for(j, t) and self._start(j, t)):
                self.rqueue.pop(0)
                continue
            head_need = int(a["chips"][j])
            break
        first = 0
        if head_need < 0:
            while self.queue:
                j = self.queue[0]
                if self._start(j, t) or (
                    policy == "priority" and self._preempt_for(j, t) and self._start(j, t)
                ):
                    self.queue.pop(0)
                    self._qkeys.pop(0)
                    continue
                head_need = int(a["chips"][j])
                first = 1
                break
        if policy == "fifo" or head_need < 0 or len(self.queue) <= first:
            return
        # EASY backfill behind the blocked head.
        free = self.n_free
        if free <= 0:
            return
        run = self._running_array()
        shadow, extra = scheduler.reservation(
            t, free, head_need, a["est_end"][run], a["chips"][run].astype(np.int64)
        )
        cand = np.asarray(self.queue[first : first + self.sp.backfill_depth], dtype=np.int64)
        need = a["chips"][cand].astype(np.int64)
        work = a["work"][cand]
        left = np.where(work > 0, (work - a["done"][cand]) / np.where(work > 0, work, 1.0), 1.0)
        restart = np.where(a["restarts"][cand] > 0, self.p.training.restart_cost_s, 0)
        end = t + a["est"][cand] * self.sp.runtime_estimate_factor * left + restart
        ok = (need <= free) & ((end <= shadow) | (need <= extra))
        started: set[int] = set()
        for k in np.flatnonzero(ok).tolist():
            if free <= 0:
                break
            nk = int(need[k])
            fits_time = end[k] <= shadow
            if nk <= free and (fits_time or nk <= extra) and self._start(int(cand[k]), t):
                started.add(int(cand[k]))
                free -= nk
                if not fits_time:
                    extra -= nk
        if started:
            keep = [i for i, j in enumerate(self.queue) if j not in started]
            self.queue[:] = [self.queue[i] for i in keep]
            self._qkeys = [self._qkeys[i] for i in keep]

    def _effective_replicas(
        self, svc: services.ServiceModel, warm: npt.NDArray[np.int64], clock: npt.NDArray[np.float64]
    ) -> float:
        """Warm replicas in full-clock equivalents. A capped or hot replica runs its compute-bound
        prefill at its clock while memory-bound decode keeps its pace (HBM bandwidth does not
        follow the core clock): per-request time = prefill / f + decode."""
        n = len(warm)
        if n == 0 or clock.min() >= 1.0:
            return float(n)
        f = np.maximum(self._job_clock(warm, clock), 1e-3)
        per = 1.0 / svc.capacity_per_replica
        pre = min(svc.roof.prefill_s, per)
        return float(np.sum(per / (pre / f + (per - pre))))

    def _job_clock(
        self, run: npt.NDArray[np.int64], clock: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """Slowest chip clock of each job in ``run`` (chips grouped by owner, cached until the
        placements change)."""
        if self._seg is None:
            owner = self.chip_owner
            order = np.argsort(owner, kind="stable")
            order = order[owner[order] >= 0].astype(np.int64)
            ow = owner[order].astype(np.int64)
            starts = np.flatnonzero(np.r_[True, ow[1:] != ow[:-1]]).astype(np.int64) if len(ow) else ow[:0]
            self._seg = (order, starts, ow[starts])
        order, starts, seg_jobs = self._seg
        mins = np.minimum.reduceat(clock[order], starts)
        out: npt.NDArray[np.float64] = mins[np.searchsorted(seg_jobs, run)]
        return out

    def _running_array(self) -> npt.NDArray[np.int64]:
        if self._run_dirty:
            self._run_arr = np.asarray(self.running, dtype=np.int64)
            kinds = self.jobs.a["kind"][self._run_arr]
            self._run_train = (kinds == PRETRAIN) | (kinds == FINETUNE)
            self._run_dirty = False
        return self._run_arr

    # ================================================================== arrivals
    def _arrivals(self, t: int, dt: int) -> None:
        tp = self.p.training
        cap = self.training_capacity_chips
        if cap > 0 and tp.arrivals_per_day > 0:
            f = workload.diurnal_factor(t, tp.diurnal_peak_to_trough, tp.peak_hour, tp.weekend_factor) * dt
            for ci, (code, cls) in enumerate(self.classes):
                lam = self.class_rate_s[ci] * f
                k = int(self.rng_arrivals.poisson(lam)) if lam > 0 else 0
                for _ in range(k):
                    chips, model, nominal = self._next_draw(ci, cls, cap)
                    self._add_job(code, cls, chips, model, nominal, math.nan, t, -1, 0)
        tr = tp.trace
        if tr is not None:
            n = len(tr.submit_s)
            while self.trace_next < n and tr.submit_s[self.trace_next] <= t:
                r = self.trace_next
                self.trace_next += 1
                code = int(tr.kind[r])
                tcls = self._class(code)
                assert tcls is not None
                chips = int(tr.chips[r])
                if chips > self.training_capacity_chips:  # could never start: it would block the queue
                    self.log.append(
                        (
                            "job_rejected",
                            f"trace:{r}",
                            f"{chips} chips > the {self.training_capacity_chips} the hall has for batch work",
                        )
                    )
                    continue
                model = tr.model[r] or tcls.models[0]
                self._add_job(
                    code,
                    tcls,
                    chips,
                    model,
                    float(tr.duration_s[r]),
                    float(tr.work_flop[r]),
                    t,
                    int(tr.priority[r]),
                    1,
                )

    def _next_draw(self, ci: int, cls: JobClassParams, cap: int) -> tuple[int, str, float]:
        """Next job of class ``ci`` from a buffer drawn in batches (same stream, fewer calls)."""
        buf = self._draws[ci]
        if buf is None or self._draw_pos[ci] >= len(buf.nominal_s):
            buf = self._draws[ci] = workload.draw_jobs(cls, DRAW_BATCH, self.rng_jobs_cls[ci], cap)
            self._draw_pos[ci] = 0
        i = self._draw_pos[ci]
        self._draw_pos[ci] = i + 1
        return int(buf.chips[i]), buf.model[i], float(buf.nominal_s[i])

    def _add_job(
        self,
        code: int,
        cls: JobClassParams,
        chips: int,
        model_name: str,
        nominal_s: float,
        work: float,
        t: int,
        priority: int,
        source: int,
    ) -> int:
        """A batch job: the given work, or D from its nominal run length — the time it takes on
        its ideal placement on the reference hardware (Trainium3 in 144-chip UltraServers), so
        the same scenario asks the same FLOP of any hall and the hardware decides how long the
        job runs."""
        m = self.models.get(model_name)
        n_act = m.active_params if m is not None else 1e9
        k = workload.FLOP_PER_PARAM_TOKEN[KIND_NAMES[code]]
        base = workload.model_mfu(m, cls)
        xf = self.p.training.cross_ultraserver_mfu_factor
        rate = workload.training_rate_flop_s(
            chips,
            self.acc.peak(cls.precision),
            workload.placement_mfu(base, workload.ideal_spanned(chips, self.cpu), xf),
        )
        if math.isnan(work):
            ref = workload.REFERENCE_ACCELERATOR
            ref_rate = workload.training_rate_flop_s(
                chips,
                ref.peak(cls.precision),
                workload.placement_mfu(
                    base, workload.ideal_spanned(chips, workload.REFERENCE_DOMAIN_CHIPS), xf
                ),
            )
            work = nominal_s * ref_rate
        nominal_s = work / rate
        j = self.jobs.add(
            model_name,
            cls.precision,
            kind=code,
            chips=chips,
            params=n_act,
            tokens=work / (k * n_act),
            work=work,
            submit=t,
            queued_since=t,
            priority=priority if priority >= 0 else cls.priority,
            preemptible=cls.preemptible,
            ckpt_every=cls.checkpoint_interval_s,
            mfu_base=base,
            est=nominal_s,
            nominal=nominal_s,
            source=source,
        )
        self._enqueue(j)
        self.dirty.add(j)
        return j

    # ================================================================== step
    def step(self, t: int, dt: int, clock: npt.NDArray[np.float64]) -> WorkStep:
        """Repairs, failures, drains, arrivals, autoscaling, scheduling, training progress and
        serving for the step [t, t + dt)."""
        self.step_failures = 0
        self.step_preemptions = 0
        self._repairs_due(t)
        self._random_failures(t, dt)
        if self.us_drain.any():
            self._drains(t)
        self._arrivals(t, dt)
        arrived = []
        a = self.jobs.a
        for si, svc in enumerate(self.services):
            k = svc.arrivals(t, dt)
            arrived.append(k)
            slots = self.replica_arr[si]
            st = a["state"][slots]
            active = int(np.count_nonzero(st != STOPPED))
            want = svc.desired_replicas(t, dt, k, active)
            if want != active:
                self._scale(si, want, active, t)
        self._schedule(t)

        # Batch progress: a gang runs at its slowest chip's clock; no progress while restarting.
        train_flops = job_flops = 0.0
        run = self._running_array()
        if len(run):
            rate = a["rate"][run]
            if clock.min() < 1.0:
                rate = rate * self._job_clock(run, clock)
            if self._restart_until_max > t - dt:  # some gang is (or just stopped) restarting
                restarting = t < a["restart_until"][run]
                rate = np.where(restarting, 0.0, rate)
                a["activity"][run] = np.where(restarting, RESTART_ACTIVITY, self.p.training.activity)
            done = a["done"][run]
            delivered = np.minimum(rate * dt, a["work"][run] - done)
            done += delivered
            a["done"][run] = done
            job_flops = float(delivered.sum()) / dt
            train_flops = float(delivered[self._run_train].sum()) / dt
            ck = a["ckpt_due"][run] <= t + dt
            if ck.any():
                jj = run[ck]
                a["ckpt_done"][jj] = a["done"][jj]
                a["ckpt_prog_s"][jj] = a["prog_s"][jj] + np.maximum(0, t + dt - a["restart_until"][jj])
                a["ckpt_time"][jj] = t + dt
                a["ckpt_due"][jj] = t + dt + a["ckpt_every"][jj]
            fin = done >= a["work"][run] * (1 - 1e-12)
            if fin.any():
                for j in run[fin].tolist():
                    self._finish(int(j), t + dt)

        # Online services: warm replicas serve; starting ones load weights.
        steps: list[services.ServiceStep] = []
        reps: list[tuple[int, int, int]] = []
        tokens = req = served = dropped = 0.0
        queued = 0
        for si, svc in enumerate(self.services):
            slots = self.replica_arr[si]
            up = a["state"][slots] == RUNNING
            warm = up & (a["warm_at"][slots] <= t)
            n_warm, n_up = int(np.count_nonzero(warm)), int(np.count_nonzero(up))
            s = svc.serve(arrived[si], self._effective_replicas(svc, slots[warm], clock), dt)
            reps.append((n_warm, n_up - n_warm, int(np.count_nonzero(a["state"][slots] != STOPPED))))
            a["activity"][slots] = np.where(warm, s.activity, np.where(up, services.STARTING_ACTIVITY, 0.0))
            steps.append(s)
            tokens += s.tokens_s
            req += s.arrived / dt
            served += s.served / dt
            dropped += s.dropped / dt
            queued += s.queued
        return WorkStep(
            train_flops,
            job_flops,
            tokens,
            req,
            served,
            dropped,
            queued,
            len(self.running),
            tuple(steps),
            tuple(reps),
        )

    def _scale(self, si: int, want: int, active: int, t: int) -> None:
        """Autoscaler decision: request stopped replica slots, or stop the least useful replicas
        (queued first, then the ones still loading, then the most recently warmed)."""
        a = self.jobs.a
        slots = self.replica_arr[si].tolist()
        if want > active:
            for j in [j for j in slots if a["state"][j] == STOPPED][: want - active]:
                self._request_replica(j, t)
        else:
            live = [j for j in slots if a["state"][j] != STOPPED]
            live.sort(key=lambda j: (a["state"][j] != QUEUED, -int(a["warm_at"][j])))
            for j in live[: active - want]:
                self._stop_replica(j, t)
            self._sched = True
        self.log.append(("autoscale", self.services[si].p.name, f"{active} -> {want} replicas"))

    # ================================================================== telemetry
    def us_counts(self) -> tuple[int, int, int, float]:
        """(free chips, drained idle chips, whole free UltraServers, fragmentation)."""
        c = self.cpu
        free = int(self.us_free.sum())
        drained = 0
        if self.us_drain.any():
            d = np.repeat(self.us_drain, c)
            drained = int(np.count_nonzero(d & (self.chip_owner < 0) & ~self.chip_failed))
        whole = int(np.count_nonzero(self.us_free == c))
        return free, drained, whole, scheduler.fragmentation(self.us_free, c)

    def service_power_w(self, chip_p: npt.NDArray[np.float64], gross: float) -> npt.NDArray[np.float64]:
        """Facility power attributed to each service: its replicas' chip power, grossed up by
        ``gross`` (IT per chip watt x PUE)."""
        if not self.nsvc:
            return self.svc_power_w
        if self._svc_chips is None:  # replica chips and their service, until placements change
            chips = [self.placement[j] for ids in self.replicas for j in ids if j in self.placement]
            idx = np.concatenate(chips) if chips else np.zeros(0, dtype=np.int64)
            self._svc_chips = (idx, self.chip_service[idx].astype(np.int64))
        idx, svc = self._svc_chips
        per = np.bincount(svc, weights=chip_p[idx], minlength=self.nsvc)
        self.svc_power_w = np.asarray(per * gross, dtype=np.float64)
        return self.svc_power_w

    def job_rows(self, t: int) -> dict[str, Any]:
        """Rows of the jobs that changed, plus every queued or running job (their waits and work
        done move on)."""
        a = self.jobs.a
        # Finished jobs recorded by the previous call leave memory now (their slots are reused).
        if self._evict_next:
            self.jobs.evict(self._evict_next)
            for j in self._evict_next:
                self.last_us.pop(j, None)
            self.dirty.difference_update(self._evict_next)
        live = set(self.queue) | set(self.running) | set(self.rqueue)
        ids = np.array(sorted(self.dirty | live), dtype=np.int64)
        self.dirty.clear()
        st_all = a["state"][ids]
        self._evict_next = ids[(st_all == DONE) & (a["kind"][ids] != INFERENCE)].tolist()
        st = a["state"][ids]
        wait = a["wait"][ids] + np.where(st == QUEUED, t - a["queued_since"][ids], 0)
        on = st == RUNNING
        run_s = a["run_s"][ids] + np.where(on, t - a["start"][ids], 0)
        prog_s = a["prog_s"][ids] + np.where(on, np.maximum(0, t - a["restart_until"][ids]), 0)
        return {
            "job_id": self.jobs.ids(ids).astype(np.int32),
            "kind": [KIND_NAMES[int(k)] for k in a["kind"][ids]],
            "name": [self.jobs.names[j] for j in ids],
            "chips": a["chips"][ids],
            "precision": [self.jobs.precision[j] for j in ids],
            "priority": a["priority"][ids],
            "params": a["params"][ids],
            "tokens": a["tokens"][ids],
            "work_flop": a["work"][ids],
            "done_flop": a["done"][ids],
            "lost_flop": a["lost"][ids],
            "submit_time_s": a["submit"][ids],
            "first_start_time_s": a["first_start"][ids],
            "start_time_s": a["start"][ids],
            "end_time_s": a["end"][ids],
            "state": [STATE_NAMES[int(s)] for s in st],
            "wait_s": wait,
            "run_s": run_s,
            "effective_s": prog_s,
            "lost_s": a["lost_s"][ids],
            "estimate_s": a["nominal"][ids],
            "ultraservers_spanned": a["spanned"][ids],
            "ultraservers": [self.last_us.get(int(j), "") for j in ids],
            "mfu": a["mfu"][ids],
            "restarts": a["restarts"][ids],
            "failures": a["failures"][ids],
            "preemptions": a["preemptions"][ids],
            "source": [SOURCES[int(s)] for s in a["source"][ids]],
        }

    def event_tables(self) -> dict[str, dict[str, Any]]:
        fr, ir = self.failure_rows, self.interrupt_rows
        self.failure_rows, self.interrupt_rows = [], []
        return {
            "failures": {
                "time_s": np.array([r[0] for r in fr], dtype=np.int64),
                "level": [r[1] for r in fr],
                "target_id": np.array([r[2] for r in fr], dtype=np.int32),
                "cause": [r[3] for r in fr],
                "chips_down": np.array([r[4] for r in fr], dtype=np.int32),
                "repair_s": np.array([r[5] for r in fr], dtype=np.int64),
                "jobs_interrupted": np.array([r[6] for r in fr], dtype=np.int32),
                "source": [r[7] for r in fr],
            },
            "interruptions": {
                "time_s": np.array([r[0] for r in ir], dtype=np.int64),
                "job_id": np.array([r[1] for r in ir], dtype=np.int32),
                "reason": [r[2] for r in ir],
                "cause": [r[3] for r in ir],
                "lost_flop": np.array([r[4] for r in ir], dtype=np.float64),
                "lost_s": np.array([r[5] for r in ir], dtype=np.float64),
                "chips": np.array([r[6] for r in ir], dtype=np.int32),
                "by_job_id": np.array([r[7] for r in ir], dtype=np.int32),
            },
        }

    def queue_view(self, t: int, limit: int = 50) -> list[tuple[int, str, int, int]]:
        """First waiting jobs, replica requests first: (job_id, name, chips, wait_s)."""
        a = self.jobs.a
        return [
            (self.jobs.id_of(j), self.jobs.names[j], int(a["chips"][j]), t - int(a["queued_since"][j]))
            for j in (self.rqueue + self.queue)[:limit]
        ]
