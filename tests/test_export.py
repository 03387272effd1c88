"""twin export: hive-partitioned Parquet that pyarrow datasets, DuckDB and polars read back
with the same rows and sums as SQL on the recording."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner

from storage.reader import open_run_file
from storage.schema import columns
from tests.conftest import SMALL_TOML
from tui.cli import main
from twin.spec.telemetry import TABLES

NUMERIC = ("int8", "int32", "int64", "float32", "float64")


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 simulated hours: the telemetry spans two calendar days."""
    from scenarios.runner import run
    from scenarios.spec import parse

    out = tmp_path_factory.mktemp("exp") / "long.duckdb"
    run(parse(SMALL_TOML, "small.toml"), SMALL_TOML, out, duration_s=30 * 3600)
    return out


def _stats(con: duckdb.DuckDBPyConnection, source: str, table: str, where: str = "") -> list[object]:
    nums = [c.name for c in TABLES[table] if c.dtype in NUMERIC]
    aggs = ", ".join(f"count({n}), coalesce(sum({n}), 0)" for n in nums)
    q = f"SELECT count(*), {aggs} FROM {source} {where}"
    return list(con.sql(q).fetchall()[0])


def test_export_reads_back_with_the_same_rows_and_sums(long_run: Path, tmp_path: Path) -> None:
    dest = tmp_path / "pq"
    code, out, err = invoke("export", str(long_run), str(dest))
    assert code == 0, err
    src = duckdb.connect(str(long_run), read_only=True)
    mem = duckdb.connect()
    try:
        for table in TABLES:
            want = _stats(src, table, table)
            # DuckDB over the hive layout.
            glob = f"read_parquet('{dest}/table={table}/*/*.parquet', hive_partitioning = true)"
            got = _stats(mem, glob, table)
            assert got == pytest.approx(want, rel=1e-9), table
            # pyarrow datasets with hive partitioning.
            d = ds.dataset(dest / f"table={table}", format="parquet", partitioning="hive")
            tb = d.to_table()
            assert tb.num_rows == want[0]
            nums = [c.name for c in TABLES[table] if c.dtype in NUMERIC]
            sums = [x for n in nums for x in (pc.count(tb[n]).as_py(), pc.sum(tb[n]).as_py() or 0)]
            assert [tb.num_rows, *sums] == pytest.approx(want, rel=1e-9), table
            # Units and descriptions travel in the Parquet field metadata; ts sits next to time_s.
            for c in columns(table):
                meta = d.schema.field(c.name).metadata
                assert meta[b"unit"].decode() == c.unit and meta[b"description"].decode() == c.description
            if "time_s" in d.schema.names:
                assert d.schema.names.index("ts") == d.schema.names.index("time_s") + 1
        # Every row sits in the partition of its UTC calendar day; 30 h span two days.
        rows = mem.sql(
            f"SELECT count(*) FILTER (WHERE CAST(timezone('UTC', ts) AS DATE) <> day), count(DISTINCT day) "
            f"FROM read_parquet('{dest}/table=factory_ts/*/*.parquet', hive_partitioning = true)"
        ).fetchall()[0]
        assert rows == (0, 2)
        assert _stats(src, "factory_ts", "factory_ts")[0] == 1800
    finally:
        src.close()
        mem.close()
    assert "factory_ts" in out and f"{1800:,}" in out


def test_polars_reads_the_export_if_installed(long_run: Path, tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    dest = tmp_path / "pq"
    assert invoke("export", str(long_run), str(dest), "--tables", "factory_ts")[0] == 0
    df = pl.read_parquet(str(dest / "table=factory_ts" / "**" / "*.parquet"), hive_partitioning=True)
    assert df.height == 1800


def test_tables_and_time_window(long_run: Path, tmp_path: Path) -> None:
    src = open_run_file(long_run)  # the export's own settings: both share one database instance
    mem = duckdb.connect()
    try:
        ((start,),) = src.sql("SELECT start FROM runs").fetchall()
        iso_from = (start + _dt.timedelta(hours=6)).astimezone(_dt.UTC).isoformat().replace("+00:00", "Z")
        iso_to = (start + _dt.timedelta(hours=26)).isoformat()
        for lo, hi, name in (("6h", "26h", "rel"), (iso_from, iso_to, "iso"), ("21600", "1560m", "num")):
            dest = tmp_path / name
            code, _, err = invoke(
                "export",
                str(long_run),
                str(dest),
                "--tables",
                "factory_ts, jobs,events",
                "--from",
                lo,
                "--to",
                hi,
            )
            assert code == 0, err
            assert sorted(p.name for p in dest.iterdir()) == [
                "table=events",
                "table=factory_ts",
                "table=jobs",
            ]
            for table, where in (
                ("factory_ts", "WHERE time_s >= 21600 AND time_s < 93600"),
                ("events", "WHERE time_s >= 21600 AND time_s < 93600"),
                ("jobs", "WHERE submit_time_s < 93600 AND (end_time_s < 0 OR end_time_s >= 21600)"),
            ):
                want = _stats(src, table, table, where)
                got = _stats(mem, f"read_parquet('{dest}/table={table}/*/*.parquet')", table)
                assert got == pytest.approx(want, rel=1e-9), (name, table)
            assert want[0] > 0
    finally:
        src.close()
        mem.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tables", "factory_ts,nope"), "no table 'nope'"),
        (("--from", "yesterday"), "--from 'yesterday': not a time"),
        (("--to", "2026-01-05T10:00:00"), "needs a zone"),
    ],
)
def test_bad_arguments_exit_2_and_write_nothing(
    long_run: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    dest = tmp_path / "out"
    code, _, err = invoke("export", str(long_run), str(dest), *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_non_empty_destination_is_refused(long_run: Path, tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    code, _, err = invoke("export", str(long_run), str(tmp_path))
    assert code == 2 and "not an empty directory" in err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
