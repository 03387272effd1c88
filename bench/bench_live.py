"""Benchmark: the cost of publishing a run for live readers (Parquet parts next to the file).

Runs the reference factory with and without the live sidecar (alternating, best of N) and prints
the wall and process CPU time of each, the time the writer thread spent publishing, and the
sidecar's parts and bytes at the end of the run. CPU time is the steadier figure on a busy machine.

    python bench/bench_live.py [--days 3] [--repeat 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import storage.live as live
from scenarios.runner import run
from scenarios.spec import load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    spec, text, _ = load("reference")
    duration = int(args.days * 86400)
    best = {True: float("inf"), False: float("inf")}
    cpu = {True: float("inf"), False: float("inf")}
    stats: dict[str, int] = {}
    orig_close = live.LivePublisher.close
    orig_commit = live.LivePublisher.on_commit
    publishing = [0.0]

    def commit_timed(self: live.LivePublisher, tables: dict, run_row: dict) -> None:  # type: ignore[type-arg]
        t = time.perf_counter()
        orig_commit(self, tables, run_row)
        publishing[0] += time.perf_counter() - t

    live.LivePublisher.on_commit = commit_timed  # type: ignore[method-assign,assignment]

    def close_counting(self: live.LivePublisher) -> None:
        files = [p for p in self.dir.rglob("*.parquet")]
        stats.update(parts=len(files), bytes=sum(p.stat().st_size for p in files), commits=self.seq)
        orig_close(self)

    live.LivePublisher.close = close_counting  # type: ignore[method-assign]
    for _ in range(args.repeat):
        for publish in (False, True):
            with tempfile.TemporaryDirectory() as d:
                publishing[0] = 0.0
                t0, c0 = time.perf_counter(), time.process_time()
                run(spec, text, Path(d) / "ref.duckdb", duration_s=duration, publish_live=publish)
                best[publish] = min(best[publish], time.perf_counter() - t0)
                if publish:
                    stats["publish_ms"] = min(stats.get("publish_ms", 10**9), round(publishing[0] * 1000))
                cpu[publish] = min(cpu[publish], time.process_time() - c0)
    off, on = best[False], best[True]
    print(f"reference factory, {args.days:g} days, best of {args.repeat}:")
    print(f"  without live sidecar {off:7.2f} s wall  {cpu[False]:7.2f} s CPU")
    print(
        f"  with live sidecar    {on:7.2f} s wall  {cpu[True]:7.2f} s CPU  "
        f"(wall {(on / off - 1) * 100:+.1f} %, CPU {(cpu[True] / cpu[False] - 1) * 100:+.1f} %)"
    )
    print(f"  writer thread publishing: {stats.get('publish_ms', 0) / 1000:.2f} s")
    print(
        f"  sidecar at the end: {stats.get('commits', 0)} commits, {stats.get('parts', 0)} parts on disk, "
        f"{stats.get('bytes', 0) / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
