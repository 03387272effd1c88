"""The batch queue, the replica requests and the scheduler: who starts where, who is released,
interrupted, preempted or finished.

Functions of the work state (``twin.cluster.Cluster``). The queue is kept in the policy's order
(FIFO by submit time, or priority then submit time); replica requests always go first. Placement
is ``twin.scheduler``; EASY backfill starts jobs behind a blocked head that do not delay it.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from twin import fabric, scheduler, services, workload
from twin.events import Events
from twin.jobs import (
    DONE,
    FINETUNE,
    INFERENCE,
    NEVER,
    PRETRAIN,
    QUEUED,
    RESTART_ACTIVITY,
    RUNNING,
    STOPPED,
)
from twin.params import JOB_CLASSES, KIND_NAMES, JobClassParams

if TYPE_CHECKING:
    from twin.cluster import Cluster


def key(cl: Cluster, j: int) -> tuple[float, ...]:
    """Queue order of the job in slot ``j``: the policy's, ties by arrival (job id)."""
    a = cl.jobs.a
    if cl.sp.policy == "priority":
        return (-float(a["priority"][j]), float(a["submit"][j]), float(a["id"][j]))
    return (float(a["submit"][j]), float(a["id"][j]))


def enqueue(cl: Cluster, j: int) -> None:
    if len(cl.queue) != len(cl._qkeys):
        rebuild_queue(cl)
    k = key(cl, j)
    i = bisect.bisect_right(cl._qkeys, k)
    cl._qkeys.insert(i, k)
    cl.queue.insert(i, j)
    cl._sched = True


def rebuild_queue(cl: Cluster) -> None:
    """Jobs appended to ``queue`` from outside (tests, tools): put them in policy order."""
    a = cl.jobs.a
    for j in cl.queue:
        if a["queued_since"][j] == 0 and a["state"][j] == QUEUED and a["submit"][j] > 0:
            a["queued_since"][j] = a["submit"][j]
    pairs = sorted((key(cl, j), j) for j in cl.queue)
    cl._qkeys = [k for k, _ in pairs]
    cl.queue[:] = [j for _, j in pairs]
    cl._sched = True


def request_replica(cl: Cluster, j: int, t: int, warm: bool = False) -> None:
    a = cl.jobs.a
    a["state"][j] = QUEUED
    a["queued_since"][j] = t
    a["warm_at"][j] = -1 if warm else 0  # -1: starts warm (the run's initial replicas)

    # Priority first, then arrival. ``key=`` evaluates O(log n) slots, not the whole queue: a
    # campus requests thousands of initial replicas, and a listed queue made that quadratic.
    def rkey(q: int) -> tuple[int, int]:
        return (-int(a["priority"][q]), int(a["id"][q]))

    i = bisect.bisect_right(cl.rqueue, rkey(j), key=rkey)
    cl.rqueue.insert(i, j)
    cl.dirty.add(j)
    cl._sched = True


def stop_replica(cl: Cluster, j: int, t: int) -> None:
    a = cl.jobs.a
    if a["state"][j] == QUEUED:
        cl.rqueue.remove(j)
    elif a["state"][j] == RUNNING:
        release(cl, j, t)
    a["state"][j] = STOPPED
    a["end"][j] = t
    a["activity"][j] = 0.0
    cl.dirty.add(j)


def start(cl: Cluster, ev: Events, j: int, t: int) -> bool:
    a = cl.jobs.a
    need = int(a["chips"][j])
    if need > cl.n_free:
        return False
    placed = scheduler.place(cl.free, cl.us_free, need, cl.cpu, cl.sp.placement)
    if placed is None:
        return False
    chips, spanned = placed
    cl.chip_owner[chips] = j
    cl.n_alloc += len(chips)
    cl.placement[j] = chips
    cl.last_us[j] = (
        str(int(chips[0]) // cl.cpu) if spanned == 1 else ",".join(str(u) for u in np.unique(chips // cl.cpu))
    )
    cl._seg = None
    cl.free[chips] = False
    if spanned == 1:
        cl.us_free[int(chips[0]) // cl.cpu] -= need
    else:
        cl.us_free -= np.bincount(chips // cl.cpu, minlength=len(cl.us_free))
    cl.n_free -= need
    cl._sched = True
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
        cl.chip_service[chips] = si
        cl._svc_chips = None
        a["restart_until"][j] = t
        sp = cl.p.services[si]
        a["warm_at"][j] = t if a["warm_at"][j] == -1 else t + int(round(sp.startup_s))
        a["activity"][j] = services.STARTING_ACTIVITY
    else:
        cls = job_class(cl, kind)
        if a["mfu_base"][j] <= 0:
            a["mfu_base"][j] = workload.model_mfu(cl.models.get(cl.jobs.names[j]), cls)
        if a["ckpt_every"][j] < 0:
            a["ckpt_every"][j] = cls.checkpoint_interval_s if cls is not None else 1800
        # The fabric: this placement's communication per step lowers the MFU (twin.fabric).
        peak = cl.acc.peak(cl.jobs.precision[j])
        mfu = fabric.job_mfu(
            cl.models.get(cl.jobs.names[j]),
            workload.FLOP_PER_PARAM_TOKEN[KIND_NAMES[kind]],
            need,
            spanned,
            peak,
            float(a["mfu_base"][j]),
            cl.p.hall.system,
            cl.p.training,
        )
        a["mfu"][j] = mfu
        a["rate"][j] = workload.training_rate_flop_s(need, peak, mfu)
        a["ckpt_time"][j] = t
        every = int(a["ckpt_every"][j])
        a["ckpt_due"][j] = t + every if every > 0 else NEVER
        restart = cl.p.training.restart_cost_s if a["restarts"][j] > 0 else 0
        a["restart_until"][j] = t + restart
        cl._restart_until_max = max(cl._restart_until_max, t + restart)
        work = float(a["work"][j])
        left = (work - a["done"][j]) / work if work > 0 else 0.0
        est = a["est"][j] if a["est"][j] > 0 else (work / a["rate"][j] if a["rate"][j] > 0 else 0.0)
        a["est_end"][j] = t + restart + est * left * cl.sp.runtime_estimate_factor
        a["activity"][j] = RESTART_ACTIVITY if restart > 0 else cl.p.training.activity
        cl.running[j] = None
        cl._run_dirty = True
    cl.dirty.add(j)
    ev.append(
        (
            "job_start",
            f"job:{cl.jobs.id_of(j)}",
            f"{cl.jobs.names[j]} on {len(chips)} chips, {spanned} UltraServer(s)"
            + (f", MFU {a['mfu'][j]:.3f}" if kind != INFERENCE else ""),
        )
    )
    return True


def job_class(cl: Cluster, kind: int) -> JobClassParams | None:
    name = KIND_NAMES[kind]
    return cl.p.training.job_class(name) if name in JOB_CLASSES else None


def release(cl: Cluster, j: int, t_end: int) -> None:
    """Give a job's chips back (those not failed or drained become free) and book the time it
    held them."""
    a = cl.jobs.a
    chips = cl.placement.pop(j, None)
    if chips is None:
        chips = np.flatnonzero(cl.chip_owner == j).astype(np.int64)
    cl.chip_owner[chips] = -1
    cl.n_alloc -= len(chips)
    if a["kind"][j] == INFERENCE:
        cl.chip_service[chips] = -1
        cl._svc_chips = None
    cl._seg = None
    ok = ~cl.chip_failed[chips]
    if cl.us_drain.any():
        ok &= ~cl.us_drain[chips // cl.cpu]
    cl.free[chips] = ok
    back = chips[ok]
    if len(back):
        first, last = int(back[0]) // cl.cpu, int(back[-1]) // cl.cpu
        if first == last:  # one UltraServer (most jobs): no pass over every UltraServer
            cl.us_free[first] += len(back)
        else:
            cl.us_free += np.bincount(back // cl.cpu, minlength=len(cl.us_free))
        cl.n_free += len(back)
    cl._sched = True
    a["run_s"][j] += t_end - a["start"][j]
    a["prog_s"][j] += max(0, t_end - a["restart_until"][j])
    if cl.running.pop(j, 0) is None:
        cl._run_dirty = True


def interrupt(cl: Cluster, ev: Events, j: int, t: int, reason: str, cause: str, by: int = -1) -> None:
    a = cl.jobs.a
    release(cl, j, t)
    lost = float(a["done"][j] - a["ckpt_done"][j])
    lost_s = float(a["prog_s"][j] - a["ckpt_prog_s"][j])
    a["lost"][j] += lost
    a["done"][j] = a["ckpt_done"][j]
    a["lost_s"][j] += lost_s
    a["prog_s"][j] = a["ckpt_prog_s"][j]
    a["restarts"][j] += 1
    if reason == "preemption":
        a["preemptions"][j] += 1
        cl.step_preemptions += 1
    else:
        a["failures"][j] += 1
    a["activity"][j] = 0.0
    a["rate"][j] = 0.0
    jid = cl.jobs.id_of(j)
    by_id = cl.jobs.id_of(by) if by >= 0 else -1
    cl.interrupt_rows.append((t, jid, reason, cause, lost, lost_s, int(a["chips"][j]), by_id))
    if a["kind"][j] == INFERENCE:
        request_replica(cl, j, t)
    else:
        a["state"][j] = QUEUED
        a["queued_since"][j] = t
        enqueue(cl, j)
    cl.dirty.add(j)
    what = "preempted" if reason == "preemption" else "interrupted"
    by_s = f" by job:{by_id}" if by >= 0 else f" ({cause})"
    ev.append(
        (
            f"job_{what}",
            f"job:{jid}",
            f"{cl.jobs.names[j]} {what}{by_s}, lost {lost:.3g} FLOP since checkpoint",
        )
    )


def finish(cl: Cluster, ev: Events, j: int, t_end: int) -> None:
    a = cl.jobs.a
    release(cl, j, t_end)
    a["state"][j] = DONE
    a["end"][j] = t_end
    a["activity"][j] = 0.0
    a["rate"][j] = 0.0
    cl.dirty.add(j)
    ev.append(("job_end", f"job:{cl.jobs.id_of(j)}", f"{cl.jobs.names[j]} done, {a['work'][j]:.3g} FLOP"))


def preempt_for(cl: Cluster, ev: Events, j: int, t: int) -> bool:
    """Priority policy: free chips for ``j`` by preempting lower-priority preemptible batch
    jobs (least wasted work first). True if enough chips were freed."""
    a = cl.jobs.a
    need = int(a["chips"][j]) - int(cl.us_free.sum())
    if need <= 0 or not cl.running:
        return False
    run = np.fromiter(cl.running, dtype=np.int64, count=len(cl.running))
    ok = a["preemptible"][run] & (a["priority"][run] < a["priority"][j])
    if cl.us_drain.any():  # chips on a draining UltraServer would not come free
        ok &= np.array([not cl.us_drain[cl.placement[int(v)] // cl.cpu].any() for v in run])
    cand = run[ok]
    if not len(cand):
        return False
    waste = (a["done"][cand] - a["ckpt_done"][cand]) / np.maximum(a["rate"][cand], 1.0)
    cost = (waste + cl.p.training.restart_cost_s) * a["chips"][cand]
    pick = scheduler.victims(
        need, a["chips"][cand].astype(np.int64), a["priority"][cand].astype(np.int64), cost
    )
    if not len(pick):
        return False
    for v in cand[pick].tolist():
        interrupt(cl, ev, int(v), t, "preemption", f"priority {int(a['priority'][j])}", by=j)
    return True


def schedule(cl: Cluster, ev: Events, t: int) -> None:
    if len(cl.queue) != len(cl._qkeys):
        rebuild_queue(cl)
    if not cl._sched:
        return
    cl._sched = False
    a = cl.jobs.a
    policy = cl.sp.policy
    head_need = -1
    while cl.rqueue:
        j = cl.rqueue[0]
        if start(cl, ev, j, t) or (
            policy == "priority" and preempt_for(cl, ev, j, t) and start(cl, ev, j, t)
        ):
            cl.rqueue.pop(0)
            continue
        head_need = int(a["chips"][j])
        break
    first = 0
    if head_need < 0:
        while cl.queue:
            j = cl.queue[0]
            if start(cl, ev, j, t) or (
                policy == "priority" and preempt_for(cl, ev, j, t) and start(cl, ev, j, t)
            ):
                cl.queue.pop(0)
                cl._qkeys.pop(0)
                continue
            head_need = int(a["chips"][j])
            first = 1
            break
    if policy == "fifo" or head_need < 0 or len(cl.queue) <= first:
        return
    # EASY backfill behind the blocked head.
    free = cl.n_free
    if free <= 0:
        return
    run = running_array(cl)
    shadow, extra = scheduler.reservation(
        t, free, head_need, a["est_end"][run], a["chips"][run].astype(np.int64)
    )
    cand = np.asarray(cl.queue[first : first + cl.sp.backfill_depth], dtype=np.int64)
    need = a["chips"][cand].astype(np.int64)
    work = a["work"][cand]
    left = np.where(work > 0, (work - a["done"][cand]) / np.where(work > 0, work, 1.0), 1.0)
    restart = np.where(a["restarts"][cand] > 0, cl.p.training.restart_cost_s, 0)
    end = t + a["est"][cand] * cl.sp.runtime_estimate_factor * left + restart
    ok = (need <= free) & ((end <= shadow) | (need <= extra))
    started: set[int] = set()
    for k in np.flatnonzero(ok).tolist():
        if free <= 0:
            break
        nk = int(need[k])
        fits_time = end[k] <= shadow
        if nk <= free and (fits_time or nk <= extra) and start(cl, ev, int(cand[k]), t):
            started.add(int(cand[k]))
            free -= nk
            if not fits_time:
                extra -= nk
    if started:
        # Only the window the candidates came from changes: rebuilding the whole queue here made
        # every step cost O(queue) (11 ms a step at 90,000 queued jobs).
        hi = first + len(cand)
        keep = [i for i in range(first, hi) if cl.queue[i] not in started]
        cl.queue[first:hi] = [cl.queue[i] for i in keep]
        cl._qkeys[first:hi] = [cl._qkeys[i] for i in keep]


def running_array(cl: Cluster) -> npt.NDArray[np.int64]:
    if cl._run_dirty:
        cl._run_arr = np.fromiter(cl.running, dtype=np.int64, count=len(cl.running))
        kinds = cl.jobs.a["kind"][cl._run_arr]
        cl._run_train = (kinds == PRETRAIN) | (kinds == FINETUNE)
        cl._run_dirty = False
    return cl._run_arr
