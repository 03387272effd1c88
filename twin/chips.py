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
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from twin import scheduler
from twin.topology import Topology

__all__ = ["ChipPool"]

I64 = npt.NDArray[np.int64]


def _read_only(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    v = a.view()
    v.flags.writeable = False
    return v


_NO_CHIPS = _read_only(np.zeros(0, dtype=np.int64))


class ChipPool:
    """Per-chip ownership, health and availability of one hall, with the free-chip counts."""

    def __init__(self, topo: Topology) -> None:
        n, nus = topo.chips, topo.ultraservers
        self.topo = topo
        self.cpu = topo.chips_per_us
        # The arrays are written here only: callers get read-only views of them (below).
        self._owner = np.full(n, -1, dtype=np.int32)  # job-table slot on each chip (-1 none)
        self._failed = np.zeros(n, dtype=bool)  # out of service: hw_failed | tripped
        self._hw_failed = np.zeros(n, dtype=bool)  # a hardware fault
        self._tripped = np.zeros(n, dtype=bool)  # powered off by a thermal trip
        self._repair_at = np.full(n, -1, dtype=np.int64)  # -1: none due (or until a repair event)
        self._service = np.full(n, -1, dtype=np.int32)  # service of the replica on each chip
        self._drained = np.zeros(nus, dtype=bool)  # UltraServers taking no new work
        self._free = np.ones(n, dtype=bool)
        self._us_free = np.full(nus, self.cpu, dtype=np.int64)
        self.owner, self.failed, self.hw_failed, self.tripped = (
            _read_only(self._owner),
            _read_only(self._failed),
            _read_only(self._hw_failed),
            _read_only(self._tripped),
        )
        self.repair_at, self.service, self.drained = (
            _read_only(self._repair_at),
            _read_only(self._service),
            _read_only(self._drained),
        )
        self.free, self.us_free = _read_only(self._free), _read_only(self._us_free)
        self._n_free = n
        self._n_alloc = 0
        self._placement: dict[int, I64] = {}
        self.placement: Mapping[int, I64] = MappingProxyType(self._placement)  # chips of each job
        self.next_repair = math.inf  # earliest timed repair
        self.ver = 0  # bumped by every change of ownership or availability
        self.fail_ver = 0  # bumped by every change of availability
        self.svc_ver = 0  # bumped when a replica's chips are allocated or released
        self._fc_ver = -1
        self._fc: tuple[int, I64] = (0, np.zeros(nus, dtype=np.int64))
        # Owned chips grouped by job: (chip order, segment starts, job of each segment).
        self._seg: tuple[I64, I64, I64] | None = None

    @property
    def n_free(self) -> int:
        """Free chips (the sum of ``us_free``)."""
        return self._n_free

    @property
    def n_alloc(self) -> int:
        """Chips held by jobs."""
        return self._n_alloc

    # ------------------------------------------------------------------ allocation
    def allocate(self, j: int, chips: I64, service: int = -1) -> None:
        """Give free ``chips`` to the job in slot ``j`` (a replica of ``service`` if >= 0).
        ValueError if a chip is not free (owned, out of service or drained)."""
        if not self._free[chips].all():
            raise ValueError(f"job slot {j}: chips not free: {chips[~self._free[chips]].tolist()}")
        if j in self._placement:
            raise ValueError(f"job slot {j} already holds chips")
        c = self.cpu
        need = len(chips)
        self._owner[chips] = j
        self._n_alloc += need
        self._placement[j] = chips
        self._seg = None
        self._free[chips] = False
        first, last = int(chips[0]) // c, int(chips[-1]) // c
        if first == last:
            self._us_free[first] -= need
        else:
            self._us_free -= np.bincount(chips // c, minlength=len(self._us_free))
        self._n_free -= need
        if service >= 0:
            self._service[chips] = service
            self.svc_ver += 1
        self.ver += 1

    def release(self, j: int) -> I64:
        """Take back the chips of job slot ``j`` (those in service and not drained become free);
        returns them."""
        chips = self._placement.pop(j, None)
        if chips is None:
            chips = np.flatnonzero(self._owner == j).astype(np.int64)
        c = self.cpu
        self._owner[chips] = -1
        self._n_alloc -= len(chips)
        if len(chips) and self._service[chips[0]] >= 0:
            self._service[chips] = -1
            self.svc_ver += 1
        self._seg = None
        ok = ~self._failed[chips]
        if self._drained.any():
            ok &= ~self._drained[chips // c]
        self._free[chips] = ok
        back = chips[ok]
        if len(back):
            first, last = int(back[0]) // c, int(back[-1]) // c
            if first == last:  # one UltraServer (most jobs): no pass over every UltraServer
                self._us_free[first] += len(back)
            else:
                self._us_free += np.bincount(back // c, minlength=len(self._us_free))
            self._n_free += len(back)
        self.ver += 1
        return chips

    # ------------------------------------------------------------------ availability
    def fail(self, chips: I64, repair_at: int, thermal: bool = False) -> list[int]:
        """Take ``chips`` out of service: a thermal trip (until ``recover``) or a hardware fault
        until ``repair_at`` (-1: until a repair event; a chip already awaiting repair keeps the
        later time, an open-ended fault stays open). Returns the job slots holding some of them
        (their owner still: the caller interrupts them)."""
        chips = np.asarray(chips, dtype=np.int64)
        self._failed[chips] = True
        if thermal:
            self._tripped[chips] = True
        else:
            was = self._hw_failed[chips]
            old = self._repair_at[chips]
            new = np.full(len(chips), repair_at, dtype=np.int64)
            if repair_at >= 0:
                new = np.where(was & (old >= 0), np.maximum(old, repair_at), new)
                new = np.where(was & (old < 0), -1, new)
            self._repair_at[chips] = new
            self._hw_failed[chips] = True
            if repair_at >= 0:
                self.next_repair = min(self.next_repair, repair_at)
        owners = np.unique(self._owner[chips])
        self._refresh(chips)
        return [int(j) for j in owners[owners >= 0]]

    def repair(self, chips: I64) -> None:
        """Hardware repaired (a chip still tripped stays out until it recovers)."""
        chips = np.asarray(chips, dtype=np.int64)
        self._hw_failed[chips] = False
        self._repair_at[chips] = -1
        self._failed[chips] = self._tripped[chips]
        self._refresh(chips)

    def recover(self, chips: I64) -> None:
        """Thermal trip over (a chip with a hardware fault stays out until repaired)."""
        chips = np.asarray(chips, dtype=np.int64)
        self._tripped[chips] = False
        self._failed[chips] = self._hw_failed[chips]
        self._refresh(chips)

    def repairs_due(self, t: int) -> I64:
        """Repair the chips whose repair time has come by ``t``; returns them."""
        if t < self.next_repair:
            return _NO_CHIPS
        ra = self._repair_at
        due = np.flatnonzero((ra >= 0) & (ra <= t))
        if len(due):
            self.repair(due)
        pending = ra[ra >= 0]
        self.next_repair = float(pending.min()) if len(pending) else math.inf
        return due

    def set_drained(self, u: int, drained: bool) -> None:
        """UltraServer ``u`` takes no new work (``drained``) or is back in service."""
        self._drained[u] = drained
        self._refresh(self.us_chips(u))

    def _refresh(self, chips: I64) -> None:
        """Availability of ``chips`` changed: recompute their free flags and the free counts of
        their UltraServers."""
        if not len(chips):
            return
        chip_us = self.topo.chip_us
        self.fail_ver += 1
        self.ver += 1
        self._free[chips] = (self._owner[chips] < 0) & ~self._failed[chips] & ~self._drained[chip_us[chips]]
        c = self.cpu
        for u in np.unique(chip_us[chips]):
            self._us_free[u] = int(np.count_nonzero(self._free[u * c : (u + 1) * c]))
        self._n_free = int(self._us_free.sum())

    # ------------------------------------------------------------------ reading
    def us_chips(self, u: int) -> I64:
        return np.arange(u * self.cpu, (u + 1) * self.cpu, dtype=np.int64)

    def failed_counts(self) -> tuple[int, I64]:
        """(chips out of service, chips with a hardware fault in each UltraServer)."""
        if self._fc_ver != self.fail_ver:
            nus = self.topo.ultraservers
            hw = np.bincount(self.topo.chip_us[np.flatnonzero(self._hw_failed)], minlength=nus)
            self._fc = (int(np.count_nonzero(self._failed)), hw.astype(np.int64))
            self._fc_ver = self.fail_ver
        return self._fc

    def us_counts(self) -> tuple[int, int, int, float]:
        """(free chips, drained idle chips, whole free UltraServers, fragmentation)."""
        c = self.cpu
        free = int(self._us_free.sum())
        drained = 0
        if self._drained.any():
            d = np.repeat(self._drained, c)
            drained = int(np.count_nonzero(d & (self._owner < 0) & ~self._failed))
        whole = int(np.count_nonzero(self._us_free == c))
        return free, drained, whole, scheduler.fragmentation(self._us_free, c)

    def owner_groups(self) -> tuple[I64, I64, I64]:
        """Owned chips grouped by job: (chip order, segment starts, job slot of each segment),
        cached until an allocation or release."""
        if self._seg is None:
            owner = self._owner
            order = np.argsort(owner, kind="stable")
            order = order[owner[order] >= 0].astype(np.int64)
            ow = owner[order].astype(np.int64)
            starts = np.flatnonzero(np.r_[True, ow[1:] != ow[:-1]]).astype(np.int64) if len(ow) else ow[:0]
            self._seg = (order, starts, ow[starts])
        return self._seg
