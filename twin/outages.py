"""Failures, repairs, thermal trips and drains: which chips are out of service, and until when.

Functions of the work state (``twin.cluster.Cluster``); those that can interrupt jobs or report
take the step's event list ``ev`` and append to it. Random failures draw from the failures stream
(``twin.failures`` holds the pure draws and the cause table).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from twin import failures, queueing
from twin.events import Events

if TYPE_CHECKING:
    from twin.cluster import Cluster


def refresh(cl: Cluster, chips: npt.NDArray[np.int64]) -> None:
    """Recompute schedulability of ``chips`` and the free counts of their UltraServers."""
    if not len(chips):
        return
    topo = cl.topo
    cl.fail_ver += 1  # failed chips may have changed: recounted when next asked
    cl.free[chips] = (cl.chip_owner[chips] < 0) & ~cl.chip_failed[chips] & ~cl.us_drain[topo.chip_us[chips]]
    c = cl.cpu
    for u in np.unique(topo.chip_us[chips]):
        cl.us_free[u] = int(np.count_nonzero(cl.free[u * c : (u + 1) * c]))
    cl.n_free = int(cl.us_free.sum())
    cl._sched = True


def fail_chips(
    cl: Cluster, ev: Events, chips: npt.NDArray[np.int64], repair_at: int, cause: str = "thermal", t: int = 0
) -> int:
    """Take chips out of service; every job with a chip among them is interrupted. Hardware
    faults last until ``repair_at`` (-1: until a repair event; a chip already awaiting repair
    keeps the later time); ``cause == "thermal"`` (a trip of the physics) lasts until
    ``recover_thermal``. Returns the number of jobs interrupted."""
    chips = np.asarray(chips, dtype=np.int64)
    cl.chip_failed[chips] = True
    if cause == "thermal":
        cl.chip_tripped[chips] = True
    else:
        was = cl.chip_hw_failed[chips]
        old = cl.chip_repair_at[chips]
        new = np.full(len(chips), repair_at, dtype=np.int64)
        if repair_at >= 0:
            new = np.where(was & (old >= 0), np.maximum(old, repair_at), new)
            new = np.where(was & (old < 0), -1, new)  # an open-ended fault stays open
        cl.chip_repair_at[chips] = new
        cl.chip_hw_failed[chips] = True
        if repair_at >= 0:
            cl.next_repair = min(cl.next_repair, repair_at)
    owners = np.unique(cl.chip_owner[chips])
    hit = [int(j) for j in owners[owners >= 0]]
    for j in hit:
        queueing.interrupt(cl, ev, j, t, "failure", cause)
    refresh(cl, chips)
    return len(hit)


def repair_chips(cl: Cluster, chips: npt.NDArray[np.int64]) -> None:
    """Hardware repaired (a chip still tripped by heat stays out until it recovers)."""
    chips = np.asarray(chips, dtype=np.int64)
    cl.chip_hw_failed[chips] = False
    cl.chip_repair_at[chips] = -1
    cl.chip_failed[chips] = cl.chip_tripped[chips]
    refresh(cl, chips)


def recover_thermal(cl: Cluster, chips: npt.NDArray[np.int64]) -> None:
    """Thermal trip over (a chip with a hardware fault stays out until repaired)."""
    chips = np.asarray(chips, dtype=np.int64)
    cl.chip_tripped[chips] = False
    cl.chip_failed[chips] = cl.chip_hw_failed[chips]
    refresh(cl, chips)


def random_failures(cl: Cluster, ev: Events, t: int, dt: int) -> None:
    fp = cl.p.failures
    if fp.chip_hazard_per_h <= 0:
        return
    n_alive = cl.topo.chips - cl.failed_counts()[0]
    lam = failures.expected_failures(n_alive, fp.chip_hazard_per_h, dt)
    k = int(cl.rng_failures.poisson(lam)) if lam > 0 else 0
    if k == 0:
        return
    d = failures.draw(~cl.chip_failed, k, cl.cause_table, fp.repair_sigma, cl.rng_failures)
    topo = cl.topo
    for chip, ci, rep in zip(d.chips.tolist(), d.cause.tolist(), d.repair_s.tolist(), strict=True):
        cause = cl.cause_table.names[ci]
        blast = cl.cause_table.blast[ci]
        cl.step_failures += 1
        if blast == "job":
            j = int(cl.chip_owner[chip])
            hit = 0
            if j >= 0:
                queueing.interrupt(cl, ev, j, t, "failure", cause)
                hit = 1
            failure_row(cl, ev, t, "chip", chip, cause, 0, 0, hit, "model")
            continue
        if blast == "server":
            s = int(topo.chip_server[chip])
            cps = topo.chips_per_server
            down = np.arange(s * cps, (s + 1) * cps, dtype=np.int64)
            down = down[~cl.chip_failed[down]]
            hit = fail_chips(cl, ev, down, t + rep, cause, t)
            failure_row(cl, ev, t, "server", s, cause, len(down), rep, hit, "model")
        else:
            hit = fail_chips(cl, ev, np.array([chip], dtype=np.int64), t + rep, cause, t)
            failure_row(cl, ev, t, "chip", chip, cause, 1, rep, hit, "model")


def failure_row(
    cl: Cluster,
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
    cl.failure_rows.append((t, level, idx, cause, down, repair_s, hit, source))
    rep = f", repair in {repair_s / 3600:.1f} h" if repair_s > 0 else ""
    ev.append(
        (
            "failure",
            f"{level}:{idx}",
            f"cause {cause}, {down} chip(s) down{rep}, {hit} job(s) interrupted",
        )
    )


def repairs_due(cl: Cluster, ev: Events, t: int) -> None:
    if t < cl.next_repair:
        return
    due = np.flatnonzero((cl.chip_repair_at >= 0) & (cl.chip_repair_at <= t))
    if len(due):
        repair_chips(cl, due)
        ev.append(("chip_repaired", f"chips:{len(due)}", f"{len(due)} chips back in service"))
    pending = cl.chip_repair_at[cl.chip_repair_at >= 0]
    cl.next_repair = float(pending.min()) if len(pending) else math.inf


def inject_failure(
    cl: Cluster, ev: Events, level: str, idx: int, duration_s: int, t: int, source: str
) -> str:
    chips = target_chips(cl, level, idx)
    chips = chips[~cl.chip_failed[chips]]
    repair = t + duration_s if duration_s > 0 else -1
    hit = fail_chips(cl, ev, chips, repair, "injected", t)
    cl.step_failures += 1
    cl.failure_rows.append((t, level, idx, "injected", len(chips), max(duration_s, 0), hit, source))
    return f"{len(chips)} chips failed, {hit} job(s) interrupted" + (
        f", repair in {duration_s} s" if repair >= 0 else ""
    )


def target_chips(cl: Cluster, level: str, idx: int) -> npt.NDArray[np.int64]:
    topo = cl.topo
    sizes = {
        "chip": (topo.chips, 1),
        "server": (topo.servers, topo.chips_per_server),
        "ultraserver": (topo.ultraservers, cl.cpu),
    }
    count, width = sizes[level]
    if not 0 <= idx < count:
        raise ValueError(f"{level} {idx} out of range 0..{count - 1}")
    return np.arange(idx * width, (idx + 1) * width, dtype=np.int64)


def drain(cl: Cluster, u: int, grace_s: int, maint_s: int, t: int) -> str:
    target_chips(cl, "ultraserver", u)
    cl.us_drain[u] = True
    cl.drain_deadline[u] = t + max(grace_s, 0)
    cl.drain_maint_s[u] = max(maint_s, 0)
    cl.maint_until[u] = -2
    refresh(cl, target_chips(cl, "ultraserver", u))
    return (
        f"no new work; running jobs {'evicted now' if grace_s <= 0 else f'evicted after {grace_s} s'}; "
        + (f"maintenance {maint_s} s once empty" if maint_s > 0 else "until undrained")
    )


def undrain(cl: Cluster, u: int) -> str:
    chips = target_chips(cl, "ultraserver", u)
    cl.us_drain[u] = False
    cl.maint_until[u] = -2
    refresh(cl, chips)
    return "back in service"


def drains(cl: Cluster, ev: Events, t: int) -> None:
    c = cl.cpu
    for u in np.flatnonzero(cl.us_drain).tolist():
        if cl.maint_until[u] == -2:  # draining
            owners = cl.chip_owner[u * c : (u + 1) * c]
            busy = np.unique(owners[owners >= 0])
            if len(busy) and t >= cl.drain_deadline[u]:
                for j in busy.tolist():
                    queueing.interrupt(cl, ev, int(j), t, "drain", "maintenance")
                busy = busy[:0]
            if not len(busy):
                ms = int(cl.drain_maint_s[u])
                cl.maint_until[u] = t + ms if ms > 0 else -1
                ev.append(
                    (
                        "maintenance_start",
                        f"ultraserver:{u}",
                        "drained" + (f", back in {ms} s" if ms > 0 else ""),
                    )
                )
        elif cl.maint_until[u] >= 0 and t >= cl.maint_until[u]:
            undrain(cl, u)
            ev.append(("maintenance_end", f"ultraserver:{u}", "back in service"))
