"""What the work state keeps for the record: the jobs whose rows changed, each job's latest
UltraServers, the failure and interruption rows, and this step's failure and preemption counts;
with the tables built from them (``job_rows``, ``event_tables``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from twin.spec.params import KIND_NAMES
from twin.work.jobs import DONE, INFERENCE, QUEUED, RUNNING, SOURCES, STATE_NAMES, JobTable

__all__ = ["JobLog", "event_tables", "job_rows"]

FailureRow = tuple[int, str, int, str, int, int, int, str]
InterruptRow = tuple[int, int, str, str, float, float, int, int]


@dataclass(eq=False)
class JobLog:
    """What changed for the record: job rows to write, each job's latest UltraServers, failure
    and interruption rows, and this step's failure and preemption counts."""

    dirty: set[int] = field(default_factory=set)
    last_us: dict[int, str] = field(default_factory=dict)
    failure_rows: list[FailureRow] = field(default_factory=list)
    interrupt_rows: list[InterruptRow] = field(default_factory=list)
    step_failures: int = 0
    step_preemptions: int = 0
    jobs_due: int = 0  # when ``job_rows`` next writes every waiting and running job
    evict_next: list[int] = field(default_factory=list)  # finished jobs recorded, to leave memory


def _rows_due(
    log: JobLog, jobs: JobTable, live: tuple[Iterable[int], ...], every: int, t: int
) -> npt.NDArray[np.int64]:
    """The job slots whose rows are due, in order: the jobs that changed, and every waiting and
    running job when ``every`` seconds have passed (their waits and work done move on). Finished
    jobs recorded by the previous call leave memory first (their slots are reused)."""
    if log.evict_next:
        jobs.evict(log.evict_next)
        for j in log.evict_next:
            log.last_us.pop(j, None)
        log.dirty.difference_update(log.evict_next)
    if every <= 0 or t >= log.jobs_due:
        every_live = set().union(*live)
        ids = np.array(sorted(log.dirty | every_live), dtype=np.int64)
        log.jobs_due = t + every
    else:
        ids = np.array(sorted(log.dirty), dtype=np.int64)
    log.dirty.clear()
    return ids


def job_rows(
    log: JobLog,
    jobs: JobTable,
    live: tuple[Iterable[int], ...],
    every: int,
    system: str,
    t: int,
) -> dict[str, Any]:
    """Rows of the jobs that changed, plus every job in ``live`` (the queued and running: their
    waits and work done move on) when due (every ``every`` seconds; every call when 0)."""
    a = jobs.a
    ids = _rows_due(log, jobs, live, every, t)
    slots = ids.tolist()  # (Python ints: the per-job lists below index by them)
    st_all = a["state"][ids]
    log.evict_next = ids[(st_all == DONE) & (a["kind"][ids] != INFERENCE)].tolist()
    st = a["state"][ids]
    wait = a["wait"][ids] + np.where(st == QUEUED, t - a["queued_since"][ids], 0)
    on = st == RUNNING
    run_s = a["run_s"][ids] + np.where(on, t - a["start"][ids], 0)
    eff = np.where(a["ckpt_eff"][ids] > 0, a["ckpt_eff"][ids], 1.0)  # checkpoint writes make no progress
    prog_s = a["prog_s"][ids] + np.where(on, np.maximum(0, t - a["restart_until"][ids]) * eff, 0)
    return {
        "job_id": jobs.ids(ids).astype(np.int32),
        "kind": [KIND_NAMES[k] for k in a["kind"][ids].tolist()],
        "name": [jobs.names[j] for j in slots],
        "chips": a["chips"][ids],
        "precision": [jobs.precision[j] for j in slots],
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
        "state": [STATE_NAMES[s] for s in st.tolist()],
        "wait_s": wait,
        "run_s": run_s,
        "effective_s": prog_s,
        "lost_s": a["lost_s"][ids],
        "estimate_s": a["nominal"][ids],
        "ultraservers_spanned": a["spanned"][ids],
        "ultraservers": [log.last_us.get(j, "") for j in slots],
        "mfu": a["mfu"][ids],
        "restarts": a["restarts"][ids],
        "failures": a["failures"][ids],
        "preemptions": a["preemptions"][ids],
        "source": [SOURCES[s] for s in a["source"][ids].tolist()],
        "system": [system] * len(ids),
    }


def event_tables(log: JobLog) -> dict[str, dict[str, Any]]:
    """The failure and interruption rows since the last call, as columns."""
    fr, ir = log.failure_rows, log.interrupt_rows
    log.failure_rows, log.interrupt_rows = [], []
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
