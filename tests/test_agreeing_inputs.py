"""Every command agrees on its inputs: the same rule and a message naming the option the user gave
(``twin plan --maximize``), one rule for a run shorter than one step (run, validate, sweep, plan),
the memory limits as the refusal names them, an empty export window refused, an empty validation
selection refused, and a run's summary counting the jobs it rejected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SMALL_TOML
from tests.test_outputs_safety import TOML, invoke


@pytest.mark.parametrize("key", ["seed", "dt_s", "telemetry.ultraserver_interval_s"])
@pytest.mark.parametrize("option", ["--minimize", "--maximize"])
def test_plan_refuses_what_is_no_quantity_for_either_direction(key: str, option: str, tmp_path: Path) -> None:
    code, _, err = invoke("plan", "default", option, key, "--subject-to", "pue <= 2", "--hours", "1")
    assert code == 2 and err.startswith(f"twin: error: {option} {key}: ") and len(err.splitlines()) == 1, err
    assert "not a quantity to plan" in err and f"{option.lstrip('-')} an integer quantity" in err
    assert not list(tmp_path.iterdir())


def test_a_run_shorter_than_one_step_is_refused_by_every_command(tmp_path: Path) -> None:
    """``--hours 1e-9`` (under a second; the default's step is 60 s): refused before anything runs
    by run, validate, plan and a sweep alike, with the same words."""
    (tmp_path / "sw.toml").write_text(
        '[sweep]\nscenario = "default"\nhours = 1e-9\n[sweep.grid]\n"hall.ultraservers" = [4, 8]\n'
    )
    calls = [
        ("validate", "default", "--hours", "1e-9"),
        ("run", "default", "--hours", "1e-9", "--out", tmp_path / "r.duckdb"),
        ("plan", "default", "--hours", "1e-9", "--subject-to", "pue <= 2", "--range", "1:4"),
        ("sweep", tmp_path / "sw.toml", "--out", tmp_path / "sw.csv"),
        ("run", "default", "--hours", str(59 / 3600), "--out", tmp_path / "r.duckdb"),
    ]
    for args in calls:
        code, _, err = invoke(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1, (args, err)
        assert "shorter than one step (dt_s = 60 s); a run lasts at least one step" in err, (args, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sw.toml"]
    # One step is a run.
    code, _, err = invoke("validate", "default", "--hours", str(60 / 3600))
    assert code == 0, err


def test_the_memory_limits_are_the_ones_the_refusal_names() -> None:
    from storage.sandbox import parse_memory

    assert parse_memory("16MB") == 16 * 10**6 and parse_memory("1PB") == 10**15
    for text in ("15.9MB", "1.1PB", "1PiB"):
        with pytest.raises(ValueError, match="outside 16MB … 1PB"):
            parse_memory(text)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from scenarios.runner import run
    from scenarios.spec import parse

    out = tmp_path_factory.mktemp("rec") / "r.duckdb"
    run(parse(TOML, "tiny.toml"), TOML, out, duration_s=7200)
    return out


@pytest.mark.parametrize(
    "window", [("7200", "3600"), ("1h", "1h"), ("2026-06-29T02:00:00Z", "2026-06-29T01:00:00Z")]
)
def test_an_empty_export_window_is_refused(window: tuple[str, str], recording: Path, tmp_path: Path) -> None:
    lo, hi = window
    code, _, err = invoke("export", recording, tmp_path / "pq", "--from", lo, "--to", hi)
    assert code == 2 and f"--from {lo} is not before --to {hi}" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "pq").exists()
    code, _, err = invoke("export", recording, tmp_path / "pq", "--from", "3600", "--to", "7200")
    assert code == 0, err


def test_an_empty_validation_selection_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import validation as V

    slow = next(c.name for c in V.CASES if not c.fast)
    assert V.main(["--fast", "--only", slow]) == 2
    err = capsys.readouterr().err
    assert f"--fast --only {slow!r}: no case to run" in err and len(err.splitlines()) == 1


def test_the_summary_counts_the_jobs_rejected(tmp_path: Path) -> None:
    """A trace job larger than the hall (288 chips; 8 hold the chat replicas) is rejected with an
    event; the summary says so next to the jobs done, with the reason."""
    (tmp_path / "jobs.csv").write_text(
        "submit_time_s,chips,kind,duration_s\n0,288,pretrain,600\n0,280,pretrain,600\n"
    )
    text = SMALL_TOML.replace("arrivals_per_day = 40", 'arrivals_per_day = 0\ntrace = "jobs.csv"')
    (tmp_path / "s.toml").write_text(text)
    code, out, err = invoke("run", tmp_path / "s.toml", "--hours", "1", "--out", tmp_path / "r.duckdb")
    assert code == 0, err
    assert "jobs done 1 of 1 (+1 rejected, never queued: the first 288 chips > the 280 the hall has" in out, (
        out
    )
    code, out, err = invoke(
        "run", tmp_path / "s.toml", "--hours", "1", "--out", tmp_path / "j.duckdb", "--json"
    )
    assert code == 0 and json.loads(out)["jobs_done"] == 1
