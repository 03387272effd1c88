"""Responsiveness of the console at max simulation speed (figures only, no pass/fail).

Drives the live TUI headless (``App.run_test``) on the ``reference`` scenario (64 UltraServers,
9,216 chips; ``--scenario`` another, e.g. ``ultracluster``: 16 halls, ~1 M chips, where the Floor
starts at the campus level and Enter opens a hall) at speed "max" and reports:

* key → screen latency: from posting a key event to the first frame written after the screen shows
  the result (screen switches, Floor moves, metric change, drill-in, pause) — every frame is also
  serialised to terminal escape codes, as a real terminal would get it;
* refresh rates: KPI tiles, plots and the Jobs table updates per second, frames per second;
* CPU: the whole process and the UI thread, and the simulated days per wall second.

    python bench/bench_tui.py [--scenario reference] [--hours H] [--size 200x60] [--seconds 8] [--rounds 5]
    python bench/bench_tui.py --scenario ultracluster --hours 48
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def thread_cpu_s(native_id: int | None) -> float:
    """CPU seconds of one thread (Linux /proc; 0 elsewhere)."""
    if native_id is None:
        return 0.0
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Frames:
    """Counts frames and lets a measurement wait for the first frame after a condition holds."""

    def __init__(self, app: Any) -> None:
        from textual._compositor import CompositorUpdate

        self.app = app
        self.count = 0
        self.render_s = 0.0
        self.waiting: tuple[Callable[[], bool], asyncio.Future[float]] | None = None
        original = app._display

        def display(screen: Any, renderable: Any) -> None:
            t0 = time.perf_counter()
            if isinstance(renderable, CompositorUpdate):
                renderable.render_segments(app.console)  # what a terminal would be sent
            self.render_s += time.perf_counter() - t0
            self.count += 1
            original(screen, renderable)
            if self.waiting is not None:
                cond, fut = self.waiting
                if not fut.done() and holds(cond):
                    fut.set_result(time.perf_counter())

        app._display = display

    async def latency(self, key: str, cond: Callable[[], bool]) -> float:
        """Post ``key``; seconds until the first frame written once ``cond()`` holds (however long
        that takes on a loaded machine: the figure is reported, not judged)."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting = (cond, fut)
        t0 = time.perf_counter()
        post_key(self.app, key)
        try:
            t1 = await fut
        finally:
            self.waiting = None
        return t1 - t0


def holds(cond: Callable[[], bool]) -> bool:
    """``cond()``, False while the screen it looks at is not up yet."""
    try:
        return bool(cond())
    except Exception:
        return False


def post_key(app: Any, key: str) -> None:
    from textual import events

    char = key if len(key) == 1 else (" " if key == "space" else None)
    app.post_message(events.Key(key, char))


async def until(cond: Callable[[], bool]) -> None:
    while not holds(cond):
        await asyncio.sleep(0.02)


async def bench(
    size: tuple[int, int], seconds: float, rounds: int, scenario: str = "reference", hours: float = 3650 * 24
) -> None:
    from scenarios.runner import Session
    from scenarios.spec import load
    from tui.app import TwinApp
    from tui.screens.floor import FloorScreen
    from tui.screens.jobs import JobsScreen
    from tui.screens.ultraserver import UltraServerScreen
    from tui.widgets.arrowtable import ArrowTable
    from tui.widgets.heatmap import ChipGrid, FloorMap, HallMap
    from tui.widgets.kpi import KpiGrid
    from tui.widgets.plot import BraillePlot
    from tui.widgets.status import StatusBar

    spec, text, _ = load(scenario)
    tmp = tempfile.mkdtemp(prefix="bench-tui-")
    session = Session(spec, text, Path(tmp) / "bench.duckdb", duration_s=int(hours * 3600))
    app = TwinApp(session=session, config_dir=tmp)
    halls = app.core.meta.halls
    print(
        f"{spec.name}: "
        + (f"{halls} halls, " if halls > 1 else "")
        + f"{session.sim.topo.ultraservers:,} UltraServers, {session.sim.topo.chips:,} chips, "
        f"dt {session.params.dt_s} s · terminal {size[0]}×{size[1]} · headless, frames serialised"
    )
    try:
        async with app.run_test(size=size) as pilot:
            frames = Frames(app)
            await until(lambda: app.core.t is not None)
            app.action_set_speed(4)  # max
            await asyncio.sleep(2.0)  # warm up: every screen once
            for key, mode in (
                ("f2", "floor"),
                ("f3", "ultraserver"),
                ("f4", "jobs"),
                ("f5", "energy"),
                ("f6", "sql"),
                ("f7", "services"),
                ("f1", "overview"),
            ):
                if mode not in app.MODES:
                    continue
                post_key(app, key)
                await until(
                    lambda mode=mode: (
                        (app.current_mode == mode and app.screen.load_count > 0)
                        or app.current_mode == mode == "sql"
                    )
                )

            # ---------------------------------------------------------- refresh rates on the Overview
            ui_tid = threading.get_native_id()
            sim_tid = app.thread_ids.get("simulation")
            writer_tid = next((t.native_id for t in threading.enumerate() if t.name == "twin-writer"), None)
            kpi = app.screen.query_one(KpiGrid)
            plot = app.screen.query_one("#plot-power", BraillePlot)
            n0 = (kpi.draw_count, plot.draw_count, frames.count, frames.render_s, app.core.t)
            c0 = (time.process_time(), thread_cpu_s(ui_tid), thread_cpu_s(sim_tid), thread_cpu_s(writer_tid))
            w0 = time.perf_counter()
            await asyncio.sleep(seconds)
            wall = time.perf_counter() - w0
            c1 = (time.process_time(), thread_cpu_s(ui_tid), thread_cpu_s(sim_tid), thread_cpu_s(writer_tid))
            n1 = (kpi.draw_count, plot.draw_count, frames.count, frames.render_s, app.core.t)
            sim_days = (n1[4] - n0[4]) / 86400
            print(
                f"\nOverview at max speed for {wall:.1f} s: {sim_days / wall:.2f} simulated days per second"
            )
            print(f"  KPI tiles refreshed   {(n1[0] - n0[0]) / wall:5.1f} /s")
            print(f"  plots refreshed       {(n1[1] - n0[1]) / wall:5.1f} /s")
            print(
                f"  frames written        {(n1[2] - n0[2]) / wall:5.1f} /s "
                f"({1000 * (n1[3] - n0[3]) / max(1, n1[2] - n0[2]):.1f} ms to serialise one)"
            )
            print(
                f"  CPU: process {100 * (c1[0] - c0[0]) / wall:5.1f} %  UI thread {100 * (c1[1] - c0[1]) / wall:5.1f} %"
                f"  simulation {100 * (c1[2] - c0[2]) / wall:5.1f} %  writer {100 * (c1[3] - c0[3]) / wall:5.1f} %"
                "  (100 % = one core)"
            )

            # ---------------------------------------------------------- Jobs table at 1 Hz
            await frames.latency("f4", lambda: isinstance(app.screen, JobsScreen))
            table = app.screen.query_one("#jobs", ArrowTable)
            s0, w0 = table.set_count, time.perf_counter()
            await asyncio.sleep(seconds / 2)
            print(
                f"  Jobs table refreshed  {(table.set_count - s0) / (time.perf_counter() - w0):5.1f} /s "
                f"({table.row_count:,} rows, SQL on the live file)"
            )

            # ---------------------------------------------------------- key -> screen latency
            lat: dict[str, list[float]] = {}

            async def measure(name: str, key: str, cond: Callable[[], bool]) -> None:
                lat.setdefault(name, []).append(await frames.latency(key, cond))
                await asyncio.sleep(0.15)

            def on(cls: type, ready: Callable[[Any], bool]) -> Callable[[], bool]:
                return lambda: isinstance(app.screen, cls) and ready(app.screen)

            def fm_ready(s: Any) -> bool:
                return not s.at_campus and s.query_one(FloorMap).data != {}

            for _ in range(rounds):
                if halls > 1:  # the campus level, then a hall's map
                    await measure(
                        "F2 Floor",
                        "f2",
                        on(FloorScreen, lambda s: s.at_campus and s.query_one(HallMap).data != {}),
                    )
                    h = app.screen.sel_hall
                    await measure(
                        "↓ on campus",
                        "down",
                        lambda h=h: app.screen.query_one(HallMap).selected == min(h + 1, halls - 1),
                    )
                    await measure("⏎ open hall", "enter", on(FloorScreen, fm_ready))
                else:
                    await measure("F2 Floor", "f2", on(FloorScreen, fm_ready))
                fm = app.screen.query_one(FloorMap)
                us = app.core.sel_us
                nxt = fm.row_neighbours(us, 1, 0)
                await measure(
                    "→ on Floor", "right", lambda nxt=nxt: app.screen.query_one(FloorMap).selected == nxt
                )
                below = fm.row_neighbours(nxt, 0, 1)
                await measure(
                    "↓ on Floor", "down", lambda b=below: app.screen.query_one(FloorMap).selected == b
                )
                m = app.core.metric
                await measure("m (metric)", "m", lambda m=m: app.screen.query_one(FloorMap).metric.key != m)
                await measure(
                    "⏎ drill in", "enter", on(UltraServerScreen, lambda s: s.query_one(ChipGrid).data != {})
                )
                await measure(
                    "→ chip", "right", lambda: app.screen.query_one(ChipGrid).selected == app.core.sel_chip
                )
                await measure("esc back", "escape", on(FloorScreen, lambda s: True))
                if halls > 1:
                    await measure("esc campus", "escape", on(FloorScreen, lambda s: s.at_campus))
                await measure(
                    "F4 Jobs", "f4", on(JobsScreen, lambda s: s.query_one("#jobs", ArrowTable).row_count > 0)
                )
                await measure("F5 Energy", "f5", lambda: app.current_mode == "energy")
                if "services" in app.MODES:
                    await measure("F7 Services", "f7", lambda: app.current_mode == "services")
                await measure("F6 SQL", "f6", lambda: app.current_mode == "sql")
                await measure("F1 Overview", "f1", lambda: app.current_mode == "overview")
                await measure(
                    "space pause", "space", lambda: "PAUSED" in app.screen.query_one(StatusBar).plain
                )
                await measure("5 max", "5", lambda: "PAUSED" not in app.screen.query_one(StatusBar).plain)
                app.core.select_us(0)
            print(f"\nkey → screen latency at max speed, {rounds} rounds (median / max, ms):")
            for name, xs in lat.items():
                print(f"  {name:<14} {1000 * statistics.median(xs):6.1f} / {1000 * max(xs):6.1f}")
            allx = [x for xs in lat.values() for x in xs]
            print(
                f"  {'all':<14} {1000 * statistics.median(allx):6.1f} / {1000 * max(allx):6.1f}"
                f"   ({sum(x < 0.1 for x in allx)}/{len(allx)} under 100 ms)"
            )
            app.action_set_speed(0)
            await pilot.pause(0.1)
    finally:
        session.close("stopped")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="200x60", help="terminal size WxH (default 200x60)")
    ap.add_argument("--seconds", type=float, default=8.0, help="measuring window for rates")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of key measurements")
    ap.add_argument("--scenario", default="reference", help="built-in name or TOML path (default reference)")
    ap.add_argument(
        "--hours",
        type=float,
        default=3650 * 24,
        help="the live session's length (default ten years; a campus: e.g. 48)",
    )
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.lower().split("x"))
    asyncio.run(bench((w, h), a.seconds, a.rounds, a.scenario, a.hours))


if __name__ == "__main__":
    main()
