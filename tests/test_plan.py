"""twin plan: the smallest fleet meeting KPI constraints, on cases solvable by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from scenarios import plan
from scenarios.spec import ScenarioError
from tests.conftest import SMALL_TOML
from tui.cli import main

# Chips per system (AWS: Trn3 Gen2 UltraServer 144 Trainium3, Trn3 Gen1 UltraServer 64; facts §1).
CHIPS = {"trn3-gen2": 144, "trn3-gen1": 64}


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def small(tmp_path: Path) -> Path:
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    return f


def test_smallest_fleet_for_a_chip_count_by_hand(small: Path) -> None:
    need = 300
    code, out, err = invoke(
        "plan",
        str(small),
        "--minimize",
        "hall.ultraservers",
        "--subject-to",
        f"chips >= {need}",
        "--range",
        "1:9",
        "--hours",
        "1",
        "--over",
        "hall.system=trn3-gen2,trn3-gen1",
        "-j",
        "2",
        "--json",
    )
    assert code == 0, err
    res = json.loads(out)
    got = {c["case"]["hall.system"]: c for c in res["cases"]}
    for system, per in CHIPS.items():
        want = math.ceil(need / per)  # 3 Trn3 Gen2 (432 chips), 5 Trn3 Gen1 (320 chips)
        assert got[system]["answer"] == want
        assert got[system]["binding"] == [f"chips >= {need}"]
        assert f"binding at {want - 1}: chips = {(want - 1) * per}" in got[system]["why"]
    assert res["answer"] == max(math.ceil(need / p) for p in CHIPS.values())


def test_an_upper_bound_can_make_it_infeasible(small: Path) -> None:
    # 300 <= chips <= 400 has no multiple of 144; 300 <= chips <= 600 has 432 (3 UltraServers).
    code, out, _ = invoke(
        "plan",
        str(small),
        "--subject-to",
        "chips >= 300",
        "--subject-to",
        "chips <= 400",
        "--range",
        "1:8",
        "--hours",
        "1",
        "-j",
        "1",
    )
    assert code == 1 and "none" in out and "chips = 432, needs <= 400" in out
    code, out, _ = invoke(
        "plan",
        str(small),
        "--subject-to",
        "chips >= 300",
        "--subject-to",
        "chips <= 600",
        "--range",
        "1:8",
        "--hours",
        "1",
        "-j",
        "1",
    )
    assert code == 0 and ": 3  (binding at 2: chips = 288" in out


def test_bisection_agrees_with_running_every_value(small: Path) -> None:
    """On a KPI the model computes (peak facility power), the bisection's answer is the one the
    brute-force sweep of the whole range finds, and the constraint holds there and not one below."""
    args = (
        "plan",
        str(small),
        "--subject-to",
        "peak_facility_mw >= 0.2",
        "--range",
        "1:8",
        "--hours",
        "1",
        "-j",
        "2",
        "--json",
    )
    code, out, err = invoke(*args)
    assert code == 0, err
    bis = json.loads(out)
    code, out, err = invoke(*args, "--method", "sweep")
    assert code == 0, err
    full = json.loads(out)
    assert bis["answer"] == full["answer"] and 1 < bis["answer"] < 8
    assert bis["runs"] < full["runs"] == 8
    assert full["cases"][0]["warning"] is None  # peak power grows with the fleet


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("slo_attainment >= 0.99", None),
        ("  peak_facility_mw<=30 ", None),
        ("pue < 1.3e0", None),
        ("bogus >= 1", "unknown KPI 'bogus'"),
        ("slo_attainment => 0.99", "expected KPI OP NUMBER"),
        ("slo_attainment >= abc", "expected KPI OP NUMBER"),
        ("slo_attainment >= 0.99; DROP TABLE runs", "expected KPI OP NUMBER"),
        ("__import__('os') >= 1", "expected KPI OP NUMBER"),
        ("pue >= 1e999", "finite"),
        ("pue >= " + "9" * 300, "expected KPI OP NUMBER"),
        ("", "expected KPI OP NUMBER"),
    ],
)
def test_constraints_are_parsed_strictly(text: str, words: str | None) -> None:
    if words is None:
        c = plan.parse_constraint(text)
        assert c.kpi and c.op in plan.OPS and math.isfinite(c.bound)
        return
    with pytest.raises(ScenarioError, match="--subject-to") as e:
        plan.parse_constraint(text)
    assert words in str(e.value)


def test_bad_plan_arguments_exit_2_before_running(small: Path) -> None:
    for args, words in (
        (("--subject-to", "chips >= 1", "--range", "5:2"), "--range"),
        (("--subject-to", "chips >= 1", "--range", "0:4"), "out of range"),
        (("--subject-to", "chips >= 1", "--minimize", "hall.ultrasrvers"), "unknown key"),
        (("--subject-to", "chips >= 1", "--over", "site.climate=temperate,mars"), "unknown climate 'mars'"),
        (
            (
                "--subject-to",
                "nope > 1",
            ),
            "unknown KPI",
        ),
    ):
        code, _, err = invoke("plan", str(small), "--hours", "1", *args)
        assert code == 2, (args, err)
        assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_plan_on_ray_matches_the_hand_answer(small: Path) -> None:
    from scenarios import execution

    if execution.ray_missing():
        pytest.skip("ray is not installed (pip install -e '.[ray]')")
    code, out, err = invoke(
        "plan",
        str(small),
        "--subject-to",
        "chips >= 300",
        "--range",
        "1:9",
        "--hours",
        "1",
        "--backend",
        "ray",
        "-j",
        "2",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["answer"] == math.ceil(300 / CHIPS["trn3-gen2"])
