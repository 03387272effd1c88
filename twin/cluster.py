"""The work side of the factory: who runs where, what waits, what fails and what is served.

``Cluster`` is the work state: the chips' ownership and health, the job table (``twin.jobs``),
the batch queue and replica requests, drains, the services and the random streams of the work.
Its ``step`` runs the work phases of a step in order, each a function of that state in its own
module, and returns what the work did and the events it reported:

1. repairs due and random failures (``twin.outages``),
2. drains and maintenance windows (``twin.outages``),
3. batch arrivals (``twin.arrivals``),
4. service requests and autoscaling (``twin.serving``),
5. scheduling and placement (``twin.queueing``),
6. batch progress at the chips' clocks, checkpoints, completions (``batch_progress``),
7. serving (``twin.serving``).

Per-chip state is NumPy arrays; jobs are a struct-of-arrays table. Python loops run over jobs only
when something happens to them (arrival, start, end, interruption), never over chips. Free chips
per UltraServer are kept up to date incrementally, so a step in which nothing starts or ends costs
no scheduling at all.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from twin import arrivals, failures, outages, queueing, routing, scheduler, services, serving, workload
from twin.catalog import Accelerator
from twin.events import Events
from twin.jobs import (
    DONE,
    INFERENCE,
    KIND_CODE,
    QUEUED,
    RESTART_ACTIVITY,
    RUNNING,
    SOURCES,
    STATE_NAMES,
    STOPPED,
    JobTable,
)
from twin.models import registry
from twin.params import JOB_CLASSES, KIND_NAMES, FactoryParams, JobClassParams
from twin.rng import Streams
from twin.serving import WorkStep
from twin.topology import Topology

__all__ = ["Cluster", "WorkStep", "batch_progress", "rescale_progress"]


class Cluster:
    def __init__(self, p: FactoryParams, topo: Topology, acc: Accelerator, rngs: Streams) -> None:
        self.p = p
        self.topo = topo
        self.acc = acc
        self.models = registry(p.models)
        n, nus, c = topo.chips, topo.ultraservers, topo.chips_per_us
        self.cpu = c
        # On a mixed floor, the router that sends arriving jobs to the floor's systems (set on
        # the floor's front door, ``twin.floor``); None: every job arrives here.
        self.router: routing.Router | None = None
        rng_jobs, rng_svc = rngs.jobs, rngs.services
        self.rng_arrivals, self.rng_jobs, self.rng_failures = rngs.arrivals, rng_jobs, rngs.failures
        self.chip_owner = np.full(n, -1, dtype=np.int32)
        self.chip_failed = np.zeros(n, dtype=bool)
        self.chip_repair_at = np.full(n, -1, dtype=np.int64)
        self.chip_hw_failed = np.zeros(n, dtype=bool)  # failed hardware (chip_failed = hw | tripped)
        self.chip_tripped = np.zeros(n, dtype=bool)  # powered off by a thermal trip
        self.chip_service = np.full(n, -1, dtype=np.int32)
        self.free = np.ones(n, dtype=bool)
        self.us_free = np.full(nus, c, dtype=np.int64)
        self.n_free = n
        self.n_alloc = 0  # chips held by jobs (``queueing.start`` / ``release``)
        # Bumped whenever chips fail, are repaired or recover from a trip (``twin.outages``): the
        # counts of failed chips are recounted only then, not every step.
        self.fail_ver = 0
        self._fc_ver = -1
        self._fc: tuple[int, npt.NDArray[np.int64]] = (0, np.zeros(nus, dtype=np.int64))
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
        # Batch jobs running, in start order (a dict as an ordered set: removal is O(1), which a
        # list's remove was not with thousands of jobs on a campus).
        self.running: dict[int, None] = {}
        self._run_arr = np.zeros(0, dtype=np.int64)
        self._run_train = np.zeros(0, dtype=bool)
        self._run_dirty = False
        self._restart_until_max = -1
        # Owned chips grouped by job: (chip order, segment starts, job of each segment).
        self._seg: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        self._sched = True
        self.dirty: set[int] = set()
        self._jobs_due = 0  # when ``job_rows`` next writes every waiting and running job
        self._evict_next: list[int] = []  # finished jobs recorded, to leave memory next time
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
        reserved = self._init_services(rng_svc)
        if reserved > n:
            raise ValueError(f"inference replicas need {reserved} chips but the hall has {n}")
        # The largest gang the hall can ever run once every initial replica is placed (a bigger
        # one would block a FIFO queue for good).
        self.training_capacity_chips = n - reserved
        self.nsvc = len(self.services)
        self.svc_power_w: npt.NDArray[np.float64] = np.zeros(self.nsvc)
        self._svc_chips: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    def _init_services(self, rng_svc: np.random.Generator) -> int:
        """Each service's model and its pool of replica slots (the autoscaler's maximum); the
        initial replicas are requested warm. Returns the chips the initial replicas need."""
        p, acc = self.p, self.acc
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
                    queueing.request_replica(self, j, 0, warm=True)
                ids.append(j)
                self.dirty.add(j)
            self.replicas.append(ids)
            self.replica_arr.append(np.asarray(ids, dtype=np.int64))
            reserved += sp.replicas * sp.chips_per_replica
        return reserved

    # ------------------------------------------------------------------ step
    def step(self, t: int, dt: int, clock: npt.NDArray[np.float64]) -> tuple[WorkStep, Events]:
        """The work phases of the step [t, t + dt) (module docstring); returns what the work did
        and the events it reported."""
        ev: Events = []
        self.step_failures = 0
        self.step_preemptions = 0
        outages.repairs_due(self, ev, t)
        outages.random_failures(self, ev, t, dt)
        if self.us_drain.any():
            outages.drains(self, ev, t)
        arrivals.arrivals(self, ev, t, dt)
        arrived = serving.autoscale(self, ev, t, dt)
        queueing.schedule(self, ev, t)
        train_flops, job_flops = batch_progress(self, ev, t, dt, clock)
        return serving.serve(self, arrived, t, dt, clock, train_flops, job_flops), ev

    # ------------------------------------------------------------------ for callers and tests
    def fail_chips(
        self, chips: npt.NDArray[np.int64], repair_at: int, cause: str = "thermal", t: int = 0
    ) -> int:
        """``twin.outages.fail_chips`` (events dropped); returns the jobs interrupted."""
        return outages.fail_chips(self, [], chips, repair_at, cause, t)

    def repair_chips(self, chips: npt.NDArray[np.int64]) -> None:
        outages.repair_chips(self, chips)

    def recover_thermal(self, chips: npt.NDArray[np.int64]) -> None:
        outages.recover_thermal(self, chips)

    def _enqueue(self, j: int) -> None:
        queueing.enqueue(self, j)

    # ------------------------------------------------------------------ telemetry
    def failed_counts(self) -> tuple[int, npt.NDArray[np.int64]]:
        """(chips out of service, chips with a hardware fault in each UltraServer)."""
        if self._fc_ver != self.fail_ver:
            nus = self.topo.ultraservers
            hw = np.bincount(self.topo.chip_us[np.flatnonzero(self.chip_hw_failed)], minlength=nus)
            self._fc = (int(np.count_nonzero(self.chip_failed)), hw.astype(np.int64))
            self._fc_ver = self.fail_ver
        return self._fc

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

    def job_rows(self, t: int) -> dict[str, Any]:
        """Rows of the jobs that changed, plus every queued or running job (their waits and work
        done move on) when due (``jobs_interval_s``; every call at 0)."""
        a = self.jobs.a
        # Finished jobs recorded by the previous call leave memory now (their slots are reused).
        if self._evict_next:
            self.jobs.evict(self._evict_next)
            for j in self._evict_next:
                self.last_us.pop(j, None)
            self.dirty.difference_update(self._evict_next)
        every = self.p.jobs_interval_s
        if every <= 0 or t >= self._jobs_due:
            # Every waiting and running job too (their waits and work done move on).
            live = set(self.queue) | set(self.running) | set(self.rqueue)
            ids = np.array(sorted(self.dirty | live), dtype=np.int64)
            self._jobs_due = t + every
        else:
            ids = np.array(sorted(self.dirty), dtype=np.int64)
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
            "system": [self.p.hall.system.key] * len(ids),
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


def batch_progress(
    cl: Cluster, ev: Events, t: int, dt: int, clock: npt.NDArray[np.float64]
) -> tuple[float, float]:
    """Batch jobs progress over [t, t + dt): a gang runs at its slowest chip's clock and makes no
    progress while restarting; checkpoints fall due; finished jobs end. Returns FLOP/s delivered
    to (training, all batch jobs)."""
    a = cl.jobs.a
    # Batch progress: a gang runs at its slowest chip's clock; no progress while restarting.
    train_flops = job_flops = 0.0
    run = queueing.running_array(cl)
    if len(run):
        rate = a["rate"][run]
        if clock.min() < 1.0:
            rate = rate * serving.job_clock(cl, run, clock)
        if cl._restart_until_max > t - dt:  # some gang is (or just stopped) restarting
            restarting = t < a["restart_until"][run]
            rate = np.where(restarting, 0.0, rate)
            a["activity"][run] = np.where(restarting, RESTART_ACTIVITY, cl.p.training.activity)
        done = a["done"][run]
        delivered = np.minimum(rate * dt, a["work"][run] - done)
        done += delivered
        a["done"][run] = done
        job_flops = float(delivered.sum()) / dt
        train_flops = float(delivered[cl._run_train].sum()) / dt
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
                queueing.finish(cl, ev, int(j), t + dt)

    return train_flops, job_flops


def rescale_progress(
    cl: Cluster, t: int, dt: int, before: npt.NDArray[np.float64], after: npt.NDArray[np.float64]
) -> tuple[float, float]:
    """Junction protection slowed chips inside the step [t, t + dt): the batch jobs still
    running get the work of the clocks they really ran at (``after``) instead of the clocks the
    step began with (``before``); a checkpoint taken in the step keeps the corrected work.
    Returns the FLOP/s taken back from (training, all batch jobs)."""
    run = queueing.running_array(cl)
    if not len(run):
        return 0.0, 0.0
    a = cl.jobs.a
    slower = serving.job_clock(cl, run, before) - serving.job_clock(cl, run, after)
    making_progress = t >= a["restart_until"][run]
    back = np.where(making_progress, np.maximum(a["rate"][run] * slower * dt, 0.0), 0.0)
    a["done"][run] -= back
    ck = a["ckpt_time"][run] == t + dt
    if ck.any():
        a["ckpt_done"][run[ck]] = a["done"][run[ck]]
    return float(back[cl._run_train].sum()) / dt, float(back.sum()) / dt
