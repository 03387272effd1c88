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


# ---------------------------------------------------------------------- caps that cannot hold
def _small(tmp_path: Path) -> Path:
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    return f


def test_a_cap_below_the_idle_hall_is_refused_with_the_unit(tmp_path: Path) -> None:
    out = tmp_path / "cap.duckdb"
    code, _, err = invoke(
        "run", "default", "--hours", "1", "--set", "power.facility_cap_w=1.6", "-o", str(out)
    )
    assert code == 2 and not out.exists()
    assert "power.facility_cap_w = 1.6 W" in err and "1.6 MW = 1.6e6" in err and "no clock can hold it" in err
    # The same for a power_cap event.
    f = _small(tmp_path)
    f.write_text(
        SMALL_TOML
        + '\n[[events]]\nat_h = 1\nkind = "power_cap"\ntarget = "facility"\nvalue = 2.0\nduration_h = 1\n'
    )
    code, _, err = invoke("validate", str(f))
    assert code == 2 and "events[0].value = 2 W" in err


def test_the_idle_floor_is_what_the_model_draws_at_its_lowest_clock(tmp_path: Path) -> None:
    """A cap just above the idle floor pushes every busy chip to the lowest clock: the recorded
    IT power lies between the idle floor and the all-busy floor, the run warns that the cap
    cannot hold, and every output states the cap and the hours it was not held."""
    from scenarios.overrides import load
    from scenarios.spec import it_floor_w

    f = _small(tmp_path)
    spec, _, _ = load(str(f))
    idle, busy = it_floor_w(spec.to_params())
    assert 0 < idle < busy
    cap = idle * 1.001
    out = tmp_path / "r.duckdb"
    r = CliRunner().invoke(
        main,
        ["run", str(f), "--hours", "2", "--set", f"power.facility_cap_w={cap!r}", "-o", str(out), "--json"],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.stderr
    assert "cannot hold" in r.stderr and f"{busy / 1e3:,.0f} kW" in r.stderr
    rec = json.loads(r.stdout)
    assert rec["facility_cap_mw"] == pytest.approx(cap / 1e6)
    assert rec["cap_hours"] == pytest.approx(2.0)
    # IT alone is above the cap (the plant and the chain add to it): never held.
    assert rec["cap_exceeded_hours"] == pytest.approx(2.0)
    assert rec["overrides"] == [f"power.facility_cap_w={cap!r}"]
    code, sql, _ = invoke(
        "sql",
        str(out),
        "SELECT min(it_power_w) AS lo, max(it_power_w) AS hi FROM factory_ts",
        "--format",
        "json",
    )
    (row,) = json.loads(sql)
    assert idle * 0.97 <= row["lo"] and row["hi"] <= busy * 1.03  # chip-to-chip spread: +-3 %
    code, text, _ = invoke("compare", str(out))
    assert code == 0
    assert "hours over the facility cap (not held)" in text and f"power.facility_cap_w={cap!r}" in text


def test_the_summary_states_the_cap_and_the_hours_it_bound(tmp_path: Path) -> None:
    f = _small(tmp_path)
    code, text, err = invoke("run", str(f), "--hours", "1", "-o", str(tmp_path / "a.duckdb"))
    assert code == 0, err
    assert "facility cap      none   throttled 0.00 h" in text and "overrides" not in text
    code, text, err = invoke(
        "run",
        str(f),
        "--hours",
        "1",
        "--set",
        "power.facility_cap_w=1e9",
        "--set",
        "site.climate=hot",
        "-o",
        str(tmp_path / "b.duckdb"),
    )
    assert code == 0, err
    assert "facility cap      1.00 GW in force 1.00 h, bound 0.00 h" in text and "NOT HELD" not in text
    assert "overrides         --set power.facility_cap_w=1e9  --set site.climate=hot" in text


def test_the_report_names_the_overrides_and_the_cap(tmp_path: Path) -> None:
    f = _small(tmp_path)
    out = tmp_path / "b.duckdb"
    code, _, err = invoke("run", str(f), "--hours", "1", "--set", "site.climate=hot", "-o", str(out))
    assert code == 0, err
    page = tmp_path / "r.html"
    code, _, err = invoke("report", str(out), "-o", str(page))
    assert code == 0, err
    html = page.read_text()
    assert "<b>Modified:</b>" in html and "--set site.climate=hot" in html
    assert "small (b.duckdb, modified)" in html and "No facility power cap" in html


def test_an_alarm_raised_in_the_warm_up_opens_at_the_recording() -> None:
    from storage.report import _alarm_lines

    lines = _alarm_lines(-30_000, 600, {"target": "job:1", "detail": "queue wait", "source": "alarm"})
    assert [x["time_s"] for x in lines] == [0, 600]
    assert "warm-up" in lines[0]["detail"]
    assert _alarm_lines(60, None, {"target": "t", "detail": "d", "source": "alarm"})[0]["detail"] == "d"


# ---------------------------------------------------------------------- work that scales with the fleet
def test_mean_job_chip_time_matches_the_draws() -> None:
    """The closed form of the capped log-normal's mean times the gang size, against the jobs
    ``draw_jobs`` draws (Monte Carlo, fixed seed), for a hall that excludes the largest gangs."""
    import numpy as np

    from twin.spec import params
    from twin.work import workload

    tp = params.TrainingParams()
    for cap in (2240, 200):
        rng = np.random.default_rng(3)
        shares = np.array([tp.job_class(k).share for k in params.JOB_CLASSES])
        mc = 0.0
        for k, sh in zip(params.JOB_CLASSES, shares / shares.sum(), strict=True):
            d = workload.draw_jobs(tp.job_class(k), 400_000, rng, cap)
            mc += sh * float(np.mean(d.chips * d.nominal_s))
        assert workload.mean_job_chip_s(tp, cap) == pytest.approx(mc, rel=0.03)
    # The default class mix is fitted to Seren's 32,405 GPU-s a job (facts §9.2).
    assert workload.mean_job_chip_s(tp, 10**6) == pytest.approx(32_405, rel=0.01)


def _arrivals(*sets: str) -> float:
    from scenarios.overrides import load

    spec, _, _ = load("default", ["training.arrivals_per_day=", *sets])
    return float(spec.to_params().training.arrivals_per_day)


def test_work_stated_per_chip_or_mw_grows_with_the_hall() -> None:
    from twin.spec import catalog

    per_chip = _arrivals("training.arrivals_per_chip_day=1.5")
    assert per_chip == pytest.approx(1.5 * 16 * 144)
    assert _arrivals("training.arrivals_per_chip_day=1.5", "hall.ultraservers=48") == pytest.approx(
        3 * per_chip
    )
    sysm = catalog.SYSTEMS["trn3-gen2"]
    mw = 16 * catalog.system_full_load_it_w(sysm, catalog.accelerator_for(sysm)) / 1e6
    assert _arrivals("training.arrivals_per_mw_day=2000") == pytest.approx(2000 * mw)
    # An IT envelope sizes the hall and the work with it.
    enveloped = _arrivals(
        "hall.ultraservers=", "hall.it_envelope_w=20e6", "training.arrivals_per_chip_day=1.5"
    )
    assert enveloped > 9 * per_chip


def test_offered_load_is_the_share_of_chip_time_the_jobs_ask_for() -> None:
    from twin.spec import params
    from twin.work import workload

    tp = params.TrainingParams()
    batch = 16 * 144 - 16 * 4  # the default's 16 chat replicas of 4 chips serve, the rest is batch
    want = 0.8 * batch * 86400 / (workload.mean_job_chip_s(tp, batch) * (5 + 2 * tp.weekend_factor) / 7)
    assert _arrivals("training.offered_load=0.8") == pytest.approx(want)
    assert _arrivals("training.offered_load=0.8", "hall.ultraservers=64") == pytest.approx(
        want * (64 * 144 - 64) / batch, rel=0.02
    )


def test_offered_load_keeps_a_small_hall_about_that_busy(tmp_path: Path) -> None:
    f = _small(tmp_path)
    r = CliRunner().invoke(
        main,
        [
            "run",
            str(f),
            "--days",
            "2",
            "--set",
            "training.arrivals_per_day=",
            "--set",
            "training.offered_load=0.8",
            "-o",
            str(tmp_path / "r.duckdb"),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.stderr
    busy = json.loads(r.stdout)["busy_fraction"]
    # 80 % of the batch chips asked for, plus the two chat replicas' 8 chips of 288 (not all busy).
    assert 0.6 < busy < 0.95


def test_only_one_way_to_state_the_rate() -> None:
    code, _, err = invoke("validate", "default", "--set", "training.offered_load=0.9")
    assert code == 2
    assert (
        "give one of arrivals_per_day, arrivals_per_chip_day" in err and "training.arrivals_per_day=" in err
    )


def test_plan_says_when_the_hall_it_sized_is_mostly_idle(tmp_path: Path) -> None:
    f = _small(tmp_path)
    args = [
        "plan",
        str(f),
        "--hours",
        "2",
        "--maximize",
        "hall.ultraservers",
        "--range",
        "1:8",
        "--subject-to",
        "peak_facility_mw <= 100",
        "-j",
        "1",
        # The run starts from a day of its load, not an empty hall, and the load is the same at
        # every hour (a 2 h run at night would see the day's trough).
        "--set",
        "warmup_h=24",
        "--set",
        "training.diurnal_peak_to_trough=1",
        "--set",
        "training.weekend_factor=1",
    ]
    code, text, err = invoke(*args)
    assert code == 0, err
    assert "note: at 8 the hall is mostly idle" in text and "training.offered_load" in text
    code, text, err = invoke(
        *args, "--json", "--set", "training.arrivals_per_day=", "--set", "training.offered_load=0.9"
    )
    assert code == 0, err
    (case,) = json.loads(text)["cases"]
    assert case["answer"] == 8 and case["idle"] is None


def test_sweep_report_says_which_points_left_the_hall_idle(tmp_path: Path) -> None:
    _small(tmp_path)
    f = tmp_path / "sweep.toml"
    f.write_text('[sweep]\nscenario = "small.toml"\nhours = 1\n[sweep.grid]\n"hall.ultraservers" = [1, 4]\n')
    code, text, err = invoke("sweep", str(f), "--out", str(tmp_path / "out"), "-j", "1", "--report")
    assert code == 0, err
    assert "busy_fraction" in text
    assert "note: 2 of 2 points left the hall mostly idle" in text and "training.offered_load" in text
