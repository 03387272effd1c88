"""The physics' segments (``twin.work.segments.Segments``, ``ChipPool.load``): the powered chips of each
UltraServer in runs held by one job (or idle), kept as chips are allocated, released, fail, are
repaired, trip and recover. The UltraServer sums and hottest-junction powers the step takes from
them at full clock equal the per-chip definitions, and a load's per-chip views are the chips as
they were when it was taken, whatever changed after."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import small_params
from twin.compose.hall import Hall
from twin.physics import capping
from twin.physics.itpower import it_power
from twin.spec import catalog
from twin.spec.params import CoolingParams, FailureParams, PowerChainParams
from twin.spec.topology import build
from twin.work import scheduler
from twin.work.chips import ChipPool, Load, Segments

US, CPU, SERVERS = 5, 16, 4  # 5 UltraServers of 16 chips in 4 servers each
N = US * CPU
SLOTS = 40  # job-table slots the sequences use
ACC = catalog.accelerator("trainium3")
SYS = catalog.system("trn3-gen2")


def _chips(seed: int) -> capping.Chips:
    topo = build(US, CPU, SERVERS, 2)
    ones = np.ones(N)
    ones.setflags(write=False)
    return capping.Chips.of(
        ACC,
        CoolingParams(),
        PowerChainParams(),
        topo,
        topo.us_row[topo.chip_us],
        ones,
        np.random.default_rng(seed),
    )


def _util(p: ChipPool, activity: np.ndarray) -> np.ndarray:
    """The per-chip definition: each chip its job's activity, 0 when idle or unpowered."""
    util = np.where(p.owner >= 0, activity[np.maximum(p.owner, 0)], 0.0)
    return np.where(p.failed, 0.0, util)


def check_segments(p: ChipPool, seg: Segments, g: np.ndarray, hg: np.ndarray) -> None:
    """Each segment, expanded from its first chip over the next powered chips, lies on its
    UltraServer and is held by its job (or idle); the segments cover every powered chip once, in
    chip order, with the sum of g and the largest h g of their chips."""
    powered = np.flatnonzero(~p.failed)
    at = {int(c): i for i, c in enumerate(powered)}
    covered = np.zeros(N, dtype=bool)
    assert (np.diff(seg.first) > 0).all()
    for u, j, first, n, gs, hgm in zip(
        seg.us.tolist(), seg.job.tolist(), seg.first.tolist(), seg.n, seg.g, seg.hg, strict=True
    ):
        i = at[first]
        chips = powered[i : i + int(n)]
        assert len(chips) == n
        assert (chips // CPU == u).all()
        assert (p.owner[chips] == j).all()
        assert not covered[chips].any()
        covered[chips] = True
        assert gs == pytest.approx(float(g[chips].sum()), rel=1e-12)
        assert hgm == hg[chips].max()
    np.testing.assert_array_equal(covered, ~p.failed)


def check_sums(ch: capping.Chips, load: Load, p: ChipPool, activity: np.ndarray, off: np.ndarray) -> None:
    """The step at full clock from the segments against every chip by hand: chip power
    g (P_idle + (P_tdp - P_idle) u) on powered chips of UltraServers not powered off, its sums,
    its largest h P and the utilisation sums per UltraServer."""
    util = _util(p, activity)
    alive = ~p.failed
    g, h = ch.p_scale, ch.r_scale
    on = alive & ~off[ch.topo.chip_us]
    chip_p = np.where(on, g * (ACC.idle_w + (ACC.tdp_w - ACC.idle_w) * util), 0.0)
    pw = it_power(ch, SYS, off, load, None, ch.ones, True)
    assert pw.by_segment and pw.full_p is None
    np.testing.assert_allclose(pw.us_chip_w, chip_p.reshape(US, CPU).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(pw.us_chip_max_w, (h * chip_p).reshape(US, CPU).max(axis=1), rtol=1e-12)
    np.testing.assert_allclose(pw.us_act, util.reshape(US, CPU).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(pw.us_gact, (g * util).reshape(US, CPU).sum(axis=1), rtol=1e-12)
    # The same step chip by chip (the path a load given per chip takes) and per chip on demand.
    per_chip = it_power(ch, SYS, off, Load.of_chips(util, alive), None, ch.ones, True)
    np.testing.assert_allclose(pw.us_it, per_chip.us_it, rtol=1e-12)
    np.testing.assert_allclose(pw.us_chip_max_w, per_chip.us_chip_max_w, rtol=1e-12)
    np.testing.assert_allclose(pw.chip_p, chip_p, rtol=1e-12)
    np.testing.assert_array_equal(load.util, util)


chip_sets = st.lists(st.integers(0, N - 1), min_size=1, max_size=6, unique=True)
ops = st.one_of(
    st.tuples(
        st.just("allocate"), st.integers(1, 2 * CPU), st.sampled_from(["topology", "first_fit", "scatter"])
    ),
    st.tuples(st.just("release"), st.integers(0, SLOTS)),
    st.tuples(st.just("fail"), chip_sets, st.integers(-1, 50), st.booleans(), st.booleans()),
    st.tuples(st.just("repair"), chip_sets),
    st.tuples(st.just("recover"), chip_sets),
    st.tuples(st.just("load"), st.integers(0, 2**32 - 1)),
)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(ops, max_size=40))
def test_segment_sums_equal_the_per_chip_step_after_any_sequence(seed: int, seq: list[tuple]) -> None:
    """Random allocations (whole UltraServers, first fit, scattered chips), releases, failures
    (hardware and thermal, with or without interrupting their jobs), repairs and recoveries;
    at every load the segments match the chips and the step's sums match the per-chip ones.
    Every load taken keeps its chips as they were, however much changed after."""
    ch = _chips(seed)
    rng = np.random.default_rng(seed)
    p = ChipPool(ch.topo)
    slot = 0
    activity = rng.random(SLOTS + 1) * (rng.random(SLOTS + 1) < 0.8)
    taken: list[tuple[Load, np.ndarray, np.ndarray, np.ndarray]] = []
    probe: tuple[Load, np.ndarray] | None = None  # the last load taken, no per-chip view built
    for op in [*seq, ("load", seed)]:
        kind = op[0]
        if kind == "allocate" and slot < SLOTS:
            if op[2] == "scatter":  # chips anywhere (a fragmented placement)
                free = np.flatnonzero(p.free)
                chips = np.sort(rng.choice(free, min(op[1], len(free)), replace=False)) if len(free) else free
                placed = (chips.astype(np.int64), 0) if len(chips) else None
            else:
                placed = scheduler.place(p.free, p.us_free, op[1], CPU, op[2])
            if placed is not None:
                p.allocate(slot, placed[0], slot % 3 - 1)  # some replicas (of 0, 1)
                slot += 1
        elif kind == "release" and p.placement:
            jobs = sorted(p.placement)
            p.release([jobs[op[1] % len(jobs)]])
        elif kind == "fail":
            hit = p.fail(np.array(op[1], dtype=np.int64), op[2], thermal=op[3])
            if op[4]:  # the jobs are interrupted (or not yet: owned chips may be unpowered)
                for j in hit:
                    p.release([j])
        elif kind == "repair":
            p.repair(np.array(op[1], dtype=np.int64))
        elif kind == "recover":
            p.recover(np.array(op[1], dtype=np.int64))
        elif kind == "load":
            if probe is not None:  # the chips it names as they were, without its whole arrays
                chips = np.arange(0, N, 3, dtype=np.int64)
                np.testing.assert_array_equal(probe[0].util_at(chips), probe[1][chips])
                # The replicas' chips: whether they changed read from the changed chips alone.
                rep = np.flatnonzero(p.service >= 0)
                changes = probe[0]._changes
                assert p.unchanged_since(changes, rep, replicas=True) == p.unchanged_since(changes, rep)
                np.testing.assert_array_equal(probe[0].util_at(rep, replicas=True), probe[1][rep])
            r = np.random.default_rng(op[1])
            activity = r.random(SLOTS + 1) * (r.random(SLOTS + 1) < 0.8)
            kept = p.load(activity, ch.p_scale, ch.hg)  # its per-chip views are asked at the end
            load = p.load(activity, ch.p_scale, ch.hg)
            assert load.seg is not None
            check_segments(p, load.seg, ch.p_scale, ch.hg)
            check_sums(ch, load, p, activity, r.random(US) < 0.2)
            taken.append((kept, _util(p, activity), ~p.failed, p.owner.copy()))
            probe = (p.load(activity, ch.p_scale, ch.hg), _util(p, activity))
    # Every load's per chip views are the chips as they were: a chip a job held then still
    # shows its activity after the job ended, a chip that failed since still counts as powered.
    for view, util, alive, owner in reversed(taken):
        chips = np.arange(0, N, 3, dtype=np.int64)
        # Every chip whose owner or power differs from then is among those it names changed.
        moved = view.changed()
        assert moved is not None
        differs = (owner != p.owner) | (alive == p.failed)
        assert np.isin(np.flatnonzero(differs), moved).all()
        np.testing.assert_array_equal(view.util_at(chips), util[chips])
        np.testing.assert_array_equal(view.util, util)
        np.testing.assert_array_equal(view.alive, alive)
        np.testing.assert_array_equal(view.dead, np.flatnonzero(~alive))


def test_segments_stay_consistent_with_the_owners_over_many_cycles() -> None:
    """Hundreds of gangs placed and released as the scheduler places them, with failures and
    repairs between: the segments kept step by step equal a rebuild from the owners, and a job
    on a whole UltraServer is one segment there."""
    ch = _chips(3)
    rng = np.random.default_rng(11)
    p = ChipPool(ch.topo)
    slot = 0
    for step in range(600):
        for _ in range(int(rng.integers(0, 3))):
            placed = scheduler.place(p.free, p.us_free, int(rng.choice([1, 4, 8, 16, 32])), CPU)
            if placed is not None:
                p.allocate(slot, placed[0])
                slot += 1
        if p.placement and rng.random() < 0.6:
            jobs = sorted(p.placement)
            p.release([jobs[int(rng.integers(len(jobs)))]])
        if rng.random() < 0.05:
            for j in p.fail(rng.integers(0, N, 2), -1):
                p.release([j])
        if rng.random() < 0.05:
            p.repair(np.flatnonzero(p.hw_failed)[:1])
        seg = p.load(np.ones(slot + 1), ch.p_scale, ch.hg).seg
        assert seg is not None
        if step % 50 == 0 or step == 599:
            check_segments(p, seg, ch.p_scale, ch.hg)
            powered = np.flatnonzero(~p.failed)
            fresh = Segments.of(powered, p.owner[powered], CPU, ch.p_scale, ch.hg)
            np.testing.assert_array_equal(seg.ints, fresh.ints)
            np.testing.assert_array_equal(seg.vals, fresh.vals)
    whole = p.allocate  # a gang on one whole, healthy, free UltraServer is one segment there
    free_us = np.flatnonzero(p.us_free == CPU)
    if len(free_us):
        u = int(free_us[0])
        whole(slot, np.arange(u * CPU, (u + 1) * CPU, dtype=np.int64))
        seg = p.load(np.ones(slot + 1), ch.p_scale, ch.hg).seg
        assert seg is not None
        assert int((seg.us == u).sum()) == 1 and seg.n[seg.us == u][0] == CPU


def test_busy_chips_and_power_of_a_running_hall_match_its_chips() -> None:
    """A hall stepping with arrivals, services and failures: the busy chips it records (from the
    segments) are the chips held by a job with activity, and each UltraServer's chip power and
    hottest junction are its chips' (built per chip when asked)."""
    sim = Hall(small_params(ultraservers=4, failures=FailureParams(chip_hazard_per_h=2e-3)))
    for _ in range(6):
        f = sim.advance(20)
        ph = sim.pool._ph
        assert ph is not None and ph.pw.by_segment
        busy = (sim.pool.chip_activity > 0) & (sim.pool.chip_owner >= 0)
        assert int(f["factory_ts"]["chips_busy"][-1]) == int(busy.sum())
        np.testing.assert_allclose(sim.pool.chip_power.reshape(4, -1).sum(axis=1), ph.us_chip_w, rtol=1e-12)
        np.testing.assert_allclose(sim.pool.chip_tj.reshape(4, -1).max(axis=1), ph.us_tj_max, rtol=1e-12)


def test_busy_chips_per_ultraserver_from_the_segments_equal_the_chip_by_chip_count() -> None:
    """The busy chips of each UltraServer the step record counts from the load's segments (held
    by a job still, with work above 0) equal the count chip by chip, step after step while jobs
    start and end (some after the physics read their chips) and chips fail and are repaired."""
    from twin.spec.params import TrainingParams

    sim = Hall(
        small_params(
            ultraservers=3,
            failures=FailureParams(chip_hazard_per_h=2e-3),
            training=TrainingParams(arrivals_per_day=400.0),
        )
    )
    pool, ended = sim.pool, 0
    for _ in range(120):
        sim.advance(1)
        ph = pool._ph
        assert ph is not None and ph.pw.by_segment
        owner = pool.chip_owner
        got = ph.us_busy(owner)
        want = ((ph.act_chip > 0) & (owner >= 0)).reshape(len(got), -1).sum(axis=1)
        np.testing.assert_array_equal(got, want)
        ended += pool._released
    assert ended > 3  # jobs did end after the physics read their chips


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_replacing_the_marked_ultraservers_segments_equals_a_rebuild(seed: int) -> None:
    """``Segments.replaced``: the segments of a hall whose marked UltraServers changed (owners,
    failures; an UltraServer may lose or regain every chip, the first and the last among them)
    equal the segments built afresh from every chip."""
    rng = np.random.default_rng(seed)
    nus, c = 9, 8
    g, hg = 1 + rng.random(nus * c), 1 + rng.random(nus * c)

    def segs(owner: np.ndarray, failed: np.ndarray, us: np.ndarray) -> Segments:
        chips = (us[:, None] * c + np.arange(c)).ravel()
        chips = chips[~failed[chips]]
        return Segments.of(chips, owner[chips], c, g, hg)

    owner = rng.integers(-1, 4, nus * c).astype(np.int32)
    failed = rng.random(nus * c) < 0.1
    failed[rng.integers(0, nus) * c + np.arange(c)] = True  # an UltraServer with no powered chip
    every = np.arange(nus)
    old = segs(owner, failed, every)
    marked = np.flatnonzero(rng.random(nus) < 0.4)
    for u in marked.tolist():
        at = slice(u * c, (u + 1) * c)
        owner[at] = rng.integers(-1, 6, c)
        failed[at] = rng.random(c) < (1.0 if rng.random() < 0.2 else 0.15)
    new = segs(owner, failed, marked)
    fresh = segs(owner, failed, every)
    # Both ways of putting the runs in place (run by run for a few, one gather for many).
    lo, hi = np.searchsorted(old.us, marked), np.searchsorted(old.us, marked, side="right")
    at = np.searchsorted(new.us, marked)
    for got in (old.replaced(marked, new), old._spliced(new, lo, hi, at), old._gathered(new, lo, hi, at)):
        np.testing.assert_array_equal(got.ints, fresh.ints)
        np.testing.assert_array_equal(got.vals, fresh.vals)
