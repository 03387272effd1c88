"""The work side of the factory: who runs where, what waits, what fails and what is served.

``Cluster`` is one hall's work state: the slices of ``twin.work.workstate.Work`` (the chip pool of
``twin.work.chips``, the job table of ``twin.work.jobs``, the batch queue and replica requests, the running
batch jobs, drains, the services and the job log) plus the arrivals' state and the failures'
random stream. Its ``step`` runs the work phases of a step in order, each a function over the
slices it needs in its own module, and returns what the work did and the events it reported:

1. repairs due and random failures (``twin.work.outages``),
2. drains and maintenance windows (``twin.work.outages``),
3. batch arrivals (``twin.work.arrivals``),
4. service requests and autoscaling (``twin.work.serving``),
5. scheduling and placement (``twin.work.queueing``),
6. serving at the clocks the step begins with (``twin.work.serving``);
7. after the physics has set this step's clocks (caps and protection inside the step): batch
   progress at the clocks the chips ran at, checkpoints, completions (``book``,
   ``batch_progress``).

Per-chip state is NumPy arrays; jobs are a struct-of-arrays table. Python loops run over jobs only
when something happens to them (arrival, start, end, interruption), never over chips. Free chips
per UltraServer are kept up to date incrementally by the chip pool (the only place that writes
them), so a step in which nothing starts or ends costs no scheduling at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from twin.spec.catalog import Accelerator
from twin.spec.events import Events
from twin.spec.models import registry
from twin.spec.params import FactoryParams
from twin.spec.rng import Streams
from twin.spec.topology import Topology
from twin.work import arrivals, failures, joblog, outages, queueing, routing, services, serving
from twin.work.chips import ChipPool
from twin.work.jobs import RESTART_ACTIVITY, JobTable, rows
from twin.work.serving import WorkStep
from twin.work.workstate import Drains, JobLog, Queues, Running, ServiceState, Work

__all__ = ["Cluster", "WorkStep", "batch_progress", "restart_activity"]


class Cluster(Work):
    """One hall's work state (``twin.work.workstate.Work``: the chip pool, job table, queues, running
    jobs, drains, services and job log) with the arrivals' state and the failures' stream, and
    the step that runs the work phases over them."""

    def __init__(self, p: FactoryParams, topo: Topology, acc: Accelerator, rngs: Streams) -> None:
        super().__init__(
            p,
            acc,
            topo,
            registry(p.models),
            ChipPool(topo),
            JobTable(),
            Queues(p.scheduler.policy),
            Running(),
            Drains.empty(topo.ultraservers),
            ServiceState(),
            JobLog(),
        )
        self.rng_failures = rngs.failures
        self.cause_table = failures.cause_table(p.failures)
        self.arrivals_state = arrivals.ArrivalState.build(p.training, rngs.arrivals, rngs.jobs)
        # Online services: a pool of replica slots each (the autoscaler's maximum).
        reserved = serving.add_services(self, rngs.services)
        n = topo.chips
        if reserved > n:
            raise ValueError(f"inference replicas need {reserved} chips but the hall has {n}")
        self.training_capacity_chips = n - reserved

    # ------------------------------------------------------------------ step
    def prepare(
        self,
        t: int,
        dt: int,
        clock: npt.NDArray[np.float64],
        full_clock: bool = False,
        router: routing.Router | None = None,
    ) -> tuple[WorkStep, Events]:
        """The work phases before the physics (module docstring, 1-6): what runs where in
        [t, t + dt) and how active it is, and what the services serve at the clocks the step
        begins with (``full_clock``: all of them 1). Batch work is booked after the physics, at
        the clocks the chips ran at (``book``). ``router``: on a mixed floor, what sends arriving
        jobs to the floor's systems (this is its front door, ``twin.compose.hall``); None: every
        job arrives here. Returns the services' step and the events reported."""
        ev: Events = []
        self.log.step_failures = 0
        self.log.step_preemptions = 0
        outages.repairs_due(self.pool, ev, t)
        outages.random_failures(self, self.rng_failures, self.cause_table, ev, t, dt)
        if self.pool.drained.any():
            outages.drains(self, ev, t)
        arrivals.arrivals(self.arrivals_state, self, router, ev, t, dt)
        arrived = serving.autoscale(self, ev, t, dt)
        queueing.schedule(self, ev, t)
        restart_activity(self, t, dt)
        w = serving.serve(self.svc, self.jobs, self.pool, 0, arrived, t, dt, clock, 0.0, 0.0, full_clock)
        return w, ev

    def book(
        self, w: WorkStep, t: int, dt: int, clock: npt.NDArray[np.float64], full_clock: bool = False
    ) -> tuple[WorkStep, Events]:
        """Phase 6 once the step's clocks are known (caps and protection inside the step): batch
        jobs progress at the clocks their chips ran at (``full_clock``: all of them 1),
        checkpoints fall due, finished jobs end."""
        ev: Events = []
        train_flops, job_flops = batch_progress(self, ev, t, dt, clock, full_clock)
        return w.booked(train_flops, job_flops, len(self.running.jobs)), ev

    # ------------------------------------------------------------------ for callers and tests
    def fail_chips(
        self, chips: npt.NDArray[np.int64], repair_at: int, cause: str = "thermal", t: int = 0
    ) -> int:
        """``twin.work.outages.fail_chips`` (events dropped); returns the jobs interrupted."""
        return outages.fail_chips(self, [], chips, repair_at, cause, t)

    def repair_chips(self, chips: npt.NDArray[np.int64]) -> None:
        outages.repair_chips(self, chips)

    def recover_thermal(self, chips: npt.NDArray[np.int64]) -> None:
        outages.recover_thermal(self, chips)

    def _enqueue(self, j: int) -> None:
        queueing.enqueue(self.queues, self.jobs, [j])

    # Read-only views of the slices under the names callers know.
    @property
    def chip_owner(self) -> npt.NDArray[np.int32]:
        return self.pool.owner

    @property
    def chip_failed(self) -> npt.NDArray[np.bool_]:
        return self.pool.failed

    @property
    def chip_repair_at(self) -> npt.NDArray[np.int64]:
        return self.pool.repair_at

    @property
    def chip_hw_failed(self) -> npt.NDArray[np.bool_]:
        return self.pool.hw_failed

    @property
    def n_alloc(self) -> int:
        return self.pool.n_alloc

    @property
    def n_free(self) -> int:
        return self.pool.n_free

    @property
    def placement(self) -> Mapping[int, npt.NDArray[np.int64]]:
        return self.pool.placement

    @property
    def queue(self) -> list[int]:
        """Batch jobs waiting, in policy order."""
        return self.queues.queue

    @property
    def rqueue(self) -> list[int]:
        """Replica requests waiting (always ahead of batch jobs)."""
        return self.queues.rqueue

    @property
    def services(self) -> list[services.ServiceModel]:
        return self.svc.models

    @property
    def replicas(self) -> list[list[int]]:
        return self.svc.replicas

    @property
    def replica_arr(self) -> list[npt.NDArray[np.int64]]:
        return self.svc.replica_arr

    @property
    def last_us(self) -> dict[int, str]:
        return self.log.last_us

    @property
    def step_failures(self) -> int:
        """Failures this step (``JobLog.step_failures``)."""
        return self.log.step_failures

    @step_failures.setter
    def step_failures(self, n: int) -> None:
        self.log.step_failures = n

    @property
    def step_preemptions(self) -> int:
        """Preemptions this step (``JobLog.step_preemptions``)."""
        return self.log.step_preemptions

    @step_preemptions.setter
    def step_preemptions(self, n: int) -> None:
        self.log.step_preemptions = n

    # ------------------------------------------------------------------ telemetry
    def failed_counts(self) -> tuple[int, npt.NDArray[np.int64]]:
        """(chips out of service, chips with a hardware fault in each UltraServer)."""
        return self.pool.failed_counts()

    def us_counts(self) -> tuple[int, int, int, float]:
        """(free chips, drained idle chips, whole free UltraServers, fragmentation)."""
        return self.pool.us_counts()

    def job_rows(self, t: int) -> dict[str, Any]:
        """Rows of the jobs that changed, plus every queued or running job when due
        (``twin.work.joblog.job_rows``)."""
        live = (self.queues.queue, self.running.jobs, self.queues.rqueue)
        return joblog.job_rows(self.log, self.jobs, live, self.p.jobs_interval_s, self.p.hall.system.key, t)

    def event_tables(self) -> dict[str, dict[str, Any]]:
        return joblog.event_tables(self.log)

    @property
    def _jobs_due(self) -> int:
        """When ``job_rows`` next writes every waiting and running job (set to now: the next)."""
        return self.log.jobs_due

    @_jobs_due.setter
    def _jobs_due(self, t: int) -> None:
        self.log.jobs_due = t

    def queue_view(self, t: int, limit: int = 50) -> list[tuple[int, str, int, int]]:
        """First waiting jobs, replica requests first: (job_id, name, chips, wait_s)."""
        a = self.jobs.a
        return [
            (self.jobs.id_of(j), self.jobs.names[j], int(a["chips"][j]), t - int(a["queued_since"][j]))
            for j in (self.queues.rqueue + self.queues.queue)[:limit]
        ]


def restart_activity(w: Work, t: int, dt: int) -> None:
    """Gangs restarting after an interruption run at ``RESTART_ACTIVITY`` until their restart
    ends, then at their training activity (from their plan, ``twin.work.queueing``): set before the
    physics reads the step's activities. Only the gangs whose restart had not ended a step ago
    (``Running.restarting``; the others run at their training activity since their start or
    the step their restart ended), each step in order."""
    restarting = w.running.restarting
    for j in [j for j, until in restarting.items() if until <= t - dt]:
        del restarting[j]
    if restarting:
        a = w.jobs.a
        js = list(restarting)
        jj = rows(js)
        train = a["train_activity"][jj]
        a["activity"][jj] = np.where(
            t < np.fromiter(restarting.values(), dtype=np.int64, count=len(js)),
            RESTART_ACTIVITY,
            np.where(train > 0, train, a["activity"][jj]),
        )


def batch_progress(
    w: Work, ev: Events, t: int, dt: int, clock: npt.NDArray[np.float64], full_clock: bool = False
) -> tuple[float, float]:
    """Batch jobs progress over [t, t + dt): a gang runs at its slowest chip's clock and makes no
    progress while restarting; checkpoints fall due; finished jobs end. Returns FLOP/s delivered
    to (training, all batch jobs). ``full_clock``: every chip ran at clock 1 (no minimum to take)."""
    a = w.jobs.a
    # Batch progress: a gang runs at its slowest chip's clock; no progress while restarting.
    train_flops = job_flops = 0.0
    run = w.running.array(w.jobs)
    if len(run):
        rate = a["rate"][run]
        if not full_clock and clock.min() < 1.0:
            rate = rate * serving.job_clock(w.pool, run, clock)
        if w.running.restarting:  # some gang is (or just stopped) restarting
            rate = np.where(t < a["restart_until"][run], 0.0, rate)
        done = a["done"][run]
        delivered = np.minimum(rate * dt, a["work"][run] - done)
        done += delivered
        a["done"][run] = done
        job_flops = float(delivered.sum()) / dt
        train_flops = float(delivered[w.running.train].sum()) / dt
        ck = a["ckpt_due"][run] <= t + dt
        if ck.any():
            jj = run[ck]
            a["ckpt_done"][jj] = a["done"][jj]
            a["ckpt_prog_s"][jj] = a["prog_s"][jj] + np.maximum(
                0, t + dt - a["restart_until"][jj]
            ) * queueing.progress_share(a["ckpt_eff"][jj])
            a["ckpt_time"][jj] = t + dt
            a["ckpt_due"][jj] = t + dt + a["ckpt_every"][jj]
        fin = done >= a["work"][run] * (1 - 1e-12)
        if fin.any():
            queueing.finish(w, ev, run[fin].tolist(), t + dt)

    return train_flops, job_flops
