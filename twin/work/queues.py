"""The queues' order: batch jobs join the queue in the policy's order (FIFO by submit time, or
priority then submit time, ties by arrival); replica requests by priority, then arrival.

Functions of the work state's queues and job table (``twin.work.workstate``); the moves between
the queues and the chips are ``twin.work.queueing``.
"""

from __future__ import annotations

import bisect

from twin.work.jobs import QUEUED, JobTable, rows
from twin.work.workstate import JobLog, Queues


def keys(q: Queues, jobs: JobTable, js: list[int]) -> list[tuple[float, ...]]:
    """Queue order of the jobs in slots ``js``: the policy's, ties by arrival (job id)."""
    a = jobs.a
    jj = rows(js)
    submit, ids = a["submit"][jj].tolist(), a["id"][jj].tolist()
    if q.policy == "priority":
        prio = a["priority"][jj].tolist()
        return [(-float(p), float(s), float(i)) for p, s, i in zip(prio, submit, ids, strict=True)]
    return [(float(s), float(i)) for s, i in zip(submit, ids, strict=True)]


def enqueue(q: Queues, jobs: JobTable, js: list[int]) -> None:
    """Jobs ``js`` join the batch queue, each in its place in the policy's order."""
    if len(q.queue) != len(q.keys):
        rebuild_queue(q, jobs)
    for j, k in zip(js, keys(q, jobs, js), strict=True):
        i = bisect.bisect_right(q.keys, k)
        q.keys.insert(i, k)
        q.queue.insert(i, j)
    q.changed = True


def rebuild_queue(q: Queues, jobs: JobTable) -> None:
    """Jobs appended to ``queue`` from outside (tests, tools): put them in policy order."""
    a = jobs.a
    for j in q.queue:
        if a["queued_since"][j] == 0 and a["state"][j] == QUEUED and a["submit"][j] > 0:
            a["queued_since"][j] = a["submit"][j]
    pairs = sorted(zip(keys(q, jobs, q.queue), q.queue, strict=True))
    q.keys = [k for k, _ in pairs]
    q.queue[:] = [j for _, j in pairs]
    q.changed = True


def request_replica(q: Queues, jobs: JobTable, log: JobLog, j: int, t: int, warm: bool = False) -> None:
    a = jobs.a
    a["state"][j] = QUEUED
    a["queued_since"][j] = t
    a["warm_at"][j] = -1 if warm else 0  # -1: starts warm (the run's initial replicas)
    jobs.replica_ver += 1

    # Priority first, then arrival. ``key=`` evaluates O(log n) slots, not the whole queue: a
    # campus requests thousands of initial replicas, and a listed queue made that quadratic.
    def rkey(r: int) -> tuple[int, int]:
        return (-int(a["priority"][r]), int(a["id"][r]))

    i = bisect.bisect_right(q.rqueue, rkey(j), key=rkey)
    q.rqueue.insert(i, j)
    log.dirty.add(j)
    q.changed = True
