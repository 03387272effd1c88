"""The cooling plant's units (``twin.physics.plant``): each chiller and cooling tower / dry cooler is
running, standby or failed, with its load — recorded in ``factory_ts`` and consistent with the
plant's own totals (the chiller load the COP and power imply, the units the events took out)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_facility import busy_hall
from twin.physics.plant import FAILED, RUNNING, STANDBY, unit_states
from twin.spec.params import CoolingParams, ScheduledEvent


@given(st.integers(0, 12), st.data())
def test_unit_states_count_running_standby_and_failed(units: int, data: st.DataObject) -> None:
    up = data.draw(st.integers(0, units))
    running = data.draw(st.integers(0, up))
    s = unit_states(units, up, running)
    assert len(s) == units
    assert (
        (s == RUNNING).sum() == running
        and (s == STANDBY).sum() == up - running
        and (s == FAILED).sum() == units - up
    )


def test_chiller_units_share_the_chiller_load_and_trips_fail_units() -> None:
    """Two of three chillers trip at 10 min, one of three towers is lost at 20 min: the recorded
    failed counts follow the events; the running chillers carry the load the COP implies
    (load = power x COP), each at load / (running x unit capacity), never more than the healthy.
    (Without the air-side economizer, so that the chillers carry the air side's heat.)"""
    sim = busy_hall(
        events=(
            ScheduledEvent(time_s=600, kind="chiller_trip", target="", value=2.0),
            ScheduledEvent(time_s=1200, kind="cooling_tower_loss", target="", value=1.0),
        ),
        cooling=CoolingParams(air_economizer=False),
    )
    cp = sim.p.cooling
    f = sim.advance(40)["factory_ts"]
    t = f["time_s"]
    np.testing.assert_array_equal(f["chillers_failed"], np.where(t >= 600, 2, 0))
    np.testing.assert_array_equal(f["economizers_failed"], np.where(t >= 1200, 1, 0))
    assert (f["chillers_running"] <= cp.chiller_units - f["chillers_failed"]).all()
    load = f["chiller_power_w"] * f["chiller_cop"]
    on = f["chillers_running"] > 0
    assert on.any()
    unit_w = sim.design.chiller_unit_w
    np.testing.assert_allclose(
        f["chiller_load_fraction"][on], load[on] / (f["chillers_running"][on] * unit_w), rtol=1e-9
    )
    assert (f["chiller_load_fraction"] <= 1.0 + 1e-12).all()
    # as few units run as carry the load: one fewer would be over its capacity
    fewer = np.maximum(f["chillers_running"][on] - 1, 0) * unit_w
    assert (load[on] > fewer).all()
    np.testing.assert_array_equal(f["chiller_load_fraction"][~on], 0.0)
    # every healthy tower runs while heat is rejected, the fans at the same speed
    np.testing.assert_array_equal(f["economizers_running"], cp.economizer_units - f["economizers_failed"])
    assert ((f["economizer_load_fraction"] > 0) & (f["economizer_load_fraction"] <= 1)).all()


def test_chiller_restore_brings_units_back() -> None:
    sim = busy_hall(
        events=(ScheduledEvent(time_s=0, kind="chiller_trip", target="", value=3.0, duration_s=600),)
    )
    f = sim.advance(20)["factory_ts"]
    t = f["time_s"]
    assert (f["chillers_failed"][t < 600] == sim.p.cooling.chiller_units).all()
    assert (f["chillers_running"][t < 600] == 0).all()
    assert (f["chillers_failed"][t >= 600] == 0).all()
    assert pytest.approx(0.0) == float(f["chiller_load_fraction"][t < 600].max())


def test_a_version_5_file_gains_the_plant_unit_columns() -> None:
    """A file written before the per-unit columns (schema v5) is migrated on open for writing: the
    six plant columns and the UltraServers' CDU flow (v6), then the hall of each row and system
    (v7) and the heat balance of the water (v8), are appended after their tables' own columns,
    and a new step inserts by name."""
    import duckdb

    from storage.schema import V6_COLUMNS, V7_COLUMNS, V8_COLUMNS, V9_COLUMNS, columns, migrations
    from storage.writer import init_schema
    from twin.spec.telemetry import PLANT_UNIT_COLUMNS, SCHEMA_VERSION

    assert SCHEMA_VERSION == len(migrations()) == 11
    assert V6_COLUMNS == {"factory_ts": PLANT_UNIT_COLUMNS, "ultraserver_ts": ("cdu_flow_fraction",)}
    added: dict[str, list[str]] = {t: list(names) for t, names in V6_COLUMNS.items()}
    for table, name in (*V7_COLUMNS, *V8_COLUMNS, *V9_COLUMNS):
        added.setdefault(table, []).append(name)
    con = duckdb.connect(":memory:")
    for stmts in migrations()[:5]:
        for s in stmts:
            con.execute(s)
    old = {}
    for table, names in added.items():
        for name in names:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {name}")
        old[table] = [r[0] for r in con.sql(f"DESCRIBE {table}").fetchall()]
    con.execute("INSERT INTO twin_meta VALUES ('schema_version', '5')")
    init_schema(con)
    for table, names in added.items():
        cols = [r[0] for r in con.sql(f"DESCRIBE {table}").fetchall()]
        assert cols == [*old[table], *names]
        assert sorted(cols) == sorted(c.name for c in columns(table))
    assert con.sql("SELECT value FROM twin_meta WHERE key = 'schema_version'").fetchall() == [("11",)]
    con.execute("INSERT INTO factory_ts BY NAME SELECT 'r' AS run_id, 0 AS time_s, 2 AS chillers_running")
    assert con.sql("SELECT chillers_running, chillers_failed FROM factory_ts").fetchall() == [(2, None)]


def test_each_ultraserver_records_its_cdu_flow() -> None:
    """Row 0's CDU pumps are lost from 10 to 20 min: its UltraServers record flow 0 in that time,
    1 before and after (the other rows: 1 throughout)."""
    sim = busy_hall(events=(ScheduledEvent(time_s=600, kind="cdu_pump_failure", target="0", duration_s=600),))
    u = sim.advance(30)["ultraserver_ts"]
    row0 = u["row_id"] == 0
    lost = (u["time_s"] >= 600) & (u["time_s"] < 1200)
    assert row0.any()
    np.testing.assert_array_equal(u["cdu_flow_fraction"], np.where(row0 & lost, 0.0, 1.0))


def test_a_mixed_floor_records_its_one_plant_and_stops_like_one_hall() -> None:
    """A floor of two systems shares one plant: its units are the plant's (not summed over the
    systems), the chiller load they imply is the floor's (power x COP), and an advance asked to
    stop after 3 of 10 steps records exactly those 3 steps in every table."""
    import dataclasses

    from tests.conftest import small_params
    from tests.test_floor import _mixed
    from twin.compose import sim as model
    from twin.spec.params import TrainingParams

    p = _mixed(
        small_params(services=(), training=dataclasses.replace(TrainingParams(), arrivals_per_day=500.0))
    )
    sim = model.build(p)
    cp = p.cooling
    f = sim.advance(20)["factory_ts"]
    assert (f["chillers_running"] + f["chillers_failed"] <= cp.chiller_units).all()
    np.testing.assert_array_equal(f["economizers_running"], cp.economizer_units)
    on = f["chillers_running"] > 0
    unit_w = sim.plant_design.chiller_unit_w
    load = f["chiller_power_w"] * f["chiller_cop"]
    np.testing.assert_allclose(
        f["chiller_load_fraction"][on], load[on] / (f["chillers_running"][on] * unit_w), rtol=1e-9
    )
    calls = [0]

    def stop() -> bool:
        calls[0] += 1
        return calls[0] >= 3

    t0 = sim.t_s
    fr = sim.advance(10, stop)
    assert list(fr["factory_ts"]["time_s"]) == [t0, t0 + 60, t0 + 120] and sim.t_s == t0 + 180
    assert len(fr["system_ts"]["time_s"]) == 3 * 2
    assert set(fr["ultraserver_ts"]["time_s"].tolist()) <= {t0, t0 + 60, t0 + 120}


def test_first_step_what_if_leaves_the_plant_as_it_was_and_is_the_plant_and_chain_answer() -> None:
    """``plant.it_per_facility_w`` runs the plant on a copy of its state: the facility's plant
    state is unchanged, and the ratio is IT over IT + plant + chain losses of that run."""
    import dataclasses

    from twin.physics import plant, power
    from twin.physics.site import Conditions

    fac = busy_hall().pool.facility
    fac.plant.fw_supply_c += 3.0  # a warm loop, so the what-if moves the state it runs on
    before = dataclasses.replace(fac.plant)
    cond = Conditions(
        drybulb_c=30.0, wetbulb_c=22.0, rel_humidity=0.5, price_usd_per_mwh=50.0, carbon_g_per_kwh=300.0
    )
    d, flow, it_w = (
        fac.plant_design,
        plant.cdu_flow(fac.plant_design, fac.row_flow_fraction, fac.topo.us_row),
        2e6,
    )
    ratio = plant.it_per_facility_w(d, fac.plant, flow, it_w, cond, 60, fac.design.ups_rating_w, fac.pp)
    assert fac.plant == before
    out = plant.run(d, dataclasses.replace(before), flow, d.lf * it_w, (1 - d.lf) * it_w, cond, 60)
    cooling_w = out.chiller_power_w + out.pump_power_w + out.fan_power_w
    facility_w = (
        it_w + cooling_w + power.chain_losses(it_w, cooling_w, fac.design.ups_rating_w, fac.pp).total_w
    )
    assert ratio == it_w / facility_w


def test_power_cap_in_force_is_the_lower_of_the_halls_own_and_the_campus_share() -> None:
    from twin.physics.capping import PowerCap
    from twin.spec.params import PowerChainParams

    cap = PowerCap.standing(PowerChainParams(facility_cap_w=5e6), rows=2)
    assert cap.facility_w == 5e6 and not cap.rows_capped and cap.capped
    cap.set_site(3e6)
    assert cap.facility_w == 3e6
    cap.resolved(2e6, np.array([np.inf, 1e6]))  # a timed cap below the share, a row cap
    assert (cap.own_w, cap.facility_w, cap.rows_capped) == (2e6, 2e6, True)
    cap.set_site(np.inf)
    assert cap.facility_w == 2e6
    assert cap.it_target_w(1e6, 1.25e6) == 2e6 * 1e6 / 1.25e6
    assert PowerCap.standing(PowerChainParams(), rows=1).it_target_w(1e6, 1.2e6) == np.inf
