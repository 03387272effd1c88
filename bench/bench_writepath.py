"""Benchmark: the cost of recording the same telemetry batches through each write path.

The batches are those a real run produces: a scale case of ``bench/bench_scale.py`` (by default
``us1000``, 1,000 UltraServers / 144,000 chips at dt 15 s) stepped for ``--hours`` in memory, each
advance's time-series frames turned into Arrow by ``storage.writer.to_arrow`` (not timed). The
SAME batches then go through every path, one after another in this process, ``--reps`` times (each
path's fastest is kept, so a busy machine slows every path alike):

    product        TelemetryWriter + LivePublisher, as a run writes (frames in: to_arrow included)
    writer         TelemetryWriter alone (no live parts)
    duckdb/batch   one INSERT + COMMIT per advance's batch, into a plain DuckDB file
    duckdb/big     the batches of a table concatenated, inserted in chunks of ``--big-rows``
    parquet/lz4 | snappy | zstd   one Parquet part per advance and table (what DuckDB views read)
    ipc            Arrow IPC stream files, one per table, batches appended (uncompressed)

For each: CPU seconds of the whole process (every thread: DuckDB's workers, the writer's), wall
seconds, bytes on disk once closed (the product: the file, and the live parts it also wrote,
which are deleted when the run closes), and bytes per recorded value. A recorded value is one
cell of the model's columns (rows x columns, without ``run_id`` and ``ts``, which storage adds).
The ratios compare each path with the cheapest raw write of the same batches (least CPU; least
bytes): the target is the product's storage per recorded value <= 1.5x the cheapest.

    python bench/bench_writepath.py [--case us1000] [--hours 1] [--reps 2] [--paths product,duckdb/big]

``--runs`` instead records whole runs with ``twin run`` (the model, the writer and the live parts
in one process): the built-in ``default`` for 24 h, and the same hall at 1,000 UltraServers
(144,000 chips) and dt 15 s for 4 h; it prints each run's CPU seconds (the process's, every
thread), wall seconds, file size and peak RSS, the fewest CPU seconds of ``--reps``. With ``--rev
REV`` the same runs of another git revision (checked out with ``git worktree`` into a temporary
folder) alternate with this one's, so load slows both alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.ipc as ipc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

TS_TABLES = ("factory_ts", "ultraserver_ts", "row_ts", "hall_ts", "service_ts", "chip_ts", "system_ts")
RUN_ID = "bench-run-000000000000000000000000000000"  # the length of a real run id (~50 chars)

Frames = dict[str, dict[str, Any]]


def record_frames(case: str, hours: float) -> tuple[list[Frames], int]:
    """The time-series frames of ``hours`` of a bench_scale case, one dict per advance."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_scale

    from scenarios.spec import build_simulation

    nus, dt, full_h, _ = bench_scale.CASES[case]
    spec, _text, duration_s = bench_scale._scenario(case, hours / full_h)
    _, sim = build_simulation(spec)
    steps = -(-duration_s // dt)
    chunk = max(1, min(1440, 40_000 // nus))  # as the runner's advances at this size
    out, done = [], 0
    while done < steps:
        n = min(chunk, steps - done)
        fr = sim.advance(n)
        out.append({t: c for t, c in fr.items() if t in TS_TABLES and c})
        done += n
    return out, dt


def to_batches(frames: list[Frames]) -> list[dict[str, pa.Table]]:
    from storage.writer import to_arrow

    out = []
    for fr in frames:
        tabs = {t: to_arrow(t, RUN_ID, c) for t, c in fr.items()}
        out.append({t: tb for t, tb in tabs.items() if tb.num_rows})
    return out


def _du(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0


def _raw_db(path: Path) -> duckdb.DuckDBPyConnection:
    from storage.schema import migrations
    from storage.writer import STORAGE_COMPATIBILITY

    con = duckdb.connect(str(path), config={"storage_compatibility_version": STORAGE_COMPATIBILITY})
    for stmts in migrations():
        for s in stmts:
            con.execute(s)
    con.execute("CHECKPOINT")
    return con


def _insert(con: duckdb.DuckDBPyConnection, table: str, tb: pa.Table) -> None:
    con.register("_b", tb)
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _b")
    con.unregister("_b")


def path_duckdb_batch(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
    f = d / "batch.duckdb"
    con = _raw_db(f)
    for tabs in batches:
        con.execute("BEGIN")
        for t, tb in tabs.items():
            _insert(con, t, tb)
        con.execute("COMMIT")
    con.close()
    return {"file": _du(f)}


def path_duckdb_big(
    big_rows: int,
) -> Callable[[list[dict[str, pa.Table]], list[Frames], Path], dict[str, int]]:
    def go(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
        f = d / "big.duckdb"
        con = _raw_db(f)
        pending: dict[str, list[pa.Table]] = {}
        rows = 0

        def flush() -> None:
            con.execute("BEGIN")
            for t, parts in pending.items():
                _insert(con, t, pa.concat_tables(parts))
            con.execute("COMMIT")
            pending.clear()

        for tabs in batches:
            for t, tb in tabs.items():
                pending.setdefault(t, []).append(tb)
                rows += tb.num_rows
            if rows >= big_rows:
                flush()
                rows = 0
        if pending:
            flush()
        con.close()
        return {"file": _du(f)}

    return go


def path_parquet(codec: str) -> Callable[[list[dict[str, pa.Table]], list[Frames], Path], dict[str, int]]:
    def go(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
        root = d / f"pq-{codec}"
        for t in TS_TABLES:
            (root / t).mkdir(parents=True)
        for i, tabs in enumerate(batches):
            for t, tb in tabs.items():
                strings = [f.name for f in tb.schema if pa.types.is_string(f.type)]
                pq.write_table(
                    tb, root / t / f"part-{i:06d}.parquet", compression=codec, use_dictionary=strings
                )
        return {"file": _du(root)}

    return go


def path_ipc(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
    root = d / "ipc"
    root.mkdir()
    writers: dict[str, Any] = {}
    sinks = []
    for tabs in batches:
        for t, tb in tabs.items():
            if t not in writers:
                sink = pa.OSFile(str(root / f"{t}.arrows"), "wb")
                sinks.append(sink)
                writers[t] = ipc.new_stream(sink, tb.schema)
            writers[t].write_table(tb)
    for w in writers.values():
        w.close()
    for s in sinks:
        s.close()
    return {"file": _du(root)}


def path_writer(live: bool) -> Callable[[list[dict[str, pa.Table]], list[Frames], Path], dict[str, int]]:
    """The product: frames in (Arrow conversion included), committed, closed."""

    def go(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
        from storage.live import LivePublisher, live_dir
        from storage.writer import TelemetryWriter

        f = d / ("product.duckdb" if live else "writer.duckdb")
        pub = LivePublisher(f) if live else None
        run_row = {"run_id": RUN_ID, "scenario_name": "bench", "seed": 0, "dt_s": 15}
        w = TelemetryWriter(f, run_row, if_exists="replace", on_commit=pub.on_commit if pub else None)
        for i, fr in enumerate(frames):
            w.write(fr, i)
        w.flush()
        live_bytes = _du(live_dir(f))
        w.close()
        if pub is not None:
            pub.close()
        return {"file": _du(f), "live": live_bytes}

    return go


RUNS: dict[str, list[str]] = {
    "default 24 h": ["default", "--hours", "24"],
    "144k chips 4 h": ["default", "--hours", "4", "--set", "hall.ultraservers=1000", "--set", "dt_s=15"],
}


def whole_run(root: Path, args: list[str]) -> tuple[float, float, int, float]:
    """(CPU-s, wall-s, file bytes, peak RSS MB) of ``twin run ARGS`` with the code at ``root``."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run.duckdb"
        cmd = [sys.executable, "-m", "tui.cli", "run", *args, "-o", str(out), "--json"]
        w0 = time.perf_counter()
        p = subprocess.Popen(
            cmd, cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), stdout=subprocess.DEVNULL
        )
        _, status, ru = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"bench_writepath: twin run {' '.join(args)} failed at {root}")
        return ru.ru_utime + ru.ru_stime, time.perf_counter() - w0, out.stat().st_size, ru.ru_maxrss / 1024


def runs(rev: str, reps: int) -> None:
    roots = [("this", ROOT)]
    if rev:
        sys.path.insert(0, str(ROOT / "bench"))
        import bench_scale

        roots.append((rev, bench_scale.worktree(rev)))
    for name, args in RUNS.items():
        best: dict[str, tuple[float, float, int, float]] = {}
        for _ in range(reps):
            for label, root in roots:
                r = whole_run(root, args)
                if label not in best or r[0] < best[label][0]:
                    best[label] = r
        for label, _ in roots:
            cpu, wall, size, rss = best[label]
            print(
                f"{name:<15} {label:<10} {cpu:7.1f} CPU-s {wall:7.1f} wall-s {size / 1e6:7.1f} MB "
                f"peak RSS {rss:5.0f} MB",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="us1000", help="a bench_scale case (default us1000)")
    ap.add_argument("--hours", type=float, default=1.0, help="simulated hours recorded (default 1)")
    ap.add_argument("--reps", type=int, default=2, help="repeats of every path; the fastest is kept")
    ap.add_argument("--big-rows", type=int, default=4_000_000, help="rows per duckdb/big insert")
    ap.add_argument("--paths", default="", help="comma-separated subset of the paths")
    ap.add_argument("--runs", action="store_true", help="whole runs with twin run instead (see above)")
    ap.add_argument("--rev", default="", help="with --runs: also run this git revision, alternating")
    a = ap.parse_args()
    if a.runs:
        runs(a.rev, a.reps)
        return
    paths: dict[str, Callable[[list[dict[str, pa.Table]], list[Frames], Path], dict[str, int]]] = {
        "product": path_writer(True),
        "writer": path_writer(False),
        "duckdb/batch": path_duckdb_batch,
        "duckdb/big": path_duckdb_big(a.big_rows),
        "parquet/lz4": path_parquet("lz4"),
        "parquet/snappy": path_parquet("snappy"),
        "parquet/zstd": path_parquet("zstd"),
        "ipc": path_ipc,
    }
    chosen = [p.strip() for p in a.paths.split(",") if p.strip()] or list(paths)
    bad = [p for p in chosen if p not in paths]
    if bad:
        ap.error(f"--paths: unknown path {bad[0]!r}; expected some of {', '.join(paths)}")

    c0 = time.process_time()
    frames, dt = record_frames(a.case, a.hours)
    model_cpu = time.process_time() - c0
    c0 = time.process_time()
    batches = to_batches(frames)
    arrow_cpu = time.process_time() - c0
    rows: dict[str, int] = {}
    values = 0
    arrow_bytes = 0
    for tabs in batches:
        for t, tb in tabs.items():
            rows[t] = rows.get(t, 0) + tb.num_rows
            values += tb.num_rows * (tb.num_columns - 2)  # without run_id and ts
            arrow_bytes += tb.nbytes
    total_rows = sum(rows.values())
    print(
        f"bench_writepath: case {a.case}, {a.hours:g} h at dt {dt} s: {len(batches)} batches, "
        f"{total_rows:,} rows ({', '.join(f'{t} {n:,}' for t, n in sorted(rows.items()))}), "
        f"{values:,} recorded values, {arrow_bytes / 1e6:.0f} MB of Arrow; "
        f"model {model_cpu:.1f} CPU-s, to_arrow {arrow_cpu:.2f} CPU-s"
    )
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for name in chosen:
                d = Path(tmp) / f"{rep}-{name.replace('/', '-')}"
                d.mkdir()
                c0, w0 = time.process_time(), time.perf_counter()
                sizes = paths[name](batches, frames, d)
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                shutil.rmtree(d)
                b = best.setdefault(name, {"cpu": float("inf"), "wall": float("inf")})
                b["cpu"], b["wall"] = min(b["cpu"], cpu), min(b["wall"], wall)
                b["bytes"], b["live"] = sizes["file"], sizes.get("live", 0)
    raw = [n for n in best if n not in ("product", "writer")]
    cpu0 = min((best[n]["cpu"] for n in raw), default=float("nan"))
    bytes0 = min((best[n]["bytes"] for n in raw), default=float("nan"))
    print(
        f"{'path':<15} {'CPU-s':>7} {'wall-s':>7} {'MB':>7} {'live MB':>8} {'B/value':>8} "
        f"{'ns CPU/value':>12} {'xCPU':>6} {'xbytes':>7}"
    )
    for name in chosen:
        b = best[name]
        print(
            f"{name:<15} {b['cpu']:7.2f} {b['wall']:7.2f} {b['bytes'] / 1e6:7.1f} {b['live'] / 1e6:8.1f} "
            f"{b['bytes'] / values:8.3f} {b['cpu'] / values * 1e9:12.1f} {b['cpu'] / cpu0:6.2f} "
            f"{b['bytes'] / bytes0:7.2f}"
        )
    print(
        "xCPU, xbytes: against the cheapest raw path of this run (least CPU-s; least bytes). "
        "product = the run's write path (DuckDB file + live Parquet parts, to_arrow included)."
    )


if __name__ == "__main__":
    main()
