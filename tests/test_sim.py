"""Whole-model properties: conservation laws, bounds, determinism."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import small_params
from twin.compose.hall import Hall
from twin.spec import catalog
from twin.spec.params import FailureParams, ScheduledEvent, SiteParams, TrainingParams
from twin.work.jobs import FINETUNE, PRETRAIN


def _run(p, steps):  # type: ignore[no-untyped-def]
    sim = Hall(p)
    return sim, sim.advance(steps)


@given(
    ultraservers=st.integers(1, 4),
    dt_s=st.sampled_from([10, 60, 300, 900]),
    tdp=st.floats(600, 1200),
    arrivals=st.floats(0, 400),
    seed=st.integers(0, 10_000),
    hazard=st.sampled_from([0.0, 2e-5, 5e-3]),
)
@settings(max_examples=25, deadline=None)
def test_invariants_hold_every_step(
    ultraservers: int, dt_s: int, tdp: float, arrivals: float, seed: int, hazard: float
) -> None:
    p = small_params(
        ultraservers=ultraservers,
        seed=seed,
        dt_s=dt_s,
        training=TrainingParams(arrivals_per_day=arrivals),
        failures=FailureParams(chip_hazard_per_h=hazard),
    )
    hall = dataclasses.replace(p.hall, accelerator=catalog.accelerator("trainium3", {"tdp_w": tdp}))
    p = dataclasses.replace(p, hall=hall)
    sim, fr = _run(p, 200)
    f = fr["factory_ts"]
    # Energy balance closes every step; PUE >= 1.
    np.testing.assert_allclose(
        f["facility_power_w"], f["it_power_w"] + f["cooling_power_w"] + f["power_loss_w"], rtol=1e-12
    )
    assert (f["pue"] >= 1.0).all()
    np.testing.assert_allclose(f["pue"], f["facility_power_w"] / f["it_power_w"], rtol=1e-12)
    # Chip accounting.
    assert (f["chips_busy"] <= f["chips_allocated"]).all()
    assert (f["chips_allocated"] + f["chips_failed"] <= f["chips_total"]).all()
    assert (f["activity"] >= 0).all() and (f["activity"] <= 1).all()
    # Per-UltraServer power sums to the factory IT power.
    u = fr["ultraserver_ts"]
    per_step = u["power_w"].reshape(200, ultraservers).sum(axis=1)
    np.testing.assert_allclose(per_step, f["it_power_w"], rtol=1e-9)
    # Chips never in two jobs: allocated chips equal the chips of running jobs.
    a = sim.jobs.a
    running = a["state"][: sim.jobs.n] == 1
    assert int(a["chips"][: sim.jobs.n][running].sum()) == int((sim.pool.chip_owner >= 0).sum())
    assert not (sim.pool.chip_failed & (sim.pool.chip_owner >= 0)).any()
    # IT power bounded by idle and full-load design power.
    assert (
        f["it_power_w"] <= sim.pool.facility.plant_design.design_it_w / p.power.psu_efficiency * 1.01
    ).all()
    # Every request is served, queued or dropped (cumulatively, in whole requests).
    assert (f["requests_dropped_per_s"] >= 0).all()
    s = fr["service_ts"]
    arrived = np.cumsum(s["requests_arrived"])
    np.testing.assert_array_equal(
        arrived, np.cumsum(s["requests_served"] + s["requests_dropped"]) + s["requests_queued"]
    )


def test_training_flop_delivered_equals_the_sum_over_jobs() -> None:
    p = small_params(
        ultraservers=2,
        training=TrainingParams(arrivals_per_day=300),
        failures=FailureParams(chip_hazard_per_h=2e-3),
    )
    sim, fr = _run(p, 2000)
    f = fr["factory_ts"]
    delivered = float((f["job_flops"] * p.dt_s).sum())
    a = sim.jobs.a
    n = sim.jobs.n
    assert a["lost"][:n].sum() > 0  # failures did roll work back
    assert delivered == pytest.approx(float(a["done"][:n].sum() + a["lost"][:n].sum()), rel=1e-9)
    # Training FLOP (pre-training and fine-tuning) is the same sum over those classes only.
    train = np.isin(a["kind"][:n], (PRETRAIN, FINETUNE))
    assert float((f["training_flops"] * p.dt_s).sum()) == pytest.approx(
        float(a["done"][:n][train].sum() + a["lost"][:n][train].sum()), rel=1e-9
    )


def test_same_seed_gives_identical_telemetry_and_another_seed_does_not() -> None:
    p = small_params(
        ultraservers=2,
        training=TrainingParams(arrivals_per_day=200),
        failures=FailureParams(chip_hazard_per_h=1e-3),
    )
    _, a = _run(p, 500)
    _, b = _run(p, 500)
    for table in ("factory_ts", "ultraserver_ts"):
        for col in a[table]:
            np.testing.assert_array_equal(a[table][col], b[table][col], err_msg=f"{table}.{col}")
    for k in a["events"]:
        assert list(a["events"][k]) == list(b["events"][k]), k
    _, c = _run(dataclasses.replace(p, seed=p.seed + 1), 500)
    assert not np.array_equal(a["factory_ts"]["outdoor_temp_c"], c["factory_ts"]["outdoor_temp_c"])


def test_advance_in_chunks_equals_advance_at_once() -> None:
    p = small_params(ultraservers=2, training=TrainingParams(arrivals_per_day=200))
    _, whole = _run(p, 300)
    sim = Hall(p)
    parts = [sim.advance(n) for n in (1, 99, 150, 50)]
    for col in whole["factory_ts"]:
        joined = np.concatenate([x["factory_ts"][col] for x in parts])
        np.testing.assert_array_equal(joined, whole["factory_ts"][col], err_msg=col)


def test_injected_event_equals_the_same_event_scheduled() -> None:
    """A live what-if replayed headlessly from its recorded time gives identical telemetry."""
    p = small_params(ultraservers=2, training=TrainingParams(arrivals_per_day=200))
    live = Hall(p)
    first = live.advance(100)
    ev = live.inject("fail_ultraserver", "1", duration_s=3600)
    second = live.advance(200)
    replay = Hall(dataclasses.replace(p, events=(dataclasses.replace(ev),)))
    again = replay.advance(300)
    for col in again["factory_ts"]:
        joined = np.concatenate([first["factory_ts"][col], second["factory_ts"][col]])
        np.testing.assert_array_equal(joined, again["factory_ts"][col], err_msg=col)
    assert "fail_ultraserver" in second["events"]["kind"]


def test_failing_an_ultraserver_takes_its_chips_and_power_down_until_repair() -> None:
    ev = ScheduledEvent(time_s=600, kind="fail_ultraserver", target="0", duration_s=1800)
    p = small_params(ultraservers=2, events=(ev,), failures=FailureParams(chip_hazard_per_h=0.0))
    _, fr = _run(p, 60)
    f = fr["factory_ts"]
    t = f["time_s"]
    during = (t >= 600) & (t < 2400)
    assert (f["chips_failed"][during] == 144).all()
    assert (f["chips_failed"][t >= 2400] == 0).all()
    u = fr["ultraserver_ts"]
    us0 = u["power_w"][u["ultraserver_id"] == 0]
    # Hosts and switches still draw power; chips draw none.
    assert us0[during].max() < us0[t < 600].min()


def test_unknown_event_kind_and_bad_target_are_refused() -> None:
    sim = Hall(small_params())
    with pytest.raises(ValueError, match="unknown event kind"):
        sim.inject("explode", "0")
    sim.inject("fail_ultraserver", "9")
    with pytest.raises(ValueError, match="out of range"):
        sim.advance(1)


def test_loop_temperature_follows_the_time_constant_after_a_load_step() -> None:
    """After the UltraServer goes idle -> busy, its rack-loop return approaches the new steady
    state T_supply + Q / (m c_p) as 1 - exp(-t / tau) with tau = M c_p / (m c_p) = M / m."""
    p = small_params(
        ultraservers=1,
        training=TrainingParams(arrivals_per_day=0.0),
        services=(),
        failures=FailureParams(chip_hazard_per_h=0.0),
        dt_s=10,
    )
    sim = Hall(p)
    fac = sim.pool.facility
    sim.advance(200)  # settle at idle
    t_idle = float(fac.racks.return_c[0])
    j = sim.jobs.add("x", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e24, submit=sim.t_s)
    sim.pool.queue.append(j)
    sim.advance(1)  # job starts; this step's heat is the busy heat
    busy_heat = sim.sys.liquid_fraction * float(sim.last["it_power_w"])
    speed = min(max(busy_heat / fac.racks.liquid_design_w, 0.3), 1.0)
    m = fac.design.us_design_flow_kg_s * speed
    supply = p.cooling.supply_setpoint_c  # the facility water holds its setpoint here
    t_ss = supply + busy_heat / (m * 4180.0)
    tau = fac.design.us_loop_mass_kg / m
    t1 = float(fac.racks.return_c[0])
    n = int(tau // p.dt_s)
    sim.advance(n)
    expected = t_ss + (t1 - t_ss) * np.exp(-n * p.dt_s / tau)
    assert float(fac.racks.return_c[0]) == pytest.approx(expected, abs=1e-6)
    assert t_idle < t1 < float(fac.racks.return_c[0]) < t_ss
    # Hand check of the heat balance: a 10 K design rise at 1.5 L/min/kW (facts §8.5).
    assert t_ss - supply == pytest.approx(busy_heat / (m * 4180.0))


def test_pue_is_in_the_direct_liquid_cooling_band_and_higher_when_hot() -> None:
    base = small_params(ultraservers=4, training=TrainingParams(arrivals_per_day=400))
    temperate = _run(base, 1440)[1]["factory_ts"]
    hot = _run(dataclasses.replace(base, site=SiteParams(mean_temp_c=30.0)), 1440)[1]["factory_ts"]
    pue_t = temperate["energy_j"].sum() / (temperate["it_power_w"] * base.dt_s).sum()
    pue_h = hot["energy_j"].sum() / (hot["it_power_w"] * base.dt_s).sum()
    assert 1.08 <= pue_t <= 1.25  # facts §8.2: DLC AI hall 1.10-1.25
    assert pue_h > pue_t
