"""The Textual console: pure parts, live mode (speed, pause, what-ifs, the live-what-if → headless
re-run identity), replay (scrubbing, every screen against its SQL), SQL console, bad files, and SVG
snapshots.

Everything is built here from a small inline scenario (no ../shared). Live tests drive the real
simulation worker thread; replay tests read a file made by ``scenarios.runner.run``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scenarios.runner import Session, rerun, run, same_telemetry
from scenarios.spec import parse
from storage import queries as Q
from storage.errors import QueryError
from storage.reader import latest_run_id, open_run_file
from storage.sqlguard import check_user_sql
from tui.console import fmt
from tui.console.pacing import Pacer, SpeedControl

TINY = """
name = "tiny"
seed = 11
dt_s = 60
duration_h = 6

[hall]
system = "trn3-gen2"
ultraservers = 4
ultraservers_per_row = 2

[training]
arrivals_per_day = 2000

[[services]]
name = "chat"
model = "llama-3.1-70b"
replicas = 2
mean_requests_per_s = 20.0

# UltraServer 1 fails for 12 h: the queue builds up (and the snapshots show a failure).
[[events]]
at_h = 14
kind = "fail_ultraserver"
target = 1
duration_h = 12
"""

RUN_HOURS = 30


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tui") / "run.duckdb"
    run(parse(TINY, "tiny.toml"), TINY, out, duration_s=RUN_HOURS * 3600)
    return out


@pytest.fixture
def replay_con(run_file: Path) -> Iterator[Any]:
    con = open_run_file(run_file)
    try:
        yield con
    finally:
        con.close()


def replay_app(con: Any) -> Any:
    from tui.app import TwinApp

    # A fixed display name so the snapshots do not depend on the temporary directory.
    return TwinApp(replay_con=con, replay_run_id=latest_run_id(con), replay_path="run.duckdb")


def live_app(tmp_path: Path, name: str = "live.duckdb", days: float = 30) -> tuple[Any, Session]:
    from tui.app import TwinApp

    session = Session(parse(TINY, "test"), TINY, tmp_path / name, duration_s=int(days * 86400))
    return TwinApp(session=session), session


# Waits are on conditions the app exposes (its time, step counters, answered requests, a worker's
# state), polled while the event loop runs; no test depends on how fast the machine is. The poll
# count is only a guard against a hang (hours on any machine), never an expectation.
HANG_GUARD = 200_000


async def wait_for(pilot: Any, cond: Callable[[], bool]) -> None:
    for _ in range(HANG_GUARD):
        if cond():
            return
        if pilot.app._exit_renderables or pilot.app.return_code not in (None, 0):
            raise AssertionError(f"the app stopped with an error: {pilot.app._exit_renderables}")
        await pilot.pause(0.02)
    raise AssertionError("the app never reached the condition")


async def settle(pilot: Any, app: Any) -> None:
    """Wait until the loader has answered every panel request (replay panels are asynchronous)."""
    await pilot.pause()
    await wait_for(pilot, lambda: not app.panels_pending())
    await pilot.pause()


async def quiet(pilot: Any, app: Any) -> None:
    """Live and paused: wait until the worker is idle and the UI has shown its last step."""
    await wait_for(pilot, lambda: app.sim_idle.is_set() and app.core.steps_shown == app.core.live.steps_done)
    await pilot.pause()


async def refreshes(pilot: Any, app: Any, n: int = 2) -> None:
    """Let the current screen run ``n`` ticks that may redraw its plots."""
    start = app.screen.budget.redraws
    await wait_for(pilot, lambda: app.screen.budget.redraws >= start + n)


def status_text(app: Any) -> str:
    from tui.widgets.status import StatusBar

    return str(app.screen.query_one(StatusBar).plain)


def tile(app: Any, key: str) -> str:
    from tui.widgets.kpi import KpiTile

    t = app.screen.query_one(f"#kpi-{key}", KpiTile)
    assert t.value_text in str(t.render())  # what is on screen, not only the attribute
    return str(t.value_text)


def sql_cols(con: Any, name: str, params: dict[str, Any], **options: Any) -> dict[str, Any]:
    return Q.run_sql(con, Q.panel_sql(name, params, **options))


def same_cols(a: dict[str, Any], b: dict[str, Any], rtol: float = 1e-9) -> None:
    """Equal columns (floats to ``rtol``: running sums are added in another order)."""
    assert set(a) == set(b), (sorted(a), sorted(b))
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert len(x) == len(y), k
        if x.dtype.kind in "fc" or y.dtype.kind in "fc":
            np.testing.assert_allclose(x.astype(float), y.astype(float), rtol=rtol, atol=1e-9, err_msg=k)
        else:
            assert [str(v) for v in x.tolist()] == [str(v) for v in y.tolist()], k


# ---------------------------------------------------------------------- pure parts
def test_pacer_turns_wall_time_into_steps() -> None:
    sc = SpeedControl(3)  # 3600×
    p = Pacer(sc, dt_s=60, chunk_steps=1440, slice_s=0.03)
    assert p.slice_steps == 1  # nothing measured yet: one step at a time
    p.record(30, 0.3)  # 10 ms a step -> 3 steps fit in a 30 ms slice
    assert p.slice_steps == 3
    assert p.due(100.0) == 0
    assert p.due(100.04) == 2  # one simulated hour per wall second: 2.4 steps in 40 ms
    assert p.due(101.0) == 3  # 58 steps owed, capped at one slice
    sc.set(1)  # 1×: one 60 s step per wall minute
    assert p.due(101.0) == 0
    assert p.due(131.0) == 0 and math.isclose(p.wait_s(), 30.0)
    assert p.due(161.0) == 1
    sc.set(4)
    assert p.due(161.5) == 3  # max: one slice at a time, whatever the chunk
    p.record(20, 0.2)  # the cost is a moving average: 10 ms again
    assert p.slice_steps == 3
    p.step_cost_s = 1e-6  # very cheap steps: a slice never exceeds the storage chunk
    assert p.slice_steps == 1440
    p.step_cost_s = 0.01
    sc.toggle()
    assert sc.paused and p.due(200.0) == 0 and p.wait_s() == math.inf
    sc.toggle()
    assert sc.label == "max"
    sc.set(3)
    p.step_cost_s = 0.01
    p.due(300.0)
    assert p.due(400.0) == 3  # debt is capped at one slice, no catch-up burst


def test_redraw_budget_spaces_redraws_to_a_share_of_a_core() -> None:
    from tui.console.pacing import RedrawBudget

    b = RedrawBudget(share=0.1, max_gap_s=1.0)
    assert b.due(10.0, 5.0, limited=True)  # the first tick always redraws
    # The redraw took 50 ms of UI CPU: at 10 % of a core the next one may come 0.5 s later.
    assert not b.due(10.25, 5.05, limited=True)
    assert b.due(10.5, 5.05, limited=True)  # 50 ms in 0.5 s = 10 %
    assert b.due(10.75, 5.051, limited=False)  # below max speed every tick redraws
    assert not b.due(11.0, 5.2, limited=True)
    assert b.due(11.75, 5.9, limited=True)  # never more than max_gap_s without a redraw
    assert b.redraws == 4


def test_tick_messages_merge() -> None:
    from tui.app import SimTick

    assert SimTick(60).can_replace(SimTick(0))


def test_non_ui_modules_do_not_import_textual() -> None:
    code = (
        "import sys, tui.console.feed, tui.console.pacing, tui.cli, tui.console.fmt, tui.console.scale, tui.console.whatif, storage.queries; "
        "assert 'textual' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_fmt_and_scale() -> None:
    from tui.console.scale import levels, text_colour

    assert fmt.parse_time("d3 14:05") == 2 * 86400 + 14 * 3600 + 300
    assert fmt.parse_time("14:00") == 14 * 3600 and fmt.parse_time("38.5") == 138600
    assert fmt.parse_time("2d") == 172800 and fmt.parse_time("soon") is None
    assert fmt.span(90) == "90 s" and fmt.span(5400) == "90 min" and fmt.span(3 * 86400) == "3.0 d"
    assert levels([0.0, 0.5, 1.0, 2.0, -1.0, np.nan], 0.0, 1.0).tolist() == [0, 4, 7, 7, 0, -1]
    assert text_colour("#fde725") == "#000000" and text_colour("#440154") == "#ffffff"


def test_whatifs_build_inject_arguments() -> None:
    from tui.console.whatif import WHAT_IFS, Context, build, by_key

    ctx = Context(
        us=3, chip=5, chips_per_us=144, chips_per_server=4, us_row=(0, 0, 1, 1), facility_w=2e6, row_it_w=5e5
    )
    assert build(by_key("c"), ctx) == ("fail_chip", "437", 0.0, 4 * 3600)
    assert build(by_key("v"), ctx) == ("fail_server", "109", 0.0, 4 * 3600)
    assert build(by_key("u"), ctx, duration_h=0) == ("fail_ultraserver", "3", 0.0, 0)
    assert build(by_key("d"), ctx) == ("drain_ultraserver", "3", 0.5, 4 * 3600)
    assert build(by_key("p"), ctx) == ("cdu_pump_failure", "1", 0.3, 7200)
    assert build(by_key("a"), ctx) == ("power_cap", "facility", 1.8e6, 7200)
    assert build(by_key("b"), ctx, 0.25) == ("power_cap", "row:1", 2.5e5, 7200)
    assert build(by_key("s"), ctx) == ("inference_surge", "", 2.0, 3600)
    assert build(by_key("r"), ctx) == ("cooling_restore", "", 0.0, 0)
    with pytest.raises(ValueError):
        build(by_key("a"), ctx, -1.0)
    assert len({w.key for w in WHAT_IFS}) == len(WHAT_IFS)
    from twin.compose.sim import EVENT_KINDS

    assert {w.kind for w in WHAT_IFS} <= set(EVENT_KINDS)


def test_user_sql_guard(replay_con: Any) -> None:
    ok = [
        "SELECT 1",
        "DESCRIBE factory_ts",
        "SUMMARIZE SELECT 1",
        "EXPLAIN SELECT 1",
        "SHOW TABLES",
        "PRAGMA table_info('jobs')",
        "WITH a AS (SELECT 1) SELECT * FROM a",
        "FROM factory_ts LIMIT 1",
    ]
    for sql in ok:
        assert check_user_sql(replay_con, sql, strict=True), sql
    for sql in (
        "DELETE FROM jobs",
        "COPY jobs TO 'x.csv'",
        "ATTACH 'x.db'",
        "PRAGMA threads=1",
        "SET threads=1",
        "INSTALL httpfs",
        "CREATE TABLE x (a INT)",
        "CALL pragma_version()",
    ):
        with pytest.raises(QueryError, match="refused"):
            check_user_sql(replay_con, sql, strict=False)
    for sql in (
        "SELECT * FROM read_csv('/etc/passwd')",
        "FROM '/etc/passwd'",
        "SELECT * FROM 'x.parquet'",
        "SELECT (SELECT count(*) FROM glob('*'))",
        "SELECT read_text('x')",
        "EXPLAIN SELECT * FROM read_parquet('y')",
        "PRAGMA enable_profiling",
        "WITH a AS (FROM read_json('z')) SELECT * FROM a",
    ):
        with pytest.raises(QueryError, match="refused"):
            check_user_sql(replay_con, sql, strict=True)


def test_panel_sql_is_literal(replay_con: Any) -> None:
    p = {"run_id": "a'b", "t": 3600, "window_s": 86400}
    sql = Q.panel_sql("plot_power", p)
    assert "'a''b'" in sql and "3600 - 86400" in sql and "$" not in sql
    jobs = Q.panel_sql(
        "jobs", {"run_id": "r", "t": 60}, view="queued", text="llama", sort="waiting_s", desc=True
    )
    assert "state IN ('queued')" in jobs and "ILIKE '%llama%'" in jobs and "ORDER BY waiting_s DESC" in jobs


# ---------------------------------------------------------------------- live
async def test_live_speed_pause_and_panels_match_the_file(tmp_path: Path) -> None:
    """Live panels come from memory; paused and flushed, each equals its SQL on the file."""
    from tui.console.feed import LIVE_PANELS, PanelReq
    from tui.widgets.plot import BraillePlot

    app, session = live_app(tmp_path)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            assert "LIVE" in status_text(app) and "3600×" in status_text(app)
            await wait_for(pilot, lambda: app.core.t is not None)
            first = app.core.t
            app.action_set_speed(4)  # max (Pilot's key presses wait for an idle CPU: not at max)
            await wait_for(pilot, lambda: app.core.t >= first + 20 * 3600)
            app.refresh_views()
            assert "max" in status_text(app)
            await pilot.press("space")  # pause
            await quiet(pilot, app)
            # The worker stopped after the step in progress when the key acted.
            assert app.core.sim_t_at_control is not None
            assert session.sim.t_s - app.core.sim_t_at_control <= session.params.dt_s
            app.refresh_views()
            last = session.sim.last
            t = int(last["time_s"])
            assert app.core.t == t > first
            assert fmt.sim_clock(t) in status_text(app) and "PAUSED" in status_text(app)
            assert tile(app, "pue") == f"{last['pue']:.3f}"
            assert tile(app, "it") == fmt.power(last["it_power_w"])
            assert tile(app, "facility") == fmt.power(last["facility_power_w"])
            assert tile(app, "chipmax") == fmt.temp(last["max_chip_temp_c"])
            assert tile(app, "busy") == fmt.pct(last["chips_busy"] / last["chips_total"])
            sim_t = session.sim.t_s
            await refreshes(pilot, app, 2)  # paused: nothing moves over two refreshes
            assert session.sim.t_s == sim_t and fmt.sim_clock(t) in status_text(app)
            p = app.screen.query_one("#plot-power", BraillePlot)
            assert len(p._t) == min(1440, t // 60 + 1) and p._t[-1] == t  # the last 24 h of steps

            await wait_for(pilot, lambda: session.held_steps == 0)  # paused: the held steps are committed
            session.writer.flush()
            await wait_for(pilot, lambda: app.core.t_file == t)  # the loader sees the committed step
            con = session.writer.cursor()
            try:
                params = app.core.params(us=1, hall=0)
                for name in sorted(LIVE_PANELS - {"chips", "us_jobs"}):
                    live = app.core.live.panel(name, params)
                    same_cols(live, sql_cols(con, name, params), rtol=1e-9)
                # Chips: the live arrays are this step's, chip_ts samples on the hour.
                if t % 3600 == 0:
                    same_cols(
                        {k: v for k, v in app.core.live.panel("chips", params).items() if k != "clock"},
                        sql_cols(con, "chips", params),
                    )
                # The SQL panels (jobs) read the same file through the loader.
                req = PanelReq("jobs", "jobs", params, (("view", "all"),))
                assert app.core.file_req(req).sql == req.sql  # paused and flushed: the file is at t
                # Energy & cost, live: the cost panel runs on the live file and shows the run summary so far.
                from storage.kpis import whole_run
                from tui.screens.energy import usd
                from tui.widgets.info import InfoList

                k = whole_run(con, session.run_id)
            finally:
                con.close()
            await pilot.press("f5")
            want = (f"TCO so far ({k['days']:,.1f} d)", usd(k["total_cost_usd"]))
            await wait_for(
                pilot, lambda: want in [i[:2] for i in app.screen.query_one("#cost", InfoList).items]
            )
            assert k["total_cost_usd"] > 0 and k["days"] == pytest.approx((t + 60) / 86400)
            await pilot.press("3")  # resume at 60×
            await wait_for(pilot, lambda: app.core.t > t)
            await pilot.press("1")
            assert "PAUSED" in status_text(app)
        assert app._sim_done.is_set() and app._loader_done.is_set()  # the threads ended with the app
    finally:
        session.close("stopped")


async def test_live_whatifs_then_headless_rerun_is_identical(tmp_path: Path) -> None:
    """What-ifs injected live (menu, keys on the UltraServer screen, command palette) are recorded;
    re-running the recording headless with them gives identical telemetry."""
    from tui.console.whatif import build, by_key
    from tui.screens.whatif import WhatIfScreen

    app, session = live_app(tmp_path, days=2)
    out = session.out
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("4")  # 3600×
            await wait_for(pilot, lambda: app.core.t is not None and app.core.t >= 3600)
            await pilot.press("1")  # paused: what-ifs wait for the next step
            # Fail UltraServer 2: select it on the Floor, then the what-if menu.
            await pilot.press("f2", "right", "right")
            assert app.core.sel_us == 1  # two UltraServers per row: clamped at the row's end
            await pilot.press("down")
            assert app.core.sel_us == 3
            await pilot.press("left")
            assert app.core.sel_us == 2
            await pilot.press("i")
            assert isinstance(app.screen, WhatIfScreen)
            await pilot.press("u", "enter")
            assert not isinstance(app.screen, WhatIfScreen)
            # A facility power cap with an edited value (MW) and duration.
            await pilot.press("i", "a", "tab")
            app.screen.query_one("#whatif-value").value = "1.2"
            app.screen.query_one("#whatif-duration").value = "3"
            await pilot.press("enter")
            # Fail chip 5 of UltraServer 3 from the UltraServer screen.
            await pilot.press("f2", "right", "enter")
            assert app.current_mode == "ultraserver" and app.core.sel_us == 3
            await pilot.press(*["right"] * 5)
            assert app.core.sel_chip == 5
            await pilot.press("i", "c", "enter")
            await pilot.press("escape")
            assert app.current_mode == "floor"
            # Palette commands use the same what-ifs: a surge, a CDU failure, a drain.
            cmds = {
                c.title.split(":")[1].strip(): c
                for c in app.get_system_commands(app.screen)
                if c.title.startswith("What-if")
            }
            assert any(k.startswith("Inference surge") for k in cmds)
            for key in ("s", "p", "d"):
                app.inject(*build(by_key(key), app.core.whatif_context()))
            app.action_set_speed(4)  # max, to the end of the session
            await wait_for(
                pilot, lambda: len(app.core.live.injected) == 6 and "end of the session" in status_text(app)
            )
            await pilot.press("q")
    finally:
        session.close("stopped")
    con = open_run_file(out)
    try:
        ops = con.sql(
            "SELECT kind, arg, value, duration_s FROM events WHERE source = 'operator' ORDER BY time_s, rowid"
        ).fetchall()
    finally:
        con.close()
    assert [o[0] for o in ops] == [
        "fail_ultraserver",
        "power_cap",
        "fail_chip",
        "inference_surge",
        "cdu_pump_failure",
        "drain_ultraserver",
    ]
    assert ops[0][1] == "2" and ops[1][1:] == ("facility", 1.2e6, 3 * 3600) and ops[2][1] == str(3 * 144 + 5)
    dest = tmp_path / "rerun.duckdb"
    rerun(out, dest)
    assert same_telemetry(out, dest, ("factory_ts", "ultraserver_ts", "chip_ts")) == []


async def test_live_quit_key_stops_worker(tmp_path: Path) -> None:
    app, session = live_app(tmp_path, "q.duckdb")
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.core.t is not None)
            await pilot.press("f3", "f4", "f5")  # SQL panels in flight on the live file
            app.action_set_speed(4)  # max (Pilot's key presses wait for an idle CPU: not at max)
            await wait_for(pilot, lambda: app.core.t > 86400)
            await pilot.press("q")
            await wait_for(pilot, app._sim_done.is_set)
            # Quit acts within one simulated step, whatever the speed.
            assert app.core.sim_t_at_control is not None
            assert session.sim.t_s - app.core.sim_t_at_control <= session.params.dt_s
    finally:
        session.close("stopped")


async def test_live_whatif_at_max_speed_lands_on_the_next_step(tmp_path: Path) -> None:
    """At max speed the simulation looks at the controls after every step: a what-if is applied
    at the step after the one in progress when it was injected, not a storage chunk later."""
    app, session = live_app(tmp_path, "w.duckdb")
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_set_speed(4)
            await wait_for(pilot, lambda: app.core.t is not None and app.core.t > 6 * 3600)
            app.inject("power_cap", "facility", 1e6, 3600)
            await wait_for(pilot, lambda: len(app.core.live.injected_at) == 1)
            assert app.core.sim_t_at_control is not None
            assert 0 <= app.core.live.injected_at[0] - app.core.sim_t_at_control <= session.params.dt_s
            await pilot.press("1")
            await quiet(pilot, app)
            assert app.core.t >= app.core.live.injected_at[0]  # the clock shows the step it was applied at
            # From the menu: the clock holds while it is open; the what-if lands on the step after
            # the one shown, and the speed comes back.
            await pilot.press("5")
            await wait_for(
                pilot, lambda: app.core.t is not None and app.core.t > app.core.live.injected_at[0] + 3600
            )
            await pilot.press("i")
            await quiet(pilot, app)
            shown = app.core.t
            assert app.core.speed.paused  # the menu holds the clock
            await pilot.press("s", "enter")  # inference surge
            await wait_for(pilot, lambda: len(app.core.live.injected_at) == 2)
            assert app.core.live.injected_at[1] == shown + session.params.dt_s
            assert app.core.speed.label == "max"
    finally:
        session.close("stopped")
    con = open_run_file(session.out)
    try:
        rows = con.sql("SELECT time_s FROM events WHERE source = 'operator'").fetchall()
    finally:
        con.close()
    assert rows == [(t,) for t in app.core.live.injected_at]


async def test_live_stops_at_the_session_duration(tmp_path: Path) -> None:
    app, session = live_app(tmp_path, "d.duckdb", days=3 / 24)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_set_speed(4)
            await wait_for(pilot, lambda: "end of the session" in status_text(app))
            assert session.sim.t_s == 3 * 3600 and app.core.t == 3 * 3600 - 60
    finally:
        session.close("complete")


async def test_live_sql_is_checked_harder(tmp_path: Path) -> None:
    from textual.widgets import TextArea

    from tui.widgets.arrowtable import ArrowTable

    app, session = live_app(tmp_path, "s.duckdb")
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.core.t is not None)
            await pilot.press("f6")
            ed = app.screen.query_one("#editor", TextArea)
            ed.text = "SELECT * FROM read_csv('/etc/passwd')"
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: not app.screen.running)
            assert "refused" in str(app.screen.query_one("#sql-status").render())
            ed.text = "SELECT count(*) AS n FROM factory_ts"
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: not app.screen.running)
            assert app.screen.query_one("#result", ArrowTable).row_count == 1
    finally:
        session.close("stopped")


# ---------------------------------------------------------------------- replay
def factory_row(con: Any, t: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = (
        con.sql("SELECT * FROM factory_ts WHERE time_s = ?", params=[t]).to_arrow_table().to_pylist()
    )
    assert len(rows) == 1
    return rows[0]


def assert_shows(app: Any, con: Any, t: int) -> None:
    assert app.core.t == t
    assert fmt.sim_clock(t) in status_text(app)
    row = factory_row(con, t)
    assert tile(app, "pue") == f"{row['pue']:.3f}"
    assert tile(app, "it") == fmt.power(row["it_power_w"])
    assert tile(app, "tokens") == fmt.si(row["tokens_per_s"])
    assert tile(app, "queue") == f"{row['queue_jobs']:,} jobs"
    cost = con.sql("SELECT sum(cost_usd) FROM factory_ts WHERE time_s <= ?", params=[t]).fetchall()[0][0]
    assert tile(app, "cost") == fmt.money(cost)


async def test_replay_scrubbing_matches_the_file(replay_con: Any) -> None:
    app = replay_app(replay_con)
    last_t = replay_con.sql("SELECT max(time_s) FROM factory_ts").fetchall()[0][0]
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        assert "REPLAY" in status_text(app) and "PAUSED" in status_text(app)
        assert_shows(app, replay_con, 0)
        for keys, t in (
            (["right"] * 3, 3 * 3600),
            (["left"], 2 * 3600),
            (["right"] * 14, 16 * 3600),
            (["full_stop", "full_stop"], 16 * 3600 + 120),
            (["comma"], 16 * 3600 + 60),
            (["home", "right", "right"], 2 * 3600),
            (["shift+right"], 26 * 3600),
            (["shift+right"], last_t),
            (["home"], 0),
            (["end"], last_t),
            (["shift+left"], last_t - 86400),
            (["right_square_bracket"], last_t - 86400 + 3600),
        ):
            await pilot.press(*keys)
            await settle(pilot, app)
            assert_shows(app, replay_con, t)
        await pilot.press("t")  # jump to a time
        app.screen.query_one("Input").value = "d1 20:30"
        await pilot.press("enter")
        await settle(pilot, app)
        assert_shows(app, replay_con, 20 * 3600 + 1800)
        # play at 3600× and pause again
        await pilot.press("space")
        await wait_for(pilot, lambda: app.core.t >= 20 * 3600 + 1800 + 3600)
        await pilot.press("space")
        t = app.core.t
        await refreshes(pilot, app, 2)
        await settle(pilot, app)
        assert_shows(app, replay_con, t)


async def test_replay_events_log_follows_the_scrubber(replay_con: Any) -> None:
    from tui.widgets.tables import EventLog

    def count(where: str) -> int:
        n: int = replay_con.sql(f"SELECT count(*) FROM events WHERE {where}").fetchall()[0][0]
        return n

    notable = "kind NOT IN ('job_start', 'job_end')"
    app = replay_app(replay_con)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("end")
        await settle(pilot, app)
        log = app.screen.query_one(EventLog)
        assert app.core.events_notable and log.total == count(notable) > 0
        assert any("fail_ultraserver ultraserver:1" in ln for ln in log.plain_lines())  # the scenario's
        await pilot.press("e")  # all events
        await settle(pilot, app)
        n_all = count("true")
        assert not app.core.events_notable and log.total == n_all and len(log.rows) == min(n_all, 200)
        assert "job_start" in str(log.render()) or "job_end" in str(log.render())
        await pilot.press("home")
        await settle(pilot, app)
        assert log.total == count("time_s <= 0") == len(log.rows)
        await pilot.press(*["right"] * 15)
        await pilot.press("e")
        await settle(pilot, app)
        assert log.total == count(f"time_s <= 15 * 3600 AND {notable}") > 0
        assert "fail_ultraserver" in str(log.render())


async def test_replay_screens_show_their_sql(replay_con: Any) -> None:
    """Every screen's panels hold what their SQL returns; drill into an UltraServer and back."""
    from tui.widgets.heatmap import ChipGrid, FloorMap
    from tui.widgets.info import InfoList
    from tui.widgets.status import ModeTabs

    app = replay_app(replay_con)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(*["right"] * 16)  # 16 h: UltraServer 1 failed
        t = 16 * 3600
        await pilot.press("f2")
        await settle(pilot, app)
        assert app.current_mode == "floor" and "Floor" in str(app.screen.query_one(ModeTabs).render())
        p = app.core.params()
        fm = app.screen.query_one(FloorMap)
        same_cols(fm.data, sql_cols(replay_con, "floor", p))
        assert fm.data["chips_failed"][1] == 144 and "✗" in fm.plain_text()
        detail = app.screen.query_one("#us-detail", InfoList)
        assert "UltraServer 0" in detail.items[0][0]
        await pilot.press("m")  # colour by power
        assert app.core.metric == "power" and "Power" in str(app.screen.query_one("#legend").render())
        await pilot.press("right")
        assert app.core.sel_us == 1 and "UltraServer 1" in detail.items[0][0]
        await pilot.press("enter")
        await settle(pilot, app)
        assert app.current_mode == "ultraserver"
        grid = app.screen.query_one(ChipGrid)
        p = app.core.params(us=1)
        same_cols(grid.data, sql_cols(replay_con, "chips", p))
        assert int(grid.data["time_s"][0]) == t and grid.data["failed"].all()
        await pilot.press("right", "right", "down")
        assert app.core.sel_chip == 2 + grid.per_line()
        await pilot.press("n")
        await settle(pilot, app)
        assert app.core.sel_us == 2
        same_cols(app.screen.query_one(ChipGrid).data, sql_cols(replay_con, "chips", app.core.params(us=2)))
        await pilot.press("escape")
        assert app.current_mode == "floor" and app.core.sel_us == 2
        await pilot.press("f5")
        await settle(pilot, app)
        chain = app.screen.query_one("#chain", InfoList)
        row = factory_row(replay_con, t)
        assert chain.items[0][1].startswith(fmt.power(row["facility_power_w"]))
        assert any(fmt.power(row["ups_loss_w"]) in v for _, v, _, _ in chain.items)
        await pilot.press("f1")
        await settle(pilot, app)
        assert_shows(app, replay_con, t)


def test_the_jobs_panel_sends_its_first_rows_and_counts_them_all(replay_con: Any) -> None:
    """A queue of a hundred thousand jobs is not sent whole: the Jobs query returns its first
    ``limit`` rows in the chosen order, each carrying the counts of every matching row (the
    same query without a limit is the reference)."""
    t = replay_con.sql("SELECT max(time_s) FROM factory_ts").fetchall()[0][0]
    p = {"run_id": replay_con.sql("SELECT run_id FROM runs").fetchall()[0][0], "t": t}
    full = Q.run_sql(replay_con, Q.render(Q.jobs_sql("all", sort="submit_time_s", limit=10**9), p))
    n = len(full["job_id"])
    assert n > 4
    cut = Q.run_sql(replay_con, Q.render(Q.jobs_sql("all", sort="submit_time_s", limit=4), p))
    assert len(cut["job_id"]) == 4
    assert set(cut["n_rows"].tolist()) == {n}
    states = [str(s) for s in full["state"]]
    assert set(cut["n_queued"].tolist()) == {states.count("queued")}
    assert set(cut["n_running"].tolist()) == {states.count("running")}
    assert list(cut["submit_time_s"]) == list(full["submit_time_s"][:4])


async def test_replay_jobs_at_a_time(replay_con: Any) -> None:
    """The Jobs screen shows who waits at t (from events, not the jobs table's latest state);
    sort, filter, view; Enter opens a job's timeline."""
    from tui.screens.timeline import TimelineScreen
    from tui.widgets.arrowtable import ArrowTable

    t = replay_con.sql(
        "SELECT min(time_s) FROM factory_ts WHERE queue_jobs >= 3 AND time_s % 3600 = 0"
    ).fetchall()[0][0]
    queued = replay_con.sql(
        """
        WITH last AS (
            SELECT CAST(split_part(target, ':', 2) AS INTEGER) AS job_id, kind,
                   row_number() OVER (PARTITION BY target ORDER BY time_s DESC, rowid DESC) AS rn
            FROM events WHERE kind IN ('job_start', 'job_interrupted', 'job_preempted') AND time_s <= $t)
        SELECT job_id FROM jobs WHERE submit_time_s <= $t
          AND job_id NOT IN (SELECT job_id FROM last WHERE rn = 1 AND kind = 'job_start')
          AND (end_time_s < 0 OR end_time_s > $t)
        """,
        params={"t": t},
    ).fetchall()
    app = replay_app(replay_con)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press(*["right"] * (t // 3600), "f4")
        await settle(pilot, app)
        table = app.screen.query_one("#jobs", ArrowTable)
        cols = table.table.to_pydict()
        shown_q = {j for j, s in zip(cols["job_id"], cols["state"], strict=True) if s == "queued"}
        assert shown_q == {q[0] for q in queued} and shown_q
        row = factory_row(replay_con, t)
        batch = [
            j
            for j, s, k in zip(cols["job_id"], cols["state"], cols["kind"], strict=True)
            if s == "queued" and k != "inference"
        ]
        assert len(batch) == row["queue_jobs"]  # the simulation's own count of waiting batch jobs
        await pilot.press("v")  # queued only
        await settle(pilot, app)
        assert set(table.table.column("state").to_pylist()) == {"queued"}
        while app.screen.sort != "waiting_s":  # o: the next column
            await pilot.press("o")
        await settle(pilot, app)
        waits = table.table.column("waiting_s").to_pylist()
        assert waits == sorted(waits, reverse=True)  # longest first
        assert "waiting ↓" in table.header_text()  # the sorted column carries the arrow
        await pilot.press("r")
        await settle(pilot, app)
        assert table.table.column("waiting_s").to_pylist() == sorted(waits)
        assert "waiting ↑" in table.header_text()
        await pilot.press("slash")
        app.screen.query_one("#jobs-filter").value = "llama-3.1-8b"
        await pilot.press("enter")
        await settle(pilot, app)
        assert set(table.table.column("model").to_pylist()) <= {"llama-3.1-8b"}
        req = app.screen.panel_requests()[0]
        sql = dict(Q.run_sql(replay_con, req.sql))
        counts = {k: sql.pop(k) for k in ("n_rows", "n_queued", "n_running")}
        assert set(counts["n_rows"].tolist()) <= {len(sql["job_id"])}  # under the limit: all shown
        same_cols(
            {k: np.asarray(v, dtype=object) for k, v in table.table.to_pydict().items()},
            {k: np.asarray(v, dtype=object) for k, v in sql.items()},
        )
        await pilot.press("escape", "v", "v", "v")  # all jobs
        await settle(pilot, app)
        job = table.row(table.cursor_row)["job_id"]
        await pilot.press("enter")
        assert isinstance(app.screen, TimelineScreen)
        await wait_for(pilot, lambda: app.screen.load_count > 0)
        tl = app.screen.query_one(ArrowTable).table.to_pydict()
        assert tl["what"][0] == "submitted" and tl["time_s"] == sorted(tl["time_s"])
        rank = {"submitted": 0, "job_start": 2, "job_end": 3}  # interruptions: 1 (a cause comes first)
        order = [(t, rank.get(w, 1)) for t, w in zip(tl["time_s"], tl["what"], strict=True)]
        assert order == sorted(order)
        same_cols(
            {k: np.asarray(v, dtype=object) for k, v in tl.items()},
            {k: np.asarray(v, dtype=object) for k, v in Q.run_sql(replay_con, app.screen.req().sql).items()},
        )
        await pilot.press("escape")
        assert not isinstance(app.screen, TimelineScreen) and job >= 0


async def test_panel_sql_opens_in_the_editor_and_runs(replay_con: Any) -> None:
    from textual.widgets import TextArea

    from tui.widgets.arrowtable import ArrowTable

    app = replay_app(replay_con)
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.press(*["right"] * 5, "f2")
        await settle(pilot, app)
        floor = dict(app.screen.query_one("#map").data)
        await pilot.press("s")  # the Floor map's SQL
        assert app.current_mode == "sql"
        sql = app.screen.query_one("#editor", TextArea).text
        assert sql == Q.panel_sql("floor", app.core.params())
        await wait_for(pilot, lambda: not app.screen.running)
        res = app.screen.query_one("#result", ArrowTable)
        assert res.row_count == 4
        same_cols(floor, {k: np.asarray(v) for k, v in res.table.to_pydict().items()})
        # Another panel: the Power plot on the Overview (tab moves the focus between panels).
        await pilot.press("f1")
        await settle(pilot, app)
        while getattr(app.screen.focused, "id", "") != "plot-power":
            await pilot.press("tab")
        await pilot.press("s")
        assert "facility_power_w, it_power_w" in app.screen.query_one("#editor", TextArea).text
        await wait_for(pilot, lambda: not app.screen.running)
        assert app.screen.query_one("#result", ArrowTable).row_count == 5 * 60 + 1


async def test_sql_console(replay_con: Any, tmp_path: Path) -> None:
    """Run, a million rows, refusals, cancel, history, save, export to CSV and Parquet."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    from textual.widgets import TextArea, Tree

    from tui.widgets.arrowtable import ArrowTable

    app = replay_app(replay_con)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f6")
        scr = app.screen
        ed = scr.query_one("#editor", TextArea)
        res = scr.query_one("#result", ArrowTable)
        tree = scr.query_one("#schema", Tree)
        labels = [str(n.label) for n in tree.root.children[0].children]
        assert "factory_ts" in labels and "chip_ts" in labels
        fac = tree.root.children[0].children[labels.index("factory_ts")]
        assert any(str(c.label) == "it_power_w [W]" for c in fac.children)

        ed.text = "SELECT range AS i, range * 0.5 AS x FROM range(1000000)"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not scr.running)
        assert res.row_count == 1_000_000
        await pilot.press("tab")  # into the result
        await pilot.press("end")
        assert res.cursor_row == 999_999 and res.row(res.cursor_row)["i"] == 999_999
        await pilot.pause()
        assert "999,999" in str(res.render_line(1).text) or res.scroll_y > 0

        ed.text = "DELETE FROM jobs"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not scr.running)
        assert "refused" in str(scr.query_one("#sql-status").render())

        ed.text = "SELECT count(*) FROM range(100000) a, range(100000) b, range(1000) c"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.sql_executing is not None)  # the query runs in DuckDB
        assert scr.running
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: not scr.running)
        assert "cancelled" in str(scr.query_one("#sql-status").render())

        await pilot.press("ctrl+up")
        assert ed.text.startswith("DELETE")
        await pilot.press("ctrl+up")
        assert ed.text.startswith("SELECT range")

        ed.text = "-- waits\nSELECT job_id, wait_s FROM jobs ORDER BY job_id"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not scr.running)
        n = res.row_count
        await pilot.press("ctrl+s")
        assert app.screen.query_one("Input").value == "waits"
        await pilot.press("enter")
        saved = json.loads((app.core.config_dir / "saved_queries.json").read_text())
        assert saved == [{"name": "waits", "sql": ed.text.strip()}]
        hist = json.loads((app.core.config_dir / "sql_history.json").read_text())
        assert hist[-1] == ed.text.strip() and len(hist) == 4
        for done, name in enumerate(("out.csv", "out.parquet"), 1):
            await pilot.press("ctrl+o")
            app.screen.query_one("Input").value = str(tmp_path / name)
            await pilot.press("enter")
            await wait_for(pilot, lambda done=done: app.exports_done == done)
        assert pacsv.read_csv(tmp_path / "out.csv").num_rows == n
        assert pq.read_table(tmp_path / "out.parquet").column_names == ["job_id", "wait_s"]


async def test_help_lists_every_key(replay_con: Any) -> None:
    from tui.screens.help import HelpScreen

    app = replay_app(replay_con)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-keys").render())
        for key in (
            "space",
            "←",
            "→",
            "shift+←",
            "home",
            "end",
            "+",
            "-",
            "1",
            "5",
            "?",
            "q",
            "f1",
            "f6",
            "^r",
            "^g",
            "^o",
            "^s",
            "⏎",
            "esc",
            "m",
            "n",
            "v",
            "o",
            "/",
            "w",
            "e",
            "s",
            "t",
            "ctrl+p",
            "tab",
        ):
            assert key in text.lower(), key
        for screen in ("Overview", "Floor", "UltraServer", "Jobs", "SQL", "Services screen", "Alarms (F8)"):
            assert screen in text
        # the SQL editor's own keys (Textual's TextArea bindings), minus those the app takes everywhere
        from textual.widgets import TextArea

        assert "SQL editor" in text
        for b in TextArea.BINDINGS:
            if b.description in ("Undo", "Redo", "Delete line", "Cursor word left"):
                assert b.description in text, b.description
        # f7 is the Services screen everywhere: the editor selects all on ctrl+a (home: line start)
        assert "^a" in text and "Select all" in text and "Clear the query" in text
        assert "What-if" not in text  # live-only keys are not offered in a replay
        await pilot.press("question_mark")
        assert not isinstance(app.screen, HelpScreen)


def test_replay_of_a_bad_file_is_a_clear_message(tmp_path: Path) -> None:
    import duckdb
    from click.testing import CliRunner

    from storage.errors import StorageError
    from storage.writer import init_schema
    from tui.cli import main

    cases = {}
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    cases[other] = "not an AI Factory Twin run"
    future = tmp_path / "future.duckdb"
    c = duckdb.connect(str(future))
    init_schema(c)
    c.execute("UPDATE twin_meta SET value = '999' WHERE key = 'schema_version'")
    c.close()
    cases[future] = "schema v999"
    empty = tmp_path / "empty.duckdb"
    c = duckdb.connect(str(empty))
    init_schema(c)
    c.close()
    cases[empty] = "holds no run"
    broken = tmp_path / "broken.duckdb"
    run(parse(TINY, "tiny.toml"), TINY, broken, duration_s=3600)
    c = duckdb.connect(str(broken))
    c.execute("DROP VIEW factory_ts CASCADE")
    c.close()
    cases[broken] = "without its table factory_ts"
    for path, msg in cases.items():
        r = CliRunner().invoke(main, ["replay", str(path)])
        assert r.exit_code == 2, (path, r.output)
        assert msg in r.output and "Traceback" not in r.output, r.output
    from tui.app import TwinApp

    # The app's own guard, behind the recording check that refuses the file first.
    con = duckdb.connect(str(broken), read_only=True)
    try:
        with pytest.raises(StorageError, match="cannot read the run"):
            TwinApp(replay_con=con, replay_run_id=latest_run_id(con), replay_path=str(broken))
    finally:
        con.close()


# ---------------------------------------------------------------------- snapshots
# Deterministic: a fixed seed, the replay paused at fixed times, a fixed file name.
def snap(keys: list[str]) -> Callable[[Any], Any]:
    """Press ``keys``, then wait until every panel request is answered (no timed waits)."""

    async def run_before(pilot: Any) -> None:
        await pilot.press(*keys)
        await settle(pilot, pilot.app)

    return run_before


def test_snapshot_overview_80x24(snap_compare: Any, replay_con: Any) -> None:
    assert snap_compare(replay_app(replay_con), terminal_size=(80, 24), run_before=snap(["right"] * 16))


def test_snapshot_overview_160x45(snap_compare: Any, replay_con: Any) -> None:
    assert snap_compare(replay_app(replay_con), terminal_size=(160, 45), run_before=snap(["shift+right"]))


def test_snapshot_floor_80x24(snap_compare: Any, replay_con: Any) -> None:
    assert snap_compare(
        replay_app(replay_con), terminal_size=(80, 24), run_before=snap([*["right"] * 16, "f2", "right"])
    )


def test_snapshot_ultraserver_100x30(snap_compare: Any, replay_con: Any) -> None:
    assert snap_compare(
        replay_app(replay_con),
        terminal_size=(100, 30),
        run_before=snap([*["right"] * 12, "f2", "enter", "m", "m"]),
    )


def test_snapshot_energy_200x60(snap_compare: Any, replay_con: Any) -> None:
    assert snap_compare(
        replay_app(replay_con), terminal_size=(200, 60), run_before=snap([*["right"] * 13, "f5"])
    )


def test_queue_tile_fits_a_campus_queue() -> None:
    """The Queue tile has 11 cells at 150 columns: a campus's queue is shown in thousands (at
    most 9 characters, 2 more for the trend mark), not cut."""
    from tui.widgets.kpi import KPIS

    q = next(k for k in KPIS if k.key == "queue")
    assert [q.text(v) for v in (7.0, 999.0, 1_234.0, 9_949.0, 9_999.0, 21_133.0, 140_986.0, 2_345_678.0)] == [
        "7 jobs",
        "999 jobs",
        "1.2k jobs",
        "9.9k jobs",
        "10k jobs",
        "21k jobs",
        "141k jobs",
        "2.3M jobs",
    ]
    assert all(len(q.text(float(v))) <= 9 for v in range(0, 3_000_000, 997))
    assert q.text(float("nan")) == "–"


@pytest.mark.parametrize("width", [150, 160, 200])
async def test_kpi_tiles_fit_their_labels_and_values_on_one_row(replay_con: Any, width: int) -> None:
    """From 150 columns the twelve KPI tiles share one row: each tile's label and value (with
    its trend mark) fit inside it, the widest money and CO2 totals included."""
    from tui.widgets.kpi import KpiTile

    app = replay_app(replay_con)
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot, app)
        tiles = list(app.screen.query(KpiTile))
        assert len(tiles) == 12 and len({t.region.y for t in tiles}) == 1
        for tile in tiles:
            room = tile.content_size.width
            widest = {"cost": "$9,999.99", "co2": "99,999.9 t", "queue": "9.9k jobs"}.get(tile.kpi.key, "")
            assert len(tile.kpi.label) <= room, (tile.kpi.key, room)
            assert len(max(tile.value_text, widest, key=len)) + 2 <= room, (
                tile.kpi.key,
                tile.value_text,
                room,
            )
