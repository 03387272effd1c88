"""Benchmark: the cost of recording the same telemetry batches through each write path.

The batches are those a real run produces: a scale case of ``bench/bench_scale.py`` (by default
``us1000``, 1,000 UltraServers / 144,000 chips at dt 15 s) stepped for ``--hours`` in memory, each
advance's time-series frames turned into the writer's Arrow batches by
``storage.batches.batch_arrow`` (not timed; no ``run_id`` column: the DuckDB paths add it as a
constant, as the writer does). The SAME batches then go through every path, one after another in
this process, ``--reps`` times (each path's fastest is kept, so a busy machine slows every path
alike):

    product        TelemetryWriter + LivePublisher, as a run writes (frames in: batch_arrow included)
    writer         TelemetryWriter alone (no live parts)
    duckdb/batch   one INSERT + COMMIT per advance's batch, into a plain DuckDB file
    duckdb/big     the batches of a table concatenated, inserted in chunks of ``--big-rows``
    duckdb/big-1thread   the same with one DuckDB thread (as the writer's database)
    parquet/lz4 | snappy | zstd   one Parquet part per advance and table (what DuckDB views read)
    ipc            Arrow IPC stream files, one per table, batches appended (uncompressed)

and options measured on the same batches (not raw writes: left out of the ratios' references):

    product/live-none | live-snappy   the product with its live parts uncompressed or Snappy
    writer/256MB   the writer flushing at 256 MB of batches instead of 64 MB (larger inserts)
    writer/threads-2   the writer's database with two threads instead of one
    duckdb/f32-states  duckdb/big with the float64 measured states (units -, °C, s, prices) as REAL
    duckdb/f32-all     duckdb/big with every float64 column as REAL (powers, energies and costs too)
    chips/arrays   chip_ts alone, as today and as one row per UltraServer and step holding lists

For each: CPU seconds of the whole process (every thread: DuckDB's workers, the writer's), wall
seconds, CPU ns per recorded value, bytes on disk once closed (the product: the file, and the live
parts it also wrote, which are deleted when the run closes) and bytes per recorded value. A
recorded value is one cell of the model's columns (rows x columns, without ``run_id`` and ``ts``,
which storage adds). The ratios compare each path with the raw write of the same batches that
needs the least CPU (xCPU) and with the smallest (xbytes); the last lines give the product's
ratios against the target of 1.5x, chip_ts alone in both layouts, and the worst relative error
of the float64 columns stored as float32.

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
    import scale_cases

    from scenarios.spec import build_simulation

    nus, dt, full_h, _ = scale_cases.CASES[case]
    spec, _text, duration_s = scale_cases.scenario(case, hours / full_h)
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
    """Each advance's frames as the writer's batches (``storage.batches.batch_arrow``: the model's
    columns and ``ts``; ``run_id`` is one value per run, added where a path stores it)."""
    try:
        from storage.batches import batch_arrow
    except ImportError:  # a revision whose batches carried run_id (``bench_scale.py --rev``)
        from storage.batches import to_arrow

        def batch_arrow(table: str, cols: Any) -> pa.Table:
            return to_arrow(table, RUN_ID, cols).drop_columns(["run_id"])

    out = []
    for fr in frames:
        tabs = {t: batch_arrow(t, c) for t, c in fr.items()}
        out.append({t: tb for t, tb in tabs.items() if tb.num_rows})
    return out


def _du(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0


def _raw_db(path: Path, threads: int = 0) -> duckdb.DuckDBPyConnection:
    from storage.database import STORAGE_COMPATIBILITY
    from storage.schema import migrations

    config: dict[str, Any] = {"storage_compatibility_version": STORAGE_COMPATIBILITY}
    if threads:
        config["threads"] = threads
    con = duckdb.connect(str(path), config=config)
    for stmts in migrations():
        for s in stmts:
            con.execute(s)
    con.execute("CHECKPOINT")
    return con


def _insert(con: duckdb.DuckDBPyConnection, table: str, tb: pa.Table) -> None:
    con.register("_b", tb)
    con.execute(f"INSERT INTO {table} BY NAME SELECT $1::VARCHAR AS run_id, * FROM _b", [RUN_ID])
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
    big_rows: int, threads: int = 0
) -> Callable[[list[dict[str, pa.Table]], list[Frames], Path], dict[str, int]]:
    """The batches of a table concatenated, inserted in chunks of ``big_rows``; ``threads``: the
    database's threads (0: DuckDB's default, one per core)."""

    def go(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
        f = d / "big.duckdb"
        con = _raw_db(f, threads)
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


def path_writer(
    live: bool, codec: str = "", flush_bytes: int = 0, threads: int = -1
) -> Callable[[list[dict[str, pa.Table]], list[Frames], Path], dict[str, int]]:
    """The product: frames in (Arrow conversion included), committed, closed. ``codec``: the live
    parts' Parquet codec instead of ``storage.live.PART_COMPRESSION``; ``flush_bytes``: the
    writer's flush bound instead of its default; ``threads``: the database's threads instead of
    ``storage.database.WRITER_THREADS`` (0: DuckDB's default, one per core)."""

    def go(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
        import storage.live as live_mod
        from storage.live import LivePublisher, live_dir
        from storage.writer import TelemetryWriter

        f = d / ("product.duckdb" if live else "writer.duckdb")
        import inspect

        # From schema v11 the writer owns its publisher (``live=``); before, the caller wired one.
        owns = "live" in inspect.signature(TelemetryWriter).parameters
        pub = LivePublisher(f) if live and not owns else None
        run_row = {"run_id": RUN_ID, "scenario_name": "bench", "seed": 0, "dt_s": 15}
        kw: dict[str, Any] = {"flush_bytes": flush_bytes} if flush_bytes else {}
        import storage.database as writer_mod

        # (A revision without these knobs runs as it is: ``bench_scale.py --rev``.)
        was = getattr(live_mod, "PART_COMPRESSION", None)
        was_threads = getattr(writer_mod, "WRITER_THREADS", None)
        if was is not None:
            live_mod.PART_COMPRESSION = codec or was
        if was_threads is not None:
            writer_mod.WRITER_THREADS = was_threads if threads < 0 else threads
        try:
            if owns:
                kw["live"] = live
            elif pub is not None:
                kw["on_commit"] = pub.on_commit
            w = TelemetryWriter(f, run_row, if_exists="replace", **kw)
            for i, fr in enumerate(frames):
                w.write(fr, i)
            w.flush()
            live_bytes = _du(live_dir(f))
            w.close()
        finally:
            if was is not None:
                live_mod.PART_COMPRESSION = was
            if was_threads is not None:
                writer_mod.WRITER_THREADS = was_threads
        if pub is not None:
            pub.close()
        # The recording: the file and (from schema v11) the Parquet parts of its time series.
        return {"file": _du(f) + _du(Path(str(f) + ".parts")), "live": live_bytes}

    return go


def _f32_columns(table: str, every: bool) -> list[str]:
    """The float64 columns of ``table`` stored as float32 by ``duckdb/f32``: ``every`` one, or
    only the measured states (units "-", °C, s, prices and carbon intensity), not the powers,
    energies, costs, flows and rates that are summed or compared to 1e-9."""
    from twin.spec.telemetry import TABLES

    keep = {"-", "°C", "s", "USD/MWh", "g/kWh"}
    return [c.name for c in TABLES[table] if c.dtype == "float64" and (every or c.unit in keep)]


def f32_errors(batches: list[dict[str, pa.Table]]) -> dict[str, float]:
    """Worst relative error of each float64 column stored as float32, over the batches."""
    import numpy as np

    worst: dict[str, float] = {}
    for tabs in batches:
        for t, tb in tabs.items():
            for name in _f32_columns(t, True):
                x = tb.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
                x = x[np.isfinite(x) & (x != 0)]
                if len(x):
                    e = float(np.max(np.abs(x.astype(np.float32).astype(np.float64) - x) / np.abs(x)))
                    worst[f"{t}.{name}"] = max(worst.get(f"{t}.{name}", 0.0), e)
    return worst


def path_duckdb_f32(every: bool) -> Callable[[list[dict[str, pa.Table]], list[Frames], Path], dict[str, int]]:
    """``duckdb/big`` with float64 columns stored as REAL (``_f32_columns``)."""

    def go(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
        f = d / "f32.duckdb"
        con = _raw_db(f)
        for t in TS_TABLES:
            for name in _f32_columns(t, every):
                con.execute(f"ALTER TABLE {t} ALTER COLUMN {name} TYPE REAL")
        con.execute("CHECKPOINT")
        con.execute("BEGIN")
        for t in TS_TABLES:
            parts = [tabs[t] for tabs in batches if t in tabs]
            if parts:
                _insert(con, t, pa.concat_tables(parts))
        con.execute("COMMIT")
        con.close()
        return {"file": _du(f)}

    return go


def path_chip_arrays(batches: list[dict[str, pa.Table]], frames: list[Frames], d: Path) -> dict[str, int]:
    """chip_ts alone, twice, each in a DuckDB file of its own (one insert): as today (one row per
    chip and step) and as one row per UltraServer and step holding a list of its chips' values per
    column. ``file``: the lists' file; ``flat``: today's; ``empty``: a file with no table."""
    out: dict[str, int] = {}
    chips = pa.concat_tables([tabs["chip_ts"] for tabs in batches if "chip_ts" in tabs])
    lists = ", ".join(
        f"list({c} ORDER BY chip_id) AS {c}"
        for c in chips.column_names
        if c not in ("time_s", "ultraserver_id", "ts")
    )
    queries = {
        "empty": "",
        "flat": "CREATE TABLE chip_ts AS SELECT $1::VARCHAR AS run_id, * FROM _c",
        "file": "CREATE TABLE chip_ts AS SELECT $1::VARCHAR AS run_id, time_s, ultraserver_id, "
        f"any_value(ts) AS ts, {lists} FROM _c GROUP BY ALL ORDER BY time_s, ultraserver_id",
    }
    from storage.database import STORAGE_COMPATIBILITY

    for key, q in queries.items():
        f = d / f"chips-{key}.duckdb"
        con = duckdb.connect(str(f), config={"storage_compatibility_version": STORAGE_COMPATIBILITY})
        if q:
            con.register("_c", chips)
            con.execute(q, [RUN_ID])
            con.unregister("_c")
        con.close()
        out[key] = _du(f)
    return out


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
        import scale_cases

        roots.append((rev, scale_cases.worktree(rev)))
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
        "product/live-none": path_writer(True, codec="none"),
        "product/live-snappy": path_writer(True, codec="snappy"),
        "writer/256MB": path_writer(False, flush_bytes=256 << 20),
        "writer/threads-2": path_writer(False, threads=2),
        "duckdb/batch": path_duckdb_batch,
        "duckdb/big": path_duckdb_big(a.big_rows),
        "duckdb/big-1thread": path_duckdb_big(a.big_rows, threads=1),
        "duckdb/f32-states": path_duckdb_f32(False),
        "duckdb/f32-all": path_duckdb_f32(True),
        "parquet/lz4": path_parquet("lz4"),
        "parquet/snappy": path_parquet("snappy"),
        "parquet/zstd": path_parquet("zstd"),
        "ipc": path_ipc,
        "chips/arrays": path_chip_arrays,
    }
    # Options of the product and other layouts (not raw writes of the same values: left out of
    # the cheapest and smallest).
    variants = {"writer", "product/live-none", "product/live-snappy", "writer/256MB", "writer/threads-2"}
    variants |= {"duckdb/f32-states", "duckdb/f32-all", "chips/arrays"}
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
    chip_values = 0
    arrow_bytes = 0
    for tabs in batches:
        for t, tb in tabs.items():
            rows[t] = rows.get(t, 0) + tb.num_rows
            values += tb.num_rows * (tb.num_columns - 1)  # the model's columns (without ts)
            chip_values += tb.num_rows * (tb.num_columns - 1) if t == "chip_ts" else 0
            arrow_bytes += tb.nbytes
    total_rows = sum(rows.values())
    print(
        f"bench_writepath: case {a.case}, {a.hours:g} h at dt {dt} s: {len(batches)} batches, "
        f"{total_rows:,} rows ({', '.join(f'{t} {n:,}' for t, n in sorted(rows.items()))}), "
        f"{values:,} recorded values, {arrow_bytes / 1e6:.0f} MB of Arrow; "
        f"model {model_cpu:.1f} CPU-s, batch_arrow {arrow_cpu:.2f} CPU-s"
    )
    best: dict[str, dict[str, float]] = {}
    # A run recording one row of each table (the product's fixed cost per file: schema and views,
    # run row, first commit, checkpoints).
    paths["product/empty"] = path_writer(True)
    rounds = [*chosen, "product/empty"] if "product" in chosen else chosen
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for name in rounds:
                if name == "product/empty":
                    frames_in: list[Frames] = [
                        {t: {k: v[:1] for k, v in c.items()} for t, c in frames[0].items()}
                    ]
                    batches_in: list[dict[str, pa.Table]] = []
                else:
                    frames_in, batches_in = frames, batches
                d = Path(tmp) / f"{rep}-{name.replace('/', '-')}"
                d.mkdir()
                c0, w0 = time.process_time(), time.perf_counter()
                sizes = paths[name](batches_in, frames_in, d)
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                shutil.rmtree(d)
                b = best.setdefault(name, {"cpu": float("inf"), "wall": float("inf")})
                b["cpu"], b["wall"] = min(b["cpu"], cpu), min(b["wall"], wall)
                b.update({k: float(v) for k, v in sizes.items()})
    table_paths = [n for n in chosen if n != "chips/arrays"]
    raw = [n for n in table_paths if n not in variants and n != "product"]
    # The target's yardstick: the cheapest raw write a recording could be (DuckDB or Parquet, which
    # DuckDB 1.x/2.x, polars and pandas all open); Arrow IPC is printed but is not one.
    cheap = min((n for n in raw if n != "ipc"), key=lambda n: best[n]["cpu"], default="")
    small = min(raw, key=lambda n: best[n]["file"], default="")
    print(
        f"{'path':<20} {'CPU-s':>6} {'wall-s':>6} {'ns/value':>8} {'MB':>6} {'live MB':>7} "
        f"{'B/value':>7} {'xCPU':>6} {'xbytes':>6}"
    )
    for name in table_paths:
        b = best[name]
        xcpu = f"{b['cpu'] / best[cheap]['cpu']:6.2f}" if cheap else f"{'':>6}"
        xbytes = f"{b['file'] / best[small]['file']:6.2f}" if small else f"{'':>6}"
        print(
            f"{name:<20} {b['cpu']:6.2f} {b['wall']:6.2f} {b['cpu'] / values * 1e9:8.1f} "
            f"{b['file'] / 1e6:6.1f} {b.get('live', 0) / 1e6:7.1f} {b['file'] / values:7.3f} {xcpu} {xbytes}"
        )
    if cheap and small:
        print(
            f"xCPU: against the least CPU of the openable raw writes ({cheap}); xbytes: against the "
            f"smallest ({small}). product = the run's write path (the DuckDB file and its Parquet "
            "parts, live manifest on; frames in, their Arrow conversion included)."
        )
    if "product" in best and cheap and small:
        p = best["product"]
        for what, key, ref in (("CPU", "cpu", cheap), ("bytes", "file", small)):
            x = p[key] / best[ref][key]
            need = "met" if x <= 1.5 else f"needs {1 - 1.5 / x:.0%} less"
            file = " (the file and its parts)" if key == "file" else ""
            print(f"product {what}{file}: {x:.2f}x {ref}; target 1.5x: {need}")
    if "product/empty" in best:
        e, p = best["product/empty"], best["product"]
        print(
            f"product recording one row per table (fixed per file): {e['cpu']:.2f} CPU-s, {e['file'] / 1e6:.2f} MB; "
            f"net of it {(p['cpu'] - e['cpu']) / values * 1e9:.1f} ns/value, "
            f"{(p['file'] - e['file']) / values:.3f} B/value"
        )
    if "chips/arrays" in best:
        c = best["chips/arrays"]
        flat, arrays = c["flat"] - c["empty"], c["file"] - c["empty"]
        print(
            f"chip_ts alone ({chip_values:,} values): one row per chip {flat / 1e6:.2f} MB "
            f"({flat / chip_values:.3f} B/value), lists per UltraServer and step {arrays / 1e6:.2f} MB "
            f"({arrays / chip_values:.3f} B/value)"
        )
    if any(n.startswith("duckdb/f32") for n in chosen):
        errs = f32_errors(batches)
        states = {f"{t}.{n}" for t in TS_TABLES for n in _f32_columns(t, False)}
        for label, names in (("f32-states", states), ("f32-all", set(errs))):
            worst = max(((errs[n], n) for n in names if n in errs), default=(0.0, ""))
            print(
                f"{label}: {len(names)} float64 columns as REAL, worst relative error {worst[0]:.2e} ({worst[1]})"
            )


if __name__ == "__main__":
    main()
