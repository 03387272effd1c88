"""The writer's insert sizes: a flush is bounded by the bytes it holds, so the UltraServer and chip
series of a large hall go into DuckDB in few large inserts (``bench/bench_writepath.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from storage.reader import open_run_file
from storage.writer import TelemetryWriter
from twin.spec.telemetry import TABLES

US = 1000  # UltraServers of a 144,000-chip hall


def _us_frame(t0: int, steps: int) -> dict[str, dict[str, object]]:
    """``steps`` steps of ultraserver_ts for ``US`` UltraServers, every column the model records."""
    n = steps * US
    cols: dict[str, object] = {}
    for c in TABLES["ultraserver_ts"]:
        if c.name == "run_id":
            continue
        cols[c.name] = np.zeros(
            n, dtype={"int32": np.int32, "float32": np.float32, "bool": np.bool_}.get(c.dtype, np.float64)
        )
    cols["time_s"] = np.repeat(np.arange(t0, t0 + steps, dtype=np.int64) * 60, US)
    cols["ultraserver_id"] = np.tile(np.arange(US, dtype=np.int32), steps)
    cols["power_w"] = np.linspace(1e5, 2e5, n)
    return {"ultraserver_ts": cols}


def test_rows_below_the_bytes_bound_go_in_one_insert(tmp_path: Path) -> None:
    f = tmp_path / "w.duckdb"
    # 600,000 rows (more than the former 500,000-row bound), ~40 MB of Arrow: under 64 MB.
    frames = [_us_frame(0, 300), _us_frame(300, 300)]
    w = TelemetryWriter(
        f, {"run_id": "r", "scenario_name": "t", "seed": 0, "dt_s": 60}, flush_interval_s=3600
    )
    for i, fr in enumerate(frames):
        w.write(fr, (i + 1) * 300 * 60)
    w.flush()  # queued after both frames: any flush before it was forced by a bound
    flushes = w.flushes
    w.close()
    assert flushes == 1
    con = open_run_file(f)
    try:
        ((rows, total),) = con.sql("SELECT count(*), sum(power_w) FROM ultraserver_ts").fetchall()
    finally:
        con.close()
    assert rows == 600_000
    want = sum(float(fr["ultraserver_ts"]["power_w"].sum()) for fr in frames)  # type: ignore[union-attr]
    assert total == want or abs(total - want) <= 1e-9 * want


def test_the_bytes_bound_still_splits_flushes(tmp_path: Path) -> None:
    f = tmp_path / "w.duckdb"
    frames = [_us_frame(0, 100), _us_frame(100, 100), _us_frame(200, 100)]  # ~6.6 MB each
    w = TelemetryWriter(
        f,
        {"run_id": "r", "scenario_name": "t", "seed": 0, "dt_s": 60},
        flush_interval_s=3600,
        flush_bytes=4 << 20,
    )
    for i, fr in enumerate(frames):
        w.write(fr, (i + 1) * 100 * 60)
    w.flush()
    flushes = w.flushes
    w.close()
    # Each frame alone passes 4 MB: one flush after each, then the explicit (empty) one.
    assert flushes == 4
