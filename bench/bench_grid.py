"""Benchmark and report: the grid's view of the `ultracluster` campus (``twin.compose.grid``).

Runs the built-in campus (its first ``--halls`` halls, ``--hours`` recorded after ``--warmup``
hours) with and without the sub-step recording (``telemetry.grid_interval_s = 1``), prints the
wall time of each and their ratio (the target: at most 1.5x), then the grid connection's peak
to average, largest ramps and band variances without and with each mitigation: the power floor
and staggered checkpoint stalls (runs of their own), rack power-shelf storage and a site
battery (on the recorded waveform, ``twin.compose.grid.Connection``), each with its energy and $ cost.

    python bench/bench_grid.py [--halls 2] [--hours 1] [--warmup 6] [--twin-run]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from scenarios.spec import build_simulation, parse
from twin.compose import grid
from twin.spec.params import GridParams

ROOT = Path(__file__).resolve().parent.parent


def scenario_text(halls: int, warmup_h: float) -> str:
    text = (ROOT / "scenarios" / "builtin" / "ultracluster.toml").read_text()
    head, *tables = text.split("[[halls]]")
    rest = tables[-1].split("\n\n", 1)[1] if "\n\n" in tables[-1] else ""
    body = "".join("[[halls]]" + t for t in tables[:halls])
    if halls < len(tables):
        body = body.rstrip() + "\n\n" + rest
    head = "\n".join(ln for ln in head.splitlines() if not ln.startswith("warmup_h"))
    return head + f"\nwarmup_h = {warmup_h}\n" + body


def run(text: str, steps: int, interval: int, gp: GridParams | None = None) -> tuple[float, Any, Any]:
    """The model alone (no file): CPU seconds of ``steps`` recorded steps after the warm-up (CPU,
    not wall: the figure holds on a shared machine)."""
    scen = parse(text, "ultracluster.toml")
    _, sim = build_simulation(scen)
    p = dataclasses.replace(sim.p, grid_interval_s=interval, grid=gp or sim.p.grid)
    sim = type(sim)(p)
    warm = int(sim.p.warmup_s // sim.p.dt_s)
    if warm:
        sim.advance(warm)
    t0 = time.process_time()
    f = sim.advance(steps)
    return time.process_time() - t0, f, sim


def twin_run(text: str, hours: float, interval: int) -> float:
    """Wall seconds of ``twin run`` (model, warm-up and the telemetry file) of the scenario."""
    with tempfile.TemporaryDirectory() as d:
        toml = Path(d) / "u.toml"
        body = text.replace("duration_h = 168", f"duration_h = {hours}")
        if interval:
            body = body.replace("[telemetry]\n", f"[telemetry]\ngrid_interval_s = {interval}\n", 1)
        toml.write_text(body)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "tui.cli", "run", str(toml), "-o", str(Path(d) / "u.duckdb")],
            check=True,
            capture_output=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        return time.perf_counter() - t0


def connection(f: dict[str, Any]) -> np.ndarray:
    g = f["grid_ts"]
    out: np.ndarray = g["p_w"][g["hall_id"] == -1]
    return out


def row(name: str, p: np.ndarray, extra_j: float, price: float) -> str:
    m = grid.metrics(p, 1.0)
    b = [m["band_" + k + "_w2"] for k in grid.BAND_NAMES]
    rms = " ".join(f"{np.sqrt(v) / 1e6:7.3f}" if v is not None else "      -" for v in b)
    return (
        f"{name:26s} {m['peak_w'] / 1e6:8.2f} {m['peak_to_average']:7.4f} {m['swing_w'] / 1e6:7.2f} "
        f"{m['ramp_w_per_s'] / 1e6:7.2f} {m['ramp_w_per_min'] / 1e6:7.2f}  {rms}  "
        f"{extra_j / 3.6e9:8.3f} {extra_j / 3.6e9 * price:9.0f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--halls", type=int, default=2)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--warmup", type=float, default=6.0)
    ap.add_argument("--twin-run", action="store_true", help="also time `twin run` with its file")
    a = ap.parse_args()
    text = scenario_text(a.halls, a.warmup)
    steps = int(a.hours * 60)
    t_off, f_off, _ = run(text, steps, 0)
    t_on, f_on, sim = run(text, steps, 1)
    fac = f_on["factory_ts"]
    same = all(np.array_equal(f_off["factory_ts"][c], fac[c]) for c in ("facility_power_w", "it_power_w"))
    print(f"{a.halls} halls, {sim.topo.chips:,} chips, {a.hours} h after {a.warmup} h warm-up")
    print(
        f"model CPU: without sub-step recording {t_off:.2f} s, with {t_on:.2f} s: {t_on / t_off:.2f}x; "
        f"factory_ts power identical: {same}"
    )
    if a.twin_run:
        r_off, r_on = twin_run(text, a.hours, 0), twin_run(text, a.hours, 1)
        print(f"twin run (warm-up and file): without {r_off:.1f} s, with {r_on:.1f} s: {r_on / r_off:.2f}x")
    price = float(np.mean(fac["price_usd_per_mwh"]))
    base = connection(f_on)
    print("bands: RMS [MW] of <0.01 Hz, 0.01-0.1, 0.1-1, >1 Hz (1 s samples: >1 Hz not observable)")
    print(
        f"{'case':26s} {'peak MW':>8s} {'pk/avg':>7s} {'swingMW':>7s} {'MW/s':>7s} {'MW/min':>7s}  "
        f"{'RMS by band [MW]':31s}  {'cost MWh':>8s} {'cost $':>9s}"
    )
    print(row("no mitigation", base, 0.0, price))
    fac_j = float(fac["facility_power_w"].sum()) * 60.0
    for name, gp in (
        ("power floor 0.8", GridParams(power_floor=0.8)),
        ("staggered checkpoints", GridParams(checkpoint_stagger=True)),
    ):
        _, f, _ = run(text, steps, 1, gp)
        p = connection(f)
        print(row(name, p, float(p.sum()) - fac_j, price))
    largest_gangs(sim)
    chips = sim.topo.chips
    for name, gp in (
        ("rack storage 65 J/chip", GridParams(rack_storage_j_per_chip=grid.RACK_STORAGE_J_PER_CHIP)),
        (
            "battery 50 MW / 25 MWh",
            GridParams(battery_power_w=50e6, battery_energy_j=25 * 3.6e9),
        ),
    ):
        c = grid.Connection(gp, chips, 1)
        p = c.apply(base)
        print(row(name, p, float(p.sum() - base.sum()), price))


def largest_gangs(sim: Any, n: int = 5) -> None:
    """The largest gangs of the first hall at the run's end: their iteration and swing, for the
    comparison with the published DGX-H100 swing (compute near TDP, communication near idle, at
    0.2-3 Hz: Choukse et al. 2025)."""
    hall = sim.halls[0] if hasattr(sim, "halls") else sim
    pl = hall.pools[0]
    g = grid.pool_gangs(pl, hall.t_s - hall.dt_s, hall.dt_s, pl.chip_clock, {})
    hi, lo = grid.phase_activities(g.mean, g.duty, g.compute)
    print(
        "largest gangs of hall 0: chips, period [s], duty, activity hi/lo, swing per chip [W rack input], gang [MW]"
    )
    for k in np.argsort(-g.chips)[:n]:
        per_chip = float(g.slope_w[k] * (hi[k] - lo[k]))
        print(
            f"  {int(g.chips[k]):6d} {g.period[k]:7.2f} {g.duty[k]:5.2f} {hi[k]:5.2f}/{lo[k]:4.2f} "
            f"{per_chip:6.0f} {per_chip * g.chips[k] / 1e6:6.2f}"
        )


if __name__ == "__main__":
    main()
