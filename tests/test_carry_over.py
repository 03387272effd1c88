"""No silent carry-over: keys written for one system do not follow a switch to another, and a
scenario runs only the services it declares."""

from __future__ import annotations

import tomllib
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from scenarios import overrides, sweep
from scenarios.spec import ScenarioError, builtin_names, load, parse
from tests.conftest import SMALL_TOML
from tui.cli import main

HW = SMALL_TOML + "\n[hardware]\ntdp_w = 900\n"
CARRIED = "hardware.tdp_w = 900 was written for trn3-gen2, not hgx-h100"


def invoke(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout + r.stderr


# ---------------------------------------------------------------------- hardware belongs to its system
def test_set_switching_the_system_refuses_the_old_systems_hardware(tmp_path: Path) -> None:
    f = tmp_path / "hw.toml"
    f.write_text(HW)
    with pytest.raises(ScenarioError) as e:
        overrides.load(str(f), ["hall.system=hgx-h100"])
    msg = str(e.value)
    assert msg.startswith("--set hall.system=hgx-h100: hall.system: " + CARRIED)
    assert "--set hardware.tdp_w=VALUE" in msg and "--set hardware={}" in msg
    assert "\n" not in msg
    # Restated (or dropped), the switch is taken; the same system again is no switch.
    s, _, _ = overrides.load(str(f), ["hall.system=hgx-h100", "hardware.tdp_w=700"])
    assert s.to_params().hall.accelerator.tdp_w == 700
    s, _, _ = overrides.load(str(f), ["hall.system=hgx-h100", "hardware={}"])
    assert s.to_params().hall.accelerator.tdp_w == 700  # the catalog's H100 SXM figure
    overrides.load(str(f), ["hall.system=trn3-gen2", "hall.ultraservers=4"])
    # The built-in default sets no [hardware]: its system switches freely.
    s, _, _ = overrides.load("default", ["hall.system=hgx-h100"])
    assert s.to_params().hall.system.key == "hgx-h100"


def test_every_per_system_key_is_tied_to_its_system() -> None:
    capex = SMALL_TOML + "\n[tco]\nsystem_capex_usd = 3.0e6\n"
    with pytest.raises(ScenarioError, match=r"tco.system_capex_usd = 3000000.0 was written for trn3-gen2"):
        overrides.apply(tomllib.loads(capex), [overrides.make("hall.system", "hgx-h100")])
    rows = (
        'name = "rows"\n[hall]\nultraservers_per_row = 2\n'
        '[[hall.rows]]\nsystem = "trn3-gen2"\ncount = 2\ncapex_usd = 4.0e6\n'
        '[[hall.rows]]\nsystem = "gb300-nvl72"\ncount = 2\n'
    )
    with pytest.raises(
        ScenarioError, match=r"hall.rows\[0\].system: hall.rows\[0\].capex_usd = 4000000.0 was written"
    ):
        overrides.apply(tomllib.loads(rows), [overrides.make("hall.rows[0].system", "hgx-h100")])
    campus = (
        'name = "c"\n[hardware]\ntdp_w = 900\n'
        '[[halls]]\nsystem = "trn3-gen2"\nultraservers = 2\n[[halls]]\nsystem = "trn3-gen2"\nultraservers = 2\n'
    )
    with pytest.raises(
        ScenarioError, match=r"halls\[1\].system: hardware.tdp_w = 900 was written for trn3-gen2"
    ):
        overrides.apply(tomllib.loads(campus), [overrides.make("halls[1].system", "hgx-h100")])


def test_a_variant_switching_the_system_must_restate_the_hardware() -> None:
    base = HW + '\n[[variants]]\nname = "same"\n'
    with pytest.raises(ScenarioError) as e:
        parse(base + '\n[[variants]]\nname = "h100"\nhall = { system = "hgx-h100" }\n', "cmp.toml")
    assert str(e.value).startswith("cmp.toml (variant 'h100'): hall.system: " + CARRIED)
    assert "give the variant its own hardware.tdp_w" in str(e.value)
    ok = parse(
        base + '\n[[variants]]\nname = "h100"\nhall = { system = "hgx-h100" }\nhardware = { tdp_w = 700 }\n',
        "cmp.toml",
    )
    assert [v.to_params().hall.accelerator.tdp_w for v in ok.variants] == [900, 700]


def test_set_into_variants_with_their_own_hardware_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "cmp.toml"
    f.write_text(
        SMALL_TOML
        + '\n[[variants]]\nname = "a"\nhall = { system = "gb300-nvl72" }\nhardware = { tdp_w = 1400 }\n'
        '\n[[variants]]\nname = "b"\n'
    )
    with pytest.raises(
        ScenarioError, match=r"^--set hall.system=hgx-h100: variant 'a': hall.system: hardware.tdp_w"
    ):
        overrides.load(str(f), ["hall.system=hgx-h100"])


def test_validate_run_sweep_and_plan_refuse_alike(tmp_path: Path) -> None:
    f = tmp_path / "hw.toml"
    f.write_text(HW)
    code, out = invoke("validate", str(f), "--set", "hall.system=hgx-h100")
    assert code != 0 and CARRIED in out
    run_file = tmp_path / "r.duckdb"
    code, out = invoke("run", str(f), "--hours", "1", "--out", str(run_file), "--set", "hall.system=hgx-h100")
    assert code != 0 and CARRIED in out and not run_file.exists()
    # Sweep points and plan cases go through sweep.check (and run_task through effective_text).
    ovs = [overrides.make("hall.system", "hgx-h100")]
    with pytest.raises(ScenarioError, match='point 1: --set hall.system="hgx-h100": hall.system: ' + CARRIED):
        sweep.check(tomllib.loads(HW), None, ovs, "sweep.toml: point 1")
    with pytest.raises(ScenarioError, match=CARRIED):
        overrides.effective_text(HW, ovs, "hw.toml")


# ---------------------------------------------------------------------- no undeclared service
NO_SERVICES = SMALL_TOML[: SMALL_TOML.index("[[services]]")]


def test_a_scenario_without_services_runs_none(tmp_path: Path) -> None:
    from scenarios.runner import run

    s = parse(NO_SERVICES, "bare.toml")
    assert s.services == [] and s.to_params().services == ()
    out = tmp_path / "bare.duckdb"
    run(s, NO_SERVICES, out, duration_s=2 * 3600, publish_live=False)
    con = duckdb.connect(str(out), read_only=True)
    try:
        assert con.sql("SELECT count(*) FROM service_ts").fetchall()[0][0] == 0
        assert con.sql("SELECT max(inference_chips) FROM factory_ts").fetchall()[0][0] == 0
        assert con.sql("SELECT count(*) FROM jobs WHERE kind = 'inference'").fetchall()[0][0] == 0
    finally:
        con.close()


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_declares_its_services(name: str) -> None:
    """A built-in says what it serves: a [[services]] table or `services = []`."""
    _, text, _ = load(name)
    assert "services" in tomllib.loads(text)


# ---------------------------------------------------------------------- comparisons load every system
def _comparisons() -> list[str]:
    out = []
    for name in builtin_names():
        s, _, _ = load(name)
        if any(s2.floor_systems() != s.floor_systems() for s2 in s.variants) or len(s.floor_systems()) > 1:
            out.append(name)
    return out


def test_the_system_comparisons_are_known() -> None:
    assert _comparisons() == ["gpu-vs-asic", "trainium3-vs-gb300", "trn2-vs-trn3", "trn3-power-range"]


@pytest.mark.parametrize("name", ["gpu-vs-asic", "trainium3-vs-gb300", "trn2-vs-trn3", "trn3-power-range"])
def test_comparisons_state_their_measured_load(name: str) -> None:
    """Each system comparison keeps its work steady through the week and says in the file how
    busy its systems ran (bench/bench_comparisons.py measures it)."""
    _, text, _ = load(name)
    data = tomllib.loads(text)
    assert data["training"]["weekend_factor"] == 1.0
    assert "bench/bench_comparisons.py" in text and "busy" in text
