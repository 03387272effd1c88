"""A screen never crashes on an odd recording: the recording check refuses what no run writes
(a run whose step ``dt_s`` is not positive), a screen shows "n/a" for what it cannot compute, and
a crash of the terminal UI ends the command with a non-zero status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_outputs_safety import TOML, copy_recording, invoke
from tests.test_recording_check import COMMANDS, _duckdb_edit


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from scenarios.runner import run
    from scenarios.spec import parse

    out = tmp_path_factory.mktemp("rec") / "good.duckdb"
    run(parse(TOML, "tiny.toml"), TOML, out, duration_s=3600)
    return out


@pytest.mark.parametrize("dt", [0, -60])
def test_a_run_with_no_positive_step_is_refused_by_every_command(
    dt: int,
    recording: Path,
    tmp_path: Path,
) -> None:
    f = _duckdb_edit(recording, tmp_path / "dt.duckdb", f"UPDATE runs SET dt_s = {dt}")
    for command, args in COMMANDS.items():
        code, _, err = invoke(*args(f, tmp_path))
        assert code == 2 and len(err.strip().splitlines()) == 1, (command, err)
        assert str(f) in err and f"dt_s {dt}" in err, (command, err)


def test_the_energy_screen_says_n_a_for_rates_without_a_step() -> None:
    from tui.screens.energy import NO_STEP, plant_items, site_items

    row: dict[str, Any] = {
        k: [1.0]
        for k in (
            "water_l",
            "cost_usd",
            "co2_kg",
            "energy_j",
            "free_cooling_fraction",
            "unmet_heat_w",
            "chiller_cop",
            "price_usd_per_mwh",
            "carbon_g_per_kwh",
        )
    }
    plant = {k: v for k, v, _, _ in plant_items(row, 0)}
    site = {k: v for k, v, _, _ in site_items(row, 0)}
    assert plant["water"] == NO_STEP and site["rates"] == NO_STEP and "cost rate" not in site
    # With a step: per hour, by hand (1 L in a 60 s step: 60 L/h).
    assert {k: v for k, v, _, _ in plant_items(row, 60)}["water"] == "60 L/h"


def test_a_crash_of_the_replay_exits_non_zero(
    recording: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Textual shows an unhandled error's traceback and returns from ``run``; the command then
    exits 70 (a bug in twin), not 0. The app runs headless here (no terminal in a test)."""
    from tui.app import TwinApp

    run, mount = TwinApp.run, TwinApp.on_mount

    def headless(self: Any, *a: Any, **k: Any) -> Any:
        return run(self, *a, headless=True, **k)

    def broken(self: Any) -> None:
        mount(self)
        raise RuntimeError("a screen failed")

    monkeypatch.setattr(TwinApp, "run", headless)
    monkeypatch.setattr(TwinApp, "on_mount", broken)
    f = copy_recording(recording, tmp_path / "r.duckdb")
    code, _, err = invoke("replay", f)
    assert code == 70 and "ended on an error" in err, err
