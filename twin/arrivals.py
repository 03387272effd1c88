"""Batch-job arrivals: synthetic classes (Poisson, diurnal and weekly shape) and traces.

Functions of the work state (``twin.cluster.Cluster``). Each class draws its jobs from its own
stream in batches (same stream, fewer calls); a job asks the same FLOP of any hall.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from twin import queueing, routing, workload
from twin.events import Events
from twin.params import KIND_NAMES, JobClassParams

if TYPE_CHECKING:
    from twin.cluster import Cluster

DRAW_BATCH = 256  # jobs drawn per class at a time


def arrivals(cl: Cluster, ev: Events, t: int, dt: int) -> None:
    """Jobs arriving in [t, t + dt) join ``cl``'s queue, or on a mixed floor the queue of the
    system its router picks (``twin.routing``; ``cl`` is then the floor's front door)."""
    tp = cl.p.training
    router = cl.router
    cap = cl.training_capacity_chips if router is None else router.capacity
    if cap > 0 and tp.arrivals_per_day > 0:
        f = workload.diurnal_factor(t, tp.diurnal_peak_to_trough, tp.peak_hour, tp.weekend_factor) * dt
        for ci, (code, cls) in enumerate(cl.classes):
            lam = cl.class_rate_s[ci] * f
            k = int(cl.rng_arrivals.poisson(lam)) if lam > 0 else 0
            for _ in range(k):
                chips, model, nominal = next_draw(cl, ci, cls, cap)
                target = cl if router is None else router.pick(code, cls, chips, model)
                if target is None:
                    ev.append(
                        (
                            "job_rejected",
                            KIND_NAMES[code],
                            f"{chips} chips: no system on the floor may run it",
                        )
                    )
                    continue
                add_job(target, code, cls, chips, model, nominal, math.nan, t, -1, 0)
    tr = tp.trace
    if tr is not None:
        n = len(tr.submit_s)
        while cl.trace_next < n and tr.submit_s[cl.trace_next] <= t:
            r = cl.trace_next
            cl.trace_next += 1
            code = int(tr.kind[r])
            tcls = queueing.job_class(cl, code)
            assert tcls is not None
            chips = int(tr.chips[r])
            if chips > cap:  # could never start: it would block the queue
                ev.append(
                    ("job_rejected", f"trace:{r}", f"{chips} chips > the {cap} the hall has for batch work")
                )
                continue
            model = tr.model[r] or tcls.models[0]
            target = cl if router is None else router.pick(code, tcls, chips, model)
            if target is None:
                ev.append(("job_rejected", f"trace:{r}", f"{chips} chips: no system on the floor may run it"))
                continue
            add_job(
                target,
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


def next_draw(cl: Cluster, ci: int, cls: JobClassParams, cap: int) -> tuple[int, str, float]:
    """Next job of class ``ci`` from a buffer drawn in batches (same stream, fewer calls)."""
    buf = cl._draws[ci]
    if buf is None or cl._draw_pos[ci] >= len(buf.nominal_s):
        buf = cl._draws[ci] = workload.draw_jobs(cls, DRAW_BATCH, cl.rng_jobs_cls[ci], cap)
        cl._draw_pos[ci] = 0
    i = cl._draw_pos[ci]
    cl._draw_pos[ci] = i + 1
    return int(buf.chips[i]), buf.model[i], float(buf.nominal_s[i])


def add_job(
    cl: Cluster,
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
    m = cl.models.get(model_name)
    n_act = m.active_params if m is not None else 1e9
    k = workload.FLOP_PER_PARAM_TOKEN[KIND_NAMES[code]]
    base = workload.model_mfu(m, cls)
    tp = cl.p.training
    rate = routing.job_rate_flop_s(m, code, cls, chips, cl.acc, cl.p.hall.system, tp)
    if math.isnan(work):
        ref, ref_sys = workload.REFERENCE_ACCELERATOR, workload.REFERENCE_SYSTEM
        work = nominal_s * routing.job_rate_flop_s(m, code, cls, chips, ref, ref_sys, tp)
    nominal_s = work / rate
    j = cl.jobs.add(
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
    queueing.enqueue(cl, j)
    cl.dirty.add(j)
    return j
