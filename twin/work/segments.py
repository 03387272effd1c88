"""The physics reads the chips through a step's ``Load`` (``ChipPool.load``): the powered chips
of each UltraServer in ``Segments``, runs held by one job (or idle), whose chips share their
utilisation (a gang's activity, or 0 when idle), so UltraServer sums and maxima cost one pass
over the segments (a few per UltraServer), not over the chips. The segments of an UltraServer are rebuilt from
its chips only after one of its chips changed owner or availability. Per-chip utilisation is
built only when asked (chip samples, clocks below full, junction protection, trips, the live
view), from the ownership and availability the step saw: the pool keeps what each change
overwrote since, so a job that ended after the physics still shows the activity it ran at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["NO_CHIPS", "Changes", "Load", "Segments", "read_only"]

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]
# What one change overwrote: (chips, their owners before, their out-of-service flags before).
Change = tuple[I64, I32, B]


class _Pool(Protocol):
    """What a load reads of the chip pool it was taken from (``twin.work.chips.ChipPool``)."""

    @property
    def owner(self) -> I32: ...
    @property
    def failed(self) -> B: ...
    def unchanged_since(self, changes: Changes | None, chips: I64, replicas: bool = False) -> bool: ...


def read_only(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A view of ``a`` that cannot be written through."""
    v = a.view()
    v.flags.writeable = False
    return v


NO_CHIPS = read_only(np.zeros(0, dtype=np.int64))


@dataclass(frozen=True)
class Segments:
    """The powered chips of a hall in segments: runs of consecutive powered chips of one
    UltraServer held by one job (or idle), in chip order; a job holding a contiguous block of an
    UltraServer's chips, as the scheduler places gangs, is one segment there, an UltraServer's
    idle chips another. The chips of a segment share their utilisation (their job's activity, or
    0), so a sum over an UltraServer's chips is a sum over its segments of chip count (or sum of
    g) times utilisation, and its largest h g P is the largest over its segments of their largest
    h g times their P (``twin.physics.itpower``). Unpowered chips (a hardware fault, a thermal trip) are
    in none. Stored as two blocks: (UltraServer, job slot or -1, first chip) and (chips, sum of
    g, largest h g), one column per segment."""

    ints: I64  # (3, segments): UltraServer, job slot (-1: idle), lowest chip
    vals: F64  # (3, segments): powered chips (a float: a weight), sum of g, largest h g

    @property
    def us(self) -> I64:
        """UltraServer of each segment."""
        out: I64 = self.ints[0]
        return out

    @property
    def job(self) -> I64:
        """Job-table slot of each segment (-1: idle chips)."""
        out: I64 = self.ints[1]
        return out

    @property
    def first(self) -> I64:
        """Lowest chip of each segment (a segment's chips change owner together)."""
        out: I64 = self.ints[2]
        return out

    @property
    def n(self) -> F64:
        """Powered chips in each segment."""
        out: F64 = self.vals[0]
        return out

    @property
    def g(self) -> F64:
        """Sum of the power factors g of each segment's chips."""
        out: F64 = self.vals[1]
        return out

    @property
    def hg(self) -> F64:
        """Largest h g (h: resistance factor) of each segment's chips."""
        out: F64 = self.vals[2]
        return out

    @classmethod
    def of(cls, chips: I64, owner: I32, cpu: int, g: F64, hg: F64) -> Segments:
        """The segments of powered ``chips`` (ascending) held by ``owner`` (-1 idle), on
        UltraServers of ``cpu`` chips, with the chips' spread ``g``, ``hg``."""
        k = len(chips)
        us = chips // cpu
        new = np.empty(k, dtype=bool)  # a segment starts: another UltraServer or owner
        new[:1] = True
        np.not_equal(owner[1:], owner[:-1], out=new[1:])
        new[1:] |= us[1:] != us[:-1]
        starts = np.flatnonzero(new)
        m = len(starts)
        ints = np.empty((3, m), dtype=np.int64)
        ints[0], ints[1], ints[2] = us[starts], owner[starts], chips[starts]
        vals = np.empty((3, m))
        if m:
            vals[0, :-1] = starts[1:] - starts[:-1]
            vals[0, -1] = k - starts[-1]
            vals[1] = np.add.reduceat(g[chips], starts)
            vals[2] = np.maximum.reduceat(hg[chips], starts)
        return cls(ints, vals)

    def replaced(self, marked: I64, new: Segments) -> Segments:
        """These segments with those on the UltraServers ``marked`` (ascending) replaced by
        ``new`` (on those UltraServers), in chip order. An UltraServer's segments are one run of
        columns, in both: the result is the runs of the columns kept and of ``new``'s taken in
        turn (kept before marked UltraServer k, then its new run, ...). A few marked
        UltraServers: their runs are cut out and put in one by one (a fixed cost each, then one
        copy); many (more than 4 + one in 256 columns, as at a million chips, where ~90 change a
        step): one gather over every column (a small cost per column, cheaper than that many
        splices). A small hall's one or two a step stay with the first."""
        lo = np.searchsorted(self.us, marked)
        hi = np.searchsorted(self.us, marked, side="right")
        at = np.searchsorted(new.us, marked)
        if len(marked) > 4 + self.ints.shape[1] // 256:
            return self._gathered(new, lo, hi, at)
        return self._spliced(new, lo, hi, at)

    def _spliced(self, new: Segments, lo: I64, hi: I64, at: I64) -> Segments:
        """``replaced`` run by run: the marked UltraServers' old columns ``[lo, hi)`` give way to
        new's ``[at, next at)``."""
        ends = at.tolist()
        ends.append(new.ints.shape[1])
        ints: list[I64] = []
        vals: list[F64] = []
        prev = 0
        for k, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            ints += (self.ints[:, prev:a], new.ints[:, ends[k] : ends[k + 1]])
            vals += (self.vals[:, prev:a], new.vals[:, ends[k] : ends[k + 1]])
            prev = b
        ints.append(self.ints[:, prev:])
        vals.append(self.vals[:, prev:])
        return Segments(np.concatenate(ints, axis=1), np.concatenate(vals, axis=1))

    def _gathered(self, new: Segments, lo: I64, hi: I64, at: I64) -> Segments:
        """``replaced`` in one gather: every output column's source among old's and new's."""
        m, k = self.ints.shape[1], len(lo)
        at_end = np.empty_like(at)
        at_end[:-1], at_end[-1:] = at[1:], new.ints.shape[1]
        # Runs in output order: old [0, lo_0), new [at_0, at_end_0), old [hi_0, lo_1), ... old [hi_last, m);
        # as (start in the columns of old then new, length).
        start = np.empty(2 * k + 1, dtype=np.int64)
        size = np.empty(2 * k + 1, dtype=np.int64)
        start[0], start[2::2], start[1::2] = 0, hi, m + at
        size[0:-1:2] = lo
        size[0:-1:2] -= start[0:-1:2]
        size[-1] = m - start[-1]
        size[1::2] = at_end - at
        # Every output column's source: its run's start plus its place in the run.
        first = np.cumsum(size) - size
        src = np.repeat(start - first, size) + np.arange(int(size.sum()))
        both_ints = np.concatenate((self.ints, new.ints), axis=1)
        both_vals = np.concatenate((self.vals, new.vals), axis=1)
        return Segments(both_ints.take(src, axis=1), both_vals.take(src, axis=1))


class Changes:
    """What the changes to ownership and availability overwrote since a load was taken, in
    order, and the record of the next load's (``later``)."""

    __slots__ = ("later", "log")

    def __init__(self) -> None:
        self.log: list[Change] = []
        self.later: Changes | None = None


class Load:
    """The chips' utilisation in one step (0 on unpowered chips): per segment (``seg``,
    ``seg_act``) when taken from a chip pool (``ChipPool.load``), per chip (``util``, ``alive``,
    ``dead``) when asked, as the chips were when the load was taken."""

    def __init__(
        self,
        util: F64 | None = None,
        alive: B | None = None,
        seg: Segments | None = None,
        seg_act: F64 | None = None,
        pool: _Pool | None = None,
        changes: Changes | None = None,
        slots: int = 0,
    ) -> None:
        self.seg, self.seg_act = seg, seg_act  # the segments and their jobs' activity
        self._util, self._alive = util, alive
        self._dead: npt.NDArray[np.intp] | None = None
        self._pool, self._changes, self._slots = pool, changes, slots
        self._was: tuple[I32, B] | None = None  # the chips as found, once changed since

    @classmethod
    def of_chips(cls, util: F64, alive: B) -> Load:
        """A load given chip by chip (``util`` is set to 0 on the chips not ``alive``)."""
        if not alive.all():
            util = np.where(alive, util, 0.0)
        return cls(util, alive)

    @property
    def util(self) -> F64:
        """Each chip's utilisation: its job's activity, 0 when idle or unpowered."""
        if self._util is None:
            util = self._by_slot().take(self._state()[0])
            util[self.dead] = 0.0
            self._util = util
        return self._util

    @property
    def alive(self) -> B:
        """Powered chips."""
        if self._alive is None:
            self._alive = ~self._state()[1]
        return self._alive

    @property
    def dead(self) -> npt.NDArray[np.intp]:
        """Unpowered chips (few: failures, trips)."""
        if self._dead is None:
            self._dead = np.flatnonzero(~self._alive if self._alive is not None else self._state()[1])
        return self._dead

    def util_at(
        self, chips: I64, owner: I32 | None = None, failed: B | None = None, replicas: bool = False
    ) -> F64:
        """``util`` of ``chips``, without the whole per-chip array while these chips are as the
        load found them (others may have changed: jobs ended, chips failed). ``owner``,
        ``failed``: the pool's ``owner[chips]`` and ``failed[chips]`` as they are now, where the
        caller keeps them (no gather over the hall's chips); ``replicas``: ``chips`` are every
        chip the replicas hold (``ChipPool.unchanged_since``)."""
        pool = self._pool
        if self._util is None and pool is not None and pool.unchanged_since(self._changes, chips, replicas):
            out: F64 = self._by_slot().take(pool.owner[chips] if owner is None else owner)
            if failed is None:
                failed = pool.failed[chips]
            if failed.any():  # (few are: a chip's fault or trip releases its job)
                out[failed] = 0.0
            return out
        got: F64 = self.util[chips]
        return got

    def changed(self) -> I64 | None:
        """The chips that changed owner or availability since the load was taken (each change's
        chips, in order; a chip may repeat), or None for a load given chip by chip."""
        if self._pool is None:
            return None
        parts = [chips for log in self._log() for chips, _, _ in log]
        if not parts:
            return NO_CHIPS
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _by_slot(self) -> F64:
        """The activity of each job slot the segments hold, then 0 (slot -1: idle)."""
        assert self.seg is not None and self.seg_act is not None
        out = np.zeros(self._slots + 1)
        out[self.seg.job] = self.seg_act  # idle segments write 0 to the trailing slot
        return out

    def _log(self) -> list[list[Change]]:
        """The change logs since the load was taken, oldest first (empty ones left out)."""
        logs, c = [], self._changes
        while c is not None:
            if c.log:
                logs.append(c.log)
            c = c.later
        return logs

    def _state(self) -> tuple[I32, B]:
        """(owner, out of service) of every chip as when the load was taken: the pool's arrays
        with what the changes since overwrote put back, newest first."""
        pool = self._pool
        assert pool is not None, "a load given chip by chip has its arrays"
        if self._was is not None:
            return self._was
        logs = self._log()
        if not logs:
            return pool.owner, pool.failed  # unchanged (read at once, never kept)
        owner, failed = pool.owner.copy(), pool.failed.copy()
        for log in reversed(logs):
            for chips, was_owner, was_failed in reversed(log):
                owner[chips] = was_owner
                failed[chips] = was_failed
        self._was = (owner, failed)
        return self._was
