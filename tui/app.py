"""The AI Factory Twin console: six screens (Textual modes) over a live session or a recording.

A thin Textual adapter over the headless core in ``tui.console``: the simulation loop
(``SimLoop``), the panel loader (``PanelLoader``) and the user SQL runner (``SqlRunner``) run in
thread workers started here and report through messages — ``SimTick`` (stale ticks merge,
``can_replace``) and ``PanelData``; ``SqlRunner`` answers the SQL screen directly. Screens get the
core (``Console``) when they are built and ask the app for what changes the UI by posting messages
(``tui.screens.messages``). Live, screens pull the in-memory panels on their own 4 Hz timers.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, get_current_worker

from tui.console import fmt
from tui.console.core import Console
from tui.console.feed import HOUR_S, WINDOWS_S
from tui.console.pacing import PAUSE, SPEEDS
from tui.console.panels import Results
from tui.console.scale import METRIC_KEYS
from tui.console.whatif import WHAT_IFS, build, summary
from tui.screens.alarms import AlarmsScreen
from tui.screens.base import TwinScreen
from tui.screens.energy import EnergyScreen
from tui.screens.floor import FloorScreen
from tui.screens.grid import GridScreen
from tui.screens.help import HelpScreen
from tui.screens.jobs import JobsScreen
from tui.screens.messages import ExportTable, OpenJob, OpenSql
from tui.screens.overview import OverviewScreen
from tui.screens.prompt import PromptScreen
from tui.screens.services import ServicesScreen
from tui.screens.sql import SqlScreen
from tui.screens.timeline import TimelineScreen
from tui.screens.ultraserver import UltraServerScreen
from tui.screens.whatif import Injection, WhatIfScreen
from tui.widgets.status import SCREENS

PLAY_PERIOD_S = 0.1
GC_YOUNG_S = 0.25  # young-generation garbage collection period
GC_FULL_S = 300.0  # full collection period while running (sooner when paused)
STOP_WAIT_S = 30.0  # how long quitting waits for the threads to end


class SimTick(Message):
    """The simulation advanced to ``t`` (``steps`` steps since the start); a newer tick supersedes
    an unprocessed one."""

    def __init__(self, t: int, steps: int = 0) -> None:
        super().__init__()
        self.t = t
        self.steps = steps

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SimTick)


class PanelData(Message):
    def __init__(self, requester: Any, seq: int, results: Results) -> None:
        super().__init__()
        self.requester = requester
        self.seq = seq
        self.results = results


LIVE_ONLY = {"toggle_pause", "whatif"}
REPLAY_ONLY = {"scrub", "jump", "toggle_play", "goto", "step"}

KEYS: list[BindingType] = [
    # Priority: the screen keys work in the SQL editor too (its own f6 / f7 would select).
    *[
        Binding(k, f"switch_mode('{m}')", label, show=False, priority=True, tooltip=f"{label} screen")
        for k, m, label in SCREENS
    ],
    Binding("space", "toggle_pause", "Pause", key_display="␣", tooltip="Pause / resume"),
    Binding("space", "toggle_play", "Play", key_display="␣", tooltip="Play / pause"),
    Binding("1", "set_speed(0)", "Speed", key_display="1-5", tooltip="Speed: pause"),
    Binding("2", "set_speed(1)", "1×", show=False, tooltip="Speed: 1× (one simulated second per second)"),
    Binding("3", "set_speed(2)", "60×", show=False, tooltip="Speed: 60× (one simulated minute per second)"),
    Binding("4", "set_speed(3)", "3600×", show=False, tooltip="Speed: 3600× (one simulated hour per second)"),
    Binding("5", "set_speed(4)", "max", show=False, tooltip="Speed: max (as fast as possible)"),
    Binding("plus,equals_sign", "speed(1)", "Faster", show=False, tooltip="Next faster speed"),
    Binding("minus", "speed(-1)", "Slower", show=False, tooltip="Next slower speed (down to pause)"),
    Binding("i", "whatif", "What-if", tooltip="What-if menu: fail, drain, cooling, power cap, surge"),
    Binding("w", "window", "Window", tooltip="Plot window: 1 h, 6 h, 24 h, 7 d"),
    Binding("left", "scrub(-3600)", "±1h", key_display="←→", tooltip="Back one simulated hour"),
    Binding("right", "scrub(3600)", "+1 h", show=False, tooltip="Forward one simulated hour"),
    Binding("left_square_bracket", "scrub(-3600)", "-1 h", show=False, tooltip="Back one hour (any screen)"),
    Binding(
        "right_square_bracket", "scrub(3600)", "+1 h", show=False, tooltip="Forward one hour (any screen)"
    ),
    Binding("shift+left,left_curly_bracket", "scrub(-86400)", "-1 d", show=False, tooltip="Back one day"),
    Binding("shift+right,right_curly_bracket", "scrub(86400)", "+1 d", show=False, tooltip="Forward one day"),
    Binding("comma", "step(-1)", "-step", show=False, tooltip="Back one step"),
    Binding("full_stop", "step(1)", "+step", show=False, tooltip="Forward one step"),
    Binding("home", "jump(0)", "Start", show=False, tooltip="Jump to the start of the run"),
    Binding("end", "jump(1)", "End", show=False, tooltip="Jump to the end of the run"),
    Binding("t", "goto", "Jump", tooltip="Jump to a time (d3 14:00, 38.5 h)"),
    Binding("question_mark", "help", "Help", key_display="?", tooltip="This help"),
    Binding("q", "quit", "Quit", tooltip="Quit (a live session stays in its file)"),
    Binding(
        "ctrl+c",
        "quit",
        "Quit",
        show=False,
        priority=True,
        tooltip="Quit (a live session stays in its file)",
    ),
]


def _in_worker(run: Callable[[Callable[[], bool]], None]) -> Callable[[], None]:
    """A thread worker's job running ``run(cancelled)``: ``cancelled()`` is the worker's flag."""

    def job() -> None:
        worker = get_current_worker()
        run(lambda: worker.is_cancelled)

    return job


class TwinApp(App[None]):
    TITLE = "AI Factory Twin"
    CSS_PATH = "twin.tcss"
    MODES: ClassVar[dict[str, Any]] = {
        "overview": OverviewScreen,
        "floor": FloorScreen,
        "ultraserver": UltraServerScreen,
        "jobs": JobsScreen,
        "energy": EnergyScreen,
        "sql": SqlScreen,
        "services": ServicesScreen,
        "alarms": AlarmsScreen,
        "grid": GridScreen,
    }
    DEFAULT_MODE = "overview"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (150, "-wide")]  # noqa: RUF012 (typed on App)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = KEYS

    def __init__(
        self,
        session: Any = None,
        replay_con: Any = None,
        replay_run_id: str | None = None,
        replay_path: str | None = None,
        config_dir: str | Path | None = None,
    ) -> None:
        super().__init__()
        if (session is None) == (replay_con is None):
            raise ValueError("TwinApp needs either a live session or a replay connection")
        self.core = Console(
            on_tick=lambda t, steps: self.post_message(SimTick(t, steps)),
            on_panels=lambda requester, seq, results: self.post_message(PanelData(requester, seq, results)),
            start_sql=lambda job: self.run_worker(
                job, name="sql", group="sql", thread=True, exit_on_error=False
            ),
            session=session,
            replay_con=replay_con,
            replay_run_id=replay_run_id,
            replay_path=replay_path,
            config_dir=config_dir,
        )
        # The mode screens are built with the core (MODES keeps their classes: the help reads them).
        self._modes.update({mode: functools.partial(cls, self.core) for mode, cls in self.MODES.items()})
        sim = self.core.sim
        self.quitting = sim.stopping if sim else threading.Event()  # the simulation stops after its step
        self.sim_idle = sim.idle if sim else threading.Event()  # live: between slices (paused or waiting)
        self._sim_done = sim.done if sim else threading.Event()
        self._loader_done = self.core.panels.done
        self._bg_workers: list[Worker[None]] = []
        self.exports_done = 0  # result exports finished (or failed)
        self.terminated = False  # a live session ended by SIGTERM

    @property
    def thread_ids(self) -> dict[str, int]:
        """Native ids of the worker threads (the bench's CPU figures)."""
        ids = {"simulation": self.core.sim.thread_id if self.core.sim else None}
        ids["panels"] = self.core.panels.thread_id
        return {k: v for k, v in ids.items() if v is not None}

    @property
    def sql_executing(self) -> int | None:
        """Request id of the user query handed to DuckDB."""
        return self.core.sql.executing

    def panels_pending(self) -> bool:
        """Whether a panel request has not been answered yet (tests and the bench wait on it)."""
        return self.core.panels.pending()

    # ------------------------------------------------------------------ lifecycle
    def on_mount(self) -> None:
        # A full (generation 2) collection walks every object — Textual's line caches make that
        # long, and automatic ones came every few seconds at max speed, freezing keys. Young
        # generations are collected on a timer instead, the full one rarely and when paused.
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        gc.freeze()
        self._gc_full_at = self._paused_at = time.monotonic()
        self.set_interval(GC_YOUNG_S, self._collect)
        cur = self.core.new_cursor()
        loader = _in_worker(lambda cancelled: self.core.panels.run(cur, cancelled))
        self._bg_workers.append(
            self.run_worker(loader, name="panels", group="panels", thread=True, exit_on_error=False)
        )
        if self.core.sim is not None:
            sim = _in_worker(self.core.sim.run)
            self._bg_workers.append(
                self.run_worker(sim, name="simulation", group="sim", thread=True, exit_on_error=True)
            )
            try:  # SIGTERM ends a live session like quitting: the run is recorded 'stopped'
                asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._terminate)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        else:
            self._sim_done.set()
            self.set_interval(PLAY_PERIOD_S, self._play)

    def _terminate(self) -> None:
        self.terminated = True
        self.exit()

    def _collect(self) -> None:
        now = time.monotonic()
        if not self.core.speed.paused:
            self._paused_at = now
        # Full: once after three quiet seconds of pause, or every GC_FULL_S while running.
        quiet = now - self._paused_at > 3.0 and self._gc_full_at < self._paused_at
        full = quiet or now - self._gc_full_at > GC_FULL_S
        gc.collect(2 if full else 1)
        if full:
            self._gc_full_at = now

    async def on_unmount(self) -> None:
        """Stop the threads before the caller closes the session or the file."""
        self.core.sql.cancel()
        for w in self._bg_workers:
            w.cancel()
        self.core.panels.stop()  # interrupts the panel query running
        deadline = time.monotonic() + STOP_WAIT_S
        while not (self._sim_done.is_set() and self._loader_done.is_set()) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        gc.unfreeze()
        if self._gc_was_enabled:
            gc.enable()

    def on_sim_tick(self, message: SimTick) -> None:
        self.core.tick(message.t, message.steps)

    # ------------------------------------------------------------------ panels
    def on_panel_data(self, msg: PanelData) -> None:
        screen = msg.requester
        if not self.core.panels.accept(screen, msg.seq):
            return  # older than what the screen already shows
        if not screen.is_attached:
            return
        for panel, cols in msg.results.items():
            if isinstance(cols, Exception):
                screen.show_error(panel, cols)
            else:
                screen.show_panel(panel, cols)
                screen.load_count += 1

    def refresh_views(self, force: bool = True, panels: bool = True) -> None:
        if isinstance(self.screen, TwinScreen):
            self.screen.refresh_view(force=force, panels=panels)

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in LIVE_ONLY and self.core.live is None:
            return False
        if action in REPLAY_ONLY and self.core.replay is None:
            return False
        if action == "window":
            return bool(getattr(self.screen, "HAS_WINDOW", False))
        return True

    async def action_quit(self) -> None:
        self.core.mark_control()
        self.quitting.set()
        self.exit()

    def _speed_changed(self) -> None:
        if self.core.speed_changed():  # a replay at its end plays again from the start
            self.refresh_views(force=False)
        # The status line at once (PAUSED, the speed); the plots follow on the next tick.
        self.refresh_views(force=False, panels=self.core.replay is not None)

    def action_toggle_pause(self) -> None:
        self.core.mark_control()
        self.core.speed.toggle()
        self._speed_changed()

    def action_toggle_play(self) -> None:
        self.action_toggle_pause()

    def action_set_speed(self, level: int) -> None:
        self.core.mark_control()
        self.core.speed.set(level)
        self._speed_changed()

    def action_speed(self, delta: int) -> None:
        self.core.mark_control()
        self.core.speed.step(delta)
        self._speed_changed()

    def action_window(self) -> None:
        core = self.core
        i = WINDOWS_S.index(core.window_s) if core.window_s in WINDOWS_S else 0
        core.window_s = WINDOWS_S[(i + 1) % len(WINDOWS_S)]
        self.notify(f"plot window: last {fmt.window(core.window_s)}", timeout=2)
        self.refresh_views()

    def action_metric(self) -> None:
        self.core.metric = METRIC_KEYS[(METRIC_KEYS.index(self.core.metric) + 1) % len(METRIC_KEYS)]
        redraw = getattr(self.screen, "redraw_selection", None)
        if redraw is not None:
            redraw()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # ------------------------------------------------------------------ what screens ask for
    def on_open_sql(self, msg: OpenSql) -> None:
        self.open_sql(msg.sql, msg.run, msg.source)

    def open_sql(self, sql: str, run: bool = True, source: str = "") -> None:
        """Open ``sql`` in the SQL editor (and run it)."""
        self.core.pending_sql = (sql, run, source)
        if self.current_mode == "sql" and isinstance(self.screen, SqlScreen):
            self.screen._take_pending()
        else:
            self.switch_mode("sql")

    def on_open_job(self, msg: OpenJob) -> None:
        self.push_screen(TimelineScreen(self.core, msg.job))

    def on_export_table(self, msg: ExportTable) -> None:
        self.export_table(msg.table, msg.path)

    def _export_done(self) -> None:
        self.exports_done += 1

    def export_table(self, table: pa.Table, path: Path) -> None:
        def job() -> None:
            try:
                if path.suffix.lower() in (".parquet", ".pq"):
                    import pyarrow.parquet as pq

                    pq.write_table(table, path)
                else:
                    import pyarrow.csv as pacsv

                    pacsv.write_csv(table, path)
                self.call_from_thread(self.notify, f"exported {table.num_rows:,} rows to {path}", timeout=5)
            except Exception as e:
                self.call_from_thread(self.notify, f"export failed: {e}", severity="error")
            self.call_from_thread(self._export_done)

        self.run_worker(job, name="export", group="export", thread=True, exit_on_error=False)

    # ------------------------------------------------------------------ what-ifs
    def action_whatif(self) -> None:
        """The what-if menu. The clock holds while it is open, so the what-if is applied at the
        step after the one shown when it was chosen; the speed comes back when the menu closes."""
        resume = None if self.core.speed.paused else self.core.speed.level
        if resume is not None:
            self.action_set_speed(PAUSE)

        def done(inj: Injection | None) -> None:
            if inj is not None:
                self.inject(*inj)
            if resume is not None and self.core.speed.paused:
                self.action_set_speed(resume)

        self.push_screen(WhatIfScreen(self.core.whatif_context()), done)

    def inject(self, kind: str, target: str, value: float, duration_s: int, text: str = "") -> None:
        """Queue a what-if for the next step (recorded as an operator event)."""
        assert self.core.live is not None
        self.core.mark_control()
        self.core.live.request_inject(kind, target, value, duration_s)
        self.notify(f"what-if at the next step: {text or kind}", timeout=4)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for key, mode, label in SCREENS:
            yield SystemCommand(
                f"Screen: {label}",
                f"Switch to the {label} screen ({key.upper()})",
                lambda m=mode: self.switch_mode(m),
            )
        for level, (label, _) in enumerate(SPEEDS):
            yield SystemCommand(
                f"Speed: {label}",
                f"Set the speed to {label} (key {level + 1})",
                lambda lv=level: self.action_set_speed(lv),
            )
        if self.core.live is not None:
            ctx = self.core.whatif_context()
            for w in WHAT_IFS:
                yield SystemCommand(
                    f"What-if: {summary(w, ctx)}",
                    "Inject at the next step (recorded)",
                    lambda w=w: self.inject(*build(w, ctx), summary(w, ctx)),
                )

    # ------------------------------------------------------------------ replay
    def _show_time(self, t: float) -> None:
        if self.core.show_time(t):
            self.refresh_views(force=False)

    def action_scrub(self, delta_s: int) -> None:
        self._show_time((self.core.t or 0) + delta_s)

    def action_step(self, n: int) -> None:
        self._show_time(self.core.step_time(n))

    def action_jump(self, end: int) -> None:
        replay = self.core.replay
        assert replay is not None
        self._show_time(replay.t_last if end else replay.t_first)

    def action_goto(self) -> None:
        def done(text: str | None) -> None:
            if text:
                t = fmt.parse_time(text)
                if t is None:
                    self.notify(f"not a time: {text!r} (try d3 14:00, 14:00, 38.5 or 2d)", severity="error")
                else:
                    self._show_time(t)

        self.push_screen(
            PromptScreen(
                "Jump to",
                "Time: d3 14:00 · 14:00 (day 1) · 38.5 (hours) · 2d",
                fmt.short_clock(self.core.t or 0),
            ),
            done,
        )

    def _play(self) -> None:
        changed, ended = self.core.play()
        if changed:
            self.refresh_views(force=False)
        if ended:
            self.refresh_views(force=False)


__all__ = ["HOUR_S", "SimTick", "TwinApp"]
