"""The chip pool: who owns each chip, which chips are out of service, and the free-chip counts.

``ChipPool`` is the one place that writes a hall's per-chip state. Its methods are the only
mutators for allocation (``allocate``; or ``take`` as each gang is placed, then ``own`` for a
step's gangs together), release (``release``), hardware failure (``fail``),
repair (``repair``, ``repairs_due``), thermal trips (``fail(..., thermal=True)``) and recovery
(``recover``), and drains (``set_drained``); everyone else reads the arrays. The free-chip
bookkeeping (``free``, ``us_free``, ``n_free``, ``n_alloc``) is kept incrementally by these
methods, so a step in which nothing starts or ends costs no recount.

A chip is free when no job owns it, it is in service (no hardware fault, not tripped) and its
UltraServer is not drained. ``ver`` counts the changes to ownership and availability (the
scheduler runs again only after one); ``fail_ver`` the changes to availability. The chips out
of service (``out``) and the hardware faults per UltraServer are kept as they change, like the
free counts.

The physics reads the chips through a step's ``Load`` (``ChipPool.load``; ``twin.work.segments``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from twin.spec.topology import Topology
from twin.work import scheduler
from twin.work.segments import F64, I64, NO_CHIPS, B, Changes, Load, Segments, read_only

__all__ = ["ChipPool", "Load", "Segments"]


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
        # UltraServers by free-chip count (index 0..cpu): the best fit of a gang is the fewest
        # free chips that hold it, found here without a pass over every UltraServer.
        self._us_hist = np.zeros(self.cpu + 1, dtype=np.int64)
        self._us_hist[self.cpu] = nus
        self.owner, self.failed, self.hw_failed, self.tripped = (
            read_only(self._owner),
            read_only(self._failed),
            read_only(self._hw_failed),
            read_only(self._tripped),
        )
        self.repair_at, self.service, self.drained = (
            read_only(self._repair_at),
            read_only(self._service),
            read_only(self._drained),
        )
        self.free, self.us_free = read_only(self._free), read_only(self._us_free)
        self.us_hist = read_only(self._us_hist)
        self._n_free = n
        self._n_alloc = 0
        self._placement: dict[int, I64] = {}
        self.placement: Mapping[int, I64] = MappingProxyType(self._placement)  # chips of each job
        self.next_repair = math.inf  # earliest timed repair
        # Timed repairs as set: (time, order, chips), earliest first; an entry whose chips were
        # repaired or given a later time since is passed over when its time comes.
        self._repairs: list[tuple[int, int, I64]] = []
        self._repair_seq = 0
        self.ver = 0  # bumped by every change of ownership or availability
        self.fail_ver = 0  # bumped by every change of availability
        self.svc_ver = 0  # bumped when a replica's chips are allocated or released
        self._fc_ver = -1
        self._out = np.zeros(0, dtype=np.int64)  # chips out of service, ascending
        self._hw_us = np.zeros(nus, dtype=np.int64)  # chips with a hardware fault per UltraServer
        self._fc: tuple[int, I64] = (0, np.zeros(nus, dtype=np.int64))
        # Owned chips grouped by job: (chip order, segment starts, job of each segment).
        self._seg: tuple[I64, I64, I64] | None = None
        # The physics' segments (``load``): rebuilt on the UltraServers marked since the last.
        self._segs: Segments | None = None
        self._us_changed = np.ones(nus, dtype=bool)
        self._spread: tuple[F64, F64] | None = None  # (g, h g) the segments were built with
        self._changes: Changes | None = None  # what changed since the last load was taken
        self._touched = np.zeros(n, dtype=bool)  # chips changed since then

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
        """Give free ``chips`` to the job in slot ``j`` (a replica of ``service`` if >= 0):
        ``take`` then ``own``. ValueError if a chip is not free (owned, out of service or
        drained) or the slot holds chips already."""
        self.take(j, chips)
        self.own([j], [chips], [service])

    def take(self, j: int, chips: I64) -> None:
        """The first half of an allocation: free ``chips`` are job slot ``j``'s and leave the
        free chips at once (the mask, the counts), so the next gang's placement finds them
        taken; their owner and service are written by ``own``, which must follow before the
        pool is read otherwise (a step's gangs are taken one by one as they are placed and
        owned together). ValueError if a chip is not free or the slot holds chips already."""
        if np.count_nonzero(self._free[chips]) < len(chips):  # (a count: ``all`` costs more)
            raise ValueError(f"job slot {j}: chips not free: {chips[~self._free[chips]].tolist()}")
        if j in self._placement:
            raise ValueError(f"job slot {j} already holds chips")
        self._placement[j] = chips
        self._free[chips] = False
        c = self.cpu
        self._count_free(chips, -1, int(chips[0]) // c == int(chips[-1]) // c)  # (one run per US)
        self.ver += 1

    def own(self, slots: list[int], chips: list[I64], services: list[int]) -> None:
        """The second half of the allocations of job ``slots`` (``take``): their ``chips`` are
        theirs in the owner array, a replica's (``services`` >= 0) its service's."""
        if not slots:
            return
        c = self.cpu
        owner: int | npt.NDArray[np.int32]
        if len(slots) == 1:
            ch, owner = chips[0], slots[0]
            one = int(ch[0]) // c == int(ch[-1]) // c
        else:
            ch = np.concatenate(chips)
            owner = np.repeat(np.asarray(slots, dtype=np.int32), [len(x) for x in chips])
            one = False
        self._changing(ch, one)
        self._owner[ch] = owner
        self._n_alloc += len(ch)
        self._seg = None
        for x, s in zip(chips, services, strict=True):
            if s >= 0:
                self._service[x] = s
                self.svc_ver += 1

    def release(self, slots: list[int]) -> I64:
        """Take back the chips of the job ``slots`` (those in service and not drained become
        free); returns them, slot after slot."""
        if not slots:
            return NO_CHIPS
        parts = []
        for j in slots:
            got = self._placement.pop(j, None)
            parts.append(np.flatnonzero(self._owner == j).astype(np.int64) if got is None else got)
        chips = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(chips):
            c = self.cpu
            # One job's chips on one UltraServer (most jobs): no pass over every UltraServer.
            one = len(parts) == 1 and int(chips[0]) // c == int(chips[-1]) // c
            self._changing(chips, one)
            self._owner[chips] = -1
            self._n_alloc -= len(chips)
            if np.count_nonzero(self._service[chips] >= 0):
                self._service[chips] = -1
                self.svc_ver += 1
            self._seg = None
            ok = ~self._failed[chips]
            if np.count_nonzero(self._drained):
                ok &= ~self._drained[chips // c]
            self._free[chips] = ok
            self._count_free(chips if np.count_nonzero(ok) == len(ok) else chips[ok], 1, one)
        self.ver += 1
        return chips

    def _count_free(self, chips: I64, sign: int, one: bool) -> None:
        """``chips`` became free (``sign`` 1) or taken (-1): the free counts of their
        UltraServers (``one``: all on one), the count histogram and the total."""
        if not len(chips):
            return
        c, uf, hist = self.cpu, self._us_free, self._us_hist
        if one:
            u = int(chips[0]) // c
            k = int(uf[u])
            hist[k] -= 1
            k += sign * len(chips)
            hist[k] += 1
            uf[u] = k
        else:
            d = np.bincount(chips // c, minlength=len(uf))
            us = np.flatnonzero(d)
            old = uf[us]
            new = old + sign * d[us]
            np.subtract.at(hist, old, 1)
            np.add.at(hist, new, 1)
            uf[us] = new
        self._n_free += sign * len(chips)

    # ------------------------------------------------------------------ availability
    def fail(self, chips: I64, repair_at: int, thermal: bool = False) -> list[int]:
        """Take ``chips`` out of service: a thermal trip (until ``recover``) or a hardware fault
        until ``repair_at`` (-1: until a repair event; a chip already awaiting repair keeps the
        later time, an open-ended fault stays open). Returns the job slots holding some of them
        (their owner still: the caller interrupts them)."""
        chips = np.asarray(chips, dtype=np.int64)
        was = self._out_before(chips)
        self._changing(chips)
        self._failed[chips] = True
        if thermal:
            self._tripped[chips] = True
        else:
            hw = self._hw_failed[chips]
            old = self._repair_at[chips]
            new = np.full(len(chips), repair_at, dtype=np.int64)
            if repair_at >= 0:
                new = np.where(hw & (old >= 0), np.maximum(old, repair_at), new)
                new = np.where(hw & (old < 0), -1, new)
            self._repair_at[chips] = new
            self._hw_failed[chips] = True
            if repair_at >= 0:
                self._repair_seq += 1
                heapq.heappush(self._repairs, (repair_at, self._repair_seq, chips.copy()))
                self.next_repair = self._repairs[0][0]
        owners = np.unique(self._owner[chips])
        self._out_after(was)
        self._refresh(chips)
        return [int(j) for j in owners[owners >= 0]]

    def repair(self, chips: I64) -> None:
        """Hardware repaired (a chip still tripped stays out until it recovers)."""
        chips = np.asarray(chips, dtype=np.int64)
        was = self._out_before(chips)
        self._changing(chips)
        self._hw_failed[chips] = False
        self._repair_at[chips] = -1
        self._failed[chips] = self._tripped[chips]
        self._out_after(was)
        self._refresh(chips)

    def recover(self, chips: I64) -> None:
        """Thermal trip over (a chip with a hardware fault stays out until repaired)."""
        chips = np.asarray(chips, dtype=np.int64)
        was = self._out_before(chips)
        self._changing(chips)
        self._tripped[chips] = False
        self._failed[chips] = self._hw_failed[chips]
        self._out_after(was)
        self._refresh(chips)

    def _out_before(self, chips: I64) -> tuple[I64, B, B]:
        """``chips`` (each once) with their out-of-service and hardware-fault flags, before a
        change of availability (for ``_out_after``)."""
        cu = np.unique(chips)
        return cu, self._failed[cu], self._hw_failed[cu]

    def _out_after(self, was: tuple[I64, B, B]) -> None:
        """The chips out of service (``out``) and the hardware faults per UltraServer after
        the change of the chips in ``was`` (``_out_before``): those that changed, not a pass
        over every chip."""
        cu, was_out, was_hw = was
        now_out, now_hw = self._failed[cu], self._hw_failed[cu]
        if (now_out != was_out).any():
            self._out = np.setdiff1d(
                np.union1d(self._out, cu[now_out & ~was_out]), cu[was_out & ~now_out], assume_unique=True
            )
        if (now_hw != was_hw).any():
            chip_us = self.topo.chip_us
            np.add.at(self._hw_us, chip_us[cu[now_hw & ~was_hw]], 1)
            np.subtract.at(self._hw_us, chip_us[cu[was_hw & ~now_hw]], 1)

    def repairs_due(self, t: int) -> I64:
        """Repair the chips whose repair time has come by ``t``; returns them."""
        if t < self.next_repair:
            return NO_CHIPS
        heap, got = self._repairs, []
        while heap and heap[0][0] <= t:
            got.append(heapq.heappop(heap)[2])
        chips = np.unique(np.concatenate(got)) if got else NO_CHIPS
        ra = self._repair_at[chips]
        due: I64 = chips[(ra >= 0) & (ra <= t)]
        if len(due):
            self.repair(due)
        self.next_repair = heap[0][0] if heap else math.inf
        return due

    def set_drained(self, u: int, drained: bool) -> None:
        """UltraServer ``u`` takes no new work (``drained``) or is back in service."""
        self._drained[u] = drained
        self._refresh(self.us_chips(u))

    def _changing(self, chips: I64, one: bool = False) -> None:
        """``chips`` (``one``: all on one UltraServer) are about to change owner or
        availability: their UltraServers' segments are rebuilt at the next load, and what they
        were is kept for the last load taken."""
        if not len(chips):
            return
        if self._changes is not None:
            self._changes.log.append((chips.copy(), self._owner[chips], self._failed[chips]))
            self._touched[chips] = True
        if one:
            self._us_changed[int(chips[0]) // self.cpu] = True
        else:
            self._us_changed[chips // self.cpu] = True

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
        self._us_hist[:] = np.bincount(self._us_free, minlength=c + 1)

    # ------------------------------------------------------------------ reading
    def us_chips(self, u: int) -> I64:
        return np.arange(u * self.cpu, (u + 1) * self.cpu, dtype=np.int64)

    def failed_counts(self) -> tuple[int, I64]:
        """(chips out of service, chips with a hardware fault in each UltraServer)."""
        if self._fc_ver != self.fail_ver:
            self._fc = (len(self._out), self._hw_us.copy())
            self._fc_ver = self.fail_ver
        return self._fc

    @property
    def out(self) -> I64:
        """The chips out of service, ascending (a hardware fault or a thermal trip)."""
        return read_only(self._out)

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

    # ------------------------------------------------------------------ the physics' view
    def load(self, activity: F64, g: F64, hg: F64) -> Load:
        """The step's load: the segments of the powered chips and their jobs' ``activity``
        (the job table's column; idle: 0), with the chips' spread ``g`` and ``hg`` (fixed for
        a run: the segments keep their sums until their chips change). Per-chip views of it
        are the chips as now, whatever changes after (``Load``)."""
        segs = self.segments(g, hg)
        job = segs.job
        act = np.where(job >= 0, activity[job], 0.0)  # idle (-1): 0, not the last slot's
        changes = Changes()
        if self._changes is not None:
            self._changes.later = changes
            for chips, _, _ in self._changes.log:
                self._touched[chips] = False
        self._changes = changes
        return Load(seg=segs, seg_act=act, pool=self, changes=changes, slots=len(activity))

    def unchanged_since(self, changes: Changes | None, chips: I64, replicas: bool = False) -> bool:
        """None of ``chips`` changed owner or availability since the load of ``changes`` was
        taken (False when unsure: a load before the last). ``replicas``: ``chips`` are every chip
        a replica holds (``service`` >= 0), so whether the changed chips are held by one now
        tells (no gather over the hall's chips)."""
        if changes is None or changes is not self._changes:
            return False
        log = changes.log
        if not log:
            return True
        if replicas:
            moved = log[0][0] if len(log) == 1 else np.concatenate([c for c, _, _ in log])
            return not np.count_nonzero(self._service[moved] >= 0)
        return not self._touched[chips].any()

    def segments(self, g: F64, hg: F64) -> Segments:
        """The powered chips in segments (``Segments``) with the chips' spread ``g``, ``hg``:
        those of the UltraServers whose chips changed owner or availability since the last
        call are rebuilt from their chips."""
        if self._spread is None or self._spread[0] is not g or self._spread[1] is not hg:
            self._spread, self._segs = (g, hg), None
            self._us_changed[:] = True
        changed = self._us_changed
        us = np.flatnonzero(changed)
        if self._segs is not None and not len(us):
            return self._segs
        c = self.cpu
        chips = (us[:, None] * c + np.arange(c)).ravel()
        chips = chips[~self._failed[chips]]
        new = Segments.of(chips, self._owner[chips], c, g, hg)
        self._segs = new if self._segs is None else self._segs.replaced(us, new)
        changed[us] = False
        return self._segs
