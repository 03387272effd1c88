"""Scheduling: gang placement, EASY backfill, priority preemption, drains, fragmentation, Little's
law on the queue, and the backfill-vs-FIFO built-in scenario."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from scenarios.spec import load
from tests.conftest import job_history, small_params
from twin.compose.hall import Hall
from twin.spec.models import MODELS
from twin.spec.params import FailureParams, ScheduledEvent, SchedulerParams, TrainingParams
from twin.work import arrivals, fabric, queueing, queues, scheduler
from twin.work.jobs import DONE, EVAL, PRETRAIN, QUEUED, RUNNING, STOPPED

# Rates are chips x peak x the plan's MFU (twin.work.fabric); checkpoint writes take no time here
# (their cost: test_parallelism.py).
QUIET = dict(
    training=TrainingParams(arrivals_per_day=0.0, checkpoint_bytes_per_param=0.0),
    services=(),
    failures=FailureParams(chip_hazard_per_h=0.0),
)


def _rate(sim: Hall, chips: int, model: str = "llama-3.1-70b") -> float:
    """FLOP/s of a gang on its ideal placement: chips x peak x the plan's MFU (twin.work.fabric;
    checked against published figures in test_parallelism.py)."""
    m = MODELS[model]
    sysm, peak = sim.p.hall.system, sim.pool.acc.peak("fp8")
    spanned = -(-chips // sysm.chips)
    return chips * peak * fabric.job_mfu(m, 6.0, chips, spanned, peak, m.mfu, sysm, sim.p.training)


def _free(us_free: list[int], c: int = 144) -> tuple[np.ndarray, np.ndarray]:
    free = np.zeros(len(us_free) * c, dtype=bool)
    for u, k in enumerate(us_free):
        free[u * c + (c - k) : (u + 1) * c] = True  # the last k chips of each UltraServer
    return free, np.array(us_free, dtype=np.int64)


def test_gang_goes_to_the_fullest_ultraserver_that_holds_it() -> None:
    free, us = _free([144, 10, 50])
    chips, spanned = scheduler.place(free, us, 8, 144)  # type: ignore[misc]
    assert spanned == 1 and set(chips // 144) == {1} and len(chips) == 8
    chips, spanned = scheduler.place(free, us, 60, 144)  # type: ignore[misc]
    assert spanned == 1 and set(chips // 144) == {0}
    # Bigger than any free block: the fewest UltraServers, emptiest first.
    chips, spanned = scheduler.place(free, us, 180, 144)  # type: ignore[misc]
    assert spanned == 2 and set(chips // 144) == {0, 2} and len(set(chips.tolist())) == 180
    assert free[chips].all()
    assert scheduler.place(free, us, 205, 144) is None
    # The topology-blind baseline takes the lowest free chips: a small job breaks up the only
    # whole free UltraServer.
    chips, spanned = scheduler.place(free, us, 8, 144, "first_fit")  # type: ignore[misc]
    assert spanned == 1 and set(chips // 144) == {0} and free[chips].all()


def test_the_last_best_fit_holds_for_the_next_gang_of_its_size() -> None:
    """A run of gangs of one size placed with the hint (the UltraServer the last one went into)
    lands where a full best-fit search puts each, on random partly filled halls."""
    rng = np.random.default_rng(11)
    c = 16
    for _ in range(30):
        start = rng.integers(0, c + 1, 40).tolist()
        need = int(rng.integers(1, 7))
        free, us = _free(start, c)
        hinted = (free.copy(), us.copy())
        best = -1
        for _ in range(60):
            want = scheduler.place(free, us, need, c)
            got = scheduler.place(*hinted, need, c, best=best)
            if want is None:
                assert got is None
                break
            assert got is not None and np.array_equal(got[0], want[0]) and got[1] == want[1]
            for f, u in ((free, us), hinted):  # allocate, as the chip pool does
                f[want[0]] = False
                u -= np.bincount(want[0] // c, minlength=len(u))
            best = int(want[0][0]) // c if want[1] == 1 else -1


def _place_by_definition(free: np.ndarray, us: np.ndarray, need: int, c: int) -> tuple[list[int], int] | None:
    """Topology placement spelt out UltraServer by UltraServer: a gang that fits in one goes
    into the one with the fewest free chips that hold it (lowest index on ties), taking its
    lowest free chips; a bigger one (or one no UltraServer holds) takes whole free sets,
    UltraServers with the most free chips first (lowest index on ties), the last only the lowest
    chips it still needs."""
    if need > int(us.sum()):
        return None
    holds = [u for u in range(len(us)) if us[u] >= need]
    if need <= c and holds:
        u = min(holds, key=lambda v: (us[v], v))
        return [u * c + i for i in range(c) if free[u * c + i]][:need], 1
    chips: list[int] = []
    spanned = 0
    for u in sorted(range(len(us)), key=lambda v: (-us[v], v)):
        if len(chips) >= need:
            break
        chips += [u * c + i for i in range(c) if free[u * c + i]][: need - len(chips)]
        spanned += 1
    return chips, spanned


def test_placement_equals_its_definition_on_random_halls() -> None:
    """Best fit found from the count histogram (kept by the chip pool, or counted here) equals
    the placement spelt out UltraServer by UltraServer, on random halls with scattered free
    chips, whole free UltraServers and full ones, for gangs of every size."""
    rng = np.random.default_rng(5)
    c = 8
    for _ in range(300):
        n_us = int(rng.integers(1, 12))
        p_free = rng.choice([0.0, 0.3, 0.8, 1.0], size=n_us)
        free = (rng.random((n_us, c)) < p_free[:, None]).ravel()
        us = free.reshape(n_us, c).sum(axis=1).astype(np.int64)
        for need in range(1, n_us * c + 2):
            want = _place_by_definition(free, us, need, c)
            for hist in (None, np.bincount(us, minlength=c + 1)):
                got = scheduler.place(free, us, need, c, hist=hist)
                if want is None:
                    assert got is None
                else:
                    assert got is not None and got[0].tolist() == want[0] and got[1] == want[1]


def test_easy_reservation_by_hand() -> None:
    # 10 free; running jobs end at t=100 (20 chips), 50 (30), 200 (40). A 50-chip head can start
    # when the 50 and 100 jobs have ended: 10 + 30 + 20 = 60 chips, 10 to spare.
    shadow, extra = scheduler.reservation(0.0, 10, 50, np.array([100.0, 50.0, 200.0]), np.array([20, 30, 40]))
    assert (shadow, extra) == (100.0, 10)
    assert scheduler.reservation(0.0, 60, 50, np.array([100.0]), np.array([20])) == (0.0, 10)
    assert scheduler.reservation(0.0, 0, 500, np.array([100.0]), np.array([20]))[0] == float("inf")


def test_victims_are_lowest_priority_then_cheapest_and_no_more_than_needed() -> None:
    chips = np.array([64, 8, 8, 128])
    prio = np.array([0, 0, 1, 0])
    cost = np.array([5.0, 1.0, 0.1, 9.0])
    v = scheduler.victims(8, chips, prio, cost)
    assert v.tolist() == [1]  # priority 0 before 1, then the cheapest that is enough
    v = scheduler.victims(70, chips, prio, cost)
    assert sorted(v.tolist()) == [0, 1]
    assert len(scheduler.victims(1000, chips, prio, cost)) == 0


def test_fragmentation_counts_free_chips_outside_whole_ultraservers() -> None:
    assert scheduler.fragmentation(np.array([144, 144, 0]), 144) == 0.0
    assert scheduler.fragmentation(np.array([144, 72, 0]), 144) == pytest.approx(72 / 216)
    assert scheduler.fragmentation(np.array([0, 0]), 144) == 0.0


def _add(sim: Hall, chips: int, hours: float, kind: int = PRETRAIN, **kw: float) -> int:
    """A batch job whose run length on its ideal placement is ``hours``."""
    rate = _rate(sim, chips)
    j = sim.jobs.add(
        "llama-3.1-70b",
        "fp8",
        kind=kind,
        chips=chips,
        params=70e9,
        work=rate * hours * 3600,
        submit=sim.t_s,
        queued_since=sim.t_s,
        est=hours * 3600,
        nominal=hours * 3600,
        **kw,
    )
    sim.pool.cluster._enqueue(j)
    return j


@pytest.mark.parametrize("policy", ["fifo", "backfill", "priority"])
def test_no_chip_in_two_jobs_and_allocations_add_up(policy: str) -> None:
    p = small_params(
        ultraservers=3,
        training=TrainingParams(arrivals_per_day=3000.0),
        failures=FailureParams(chip_hazard_per_h=3e-3),
        scheduler=SchedulerParams(policy=policy),
    )
    sim = Hall(p)
    cl = sim.pool.cluster
    a = sim.jobs.a
    seen_failed = 0
    for _ in range(40):
        fr = sim.advance(15)
        f = fr["factory_ts"]
        owner = sim.pool.chip_owner
        running = np.flatnonzero(a["state"][: sim.jobs.n] == RUNNING)
        # Each running job owns exactly its gang; no chip is owned twice or owned while failed.
        assert sorted(cl.placement) == sorted(running.tolist())
        placed = np.concatenate([cl.placement[j] for j in running]) if len(running) else np.zeros(0, int)
        assert len(placed) == len(np.unique(placed)) == int((owner >= 0).sum())
        for j in running:
            assert (owner[cl.placement[j]] == j).all() and len(cl.placement[j]) == a["chips"][j]
        assert not (sim.pool.chip_failed & (owner >= 0)).any()
        # Free-chip bookkeeping equals a recount.
        recount = (owner < 0) & ~sim.pool.chip_failed
        assert (cl.pool.free == recount).all()
        np.testing.assert_array_equal(
            cl.pool.us_free, np.bincount(sim.topo.chip_us, weights=recount, minlength=3)
        )
        assert f["chips_free"][-1] == recount.sum()
        # The counts the model keeps as chips are placed, fail and come back, against a recount.
        assert f["chips_allocated"][-1] == int((owner >= 0).sum())
        u = fr["ultraserver_ts"]
        last = u["time_s"] == u["time_s"][-1]
        np.testing.assert_array_equal(
            u["chips_failed"][last], np.bincount(sim.topo.chip_us, weights=sim.chip_hw_failed, minlength=3)
        )
        assert f["chips_failed"][-1] == int(sim.chip_hw_failed.sum())
        seen_failed += int(sim.chip_hw_failed.sum())
        # Every queued job is in one queue once, and the batch queue stays in policy order (the
        # scheduler edits only the window it started jobs from).
        queued = np.flatnonzero(a["state"][: sim.jobs.n] == QUEUED)
        assert sorted(cl.queue + cl.rqueue) == sorted(queued.tolist())
        q = cl.queues
        assert q.keys == queues.keys(q, cl.jobs, q.queue) == sorted(q.keys)
        assert (f["chips_allocated"] + f["chips_free"] + f["chips_failed"] == f["chips_total"]).all()
    assert seen_failed  # failures and repairs happened: the kept counts followed them


def test_backfill_starts_a_short_job_in_the_gap_fifo_does_not() -> None:
    """One UltraServer; a 100-chip job runs for 2 h, a 144-chip job waits at the head. A 20-chip
    1-hour job behind it fits in the 44 free chips and ends before the head can start."""
    waits = {}
    for policy in ("fifo", "backfill"):
        sim = Hall(small_params(ultraservers=1, scheduler=SchedulerParams(policy=policy), **QUIET))
        _add(sim, 100, 2.0)
        head = _add(sim, 144, 1.0)
        small = _add(sim, 20, 1.0)
        long_small = _add(sim, 20, 5.0)  # would delay the head: not backfilled
        sim.advance(2)
        a = sim.jobs.a
        assert a["state"][head] == QUEUED and a["state"][long_small] == QUEUED
        waits[policy] = a["state"][small]
    assert waits == {"fifo": QUEUED, "backfill": RUNNING}


def test_priority_preempts_training_which_restarts_from_its_checkpoint() -> None:
    p = small_params(ultraservers=1, scheduler=SchedulerParams(policy="priority"), **QUIET)
    sim = Hall(p)
    a = sim.jobs.a
    train = _add(sim, 144, 10.0, kind=PRETRAIN, preemptible=True, ckpt_every=1800)
    sim.advance(45)  # 45 min: one checkpoint at 30 min
    done_at_ckpt = a["ckpt_done"][train]
    assert 0 < done_at_ckpt < a["done"][train]
    urgent = _add(sim, 8, 0.5, kind=EVAL, priority=5)
    fr = sim.advance(1)
    assert a["state"][urgent] == RUNNING and a["state"][train] == QUEUED
    assert a["done"][train] == done_at_ckpt and a["preemptions"][train] == 1
    # Lost: the work of the 15 minutes since the checkpoint at 30 min, at 144 x peak x MFU.
    assert a["lost"][train] == pytest.approx((45 * 60 - 1800) * _rate(sim, 144))
    ir = fr["interruptions"]
    assert list(ir["reason"]) == ["preemption"] and ir["by_job_id"][0] == urgent
    assert fr["factory_ts"]["preemptions"].sum() == 1
    # Under FIFO the same urgent job waits instead.
    sim2 = Hall(small_params(ultraservers=1, scheduler=SchedulerParams(policy="fifo"), **QUIET))
    t2 = _add(sim2, 144, 10.0, preemptible=True)
    sim2.advance(45)
    u2 = _add(sim2, 8, 0.5, kind=EVAL, priority=5)
    sim2.advance(1)
    assert sim2.jobs.a["state"][u2] == QUEUED and sim2.jobs.a["state"][t2] == RUNNING


def test_drain_evicts_after_grace_holds_maintenance_and_returns() -> None:
    ev = ScheduledEvent(time_s=600, kind="drain_ultraserver", target="0", value=0.5, duration_s=3600)
    sim = Hall(small_params(ultraservers=2, events=(ev,), **QUIET))
    a = sim.jobs.a
    j0 = _add(sim, 100, 10.0)  # fills UltraServer 0 (best fit)
    j1 = _add(sim, 100, 10.0)  # UltraServer 1
    fr = sim.advance(10)  # drain at 600 s: no new work on UltraServer 0
    assert set(np.unique(sim.topo.chip_us[sim.pool.cluster.placement[j0]])) == {0}
    j2 = _add(sim, 40, 1.0)  # fits on 0 by count, but 0 is draining: goes to 1
    fr = sim.advance(1)
    assert set(np.unique(sim.topo.chip_us[sim.pool.cluster.placement[j2]])) == {1}
    assert fr["factory_ts"]["chips_drained"][-1] == 44
    fr = sim.advance(30)  # grace 0.5 h after 600 s: j0 evicted at 2,400 s, maintenance starts
    assert a["state"][j0] == QUEUED and a["failures"][j0] == 1 and a["state"][j1] == RUNNING
    assert "maintenance_start" in fr["events"]["kind"]
    assert "drain" in list(fr["interruptions"]["reason"])
    fr = sim.advance(60)  # maintenance of 3,600 s ends; j0 comes back on UltraServer 0
    assert "maintenance_end" in fr["events"]["kind"]
    assert a["state"][j0] == RUNNING and fr["factory_ts"]["chips_drained"][-1] == 0


def test_live_drain_equals_the_same_drain_scheduled() -> None:
    p = small_params(ultraservers=2, training=TrainingParams(arrivals_per_day=1500.0))
    live = Hall(p)
    first = live.advance(90)
    ev = live.inject("drain_ultraserver", "1", value=0.25, duration_s=1800)
    second = live.advance(150)
    replay = Hall(dataclasses.replace(p, events=(ev,)))
    again = replay.advance(240)
    for table in ("factory_ts", "service_ts"):
        for col in again[table]:
            if isinstance(again[table][col], list):
                assert list(first[table][col]) + list(second[table][col]) == again[table][col]
                continue
            joined = np.concatenate([first[table][col], second[table][col]])
            np.testing.assert_array_equal(joined, again[table][col], err_msg=f"{table}.{col}")
    assert "drain_ultraserver" in second["events"]["kind"]


def test_littles_law_on_the_batch_queue() -> None:
    """L = lambda W from the telemetry of a long, busy run (FIFO, so the queue is long).

    Sample-path form: the time integral of the queue length equals the sum of every job's time
    in the queue exactly (both count whole steps). Classic form: L = lambda W with lambda the
    arrival rate and W the mean wait of the jobs that have started; the two differ only by the
    jobs still waiting at the end, whose share bounds the tolerance."""
    spec, _, _ = load("backfill-vs-fifo")
    fifo = next(v for v in spec.variants if v.name == "fifo")
    p = fifo.to_params()
    sim = Hall(p)
    frames = [sim.advance(1440) for _ in range(4)]
    q = np.concatenate([f["factory_ts"]["queue_jobs"] for f in frames])
    T = len(q) * p.dt_s
    jobs = job_history(frames)  # the recorded jobs table: waits up to the end for those still queued
    batch = jobs["kind"] != "inference"
    waits = jobs["wait_s"][batch]
    area = float(q.sum()) * p.dt_s
    assert area == pytest.approx(waits.sum(), rel=1e-12)
    L = area / T
    started = jobs["first_start_time_s"][batch] >= 0
    lam = batch.sum() / T
    W = waits[started].mean()
    tail = waits[~started].sum() / area  # share of the queue area from jobs still waiting
    assert L > 5  # a real queue
    assert lam * W == pytest.approx(L, rel=tail + 0.02)


def test_backfill_cuts_mean_wait_against_fifo_on_the_same_arrivals() -> None:
    spec, _, _ = load("backfill-vs-fifo")
    out = {}
    for v in spec.variants:
        sim = Hall(v.to_params())
        jobs = job_history([sim.advance(1440) for _ in range(3)])
        b = jobs["kind"] != "inference"
        out[v.name] = (
            jobs["submit_time_s"][b],
            jobs["chips"][b],
            jobs["work_flop"][b],
            jobs["wait_s"][b].mean(),
        )
    f, b = out["fifo"], out["backfill"]
    for k in range(3):  # the same jobs arrive at the same times
        np.testing.assert_array_equal(f[k], b[k])
    assert b[3] < 0.5 * f[3]


def test_jobs_table_keeps_the_placement_of_finished_jobs() -> None:
    sim = Hall(small_params(ultraservers=2, **QUIET))
    j = _add(sim, 200, 0.5)  # spans both UltraServers
    k = _add(sim, 20, 0.5)
    fr = sim.advance(40)
    rows = fr["jobs"]
    by_id = dict(zip(rows["job_id"].tolist(), rows["ultraservers"], strict=True))
    assert rows["state"][list(rows["job_id"]).index(j)] == "done"
    assert by_id[j] == "0,1" and by_id[k] in ("0", "1")
    assert rows["ultraservers_spanned"][list(rows["job_id"]).index(j)] == 2


def _busy_pair(ultraservers: int = 3) -> tuple[Hall, Hall]:
    """Two identical busy halls (same seed, same steps): jobs queued and running on scattered
    chips, one chip failed under a job."""
    p = small_params(
        ultraservers=ultraservers,
        training=TrainingParams(arrivals_per_day=3000.0),
        failures=FailureParams(chip_hazard_per_h=0.05),
    )
    halls = Hall(p), Hall(p)
    for h in halls:
        for _ in range(3):  # finished jobs' slots are freed an advance after they are recorded
            h.advance(30)
    return halls


def _same_work(a: Hall, b: Hall) -> None:
    ca, cb = a.pool.cluster, b.pool.cluster
    for f, col in ca.jobs.a.items():
        np.testing.assert_array_equal(col, cb.jobs.a[f], err_msg=f)
    for x, y in [
        (ca.pool.owner, cb.pool.owner),
        (ca.pool.free, cb.pool.free),
        (ca.pool.us_hist, cb.pool.us_hist),
    ]:
        np.testing.assert_array_equal(x, y)
    assert (ca.queue, ca.queues.keys, list(ca.running), ca.log.dirty) == (
        cb.queue,
        cb.queues.keys,
        list(cb.running),
        cb.log.dirty,
    )
    assert (ca.jobs.names, ca.n_free, ca.n_alloc) == (cb.jobs.names, cb.n_free, cb.n_alloc)


def test_jobs_finishing_together_equal_jobs_finishing_one_by_one() -> None:
    """``queueing.finish`` of the step's finished jobs at once leaves the job table, the chip
    pool, the running set and the events as finishing them one by one in the same order."""
    one, many = _busy_pair()
    js = list(one.pool.cluster.running)[::2]
    assert len(js) >= 3
    t = one.t_s
    ev_one: list = []
    for j in js:
        queueing.finish(one.pool.cluster, ev_one, [j], t)
    ev_many: list = []
    queueing.finish(many.pool.cluster, ev_many, js, t)
    assert ev_many == ev_one and [e[0] for e in ev_one] == ["job_end"] * len(js)
    _same_work(one, many)
    assert (one.jobs.a["state"][js] == DONE).all() and not set(js) & set(one.pool.cluster.placement)


def test_jobs_arriving_together_equal_jobs_arriving_one_by_one() -> None:
    """``arrivals.add_jobs`` of a step's arrivals at once leaves the job table and the queue as
    adding them one by one in the same order (evicted slots reused, then new ones)."""
    one, many = _busy_pair()
    cl = one.pool.cluster
    rng = np.random.default_rng(2)
    tp = cl.p.training
    rows = []
    for i in range(9):
        code = int(rng.choice([PRETRAIN, EVAL]))
        cls = queueing.job_class(cl.p, code)
        assert cls is not None
        work = float(rng.random() * 1e20) if i % 3 == 0 else math.nan
        rows.append(
            (code, cls, int(rng.integers(1, 300)), cls.models[0], 600.0 * (i + 1), work, i % 2 - 1, 0)
        )
    assert tp.arrivals_per_day > 0
    t = one.t_s
    got = [arrivals.add_jobs(cl, [r], t)[0] for r in rows]
    assert arrivals.add_jobs(many.pool.cluster, rows, t) == got
    _same_work(one, many)


def test_gangs_set_up_together_equal_gangs_set_up_one_by_one() -> None:
    """``queueing.begin`` of several placed gangs (batch jobs of several sizes, one restarting
    after an interruption, and a replica) leaves the job table, the running order, the chip
    pool and the events as setting each up right after its placement."""
    one, many = _busy_pair(ultraservers=8)
    t = one.t_s
    for h in (one, many):
        cl = h.pool.cluster
        victim = next(iter(cl.running))
        queueing.interrupt(cl, [], victim, t, "failure", "test")  # back in the queue, restarts
        for chips in (1, 4, 32, 144, 200):
            _add(h, chips, 2.0)
        replica = cl.replicas[0][0]
        queueing.stop_replica(cl, replica, t)  # stopped, then asked for again: it loads anew
        assert cl.jobs.a["state"][replica] == STOPPED
        queues.request_replica(cl.queues, cl.jobs, cl.log, replica, t)
    js = many.pool.cluster.queues.rqueue + many.pool.cluster.queue
    assert len(js) >= 6
    ev_one: list = []
    for j in js:
        placed: list = []
        assert queueing.claim(one.pool.cluster, j, placed)
        queueing.begin(one.pool.cluster, ev_one, placed, t)
    ev_many: list = []
    placed = []
    for j in js:
        assert queueing.claim(many.pool.cluster, j, placed)
    queueing.begin(many.pool.cluster, ev_many, placed, t)
    assert ev_many == ev_one and len(ev_one) == len(js) and not placed
    _same_work(one, many)
    assert (one.jobs.a["state"][js] == RUNNING).all()
