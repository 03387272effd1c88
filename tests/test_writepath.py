"""The write path's storage choices: columns stored narrower than the model computes them, and
files written before that narrowing (their columns DOUBLE) that a later run is appended to."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scenarios.spec import build_simulation
from storage import schema
from storage.reader import open_run_file
from storage.writer import TelemetryWriter
from twin.telemetry import TABLES

NARROW = sorted(schema.STORED_DTYPE)


def _record(path: Path, run_id: str, frames: list[dict[str, dict[str, object]]], if_exists: str) -> None:
    w = TelemetryWriter(
        path, {"run_id": run_id, "scenario_name": "t", "seed": 0, "dt_s": 60}, if_exists=if_exists
    )
    for i, fr in enumerate(frames):
        w.write(fr, (i + 1) * 60)
    w.close()


def _column(path: Path, table: str, col: str, run_id: str) -> tuple[str, np.ndarray]:
    con = open_run_file(path)
    try:
        ((dtype,),) = con.sql(
            "SELECT data_type FROM duckdb_columns() WHERE table_name = ? AND column_name = ?",
            params=[table, col],
        ).fetchall()
        order = "time_s, " + ("ultraserver_id" if table == "ultraserver_ts" else "row_id")
        got = con.sql(
            f"SELECT {col} FROM {table} WHERE run_id = ? ORDER BY {order}", params=[run_id]
        ).to_arrow_table()
        return str(dtype), got.column(0).to_numpy()
    finally:
        con.close()


def test_narrowed_columns_are_power_of_large_series_only() -> None:
    # What the KPIs sum stays float64: factory_ts, system_ts and hall_ts keep every float64.
    for table in ("factory_ts", "system_ts", "hall_ts", "service_ts"):
        assert [c.dtype for c in schema.columns(table)] == [c.dtype for c in TABLES[table]] + (
            ["timestamptz"] if table != "runs" else []
        )
    for table, col in NARROW:
        assert next(c for c in TABLES[table] if c.name == col).dtype == "float64"  # the model's
        assert next(c for c in schema.columns(table) if c.name == col).dtype == "float32"


def test_run_appended_to_a_file_written_before_the_narrowing(
    tmp_path: Path, small_scenario, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    spec, _ = small_scenario
    _, sim = build_simulation(spec)
    old = [sim.advance(10), sim.advance(10)]
    new = [sim.advance(10)]
    f = tmp_path / "old.duckdb"
    with monkeypatch.context() as m:  # the file as written before: every column as the model's
        m.setattr(schema, "STORED_DTYPE", {})
        _record(f, "old", old, "error")
    _record(f, "new", new, "append")
    for table, col in NARROW:
        dtype, got_old = _column(f, table, col, "old")
        assert dtype == "DOUBLE"  # the old file's column is kept as it was
        want_old = np.concatenate([fr[table][col] for fr in old])
        np.testing.assert_array_equal(got_old, want_old)  # the old run reads back exactly
        _, got_new = _column(f, table, col, "new")
        # The appended run's values went through the narrow Arrow type: float32-rounded.
        np.testing.assert_array_equal(got_new, new[0][table][col].astype(np.float32).astype(np.float64))
        assert not np.array_equal(got_new, new[0][table][col])  # and the rounding is visible


def test_new_file_stores_narrowed_columns_as_real(tmp_path: Path, small_scenario) -> None:  # type: ignore[no-untyped-def]
    spec, _ = small_scenario
    _, sim = build_simulation(spec)
    frames = [sim.advance(15)]
    f = tmp_path / "new.duckdb"
    _record(f, "r", frames, "error")
    for table, col in NARROW:
        dtype, got = _column(f, table, col, "r")
        assert dtype == "FLOAT"
        want = frames[0][table][col]
        # float32 keeps 24 significant bits: a relative error of at most 2^-24.
        np.testing.assert_allclose(got, want, rtol=2.0**-24, atol=0)
