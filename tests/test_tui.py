"""The Textual TUI: live mode on a tiny hall, replay scrubbing, help, and SVG snapshots.

Everything is built here from a small inline scenario (no ../shared). Live tests drive the real
simulation worker thread; replay tests read a file made by ``scenarios.runner.run``.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scenarios.runner import Session, run
from scenarios.spec import parse
from storage.reader import latest_run_id, open_run_file
from tui import fmt
from tui.pacing import Pacer, SpeedControl

TINY = """
name = "tiny"
seed = 11
dt_s = 60
duration_h = 6

[hall]
system = "trn3-gen2"
ultraservers = 2
ultraservers_per_row = 2

[training]
arrivals_per_day = 600

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


async def wait_for(pilot: Any, cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.05)


def status_text(app: Any) -> str:
    from tui.widgets.status import StatusBar

    return str(app.screen.query_one(StatusBar).plain)


def tile(app: Any, key: str) -> str:
    from tui.widgets.kpi import KpiTile

    t = app.screen.query_one(f"#kpi-{key}", KpiTile)
    rendered = str(t.render())
    assert t.value_text in rendered  # what is on screen, not only the attribute
    return str(t.value_text)


# ---------------------------------------------------------------------- pure parts
def test_pacer_turns_wall_time_into_steps() -> None:
    sc = SpeedControl(3)  # 3600×
    p = Pacer(sc, dt_s=60, chunk_steps=1440)
    assert p.due(100.0) == 0
    assert p.due(101.0) == 60  # one simulated hour per wall second
    sc.set(1)  # 1×: one 60 s step per wall minute
    assert p.due(101.0) == 0
    assert p.due(131.0) == 0 and math.isclose(p.wait_s(), 30.0)
    assert p.due(161.0) == 1
    sc.set(4)
    assert p.due(161.5) == 1440  # max: whole chunks
    sc.toggle()
    assert sc.paused and p.due(200.0) == 0 and p.wait_s() == math.inf
    sc.toggle()
    assert sc.label == "max"
    sc.set(3)
    p.due(300.0)
    assert p.due(400.0) == 1440  # debt is capped at one chunk, no catch-up burst


def test_tick_messages_merge() -> None:
    from tui.app import SimTick

    a, b = SimTick(None), SimTick(None)  # type: ignore[arg-type]
    assert a.can_replace(b)


def test_feed_and_pacing_do_not_import_textual() -> None:
    code = "import sys, tui.feed, tui.pacing, tui.cli, tui.fmt; assert 'textual' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------- live
async def test_live_speed_pause_and_inject(tmp_path: Path) -> None:
    from tui.app import TwinApp
    from tui.widgets.tables import EventLog

    spec = parse(TINY, "test")
    out = tmp_path / "live.duckdb"
    session = Session(spec, TINY, out, duration_s=30 * 86400)
    app = TwinApp(session=session)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            assert "LIVE" in status_text(app) and "3600×" in status_text(app)
            await wait_for(pilot, lambda: app.snapshot is not None)
            first = app.snapshot.t_s
            await pilot.press("5")  # max
            await wait_for(pilot, lambda: app.snapshot.t_s >= first + 12 * 3600)
            assert "max" in status_text(app)

            await pilot.press("space")  # pause
            seq = -1
            while seq != app.seq:  # settle: the worker may finish one advance after the key
                seq = app.seq
                await pilot.pause(0.3)
            app.refresh_views()
            last = session.sim.last
            t = int(last["time_s"])
            assert app.snapshot.t_s == t > first
            assert fmt.sim_clock(t) in status_text(app) and "PAUSED" in status_text(app)
            assert tile(app, "pue") == f"{last['pue']:.3f}"
            assert tile(app, "it") == fmt.power(last["it_power_w"])
            assert tile(app, "facility") == fmt.power(last["facility_power_w"])
            assert tile(app, "chipmax") == fmt.temp(last["max_chip_temp_c"])
            assert tile(app, "busy") == fmt.pct(last["chips_busy"] / last["chips_total"])
            sim_t = session.sim.t_s
            await pilot.pause(0.5)
            assert session.sim.t_s == sim_t and fmt.sim_clock(t) in status_text(app)

            await pilot.press("question_mark")
            from tui.screens.help import HelpScreen, key_rows

            assert isinstance(app.screen, HelpScreen)
            keys = dict(key_rows(app))
            assert {"f", "s", "space", "?"} <= set(keys) and "←" not in keys
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)

            await pilot.press("f")  # fail UltraServer 0 (applied at the next step)
            await pilot.press("3")  # resume at 60×: one step a second, so the new event stays in view
            log = app.screen.query_one(EventLog)
            mine = "fail_ultraserver ultraserver:0"
            await wait_for(pilot, lambda: any(mine in ln for ln in log.plain_lines()))
            await wait_for(pilot, lambda: mine in str(log.render()))  # on screen too
            await wait_for(pilot, lambda: app.snapshot.row["chips_failed"] >= 144)
            assert "✗" in str(app.screen.query_one("#hall").render())
            assert tile(app, "failed") == f"{app.snapshot.row['chips_failed']:,.0f}"
            await pilot.press("1")
            assert "PAUSED" in status_text(app)
        assert app._sim_done.is_set()  # the worker thread ended with the app
    finally:
        session.close("stopped")
    con = open_run_file(out)
    try:
        rows = con.sql(
            "SELECT kind, target, source FROM events WHERE kind = 'fail_ultraserver' ORDER BY time_s"
        ).fetchall()
        status = con.sql("SELECT status FROM runs").fetchall()
    finally:
        con.close()
    assert rows == [("fail_ultraserver", "ultraserver:1", "scenario"), ("fail_ultraserver", "ultraserver:0", "operator")]
    assert status == [("stopped",)]


async def test_live_quit_key_stops_worker(tmp_path: Path) -> None:
    from tui.app import TwinApp

    session = Session(parse(TINY, "test"), TINY, tmp_path / "q.duckdb", duration_s=30 * 86400)
    app = TwinApp(session=session)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("5")
            await wait_for(pilot, lambda: app.snapshot is not None)
            t0 = time.monotonic()
            await pilot.press("q")
            await wait_for(pilot, app._sim_done.is_set, timeout=5)
            assert time.monotonic() - t0 < 2.0
    finally:
        session.close("stopped")


async def test_live_stops_at_the_session_duration(tmp_path: Path) -> None:
    from tui.app import TwinApp

    session = Session(parse(TINY, "test"), TINY, tmp_path / "d.duckdb", duration_s=3 * 3600)
    app = TwinApp(session=session)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("5")
            await wait_for(pilot, lambda: "end of the session" in status_text(app))
            assert session.sim.t_s == 3 * 3600 and app.snapshot.t_s == 3 * 3600 - 60
    finally:
        session.close("complete")


# ---------------------------------------------------------------------- replay
def factory_row(con: Any, t: int) -> dict[str, Any]:
    q = "SELECT * FROM factory_ts WHERE time_s = ?"
    rows: list[dict[str, Any]] = con.sql(q, params=[t]).to_arrow_table().to_pylist()
    assert len(rows) == 1
    return rows[0]


def assert_shows(app: Any, con: Any, t: int) -> None:
    from tui.widgets.tables import QueueTable

    assert app.snapshot.t_s == t
    assert fmt.sim_clock(t) in status_text(app)
    row = factory_row(con, t)
    assert tile(app, "pue") == f"{row['pue']:.3f}"
    assert tile(app, "it") == fmt.power(row["it_power_w"])
    assert tile(app, "tokens") == fmt.si(row["tokens_per_s"])
    assert tile(app, "outdoor") == fmt.temp(row["outdoor_temp_c"])
    cost = con.sql("SELECT sum(cost_usd) FROM factory_ts WHERE time_s <= ?", params=[t]).fetchall()[0][0]
    assert tile(app, "cost") == fmt.money(cost)
    # Waiting at t: submitted by t, and the job's last start/interrupt event by t is not a start
    # (jobs.start_time_s alone is the latest placement, wrong for jobs restarted after a failure).
    queued = con.sql(
        """
        WITH last AS (
            SELECT CAST(split_part(target, ':', 2) AS INTEGER) AS job_id, kind,
                   row_number() OVER (PARTITION BY target ORDER BY time_s DESC, rowid DESC) AS rn
            FROM events WHERE kind IN ('job_start', 'job_interrupted') AND time_s <= $t)
        SELECT job_id FROM jobs WHERE submit_time_s <= $t
          AND job_id NOT IN (SELECT job_id FROM last WHERE rn = 1 AND kind = 'job_start')
        ORDER BY submit_time_s, job_id
        """, params={"t": t}
    ).fetchall()
    simple = con.sql(
        "SELECT job_id FROM jobs WHERE submit_time_s <= ? AND (start_time_s > ? OR start_time_s < 0) "
        "AND restarts = 0 ORDER BY submit_time_s, job_id", params=[t, t]
    ).fetchall()
    assert set(simple) <= set(queued)  # agrees with the jobs table for never-restarted jobs
    table = app.screen.query_one(QueueTable)
    shown = [r[0] for r in table.shown]
    assert shown == [q[0] for q in queued][:50]
    assert table.row_count == len(shown)
    # Cross-check with the simulation's own count of waiting (non-inference) jobs at t.
    training = con.sql(
        "SELECT count(*) FROM jobs WHERE kind <> 'inference' AND list_contains(?, job_id)", params=[shown]
    ).fetchall()[0][0]
    assert training == row["queue_jobs"]


async def test_replay_scrubbing_matches_the_file(replay_con: Any) -> None:
    app = replay_app(replay_con)
    last_t = replay_con.sql("SELECT max(time_s) FROM factory_ts").fetchall()[0][0]
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "REPLAY" in status_text(app) and "PAUSED" in status_text(app)
        assert_shows(app, replay_con, 0)
        await pilot.press("right", "right", "right")
        assert_shows(app, replay_con, 3 * 3600)
        await pilot.press("left")
        assert_shows(app, replay_con, 2 * 3600)
        await pilot.press(*["right"] * 14)
        assert_shows(app, replay_con, 16 * 3600)
        assert app.snapshot.queue and app.snapshot.row["chips_failed"] >= 144  # a busy moment
        await pilot.press(*["right"] * 4)
        assert_shows(app, replay_con, 20 * 3600)
        await pilot.press("home", "right", "right")
        assert_shows(app, replay_con, 2 * 3600)
        await pilot.press("shift+right")
        assert_shows(app, replay_con, 26 * 3600)
        await pilot.press("shift+right")  # clamps at the end of the run
        assert_shows(app, replay_con, last_t)
        await pilot.press("home")
        assert_shows(app, replay_con, 0)
        await pilot.press("end")
        assert_shows(app, replay_con, last_t)
        await pilot.press("shift+left")
        assert_shows(app, replay_con, last_t - 86400)
        # play at 3600× and pause again
        await pilot.press("space")
        await wait_for(pilot, lambda: app.snapshot.t_s >= last_t - 86400 + 3600)
        await pilot.press("space")
        t = app.snapshot.t_s
        await pilot.pause(0.3)
        assert app.snapshot.t_s == t
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
        log = app.screen.query_one(EventLog)
        assert log.notable_only and log.total == count(notable) > 0
        assert any("fail_ultraserver ultraserver:1" in ln for ln in log.plain_lines())  # the scenario's
        await pilot.press("e")  # all events
        n_all = count("true")
        assert not log.notable_only and log.total == n_all and len(log.rows) == min(n_all, 200)
        assert "job_start" in str(log.render()) or "job_end" in str(log.render())
        await pilot.press("home")
        assert log.total == count("time_s <= 0") == len(log.rows)
        await pilot.press(*["right"] * 15)
        assert log.total == count("time_s <= 15 * 3600")
        await pilot.press("e")
        assert log.total == count(f"time_s <= 15 * 3600 AND {notable}") > 0
        assert "fail_ultraserver" in str(log.render())


async def test_help_screen_lists_replay_keys(replay_con: Any) -> None:
    from tui.screens.help import HelpScreen

    app = replay_app(replay_con)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-keys").render())
        for key in ("space", "←", "→", "shift+←", "home", "end", "+", "-", "1", "5", "?", "q"):
            assert key in text, key
        assert "Fail" not in text  # live-only keys are not offered in a replay
        await pilot.press("question_mark")
        assert not isinstance(app.screen, HelpScreen)


# ---------------------------------------------------------------------- snapshots
def test_snapshot_replay_overview_80x24(snap_compare: Any, replay_con: Any) -> None:
    # 16 h in: UltraServer 1 failed, jobs queued.
    assert snap_compare(replay_app(replay_con), terminal_size=(80, 24), press=["right"] * 16)


def test_snapshot_replay_overview_160x45(snap_compare: Any, replay_con: Any) -> None:
    assert snap_compare(replay_app(replay_con), terminal_size=(160, 45), press=["shift+right"])
