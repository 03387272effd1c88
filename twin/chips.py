"""The chip pool: who owns each chip, which chips are out of service, and the free-chip counts.

``ChipPool`` is the one place that writes a hall's per-chip state. Its methods are the only
mutators for allocation (``allocate``), release (``release``), hardware failure (``fail``),
repair (``repair``, ``repairs_due``), thermal trips (``fail(..., thermal=True)``) and recovery
(``recover``), and drains (``set_drained``); everyone else reads the arrays. The free-chip
bookkeeping (``free``, ``us_free``, ``n_free``, ``n_alloc``) is kept incrementally by these
methods, so a step in which nothing starts or ends costs no recount.

A chip is free when no job owns it, it is in service (no hardware fault, not tripped) and its
UltraServer is not drained. ``ver`` counts the changes to ownership and availability (the
scheduler runs again only after one); ``fail_ver`` the changes to availability (the counts of
failed chips are recounted only after one).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from twin import scheduler
from twin.topology import Topology

__all__ = ["ChipPool"]

I64 = npt.NDArray[np.int64]


class ChipPool:
    """Per-chip ownership, health and availability of one hall, with the free-chip counts."""

    def __init__(self, topo: Topology) -> None:
        n, nus = topo.chips, topo.ultraservers
        self.topo = topo
        self.cpu = topo.chips_per_us
        self.owner = np.full(n, -1, dtype=np.int32)  # job-table slot on each chip (-1 none)
        self.failed = np.zeros(n, dtype=bool)  # out of service: hw_failed | tripped
        self.hw_failed = np.zeros(n, dtype=bool)  # a hardware fault
        self.tripped = np.zeros(n, dtype=bool)  # powered off by a thermal trip
        self.repair_at = np.full(n, -1, dtype=np.int64)  # -1: none due (or until a repair event)
        self.service = np.full(n, -1, dtype=np.int32)  # service of the replica on each chip
        self.drained = np.zeros(nus, dtype=bool)  # UltraServers taking no new work
        self.free = np.ones(n, dtype=bool)
        self.us_free = np.full(nus, self.cpu, dtype=np.int64)
        self.n_free = n
        self.n_alloc = 0  # chips held by jobs
        self.placement: dict[int, I64] = {}  # chips of each job holding some
        self.next_repair = math.inf  # earliest timed repair
        self.ver = 0  # bumped by every change of ownership or availability
        self.fail_ver = 0  # bumped by every change of availability
        self.svc_ver = 0  # bumped when a replica's chips are allocated or released
        self._fc_ver = -1
        self._fc: tuple[int, I64] = (0, np.zeros(nus, dtype=np.int64))
        # Owned chips grouped by job: (chip order, segment starts, job of each segment).
        self._seg: tuple[I64, I64, I64] | None = None

    # ------------------------------------------------------------------ allocation
    def allocate(self, j: int, chips: I64, service: int = -1) -> None:
        """Give free ``chips`` to the job in slot ``j`` (a replica of ``service`` if >= 0).
        ValueError if a chip is not free (owned, out of service or drained)."""
        if not self.free[chips].all():
            raise ValueError(f"job slot {j}: chips not free: {chips[~self.free[chips]].tolist()}")
        if j in self.placement:
            raise ValueError(f"job slot {j} already holds chips")
        c = self.cpu
        need = len(chips)
        self.owner[chips] = j
        self.n_alloc += need
        self.placement[j] = chips
        self._seg = None
        self.free[chips] = False
        first, last = int(chips[0]) // c, int(chips[-1]) // c
        if first == last:
            self.us_free[first] -= need
        else:
            self.us_free -= np.bincount(chips // c, minlength=len(self.us_free))
        self.n_free -= need
        if service >= 0:
            self.service[chips] = service
            self.svc_ver += 1
        self.ver += 1

    def release(self, j: int) -> I64:
        """Take back the chips of job slot ``j`` (those in service and not drained become free);
        returns them."""
        chips = self.placement.pop(j, None)
        if chips is None:
            chips = np.flatnonzero(self.owner == j).astype(np.int64)
        c = self.cpu
        self.owner[chips] = -1
        self.n_alloc -= len(chips)
        if len(chips) and self.service[chips[0]] >= 0:
            self.service[chips] = -1
            self.svc_ver += 1
        self._seg = None
        ok = ~self.failed[chips]
        if self.drained.any():
            ok &= ~self.drained[chips // c]
        self.free[chips] = ok
        back = chips[ok]
        if len(back):
            first, last = int(back[0]) // c, int(back[-1]) // c
            if first == last:  # one UltraServer (most jobs): no pass over every UltraServer
                self.us_free[first] += len(back)
            else:
                self.us_free += np.bincount(back // c, minlength=len(self.us_free))
            self.n_free += len(back)
        self.ver += 1
        return chips

    # ------------------------------------------------------------------ availability
    def fail(self, chips: I64, repair_at: int, thermal: bool = False) -> list[int]:
        """Take ``chips`` out of service: a thermal trip (until ``recover``) or a hardware fault
        until ``repair_at`` (-1: until a repair event; a chip already awaiting repair keeps the
        later time, an open-ended fault stays open). Returns the job slots holding some of them
        (their owner still: the caller interrupts them)."""
        chips = np.asarray(chips, dtype=np.int64)
        self.failed[chips] = True
        if thermal:
            self.tripped[chips] = True
        else:
            was = self.hw_failed[chips]
            old = self.repair_at[chips]
            new = np.full(len(chips), repair_at, dtype=np.int64)
            if repair_at >= 0:
                new = np.where(was & (old >= 0), np.maximum(old, repair_at), new)
                new = np.where(was & (old < 0), -1, new)
            self.repair_at[chips] = new
            self.hw_failed[chips] = True
            if repair_at >= 0:
                self.next_repair = min(self.next_repair, repair_at)
        owners = np.unique(self.owner[chips])
        self._refresh(chips)
        return [int(j) for j in owners[owners >= 0]]

    def repair(self, chips: I64) -> None:
        """Hardware repaired (a chip still tripped stays out until it recovers)."""
        chips = np.asarray(chips, dtype=np.int64)
        self.hw_failed[chips] = False
        self.repair_at[chips] = -1
        self.failed[chips] = self.tripped[chips]
        self._refresh(chips)

    def recover(self, chips: I64) -> None:
        """Thermal trip over (a chip with a hardware fault stays out until repaired)."""
        chips = np.asarray(chips, dtype=np.int64)
        self.tripped[chips] = False
        self.failed[chips] = self.hw_failed[chips]
        self._refresh(chips)

    def repairs_due(self, t: int) -> I64:
        """Repair the chips whose repair time has come by ``t``; returns them."""
        if t < self.next_repair:
            return np.zeros(0, dtype=np.int64)
        ra = self.repair_at
        due = np.flatnonzero((ra >= 0) & (ra <= t))
        if len(due):
            self.repair(due)
        pending = ra[ra >= 0]
        self.next_repair = float(pending.min()) if len(pending) else math.inf
        return due

    def set_drained(self, u: int, drained: bool) -> None:
        """UltraServer ``u`` takes no new work (``drained``) or is back in service."""
        self.drained[u] = drained
        self._refresh(self.us_chips(u))

    def _refresh(self, chips: I64) -> None:
        """Availability of ``chips`` changed: recompute their free flags and the free counts of
        their UltraServers."""
        if not len(chips):
            return
        chip_us = self.topo.chip_us
        self.fail_ver += 1
        self.ver += 1
        self.free[chips] = (self.owner[chips] < 0) & ~self.failed[chips] & ~self.drained[chip_us[chips]]
        c = self.cpu
        for u in np.unique(chip_us[chips]):
            self.us_free[u] = int(np.count_nonzero(self.free[u * c : (u + 1) * c]))
        self.n_free = int(self.us_free.sum())

    # ------------------------------------------------------------------ reading
    def us_chips(self, u: int) -> I64:
        return np.arange(u * self.cpu, (u + 1) * self.cpu, dtype=np.int64)

    def failed_counts(self) -> tuple[int, I64]:
        """(chips out of service, chips with a hardware fault in each UltraServer)."""
        if self._fc_ver != self.fail_ver:
            nus = self.topo.ultraservers
            hw = np.bincount(self.topo.chip_us[np.flatnonzero(self.hw_failed)], minlength=nus)
            self._fc = (int(np.count_nonzero(self.failed)), hw.astype(np.int64))
            self._fc_ver = self.fail_ver
        return self._fc

    def us_counts(self) -> tuple[int, int, int, float]:
        """(free chips, drained idle chips, whole free UltraServers, fragmentation)."""
        c = self.cpu
        free = int(self.us_free.sum())
        drained = 0
        if self.drained.any():
            d = np.repeat(self.drained, c)
            drained = int(np.count_nonzero(d & (self.owner < 0) & ~self.failed))
        whole = int(np.count_nonzero(self.us_free == c))
        return free, drained, whole, scheduler.fragmentation(self.us_free, c)

    def owner_groups(self) -> tuple[I64, I64, I64]:
        """Owned chips grouped by job: (chip order, segment starts, job slot of each segment),
        cached until an allocation or release."""
        if self._seg is None:
            owner = self.owner
            order = np.argsort(owner, kind="stable")
            order = order[owner[order] >= 0].astype(np.int64)
            ow = owner[order].astype(np.int64)
            starts = np.flatnonzero(np.r_[True, ow[1:] != ow[:-1]]).astype(np.int64) if len(ow) else ow[:0]
            self._seg = (order, starts, ow[starts])
        return self._seg
