"""Benchmark: memory over a long run (default scenario, 365 simulated days, telemetry written).

Prints the process's resident memory (RSS) at 10 % and at 100 % of the run, and the job table's
size against the jobs the run has had: memory stays flat because finished jobs leave the model
once they are written to the ``jobs`` table.

    python bench/bench_memory.py [--days 365] [--scenario default] [--model-only]

``--model-only`` runs the simulation without writing a file (the model's own memory); without it
the run writes its telemetry file as ``twin run`` does, so the figure includes DuckDB's buffer
cache. RSS is read from /proc/self/status (Linux); elsewhere the peak RSS from ``resource``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scenarios.runner import Session
from scenarios.spec import load
from twin.sim import Simulation, steps_for


def rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=365.0)
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--model-only", action="store_true", help="simulate without writing a file")
    args = ap.parse_args()
    spec, text, _ = load(args.scenario)
    if args.model_only:
        model_only(spec, args.days)
        return
    with tempfile.TemporaryDirectory() as d:
        s = Session(spec, text, Path(d) / "long.duckdb", duration_s=int(args.days * 86400))
        total = s.total_steps
        marks = {max(1, total // 10): "10 %", total: "100 %"}
        print(f"{args.scenario}: {args.days:g} days = {total:,} steps of {s.params.dt_s} s; RSS at start {rss_mb():.0f} MB")
        done, t0 = 0, time.perf_counter()
        try:
            for mark in sorted(marks):
                while done < mark:
                    n = min(s.chunk_steps, mark - done)
                    s.advance(n)
                    done += n
                jobs = s.sim.jobs
                print(
                    f"  {marks[mark]:>5} ({done * s.params.dt_s / 86400:6.1f} days, {time.perf_counter() - t0:6.0f} s wall): "
                    f"RSS {rss_mb():6.0f} MB   job slots {jobs.n:,} for {jobs.next_id:,} jobs so far"
                )
        finally:
            s.close()


def model_only(spec: Any, days: float) -> None:
    params = spec.to_params()
    sim = Simulation(params)
    total = steps_for(int(days * 86400), params.dt_s)
    chunk = max(1, min(1440, 40_000 // params.hall.ultraservers))
    print(f"{spec.name} (model only): {days:g} days = {total:,} steps; RSS at start {rss_mb():.0f} MB")
    done, t0 = 0, time.perf_counter()
    for mark, label in ((max(1, total // 10), "10 %"), (total, "100 %")):
        while done < mark:
            n = min(chunk, mark - done)
            sim.advance(n)
            done += n
        print(
            f"  {label:>5} ({done * params.dt_s / 86400:6.1f} days, {time.perf_counter() - t0:6.0f} s wall): "
            f"RSS {rss_mb():6.0f} MB   job slots {sim.jobs.n:,} for {sim.jobs.next_id:,} jobs so far"
        )


if __name__ == "__main__":
    main()
