"""Scheduling decisions as pure functions: gang placement, the EASY-backfill reservation and the
choice of preemption victims. The queue itself and the bookkeeping live in ``twin.work.cluster``.

Placement is topology-aware: a gang that fits inside one UltraServer (the scale-up domain) goes
into the one with the fewest free chips that can hold it (best fit, which keeps whole UltraServers
free for big gangs); a bigger gang takes the fewest UltraServers, emptiest first. ``first_fit`` is
the topology-blind baseline (lowest free chip indices). Arrays in, arrays out; no state.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
POLICIES = ("fifo", "backfill", "priority")
PLACEMENTS = ("topology", "first_fit")


def place(
    free: npt.NDArray[np.bool_],
    us_free: npt.NDArray[np.int64],
    need: int,
    chips_per_us: int,
    mode: str = "topology",
    n_free: int | None = None,
    best: int = -1,
    hist: npt.NDArray[np.int64] | None = None,
) -> tuple[IntArray, int] | None:
    """Chips for a gang of ``need`` and the UltraServers it spans, or None if too few are free.

    ``free`` marks schedulable chips, ``us_free`` counts them per UltraServer; ``n_free``: their
    sum, where the caller keeps it (else it is counted); ``hist``: the UltraServers with each
    count 0..``chips_per_us`` of free chips, where the caller keeps it (else it is counted).
    ``best``: an UltraServer the caller knows to be the best fit for ``need`` while it still
    holds it (the one the last gang of the same size went into, nothing else changed since: it
    had the fewest free chips that held the gang, so with fewer it has still; no search then)."""
    if need <= 0 or (int(us_free.sum()) if n_free is None else n_free) < need:
        return None
    c = chips_per_us
    if mode == "first_fit":
        first = np.flatnonzero(free)[:need].astype(np.int64)
        return first, int(len(np.unique(first // c)))
    if hist is None:
        hist = np.bincount(us_free, minlength=c + 1)
    if need <= c:
        # Best fit: the fewest free chips that still hold the gang (the first count from
        # ``need`` up that some UltraServer has), lowest index on ties.
        if best >= 0 and us_free[best] >= need:
            u = best
        else:
            k = need + int((hist[need:] > 0).argmax())
            u = int((us_free == k).argmax()) if hist[k] > 0 else -1
        if u >= 0:
            chips: IntArray = free[u * c : (u + 1) * c].nonzero()[0][:need] + u * c
            return chips, 1
    # The fewest UltraServers: the emptiest first, lowest index on ties; each gives all its free
    # chips, the last its lowest ones still needed.
    groups: list[IntArray] = []
    left = need
    for k in (hist[1:].nonzero()[0][::-1] + 1).tolist():
        with_k = (us_free == k).nonzero()[0][: -(-left // k)]
        groups.append(with_k)
        left -= len(with_k) * k
        if left <= 0:
            break
    us = groups[0] if len(groups) == 1 else np.concatenate(groups)
    if len(groups) == 1 and k == c:  # whole UltraServers (most big gangs): their chips in order
        chips = (us[:, None] * c + np.arange(c)).ravel()[:need]
    else:
        row, col = free.reshape(-1, c)[us].nonzero()
        chips = (us[row] * c + col)[:need]
    return chips, len(us)


def reservation(
    now: float, free_chips: int, need: int, run_end: npt.NDArray[np.float64], run_chips: IntArray
) -> tuple[float, int]:
    """EASY backfill: the time the queue head can start (the "shadow time", from the running
    jobs' estimated ends) and the chips left over at that time ("extra" chips a backfilled job
    may use however long it runs). Counts chips, not topology."""
    if free_chips >= need:
        return now, free_chips - need
    order = np.argsort(run_end, kind="stable")
    avail = free_chips + np.cumsum(run_chips[order])
    k = int(np.searchsorted(avail, need, side="left"))
    if k >= len(avail):
        return float("inf"), 0
    return float(run_end[order[k]]), int(avail[k] - need)


def victims(need: int, chips: IntArray, priority: IntArray, cost: npt.NDArray[np.float64]) -> IntArray:
    """Indices of candidate jobs to preempt so that ``need`` more chips come free: lowest priority
    first, then least wasted work (``cost``); jobs not needed after all are given back. Empty if
    the candidates cannot free enough."""
    if need <= 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((cost, priority))
    cum = np.cumsum(chips[order])
    k = int(np.searchsorted(cum, need, side="left"))
    if k >= len(order):
        return np.zeros(0, dtype=np.int64)
    picked = list(order[: k + 1])
    total = int(cum[k])
    for v in sorted(picked, key=lambda i: (-cost[i], -priority[i])):  # drop the costliest spare
        if total - chips[v] >= need:
            picked.remove(v)
            total -= int(chips[v])
    return np.asarray(picked, dtype=np.int64)


def fragmentation(us_free: IntArray, chips_per_us: int) -> float:
    """Share of the free chips that sit in partly occupied UltraServers, i.e. that a gang of a
    whole scale-up domain cannot use (0 when nothing is free)."""
    total = int(us_free.sum())
    if total <= 0:
        return 0.0
    whole = int((us_free == chips_per_us).sum()) * chips_per_us
    return 1.0 - whole / total
