"""The grid's view on screen and in the alarms: the Grid screen shows the connection's peak, ramps
and band variances of the recording (checked by hand from grid_ts and against the run's KPIs),
and a ramp limit raises the 'grid ramp limit' alarm in exactly the steps whose |dP|/dt exceeds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scenarios.runner import run
from scenarios.spec import parse
from storage.kpis import grid_kpis
from storage.queries import ALARM_FLAGS, panel_sql, ramp_limit, render
from storage.reader import latest_run_id, open_run_file
from storage.report import grid_report, load_run, render_html
from tests.conftest import SMALL_TOML
from tests.test_tui import replay_app, settle, wait_for
from tui.console import fmt

BASE = SMALL_TOML.replace("duration_h = 6", "duration_h = 2", 1)
LIMIT = 5e-5  # MW/min: the small hall (~87 kW) ramps 1e-6 to 6e-4 MW/min from step to step
GRID = f"\n[grid]\nramp_limit_mw_per_min = {LIMIT}\nbattery_power_w = 5000.0\nbattery_energy_j = 3.6e7\n"
RECORDED = BASE + GRID + "\n[telemetry]\ngrid_interval_s = 5\n"


def _record(tmp: Path, text: str) -> Path:
    out = tmp / "run.duckdb"
    run(parse(text, "g.toml"), text, out, duration_s=2 * 3600)
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("grid"), RECORDED)


@pytest.fixture(scope="module")
def per_step(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory.mktemp("step"), BASE + GRID)


def _flags(con: Any, limit: float) -> dict[int, tuple[bool, float | None]]:
    rid = latest_run_id(con)
    q = f"WITH {ALARM_FLAGS} SELECT time_s, active, value FROM flags WHERE alarm = 'grid ramp limit'"
    q = render(q, {"run_id": rid, "lo": -1, "t": 2**62, "ramp_limit_mw_per_min": limit, "slo_alarm": 0.9})
    return {int(t): (bool(a), v) for t, a, v in con.sql(q).fetchall()}


def test_a_ramp_limit_flags_the_steps_whose_ramp_exceeds_it(per_step: Path) -> None:
    con = open_run_file(per_step)
    try:
        rid = latest_run_id(con)
        assert ramp_limit(con, rid) == LIMIT
        t, p = (
            np.array(c)
            for c in zip(
                *con.sql("SELECT time_s, facility_power_w FROM factory_ts ORDER BY 1").fetchall(), strict=True
            )
        )
        # By hand: |dP| / dt between consecutive steps, in MW per minute.
        ramp = np.abs(np.diff(p)) / np.diff(t) * 60 / 1e6
        hand = {int(s) for s, r in zip(t[1:], ramp, strict=True) if r > LIMIT}
        flags = _flags(con, LIMIT)
        assert 0 < len(hand) < len(t) - 1  # the limit splits the steps
        assert {s for s, (a, _) in flags.items() if a} == hand
        assert np.allclose([flags[int(s)][1] for s in t[1:]], ramp, rtol=1e-9)
        # No limit: no condition at all.
        assert _flags(con, 0.0) == {}
        # The report counts the same steps and the largest ramp.
        rep = grid_report(con, rid)
        assert rep["grid_ramp_breach_steps"] == len(hand)
        assert rep["grid_ramp_step_max_mw_per_min"] == pytest.approx(ramp.max(), rel=1e-9)
        # The report's grid table (without grid_ts: the limit's rows only) and its timeline.
        html = render_html([load_run(con, rid, str(per_step))])
        assert (
            f'<tr data-kpi="grid_ramp_breach_steps"><td>Steps over the ramp limit</td><td>{len(hand)}</td>'
            in html
        )
        assert '<tr data-kpi="grid_peak_mw"><td>Peak at the connection [MW]</td><td>–</td>' in html
        assert "grid ramp limit" in html
        # Each alarm episode starts at a step over the limit whose step before was not.
        eps = con.sql(
            panel_sql("alarm_episodes", {"run_id": rid, "lo": -1, "t": 2**62, "ramp_limit_mw_per_min": LIMIT})
        ).fetchall()
        raised = sorted(r[2] for r in eps if r[0] == "grid ramp limit")
        assert raised == sorted(s for s in hand if s - 60 not in hand)
    finally:
        con.close()


def test_with_grid_ts_the_limit_reads_the_connections_minute_means(recorded: Path) -> None:
    con = open_run_file(recorded)
    try:
        p = np.array(
            [r[0] for r in con.sql("SELECT p_w FROM grid_ts WHERE hall_id = -1 ORDER BY time_s").fetchall()]
        )
        minutes = p.reshape(-1, 12).mean(axis=1)  # 5 s bins, 60 s steps: a minute is a step
        ramp = np.abs(np.diff(minutes)) / 1e6
        flags = _flags(con, LIMIT)
        assert np.allclose([flags[60 * (k + 1)][1] for k in range(len(ramp))], ramp, rtol=1e-9)
        assert {s for s, (a, _) in flags.items() if a} == {60 * (k + 1) for k in np.flatnonzero(ramp > LIMIT)}
    finally:
        con.close()


async def test_the_grid_screen_shows_the_connections_figures(recorded: Path) -> None:
    from tui.screens.grid import GridScreen
    from tui.widgets.info import InfoList
    from tui.widgets.plot import BraillePlot

    con = open_run_file(recorded)
    try:
        rid = latest_run_id(con)
        p = np.array(
            [r[0] for r in con.sql("SELECT p_w FROM grid_ts WHERE hall_id = -1 ORDER BY time_s").fetchall()]
        )
        kpi = grid_kpis(con, rid)
        app = replay_app(con)
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.press("end", "f9")
            await settle(pilot, app)
            assert isinstance(app.screen, GridScreen)
            assert app.core.t == 7140 and app.core.window_s >= 7200  # the window holds the whole run
            shown = {k: v for k, v, _, _ in app.screen.query_one("#grid-figures", InfoList).items}
            assert shown["source"] == "grid_ts, 5 s"
            # By hand from the recording: 1440 bins of 5 s.
            assert len(app.screen.query_one("#grid-power", BraillePlot)._t) == len(p) == 1440
            assert shown["peak"] == fmt.si(p.max(), "W", 4)
            assert shown["swing"] == fmt.si(p.max() - p.min(), "W", 4)
            assert shown["peak/avg"] == f"{p.max() / p.mean():,.4f}"
            assert shown["ramp"] == fmt.si(np.abs(np.diff(p)).max() / 5, "W/s", 4)
            minutes = p.reshape(-1, 12).mean(axis=1)
            assert shown["ramp/min"] == fmt.si(np.abs(np.diff(minutes)).max(), "W/min", 4)
            # The bands: the run's KPIs (the window is the whole run); above 0.1 Hz the 5 s samples
            # (Nyquist 0.1 Hz) see nothing.
            assert shown["0-0.01 Hz"] == f"{kpi['grid_band_lt_0_01hz_mw2']:.4g} MW²"
            assert shown["0.01-0.1 Hz"] == f"{kpi['grid_band_0_01_0_1hz_mw2']:.4g} MW²"
            assert shown["0.1-1 Hz"] == shown["> 1 Hz"] == "> Nyquist"
            limit = {k: v for k, v, _, _ in app.screen.query_one("#grid-limit", InfoList).items}
            ramp = np.abs(np.diff(minutes)) / 1e6
            assert limit["ramp limit"] == f"{LIMIT:g} MW/min"
            assert limit["steps over it"] == f"{int((ramp > LIMIT).sum()):,}"
            battery = {k: v for k, v, _, _ in app.screen.query_one("#grid-battery", InfoList).items}
            assert battery["energy"] == "0.010 MWh" and battery["state of charge"] == "not recorded"
            # The console's alarms: stepped back to the last step over the limit, it is active there.
            last = 60 * (int(np.flatnonzero(ramp > LIMIT)[-1]) + 1)
            await pilot.press(*["comma"] * ((7140 - last) // 60))
            await settle(pilot, app)
            await wait_for(pilot, lambda: app.core.t == last and app.core.alarms.active is not None)
            await settle(pilot, app)
            hits = [a for a in app.core.alarms.active if a.alarm == "grid ramp limit"]
            assert len(hits) == 1 and hits[0].value == pytest.approx(ramp[last // 60 - 1], rel=1e-9)
    finally:
        con.close()


async def test_without_grid_ts_the_screen_reads_facility_power_per_step(per_step: Path) -> None:
    from tui.widgets.info import InfoList

    con = open_run_file(per_step)
    try:
        p = np.array(
            [r[0] for r in con.sql("SELECT facility_power_w FROM factory_ts ORDER BY time_s").fetchall()]
        )
        app = replay_app(con)
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.press("end", "f9")
            await settle(pilot, app)
            shown = {k: v for k, v, _, _ in app.screen.query_one("#grid-figures", InfoList).items}
            assert shown["source"] == "factory_ts, 60 s steps"
            assert shown["peak"] == fmt.si(p.max(), "W", 4)
            # One step a minute: the ramp per minute is the largest change between steps.
            assert shown["ramp/min"] == fmt.si(np.abs(np.diff(p)).max(), "W/min", 4)
            assert shown["ramp"] == fmt.si(np.abs(np.diff(p)).max() / 60, "W/s", 4)
            # 60 s samples see up to 1/120 Hz: only the slowest band.
            assert shown["0.01-0.1 Hz"] == "> Nyquist" and shown["0-0.01 Hz"].endswith("MW²")
    finally:
        con.close()


async def test_a_window_of_nan_power_shows_n_a_and_a_note(recorded: Path, tmp_path: Path) -> None:
    """A recording whose grid_ts power is NaN (no run writes one: an edited or damaged part) has no
    peak-to-average: the screen says n/a and why, and the console keeps running."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from storage.parts import parts_dir
    from tests.test_outputs_safety import copy_recording
    from tui.widgets.info import InfoList

    f = copy_recording(recorded, tmp_path / "nan.duckdb")
    parts = sorted(parts_dir(f).glob("run_id=*/table=grid_ts/part-*.parquet"))
    assert parts
    for part in parts:
        t = pq.read_table(part)
        i = t.schema.get_field_index("p_w")
        nan = pa.array(np.full(t.num_rows, np.nan), t.schema.field(i).type)
        pq.write_table(t.set_column(i, t.schema.field(i), nan), part)
    con = open_run_file(f)
    try:
        app = replay_app(con)
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.press("end", "f9")
            await settle(pilot, app)
            shown = {k: v for k, v, _, _ in app.screen.query_one("#grid-figures", InfoList).items}
            assert shown["peak/avg"] == "n/a" and shown["0-0.01 Hz"] == "n/a"
            assert shown["note"].startswith("1,440 of 1,440 samples not a number")
            assert app.return_code in (None, 0)
    finally:
        con.close()
