"""One name and one unit per KPI: ``twin run --json``, ``twin compare`` (``--json``), ``twin plan``
and ``twin sweep`` (results.parquet) draw their KPI keys from the one table, ``storage.kpis``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from scenarios import execution, plan, sweep
from scenarios.spec import ScenarioError
from storage.kpi_table import COMPARE_ROWS, KPI_TABLE, RUN_KEYS, SYSTEM_KEYS, SYSTEM_ROWS
from tests.conftest import SMALL_TOML
from tui.cli import main

TABLE = {k.key for k in KPI_TABLE}
# Besides the KPIs, run --json names the run it is about.
RUN_META = {"file", "run_id", "status", "wall_s"}
# Besides the KPIs, every record: the run's --set overrides and its systems' KPIs.
RECORD_META = {"overrides", "systems"}


def invoke(*args: str) -> str:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    return r.stdout


def test_the_table_has_one_entry_and_one_unit_per_kpi() -> None:
    keys = [k.key for k in KPI_TABLE]
    assert len(keys) == len(set(keys))
    assert all(k.unit for k in KPI_TABLE)
    assert {k for k, _, _ in COMPARE_ROWS} <= TABLE and set(SYSTEM_KEYS) <= TABLE
    assert [k for k, _, _ in SYSTEM_ROWS] == list(SYSTEM_KEYS)
    # The same quantity in two units under two names is what the table rules out.
    assert "peak_facility_w" not in TABLE and "wait_p50_s" not in TABLE and "lost_flop" not in TABLE


def test_run_compare_plan_and_sweep_use_the_tables_names(tmp_path: Path) -> None:
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    run = json.loads(invoke("run", str(f), "--hours", "1", "--out", str(a), "--json"))
    invoke("run", str(f), "--hours", "1", "--seed", "2", "--out", str(b))
    assert set(run) - RUN_META == set(RUN_KEYS) | RECORD_META
    assert run["peak_facility_mw"] > 0 and "peak_facility_w" not in run
    for per_system in run["systems"].values():
        assert set(per_system) == set(SYSTEM_KEYS)
    compared = json.loads(invoke("compare", str(a), str(b), "--json"))
    for kp in compared.values():
        assert set(kp) == set(RUN_KEYS) | RECORD_META
    first = next(iter(compared.values()))
    assert first["peak_facility_mw"] == pytest.approx(run["peak_facility_mw"])
    # plan: every KPI it accepts is the table's; the table's other unit is refused.
    for key in execution.kpi_keys():
        assert key in TABLE and plan.parse_constraint(f"{key} >= 0").kpi == key
    with pytest.raises(ScenarioError, match="unknown KPI"):
        plan.parse_constraint("peak_facility_w <= 30")
    # sweep: results.parquet's KPI columns.
    sw = tmp_path / "sweep.toml"
    sw.write_text('[sweep]\nscenario = "small.toml"\nhours = 1\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    invoke("sweep", str(sw), "--out", str(tmp_path / "out"), "-j", "1", "--no-files")
    cols = set(pq.read_table(tmp_path / "out" / "results.parquet").column_names)
    kpi_cols = cols - set(sweep.BASE_COLUMNS) - {"hall.ultraservers"}
    assert kpi_cols <= TABLE and kpi_cols == set(execution.kpi_keys())
