"""The Trainium3 power range (``twin.work.sensitivity``), its built-in scenario and its rows in
``twin compare``: the answer at each end of the range agrees with the router the floor uses."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from scenarios.spec import load, parse
from tests.conftest import SMALL_TOML
from tui.cli import main
from twin.compose import floorplan
from twin.spec import catalog
from twin.spec.params import SystemRows
from twin.work import sensitivity


def _floor(name: str) -> tuple[object, list[tuple[catalog.System, catalog.Accelerator]]]:
    spec, _, _ = load(name)
    p = (spec.variants[0] if spec.variants else spec).to_params()
    return p, sensitivity.floor_systems(p)


def test_the_range_is_the_fact_sheets_and_starts_at_the_catalogs_value() -> None:
    assert sensitivity.TRN3_TDP_RANGE_W[0] == catalog.ACCELERATORS["trainium3"].tdp_w
    assert sensitivity.TRN3_TDP_RANGE_W == (700.0, 900.0, 1100.0)  # facts §5: 700-1,100 W


def test_trainiums_energy_figure_is_affine_in_its_tdp_and_the_gpus_does_not_move() -> None:
    """Chip power is affine in TDP and so is rack input (rectifier (P + fixed) / eff): equal TDP
    steps give equal steps of Trainium3's energy figure over a GPU's, which stays put."""
    p, systems = _floor("gpu-vs-asic")
    pts = [q for q in sensitivity.tdp_range(p, systems, policies=("energy",)) if q.work == "pretrain (fp8)"]
    r = [q.trn3_over_gpu for q in sorted(pts, key=lambda q: q.tdp_w)]
    assert len(r) == 3 and r[0] < r[1] < r[2]
    assert r[2] - r[1] == pytest.approx(r[1] - r[0], rel=1e-9)


@pytest.mark.parametrize(("tdp", "expect"), [(700.0, "trn3-gen2"), (900.0, "gb300-nvl72")])
def test_the_verdict_is_the_floors_own_routing(tdp: float, expect: str) -> None:
    """On the built-in mixed floor under `energy`, the chat service goes where the floor's router
    sends it: to Trainium3 at the derived 700 W, to GB300 at the earlier 900 W."""
    spec, _, _ = load("gpu-vs-asic")
    energy = next(v for v in spec.variants if v.name == "energy")
    p = energy.to_params()
    rows = tuple(
        r
        if r.accelerator.key != "trainium3"
        else SystemRows(
            r.system, catalog.accelerator("trainium3", {"tdp_w": tdp}), r.ultraservers, r.ultraservers_per_row
        )
        for r in p.hall.rows
    )
    p_t = dataclasses.replace(p, hall=dataclasses.replace(p.hall, rows=rows))
    facts = floorplan.pool_facts(p_t)
    picked = facts[floorplan.service_pools(p_t, facts)[0]].system.key
    assert picked == expect
    pts = sensitivity.tdp_range(p, sensitivity.floor_systems(p), tdps=(tdp,), policies=("energy",))
    chat = next(q for q in pts if q.work.startswith("service chat"))
    assert chat.best == picked
    assert (chat.trn3_over_gpu < 1) == (picked == "trn3-gen2")


def test_work_one_family_only_and_floors_without_both_are_left_out() -> None:
    p, systems = _floor("gpu-vs-asic")
    works = {q.work for q in sensitivity.tdp_range(p, systems)}
    assert not any(w.startswith("batch_inference") for w in works)  # CUDA-only there
    assert {"pretrain (fp8)", "service chat (fp8)"} <= works
    trn_only = [s for s in systems if s[0].family == "trainium"]
    assert not sensitivity.compared(trn_only) and sensitivity.tdp_range(p, trn_only) == []


def test_the_builtin_power_range_scenario() -> None:
    """trn3-power-range: Trn3 Gen2 at 700 / 900 / 1,100 W and GB300 in one 2.5 MW envelope; the
    envelope buys as many systems as fit at full-load DC power (144 x TDP + 36 x 500 W hosts +
    4 kW switches per UltraServer)."""
    spec, _, _ = load("trn3-power-range")
    got = {v.name: v.to_params().hall for v in spec.variants}
    assert set(got) == {"trn3-700w", "trn3-900w", "trn3-1100w", "gb300"}
    for name, tdp in (("trn3-700w", 700.0), ("trn3-900w", 900.0), ("trn3-1100w", 1100.0)):
        h = got[name]
        assert h.system.key == "trn3-gen2" and h.accelerator.tdp_w == tdp
        assert h.ultraservers == math.floor(2.5e6 / (144 * tdp + 36 * 500 + 4000))
    assert got["gb300"].system.key == "gb300-nvl72"
    assert [got[n].ultraservers * 144 for n in ("trn3-700w", "trn3-900w", "trn3-1100w")] == [2880, 2304, 1872]


def test_compare_shows_the_answer_across_the_range(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(SMALL_TOML)
    g = tmp_path / "g.toml"
    g.write_text(SMALL_TOML.replace('system = "trn3-gen2"', 'system = "gb300-nvl72"'))
    assert parse(g.read_text(), "g.toml").to_params().hall.system.key == "gb300-nvl72"
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    for src, out in ((f, a), (g, b)):
        r = CliRunner().invoke(main, ["run", str(src), "--hours", "0.25", "--out", str(out)])
        assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["compare", str(a), str(b)])
    assert r.exit_code == 0, r.output
    text = r.output
    assert "Trainium3 power range" in text and "700 W" in text and "1,100 W" in text
    chat = next(line for line in text.splitlines() if line.startswith("service chat") and "energy" in line)
    assert chat.split()[-5:] == ["trn3-gen2", "/", "gb300-nvl72", "/", "gb300-nvl72"]
    # Two Trainium3 runs: nothing to weigh against a GPU, no rows.
    r = CliRunner().invoke(main, ["compare", str(a), str(a)])
    assert r.exit_code == 0 and "Trainium3 power range" not in r.output
