"""Recordings other tools can read: DuckDB 1.x, strict JSON, NULL for no value, calendar time."""

from __future__ import annotations

import datetime as _dt
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner

from tests.conftest import SMALL_TOML
from tui.cli import main

# DuckDB 1.5.x (the newest 1.x) refuses a file "with version number 69 ... can only read versions
# between 64 and 68"; DuckDB 1.4 reads up to 67.
DUCKDB1_READABLE = range(64, 68)


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def storage_version(path: Path) -> int:
    """The storage version number in a DuckDB file's main header (checksum u64, b'DUCK', u64)."""
    with open(path, "rb") as f:
        head = f.read(20)
    assert head[8:12] == b"DUCK", "not a DuckDB file"
    return int(struct.unpack("<Q", head[12:20])[0])


def test_recording_uses_a_storage_version_duckdb_1x_reads(small_run: Path) -> None:
    assert storage_version(small_run) in DUCKDB1_READABLE
    # Not 1.2's (65): its checkpoints need memory growing with the file, and a
    # long run fails at the writer's memory limit (bench/bench_memory.py).
    assert storage_version(small_run) >= 67


@pytest.mark.skipif(
    not os.environ.get("TWIN_DUCKDB1_PYTHON"),
    reason="set TWIN_DUCKDB1_PYTHON to a Python with duckdb<2 installed to check a real 1.x reader",
)
def test_a_duckdb_1x_reader_opens_the_recording(small_run: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "bench" / "check_duckdb1.py"),
            str(small_run),
            "--python",
            os.environ["TWIN_DUCKDB1_PYTHON"],
        ],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-> ok" in proc.stdout


# ------------------------------------------------------------------ NULL for "no value", strict JSON


def _strict_json(text: str) -> object:
    def refuse(c: str) -> object:
        raise AssertionError(f"non-standard JSON constant {c}")

    return json.loads(text, parse_constant=refuse)


def test_no_value_is_stored_as_null_never_nan(tmp_path: Path, small_scenario) -> None:  # type: ignore[no-untyped-def]
    from scenarios.runner import Session
    from storage.reader import open_run_file
    from twin.spec.telemetry import TABLES

    spec, text = small_scenario
    s = Session(spec, text, tmp_path / "n.duckdb")
    frames = [s.advance(90), s.advance(90)]
    s.close()
    con = open_run_file(tmp_path / "n.duckdb")
    try:
        # The model's NaN ("no value") positions are exactly the file's NULLs, column by column.
        got = con.sql("SELECT * FROM factory_ts ORDER BY time_s").to_arrow_table()
        had_nan = 0
        for c in TABLES["factory_ts"]:
            if c.dtype.startswith("float"):
                want = np.isnan(np.concatenate([f["factory_ts"][c.name] for f in frames]))
                had_nan += int(want.sum())
                assert np.array_equal(got[c.name].is_null().to_numpy(zero_copy_only=False), want), c.name
        assert had_nan > 0  # no facility cap in this scenario: facility_cap_w has no value
        # And no float column of any table holds a NaN.
        for table, cols in TABLES.items():
            for c in cols:
                if c.dtype.startswith("float"):
                    ((n,),) = con.sql(
                        f"SELECT count(*) FILTER (WHERE isnan({c.name})) FROM {table}"
                    ).fetchall()
                    assert n == 0, f"{table}.{c.name}"
        ((cap,),) = con.sql("SELECT max(facility_cap_w) FROM factory_ts").fetchall()
        assert cap is None
    finally:
        con.close()


def test_sql_json_is_strict_and_jsonl_is_one_object_per_line(small_run: Path) -> None:
    q = (
        "SELECT time_s, facility_cap_w, 'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, "
        "sum(chips_busy) OVER (ORDER BY time_s) AS busy_total FROM factory_ts ORDER BY time_s LIMIT 5"
    )
    code, out, _ = invoke("sql", str(small_run), q, "--format", "json")
    assert code == 0
    rows = _strict_json(out)
    assert isinstance(rows, list) and len(rows) == 5
    assert all(r["facility_cap_w"] is None and r["nan"] is None and r["inf"] is None for r in rows)
    assert all(isinstance(r["busy_total"], int) for r in rows)  # a 128-bit sum, still a number
    code, out2, _ = invoke("sql", str(small_run), q, "--format", "jsonl")
    assert code == 0
    lines = out2.splitlines()
    assert [_strict_json(line) for line in lines] == rows
    code, out3, _ = invoke("sql", str(small_run), "SELECT 1 AS x WHERE false", "--format", "json")
    assert code == 0 and _strict_json(out3) == []


def test_sql_parquet_to_a_file_matches_the_query(small_run: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    dest = tmp_path / "r.parquet"
    q = "SELECT time_s, it_power_w, facility_cap_w FROM factory_ts ORDER BY time_s"
    code, _, err = invoke("sql", str(small_run), q, "--format", "parquet", "--out", str(dest))
    assert code == 0, err
    got = pq.read_table(dest)
    con = duckdb.connect(str(small_run), read_only=True)
    try:
        n, s, caps = con.sql(
            "SELECT count(*), sum(it_power_w), count(facility_cap_w) FROM factory_ts"
        ).fetchall()[0]
    finally:
        con.close()
    assert got.num_rows == n and got["it_power_w"].to_numpy().sum() == pytest.approx(s, rel=1e-12)
    assert got["facility_cap_w"].null_count == n - caps
    # Bad --out: one line, exit 2, nothing written.
    code, _, err = invoke(
        "sql", str(small_run), q, "--format", "csv", "--out", str(tmp_path / "no" / "x.csv")
    )
    assert code == 2 and "no such directory" in err and len(err.strip().splitlines()) == 1


def test_run_json_is_one_line_with_numbers_and_variants_one_line_each(tmp_path: Path) -> None:
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    code, out, _ = invoke("run", str(f), "--hours", "1", "--out", str(tmp_path / "j.duckdb"), "--json")
    assert code == 0
    assert len(out.strip().splitlines()) == 1
    s = _strict_json(out)
    assert isinstance(s, dict)
    con = duckdb.connect(str(tmp_path / "j.duckdb"), read_only=True)
    try:
        ((requests,),) = con.sql("SELECT sum(requests_arrived) FROM service_ts").fetchall()
    finally:
        con.close()
    assert requests > 0 and s["requests"] == int(requests) and isinstance(s["requests"], int)
    v = tmp_path / "v.toml"
    v.write_text(
        SMALL_TOML.replace('name = "small"', 'name = "pair"')
        + '\n[[variants]]\nname = "a"\n\n[[variants]]\nname = "b"\nseed = 8\n'
    )
    code, out, _ = invoke("run", str(v), "--hours", "1", "--out", str(tmp_path / "p.duckdb"), "--json")
    assert code == 0
    lines = [_strict_json(line) for line in out.splitlines()]
    assert [d["variant"] for d in lines] == ["a", "b"]  # type: ignore[index]
    assert all(Path(d["file"]).exists() for d in lines)  # type: ignore[index]


def test_three_runs_started_together_in_one_directory_get_their_own_files(tmp_path: Path) -> None:
    (tmp_path / "small.toml").write_text(SMALL_TOML)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-c", "from tui.cli import main; main()", "run", "small.toml", "--hours", "0.5"]
    procs = [
        subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in results]
    files = sorted((tmp_path / "twin-runs").glob("small-*.duckdb"))
    assert len(files) == 3
    pids = {f"-p{p.pid}.duckdb" for p in procs}
    assert {f.name[f.name.rindex("-p") :] for f in files} == pids
    for f in files:
        assert str(f.relative_to(tmp_path)) in "".join(out for out, _ in results)


# ------------------------------------------------------------------ calendar time


def _ts_tables() -> list[str]:
    from twin.spec.telemetry import TABLES

    return [t for t, cols in TABLES.items() if any(c.name == "time_s" for c in cols)]


def test_every_time_series_row_has_ts_equal_start_plus_time_s(small_run: Path) -> None:
    con = duckdb.connect(str(small_run), read_only=True)
    try:
        ((start,),) = con.sql("SELECT start FROM runs").fetchall()
        # The default start is a Monday at midnight UTC (scenario key `start`).
        utc = start.astimezone(_dt.UTC)
        assert utc.weekday() == 0 and (utc.hour, utc.minute, utc.second) == (0, 0, 0)
        checked = 0
        for t in _ts_tables():
            n, bad, nulls = con.sql(
                f"SELECT count(*), count(*) FILTER (WHERE epoch(ts) - epoch(r.start) <> time_s), "
                f"count(*) FILTER (WHERE ts IS NULL) FROM {t} JOIN runs r USING (run_id)"
            ).fetchall()[0]
            assert bad == 0 and nulls == 0, t
            checked += n
        assert checked > 0
        ((typ,),) = con.sql(
            "SELECT data_type FROM duckdb_columns() WHERE table_name = 'factory_ts' AND column_name = 'ts'"
        ).fetchall()
        assert typ == "TIMESTAMP WITH TIME ZONE"
    finally:
        con.close()


def test_a_start_with_a_zone_is_recorded_as_that_instant(tmp_path: Path) -> None:
    from storage.writer import TelemetryWriter
    from tests.conftest import small_params
    from twin.compose.hall import Hall

    start = _dt.datetime(2026, 7, 1, 12, 0, tzinfo=_dt.timezone(_dt.timedelta(hours=2)))
    sim = Hall(small_params())
    w = TelemetryWriter(tmp_path / "z.duckdb", {"run_id": "z", "start": start, "dt_s": 60})
    w.write(sim.advance(30), sim.t_s)
    w.close()
    con = duckdb.connect(str(tmp_path / "z.duckdb"), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        first, last, n = con.sql("SELECT min(ts), max(ts), count(*) FROM factory_ts").fetchall()[0]
    finally:
        con.close()
    assert first == start  # 10:00 UTC
    assert last - first == _dt.timedelta(seconds=29 * 60) and n == 30


def test_telemetry_commands_never_import_textual(tmp_path: Path) -> None:
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    out = tmp_path / "h.duckdb"
    code = (
        "import sys\n"
        "from tui.cli import main\n"
        f"for args in (['run', {str(f)!r}, '--hours', '1', '--out', {str(out)!r}, '--json', '--metrics-port', '0'],"
        f" ['sql', {str(out)!r}, 'SELECT 1', '--format', 'jsonl'],"
        f" ['export', {str(out)!r}, {str(tmp_path / 'pq')!r}],"
        f" ['report', {str(out)!r}, '--out', {str(tmp_path / 'r.html')!r}]):\n"
        "    try:\n"
        "        main(args, standalone_mode=False)\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, (args, e.code)\n"
        "assert 'textual' not in sys.modules, 'textual imported'\n"
        "assert {'prometheus_client', 'matplotlib', 'pyarrow.parquet'} <= set(sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.html").exists() and (tmp_path / "pq" / "table=factory_ts").is_dir()


def test_a_v1_file_gains_calendar_time_when_written_to(tmp_path: Path) -> None:
    from storage.schema import migrations
    from storage.writer import TelemetryWriter
    from tests.conftest import small_params
    from twin.compose.hall import Hall

    path = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(path))
    for stmt in migrations()[0]:
        con.execute(stmt)
    con.execute("INSERT INTO twin_meta VALUES ('schema_version', '1')")
    con.close()
    sim = Hall(small_params())
    w = TelemetryWriter(path, {"run_id": "m", "dt_s": 60})
    w.write(sim.advance(20), sim.t_s)
    w.close()
    con = duckdb.connect(str(path), read_only=True)
    try:
        ((version,),) = con.sql("SELECT value FROM twin_meta WHERE key = 'schema_version'").fetchall()
        ((n, bad),) = con.sql(
            "SELECT count(*), count(*) FILTER (WHERE epoch(ts) - epoch(r.start) <> time_s) "
            "FROM factory_ts JOIN runs r USING (run_id)"
        ).fetchall()
    finally:
        con.close()
    from twin.spec.telemetry import SCHEMA_VERSION

    assert int(version) == SCHEMA_VERSION and n == 20 and bad == 0  # brought to this version
