"""Facility physics end to end: capping, cooling failures, heat balances, water, climate."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import small_params
from twin.compose.hall import Hall
from twin.physics.facility import Facility
from twin.physics.itpower import it_power
from twin.spec.params import (
    CoolingParams,
    FailureParams,
    PowerChainParams,
    ScheduledEvent,
    SiteParams,
    TrainingParams,
)
from twin.work.chips import Load

CALM = SiteParams(weather_noise_k=0.0, diurnal_amplitude_k=0.0, seasonal_amplitude_k=0.0)


def busy_hall(**changes: object):  # type: ignore[no-untyped-def]
    """Two UltraServers, both fully busy with one long 288-chip job minus the two replicas:
    a steady, predictable load."""
    p = small_params(
        ultraservers=2,
        training=TrainingParams(arrivals_per_day=0.0),
        services=(),
        failures=FailureParams(chip_hazard_per_h=0.0),
        site=CALM,
    )
    p = dataclasses.replace(p, **changes)
    sim = Hall(p)
    for us in range(2):
        j = sim.jobs.add("x", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e25, submit=0)
        sim.pool.queue.append(j)
        del us
    return sim


def test_facility_cap_holds_power_and_throughput_falls_with_the_clock() -> None:
    free = busy_hall()
    f0 = free.advance(30)["factory_ts"]
    uncapped_fac = float(f0["facility_power_w"][-1])
    uncapped_flops = float(f0["training_flops"][-1])
    cap = 0.8 * uncapped_fac
    capped = busy_hall(events=(ScheduledEvent(time_s=0, kind="power_cap", target="facility", value=cap),))
    f = capped.advance(30)["factory_ts"]
    # The cap holds from the first step (within 0.5 %: it is converted to IT watts at the last
    # step's ratio of IT to facility power, the first step's at its own, and the plant lags).
    assert (f["facility_power_w"] <= cap * 1.005).all()
    assert f["facility_power_w"][-1] >= cap * 0.97  # and it does not throttle more than needed
    clock = float(f["mean_clock"][-1])
    assert 0.3 < clock < 1.0
    # Throughput follows the clock linearly; dynamic power follows clock^3.
    assert f["training_flops"][-1] == pytest.approx(uncapped_flops * clock, rel=1e-6)
    chip_idle = float(capped.pool.facility.chips.idle_chip.sum())  # g P_idle of the 288 chips
    dyn0 = float(f0["chip_power_w"][-1]) - chip_idle
    dyn1 = float(f["chip_power_w"][-1]) - chip_idle
    assert dyn1 == pytest.approx(dyn0 * clock**3, rel=1e-6)
    assert (f["throttled_chips"] == 288).all()


def test_a_cap_holds_inside_the_step_it_arrives_and_when_the_load_rises() -> None:
    """Caps bind inside a step: a cap that arrives mid-run holds on the step it arrives (the
    clocks were set for no cap), and a job starting under a binding cap does not push power
    over it on its first step (the clocks were set for the smaller load). The work of those
    steps is the work at the clocks the chips ran at. Tolerance: the cap is converted to IT
    watts at the last step's ratio of IT to facility power, which drifts by a fraction of a
    per cent while the plant follows the load."""
    free = busy_hall()
    f0 = free.advance(10)["factory_ts"]
    full_flops = float(f0["training_flops"][-1])
    sim = busy_hall()
    sim.advance(10)
    cap = 0.8 * float(f0["facility_power_w"][-1])
    sim.inject("power_cap", "facility", cap)
    f = sim.advance(5)["factory_ts"]
    assert (f["facility_power_w"] <= cap * 1.005).all()
    assert f["facility_power_w"][0] >= cap * 0.97  # and no slower than the cap needs
    clock = float(f["mean_clock"][0])
    assert clock < 0.95
    assert f["training_flops"][0] == pytest.approx(full_flops * clock, rel=1e-6)

    # One UltraServer busy under a cap that binds, then a second job takes the other one.
    half = busy_hall()
    half.pool.queue.pop()  # only the first job runs
    g0 = half.advance(10)["factory_ts"]
    cap = 0.9 * float(g0["facility_power_w"][-1])
    half.inject("power_cap", "facility", cap)
    half.advance(5)
    j = half.jobs.add("y", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e25, submit=half.t_s)
    half.pool.queue.append(j)
    g = half.advance(5)["factory_ts"]
    assert g["running_jobs"][0] == 2  # the second job runs from the first step
    assert (g["facility_power_w"] <= cap * 1.005).all()
    assert g["mean_clock"][0] < 0.9  # both jobs slowed inside the step they met


def test_shared_cap_targets_by_hand() -> None:
    """Two facilities under one cap of 120 IT watts: (IT, dynamic now, dynamic at full clock) =
    (100, 40, 40) and (60, 10, 10). Fixed power 60 + 50 = 110, dynamic 50 at full clock, so
    x = (120 - 110) / 50 = 0.2 of it stays: targets 60 + 8 = 68 and 50 + 2 = 52, which sum to
    the cap. A cap above the load leaves both at least at their IT power; one below the fixed
    power leaves them their fixed power (the lowest clock is the facilities' own floor)."""
    from twin.physics.capping import shared_targets

    assert shared_targets([(100, 40, 40), (60, 10, 10)], 120) == pytest.approx([68, 52])
    # Already throttled: the second facility runs at half its full-clock dynamic power.
    assert shared_targets([(100, 40, 40), (55, 5, 10)], 120) == pytest.approx([60 + 0.2 * 40, 50 + 0.2 * 10])
    roomy = shared_targets([(100, 40, 40), (60, 10, 10)], 500)
    assert roomy == pytest.approx([100, 60])
    assert shared_targets([(100, 40, 40), (60, 10, 10)], 50) == pytest.approx([60, 50])
    assert shared_targets([(80, 0, 0), (60, 0, 0)], 100) == pytest.approx([80, 60])  # all idle


def test_standing_cap_from_the_power_section() -> None:
    sim = busy_hall()
    sim.advance(10)
    base = sim.last["facility_power_w"]
    capped = busy_hall(power=PowerChainParams(facility_cap_w=0.9 * base))
    f = capped.advance(10)["factory_ts"]
    assert (f["facility_power_w"] <= 0.9 * base * 1.005).all()  # from the run's first step
    assert f["facility_cap_w"][-1] == pytest.approx(0.9 * base)


def test_a_cap_with_room_to_spare_changes_nothing_and_binds_when_the_load_reaches_it() -> None:
    """A facility cap 1 % above the uncapped peak: every recorded figure is the uncapped run's
    bit for bit (the capping code returns the shared full clock without touching a chip).
    Lowered to 1 % below the steady load, it binds from the step after it is crossed (the run's
    first step converts the cap at the plant's answer to that step's own load, which errs
    towards holding: it may slow down a little though it would not have crossed)."""
    free = busy_hall()
    f0 = free.advance(30)["factory_ts"]
    peak = float(f0["facility_power_w"].max())
    roomy = busy_hall(power=PowerChainParams(facility_cap_w=1.01 * peak))
    f1 = roomy.advance(30)["factory_ts"]
    assert roomy.pool.facility.clock is roomy.pool.facility.chips.ones  # the full-clock path, every step
    for k in f0:
        if k != "facility_cap_w":
            np.testing.assert_array_equal(f1[k], f0[k], err_msg=k)
    tight = busy_hall(power=PowerChainParams(facility_cap_w=0.99 * float(f0["facility_power_w"][-1])))
    f2 = tight.advance(30)["factory_ts"]
    over = np.flatnonzero(f2["facility_power_w"] > 0.99 * float(f0["facility_power_w"][-1]))
    assert len(over) and (f2["mean_clock"][over[0] + 1 :] < 1.0).all()
    assert (f2["mean_clock"][1 : over[0] + 1] == 1.0).all()
    assert (
        f2["facility_power_w"][0] <= 0.99 * float(f0["facility_power_w"][-1]) and f2["mean_clock"][0] > 0.99
    )


def test_ultraserver_it_power_is_the_sum_of_its_servers_by_hand() -> None:
    """Uneven work inside an UltraServer (random activity on some chips, whole servers idle):
    its IT power is the sum, server by server, of chip power, host power at that server's mean
    activity, switches and rectifier input (the model sums hosts per UltraServer)."""
    sim = busy_hall()
    fac, topo = sim.pool.facility, sim.topo
    sysm, acc, pp = sim.sys, sim.pool.acc, sim.p.power
    rng = np.random.default_rng(7)
    util = rng.random(topo.chips) * (rng.random(topo.chips) < 0.6)
    util[:8] = 0.0  # idle servers at the start of UltraServer 0
    alive = np.ones(topo.chips, dtype=bool)
    pw = fac._it_power(Load.of_chips(util, alive), None, fac.chips.ones, True)
    cps = topo.chips_per_server
    g_all = fac.chips.p_scale  # each chip's power factor (its fixed spread)
    for us in range(topo.ultraservers):
        dc = float(sysm.switch_w)
        for s in range(topo.servers_per_us):
            sl = slice((us * topo.servers_per_us + s) * cps, (us * topo.servers_per_us + s + 1) * cps)
            u, g = util[sl], g_all[sl]
            dc += float((g * (acc.idle_w + (acc.tdp_w - acc.idle_w) * u)).sum())
            dc += sysm.host_w_per_server * (
                sysm.host_idle_fraction + (1 - sysm.host_idle_fraction) * u.mean()
            )
        want = (dc + pp.psu_fixed_w_per_server * topo.servers_per_us) / pp.psu_efficiency
        assert pw.us_it[us] == pytest.approx(want, rel=1e-12)


def test_chip_power_on_demand_is_the_power_law_and_dead_chips_draw_nothing() -> None:
    """At full clock the model keeps only UltraServer sums; the per-chip power it builds when
    asked (samples, the live view, the services' share) is g (P_idle + (P_tdp - P_idle) u) (g:
    the chip's power factor), 0 on an unpowered chip, and its sums are the UltraServer chip
    power the step used."""
    from twin.physics import power

    sim = busy_hall()
    sim.advance(5)
    fac, topo, acc = sim.pool.facility, sim.topo, sim.pool.acc
    rng = np.random.default_rng(3)
    util = rng.random(topo.chips)
    alive = np.ones(topo.chips, dtype=bool)
    dead = np.array([5, 200], dtype=np.intp)
    alive[dead], util[dead] = False, 0.0
    pw = fac._it_power(Load.of_chips(util, alive), None, fac.chips.ones, True)
    assert pw.full_p is None  # nothing per chip built yet
    chips = np.array([0, 7, 150, 287], dtype=np.int64)
    g = fac.chips.p_scale
    want = power.chip_power_w(
        (acc.tdp_w - acc.idle_w) * util * g, acc.idle_w * g, np.ones(topo.chips), 3.0, alive
    )
    np.testing.assert_allclose(pw.chip_p_at(chips), want[chips], rtol=1e-14)
    np.testing.assert_allclose(pw.chip_p, want, rtol=1e-14)
    assert (pw.chip_p[dead] == 0).all()
    np.testing.assert_allclose(pw.chip_p.reshape(topo.ultraservers, -1).sum(axis=1), pw.us_chip_w, rtol=1e-12)
    np.testing.assert_array_equal(pw.chip_p_at(chips), pw.chip_p[chips])  # the same, built or not


def test_row_cap_throttles_only_its_row() -> None:
    p = small_params(
        ultraservers=4,
        training=TrainingParams(arrivals_per_day=0.0),
        services=(),
        failures=FailureParams(chip_hazard_per_h=0.0),
        site=CALM,
    )
    sim = Hall(dataclasses.replace(p, events=(ScheduledEvent(0, "power_cap", "row:1", 200e3),)))
    for _ in range(4):
        sim.pool.queue.append(sim.jobs.add("x", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e25))
    fr = sim.advance(20)
    u = fr["ultraserver_ts"]
    last = u["time_s"] == u["time_s"].max()
    row_power = np.bincount(u["row_id"][last], weights=u["power_w"][last])
    assert row_power[1] <= 200e3 * 1.01
    assert row_power[0] > 1.1 * 200e3  # row 0 runs free, well above the cap row 1 holds
    clocks = u["clock"][last]
    assert (clocks[u["row_id"][last] == 0] == 1.0).all()
    assert (clocks[u["row_id"][last] == 1] < 1.0).all()


def test_demand_response_event_ends_and_power_recovers() -> None:
    sim = busy_hall()
    sim.advance(5)
    base = sim.last["facility_power_w"]
    sim.inject("power_cap", "facility", value=0.7 * base, duration_s=600)
    fr = sim.advance(25)["factory_ts"]
    t = fr["time_s"]
    during = (t >= 300 + 120) & (t < 300 + 600)
    after = t >= 300 + 600 + 120
    assert (fr["facility_power_w"][during] <= 0.7 * base * 1.01).all()
    assert fr["facility_power_w"][after].min() == pytest.approx(base, rel=0.01)
    assert np.isnan(fr["facility_cap_w"][after]).all()


def test_rack_loop_heat_balance_and_cdu_pump_loss() -> None:
    """With the CDU pumps of row 0 lost, the rack loop has no flow: it stores the heat and warms
    at Q / (M c_p), chips throttle, the UltraServer trips before its loop exceeds the trip point
    by more than one step's rise (throttling first), and it comes back after the pumps are restored and it cooled."""
    sim = busy_hall(dt_s=10)
    fac = sim.pool.facility
    sim.advance(60)
    t0 = float(fac.racks.return_c[0])
    sim.inject("cdu_pump_failure", "0", value=0.0, duration_s=3600)
    first_fr = sim.advance(1)  # the failure is applied at the start of this step
    first = first_fr["ultraserver_ts"]
    q = sim.sys.liquid_fraction * float(first["power_w"][0])  # this step's liquid heat, UltraServer 0
    t1 = float(fac.racks.return_c[0])
    assert t1 - t0 == pytest.approx(q * 10 / (fac.design.us_loop_mass_kg * 4180.0), rel=0.02)
    fr = sim.advance(400)
    u = fr["ultraserver_ts"]
    us0 = u["ultraserver_id"] == 0
    ret = u["coolant_return_c"][us0]
    assert ret.max() < sim.p.cooling.loop_trip_c + 2.0  # bounded: the trip takes the heat away
    kinds = list(first_fr["events"]["kind"]) + list(fr["events"]["kind"])
    # The chips' protection acts at once (the stagnant cold plates lose their convection), the
    # loop keeps warming, and the UltraServer trips at the loop limit - throttling came first.
    assert "throttle" in kinds and "thermal_trip" in kinds
    assert kinds.index("throttle") < kinds.index("thermal_trip")
    # Never past the curve: 100 °C down to the lowest thermal clock, below it only the shutdown
    # limit (the hottest chips of the spread, at clock 0.5, may run between 100 and 105 °C).
    assert u["max_chip_temp_c"].max() <= sim.p.cooling.shutdown_temp_c
    assert u["power_w"][us0].min() == 0.0  # powered off
    # Both UltraServers share row 0's CDU, so both tripped; once the pumps are back and the
    # loops have cooled, every tripped chip returns:
    fr2 = sim.advance(400)  # pumps back 3,600 s after the failure
    assert "thermal_recover" in list(fr["events"]["kind"]) + list(fr2["events"]["kind"])
    assert fr2["factory_ts"]["chips_failed"][-1] == 0


def test_chiller_trip_in_hot_weather_follows_the_facility_loop_time_constant() -> None:
    """Hot, humid site: the economizer alone cannot hold the facility water setpoint; with every
    chiller tripped the loop warms as T_ss + (T0 - T_ss) exp(-t/tau), tau = C / (eps m c_p)."""
    hot = SiteParams(
        mean_temp_c=36.0,
        dewpoint_depression_k=8.0,
        dewpoint_seasonal_k=0.0,
        dewpoint_noise_k=0.0,
        weather_noise_k=0.0,
        diurnal_amplitude_k=0.0,
        seasonal_amplitude_k=0.0,
    )
    sim = busy_hall(site=hot, dt_s=60)
    fac = sim.pool.facility
    sim.advance(30)
    t_set = fac.plant_design.fw_setpoint_c
    assert fac.plant.fw_supply_c == pytest.approx(t_set)
    sim.inject("chiller_trip", value=3)
    sim.advance(1)
    t_a = fac.plant.fw_supply_c
    sim.advance(1)
    q = float(sim.last["it_power_w"]) * sim.sys.liquid_fraction  # ~constant busy load
    cond = sim.site.step  # noqa: F841 - weather is constant here
    wb = sim.last["outdoor_wetbulb_c"]
    sink = wb + sim.p.cooling.tower_approach_k + sim.p.cooling.hx_approach_k
    eps = fac.plant_design.econ_unit_effectiveness * fac.plant.towers_up
    m = fac.plant_design.fw_flow_design * min(max(q / fac.plant_design.design_liquid_w, 0.3), 1.0)
    t_ss = sink + q * (1 - eps) / (eps * m * 4180.0)
    tau = fac.plant_design.fw_mass_kg * 4180.0 / (eps * m * 4180.0)
    t_b = fac.plant.fw_supply_c
    sim.advance(10)
    expected = t_ss + (t_b - t_ss) * math.exp(-10 * 60 / tau)
    assert fac.plant.fw_supply_c == pytest.approx(expected, abs=0.05)
    assert t_set < t_a < t_b < fac.plant.fw_supply_c < t_ss
    # Unmet heat is reported while the loop warms.
    assert sim.last["unmet_heat_w"] > 0


def test_thermal_throttling_settles_on_the_throttle_curve(monkeypatch: pytest.MonkeyPatch) -> None:
    """A poor cold plate (0.1 K/W) puts a busy chip above 90 °C: the clock drops until the
    junction temperature sits on the throttle curve f = 1 - 0.5 (T_j - 90) / 10 (identical
    chips: no spread of power or mounting)."""
    from twin.physics import capping

    monkeypatch.setattr(capping, "CHIP_POWER_SPREAD", 0.0)
    monkeypatch.setattr(capping, "COLD_PLATE_R_SPREAD", 0.0)
    sim = busy_hall(cooling=CoolingParams(cold_plate_r_k_per_w=0.1))
    fr = sim.advance(30)
    f = fr["factory_ts"]
    clock = float(f["mean_clock"][-1])
    assert clock < 1.0 and f["throttled_chips"][-1] == 288
    tj = float(f["max_chip_temp_c"][-1])
    assert 90.0 < tj < 100.0
    assert clock == pytest.approx(1 - 0.5 * (tj - 90.0) / 10.0, abs=0.01)
    assert "throttle" in fr["events"]["kind"]
    # Work falls with the clock.
    free = busy_hall().advance(30)["factory_ts"]
    assert f["training_flops"][-1] == pytest.approx(free["training_flops"][-1] * clock, rel=0.01)


def test_water_use_matches_evaporation_by_hand() -> None:
    # Without the air-side economizer all heat goes through the towers (its outside air's heat
    # leaves with the exhaust: tests/test_economizer.py).
    sim = busy_hall(cooling=CoolingParams(air_economizer=False))
    f = sim.advance(20)["factory_ts"]
    cp = sim.p.cooling
    # Heat rejected to the towers = all IT heat + chiller work.
    rejected = f["it_power_w"][-1] + f["chiller_power_w"][-1]
    evap = cp.evaporative_fraction * rejected / 2.43e6  # kg/s
    n = cp.cycles_of_concentration
    # Drift: a share of the circulating water, which carries the heat over the 5 K range.
    drift = cp.tower_drift_fraction * rejected / (4180.0 * 5.0)  # kg/s
    # (rel 1e-4: the rack loops store a sliver of the heat while they settle)
    assert f["water_l"][-1] == pytest.approx((evap * n / (n - 1) + drift) * sim.dt_s, rel=1e-4)
    # ~1.6 L per kWh of heat fully evaporated (facts §8.5) bounds it.
    litres_per_kwh = f["water_l"][-1] / (rejected * sim.dt_s / 3.6e6)
    assert 1.2 < litres_per_kwh < 2.2


def test_dry_plant_uses_no_water_and_more_power_when_hot() -> None:
    warm = SiteParams(
        mean_temp_c=30.0, weather_noise_k=0.0, diurnal_amplitude_k=0.0, seasonal_amplitude_k=0.0
    )
    tower = busy_hall(site=warm).advance(20)["factory_ts"]
    dry = busy_hall(site=warm, cooling=CoolingParams(plant="dry")).advance(20)["factory_ts"]
    assert dry["water_l"].sum() == 0.0 and tower["water_l"].sum() > 0
    assert dry["cooling_power_w"][-1] > tower["cooling_power_w"][-1]


def test_power_chain_stage_losses_add_up() -> None:
    sim = busy_hall()
    f = sim.advance(10)["factory_ts"]
    np.testing.assert_allclose(
        f["power_loss_w"], f["pdu_loss_w"] + f["ups_loss_w"] + f["transformer_loss_w"], rtol=1e-12
    )
    np.testing.assert_allclose(
        f["cooling_power_w"], f["chiller_power_w"] + f["pump_power_w"] + f["fan_power_w"], rtol=1e-12
    )
    pp = PowerChainParams()
    # PDU loss by hand: IT / eta - IT.
    assert f["pdu_loss_w"][-1] == pytest.approx(f["it_power_w"][-1] * (1 / pp.pdu_efficiency - 1))
    # Rectifier losses are inside IT: (P_dc + 17 W x servers) / 0.96 - P_dc.
    servers = sim.topo.servers
    dc = f["it_power_w"][-1] * pp.psu_efficiency - pp.psu_fixed_w_per_server * servers
    assert f["psu_loss_w"][-1] == pytest.approx(f["it_power_w"][-1] - dc)


def test_pue_colder_climate_lower_and_decode_draws_less_than_training() -> None:
    def pue(site: SiteParams) -> float:
        f = busy_hall(site=site).advance(30)["factory_ts"]
        return float(f["energy_j"].sum() / (f["it_power_w"] * 60).sum())

    cold = pue(
        SiteParams(mean_temp_c=0.0, weather_noise_k=0.0, diurnal_amplitude_k=0.0, seasonal_amplitude_k=0.0)
    )
    hot = pue(
        SiteParams(mean_temp_c=38.0, weather_noise_k=0.0, diurnal_amplitude_k=0.0, seasonal_amplitude_k=0.0)
    )
    assert 1.05 < cold < hot < 1.4
    # Memory-bound decode draws less per chip than compute-bound training.
    tp = TrainingParams()
    from twin.spec.params import ServiceParams

    assert ServiceParams().decode_activity < tp.compute_activity


# ---------------------------------------------------------------- timed effects are intervals
def _quiet_hall(ultraservers: int = 2, dt_s: int = 600, **changes: object) -> Hall:
    p = small_params(
        ultraservers=ultraservers,
        dt_s=dt_s,
        training=TrainingParams(arrivals_per_day=0.0),
        services=(),
        failures=FailureParams(chip_hazard_per_h=0.0),
        site=CALM,
    )
    return Hall(dataclasses.replace(p, **changes))


def test_overlapping_facility_caps_end_independently() -> None:
    """1.8 MW at 1 h for 2 h, then 1.2 MW at 2 h for 2 h: 1.8 MW over [1 h, 2 h), the tighter
    1.2 MW over [2 h, 4 h) (the 1.8 MW cap ending at 3 h does not lift it), none from 4 h."""
    sim = _quiet_hall(
        events=(
            ScheduledEvent(3600, "power_cap", "facility", 1.8e6, 7200),
            ScheduledEvent(7200, "power_cap", "facility", 1.2e6, 7200),
        )
    )
    fr = sim.advance(36)  # 6 h at 600 s
    t = fr["factory_ts"]["time_s"]
    cap = fr["factory_ts"]["facility_cap_w"]
    expected = np.where(t < 3600, np.nan, np.where(t < 7200, 1.8e6, np.where(t < 14400, 1.2e6, np.nan)))
    np.testing.assert_array_equal(cap, expected)
    ev = fr["events"]
    ended = [(int(t), d) for t, d in zip(ev["time_s"], ev["detail"], strict=True) if "ended" in d]
    assert ended == [(10800, "power cap 1.800 MW ended"), (14400, "power cap 1.200 MW ended")]


def test_standing_cap_holds_again_after_a_timed_cap_ends() -> None:
    sim = _quiet_hall(
        power=PowerChainParams(facility_cap_w=2.0e6),
        events=(ScheduledEvent(1200, "power_cap", "facility", 1.5e6, 1800),),
    )
    cap = sim.advance(10)["factory_ts"]["facility_cap_w"]
    np.testing.assert_array_equal(cap, [2.0e6, 2.0e6, 1.5e6, 1.5e6, 1.5e6, 2.0e6, 2.0e6, 2.0e6, 2.0e6, 2.0e6])


_windows = st.lists(
    st.tuples(
        st.sampled_from(["facility", "row:0", "row:1", "cdu:0", "cdu:1", "chiller", "tower"]),
        st.integers(0, 11),  # start step
        st.integers(1, 12),  # duration in steps
        st.integers(1, 9),  # value level
    ),
    max_size=7,
)


@given(windows=_windows)
@settings(max_examples=25, deadline=None)
def test_random_overlapping_effects_match_a_brute_force_interval_evaluation(
    windows: list[tuple[str, int, int, int]],
) -> None:
    """Any set of overlapping timed events: at every step the caps are the tightest active
    value (standing caps included), CDU flow the worst active one, and chillers/economizer
    units the installed ones minus those every active trip holds down."""
    dt = 600
    standing_fac, standing_row = 3.0e6, np.array([2.0e6, np.inf])
    evs = []
    for what, s, d, v in windows:
        if what == "facility" or what.startswith("row"):
            evs.append(ScheduledEvent(s * dt, "power_cap", what, 0.2e6 * v, d * dt))
        elif what.startswith("cdu"):
            evs.append(ScheduledEvent(s * dt, "cdu_pump_failure", what[4:], 0.1 * v, d * dt))
        else:
            kind = "chiller_trip" if what == "chiller" else "cooling_tower_loss"
            evs.append(ScheduledEvent(s * dt, kind, "", float(1 + v % 2), d * dt))
    cp = CoolingParams(chiller_units=6, economizer_units=6)
    sim = _quiet_hall(
        ultraservers=4,
        cooling=cp,
        power=PowerChainParams(facility_cap_w=standing_fac, row_cap_w=2.0e6),
        events=tuple(evs),
    )
    standing_row[1] = 2.0e6
    for step in range(26):
        fr = sim.advance(1)
        t = step * dt
        active = [(w, v) for (w, s, d, v) in windows if s * dt <= t < (s + d) * dt]
        fac = min([standing_fac] + [0.2e6 * v for w, v in active if w == "facility"])
        rows = [min([standing_row[r]] + [0.2e6 * v for w, v in active if w == f"row:{r}"]) for r in range(2)]
        flow = [min([1.0] + [0.1 * v for w, v in active if w == f"cdu:{r}"]) for r in range(2)]
        down_ch = sum(1 + v % 2 for w, v in active if w == "chiller")
        down_tw = sum(1 + v % 2 for w, v in active if w == "tower")
        f = sim.pool.facility
        assert fr["factory_ts"]["facility_cap_w"][0] == pytest.approx(fac)
        np.testing.assert_allclose(f.cap.row_w, rows)
        np.testing.assert_allclose(f.row_flow_fraction, flow)
        # Each trip holds down the units it took (fewer when fewer were up when it happened).
        assert f.plant.chillers_up >= max(cp.chiller_units - down_ch, 0)
        assert f.plant.towers_up >= max(cp.economizer_units - down_tw, 0)
        if not active:
            assert f.plant.chillers_up == cp.chiller_units and f.plant.towers_up == cp.economizer_units


def test_overlapping_inference_surges_end_independently() -> None:
    from twin.physics.effects import surge_factor

    surges = [(3.0, 0, 3600), (2.0, 1800, 7200)]
    assert [surge_factor(surges, t) for t in (0, 1800, 3599, 3600, 7199, 7200)] == [
        3.0,
        3.0,
        3.0,
        2.0,
        2.0,
        1.0,
    ]
    assert surge_factor([(0.5, 0, 60)], 30) == 0.5  # a lull is a surge below 1


# ---------------------------------------------------------------- junction protection in the step
def test_cooling_failure_scenario_never_reports_a_powered_chip_above_its_limits() -> None:
    """The built-in cooling-failure scenario (CDU pump loss, chiller trips, tower loss): no step
    reports a junction above the shutdown temperature, and no UltraServer that draws power has
    a chip above it either (12 h, as a new user would run it)."""
    from scenarios.spec import load

    spec, _, _ = load("cooling-failure")
    p = dataclasses.replace(spec.to_params(), chip_sample_interval_s=300)
    sim = Hall(p)
    fr = sim.advance(int((p.warmup_s + 12 * 3600) / p.dt_s))  # its warm-up, then 12 h recorded
    f, u = fr["factory_ts"], fr["ultraserver_ts"]
    limit = p.cooling.shutdown_temp_c
    assert f["max_chip_temp_c"].max() <= limit
    on = u["power_w"] > 0
    assert u["max_chip_temp_c"][on].max() <= limit
    # Every powered chip sampled runs on or below its throttle curve (float32 record, 0.1 K).
    from twin.physics.cooling import allowed_junction_c

    c = fr["chip_ts"]
    pw = c["chip_power_w"] > 0
    assert (c["t_junction_c"][pw] <= allowed_junction_c(c["clock"][pw], p.cooling) + 0.1).all()
    assert c["t_junction_c"][pw].max() > p.cooling.throttle_temp_c  # the samples saw throttling


def test_junction_shutdown_is_a_recorded_state_not_failed_chips() -> None:
    """A cold plate so poor (0.4 K/W) that even the lowest thermal clock leaves the junction
    above 105 °C: the UltraServers shut down in the step, with their own event, recorded as
    tripped (off, no power, no chip counted failed), and no powered chip is reported hotter."""
    sim = busy_hall(cooling=CoolingParams(cold_plate_r_k_per_w=0.4))
    fr = sim.advance(5)
    f, u, ev = fr["factory_ts"], fr["ultraserver_ts"], fr["events"]
    assert "thermal_shutdown" in list(ev["kind"])
    assert f["max_chip_temp_c"].max() <= sim.p.cooling.shutdown_temp_c
    assert (f["ultraservers_tripped"] == 2).all()
    assert (f["chips_failed"] == 0).all()
    assert u["tripped"].all() and (u["power_w"] == 0).all() and (u["chips_failed"] == 0).all()
    assert (f["it_power_w"] == 0).all()


def test_a_tripped_ultraserver_is_recorded_as_tripped_until_it_recovers() -> None:
    sim = busy_hall(dt_s=10)
    sim.advance(60)
    sim.inject("cdu_pump_failure", "0", value=0.0, duration_s=3600)
    fr = sim.advance(400)
    u = fr["ultraserver_ts"]
    off = u["tripped"]
    assert off.any()
    assert (u["power_w"][off] == 0).all()
    assert (u["chips_failed"] == 0).all()  # tripped chips are not failed hardware
    f = fr["factory_ts"]
    per_step = np.bincount(np.repeat(np.arange(len(f["time_s"])), 2), weights=off)
    np.testing.assert_array_equal(f["ultraservers_tripped"], per_step)


def test_work_and_power_use_the_clock_the_chips_ran_at_when_protection_acts_in_the_step() -> None:
    """A stagnant loop warms within each step, so junction protection slows the chips inside
    the step: the training FLOP/s recorded is each gang's rate x the slowest clock its chips ran
    at that step (the clock the power was drawn at), not the clock the step began with."""
    sim = busy_hall(dt_s=60, chip_sample_interval_s=60)
    sim.advance(20)
    rate = {j: float(sim.jobs.a["rate"][j]) for j in (0, 1)}  # the two 144-chip gangs at full clock
    sim.inject("cdu_pump_failure", "0", value=0.0, duration_s=7200)
    fr = sim.advance(25)
    f, c = fr["factory_ts"], fr["chip_ts"]
    checked = 0
    for k, t in enumerate(f["time_s"]):
        if f["ultraservers_tripped"][k] or f["running_jobs"][k] != 2:
            continue
        at = c["time_s"] == t
        if not all((at & (c["job_id"] == j)).any() for j in (0, 1)):
            continue  # a trip at the end of the step released the gang
        want = sum(rate[j] * float(c["clock"][at & (c["job_id"] == j)].min()) for j in (0, 1))
        assert f["training_flops"][k] == pytest.approx(want, rel=1e-6), t
        checked += int(f["mean_clock"][k] < 1.0)
    assert checked >= 3  # throttled steps were checked


@functools.cache
def _hall_facility() -> Facility:
    return busy_hall().pool.facility


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.02, 1.0]))
def test_it_power_at_full_clock_from_utilisation_sums_is_the_per_chip_path(
    seed: int, dead_share: float
) -> None:
    """At full clock the step sums UltraServers from their chips' utilisation sums and maxima
    (``power.us_chip_power_full_w``, ``hottest_chip_power_full_w``); the same step through the
    per-chip power law at clocks of 1 gives the same power."""
    fac = _hall_facility()
    ch, n = fac.chips, fac.topo.chips
    rng = np.random.default_rng(seed)
    util = rng.random(n) * (rng.random(n) < 0.7)
    alive = rng.random(n) >= dead_share
    util[~alive] = 0.0
    on = np.zeros(fac.topo.ultraservers, dtype=bool)
    load = Load.of_chips(util, alive)
    fast = it_power(ch, fac.sys, on, load, None, ch.ones, True)
    slow = it_power(ch, fac.sys, on, load, None, np.ones(n), False)
    assert fast.full_p is None and slow.full_p is not None
    np.testing.assert_allclose(fast.us_chip_w, slow.us_chip_w, rtol=1e-12)
    np.testing.assert_allclose(fast.us_chip_max_w, slow.us_chip_max_w, rtol=1e-12)
    np.testing.assert_allclose(fast.us_it, slow.us_it, rtol=1e-12)
    np.testing.assert_allclose(fast.chip_p, slow.chip_p, rtol=1e-12)
    assert fast.it_w == pytest.approx(slow.it_w, rel=1e-12)
