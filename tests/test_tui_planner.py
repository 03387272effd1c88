"""The console as a planner meets it: chip power labels that read, plots that say each value
once, the Energy screen whole at 48 rows, what-if labels whole, the SQL editor's select all,
clear and help, and the overrides of a run in the status line."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.overrides import load
from scenarios.runner import run
from storage.reader import open_run_file
from tests.test_tui import live_app, replay_app, settle, status_text, wait_for


def test_chip_power_reads_in_watts_and_stays_four_characters() -> None:
    from tui.console.scale import METRICS
    from tui.widgets.heatmap import short_value

    power = next(m for m in METRICS if m.key == "power")
    # A Trainium3 chip draws 100-900 W: '1k' and '0k' said nothing; an UltraServer ~100 kW.
    assert [short_value(power, v) for v in (120.0, 520.0, 893.0)] == ["120", "520", "893"]
    assert [short_value(power, v) for v in (1_234.0, 9_990.0, 115e3, 1.2e6)] == [
        "1.2k",
        "10k",
        "115k",
        "1.2M",
    ]
    for v in (0.0, 9.96, 999.4, 999.6, 9_949.0, 99_960.0, 999_600.0, 9.96e6, 5e8, 3e9):
        text = short_value(power, v)
        assert len(text) <= 4, (v, text)
        # The text is the value to two significant digits or better.
        scale = {"k": 1e3, "M": 1e6, "G": 1e9}.get(text[-1], 1.0)
        number = float(text.rstrip("kMG"))
        assert number * scale == pytest.approx(v, rel=0.06, abs=0.5), (v, text)


def test_a_flat_plot_labels_its_value_once_where_it_lies() -> None:
    from tui.widgets.plot import distinct_labels

    # 100 % flat (the line at the top), 0 flat (at the bottom), 75 flat (mid-height).
    assert distinct_labels({0: "100 %", 3: "100 %", 7: "100 %"}, near=0) == {0: "100 %"}
    assert distinct_labels({0: "0", 3: "0", 7: "0"}, near=7) == {7: "0"}
    assert distinct_labels({0: "75", 3: "75", 7: "75"}, near=4) == {3: "75"}
    assert distinct_labels({0: "75", 3: "75", 7: "74"}, near=0) == {0: "75", 7: "74"}
    assert distinct_labels({0: "3 MW", 3: "2 MW", 7: "1 MW"}) == {0: "3 MW", 3: "2 MW", 7: "1 MW"}


@pytest.fixture(scope="module")
def modified_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.test_tui import TINY

    f = tmp_path_factory.mktemp("planner") / "tiny.toml"
    f.write_text(TINY)
    spec, text, _ = load(str(f), ["site.climate=hot", "services[0].replicas=3"])
    out = f.with_name("modified.duckdb")
    run(spec, text, out, duration_s=6 * 3600)
    return out


async def test_the_status_line_names_the_overrides(modified_run: Path) -> None:
    con = open_run_file(modified_run)
    try:
        app = replay_app(con)
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot, app)
            assert "tiny (modified: site.climate=hot, services[0].replicas=3)" in status_text(app)
    finally:
        con.close()


def test_the_status_label_of_many_overrides_is_short() -> None:
    from tui.console.meta import scenario_label

    text = "# Effective scenario: x with\n" + "".join(f"# --set a{i}.long_key_name={i}\n" for i in range(9))
    label = scenario_label("default", text)
    assert label.startswith("default (modified: a0.long_key_name=0") and label.endswith("more)")
    assert len(label) < 100
    assert scenario_label("default", "name = 'default'\n") == "default"


async def test_the_energy_screen_fits_48_rows(modified_run: Path) -> None:
    from tui.widgets.plot import BraillePlot

    con = open_run_file(modified_run)
    try:
        app = replay_app(con)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("f5")
            await settle(pilot, app)
            body = app.screen.query_one("#energy-body")
            assert body.max_scroll_y == 0  # nothing below the fold
            bottom = body.region.bottom
            plots = list(app.screen.query(BraillePlot))
            assert plots and all(p.region.bottom <= bottom and p.region.height >= 2 for p in plots)
    finally:
        con.close()


async def test_every_what_if_label_is_shown_whole(tmp_path: Path) -> None:
    from textual.widgets import Static

    from tui.console.whatif import WHAT_IFS

    app, _ = live_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("space")  # paused: nothing moves under the menu
        await pilot.press("i")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "WhatIfScreen")
        for w in WHAT_IFS:
            await pilot.press(w.key)
            await pilot.pause()
            for wid, text in (
                ("#whatif-value-label", w.value_label),
                ("#whatif-duration-label", w.duration_label),
            ):
                if text:
                    label = app.screen.query_one(wid, Static)
                    assert label.content_region.width >= len(text), (w.key, text)
        await pilot.press("escape")


async def test_the_sql_editor_selects_all_clears_and_opens_the_help(modified_run: Path) -> None:
    from textual.widgets import TextArea

    from tui.screens.help import HelpScreen

    con = open_run_file(modified_run)
    try:
        app = replay_app(con)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("f6")
            await settle(pilot, app)
            ed = app.screen.query_one("#editor", TextArea)
            await wait_for(pilot, lambda: ed.has_focus and bool(ed.text))
            query = ed.text
            await pilot.press("ctrl+a")
            assert ed.selected_text == query
            await pilot.press("ctrl+l")
            assert ed.text == ""
            await pilot.press("ctrl+z")
            assert ed.text == query
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert ed.text == query  # the ? was the help's, not typed
    finally:
        con.close()
