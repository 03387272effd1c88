"""Failures: the count of a long run against the Poisson band of the hazard, the cause mix, blast
radius, restart from the last checkpoint with its restart cost, goodput, injection."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tests.conftest import small_params
from twin.compose.hall import Hall
from twin.spec.models import MODELS
from twin.spec.params import FAILURE_CAUSES, FailureCause, FailureParams, ScheduledEvent, TrainingParams
from twin.work import fabric, failures
from twin.work.jobs import PRETRAIN, QUEUED, RESTART_ACTIVITY, RUNNING

# Rates are chips x peak x the plan's MFU (twin.work.fabric); checkpoint writes take no time here
# (their cost: test_parallelism.py).
NO_WORK = dict(training=TrainingParams(arrivals_per_day=0.0, checkpoint_bytes_per_param=0.0), services=())
Z_999 = 3.2905  # two-sided 99.9 % normal quantile


def _rate(sim: Hall, chips: int, model: str = "llama-3.1-70b") -> float:
    """FLOP/s of a gang on its ideal placement: chips x peak x the plan's MFU (twin.work.fabric;
    checked against published figures in test_parallelism.py)."""
    m = MODELS[model]
    sysm, peak = sim.p.hall.system, sim.pool.acc.peak("fp8")
    spanned = -(-chips // sysm.chips)
    return chips * peak * fabric.job_mfu(m, 6.0, chips, spanned, peak, m.mfu, sysm, sim.p.training)


def test_default_hazard_is_the_llama3_405b_rate() -> None:
    # 419 unexpected interruptions on 16,384 GPUs in 54 days (facts §9.4).
    assert FailureParams().chip_hazard_per_h == pytest.approx(419 / (16384 * 54 * 24), rel=0.02)
    total = sum(FailureParams().cause(c).weight for c in FAILURE_CAUSES)
    assert total == 419


def test_failure_count_of_a_long_run_is_within_the_poisson_band() -> None:
    """30 days of 4 UltraServers at 150x the default hazard (so the count is large): the number
    of failures is Poisson with mean sum_steps(chips in service x hazard x dt). Chips in service
    are read from the telemetry at the end of the previous step (repairs falling due at a step's
    start are missed: well under 1 % of the band)."""
    hazard = 3.0e-3
    p = small_params(ultraservers=4, dt_s=300, failures=FailureParams(chip_hazard_per_h=hazard), **NO_WORK)
    sim = Hall(p)
    frames = [sim.advance(8640 // 2) for _ in range(2)]
    f = {k: np.concatenate([fr["factory_ts"][k] for fr in frames]) for k in ("chips_total", "chips_failed")}
    rows = [fr["failures"] for fr in frames]
    count = sum(int((np.asarray(r["source"]) == "model").sum()) for r in rows)
    in_service = f["chips_total"] - f["chips_failed"]  # at the end of each step: the next step's
    mu = float(np.concatenate([[p.hall.ultraservers * 144], in_service[:-1]]).sum()) * hazard * p.dt_s / 3600
    assert mu > 1000
    assert abs(count - mu) < Z_999 * math.sqrt(mu), (count, mu)
    # factory_ts counts the same failures step by step.
    assert sum(int(fr["factory_ts"]["failures"].sum()) for fr in frames) == count


def test_cause_mix_follows_the_llama3_counts() -> None:
    table = failures.cause_table(FailureParams())
    rng = np.random.default_rng(5)
    d = failures.draw(np.zeros(0, dtype=np.int64), 100_000, 20_000, table, 0.5, rng)
    share = np.bincount(d.cause, minlength=5) / 20_000
    expect = np.array([196, 72, 49, 48, 54]) / 419
    assert np.abs(share - expect).max() < Z_999 * np.sqrt(expect * (1 - expect) / 20_000).max()
    # Repair times: log-normal around each cause's mean (software needs none).
    rep = d.repair_s.astype(float)
    for ci, name in enumerate(FAILURE_CAUSES):
        mean_h = FailureParams().cause(name).repair_h
        sel = rep[d.cause == ci]
        if mean_h == 0:
            assert (sel == 0).all()
        else:
            assert sel.mean() / 3600 == pytest.approx(mean_h, rel=0.05)


def _job(sim: Hall, chips: int, hours: float, ckpt_s: int = 1800) -> int:
    rate = _rate(sim, chips)
    j = sim.jobs.add(
        "llama-3.1-70b",
        "fp8",
        kind=PRETRAIN,
        chips=chips,
        params=70e9,
        work=rate * hours * 3600,
        submit=sim.t_s,
        queued_since=sim.t_s,
        est=hours * 3600,
        nominal=hours * 3600,
        ckpt_every=ckpt_s,
        preemptible=True,
    )
    sim.pool.cluster._enqueue(j)
    return j


def test_server_failure_interrupts_every_job_on_it_and_only_those() -> None:
    sim = Hall(small_params(ultraservers=1, failures=FailureParams(chip_hazard_per_h=0.0), **NO_WORK))
    a = sim.jobs.a
    jobs = [_job(sim, 2, 5.0) for _ in range(3)]  # chips 0-1 and 2-3 (server 0), 4-5 (server 1)
    sim.advance(5)
    assert [sim.pool.cluster.placement[j].tolist() for j in jobs] == [[0, 1], [2, 3], [4, 5]]
    sim.inject("fail_server", "0", duration_s=3600)
    fr = sim.advance(1)
    assert a["failures"][jobs[0]] == a["failures"][jobs[1]] == 1 and a["failures"][jobs[2]] == 0
    row = {k: fr["failures"][k][0] for k in fr["failures"]}
    assert (row["level"], row["target_id"], row["chips_down"], row["jobs_interrupted"]) == ("server", 0, 4, 2)
    assert row["source"] == "operator" and row["cause"] == "injected"
    assert sim.pool.chip_failed[:4].all() and not sim.pool.chip_failed[4:].any()
    # The two jobs restart elsewhere on the UltraServer at once.
    assert a["state"][jobs[0]] == RUNNING and not set(sim.pool.cluster.placement[jobs[0]].tolist()) & {
        0,
        1,
        2,
        3,
    }


@pytest.mark.parametrize(("cause", "down"), [("host", 4), ("hbm", 1), ("software", 0)])
def test_blast_radius_of_each_cause(cause: str, down: int) -> None:
    only = {
        c: FailureCause(1.0 if c == cause else 0.0, 2.0, FailureParams().cause(c).blast)
        for c in FAILURE_CAUSES
    }
    p = small_params(ultraservers=1, failures=FailureParams(chip_hazard_per_h=0.05, **only), **NO_WORK)
    sim = Hall(p)
    for _ in range(36):
        _job(sim, 4, 50.0)  # 36 four-chip jobs fill the UltraServer, one per server
    fr = sim.advance(60)
    f = fr["failures"]
    assert len(f["cause"]) > 2 and set(f["cause"]) == {cause}
    assert (f["chips_down"] == down).all()
    # Every failure here hits a busy server or chip: exactly one job each (one job per server).
    assert (f["jobs_interrupted"] == 1).all()
    assert fr["factory_ts"]["chips_failed"].max() >= (down if down else 0)


def test_restart_from_checkpoint_with_restart_cost_and_goodput_by_hand() -> None:
    """One 144-chip job of 4 h on a 2-UltraServer hall, checkpoints every 30 min, restart cost
    10 min. Its UltraServer fails at 1 h 45 min: the 15 min since the 1 h 30 checkpoint are lost,
    it restarts at once on the other UltraServer, spends 10 min reloading, then finishes the 2 h
    30 min left. End = 1:45 + 0:10 + 2:30 = 4:25."""
    ev = ScheduledEvent(time_s=6300, kind="fail_ultraserver", target="0", duration_s=8 * 3600)
    p = small_params(ultraservers=2, failures=FailureParams(chip_hazard_per_h=0.0), events=(ev,), **NO_WORK)
    sim = Hall(p)
    j = _job(sim, 144, 4.0)
    fr = sim.advance(5 * 60)
    a = sim.jobs.a
    rate = _rate(sim, 144)
    assert a["state"][j] == 2 and a["end"][j] == 6300 + 600 + 9000
    assert a["lost"][j] == pytest.approx(rate * 900)
    assert a["lost_s"][j] == 900 and a["restarts"][j] == 1
    assert a["done"][j] == pytest.approx(rate * 4 * 3600)
    rows = fr["jobs"]
    k = list(rows["job_id"]).index(j)
    assert rows["run_s"][k] == 6300 + 600 + 9000  # chip time held
    assert rows["effective_s"][k] == 4 * 3600  # progress kept = the nominal run
    goodput = rows["effective_s"][k] / rows["run_s"][k]
    assert goodput == pytest.approx(14400 / 15900)
    ir = fr["interruptions"]
    assert list(ir["reason"]) == ["failure"] and ir["lost_s"][0] == 900
    # The restart: no progress and low activity for restart_cost_s after the second start.
    assert fr["factory_ts"]["training_flops"][6300 // 60 + 1] == 0.0
    assert fr["factory_ts"]["training_flops"][(6300 + 600) // 60 + 1] == pytest.approx(rate)


def test_job_on_failed_hardware_waits_for_repair_when_nothing_else_fits() -> None:
    ev = ScheduledEvent(time_s=600, kind="fail_chip", target="5", duration_s=1800)
    p = small_params(ultraservers=1, failures=FailureParams(chip_hazard_per_h=0.0), events=(ev,), **NO_WORK)
    sim = Hall(p)
    j = _job(sim, 144, 2.0)
    sim.advance(11)
    assert sim.jobs.a["state"][j] == QUEUED  # 143 chips left: a 144-chip gang cannot start
    sim.advance(30)
    assert sim.jobs.a["state"][j] == RUNNING  # repaired at 2,400 s
    assert sim.jobs.a["start"][j] == 2400


def test_same_seed_same_failures_and_interruptions() -> None:
    p = small_params(
        ultraservers=2,
        failures=FailureParams(chip_hazard_per_h=5e-3),
        training=TrainingParams(arrivals_per_day=2000.0),
    )
    a, b = Hall(p).advance(600), Hall(p).advance(600)
    for table in ("failures", "interruptions", "jobs", "service_ts"):
        for col in a[table]:
            if isinstance(a[table][col], list):
                assert a[table][col] == b[table][col], f"{table}.{col}"
            else:
                np.testing.assert_array_equal(a[table][col], b[table][col], err_msg=f"{table}.{col}")
    assert len(a["failures"]["cause"]) > 0
    c = Hall(dataclasses.replace(p, seed=p.seed + 1)).advance(600)
    assert list(a["failures"]["target_id"]) != list(c["failures"]["target_id"])


def test_thermal_recovery_does_not_repair_broken_hardware() -> None:
    sim = Hall(small_params(ultraservers=1, failures=FailureParams(chip_hazard_per_h=0.0), **NO_WORK))
    cl = sim.pool.cluster
    chips = np.arange(8)
    cl.fail_chips(chips[:2], 3600, "hbm", 0)  # hardware: back at 1 h
    cl.fail_chips(chips, -1, "thermal", 0)  # the UltraServer trips
    cl.recover_thermal(chips)  # ... and cools down
    assert sim.pool.chip_failed[:2].all() and not sim.pool.chip_failed[2:8].any()
    assert cl.n_free == 144 - 2
    # A later fault never shortens a pending repair; the repair clears it.
    cl.fail_chips(chips[:1], 1800, "network", 0)
    assert sim.pool.chip_repair_at[0] == 3600
    cl.repair_chips(chips[:2])
    assert not sim.pool.chip_failed.any() and cl.n_free == 144


def test_failures_strike_the_chip_a_choice_among_those_in_service_picks() -> None:
    """``failures.draw`` from the chips out of service picks, draw for draw, the chips a choice
    among the list of chips in service picks with the same stream; never one out of service."""
    table = failures.cause_table(FailureParams())
    for seed in range(40):
        gen = np.random.default_rng(seed)
        n = int(gen.integers(1, 5000))
        out = np.flatnonzero(gen.random(n) < gen.choice([0.0, 0.01, 0.5, 0.99]))
        alive = np.setdiff1d(np.arange(n), out)
        k = int(gen.integers(0, n + 2))
        d = failures.draw(out, n, k, table, 0.5, np.random.default_rng(seed))
        want = np.random.default_rng(seed).choice(alive, size=min(k, len(alive)), replace=False)
        assert d.chips.tolist() == want.tolist()
        assert not np.isin(d.chips, out).any()


def test_gangs_run_at_restart_activity_until_their_restart_ends_then_at_their_training_activity() -> None:
    """Every step, every running batch gang's activity is ``RESTART_ACTIVITY`` while the step
    begins before its restart ends, else its training activity (the plan's), whether or not
    other gangs restart: on a busy hall with frequent failures (restarts of 10 min, steps of
    1 min), step after step."""
    p = small_params(
        ultraservers=3,
        training=TrainingParams(arrivals_per_day=3000.0),
        failures=FailureParams(chip_hazard_per_h=0.05),
    )
    sim = Hall(p)
    cl = sim.pool.cluster
    a = cl.jobs.a
    seen_restart = seen_done = 0
    for _ in range(240):
        t = sim.t_s  # the step's start: its activities are set for it
        sim.advance(1)
        run = np.fromiter(cl.running, dtype=np.int64)
        train = a["train_activity"][run]
        restarting = t < a["restart_until"][run]
        want = np.where(restarting, RESTART_ACTIVITY, train)
        np.testing.assert_array_equal(a["activity"][run], want)
        seen_restart += int(restarting.sum())
        seen_done += int(((~restarting) & (a["restarts"][run] > 0)).sum())
    assert seen_restart > 0 and seen_done > 0  # both cases met
