"""Benchmark: the reference factory (64 Trn3 Gen2 UltraServers = 9,216 chips, dt 60 s, 30 days).

Prints simulated-days per wall-second for the pure model and for a full run with telemetry, the
storage overhead ratio, and the raw DuckDB Arrow-insert rate on the same batches for comparison.

    python bench/bench_reference.py [--days 30]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tomllib
from pathlib import Path

import duckdb

from scenarios.runner import run
from scenarios.spec import load, validate
from storage.batches import to_arrow
from storage.schema import migrations
from twin.compose.hall import Hall
from twin.compose.sim import steps_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=30.0)
    args = ap.parse_args()
    spec, text, _ = load("reference")
    # The recorded run only (no warm-up), as every revision of this bench measures it.
    spec = validate({k: v for k, v in tomllib.loads(text).items() if k != "warmup_h"}, "bench reference")
    duration = int(args.days * 86400)
    params = spec.to_params()
    steps = steps_for(duration, params.dt_s)
    chips = params.hall.ultraservers * params.hall.system.chips
    print(
        f"reference factory: {params.hall.ultraservers} UltraServers, {chips:,} chips, dt {params.dt_s} s, "
        f"{args.days:g} days = {steps:,} steps"
    )

    # 1. Pure model (no storage), in the same chunks the runner uses.
    sim = Hall(params)
    chunk = 40_000 // params.hall.ultraservers
    t0 = time.perf_counter()
    done = 0
    frames_sample = None
    while done < steps:
        n = min(chunk, steps - done)
        fr = sim.advance(n)
        frames_sample = frames_sample or fr
        done += n
    model_s = time.perf_counter() - t0
    print(
        f"  model only      {model_s:7.2f} s wall  {args.days / model_s:7.2f} sim-days/s  "
        f"{model_s / steps * 1e6:6.0f} µs/step"
    )

    # 2. Full headless run with telemetry.
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "ref.duckdb"
        r = run(spec, text, out, duration_s=duration)
        size_mb = out.stat().st_size / 1e6
        con = duckdb.connect(str(out), read_only=True)
        rows = sum(
            con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0]
            for t in ("factory_ts", "ultraserver_ts", "chip_ts", "jobs", "events")
        )
        con.close()
    print(
        f"  full run        {r.wall_s:7.2f} s wall  {args.days / r.wall_s:7.2f} sim-days/s  "
        f"{rows:,} rows, {size_mb:.0f} MB file"
    )
    print(f"  run / model     {r.wall_s / model_s:7.2f}x")

    # 3. Raw DuckDB Arrow insert of the same kind of batches, no simulation.
    assert frames_sample is not None
    tables = {
        t: to_arrow(t, "bench", cols)
        for t, cols in frames_sample.items()
        if t in ("factory_ts", "ultraserver_ts", "chip_ts")
    }
    batch_rows = sum(t.num_rows for t in tables.values())
    with tempfile.TemporaryDirectory() as d:
        con = duckdb.connect(str(Path(d) / "raw.duckdb"))
        for stmts in migrations():
            for s in stmts:
                con.execute(s)
        reps = max(1, 2_000_000 // batch_rows)
        t0 = time.perf_counter()
        for _ in range(reps):
            con.execute("BEGIN")
            for name, tb in tables.items():
                con.register("_b", tb)
                con.execute(f"INSERT INTO {name} SELECT * FROM _b")
                con.unregister("_b")
            con.execute("COMMIT")
        raw_s = time.perf_counter() - t0
        con.close()
    raw_rate = reps * batch_rows / raw_s
    print(
        f"  raw DuckDB Arrow insert  {raw_rate / 1e6:5.2f} M rows/s   "
        f"(twin writer thread sustained {rows / max(r.wall_s, 1e-9) / 1e6:5.2f} M rows/s while simulating)"
    )
    print(
        f"  summary: PUE {r.summary['pue']:.3f}, busy {r.summary['busy_fraction']:.1%}, "
        f"{r.summary['facility_mwh']:,.0f} MWh"
    )


if __name__ == "__main__":
    main()
