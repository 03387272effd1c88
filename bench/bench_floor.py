"""Benchmark: a mixed floor against a one-system hall of as many chips (the model only).

Runs the `gpu-vs-asic` floor (8 Trn3 Gen2 UltraServers + 10 GB300 NVL72 racks, 1,872 chips) and,
with the same work, a hall of 13 Trn3 Gen2 UltraServers (1,872 chips); prints simulated days per
wall-second of each and their ratio (the composition's cost: a step per pool, one plant step, the
merge of the pools' frames). Figures depend on the machine and its load.

    python bench/bench_floor.py [--days 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from scenarios.spec import load
from twin.compose import sim as model
from twin.spec.params import FactoryParams


def _speed(p: FactoryParams, days: float) -> float:
    sim = model.build(p)
    steps = int(days * 86400 / p.dt_s)
    t0 = time.perf_counter()
    done = 0
    while done < steps:
        n = min(1440, steps - done)
        sim.advance(n)
        done += n
    return days / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=2.0)
    args = ap.parse_args()
    spec, _, _ = load("gpu-vs-asic")
    p = spec.variants[0].to_params()
    chips = sum(r.ultraservers * r.system.chips for r in p.hall.pools())
    mixed = _speed(p, args.days)
    print(f"mixed floor ({chips:,} chips): {mixed:,.2f} simulated days/s")
    first = p.hall.pools()[0]
    n = chips // first.system.chips
    hall = dataclasses.replace(
        p.hall,
        system=first.system,
        accelerator=first.accelerator,
        ultraservers=n,
        ultraservers_per_row=first.ultraservers_per_row,
        rows=(),
    )
    one = _speed(dataclasses.replace(p, hall=hall), args.days)
    print(
        f"{n} x {first.system.name} ({n * first.system.chips:,} chips), same work: {one:,.2f} simulated days/s"
    )
    print(f"mixed floor wall time / one-system hall: {one / mixed:.2f}")


if __name__ == "__main__":
    main()
