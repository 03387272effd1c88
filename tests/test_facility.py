"""Facility physics end to end: capping, cooling failures, heat balances, water, climate."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tests.conftest import small_params
from twin.params import (
    CoolingParams,
    FailureParams,
    PowerChainParams,
    ScheduledEvent,
    SiteParams,
    TrainingParams,
)
from twin.sim import Simulation

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
    sim = Simulation(p)
    for us in range(2):
        j = sim.jobs.add("x", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e25, submit=0)
        sim.queue.append(j)
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
    # The controller acts on the next step; from then on the cap holds (within 1 %).
    assert (f["facility_power_w"][3:] <= cap * 1.01).all()
    assert f["facility_power_w"][-1] >= cap * 0.97  # and it does not throttle more than needed
    clock = float(f["mean_clock"][-1])
    assert 0.3 < clock < 1.0
    # Throughput follows the clock linearly; dynamic power follows clock^3.
    assert f["training_flops"][-1] == pytest.approx(uncapped_flops * clock, rel=1e-6)
    chip_idle = capped.acc.idle_w * 288
    dyn0 = float(f0["chip_power_w"][-1]) - chip_idle
    dyn1 = float(f["chip_power_w"][-1]) - chip_idle
    assert dyn1 == pytest.approx(dyn0 * clock**3, rel=1e-6)
    assert (f["throttled_chips"][3:] == 288).all()


def test_standing_cap_from_the_power_section() -> None:
    sim = busy_hall()
    sim.advance(10)
    base = sim.last["facility_power_w"]
    capped = busy_hall(power=PowerChainParams(facility_cap_w=0.9 * base))
    f = capped.advance(10)["factory_ts"]
    assert (f["facility_power_w"][2:] <= 0.9 * base * 1.01).all()
    assert f["facility_cap_w"][-1] == pytest.approx(0.9 * base)


def test_row_cap_throttles_only_its_row() -> None:
    p = small_params(
        ultraservers=4,
        training=TrainingParams(arrivals_per_day=0.0),
        services=(),
        failures=FailureParams(chip_hazard_per_h=0.0),
        site=CALM,
    )
    sim = Simulation(dataclasses.replace(p, events=(ScheduledEvent(0, "power_cap", "row:1", 200e3),)))
    for _ in range(4):
        sim.queue.append(sim.jobs.add("x", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e25))
    fr = sim.advance(20)
    u = fr["ultraserver_ts"]
    last = u["time_s"] == u["time_s"].max()
    row_power = np.bincount(u["row_id"][last], weights=u["power_w"][last])
    assert row_power[1] <= 200e3 * 1.01
    assert row_power[0] > 250e3  # row 0 runs free
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
    fac = sim.facility
    sim.advance(60)
    t0 = float(fac.us_return_c[0])
    sim.inject("cdu_pump_failure", "0", value=0.0, duration_s=3600)
    first_fr = sim.advance(1)  # the failure is applied at the start of this step
    first = first_fr["ultraserver_ts"]
    q = sim.sys.liquid_fraction * float(first["power_w"][0])  # this step's liquid heat, UltraServer 0
    t1 = float(fac.us_return_c[0])
    assert t1 - t0 == pytest.approx(q * 10 / (fac.us_mass_kg * 4180.0), rel=0.02)
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
    assert u["max_chip_temp_c"].max() <= sim.p.cooling.throttle_full_c + 0.5  # never past 100 °C
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
    fac = sim.facility
    sim.advance(30)
    t_set = fac.fw_setpoint_c
    assert fac.plant.fw_supply_c == pytest.approx(t_set)
    sim.inject("chiller_trip", value=3)
    sim.advance(1)
    t_a = fac.plant.fw_supply_c
    sim.advance(1)
    q = float(sim.last["it_power_w"]) * sim.sys.liquid_fraction  # ~constant busy load
    cond = sim.site.step  # noqa: F841 - weather is constant here
    wb = sim.last["outdoor_wetbulb_c"]
    sink = wb + sim.p.cooling.tower_approach_k + sim.p.cooling.hx_approach_k
    eps = fac.econ_unit_effectiveness * fac.plant.towers_up
    m = fac.fw_flow_design * min(max(q / fac.design_liquid_w, 0.3), 1.0)
    t_ss = sink + q * (1 - eps) / (eps * m * 4180.0)
    tau = fac.fw_mass_kg * 4180.0 / (eps * m * 4180.0)
    t_b = fac.plant.fw_supply_c
    sim.advance(10)
    expected = t_ss + (t_b - t_ss) * math.exp(-10 * 60 / tau)
    assert fac.plant.fw_supply_c == pytest.approx(expected, abs=0.05)
    assert t_set < t_a < t_b < fac.plant.fw_supply_c < t_ss
    # Unmet heat is reported while the loop warms.
    assert sim.last["unmet_heat_w"] > 0


def test_thermal_throttling_settles_on_the_throttle_curve() -> None:
    """A poor cold plate (0.08 K/W) puts a busy chip above 90 °C: the clock drops until the
    junction temperature sits on the throttle curve f = 1 - 0.5 (T_j - 90) / 10."""
    sim = busy_hall(cooling=CoolingParams(cold_plate_r_k_per_w=0.08))
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
    sim = busy_hall()
    f = sim.advance(20)["factory_ts"]
    cp = sim.p.cooling
    # Heat rejected to the towers = all IT heat + chiller work.
    rejected = f["it_power_w"][-1] + f["chiller_power_w"][-1]
    evap = cp.evaporative_fraction * rejected / 2.43e6  # kg/s
    n = cp.cycles_of_concentration
    # (rel 1e-4: the rack loops store a sliver of the heat while they settle)
    assert f["water_l"][-1] == pytest.approx(evap * n / (n - 1) * sim.dt_s, rel=1e-4)
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
    from twin.params import ServiceParams

    assert ServiceParams().decode_activity < tp.activity
