"""A campus (twin.compose.campus, ``[[halls]]``): conservation of power across halls, a shared campus
cap, independent plants, ids unique campus-wide, a one-hall campus that is the hall bit for bit,
and bad input refused before anything is allocated."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scenarios.spec import ScenarioError, build_simulation, parse
from tests.conftest import SMALL_TOML
from twin.compose import sim as model
from twin.compose.campus import MAX_HALLS, Campus
from twin.compose.hall import Hall
from twin.spec import catalog

TRN3 = catalog.SYSTEMS["trn3-gen2"]


def _campus_toml(
    halls: tuple[int, ...] = (2, 4), extra: str = "", arrivals: float = 40, services: bool = True
) -> str:
    text = 'name = "campus"\nseed = 11\ndt_s = 60\nduration_h = 6\n'
    text += "\n" if services else "services = []\n\n"
    for n in halls:
        text += f'[[halls]]\nsystem = "trn3-gen2"\nultraservers = {n}\nultraservers_per_row = 2\n\n'
    text += f"[training]\narrivals_per_day = {arrivals}\n\n"
    text += "[training.pretrain]\nsize_chips = [4, 16, 36, 144]\nsize_weights = [0.4, 0.3, 0.2, 0.1]\n\n"
    if services:
        text += '[[services]]\nname = "chat"\nmodel = "llama-3.1-70b"\nreplicas = 2\nmean_requests_per_s = 20.0\n\n'
        text += '[[services]]\nname = "code"\nmodel = "llama-3.1-70b"\nreplicas = 2\nmean_requests_per_s = 20.0\n\n'
    return text + extra


def _build(text: str) -> Any:
    _, sim = build_simulation(parse(text, "campus.toml"))
    return sim


def _idle_us_it_w(n: int = 1, g_sum: float | None = None) -> float:
    """Hand calculation: ``n`` idle Trn3 Gen2 UltraServers at rack input (chips at idle power
    times their power factors, ``g_sum`` their sum, None: identical chips; hosts at their idle
    share, switches on; the rectifier's fixed loss per server and its efficiency)."""
    from twin.spec.params import PowerChainParams

    acc = catalog.ACCELERATORS[TRN3.accelerator]
    pp = PowerChainParams()
    chips = n * TRN3.chips if g_sum is None else g_sum
    dc = chips * acc.tdp_w * acc.idle_fraction
    dc += n * (TRN3.servers * TRN3.host_w_per_server * TRN3.host_idle_fraction + TRN3.switch_w)
    return (dc + n * pp.psu_fixed_w_per_server * TRN3.servers) / pp.psu_efficiency


def test_idle_halls_draw_their_hand_calculated_it_power_and_the_grid_their_sum() -> None:
    sim = _build(_campus_toml((2, 4), arrivals=0, services=False))
    assert isinstance(sim, Campus)
    f = sim.advance(10)
    h = f["hall_ts"]
    assert list(h["hall_id"][:4]) == [0, 1, 0, 1]
    g = [float(hall.pool.facility.chips.p_scale.sum()) for hall in sim.halls]  # the chips' spread
    want = [_idle_us_it_w(2, g[0]), _idle_us_it_w(4, g[1])]
    np.testing.assert_allclose(h["power_w"][0::2], want[0], rtol=1e-12)
    np.testing.assert_allclose(h["power_w"][1::2], want[1], rtol=1e-12)
    np.testing.assert_allclose(f["factory_ts"]["it_power_w"], sum(want), rtol=1e-12)


def test_grid_power_is_the_sum_of_the_halls_facility_power() -> None:
    sim = _build(_campus_toml((2, 3), arrivals=400))
    f = sim.advance(120)
    fac, st = f["factory_ts"], f["system_ts"]
    assert list(st["hall_id"][:2]) == [0, 1]
    per_hall = np.asarray(st["facility_power_w"]).reshape(-1, 2)
    np.testing.assert_allclose(fac["facility_power_w"], per_hall.sum(axis=1), rtol=1e-12)
    # Each hall's facility power is its own IT power, its own plant and its own chain's losses.
    own = np.asarray(st["it_power_w"]) + np.asarray(st["cooling_power_w"]) + np.asarray(st["power_loss_w"])
    np.testing.assert_allclose(st["facility_power_w"], own, rtol=1e-9)
    np.testing.assert_allclose(fac["energy_j"], fac["facility_power_w"] * 60, rtol=1e-12)
    # The halls do differ (their work is their own), so the sum is not a copy.
    assert not np.allclose(per_hall[:, 0] / 2, per_hall[:, 1] / 3)


def _steady(text: str, busy: tuple[int, ...] | None = None) -> Any:
    """The campus with every UltraServer (or the first ``busy[k]`` of hall k) held by one long
    job: a steady, predictable load."""
    sim = _build(text)
    for k, h in enumerate(sim.halls):
        for _ in range(h.topo.ultraservers if busy is None else busy[k]):
            j = h.jobs.add("x", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e25, submit=0)
            h.pool.queue.append(j)
    return sim


def test_a_campus_cap_is_respected_and_shared_by_it_power() -> None:
    steady = _campus_toml((2, 4), arrivals=0, services=False) + "\n[failures]\nchip_hazard_per_h = 0\n"
    free = _steady(steady).advance(30)["factory_ts"]["facility_power_w"]
    cap = 0.8 * float(free[-1])
    sim = _steady(steady.replace("[training]", f"[power]\ncampus_cap_w = {cap}\n\n[training]", 1))
    f = sim.advance(30)
    p = f["factory_ts"]["facility_power_w"]
    # From the first step the grid stays at the cap: each hall meets its share inside the step.
    assert (p <= cap * 1.005).all()
    assert (p >= cap * 0.97).all()  # and the work fills what the cap allows
    np.testing.assert_allclose(f["factory_ts"]["facility_cap_w"], cap)
    # Shared: the halls' caps sum to the campus cap; both halls slowed down.
    caps = np.array([h.pool.facility.cap.facility_w for h in sim.halls])
    np.testing.assert_allclose(caps.sum(), cap, rtol=1e-12)
    assert (f["hall_ts"]["clock"][-2:] < 0.99).all()


def test_a_campus_cap_gives_every_busy_chip_one_clock() -> None:
    """Hall 0 full, hall 1 half busy. The campus cap is shared so that every busy chip runs at
    one clock, as inside one hall: each hall sheds dynamic power in proportion to what it
    draws. (Shares in proportion to IT power would make the half-idle hall shed as large a
    fraction of its IT power, mostly idle power no clock sheds, so its chips would run slower.)
    The shares still sum to the campus cap, and the grid stays at it."""
    steady = _campus_toml((2, 4), arrivals=0, services=False) + "\n[failures]\nchip_hazard_per_h = 0\n"
    free = _steady(steady, busy=(2, 2)).advance(30)["factory_ts"]["facility_power_w"]
    cap = 0.85 * float(free[-1])
    sim = _steady(
        steady.replace("[training]", f"[power]\ncampus_cap_w = {cap}\n\n[training]", 1), busy=(2, 2)
    )
    f = sim.advance(30)
    p = f["factory_ts"]["facility_power_w"]
    assert (p <= cap * 1.005).all() and (p[-5:] >= cap * 0.99).all()
    clk = np.asarray(f["hall_ts"]["clock"]).reshape(-1, 2)[-5:]
    assert (clk < 0.95).all()
    np.testing.assert_allclose(clk[:, 0], clk[:, 1], rtol=0.005)
    caps = np.array([h.pool.facility.cap.facility_w for h in sim.halls])
    np.testing.assert_allclose(caps.sum(), cap, rtol=1e-12)

    # A job starts in hall 1 under the binding cap: that hall slows inside the step to hold its
    # share (its chips below hall 0's clock), the grid stays at the cap, and from the next step
    # the new shares give both halls one clock again (the next clocks are solved again after
    # the campus moves the shares).
    h1 = sim.halls[1]
    j = h1.jobs.add("y", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e25, submit=h1.t_s)
    h1.pool.queue.append(j)
    g = sim.advance(3)
    assert (g["factory_ts"]["facility_power_w"] <= cap * 1.005).all()
    clk = np.asarray(g["hall_ts"]["clock"]).reshape(-1, 2)
    assert clk[0, 1] < clk[0, 0] - 0.01
    np.testing.assert_allclose(clk[1:, 0], clk[1:, 1], rtol=0.005)


def test_a_cooling_failure_in_one_hall_heats_that_hall_only() -> None:
    base = _campus_toml((2, 2), arrivals=2000)
    fault = (
        '[[events]]\nat_h = 0.2\nkind = "chiller_trip"\ntarget = "hall:1"\nvalue = 3\n\n'
        '[[events]]\nat_h = 0.2\nkind = "cooling_tower_loss"\ntarget = "hall:1"\nvalue = 3\n'
    )
    a = _build(base).advance(180)
    b = _build(base + fault).advance(180)
    ha, hb = a["hall_ts"], b["hall_ts"]
    for col in ("max_chip_temp_c", "coolant_return_c", "power_w", "clock"):
        np.testing.assert_array_equal(ha[col][0::2], hb[col][0::2])  # hall 0 untouched
    assert hb["coolant_return_c"][1::2].max() > ha["coolant_return_c"][1::2].max() + 1.0
    ev = b["events"]
    trips = [d for k, d in zip(ev["kind"], ev["detail"], strict=True) if k == "chiller_trip"]
    assert trips and all(d.startswith("hall 1:") for d in trips)
    assert [t for k, t in zip(ev["kind"], ev["target"], strict=True) if k == "chiller_trip"] == ["hall:1"]


def test_ids_are_unique_across_the_campus() -> None:
    sim = _build(_campus_toml((2, 3), arrivals=400))
    f = sim.advance(60)
    us = f["ultraserver_ts"]
    t0 = us["time_s"] == us["time_s"][0]
    np.testing.assert_array_equal(us["ultraserver_id"][t0], np.arange(5))
    rows = f["row_ts"]
    r0 = rows["time_s"] == rows["time_s"][0]
    np.testing.assert_array_equal(rows["row_id"][r0], np.arange(3))  # 1 row + 2 rows of 2 UltraServers
    np.testing.assert_array_equal(rows["hall_id"][r0], [0, 1, 1])
    assert sim.topo.chips == 5 * 144 and len(np.unique(sim.topo.chip_us)) == 5
    ids = np.asarray(f["jobs"]["job_id"])
    assert len(ids) > 10 and len(np.unique(ids)) == len(ids)
    # Failing UltraServer 3 (the second of hall 1) fails it there, not in hall 0.
    sim.inject("fail_ultraserver", "3", duration_s=3600)
    g = sim.advance(2)
    assert int(sim.halls[1].chip_hw_failed[144:288].sum()) == 144 and not sim.halls[0].chip_hw_failed.any()
    assert "ultraserver:3" in list(g["events"]["target"])


def test_a_single_hall_is_unchanged_and_a_one_hall_campus_matches_it() -> None:
    one = parse(SMALL_TOML, "small.toml")
    _, sim = build_simulation(one)
    assert isinstance(sim, Hall) and len(sim.pools) == 1
    text = SMALL_TOML.replace("[hall]", "[[halls]]")
    _, camp = build_simulation(parse(text, "campus.toml"))
    assert isinstance(camp, Campus)
    for _ in range(2):
        a, b = sim.advance(90), camp.advance(90)
        for table in ("factory_ts", "ultraserver_ts", "row_ts", "hall_ts", "service_ts", "jobs", "system_ts"):
            for col, v in a[table].items():
                w = b[table][col]
                if isinstance(v, list):
                    assert v == list(w), (table, col)
                else:
                    assert np.array_equal(v, w, equal_nan=v.dtype.kind == "f"), (table, col)


def _err(text: str) -> str:
    with pytest.raises(ScenarioError) as e:
        build_simulation(parse(text, "campus.toml"))
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_bad_campuses_are_refused_naming_the_key() -> None:
    assert "halls" in _err(_campus_toml(()).replace("[training]", "halls = []\n\n[training]", 1))
    assert "halls" in _err(_campus_toml((1,) * (MAX_HALLS + 1), services=False))
    # 3 halls of 5,000 UltraServers of 144 chips: 2,160,000 chips, over the campus limit.
    msg = _err(_campus_toml((5000, 5000, 5000), services=False))
    assert msg.startswith("campus.toml: halls:") and "2,160,000" in msg
    assert "not both" in _err(_campus_toml((2,)) + '\n[hall]\nsystem = "trn3-gen2"\n')
    ev = '[[events]]\nat_h = 1\nkind = "chiller_trip"\ntarget = "hall:2"\n'
    assert "events[0].target" in _err(_campus_toml((2, 2)) + ev)
    cap = '[[events]]\nat_h = 1\nkind = "power_cap"\nvalue = 1e6\n'
    assert "events[0].target" in _err(_campus_toml((2, 2)) + cap)
    assert "power.campus_cap_w" in _err(SMALL_TOML + "\n[power]\ncampus_cap_w = 1e6\n")


def test_floor_build_picks_the_model_of_the_site() -> None:
    p = parse(_campus_toml((1, 1)), "c.toml").to_params()
    assert isinstance(model.build(p), Campus)


def test_the_campus_job_tables_read_as_one() -> None:
    sim = _build(_campus_toml((2, 3), arrivals=400))
    sim.advance(30)
    jobs = sim.jobs
    assert jobs.n == sum(h.jobs.n for h in sim.halls) > 0
    ids = jobs.a["id"]
    assert len(np.unique(ids)) == len(ids)


def test_a_halls_own_cooling_changes_that_hall_only() -> None:
    base = _campus_toml((2, 2), arrivals=400)
    own = base.replace(
        '[[halls]]\nsystem = "trn3-gen2"\nultraservers = 2\nultraservers_per_row = 2\n\n[training]',
        '[[halls]]\nsystem = "trn3-gen2"\nultraservers = 2\nultraservers_per_row = 2\n'
        "[halls.cooling]\nsupply_setpoint_c = 40\n\n[training]",
    )
    assert own != base
    a, b = _build(base).advance(60)["hall_ts"], _build(own).advance(60)["hall_ts"]
    np.testing.assert_array_equal(a["coolant_return_c"][0::2], b["coolant_return_c"][0::2])
    # The second hall's loops run from a 40 °C supply instead of the default: with the same
    # load, the same flow and the same heat, every return temperature is shifted by the difference.
    from twin.spec.params import CoolingParams

    shift = 40 - CoolingParams().supply_setpoint_c
    assert shift > 0
    np.testing.assert_allclose(b["coolant_return_c"][1::2] - a["coolant_return_c"][1::2], shift, atol=1e-4)
    msg = _err(own.replace("supply_setpoint_c = 40", "throttle_temp_c = 200"))
    assert msg.startswith("campus.toml: halls[1].cooling.throttle_temp_c")


def test_validate_counts_every_halls_ultraservers(tmp_path: Any) -> None:
    """`twin validate` on a campus names its halls and the UltraServers of all of them (2 + 4 = 6
    of 144 chips: 864), not the first hall's."""
    from click.testing import CliRunner

    from tui.cli import main

    f = tmp_path / "campus.toml"
    f.write_text(_campus_toml((2, 4)))
    r = CliRunner().invoke(main, ["validate", str(f)])
    assert r.exit_code == 0, r.output
    assert "2 halls, 6 x Trn3 Gen2 UltraServer, 864 chips" in r.output


def test_the_campus_plant_is_every_halls_plant() -> None:
    """Every chiller of hall 1 tripped: the campus's factory_ts counts that hall's chillers as
    failed and the running ones of both halls (hand count from the halls' own plants), and its
    free-cooling share lies between the halls' (a weighted mean, not the first hall's)."""
    base = _campus_toml((2, 2), arrivals=2000)
    fault = '[[events]]\nat_h = 0\nkind = "chiller_trip"\ntarget = "hall:1"\nvalue = 3\n'
    camp = _build(base + fault)
    units = [h.pools[0].p.cooling.chiller_units for h in camp.halls]
    f = camp.advance(30)["factory_ts"]
    assert (f["chillers_failed"] == units[1]).all()
    assert (f["chillers_running"] <= units[0]).all()
    halls = [h.last for h in camp.halls]
    lo, hi = sorted(h["free_cooling_fraction"] for h in halls)
    assert lo - 1e-12 <= f["free_cooling_fraction"][-1] <= hi + 1e-12
    assert f["chillers_running"][-1] == sum(int(h["chillers_running"]) for h in halls)


def test_a_campus_reports_each_system_once_over_all_its_halls(tmp_path: Any) -> None:
    """Two halls of one system: ``twin compare``'s per-system rows (``per_system``) and the
    ``system_summary`` view give one row, holding both halls' chips, and its sums are the whole
    campus's (one system: its energy, work, cost and days are the run's)."""
    import duckdb

    from scenarios.runner import run
    from storage.kpis import per_system, whole_run

    text = _campus_toml((2, 3))
    out = tmp_path / "c.duckdb"
    run(parse(text, "c.toml"), text, out, duration_s=2 * 3600)
    con = duckdb.connect(str(out), read_only=True)
    (run_id,) = con.sql("SELECT run_id FROM runs").fetchall()[0]
    halls = con.sql("SELECT count(DISTINCT hall_id) FROM system_ts").fetchall()[0][0]
    per = per_system(con, run_id)
    view = con.sql("SELECT * FROM system_summary").to_arrow_table().to_pylist()
    whole = whole_run(con, run_id)
    con.close()
    assert halls == 2  # recorded per hall
    assert [r["system"] for r in per] == ["trn3-gen2"] and len(view) == 1
    (r,) = per
    assert r["chips"] == (2 + 3) * TRN3.chips
    assert r["days"] == pytest.approx(2 / 24, rel=1e-12)
    for key in ("it_mwh", "facility_mwh", "job_flop", "tokens", "capex_usd", "cost_usd", "chip_hours"):
        assert r[key] == pytest.approx(whole[key], rel=1e-9), key
        if key in view[0]:
            assert view[0][key] == pytest.approx(whole[key], rel=1e-9), key
    assert r["job_share"] == pytest.approx(1.0) and whole["systems"]["trn3-gen2"]["chips"] == r["chips"]


@pytest.mark.parametrize("halls", [(4,), (2, 3)])
def test_jobs_every_interval_write_fewer_rows_and_the_same_final_table(
    tmp_path: Any, halls: tuple[int, ...]
) -> None:
    """``[telemetry] jobs_interval_s``: waiting and running jobs are written again only every
    interval (a job that changes state at once), and every job at the end: the recording's jobs
    table is the one written at every advance, column for column, from fewer rows. A busy hall
    (a queue forms) over 6 hours, against the same run at interval 0."""
    import duckdb

    from scenarios.runner import Session

    tables, rows = [], []
    for every in (0, 1800):
        text = _campus_toml(halls, arrivals=20000, extra=f"[telemetry]\njobs_interval_s = {every}\n")
        out = tmp_path / f"j{every}.duckdb"
        seen: list[int] = []
        session = Session(
            parse(text, "j.toml"),
            text,
            out,
            duration_s=6 * 3600,
            publish_live=False,
            on_chunk=lambda f, seen=seen: seen.append(len(f["jobs"]["job_id"])),
        )
        for _ in range(36):  # ten-minute advances, as the live console makes them
            session.advance(10)
        session.close()
        con = duckdb.connect(str(out), read_only=True)
        tables.append(
            con.sql("SELECT * EXCLUDE (run_id) FROM jobs ORDER BY job_id").to_arrow_table().to_pylist()
        )
        waiting = con.sql("SELECT count(*) FROM jobs WHERE state = 'queued'").fetchall()[0][0]
        con.close()
        rows.append(sum(seen))
    assert waiting > 0  # a queue formed: waiting jobs' rows were held back between refreshes
    assert tables[0] == tables[1]
    assert rows[1] < rows[0]
