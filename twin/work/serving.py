"""Online services on their replicas: autoscaling, serving at the replicas' clocks, and the
facility power attributed to each service. Functions of the work state's slices
(``twin.work.workstate``): the services, the job table and the chip pool. The queueing of requests
is ``twin.work.services``."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from twin.spec.events import Events
from twin.spec.params import ServiceParams
from twin.work import queueing, queues, services
from twin.work.chips import ChipPool
from twin.work.jobs import INFERENCE, QUEUED, RUNNING, SOURCES, STOPPED, JobTable
from twin.work.workstate import ServiceState, Work

if TYPE_CHECKING:
    from twin.physics.itpower import ItPower


@dataclass(slots=True)
class WorkStep:
    """What the work did this step (the physics reads activities from the job table)."""

    # Named after the factory_ts columns they fill (``twin.spec.telemetry``).
    training_flops: float  # FLOP/s delivered to pre-training and fine-tuning
    job_flops: float  # FLOP/s delivered to all batch jobs
    tokens_per_s: float
    requests_per_s: float  # requests arriving per second
    requests_served_per_s: float
    requests_dropped_per_s: float
    requests_queued: int
    running_jobs: int  # batch jobs running
    svc: tuple[services.ServiceStep, ...] = ()
    replicas: tuple[tuple[int, int, int], ...] = ()  # per service: warm, starting, not stopped
    input_tokens_per_s: float = 0.0  # prompt tokens prefilled per second
    # Share of the warm replicas' time spent prefilling, weighted by their chips (the rest is
    # decode): the split of inference cost between input and output tokens.
    prefill_time_share: float = 0.0

    def booked(self, training_flops: float, job_flops: float, running_jobs: int) -> WorkStep:
        """This step with its batch work booked (built directly: ``dataclasses.replace`` costs
        several times as much, every step)."""
        return WorkStep(
            training_flops,
            job_flops,
            self.tokens_per_s,
            self.requests_per_s,
            self.requests_served_per_s,
            self.requests_dropped_per_s,
            self.requests_queued,
            running_jobs,
            self.svc,
            self.replicas,
            self.input_tokens_per_s,
            self.prefill_time_share,
        )


def add_services(w: Work, rng_svc: np.random.Generator) -> int:
    """Each service's model and its pool of replica slots (the autoscaler's maximum); the
    initial replicas are requested warm. Returns the chips the initial replicas need."""
    p, st = w.p, w.svc
    svc_rngs = rng_svc.spawn(max(len(p.services), 1)) if p.services else []
    reserved = 0
    for si, sp in enumerate(p.services):
        st.models.append(services.ServiceModel(sp, w.acc, p.hall.system, svc_rngs[si], p.dt_s))
        ids = []
        for r in range(replica_slots(sp)):
            j = w.jobs.add(
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
                queues.request_replica(w.queues, w.jobs, w.log, j, 0, warm=True)
            ids.append(j)
            w.log.dirty.add(j)
        st.replicas.append(ids)
        st.replica_arr.append(np.asarray(ids, dtype=np.int64))
        reserved += sp.replicas * sp.chips_per_replica
    st.n = len(st.models)
    st.power_w = np.zeros(st.n)
    return reserved


def replica_slots(sp: ServiceParams) -> int:
    return max(sp.replicas, sp.replicas_max if sp.autoscale else 0)


def autoscale(w: Work, ev: Events, t: int, dt: int) -> list[int]:
    """Requests arriving at each service this step, and the autoscaler's replica decisions."""
    arrived = []
    for si, svc in enumerate(w.svc.models):
        k = svc.arrivals(t, dt)
        arrived.append(k)
        active = replica_views(w.svc, w.jobs, t)[si][3]
        want = svc.desired_replicas(t, dt, k, active)
        if want != active:
            scale(w, ev, si, want, active, t)
    return arrived


def serve(
    st: ServiceState,
    jobs: JobTable,
    pool: ChipPool,
    running_batch: int,
    arrived: list[int],
    t: int,
    dt: int,
    clock: npt.NDArray[np.float64],
    train_flops: float,
    job_flops: float,
    full_clock: bool = False,
) -> WorkStep:
    """Warm replicas serve this step's requests; starting ones load weights. Sets each
    replica's activity; returns the work's step with the batch figures given (and the number
    of batch jobs running). ``full_clock``: every chip at clock 1 (no minimum to take)."""
    a = jobs.a
    steps: list[services.ServiceStep] = []
    reps: list[tuple[int, int, int]] = []
    tokens = in_tokens = req = served = dropped = 0.0
    prefill_chips = warm_chips = 0.0
    queued = 0
    views = replica_views(st, jobs, t)  # serving changes no replica's state
    fresh, st.view_fresh = st.view_fresh, False
    for si, svc in enumerate(st.models):
        warm_slots, n_warm, n_up, n_active = views[si]
        s = svc.serve(arrived[si], effective_replicas(pool, svc, warm_slots, clock, full_clock), dt)
        reps.append((n_warm, n_up - n_warm, n_active))
        if fresh:  # views built again: every slot (warm ones serve, starting ones load, the rest idle)
            slots = st.replica_arr[si]
            up = a["state"][slots] == RUNNING
            warm = up & (a["warm_at"][slots] <= t)
            a["activity"][slots] = np.where(warm, s.activity, np.where(up, services.STARTING_ACTIVITY, 0.0))
        else:  # only the warm ones' activity moves while no replica changes
            a["activity"][warm_slots] = s.activity
        steps.append(s)
        tokens += s.tokens_s
        in_tokens += s.input_tokens_s
        chips = n_warm * svc.p.chips_per_replica
        warm_chips += chips
        prefill_chips += s.prefill_share * chips
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
        running_batch,
        tuple(steps),
        tuple(reps),
        in_tokens,
        prefill_chips / warm_chips if warm_chips > 0 else 0.0,
    )


def replica_views(
    st: ServiceState, jobs: JobTable, t: int
) -> list[tuple[npt.NDArray[np.int64], int, int, int]]:
    """Per service at ``t``: (warm replicas' slots, warm, running, not stopped), built again only
    when a replica changed (the job table's ``replica_ver``) or the next starting one warms up."""
    if st.view_ver == jobs.replica_ver and t < st.view_until:
        return st.views
    a = jobs.a
    views = []
    until = math.inf
    for slots in st.replica_arr:
        state = a["state"][slots]
        up = state == RUNNING
        warm_at = a["warm_at"][slots]
        warm = up & (warm_at <= t)
        starting = up & ~warm
        if starting.any():
            until = min(until, float(warm_at[starting].min()))
        n_warm, n_up = int(np.count_nonzero(warm)), int(np.count_nonzero(up))
        views.append((slots[warm], n_warm, n_up, int(np.count_nonzero(state != STOPPED))))
    st.views, st.view_ver, st.view_until, st.view_fresh = views, jobs.replica_ver, until, True
    return views


def effective_replicas(
    pool: ChipPool,
    svc: services.ServiceModel,
    warm: npt.NDArray[np.int64],
    clock: npt.NDArray[np.float64],
    full_clock: bool = False,
) -> float:
    """Warm replicas in full-clock equivalents. A capped or hot replica runs its compute-bound
    work (prefill, and decode's matrix products at large batch) at its clock while HBM
    streaming and the collectives keep their pace (``Roofline.requests_per_s_at``).
    ``full_clock``: every chip at clock 1."""
    n = len(warm)
    if n == 0 or full_clock or clock.min() >= 1.0:
        return float(n)
    f = np.maximum(job_clock(pool, warm, clock), 1e-3)
    return float(np.sum(svc.roof.requests_per_s_at(f)) / svc.capacity_per_replica)


def job_clock(
    pool: ChipPool, run: npt.NDArray[np.int64], clock: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Slowest chip clock of each job in ``run`` (chips grouped by owner, cached until the
    placements change)."""
    order, starts, seg_jobs = pool.owner_groups()
    mins = np.minimum.reduceat(clock[order], starts)
    out: npt.NDArray[np.float64] = mins[np.searchsorted(seg_jobs, run)]
    return out


def scale(w: Work, ev: Events, si: int, want: int, active: int, t: int) -> None:
    """Autoscaler decision: request stopped replica slots, or stop the least useful replicas
    (queued first, then the ones still loading, then the most recently warmed)."""
    a = w.jobs.a
    slots = w.svc.replica_arr[si].tolist()
    if want > active:
        for j in [j for j in slots if a["state"][j] == STOPPED][: want - active]:
            queues.request_replica(w.queues, w.jobs, w.log, j, t)
    else:
        live = [j for j in slots if a["state"][j] != STOPPED]
        live.sort(key=lambda j: (a["state"][j] != QUEUED, -int(a["warm_at"][j])))
        for j in live[: active - want]:
            queueing.stop_replica(w, j, t)
        w.queues.changed = True
    ev.append(("autoscale", w.svc.models[si].p.name, f"{active} -> {want} replicas"))


def service_power_w(w: Work, pw: ItPower, gross: float) -> npt.NDArray[np.float64]:
    """Facility power attributed to each service: its replicas' chip power (``pw.chip_p_at``),
    grossed up by ``gross`` (IT per chip watt x PUE)."""
    st, pool = w.svc, w.pool
    if not st.n:
        return st.power_w
    if st.chips is None or st.chips_ver != pool.svc_ver:  # until a replica's chips change
        chips = [pool.placement[j] for ids in st.replicas for j in ids if j in pool.placement]
        idx = np.concatenate(chips) if chips else np.zeros(0, dtype=np.int64)
        g = None if pw.p_scale is None else pw.p_scale[idx]  # fixed for a run
        # The replicas' chips come service by service: each service's are one run of them.
        ends = np.searchsorted(pool.service[idx], np.arange(st.n + 1)).astype(np.int64)
        st.chips = (idx, ends, g, pool.owner[idx])
        st.chips_ver, st.failed_ver = pool.svc_ver, -1
    idx, ends, g, owner = st.chips
    if st.failed_ver != pool.fail_ver:  # until a chip fails, is repaired or recovers
        st.chips_failed, st.failed_ver = pool.failed[idx], pool.fail_ver
    p = pw.chip_p_at(idx, g, owner, st.chips_failed, replicas=True)
    # Each service's chips summed one after another, in chip order (as a bincount adds them).
    acc = np.add.accumulate
    per = [float(acc(p[a:b])[-1]) if b > a else 0.0 for a, b in itertools.pairwise(ends.tolist())]
    st.power_w = np.asarray(per, dtype=np.float64) * gross
    return st.power_w


def replica_chips(w: Work) -> int:
    """Chips held by inference replicas (as of the last ``service_power_w``)."""
    st = w.svc
    if not st.n or st.chips is None or st.chips_ver != w.pool.svc_ver:
        return 0
    return len(st.chips[0])


def surge(w: Work, target: str, factor: float, start: int, until: int) -> None:
    for si, st in enumerate(w.svc.models):
        if not target or w.p.services[si].name == target:
            st.add_surge(factor, start, until)
