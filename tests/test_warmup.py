"""Warm starts and honest horizons: a warm-up is simulated but not recorded, so a recording starts
from the state it reached; scheduled events past a scenario's end are refused, and a run cut
shorter than its events says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from scenarios.runner import rerun, run, same_telemetry
from scenarios.spec import ScenarioError, build_simulation, parse
from tests.conftest import SMALL_TOML
from tui.cli import main

BUSY = SMALL_TOML.replace("arrivals_per_day = 40", "arrivals_per_day = 3000")


def _one(con: duckdb.DuckDBPyConnection, q: str) -> tuple[Any, ...]:
    rows = con.sql(q).fetchall()
    return tuple(rows[0])


def _first_hour(path: Path) -> tuple[float, int, int]:
    """(busy share of the first recorded hour, the earliest time_s of the recorded series, jobs
    running at the first step)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        busy, t0 = _one(
            con,
            "SELECT avg(chips_busy::DOUBLE / chips_total) FILTER (WHERE time_s < 3600), min(time_s) FROM factory_ts",
        )
        (running,) = _one(con, "SELECT running_jobs FROM factory_ts ORDER BY time_s LIMIT 1")
        return float(busy), int(t0), int(running)
    finally:
        con.close()


def test_a_warm_start_is_recorded_from_the_state_its_warm_up_reached(tmp_path: Path) -> None:
    cold_s = parse(BUSY, "cold.toml")
    warm_s = parse("warmup_h = 12\n" + BUSY, "warm.toml")
    cold = run(cold_s, BUSY, tmp_path / "cold.duckdb", duration_s=2 * 3600, publish_live=False)
    warm = run(
        warm_s, "warmup_h = 12\n" + BUSY, tmp_path / "warm.duckdb", duration_s=2 * 3600, publish_live=False
    )
    assert cold.status == warm.status == "complete"
    assert cold.steps == warm.steps == 120  # the warm-up is not part of the recorded run
    cold_busy, cold_t0, cold_running = _first_hour(tmp_path / "cold.duckdb")
    warm_busy, warm_t0, warm_running = _first_hour(tmp_path / "warm.duckdb")
    assert cold_t0 == warm_t0 == 0  # both recordings start at their start
    assert cold_running <= 1 < warm_running  # an empty hall against one that has been working
    assert warm_busy > cold_busy + 0.05  # the first hour of a cold run is the hall filling up
    con = duckdb.connect(str(tmp_path / "warm.duckdb"), read_only=True)
    try:
        # Nothing of the warm-up is recorded as a step or an event...
        for table in ("factory_ts", "ultraserver_ts", "events", "failures"):
            assert _one(con, f"SELECT count(*) FROM {table} WHERE time_s < 0") == (0,), table
        # ...but every job running when the recording starts has its row, started before it.
        (running0,) = _one(
            con, "SELECT count(*) FROM jobs WHERE start_time_s < 0 AND (state = 'running' OR end_time_s >= 0)"
        )
    finally:
        con.close()
    assert running0 >= warm_running
    # The warm-up is part of the scenario: a re-run of the file gives the same telemetry.
    again = rerun(tmp_path / "warm.duckdb", tmp_path / "again.duckdb")
    assert again.status == "complete"
    assert same_telemetry(tmp_path / "warm.duckdb", tmp_path / "again.duckdb") == []


def test_an_event_at_or_after_the_scenarios_end_is_refused() -> None:
    late = SMALL_TOML + '\n[[events]]\nat_h = 6\nkind = "chiller_trip"\nvalue = 1\n'
    with pytest.raises(ScenarioError, match=r"events\[0\]\.at_h: 6 h is at or after the end of the scenario"):
        build_simulation(parse(late, "late.toml"))
    inside = SMALL_TOML + '\n[[events]]\nat_h = 5.5\nkind = "chiller_trip"\nvalue = 1\n'
    build_simulation(parse(inside, "inside.toml"))


def test_a_run_cut_before_its_events_says_so(tmp_path: Path) -> None:
    text = SMALL_TOML + '\n[[events]]\nat_h = 2\nkind = "chiller_trip"\nvalue = 1\n'
    f = tmp_path / "s.toml"
    f.write_text(text)
    r = CliRunner().invoke(main, ["validate", str(f), "--hours", "1"])
    assert r.exit_code == 0, r.output
    assert "1 scheduled events (0 within the run)" in r.stdout
    assert (
        "the run ends at 1 h, before 1 of its 1 scheduled events (events[0] chiller_trip at 2 h)" in r.stderr
    )
    r = CliRunner().invoke(main, ["validate", str(f)])
    assert r.exit_code == 0 and "warning" not in r.stderr and "(0 within" not in r.stdout
    r = CliRunner().invoke(main, ["run", str(f), "--hours", "0.5", "--out", str(tmp_path / "r.duckdb")])
    assert r.exit_code == 0, r.output
    assert "before 1 of its 1 scheduled events" in r.stderr


def test_jobs_running_since_the_warm_up_show_as_running_and_raise_no_queue_alarm(tmp_path: Path) -> None:
    """The warm-up records no events, so a job that started in it has no `job_start`: the Jobs
    panel and the queue-wait alarm read its state from its row instead (first start before t,
    not ended by t). Expected, from the jobs table alone: every such job `running` at the first
    step, and no 'queue wait' alarm naming one of them."""
    from storage.queries import panel_sql

    text = "warmup_h = 12\n" + BUSY
    run(parse(text, "warm.toml"), text, tmp_path / "w.duckdb", duration_s=3600, publish_live=False)
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    try:
        run_id = con.sql("SELECT run_id FROM runs").fetchall()[0][0]
        warm = {
            r[0]
            for r in con.sql(
                "SELECT job_id FROM jobs WHERE kind <> 'inference' AND first_start_time_s BETWEEN -43200 AND -1 "
                "AND (end_time_s = -1 OR end_time_s > 0) AND job_id NOT IN (SELECT CAST(split_part(target, "
                "':', 2) AS INTEGER) FROM events WHERE time_s <= 0 AND kind LIKE 'job_%')"
            ).fetchall()
        }
        assert len(warm) > 1  # the warm-up left a working hall
        params = {"run_id": run_id, "t": 0}
        rows = con.sql(panel_sql("jobs", params, view="all", limit=100_000)).to_arrow_table().to_pylist()
        state = {r["job_id"]: r["state"] for r in rows if r["kind"] != "inference"}
        assert {j: state[j] for j in warm} == dict.fromkeys(warm, "running")
        alarms = con.sql(panel_sql("alarms", params)).to_arrow_table().to_pylist()
        assert not [a for a in alarms if a["alarm"] == "queue wait" and int(a["target"][4:]) in warm]
    finally:
        con.close()
