"""Failures, repairs, thermal trips and drains: which chips are out of service, and until when.

Functions of the work state's slices (``twin.work.workstate``): chips leave and return to service
only through the chip pool's mutators (``twin.work.chips``); the jobs they interrupt go back to the
queues (``twin.work.queueing``). Those that can interrupt jobs or report take the step's event list
``ev`` and append to it. Random failures draw from the failures stream (``twin.work.failures`` holds
the pure draws and the cause table).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from twin.spec.events import Events
from twin.work import failures, queueing
from twin.work.chips import ChipPool
from twin.work.workstate import JobLog, Work


def fail_chips(
    w: Work, ev: Events, chips: npt.NDArray[np.int64], repair_at: int, cause: str = "thermal", t: int = 0
) -> int:
    """Take chips out of service; every job with a chip among them is interrupted. Hardware
    faults last until ``repair_at`` (-1: until a repair event; a chip already awaiting repair
    keeps the later time); ``cause == "thermal"`` (a trip of the physics) lasts until
    ``recover_thermal``. Returns the number of jobs interrupted."""
    hit = w.pool.fail(np.asarray(chips, dtype=np.int64), repair_at, thermal=cause == "thermal")
    for j in hit:
        queueing.interrupt(w, ev, j, t, "failure", cause)
    return len(hit)


def repair_chips(w: Work, chips: npt.NDArray[np.int64]) -> None:
    """Hardware repaired (a chip still tripped by heat stays out until it recovers)."""
    w.pool.repair(chips)


def recover_thermal(w: Work, chips: npt.NDArray[np.int64]) -> None:
    """Thermal trip over (a chip with a hardware fault stays out until repaired)."""
    w.pool.recover(chips)


def random_failures(
    w: Work, rng: np.random.Generator, table: failures.CauseTable, ev: Events, t: int, dt: int
) -> None:
    """Random chip failures in [t, t + dt), drawn from ``rng`` by the causes of ``table``."""
    fp = w.p.failures
    if fp.chip_hazard_per_h <= 0:
        return
    pool, log = w.pool, w.log
    n_alive = w.topo.chips - pool.failed_counts()[0]
    lam = failures.expected_failures(n_alive, fp.chip_hazard_per_h, dt)
    k = int(rng.poisson(lam)) if lam > 0 else 0
    if k == 0:
        return
    d = failures.draw(pool.out, w.topo.chips, k, table, fp.repair_sigma, rng)
    topo = w.topo
    for chip, ci, rep in zip(d.chips.tolist(), d.cause.tolist(), d.repair_s.tolist(), strict=True):
        cause = table.names[ci]
        blast = table.blast[ci]
        log.step_failures += 1
        if blast == "job":
            j = int(pool.owner[chip])
            hit = 0
            if j >= 0:
                queueing.interrupt(w, ev, j, t, "failure", cause)
                hit = 1
            failure_row(log, ev, t, "chip", chip, cause, 0, 0, hit, "model")
            continue
        if blast == "server":
            s = int(topo.chip_server[chip])
            cps = topo.chips_per_server
            down = np.arange(s * cps, (s + 1) * cps, dtype=np.int64)
            down = down[~pool.failed[down]]
            hit = fail_chips(w, ev, down, t + rep, cause, t)
            failure_row(log, ev, t, "server", s, cause, len(down), rep, hit, "model")
        else:
            hit = fail_chips(w, ev, np.array([chip], dtype=np.int64), t + rep, cause, t)
            failure_row(log, ev, t, "chip", chip, cause, 1, rep, hit, "model")


def failure_row(
    log: JobLog,
    ev: Events,
    t: int,
    level: str,
    idx: int,
    cause: str,
    down: int,
    repair_s: int,
    hit: int,
    source: str,
) -> None:
    log.failure_rows.append((t, level, idx, cause, down, repair_s, hit, source))
    rep = f", repair in {repair_s / 3600:.1f} h" if repair_s > 0 else ""
    ev.append(
        (
            "failure",
            f"{level}:{idx}",
            f"cause {cause}, {down} chip(s) down{rep}, {hit} job(s) interrupted",
        )
    )


def repairs_due(pool: ChipPool, ev: Events, t: int) -> None:
    due = pool.repairs_due(t)
    if len(due):
        ev.append(("chip_repaired", f"chips:{len(due)}", f"{len(due)} chips back in service"))


def inject_failure(w: Work, ev: Events, level: str, idx: int, duration_s: int, t: int, source: str) -> str:
    chips = target_chips(w, level, idx)
    chips = chips[~w.pool.failed[chips]]
    repair = t + duration_s if duration_s > 0 else -1
    hit = fail_chips(w, ev, chips, repair, "injected", t)
    w.log.step_failures += 1
    w.log.failure_rows.append((t, level, idx, "injected", len(chips), max(duration_s, 0), hit, source))
    return f"{len(chips)} chips failed, {hit} job(s) interrupted" + (
        f", repair in {duration_s} s" if repair >= 0 else ""
    )


def target_chips(w: Work, level: str, idx: int) -> npt.NDArray[np.int64]:
    topo = w.topo
    sizes = {
        "chip": (topo.chips, 1),
        "server": (topo.servers, topo.chips_per_server),
        "ultraserver": (topo.ultraservers, topo.chips_per_us),
    }
    count, width = sizes[level]
    if not 0 <= idx < count:
        raise ValueError(f"{level} {idx} out of range 0..{count - 1}")
    return np.arange(idx * width, (idx + 1) * width, dtype=np.int64)


def drain(w: Work, u: int, grace_s: int, maint_s: int, t: int) -> str:
    target_chips(w, "ultraserver", u)
    dr = w.drains
    dr.deadline[u] = t + max(grace_s, 0)
    dr.maint_s[u] = max(maint_s, 0)
    dr.maint_until[u] = -2
    w.pool.set_drained(u, True)
    return (
        f"no new work; running jobs {'evicted now' if grace_s <= 0 else f'evicted after {grace_s} s'}; "
        + (f"maintenance {maint_s} s once empty" if maint_s > 0 else "until undrained")
    )


def undrain(w: Work, u: int) -> str:
    target_chips(w, "ultraserver", u)
    w.drains.maint_until[u] = -2
    w.pool.set_drained(u, False)
    return "back in service"


def drains(w: Work, ev: Events, t: int) -> None:
    """Drained UltraServers: evict their jobs at the deadline, start maintenance once empty,
    end it when due."""
    pool, dr = w.pool, w.drains
    c = pool.cpu
    for u in np.flatnonzero(pool.drained).tolist():
        if dr.maint_until[u] == -2:  # draining
            owners = pool.owner[u * c : (u + 1) * c]
            busy = np.unique(owners[owners >= 0])
            if len(busy) and t >= dr.deadline[u]:
                for j in busy.tolist():
                    queueing.interrupt(w, ev, int(j), t, "drain", "maintenance")
                busy = busy[:0]
            if not len(busy):
                ms = int(dr.maint_s[u])
                dr.maint_until[u] = t + ms if ms > 0 else -1
                ev.append(
                    (
                        "maintenance_start",
                        f"ultraserver:{u}",
                        "drained" + (f", back in {ms} s" if ms > 0 else ""),
                    )
                )
        elif dr.maint_until[u] >= 0 and t >= dr.maint_until[u]:
            undrain(w, u)
            ev.append(("maintenance_end", f"ultraserver:{u}", "back in service"))
