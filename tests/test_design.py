"""The run's Design: derived once from the parameters, recorded with the run, read back by replay."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from scenarios.runner import run
from scenarios.spec import parse
from twin.physics.design import Design, derive

TOML = """
name = "shape"
seed = 3
dt_s = 600
duration_h = 1

[hall]
system = "trn3-gen2"
ultraservers = 2
ultraservers_per_row = 2

[training]
arrivals_per_day = 10
"""


def _replay_meta(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    from tui.console.replay import ReplayFeed

    spec = parse(text, "shape.toml")
    out = tmp_path / "shape.duckdb"
    r = run(spec, text, out, duration_s=3600)
    con = duckdb.connect(str(out), read_only=True)
    try:
        return ReplayFeed(con, r.run_id, str(out)).meta, con.sql("SELECT design_json FROM runs").fetchall()[
            0
        ][0]
    finally:
        con.close()


def test_design_by_hand() -> None:
    """Full-load IT power of one UltraServer = (chips x TDP + servers x host + switch + servers x
    rectifier fixed) / rectifier efficiency."""
    p = parse(TOML + "\n[hardware]\ntdp_w = 1000\n", "x.toml").to_params()
    d = derive(p)
    s, pw = p.hall.system, p.power
    dc = s.chips * 1000.0 + s.servers * s.host_w_per_server + s.switch_w
    assert d.us_full_load_dc_w == pytest.approx(dc)
    assert d.us_full_load_it_w == pytest.approx(
        (dc + pw.psu_fixed_w_per_server * s.servers) / pw.psu_efficiency
    )
    assert d.chips == 2 * s.chips and d.rows == 1
    assert Design.from_json(d.to_json()) == d


def test_replay_shows_the_runs_own_shape(tmp_path: Path) -> None:
    """A run with 16 servers per UltraServer replays with 16, not the catalog's."""
    meta, text = _replay_meta(tmp_path, TOML + "\n[hardware]\nservers = 16\n")
    assert meta.servers_per_us == 16 and meta.chips_per_server == 144 // 16
    assert Design.from_json(text).servers_per_us == 16


def test_replay_colours_by_the_runs_own_full_load_power(tmp_path: Path) -> None:
    """A TDP override changes the full-load power the replay colours by: by the chips' share,
    144 x 300 W more at the rack input."""
    base, _ = _replay_meta(tmp_path, TOML)
    hot, _ = _replay_meta(tmp_path / "b", TOML + "\n[hardware]\ntdp_w = 1300\n")
    p = parse(TOML, "x.toml").to_params()
    tdp0 = p.hall.accelerator.tdp_w
    assert hot.us_power_w - base.us_power_w == pytest.approx(144 * (1300 - tdp0) / p.power.psu_efficiency)


def test_recorded_design_that_is_not_a_design_is_refused() -> None:
    with pytest.raises(ValueError, match="lacks"):
        Design.from_json('{"version": 1}')
