"""The Floor of a campus (several halls): a campus level, one line per hall, whose figures are the
sums and extremes of each hall's UltraServers as recorded; Enter opens a hall's map (its rows and
UltraServers only), Esc goes back; the Rows table names the hall. A single hall is unchanged.
Checked live and in a replay against the recording (``ultraserver_ts``, ``hall_ts``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scenarios.runner import Session, run
from scenarios.spec import parse
from storage.reader import latest_run_id, open_run_file
from tests.test_tui import quiet, settle, wait_for
from tui.console import fmt

# Two halls: 4 UltraServers in rows of 2 (rows 0-1), 6 in rows of 3 (rows 2-3). UltraServer 5
# (hall 1) fails at 1 h, so hall 1 has failed chips and hall 0 none.
CAMP = """
name = "camp"
seed = 1
dt_s = 60
duration_h = 3

[[halls]]
system = "trn3-gen2"
ultraservers = 4
ultraservers_per_row = 2

[[halls]]
system = "trn3-gen2"
ultraservers = 6
ultraservers_per_row = 3

[training]
arrivals_per_day = 2000

[[services]]  # the chat service with the model defaults (no service runs undeclared)

[[events]]
at_h = 1
kind = "fail_ultraserver"
target = 5
duration_h = 6
"""
# The same campus with ultraserver_ts every 5 steps (as a large campus records it).
SPARSE = (
    CAMP
    + """
[telemetry]
ultraserver_interval_s = 300
"""
)
HALLS = ((0, 3), (4, 9))  # each hall's UltraServers
T = 2 * 3600


def _record(tmp: pytest.TempPathFactory, text: str, name: str) -> Path:
    out = tmp.mktemp(name) / f"{name}.duckdb"
    run(parse(text, f"{name}.toml"), text, out, duration_s=3 * 3600)
    return out


@pytest.fixture(scope="module")
def camp_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory, CAMP, "camp")


@pytest.fixture(scope="module")
def sparse_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record(tmp_path_factory, SPARSE, "sparse")


def _con(path: Path) -> Iterator[Any]:
    c = open_run_file(path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def con(camp_file: Path) -> Iterator[Any]:
    yield from _con(camp_file)


@pytest.fixture
def sparse_con(sparse_file: Path) -> Iterator[Any]:
    yield from _con(sparse_file)


def _app(con: Any, name: str = "camp.duckdb") -> Any:
    from tui.app import TwinApp

    return TwinApp(replay_con=con, replay_run_id=latest_run_id(con), replay_path=name)


def expected_halls(con: Any, t: int) -> dict[str, list[float]]:
    """Each hall's figures from its UltraServers' rows in ultraserver_ts at ``t`` (by hand)."""
    rows = con.sql(
        "SELECT ultraserver_id, power_w, chips_busy, chips_failed, tripped, activity, max_chip_temp_c "
        f"FROM ultraserver_ts WHERE time_s = {t} ORDER BY ultraserver_id"
    ).fetchall()
    assert len(rows) == 10
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "ultraservers",
            "power_w",
            "chips_busy",
            "chips_failed",
            "tripped",
            "activity",
            "max_chip_temp_c",
        )
    }
    for lo, hi in HALLS:
        mine = [r for r in rows if lo <= r[0] <= hi]
        out["ultraservers"].append(len(mine))
        out["power_w"].append(sum(r[1] for r in mine))
        out["chips_busy"].append(sum(r[2] for r in mine))
        out["chips_failed"].append(sum(r[3] for r in mine))
        out["tripped"].append(sum(bool(r[4]) for r in mine))
        out["activity"].append(sum(r[5] for r in mine) / len(mine))  # equal chips per UltraServer
        out["max_chip_temp_c"].append(max(r[6] for r in mine))
    return out


def check_halls(shown: dict[str, Any], want: dict[str, list[float]]) -> None:
    assert np.asarray(shown["hall_id"]).tolist() == [0, 1]
    for k, v in want.items():
        np.testing.assert_allclose(np.asarray(shown[k], dtype=float), v, rtol=1e-5, err_msg=k)


def cells(fm: Any) -> dict[int, str]:
    """Each UltraServer's value on a Floor map, read from the text drawn in its cell (one line or
    more): its number, a mark, its value."""
    lines = fm.plain_text().splitlines()
    text: dict[int, str] = {}
    for y, x0, x1, us in fm._cells:
        text[us] = text.get(us, "") + " " + lines[y][x0:x1].replace("[", " ").replace("]", " ")
    out: dict[int, str] = {}
    for us, t in text.items():
        m = re.fullmatch(r"\s*(\d+)[✗↯ ]\s*(\S*)\s*", t)
        assert m is not None and int(m.group(1)) == us, t
        out[us] = m.group(2)
    return out


async def _jump(pilot: Any, app: Any, when: str) -> None:
    await pilot.press("t")
    app.screen.query_one("Input").value = when
    await pilot.press("enter")
    await settle(pilot, app)


# ---------------------------------------------------------------------- replay
async def test_campus_level_replay_figures_and_navigation(con: Any) -> None:
    from tui.widgets.heatmap import FloorMap, HallMap
    from tui.widgets.info import InfoList

    want = expected_halls(con, T)
    assert want["chips_failed"][0] == 0 and want["chips_failed"][1] == 144  # the scenario does what it says
    app = _app(con)
    async with app.run_test(size=(100, 30)) as pilot:
        await _jump(pilot, app, "d0 02:00")
        await pilot.press("f2")
        await settle(pilot, app)
        assert app.core.t == T
        scr = app.screen
        hm = scr.query_one(HallMap)
        assert scr.at_campus and hm.display and not scr.query_one(FloorMap).display
        check_halls(hm.data, want)
        text = hm.plain_text()
        for k in (0, 1):
            line = next(s for s in text.splitlines() if s.lstrip(" [").startswith(f"H{k} "))
            assert fmt.power(want["power_w"][k]) in line and fmt.count(want["chips_busy"][k]) in line
        head = scr.query_one("#us-detail", InfoList).items[0][0]
        assert head == "Hall 0 · US 0-3 · 2 rows"
        rows = scr.query_one("#rows").table.to_pydict()
        assert rows["hall"] == [0, 0] and rows["row_id"] == [0, 1]
        assert sum(rows["power_w"]) == pytest.approx(want["power_w"][0], rel=1e-9)
        assert not scr.check_action("campus", ())  # Esc is for a hall's map
        assert scr.focused_panel().query == "halls"  # `s` opens the campus level's SQL

        await pilot.press("down")
        await settle(pilot, app)
        assert scr.sel_hall == 1 and "[H1" in hm.plain_text()
        assert scr.query_one("#us-detail", InfoList).items[0][0] == "Hall 1 · US 4-9 · 2 rows"
        items = {i[0]: i[1] for i in scr.query_one("#us-detail", InfoList).items}
        assert items["failed chips"] == "144"
        rows = scr.query_one("#rows").table.to_pydict()
        assert rows["hall"] == [1, 1] and rows["row_id"] == [2, 3] and rows["ultraservers"] == [3, 3]

        await pilot.press("enter")  # hall 1's map
        await settle(pilot, app)
        fm = scr.query_one(FloorMap)
        assert not scr.at_campus and fm.display and not hm.display
        assert app.core.sel_us == 4 and "Hall 1 of 2" in str(scr.query_one("#floor-map").border_title)
        shown = cells(fm)
        assert sorted(shown) == [4, 5, 6, 7, 8, 9]  # only its UltraServers
        act = dict(
            con.sql(f"SELECT ultraserver_id, activity FROM ultraserver_ts WHERE time_s = {T}").fetchall()
        )
        for us, v in shown.items():
            assert v == ("down" if us == 5 else f"{100 * act[us]:.0f}%")
        assert scr.query_one("#us-detail", InfoList).items[0][0] == "UltraServer 4 · row 2 · hall 1"
        await pilot.press("right")
        assert app.core.sel_us == 5
        await pilot.press("down")
        assert app.core.sel_us == 8
        await pilot.press("left", "left", "left", "left")  # stays in the hall's row
        assert app.core.sel_us == 7
        await pilot.press("up", "up")  # row 2 is the hall's first
        assert app.core.sel_us == 4
        assert scr.check_action("campus", ())
        assert scr.focused_panel().query == "hall_floor" and "BETWEEN 4 AND 9" in scr.focused_panel().sql

        await pilot.press("escape")
        await settle(pilot, app)
        assert scr.at_campus and hm.display and not fm.display and scr.sel_hall == 1
        await pilot.press("up", "enter")  # hall 0: the selection moves into it
        await settle(pilot, app)
        assert app.core.sel_us == 0 and sorted(cells(fm)) == [0, 1, 2, 3]
        await pilot.press("enter")  # the UltraServer screen, as on a hall
        await settle(pilot, app)
        assert app.current_mode == "ultraserver"

        def title() -> str:
            return str(app.screen.query_one("#us-chips").border_title)

        assert title().startswith("UltraServer 0 · hall 0 · row 0 ·") and "DOWN" not in title()
        await pilot.press(*["p"] * 5)  # 9, 8, 7, 6, 5: into hall 1
        await settle(pilot, app)
        assert (
            app.core.sel_us == 5
            and title().startswith("UltraServer 5 · hall 1 · row 2 ·")
            and "DOWN" in title()
        )
        await pilot.press("f2")  # the Floor follows the selection into its hall
        await settle(pilot, app)
        assert not scr.at_campus and scr.sel_hall == 1 and sorted(cells(fm)) == [4, 5, 6, 7, 8, 9]
        assert fm.selected == 5 and cells(fm)[5] == "down"


async def test_campus_hall_map_reads_the_latest_sample(sparse_con: Any) -> None:
    """ultraserver_ts every 5 steps: at 02:03 a hall's map shows the 02:00 sample, the campus level
    the hall_ts step of 02:03."""
    from tui.widgets.heatmap import FloorMap, HallMap

    t = T + 180
    assert not sparse_con.sql(f"SELECT * FROM ultraserver_ts WHERE time_s = {t}").fetchall()
    hall = sparse_con.sql(f"SELECT power_w FROM hall_ts WHERE time_s = {t} ORDER BY hall_id").fetchall()
    app = _app(sparse_con, "sparse.duckdb")
    async with app.run_test(size=(100, 30)) as pilot:
        await _jump(pilot, app, "d0 02:03")
        await pilot.press("f2")
        await settle(pilot, app)
        assert app.core.t == t
        np.testing.assert_allclose(
            app.screen.query_one(HallMap).data["power_w"], [h[0] for h in hall], rtol=1e-12
        )
        await pilot.press("enter")
        await settle(pilot, app)
        fm = app.screen.query_one(FloorMap)
        rec = sparse_con.sql(
            f"SELECT ultraserver_id, power_w FROM ultraserver_ts WHERE time_s = {T} "
            "AND ultraserver_id <= 3 ORDER BY ultraserver_id"
        ).fetchall()
        assert fm.data["ultraserver_id"].tolist() == [0, 1, 2, 3]
        np.testing.assert_allclose(fm.data["power_w"], [r[1] for r in rec], rtol=1e-12)
        assert sorted(cells(fm)) == [0, 1, 2, 3]
        # The Overview's hall strip too: every UltraServer of the campus at that sample.
        from tui.widgets.hall import HallStrip

        await pilot.press("f1")
        await settle(pilot, app)
        every = sparse_con.sql(
            f"SELECT power_w FROM ultraserver_ts WHERE time_s = {T} ORDER BY ultraserver_id"
        ).fetchall()
        np.testing.assert_allclose(
            app.screen.query_one(HallStrip).us["power_w"], [r[0] for r in every], rtol=1e-12
        )


def _legend(app: Any) -> str:
    return str(app.screen.query_one("#legend").render())


async def test_hall_map_says_how_old_its_sample_is(sparse_con: Any) -> None:
    """ultraserver_ts every 300 s at dt 60 s: at 02:03 a hall's map, the selected UltraServer's
    read-out and the Rows table show the 02:00 sample and say so (3 min before); at 02:05, a sample
    time, nothing is added. The campus level's lines (hall_ts, every step) are of the time shown.
    Its legend names no UltraServer state marks (it draws none); a hall's map names them."""
    from tui.widgets.heatmap import HallMap
    from tui.widgets.info import InfoList

    # The recording is as the interval says: samples at 02:00 and 02:05, none between.
    times = [
        r[0]
        for r in sparse_con.sql(
            "SELECT DISTINCT time_s FROM ultraserver_ts WHERE time_s BETWEEN 7200 AND 7500 ORDER BY time_s"
        ).fetchall()
    ]
    assert times == [7200, 7500]
    app = _app(sparse_con, "sparse.duckdb")
    async with app.run_test(size=(120, 30)) as pilot:
        await _jump(pilot, app, "d0 02:03")
        await pilot.press("f2")
        await settle(pilot, app)
        scr = app.screen
        box, detail, rows = (
            scr.query_one("#floor-map"),
            scr.query_one("#us-detail", InfoList),
            scr.query_one("#rows"),
        )
        assert app.core.t == 7380 and scr.at_campus and scr.query_one(HallMap).data
        assert "sample" not in str(box.border_title) and not detail.border_subtitle
        assert rows.border_subtitle == "sample d1 02:00, 3 min before"  # hall 0's rows: ultraserver_ts
        assert "time_s" not in rows.table.column_names
        campus = _legend(app)
        assert "Activity" in campus and "per UltraServer" in campus  # the scale and the note stay
        for mark in ("tripped", "down", "failed chips", "no data", "↯", "✗"):
            assert mark not in campus, mark

        await pilot.press("enter")  # hall 0's map: the 02:00 sample, 3 min before 02:03
        await settle(pilot, app)
        title = str(box.border_title)
        assert (
            title == "Hall 0 of 2 · 4 UltraServers · Activity · sample d1 02:00, 3 min before · Esc: campus"
        )
        assert detail.items[0][0] == "UltraServer 0 · row 0 · hall 0"
        assert detail.border_subtitle == rows.border_subtitle == "sample d1 02:00, 3 min before"
        hall = _legend(app)
        for mark in ("✗ failed chips", "↯ tripped", "✗ down", "no data"):
            assert mark in hall, mark

        await pilot.press("escape")  # the campus level again: hall_ts of 02:03, no sample note
        await settle(pilot, app)
        assert (
            "sample" not in str(box.border_title) and not detail.border_subtitle and "↯" not in _legend(app)
        )

        await pilot.press("enter")
        await _jump(pilot, app, "d0 02:05")  # a sample time: the map is of the time shown
        assert app.core.t == 7500 and not scr.at_campus
        assert str(box.border_title) == "Hall 0 of 2 · 4 UltraServers · Activity · Esc: campus"
        assert not detail.border_subtitle and not rows.border_subtitle
        await _jump(pilot, app, "d0 02:09")  # 4 min after that sample
        assert str(box.border_title).endswith("· sample d1 02:05, 4 min before · Esc: campus")

        # UltraServer 5 (down since 1 h) on its own screen: the DOWN flag is of that sample too.
        await pilot.press("f2")
        await settle(pilot, app)
        app.core.select_us(5)
        await pilot.press("enter")
        await settle(pilot, app)
        assert app.current_mode == "ultraserver" and app.core.sel_us == 5
        chips_title = str(app.screen.query_one("#us-chips").border_title)
        assert "✗ DOWN" in chips_title and "(sample d1 02:05, 4 min before)" in chips_title
        # The Overview's hall strip: every UltraServer at that sample, and it says how old it is.
        from tui.widgets.hall import HallStrip

        await pilot.press("f1")
        await settle(pilot, app)
        assert app.screen.query_one(HallStrip).info().endswith(" · sample d1 02:05, 4 min before")
        await _jump(pilot, app, "d0 02:10")  # a sample time: nothing added
        assert "sample" not in app.screen.query_one(HallStrip).info()


async def test_single_hall_floor_has_no_campus_level(tmp_path: Path) -> None:
    from scenarios.runner import run as run_
    from tests.conftest import SMALL_TOML
    from tui.widgets.heatmap import FloorMap, HallMap

    out = tmp_path / "one.duckdb"
    run_(parse(SMALL_TOML, "one.toml"), SMALL_TOML, out, duration_s=3600)
    c = open_run_file(out)
    try:
        app = _app(c, "one.duckdb")
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("f2")
            await settle(pilot, app)
            scr = app.screen
            assert app.core.meta.halls == 1 and not scr.campus and not scr.query(HallMap)
            assert scr.query_one(FloorMap).display and "Floor ·" in str(
                scr.query_one("#floor-map").border_title
            )
            assert "hall" not in scr.query_one("#rows").table.column_names
            assert not scr.check_action("campus", ())
            await pilot.press("escape")
            assert scr.query_one(FloorMap).display
    finally:
        c.close()


# ---------------------------------------------------------------------- live
async def test_campus_level_live_matches_the_recording(tmp_path: Path) -> None:
    from tui.app import TwinApp
    from tui.widgets.heatmap import FloorMap, HallMap

    session = Session(parse(CAMP, "camp"), CAMP, tmp_path / "live.duckdb", duration_s=86400)
    app = TwinApp(session=session)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.core.t is not None and app.core.t >= 3600)
            await pilot.press("space")  # pause
            await quiet(pilot, app)
            await pilot.press("f2")
            scr = app.screen
            hm = scr.query_one(HallMap)
            await wait_for(pilot, lambda: bool(hm.data))
            t = app.core.t
            await wait_for(pilot, lambda: session.held_steps == 0)
            session.writer.flush()
            c = session.writer.cursor()
            try:
                want = expected_halls(c, t)
                recorded = c.sql(
                    f"SELECT power_w, chips_busy FROM hall_ts WHERE time_s = {t} ORDER BY hall_id"
                ).fetchall()
            finally:
                c.close()
            check_halls(hm.data, want)
            assert [r[0] for r in recorded] == pytest.approx(want["power_w"], rel=1e-9)
            rows = scr.query_one("#rows").table.to_pydict()
            assert rows["hall"] == [0, 0] and sum(rows["power_w"]) == pytest.approx(
                want["power_w"][0], rel=1e-9
            )
            await pilot.press("down", "enter")
            fm = scr.query_one(FloorMap)
            await wait_for(pilot, lambda: bool(fm.data))
            assert fm.base == 4 and fm.data["ultraserver_id"].tolist() == list(range(4, 10))
            assert sorted(cells(fm)) == list(range(4, 10))
            await wait_for(pilot, lambda: scr.query_one("#rows").table.to_pydict()["hall"] == [1, 1])
            await pilot.press("escape")
            assert scr.at_campus and hm.display
    finally:
        session.close("stopped")


async def test_live_hall_map_says_how_old_its_sample_is(tmp_path: Path) -> None:
    """Live, ultraserver_ts every 300 s at dt 60 s: a run of 124 steps ends at 02:03 (step 123); a
    hall's map shows the UltraServers as sampled at 02:00 (the feed keeps that sample and its time)
    and says so."""
    from tui.app import TwinApp
    from tui.widgets.heatmap import FloorMap
    from tui.widgets.info import InfoList

    session = Session(parse(SPARSE, "sparse"), SPARSE, tmp_path / "live.duckdb", duration_s=124 * 60)
    app = TwinApp(session=session)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: app.core.live.remaining == 0)
            await quiet(pilot, app)
            assert app.core.t == 123 * 60
            await pilot.press("f2")
            scr = app.screen
            assert "↯" not in _legend(app)
            await pilot.press("down", "enter")  # hall 1
            fm = scr.query_one(FloorMap)
            await wait_for(pilot, lambda: bool(fm.data))
            assert fm.data["time_s"].tolist() == [7200] * 6 and fm.data["ultraserver_id"].tolist() == list(
                range(4, 10)
            )
            assert str(scr.query_one("#floor-map").border_title) == (
                "Hall 1 of 2 · 6 UltraServers · Activity · sample d1 02:00, 3 min before · Esc: campus"
            )
            assert scr.query_one("#us-detail", InfoList).border_subtitle == "sample d1 02:00, 3 min before"
            await wait_for(pilot, lambda: scr.query_one("#rows").table.to_pydict()["hall"] == [1, 1])
            assert scr.query_one("#rows").border_subtitle == "sample d1 02:00, 3 min before"
            assert "↯ tripped" in _legend(app)
            # The sample is the one recorded at 02:00.
            await wait_for(pilot, lambda: session.held_steps == 0)
            session.writer.flush()
            c = session.writer.cursor()
            try:
                rec = c.sql(
                    "SELECT power_w FROM ultraserver_ts WHERE time_s = 7200 AND ultraserver_id >= 4 "
                    "ORDER BY ultraserver_id"
                ).fetchall()
                later = c.sql("SELECT count(*) FROM ultraserver_ts WHERE time_s > 7200").fetchall()[0][0]
            finally:
                c.close()
            assert later == 0
            np.testing.assert_allclose(fm.data["power_w"], [r[0] for r in rec], rtol=1e-9)
    finally:
        session.close("stopped")


async def test_live_paused_rows_catch_up_with_the_map(tmp_path: Path) -> None:
    """Live at full speed the Rows table is redrawn once a second, the map every tick; paused, the
    table catches up: its rows are the sums of the map's UltraServers and it names the same sample
    as the read-out."""
    from tui.app import TwinApp
    from tui.widgets.heatmap import FloorMap
    from tui.widgets.info import InfoList

    session = Session(parse(SPARSE, "sparse"), SPARSE, tmp_path / "live.duckdb", duration_s=86400)
    app = TwinApp(session=session)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: app.core.t is not None)
            await pilot.press("f2", "enter")  # hall 0's map
            scr = app.screen
            fm, rows = scr.query_one(FloorMap), scr.query_one("#rows")
            app.action_set_speed(4)  # max: many ticks between two redraws of the table
            first = app.core.t
            await wait_for(pilot, lambda: app.core.t >= first + 4 * 3600)
            await pilot.press("space")
            await quiet(pilot, app)

            def caught_up() -> bool:
                # The map shows the latest sample at the paused time (under load its last redraw
                # may come a tick after the pause), and the table the sums of that map.
                if not fm.data or not len(rows.table) or app.core.t is None:
                    return False
                if int(fm.data["time_s"][0]) != app.core.t - app.core.t % 300:
                    return False
                by_row = {
                    r: sum(
                        float(p)
                        for u, p in zip(fm.data["row_id"], fm.data["power_w"], strict=True)
                        if int(u) == r
                    )
                    for r in (0, 1)
                }
                shown = rows.table.to_pydict()
                return (
                    shown["row_id"] == [0, 1]
                    and np.allclose(shown["power_w"], [by_row[0], by_row[1]], rtol=1e-12)
                    and rows.border_subtitle == scr.query_one("#us-detail", InfoList).border_subtitle
                )

            await wait_for(pilot, caught_up)
    finally:
        session.close("stopped")


# ---------------------------------------------------------------------- snapshots
def _snap(keys: list[str]) -> Any:
    async def run_before(pilot: Any) -> None:
        await pilot.press(*keys)
        await settle(pilot, pilot.app)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
def test_snapshot_campus_level(snap_compare: Any, con: Any, size: tuple[int, int]) -> None:
    assert snap_compare(_app(con), terminal_size=size, run_before=_snap(["right", "right", "f2", "down"]))


def test_hall_strip_buckets_leave_the_info_its_room() -> None:
    """A hall that fits the line keeps one glyph per UltraServer (its info may be cut); a campus,
    bucketed anyway, leaves the info whole: 160 columns, 6,945 UltraServers, a 90-character info
    -> 160 - 5 - 90 = 65 buckets; too narrow for 20 buckets beside the info, the glyphs take the
    line and the info is cut."""
    from tui.widgets.hall import glyph_cells

    assert glyph_cells(64, 120, 60) == 64  # the reference factory: as before
    assert glyph_cells(6945, 160, 90) == 65
    assert glyph_cells(6945, 100, 90) == 95
    assert glyph_cells(0, 160, 10) == 0 and glyph_cells(3, 4, 10) == 1


def test_hall_strip_buckets_show_load_where_failures_are_everywhere() -> None:
    """A campus strip with a failed chip in every bucket still shows each bucket's mean activity
    (in the failed colour); one UltraServer per cell draws a failed one as ✗."""
    from tui.widgets.hall import _LEVELS, glyphs

    n = 6945
    act = np.where(np.arange(n) < n // 2, 1.0, 0.0)  # the first half busy, the rest idle
    us = {
        "activity": act,
        "chips_failed": (np.arange(n) % 40 == 0).astype(float),
        "max_chip_temp_c": np.full(n, 50.0),
    }
    cells = glyphs(us, 85, 90.0)
    assert len(cells) == 85 and "✗" not in [c for c, _ in cells]
    assert all(k == "failed" for _, k in cells)
    assert cells[0][0] == _LEVELS[-1] and cells[-1][0] == _LEVELS[1]  # full and idle buckets
    small = {
        "activity": np.array([0.5, 0.5, 1.0]),
        "chips_failed": np.array([0.0, 2.0, 0.0]),
        "max_chip_temp_c": np.array([50.0, 50.0, 95.0]),
    }
    assert [k for _, k in glyphs(small, 3, 90.0)] == ["ok", "failed", "hot"]
    assert glyphs(small, 3, 90.0)[1][0] == "✗"
