"""The Floor marks UltraServers that thermal protection powered off (tripped) and UltraServers that
are down (every chip failed) distinctly from the metric's colours, with a legend; the selected
UltraServer's read-out and the UltraServer screen say so too. Checked against the recording."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scenarios.runner import run
from scenarios.spec import parse
from storage.reader import latest_run_id, open_run_file

# Row 0's CDU pumps stop for 2 h at 1 h (both its UltraServers trip once their loops pass the trip
# point); UltraServer 3 fails at 1 h for 6 h.
TRIP = """
name = "trip"
seed = 3
dt_s = 60
duration_h = 4

[hall]
system = "trn3-gen2"
ultraservers = 4
ultraservers_per_row = 2

[training]
arrivals_per_day = 3000

[[services]]  # the chat service with the model defaults (no service runs undeclared)

[[events]]
at_h = 1
kind = "cdu_pump_failure"
target = 0
duration_h = 2

[[events]]
at_h = 1
kind = "fail_ultraserver"
target = 3
duration_h = 6
"""
T = 2 * 3600


@pytest.fixture(scope="module")
def trip_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trip") / "trip.duckdb"
    run(parse(TRIP, "trip.toml"), TRIP, out, duration_s=3 * 3600)
    return out


@pytest.fixture
def con(trip_file: Path) -> Iterator[Any]:
    c = open_run_file(trip_file)
    try:
        yield c
    finally:
        c.close()


def recorded(con: Any, t: int) -> dict[int, tuple[bool, int]]:
    rows = con.sql(
        f"SELECT ultraserver_id, tripped, chips_failed FROM ultraserver_ts WHERE time_s = {t}"
    ).fetchall()
    return {int(u): (bool(tr), int(f)) for u, tr, f in rows}


def cells(text: str) -> dict[int, tuple[str, str]]:
    """Each UltraServer's (mark, value) on the Floor map: a cell is its number, a mark, its value."""
    import re

    out: dict[int, tuple[str, str]] = {}
    for line in text.splitlines():
        for m in re.finditer(r"(\d+)([✗↯ ])\s*([^\s\]]*)", line[3:]):
            out.setdefault(int(m.group(1)), (m.group(2), m.group(3)))
    return out


async def test_floor_marks_tripped_and_down_ultraservers(con: Any, tmp_path: Path) -> None:
    from tui.app import TwinApp
    from tui.widgets.heatmap import FloorMap
    from tui.widgets.info import InfoList

    rec = recorded(con, T)
    tripped = {u for u, (tr, _) in rec.items() if tr}
    down = {u for u, (tr, f) in rec.items() if not tr and f == 144}
    assert tripped == {0, 1} and down == {3}  # the scenario does what it says
    app = TwinApp(replay_con=con, replay_run_id=latest_run_id(con), replay_path="trip.duckdb")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        app.screen.query_one("Input").value = "d0 02:00"
        await pilot.press("enter")
        await pilot.press("f2")
        await _settle(pilot, app)
        assert app.core.t == T
        fm = app.screen.query_one(FloorMap)
        text = fm.plain_text()
        got = cells(text)
        for u in range(4):
            if u in tripped:
                assert got[u] == ("↯", "trip")
            elif u in down:
                assert got[u] == ("✗", "down")
            else:
                assert got[u][0] == " " and got[u][1].endswith("%")  # the activity, unmarked
        rows = app.screen.query_one("#rows").table.to_pydict()
        assert rows["tripped"] == [sum(u in tripped for u in (0, 1)), sum(u in tripped for u in (2, 3))]
        legend = str(app.screen.query_one("#legend").render())
        assert "↯ tripped" in legend and "✗ down" in legend
        detail = app.screen.query_one("#us-detail", InfoList)
        assert ("state", "TRIPPED (thermal)") in [i[:2] for i in detail.items]
        await pilot.press("enter")
        await _settle(pilot, app)
        assert app.current_mode == "ultraserver" and "TRIPPED" in str(
            app.screen.query_one("#us-chips").border_title
        )
        await pilot.press("p")  # UltraServer 3
        await _settle(pilot, app)
        assert app.core.sel_us == 3 and "DOWN" in str(app.screen.query_one("#us-chips").border_title)
        assert "DOWN" in str(app.screen.query_one("#chip-detail").render())
        # Energy & cost: row 0's CDU has lost its pumps, row 1's runs with UltraServer 3's chips down
        await pilot.press("f5")
        await _settle(pilot, app)
        units = {label: value for label, value, _, _ in app.screen.query_one("#units", InfoList).items}
        assert units["CDU 0"].endswith("FAILED (pumps)") and units["CDU 1"].endswith("144 chips down")


async def _settle(pilot: Any, app: Any) -> None:
    for _ in range(100_000):
        await pilot.pause()
        if not app.panels_pending():
            await pilot.pause()
            return
        await pilot.pause(0.02)
    raise AssertionError("the panels never answered")


def _snap(keys: list[str]) -> Any:
    async def run_before(pilot: Any) -> None:
        await pilot.press(*keys)
        await _settle(pilot, pilot.app)

    return run_before


def _app(con: Any) -> Any:
    from tui.app import TwinApp

    return TwinApp(replay_con=con, replay_run_id=latest_run_id(con), replay_path="trip.duckdb")


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
def test_snapshot_floor_with_tripped_and_down(snap_compare: Any, con: Any, size: tuple[int, int]) -> None:
    assert snap_compare(_app(con), terminal_size=size, run_before=_snap(["right", "right", "f2"]))


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
def test_snapshot_tripped_ultraserver(snap_compare: Any, con: Any, size: tuple[int, int]) -> None:
    assert snap_compare(_app(con), terminal_size=size, run_before=_snap(["right", "right", "f2", "enter"]))
