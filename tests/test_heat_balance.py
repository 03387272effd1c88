"""Heat is conserved: what the plant cannot reject is stored in the water (rack loops, facility
water, chilled water) and warms it until protection acts, and it is rejected after the restore.

The balance counted, every step: IT heat (all IT power becomes heat: the liquid share into the
rack loops, the air share into the CRAHs' chilled water) = heat rejected (taken from the water by
the economizer and the chillers' evaporators, ``heat_rejected_w``) + the change of the heat
stored (``heat_stored_w``). Pump and fan power are the plant's electrical load, not heat into
the water (``twin.physics.plant.run``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_facility import busy_hall
from twin.compose.hall import Hall
from twin.physics import cooling
from twin.spec.params import CoolingParams, ScheduledEvent, SiteParams

CP = cooling.WATER_CP_J_KG_K

# A temperate summer afternoon, held still: 25 °C dry-bulb, dew point 17.5 °C (wet-bulb ~20 °C):
# the towers' economizer (sink = wet-bulb + 4 + 2 K) holds the 27 °C facility water alone, but not
# the 14 °C chilled water of the air side.
SUMMER = SiteParams(
    mean_temp_c=25.0,
    seasonal_amplitude_k=0.0,
    diurnal_amplitude_k=0.0,
    weather_noise_k=0.0,
    dewpoint_depression_k=7.5,
    dewpoint_seasonal_k=0.0,
    dewpoint_noise_k=0.0,
)
HOT = SiteParams(
    mean_temp_c=36.0,
    seasonal_amplitude_k=0.0,
    diurnal_amplitude_k=0.0,
    weather_noise_k=0.0,
    dewpoint_depression_k=8.0,
    dewpoint_seasonal_k=0.0,
    dewpoint_noise_k=0.0,
)


def held_heat_j(sim: Hall) -> float:
    """Heat held in the water above 0 °C [J]: rack loops, facility water, chilled water."""
    fac = sim.pool.facility
    st = fac.plant
    return CP * (
        fac.plant_design.fw_mass_kg * st.fw_supply_c
        + fac.plant_design.chw_mass_kg * st.chw_supply_c
        + fac.design.us_loop_mass_kg * float(fac.racks.return_c.sum())
    )


def run_stepwise(sim: Hall, steps: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Advance one step at a time; the frames and the held heat after every step."""
    held = np.empty(steps)
    frames: list[dict[str, np.ndarray]] = []
    for i in range(steps):
        frames.append(sim.advance(1)["factory_ts"])
        held[i] = held_heat_j(sim)
    f = {k: np.concatenate([fr[k] for fr in frames]) for k in frames[0]}
    return f, held


def test_losing_every_chiller_on_a_summer_afternoon_stores_the_heat_and_releases_it() -> None:
    """All three chillers trip for 1 h: the economizer holds the facility water, but the air
    side's chilled water has nothing to cool it below the sink: its heat is stored, the water
    warms at stored / (M c_p) until the economizer can precool it, and after the restore the
    chillers reject what was stored and the water returns to its setpoint. Every step, the
    stored heat equals the thermal masses times their temperature rise (to 2 %), and over the
    run IT heat = rejected + stored."""
    sim = busy_hall(site=SUMMER, dt_s=60)
    fac = sim.pool.facility
    cp = sim.p.cooling
    sim.advance(20)
    h0 = held_heat_j(sim)
    sim.inject("chiller_trip", value=3, duration_s=3600)
    f, held = run_stepwise(sim, 150)
    dt = 60.0
    rise = np.diff(np.concatenate([[h0], held])) / dt  # thermal mass x temperature rise, as a rate
    big = np.abs(rise) > 1e3
    assert big.any()
    np.testing.assert_allclose(f["heat_stored_w"][big], rise[big], rtol=0.02)
    assert np.abs(f["heat_stored_w"][~big] - rise[~big]).max() < 20.0  # W: rounding of the temperatures
    # The balance of the run: IT heat = heat rejected + heat stored (1e-9 of the IT energy).
    it_j = float(f["it_power_w"].sum()) * dt
    assert float((f["heat_rejected_w"] + f["heat_stored_w"]).sum()) * dt == pytest.approx(it_j, rel=1e-9)
    # The air side warms: heat stored at the start (the plant flagged as not keeping up), the
    # chilled water and so the CRAH air above their setpoints, and the stored heat is the
    # chilled-water mass times its rise.
    during = np.arange(150) < 60
    first = f["heat_stored_w"][0]
    air_w = float(f["it_power_w"][0]) * (1 - fac.lf)
    assert first == pytest.approx(air_w, rel=0.02)  # at first nothing takes the air side's heat
    assert f["unrejected_fraction"][0] == pytest.approx(1 - fac.lf, rel=0.02)
    assert f["unmet_heat_w"][0] == pytest.approx(first, rel=0.02)  # the plant's share of it
    peak = float(f["chilled_water_supply_c"][during].max())
    assert peak > cp.chilled_water_c + 3.0
    stored_j = float(f["heat_stored_w"][during].sum()) * dt
    chw_j = fac.plant_design.chw_mass_kg * CP * (float(f["chilled_water_supply_c"][59]) - cp.chilled_water_c)
    assert stored_j == pytest.approx(chw_j, rel=0.02)
    # The facility water holds its setpoint (the economizer carries the liquid share) and the
    # CDU supply is never colder than the facility water plus the CDU approach.
    assert f["facility_water_supply_c"].max() == pytest.approx(fac.plant_design.fw_setpoint_c, abs=1e-6)
    assert (f["coolant_supply_c"] >= f["facility_water_supply_c"] + cp.cdu_approach_k - 1e-9).all()
    # After the restore the chillers reject the stored heat: released = stored (2 %), and the
    # chilled water is back at its setpoint; the plant keeps up again.
    after = ~during
    released = -float(f["heat_stored_w"][after].sum()) * dt
    assert released == pytest.approx(stored_j, rel=0.02)
    assert f["chilled_water_supply_c"][-1] == pytest.approx(cp.chilled_water_c, abs=1e-6)
    assert (f["unrejected_fraction"][after] == 0).all()
    # The masses hold what they held before the trip: within 0.1 % of the heat stored during it.
    assert abs(held[-1] - h0) < 1e-3 * stored_j


def test_without_towers_and_two_chillers_the_facility_water_warms_until_the_loops_trip() -> None:
    """Every tower and two of three chillers lost: the last chiller carries the air side and
    what it has left of the liquid heat; the facility water stores the rest and warms at
    (Q_liq - (C_unit - Q_air)) / (M c_p); the rack loops follow it (the CDU supply = facility
    water + 3 K) and the chips' junctions with them: the hottest chip (the largest h g of the
    spread, ~23 K above its loop's return) reaches its throttle curve first, then the
    UltraServers power off as their loop return passes 70 °C. Hand calculation of when: the return is supply + 3 K + the loop's rise, so the
    trip comes when the facility water reaches T* = 70 - 3 - rise (the loops lag by ~their time
    constant M_loop / (m c_p) ~ 1 min: 1.5 K tolerance), at t = (T* - 27) (M_fw + M_loops) c_p
    / (net heat): the rack loops warm with the water and store their share.
    After the restore the stored heat is rejected and everything comes back. The air side has no
    outside air here, so the last chiller carries all of it."""
    sim = busy_hall(site=SUMMER, dt_s=30, cooling=CoolingParams(air_economizer=False))
    fac = sim.pool.facility
    cp = sim.p.cooling
    sim.advance(30)
    u0 = sim.advance(1)
    us = u0["ultraserver_ts"]
    it_w = float(us["power_w"].sum())
    q_liq, q_air = fac.lf * it_w, (1 - fac.lf) * it_w
    net_w = q_liq - (fac.plant_design.chiller_unit_w - q_air)
    rise = float(np.mean(us["coolant_return_c"])) - float(u0["factory_ts"]["coolant_supply_c"][0])
    fw_trip = cp.loop_trip_c - cp.cdu_approach_k - rise
    tj_rise = float(us["max_chip_temp_c"].max()) - float(np.mean(us["coolant_return_c"]))
    sim.inject("chiller_trip", value=2)
    sim.inject("cooling_tower_loss", value=3)
    f, _ = run_stepwise(sim, 200)
    fw = f["facility_water_supply_c"]
    # The first step stores the net heat: the water warms at net / (M c_p) (2 %).
    assert (fw[0] - fac.plant_design.fw_setpoint_c) == pytest.approx(
        net_w * 30 / (fac.plant_design.fw_mass_kg * CP), rel=0.02
    )
    assert (f["coolant_supply_c"] >= fw + cp.cdu_approach_k - 1e-9).all()
    # The chips warm with the water, one for one, until protection acts: the hottest chips
    # (the largest h g of the chips' spread) reach their throttle curve shortly before the trip.
    before = (f["ultraservers_tripped"] == 0) & (f["throttled_chips"] == 0)
    np.testing.assert_allclose(
        f["max_chip_temp_c"][before] - f["coolant_return_c"][before], tj_rise, atol=1.0
    )
    k = int(np.flatnonzero(f["ultraservers_tripped"] > 0)[0])
    assert float(fw[k - 1]) == pytest.approx(fw_trip, abs=1.5)  # the water the step began with
    # The hottest chip (T_j = return + its rise above the return) reaches 90 °C when the return
    # is 90 - rise_j, i.e. when the facility water is 90 - rise_j - 3 - rise: by hand, before
    # the trip.
    j = int(np.flatnonzero(f["throttled_chips"] > 0)[0])
    fw_throttle = cp.throttle_temp_c - tj_rise - cp.cdu_approach_k - rise
    assert j < k
    assert float(fw[j - 1]) == pytest.approx(fw_throttle, abs=1.5)
    # The rack loops warm with the facility water: both masses store the net heat.
    mass = fac.plant_design.fw_mass_kg + fac.design.us_loop_mass_kg * len(fac.racks.return_c)
    t_hand = (fw_trip - fac.plant_design.fw_setpoint_c) * mass * CP / net_w
    # Within the time the water takes to warm by the 1.5 K the loops may lag it (above).
    assert k * 30 == pytest.approx(t_hand, abs=1.5 * mass * CP / net_w)
    assert f["max_chip_temp_c"].max() <= cp.throttle_full_c + 0.5
    it_j = float(f["it_power_w"].sum()) * 30
    assert float((f["heat_rejected_w"] + f["heat_stored_w"]).sum()) * 30 == pytest.approx(it_j, rel=1e-9)
    # Restore: the stored heat is rejected, the water returns to its setpoint, the UltraServers
    # are back.
    sim.inject("cooling_restore")
    g, _ = run_stepwise(sim, 120)
    assert g["heat_stored_w"].min() < 0
    assert g["facility_water_supply_c"][-1] == pytest.approx(fac.plant_design.fw_setpoint_c, abs=1e-6)
    assert g["ultraservers_tripped"][-1] == 0


def test_losing_every_chiller_in_the_heat_trips_on_the_inlet_air() -> None:
    """Hot, humid site: without chillers the air side's chilled water warms (the economizer's
    sink is above it) at air heat / (M_chw c_p); the CRAH supply air follows it (24 °C + the
    chilled water's rise) and the UltraServers, whose hosts breathe that air, power off when it
    passes 40 °C: after (30 - 14) K x M_chw c_p / air heat, by hand."""
    sim = busy_hall(site=HOT, dt_s=10)
    fac = sim.pool.facility
    cp = sim.p.cooling
    sim.advance(30)
    sim.inject("chiller_trip", value=3)
    fr = sim.advance(200)
    f = fr["factory_ts"]
    air_w = float(f["it_power_w"][0]) * (1 - fac.lf)
    trip_at = cp.air_trip_c - cp.air_supply_c + cp.chilled_water_c  # chilled water at the trip
    t_hand = (trip_at - cp.chilled_water_c) * fac.plant_design.chw_mass_kg * CP / air_w
    k = int(np.flatnonzero(f["ultraservers_tripped"] > 0)[0])
    assert k * 10 == pytest.approx(t_hand, abs=30)  # within 3 steps
    assert float(f["chilled_water_supply_c"][k - 1]) == pytest.approx(trip_at, abs=0.5)
    ev = fr["events"]
    trips = [d for kind, d in zip(ev["kind"], ev["detail"], strict=True) if kind == "thermal_trip"]
    assert trips and all("inlet air" in d for d in trips)


def test_heat_balance_columns_of_a_scheduled_incident_in_a_hall() -> None:
    """A scheduled chiller trip in a run (``advance`` over many steps): IT heat = rejected +
    stored every step (1e-6 of the step's IT heat)."""
    sim = busy_hall(
        site=SUMMER,
        dt_s=60,
        events=(ScheduledEvent(time_s=600, kind="chiller_trip", value=3, duration_s=1800),),
    )
    f = sim.advance(90)["factory_ts"]
    np.testing.assert_allclose(
        f["heat_rejected_w"] + f["heat_stored_w"], f["it_power_w"], rtol=1e-6, atol=1e-3
    )
    assert f["unrejected_fraction"].max() > 0
