"""Online services on their replicas: autoscaling, serving at the replicas' clocks, and the
facility power attributed to each service. The queueing of requests is ``twin.services``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from twin import queueing, services
from twin.events import Events
from twin.jobs import QUEUED, RUNNING, STOPPED

if TYPE_CHECKING:
    from twin.cluster import Cluster


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


def autoscale(cl: Cluster, ev: Events, t: int, dt: int) -> list[int]:
    """Requests arriving at each service this step, and the autoscaler's replica decisions."""
    arrived = []
    a = cl.jobs.a
    for si, svc in enumerate(cl.services):
        k = svc.arrivals(t, dt)
        arrived.append(k)
        slots = cl.replica_arr[si]
        active = int(np.count_nonzero(a["state"][slots] != STOPPED))
        want = svc.desired_replicas(t, dt, k, active)
        if want != active:
            scale(cl, ev, si, want, active, t)
    return arrived


def serve(
    cl: Cluster,
    arrived: list[int],
    t: int,
    dt: int,
    clock: npt.NDArray[np.float64],
    train_flops: float,
    job_flops: float,
) -> WorkStep:
    """Warm replicas serve this step's requests; starting ones load weights. Sets each
    replica's activity; returns the work's step with the batch figures given."""
    a = cl.jobs.a
    steps: list[services.ServiceStep] = []
    reps: list[tuple[int, int, int]] = []
    tokens = req = served = dropped = 0.0
    queued = 0
    for si, svc in enumerate(cl.services):
        slots = cl.replica_arr[si]
        up = a["state"][slots] == RUNNING
        warm = up & (a["warm_at"][slots] <= t)
        n_warm, n_up = int(np.count_nonzero(warm)), int(np.count_nonzero(up))
        s = svc.serve(arrived[si], effective_replicas(cl, svc, slots[warm], clock), dt)
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
        len(cl.running),
        tuple(steps),
        tuple(reps),
    )


def effective_replicas(
    cl: Cluster, svc: services.ServiceModel, warm: npt.NDArray[np.int64], clock: npt.NDArray[np.float64]
) -> float:
    """Warm replicas in full-clock equivalents. A capped or hot replica runs its compute-bound
    prefill at its clock while memory-bound decode keeps its pace (HBM bandwidth does not
    follow the core clock): per-request time = prefill / f + decode."""
    n = len(warm)
    if n == 0 or clock.min() >= 1.0:
        return float(n)
    f = np.maximum(job_clock(cl, warm, clock), 1e-3)
    per = 1.0 / svc.capacity_per_replica
    pre = min(svc.roof.prefill_s, per)
    return float(np.sum(per / (pre / f + (per - pre))))


def job_clock(
    cl: Cluster, run: npt.NDArray[np.int64], clock: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Slowest chip clock of each job in ``run`` (chips grouped by owner, cached until the
    placements change)."""
    if cl._seg is None:
        owner = cl.chip_owner
        order = np.argsort(owner, kind="stable")
        order = order[owner[order] >= 0].astype(np.int64)
        ow = owner[order].astype(np.int64)
        starts = np.flatnonzero(np.r_[True, ow[1:] != ow[:-1]]).astype(np.int64) if len(ow) else ow[:0]
        cl._seg = (order, starts, ow[starts])
    order, starts, seg_jobs = cl._seg
    mins = np.minimum.reduceat(clock[order], starts)
    out: npt.NDArray[np.float64] = mins[np.searchsorted(seg_jobs, run)]
    return out


def scale(cl: Cluster, ev: Events, si: int, want: int, active: int, t: int) -> None:
    """Autoscaler decision: request stopped replica slots, or stop the least useful replicas
    (queued first, then the ones still loading, then the most recently warmed)."""
    a = cl.jobs.a
    slots = cl.replica_arr[si].tolist()
    if want > active:
        for j in [j for j in slots if a["state"][j] == STOPPED][: want - active]:
            queueing.request_replica(cl, j, t)
    else:
        live = [j for j in slots if a["state"][j] != STOPPED]
        live.sort(key=lambda j: (a["state"][j] != QUEUED, -int(a["warm_at"][j])))
        for j in live[: active - want]:
            queueing.stop_replica(cl, j, t)
        cl._sched = True
    ev.append(("autoscale", cl.services[si].p.name, f"{active} -> {want} replicas"))


def service_power_w(
    cl: Cluster, chip_p_at: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float64]], gross: float
) -> npt.NDArray[np.float64]:
    """Facility power attributed to each service: its replicas' chip power (``chip_p_at``: the
    power of the chips given), grossed up by ``gross`` (IT per chip watt x PUE)."""
    if not cl.nsvc:
        return cl.svc_power_w
    if cl._svc_chips is None:  # replica chips and their service, until placements change
        chips = [cl.placement[j] for ids in cl.replicas for j in ids if j in cl.placement]
        idx = np.concatenate(chips) if chips else np.zeros(0, dtype=np.int64)
        cl._svc_chips = (idx, cl.chip_service[idx].astype(np.int64))
    idx, svc = cl._svc_chips
    per = np.bincount(svc, weights=chip_p_at(idx), minlength=cl.nsvc)
    cl.svc_power_w = np.asarray(per * gross, dtype=np.float64)
    return cl.svc_power_w


def replica_chips(cl: Cluster) -> int:
    """Chips held by inference replicas (as of the last ``service_power_w``)."""
    return len(cl._svc_chips[0]) if cl.nsvc and cl._svc_chips is not None else 0


def surge(cl: Cluster, target: str, factor: float, start: int, until: int) -> None:
    for si, st in enumerate(cl.services):
        if not target or cl.p.services[si].name == target:
            st.add_surge(factor, start, until)
