"""Sweep throughput: runs per minute with -j 1, -j 2 and Ray (2 CPUs) on this machine.

    .venv/bin/python bench/bench_sweep.py [--hours 24] [--points 8]

The sweep is small on purpose (2-UltraServer halls, a day each, dt 60 s) so the figures show the
engines' overhead as well as the scaling. Ray's start-up is timed separately. Prints figures only;
nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from scenarios import sweep

SCENARIO = """
name = "bench-sweep"
seed = 7
dt_s = 60
duration_h = 24

[hall]
system = "trn3-gen2"
ultraservers = 2
ultraservers_per_row = 2

[training]
arrivals_per_day = 40

[[services]]
name = "chat"
model = "llama-3.1-70b"
replicas = 2
mean_requests_per_s = 20.0
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--points", type=int, default=8, help="runs per backend (climates x seeds)")
    ap.add_argument("--no-ray", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    (tmp / "bench.toml").write_text(SCENARIO)
    seeds = list(range(1, max(1, a.points // 2) + 1))
    (tmp / "sweep.toml").write_text(
        f'[sweep]\nscenario = "bench.toml"\nhours = {a.hours}\nseeds = {seeds}\n'
        '[sweep.grid]\n"site.climate" = ["temperate", "hot"]\n'
    )
    sw = sweep.load_sweep(tmp / "sweep.toml")
    n = len(sweep.tasks(sw, sweep.points(sw), None))
    print(
        f"{n} runs of {a.hours:g} h on 2 Trn3 Gen2 UltraServers (dt 60 s); {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    rows: list[tuple[str, float, float, float, float, float]] = []

    def go(label: str, backend: str, jobs: int, startup: float = 0.0) -> None:
        out = tmp / label.replace(" ", "-")
        t0 = time.perf_counter()
        res = sweep.run_sweep(sw, out, backend=backend, jobs=jobs, files=False)
        wall = time.perf_counter() - t0
        assert res.failed == 0 and res.results is not None, f"{label}: {res.failed} runs failed"
        # Runs in flight on average: the runs' own wall times over the sweep's.
        rs = sweep.read_results(res.results)[0]
        busy = sum(r["wall_s"] for r in rs) / wall
        # Cores the runs used: their processes' CPU time (model, writer and DuckDB threads) per second.
        cores = sum(r["cpu_s"] for r in rs) / wall
        rows.append((label, wall, startup, n / wall * 60, busy, cores))

    go("local -j 1", "local", 1)
    go("local -j 2", "local", 2)
    if not a.no_ray and sweep.ray_missing() is None:
        t0 = time.perf_counter()
        with sweep.backend_session("ray", 2):  # the local Ray a sweep starts, timed on its own
            go("ray 2 CPUs", "ray", 2, time.perf_counter() - t0)
    base = rows[0][1]
    print(
        f"{'backend':<12} {'wall s':>8} {'runs/min':>9} {'speed-up':>9} {'in flight':>10} {'cores used':>11}"
        f" {'start-up s':>11}"
    )
    for label, wall, startup, rate, busy, cores in rows:
        print(
            f"{label:<12} {wall:>8.1f} {rate:>9.1f} {base / wall:>9.2f} {busy:>10.2f} {cores:>11.2f} {startup:>11.1f}"
        )
    print(
        "(in flight: runs running at once on average; cores used: the runs' CPU seconds per wall\n"
        " second; Ray's runs/min exclude its start-up, paid once per sweep.)"
    )


if __name__ == "__main__":
    main()
