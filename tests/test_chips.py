"""The chip pool (``twin.work.chips``): the counts it keeps as chips are allocated, released, fail,
are repaired, trip and recover, and UltraServers are drained, always equal a recount from its
arrays; an allocation of a chip that is not free is refused and changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from twin.spec.topology import build
from twin.work import scheduler
from twin.work.chips import ChipPool

US, CPU, SERVERS = 3, 8, 2  # 3 UltraServers of 8 chips in 2 servers each


def pool() -> ChipPool:
    return ChipPool(build(US, CPU, SERVERS, 2))


def recount(p: ChipPool) -> None:
    """Every kept count and flag against a recount from the arrays."""
    chip_us = p.topo.chip_us
    free = (p.owner < 0) & ~p.failed & ~p.drained[chip_us]
    np.testing.assert_array_equal(p.free, free)
    np.testing.assert_array_equal(
        p.us_free, np.bincount(chip_us, weights=free, minlength=US).astype(np.int64)
    )
    np.testing.assert_array_equal(p.us_hist, np.bincount(p.us_free, minlength=CPU + 1))
    assert p.n_free == int(free.sum())
    assert p.n_alloc == int((p.owner >= 0).sum())
    np.testing.assert_array_equal(p.failed, p.hw_failed | p.tripped)
    n_out, hw = p.failed_counts()
    assert n_out == int(p.failed.sum())
    assert p.out.tolist() == np.flatnonzero(p.failed).tolist()
    np.testing.assert_array_equal(hw, np.bincount(chip_us[p.hw_failed], minlength=US))
    assert (p.repair_at[~p.hw_failed] == -1).all()
    # Placements and owners agree, and the owner groups cover exactly the owned chips.
    owned = np.flatnonzero(p.owner >= 0)
    placed = np.concatenate(list(p.placement.values())) if p.placement else np.zeros(0, np.int64)
    assert sorted(placed.tolist()) == owned.tolist()
    for j, chips in p.placement.items():
        assert (p.owner[chips] == j).all()
    order, starts, jobs = p.owner_groups()
    assert sorted(order.tolist()) == owned.tolist()
    assert len(set(jobs.tolist())) == len(jobs) == len(p.placement)
    np.testing.assert_array_equal(p.owner[order[starts]], jobs)
    free_n, drained_idle, whole, _ = p.us_counts()
    assert free_n == int(free.sum())
    assert drained_idle == int((p.drained[chip_us] & (p.owner < 0) & ~p.failed).sum())
    assert whole == int((np.bincount(chip_us, weights=free, minlength=US) == CPU).sum())


chip_sets = st.lists(st.integers(0, US * CPU - 1), min_size=1, max_size=6, unique=True)
ops = st.one_of(
    st.tuples(st.just("allocate"), st.integers(1, 2 * CPU), st.sampled_from(["topology", "first_fit"])),
    st.tuples(st.just("release"), st.integers(0, 20)),
    st.tuples(st.just("fail"), chip_sets, st.integers(-1, 50), st.booleans()),
    st.tuples(st.just("repair"), chip_sets),
    st.tuples(st.just("recover"), chip_sets),
    st.tuples(st.just("drain"), st.integers(0, US - 1), st.booleans()),
    st.tuples(st.just("due"), st.integers(0, 60)),
    st.tuples(st.just("bad"), st.integers(0, US * CPU - 1)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=40))
@example([("allocate", 4, "topology"), ("drain", 0, True), ("release", 0), ("drain", 0, False)])
def test_kept_counts_equal_a_recount_after_any_sequence(seq: list[tuple]) -> None:
    p = pool()
    next_job = 0
    recount(p)
    for op in seq:
        kind = op[0]
        if kind == "allocate":
            placed = scheduler.place(p.free, p.us_free, op[1], CPU, op[2])
            if placed is not None:
                p.allocate(next_job, placed[0], service=next_job % 2 - 1)
                next_job += 1
        elif kind == "release":  # one job, or several at once
            if p.placement:
                jobs = sorted(p.placement)
                picked = jobs[op[1] % len(jobs) :: 1 + op[1] % 3]
                if len(picked) == 1:
                    p.release([picked[0]])
                else:
                    p.release(picked)
        elif kind == "fail":
            chips = np.array(op[1], dtype=np.int64)
            hit = p.fail(chips, op[2], thermal=op[3])
            owners = {int(j) for j in p.owner[chips] if j >= 0}
            assert set(hit) == owners
            for j in hit:  # the jobs are interrupted: their chips come back (failed ones do not)
                p.release([j])
        elif kind == "repair":
            p.repair(np.array(op[1], dtype=np.int64))
        elif kind == "recover":
            p.recover(np.array(op[1], dtype=np.int64))
        elif kind == "drain":
            p.set_drained(op[1], op[2])
        elif kind == "due":  # exactly the chips whose repair time has come, by a scan
            want = np.flatnonzero((p.repair_at >= 0) & (p.repair_at <= op[1])).tolist()
            due = p.repairs_due(op[1])
            assert due.tolist() == want
            assert not ((p.repair_at >= 0) & (p.repair_at <= op[1])).any()
            assert not p.hw_failed[due].any()
            # No timed repair is earlier than the next one the pool will look for.
            assert (p.repair_at[p.repair_at >= 0] >= p.next_repair).all()
        else:  # allocating a chip that is not free is refused and changes nothing
            chip = op[1]
            if not p.free[chip]:
                before = (p.owner.copy(), p.free.copy(), p.us_free.copy(), p.n_free, p.n_alloc, p.ver)
                with pytest.raises(ValueError):
                    p.allocate(next_job, np.array([chip], dtype=np.int64))
                after = (p.owner, p.free, p.us_free, p.n_free, p.n_alloc, p.ver)
                for x, y in zip(before, after, strict=True):
                    np.testing.assert_array_equal(x, y)
        recount(p)


def test_allocation_refuses_owned_failed_tripped_and_drained_chips() -> None:
    p = pool()
    chips = np.arange(4, dtype=np.int64)
    p.allocate(0, chips)
    with pytest.raises(ValueError):
        p.allocate(1, np.array([3, 4], dtype=np.int64))  # chip 3 is owned
    with pytest.raises(ValueError):
        p.allocate(0, np.array([5], dtype=np.int64))  # slot 0 already holds chips
    p.fail(np.array([8], dtype=np.int64), 100)
    with pytest.raises(ValueError):
        p.allocate(2, np.array([8], dtype=np.int64))  # hardware fault
    p.fail(np.array([9], dtype=np.int64), -1, thermal=True)
    with pytest.raises(ValueError):
        p.allocate(2, np.array([9], dtype=np.int64))  # tripped
    p.set_drained(2, True)
    with pytest.raises(ValueError):
        p.allocate(2, np.array([2 * CPU], dtype=np.int64))  # drained UltraServer
    recount(p)
    assert p.n_alloc == 4 and p.n_free == US * CPU - 4 - 2 - CPU


def test_a_failed_chip_stays_out_after_its_job_releases_it_until_repaired_and_recovered() -> None:
    p = pool()
    p.allocate(0, np.arange(CPU, dtype=np.int64))
    assert p.fail(np.array([1, 2], dtype=np.int64), 30) == [0]
    p.fail(np.array([2], dtype=np.int64), -1, thermal=True)
    p.release([0])
    assert p.us_free[0] == CPU - 2 and p.next_repair == 30
    assert p.repairs_due(29).tolist() == []
    assert p.repairs_due(30).tolist() == [1, 2]
    assert p.us_free[0] == CPU - 1  # chip 2 is still tripped
    p.recover(np.array([2], dtype=np.int64))
    assert p.us_free[0] == CPU and p.next_repair == float("inf")
    recount(p)


def test_chips_released_on_a_drained_ultraserver_stay_out_until_undrained() -> None:
    p = pool()
    p.allocate(0, np.arange(2, dtype=np.int64))
    p.set_drained(0, True)
    assert p.us_free[0] == 0
    p.release([0])
    assert p.us_free[0] == 0 and not p.free[:CPU].any()
    p.set_drained(0, False)
    assert p.us_free[0] == CPU
    recount(p)


def test_callers_read_the_pool_but_cannot_write_it() -> None:
    p = pool()
    p.allocate(0, np.arange(2, dtype=np.int64))
    for arr in (
        p.owner,
        p.failed,
        p.hw_failed,
        p.tripped,
        p.repair_at,
        p.service,
        p.drained,
        p.free,
        p.us_free,
    ):
        with pytest.raises(ValueError):
            arr[0] = arr[0]
    with pytest.raises(TypeError):
        p.placement[1] = np.arange(2, 4, dtype=np.int64)  # type: ignore[index]
    with pytest.raises(AttributeError):
        p.n_free = 0  # type: ignore[misc]
    assert p.owner[0] == 0 and not p.free[0] and p.us_free[0] == CPU - 2  # the views follow the pool


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 2 * CPU), min_size=1, max_size=8), st.data())
def test_releasing_jobs_together_equals_releasing_them_one_by_one(
    sizes: list[int], data: st.DataObject
) -> None:
    """The pool after ``release`` of some jobs equals the pool after releasing them one by
    one in the same order: owners, free flags and counts, the count histogram, replicas'
    services and the chips handed back."""
    pools = pool(), pool()
    for p in pools:
        for j, need in enumerate(sizes):
            placed = scheduler.place(p.free, p.us_free, need, CPU)
            if placed is not None:
                p.allocate(j, placed[0], service=j % 2 - 1)
        # A chip of a job fails and the last UltraServer is drained: neither comes free.
        p.fail(p.placement[min(p.placement)][:1], 30)
        p.set_drained(US - 1, True)
    slots = data.draw(st.permutations(sorted(pools[0].placement)))
    slots = slots[: data.draw(st.integers(0, len(slots)))]
    one_by_one = [pools[0].release([j]) for j in slots]
    together = pools[1].release(slots)
    want = np.concatenate(one_by_one) if one_by_one else np.zeros(0, dtype=np.int64)
    assert together.tolist() == want.tolist()
    a, b = pools
    for x, y in [
        (a.owner, b.owner),
        (a.free, b.free),
        (a.us_free, b.us_free),
        (a.us_hist, b.us_hist),
        (a.service, b.service),
    ]:
        np.testing.assert_array_equal(x, y)
    assert (a.n_free, a.n_alloc, sorted(a.placement)) == (b.n_free, b.n_alloc, sorted(b.placement))
    recount(b)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2 * CPU), st.booleans()), min_size=1, max_size=8))
def test_gangs_taken_one_by_one_and_owned_together_equal_gangs_allocated_one_by_one(
    gangs: list[tuple[int, bool]],
) -> None:
    """Placing each gang and taking its chips (``take``), then owning them all at once
    (``own``), leaves the pool as allocating each right after its placement: the same chips
    (each placement sees the chips taken before it), owners, free flags and counts, services."""
    a, b = pool(), pool()
    for p in (a, b):
        p.fail(np.array([CPU + 1], dtype=np.int64), 30)  # a hole: not every gang is one run
    took: list[tuple[int, np.ndarray, int]] = []
    for j, (need, replica) in enumerate(gangs):
        service = j % 3 if replica else -1
        got_a = scheduler.place(a.free, a.us_free, need, CPU)
        got_b = scheduler.place(b.free, b.us_free, need, CPU)
        assert (got_a is None) == (got_b is None)
        if got_a is None or got_b is None:
            continue
        assert got_a[0].tolist() == got_b[0].tolist()
        a.allocate(j, got_a[0], service)
        b.take(j, got_b[0])
        took.append((j, got_b[0], service))
    b.own([j for j, _, _ in took], [c for _, c, _ in took], [s for _, _, s in took])
    for x, y in [(a.owner, b.owner), (a.free, b.free), (a.us_free, b.us_free), (a.us_hist, b.us_hist)]:
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.service, b.service)
    assert (a.n_free, a.n_alloc, sorted(a.placement)) == (b.n_free, b.n_alloc, sorted(b.placement))
    recount(b)
