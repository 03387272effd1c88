"""The batch queue, the replica requests and the scheduler: who starts where, who is released,
interrupted, preempted or finished.

Functions of the hall's ``Work``: the moves between the queues and the chips (chips are taken
and given back only through the chip pool, ``twin.work.chips``). The queues are kept in order by
``twin.work.queues``; replica requests always go first. Placement is ``twin.work.scheduler``; EASY
backfill starts jobs behind a blocked head that do not delay it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from twin.spec.events import Events
from twin.spec.params import COMM_ACTIVITY, JOB_CLASSES, KIND_NAMES, FactoryParams, JobClassParams
from twin.work import checkpoint, fabric, queues, scheduler, services, workload
from twin.work.jobs import (
    DONE,
    INFERENCE,
    NEVER,
    QUEUED,
    RESTART_ACTIVITY,
    RUNNING,
    STOPPED,
    Rows,
    rows,
)
from twin.work.workstate import Work


def stop_replica(w: Work, j: int, t: int) -> None:
    a = w.jobs.a
    if a["state"][j] == QUEUED:
        w.queues.rqueue.remove(j)
    elif a["state"][j] == RUNNING:
        release(w, [j], t)
    a["state"][j] = STOPPED
    a["end"][j] = t
    a["activity"][j] = 0.0
    w.jobs.replica_ver += 1
    w.log.dirty.add(j)


# A gang placed by ``claim`` and not yet set up (``begin``): (job slot, its chips, UltraServers
# spanned).
Placed = tuple[int, npt.NDArray[np.int64], int]


def claim(w: Work, j: int, placed: list[Placed]) -> bool:
    """Place job ``j``'s gang and take its chips (``twin.work.scheduler``, the chip pool's ``take``),
    noted in ``placed`` for ``begin`` (which owns them); False when it cannot be placed now."""
    pool, a = w.pool, w.jobs.a
    need = int(a["chips"][j])
    if need > pool.n_free:
        return False
    q = w.queues
    ver, size, best = q.last_fit
    got = scheduler.place(
        pool.free,
        pool.us_free,
        need,
        pool.cpu,
        w.p.scheduler.placement,
        pool.n_free,
        best if ver == pool.ver and size == need else -1,
        pool.us_hist,
    )
    if got is None:
        return False
    chips, spanned = got
    pool.take(j, chips)  # (owned in ``begin``, all the step's gangs together)
    if spanned == 1:  # the best fit of the next gang of this size while nothing else changes
        q.last_fit = (pool.ver, need, int(chips[0]) // pool.cpu)
    placed.append((j, chips, spanned))
    return True


def begin(w: Work, ev: Events, placed: list[Placed], t: int) -> None:
    """The gangs ``placed`` (in order; then emptied) own their chips (``ChipPool.own``) and
    start at ``t``: set up as replicas (``_start_replicas``) or batch gangs (``_start_batch``), a
    ``job_start`` event each."""
    if not placed:
        return
    jobs, log, c = w.jobs, w.log, w.pool.cpu
    a = jobs.a
    js = [j for j, _, _ in placed]
    jj = rows(js)
    inf = (a["kind"][jj] == INFERENCE).tolist()
    service = a["service"][jj].tolist()
    w.pool.own(
        js, [chips for _, chips, _ in placed], [s if i else -1 for s, i in zip(service, inf, strict=True)]
    )
    where = [
        str(int(chips[0]) // c) if spanned == 1 else _us_list(chips // c) for _, chips, spanned in placed
    ]
    a["state"][jj] = RUNNING
    a["start"][jj] = t
    first = a["first_start"][jj]
    a["first_start"][jj] = np.where(first < 0, t, first)
    a["wait"][jj] += t - a["queued_since"][jj]
    a["spanned"][jj] = [spanned for _, _, spanned in placed]
    a["end"][jj] = -1
    mfu: dict[int, float] = {}
    if any(inf):
        _start_replicas(w, [j for j, i in zip(js, inf, strict=True) if i], t)
    if not all(inf):
        batch = [j for j, i in zip(js, inf, strict=True) if not i]
        mfu = dict(zip(batch, _start_batch(w, batch, t), strict=True))
    log.dirty.update(js)
    names = jobs.names
    for (j, chips, spanned), jid, at in zip(placed, a["id"][jj].tolist(), where, strict=True):
        log.last_us[j] = at
        ev.append(
            (
                "job_start",
                f"job:{jid}",
                f"{names[j]} on {len(chips)} chips, {spanned} UltraServer(s) [{at}]"
                + (f", MFU {mfu[j]:.3f}" if j in mfu else ""),
            )
        )
    placed.clear()


def _us_list(us: npt.NDArray[np.int64]) -> str:
    """The UltraServers ``us`` of a gang's chips, ascending, each once ("3,7,12"), from the
    runs of chips on one UltraServer (a sort of every chip's took longer than the start)."""
    runs = us[1:][us[1:] != us[:-1]].tolist()
    return ",".join(map(str, sorted({int(us[0]), *runs})))


def _start_replicas(w: Work, js: list[int], t: int) -> None:
    """Replicas starting on their chips: each loads its weights (warm after its service's
    start-up time, at once when it was warm before)."""
    a = w.jobs.a
    jj = rows(js)
    a["restart_until"][jj] = t
    startup = [int(round(w.p.services[si].startup_s)) for si in a["service"][jj].tolist()]
    warm = a["warm_at"][jj]
    a["warm_at"][jj] = np.where(warm == -1, t, t + np.asarray(startup, dtype=np.int64))
    a["activity"][jj] = services.STARTING_ACTIVITY
    w.jobs.replica_ver += len(js)


def _start_batch(w: Work, js: list[int], t: int) -> list[float]:
    """Batch gangs starting: each one's MFU on its placement (its parallelism plan), checkpoint
    interval and write time, rate, restart cost and estimated end; returns their MFU. Each job
    in plain Python numbers (a handful of jobs a step; NumPy's overhead on short arrays cost
    more), the table read and written a column at a time."""
    jobs, p = w.jobs, w.p
    tp, a, plans = p.training, jobs.a, w.start_plans
    jj = rows(js)
    got = {k: a[k][jj].tolist() for k in _START_READS}
    put: dict[str, list[Any]] = {k: [] for k in _START_WRITES}
    factor = p.scheduler.runtime_estimate_factor
    for i, j in enumerate(js):
        kind, need, base, name = got["kind"][i], got["chips"][i], got["mfu_base"][i], jobs.names[j]
        if base <= 0:
            base = workload.model_mfu(w.models.get(name), job_class(p, kind))
        key = (name, kind, need, got["spanned"][i], jobs.precision[j], base)
        peak, mfu, act, write_s, every_s = plans.get(key) or _plan(w, key)
        # Checkpoints: the class's interval, else the Young/Daly interval of this gang; the gang
        # pauses for each checkpoint's write (its rate is the share of time not writing). A job
        # without a catalogued model writes its own parameters.
        if math.isnan(write_s):
            write_s = checkpoint.checkpoint_write_s(got["params"][i], need, tp)
            if math.isnan(every_s):
                every_s = checkpoint.checkpoint_interval_s(write_s, need, p.failures.chip_hazard_per_h, tp)
        every = got["ckpt_every"][i]
        if every < 0:
            every = int(every_s)  # (stored whole seconds)
        eff = every / (every + write_s) if every > 0 else 1.0
        rate = workload.training_rate_flop_s(need, peak, mfu) * eff
        restart = tp.restart_cost_s if got["restarts"][i] > 0 else 0
        work = got["work"][i]
        left = (work - got["done"][i]) / work if work > 0 else 0.0
        est = got["est"][i]
        est = est if est > 0 else (work / rate if rate > 0 else 0.0)
        put["mfu_base"].append(base)
        put["train_activity"].append(act)
        put["ckpt_every"].append(every)
        put["ckpt_eff"].append(eff)
        put["mfu"].append(mfu)
        put["rate"].append(rate)
        put["ckpt_due"].append(t + every if every > 0 else NEVER)
        put["restart_until"].append(t + restart)
        put["est_end"].append(t + restart + est * left * factor)
        put["activity"].append(RESTART_ACTIVITY if restart > 0 else act)
        # A gang without a restart is never restarting (``t < restart_until`` never holds for
        # it): the restart phases leave it alone.
        w.running.add(j, t + restart if restart > 0 else None)
    for k, v in put.items():
        a[k][jj] = v
    a["ckpt_time"][jj] = t
    return put["mfu"]


# The job-table columns a batch gang's start reads and writes (``_start_batch``).
_START_READS = (
    "kind",
    "chips",
    "spanned",
    "mfu_base",
    "ckpt_every",
    "params",
    "restarts",
    "work",
    "done",
    "est",
)
_START_WRITES = (
    "mfu_base",
    "train_activity",
    "ckpt_every",
    "ckpt_eff",
    "mfu",
    "rate",
    "ckpt_due",
    "restart_until",
    "est_end",
    "activity",
)


def _plan(w: Work, key: tuple[str, int, int, int, str, float]) -> tuple[float, float, float, float, float]:
    """A batch gang's start on a placement, by (model, kind, chips, UltraServers spanned,
    precision, base MFU): (peak FLOP/s, MFU, training activity, checkpoint write time [s],
    checkpoint interval [s] unless set; NaN: a job without a catalogued model, its own). The
    plan's pipeline bubble and exposed communication lower the MFU; the interval is the class's,
    else the Young/Daly interval of the gang. Pure functions of the key for a run: worked out
    once (``Work.start_plans``)."""
    name, kind, need, spanned, precision, base = key
    p, model = w.p, w.models.get(name)
    peak = w.acc.peak(precision)
    mfu, act = base, p.training.compute_activity
    if model is not None and mfu > 0:
        sc = fabric.plan(
            model,
            workload.FLOP_PER_PARAM_TOKEN[KIND_NAMES[kind]],
            need,
            spanned,
            peak,
            mfu,
            p.hall.system,
            p.training,
        )
        mfu, act = sc.mfu, training_activity(sc, p.training.compute_activity)
    write = checkpoint.checkpoint_write_s(model.params, need, p.training) if model is not None else math.nan
    cls = job_class(p, kind)
    fixed = cls.checkpoint_interval_s if cls is not None else None
    hazard = p.failures.chip_hazard_per_h
    every: float = (
        fixed
        if fixed is not None
        else checkpoint.checkpoint_interval_s(write, need, hazard, p.training)
        if model is not None
        else math.nan
    )
    got = w.start_plans[key] = (peak, mfu, act, write, every)
    return got


def training_activity(sc: fabric.Plan, compute_activity: float) -> float:
    """Mean chip activity of a gang over its step [-]: busy compute (``sc.compute_s``) at
    ``compute_activity``, the rest of the step (pipeline bubble, exposed TP/PP/DP communication)
    waiting at ``COMM_ACTIVITY``. A gang of one chip or without a plan computes throughout."""
    duty = min(1.0, sc.compute_s / sc.step_s) if sc.step_s > 0 else 1.0
    return duty * compute_activity + (1.0 - duty) * COMM_ACTIVITY


def progress_share(eff: Any) -> Any:
    """Share of a running batch job's time (restart done) that makes progress: all but its
    checkpoint writes, from its ``ckpt_eff`` (one value or an array; 1 for replicas and jobs that
    never checkpoint; 0 in the table: unset)."""
    return np.where(eff > 0, eff, 1.0) if isinstance(eff, np.ndarray) else (eff if eff > 0 else 1.0)


def job_class(p: FactoryParams, kind: int) -> JobClassParams | None:
    name = KIND_NAMES[kind]
    return p.training.job_class(name) if name in JOB_CLASSES else None


def release(w: Work, js: list[int], t_end: int) -> Rows:
    """Give the chips of jobs ``js`` back to the pool (those not failed or drained become free)
    and book the time each held them; returns the index of their rows (``twin.work.jobs.rows``)."""
    a = w.jobs.a
    w.pool.release(js)
    jj = rows(js)
    a["run_s"][jj] += t_end - a["start"][jj]
    a["prog_s"][jj] += np.maximum(0, t_end - a["restart_until"][jj]) * progress_share(a["ckpt_eff"][jj])
    for j in js:
        w.running.discard(j)
    return jj


def interrupt(w: Work, ev: Events, j: int, t: int, reason: str, cause: str, by: int = -1) -> None:
    jobs, log = w.jobs, w.log
    a = jobs.a
    release(w, [j], t)
    lost = float(a["done"][j] - a["ckpt_done"][j])
    lost_s = float(a["prog_s"][j] - a["ckpt_prog_s"][j])
    a["lost"][j] += lost
    a["done"][j] = a["ckpt_done"][j]
    a["lost_s"][j] += lost_s
    a["prog_s"][j] = a["ckpt_prog_s"][j]
    a["restarts"][j] += 1
    if reason == "preemption":
        a["preemptions"][j] += 1
        log.step_preemptions += 1
    else:
        a["failures"][j] += 1
    a["activity"][j] = 0.0
    a["rate"][j] = 0.0
    jid = jobs.id_of(j)
    by_id = jobs.id_of(by) if by >= 0 else -1
    log.interrupt_rows.append((t, jid, reason, cause, lost, lost_s, int(a["chips"][j]), by_id))
    if a["kind"][j] == INFERENCE:
        queues.request_replica(w.queues, jobs, log, j, t)
    else:
        a["state"][j] = QUEUED
        a["queued_since"][j] = t
        queues.enqueue(w.queues, jobs, [j])
    log.dirty.add(j)
    what = "preempted" if reason == "preemption" else "interrupted"
    by_s = f" by job:{by_id}" if by >= 0 else f" ({cause})"
    ev.append(
        (
            f"job_{what}",
            f"job:{jid}",
            f"{jobs.names[j]} {what}{by_s}, lost {lost:.3g} FLOP since checkpoint",
        )
    )


def finish(w: Work, ev: Events, js: list[int], t_end: int) -> None:
    """Jobs ``js`` done at ``t_end``: their chips back to the pool, their rows final, a
    ``job_end`` event each (in their order)."""
    jobs = w.jobs
    a = jobs.a
    jj = release(w, js, t_end)
    a["state"][jj] = DONE
    a["end"][jj] = t_end
    a["activity"][jj] = 0.0
    a["rate"][jj] = 0.0
    w.log.dirty.update(js)
    names = jobs.names
    for j, jid, work in zip(js, a["id"][jj].tolist(), a["work"][jj].tolist(), strict=True):
        ev.append(("job_end", f"job:{jid}", f"{names[j]} done, {work:.3g} FLOP"))


def preempt_for(w: Work, ev: Events, j: int, t: int) -> bool:
    """Priority policy: free chips for ``j`` by preempting lower-priority preemptible batch
    jobs (least wasted work first). True if enough chips were freed."""
    pool, running = w.pool, w.running.jobs
    a = w.jobs.a
    need = int(a["chips"][j]) - int(pool.us_free.sum())
    if need <= 0 or not running:
        return False
    run = np.fromiter(running, dtype=np.int64, count=len(running))
    ok = a["preemptible"][run] & (a["priority"][run] < a["priority"][j])
    if pool.drained.any():  # chips on a draining UltraServer would not come free
        ok &= np.array([not pool.drained[pool.placement[int(v)] // pool.cpu].any() for v in run])
    cand = run[ok]
    if not len(cand):
        return False
    waste = (a["done"][cand] - a["ckpt_done"][cand]) / np.maximum(a["rate"][cand], 1.0)
    cost = (waste + w.p.training.restart_cost_s) * a["chips"][cand]
    pick = scheduler.victims(
        need, a["chips"][cand].astype(np.int64), a["priority"][cand].astype(np.int64), cost
    )
    if not len(pick):
        return False
    for v in cand[pick].tolist():
        interrupt(w, ev, int(v), t, "preemption", f"priority {int(a['priority'][j])}", by=j)
    return True


def schedule(w: Work, ev: Events, t: int) -> None:
    """Start what can start now: replica requests first, then the batch queue in order (with
    preemption under the priority policy), then EASY backfill behind a blocked head. Gangs are
    placed one after another; their set-up (``begin``) waits until something reads the running
    jobs (preemption, the backfill reservation) or the end, in the order they were placed."""
    q, pool, sp = w.queues, w.pool, w.p.scheduler
    if len(q.queue) != len(q.keys):
        queues.rebuild_queue(q, w.jobs)
    if not q.changed and q.seen_ver == pool.ver:
        return
    q.changed = False
    q.seen_ver = pool.ver
    a = w.jobs.a
    policy = sp.policy
    placed: list[Placed] = []

    def start_or_preempt(j: int) -> bool:
        if claim(w, j, placed):
            return True
        if policy != "priority":
            return False
        begin(w, ev, placed, t)  # preemption weighs the running jobs as set up
        return preempt_for(w, ev, j, t) and claim(w, j, placed)

    head_need = -1
    if policy != "priority":
        # Nothing but starts in this loop (no preemption): the started head is cut off once
        # (popping each from the front was O(requests) apiece: a campus's initial replicas).
        rq, k = q.rqueue, 0
        while k < len(rq) and claim(w, rq[k], placed):
            k += 1
        if k < len(rq):
            head_need = int(a["chips"][rq[k]])
        del rq[:k]
    while q.rqueue and policy == "priority":
        j = q.rqueue[0]
        if start_or_preempt(j):
            q.rqueue.pop(0)
            continue
        head_need = int(a["chips"][j])
        break
    first = 0
    if head_need < 0:
        while q.queue:
            j = q.queue[0]
            if start_or_preempt(j):
                q.queue.pop(0)
                q.keys.pop(0)
                continue
            head_need = int(a["chips"][j])
            first = 1
            break
    begin(w, ev, placed, t)  # the backfill reservation reads the running jobs' estimated ends
    if policy == "fifo" or head_need < 0 or len(q.queue) <= first:
        return
    _backfill(w, ev, t, first, head_need)


def _backfill(w: Work, ev: Events, t: int, first: int, head_need: int) -> None:
    """EASY backfill behind the blocked head (queue position ``first - 1``, ``head_need`` chips):
    a job of the window behind it starts when it fits now and ends before the head's reserved
    start, or uses only chips the head will not need."""
    q, pool, sp, a = w.queues, w.pool, w.p.scheduler, w.jobs.a
    free = pool.n_free
    if free <= 0:
        return
    cand = np.asarray(q.queue[first : first + sp.backfill_depth], dtype=np.int64)
    need = a["chips"][cand].astype(np.int64)
    if need.min() > free:  # none of the window fits the free chips, whatever the reservation
        return
    run = w.running.array(w.jobs)
    shadow, extra = scheduler.reservation(
        t, free, head_need, a["est_end"][run], a["chips"][run].astype(np.int64)
    )
    work = a["work"][cand]
    left = np.where(work > 0, (work - a["done"][cand]) / np.where(work > 0, work, 1.0), 1.0)
    restart = np.where(a["restarts"][cand] > 0, w.p.training.restart_cost_s, 0)
    end = t + a["est"][cand] * sp.runtime_estimate_factor * left + restart
    ok = (need <= free) & ((end <= shadow) | (need <= extra))
    placed: list[Placed] = []
    for k in np.flatnonzero(ok).tolist():
        if free <= 0:
            break
        nk = int(need[k])
        fits_time = end[k] <= shadow
        if nk <= free and (fits_time or nk <= extra) and claim(w, int(cand[k]), placed):
            free -= nk
            if not fits_time:
                extra -= nk
    if placed:
        started = {j for j, _, _ in placed}
        begin(w, ev, placed, t)
        # Only the window the candidates came from changes: rebuilding the whole queue here made
        # every step cost O(queue), which dominated a step with a long queue.
        hi = first + len(cand)
        keep = [i for i in range(first, hi) if q.queue[i] not in started]
        q.queue[first:hi] = [q.queue[i] for i in keep]
        q.keys[first:hi] = [q.keys[i] for i in keep]
