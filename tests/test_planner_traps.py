"""A planner's first hour: typos get a suggestion, durations take units, one run's KPIs read with
`twin compare`, `--set KEY=` unsets a key, overrides are shown, caps that cannot hold say so and
the work can grow with the fleet."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SMALL_TOML
from tui.cli import main


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("validate", "defualt"), "did you mean 'default'?"),
        (("validate", "default", "--set", "hall.ultraserver=32"), "did you mean 'ultraservers'?"),
        (("validate", "default", "--set", "training.evl.share=1"), "did you mean 'eval'?"),
        (("validate", "default", "--set", "sevices[0].replicas=1"), "did you mean 'services'?"),
    ],
)
def test_a_typo_gets_did_you_mean(args: tuple[str, ...], needle: str) -> None:
    code, _, err = invoke(*args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_a_far_off_name_gets_no_guess() -> None:
    code, _, err = invoke("validate", "default", "--set", "hall.zzzzqq=1")
    assert code == 2 and "unknown key" in err and "did you mean" not in err


@pytest.mark.parametrize(
    ("flag", "text", "hours"),
    [
        ("--hours", "2h", 2.0),
        ("--hours", "90m", 1.5),
        ("--hours", "7200s", 2.0),
        ("--hours", "0.5d", 12.0),
        ("--hours", "3", 3.0),
        ("--days", "12h", 12.0),
        ("--days", "1", 24.0),
    ],
)
def test_durations_take_units_as_export_does(flag: str, text: str, hours: float) -> None:
    code, out, err = invoke("validate", "default", flag, text)
    assert code == 0, err
    assert f", {hours:g} h after" in out


def test_a_duration_that_is_no_duration_is_one_line() -> None:
    code, _, err = invoke("validate", "default", "--hours", "2x")
    assert code == 2 and "--hours" in err and "90m, 2h" in err


def test_compare_reads_one_run(small_run: Path) -> None:
    code, out, err = invoke("compare", str(small_run))
    assert code == 0, err
    assert "PUE" in out.splitlines()[2] or any(line.startswith("PUE") for line in out.splitlines())
    assert "ratio" not in out.splitlines()[0]
    code, out, _ = invoke("compare", str(small_run), "--json")
    assert code == 0 and len(json.loads(out)) == 1


def test_set_with_an_empty_value_unsets_the_key(tmp_path: Path) -> None:
    from scenarios.overrides import load

    # The default states 16 UltraServers: with an envelope too it is refused, unset it is sized
    # by the envelope (20 MW / the IT power of one UltraServer at full load).
    code, _, err = invoke("validate", "default", "--set", "hall.it_envelope_w=20e6")
    assert code == 2 and "hall.ultraservers=" in err
    spec, text, _ = load("default", ["hall.ultraservers=", "hall.it_envelope_w=20e6"])
    assert "ultraservers" not in tomllib.loads(text)["hall"]
    assert spec.hall.it_envelope_w == 20e6 and spec.hall.ultraservers is None
    code, _, err = invoke("validate", "default", "--set", "hall.ultraserver=")
    assert code == 2 and "nothing to unset" in err
    code, _, err = invoke("validate", "default", "--set", "services[0]=")
    assert code == 2 and "cannot be unset" in err
    f = tmp_path / "s.toml"
    f.write_text(SMALL_TOML)
    spec, text, _ = load(str(f), ["training.arrivals_per_day="])
    assert "arrivals_per_day" not in tomllib.loads(text).get("training", {})
