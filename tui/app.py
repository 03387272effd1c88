"""The AI Factory Twin console: six screens (Textual modes) over a live session or a recording.

Live: a thread worker advances the session at the selected speed and posts ``SimTick`` (stale
ticks merge, ``can_replace``); screens pull the in-memory panels on their own 4 Hz timers. Panels
that run SQL (all of them in a replay; tables live) go to one loader thread with its own cursor,
which keeps only the newest request per screen. User SQL runs in its own thread worker and can be
interrupted. Screens, widgets and the what-if menu live in ``tui.screens`` / ``tui.widgets``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import math
import os
import signal
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, get_current_worker

from storage.errors import QueryError
from storage.queries import run_sql
from storage.sandbox import Limits, UserSql
from tui import fmt
from tui.alarms import Alarms
from tui.feed import DEFAULT_WINDOW_S, HOUR_S, WINDOWS_S, LiveFeed, Meta, PanelReq, ReplayFeed, params_for
from tui.pacing import DEFAULT_LEVEL, MAX, PAUSE, SPEEDS, Pacer, RateMeter, SpeedControl, rate_text
from tui.scale import METRIC_KEYS
from tui.screens.alarms import AlarmsScreen
from tui.screens.base import TwinScreen
from tui.screens.energy import EnergyScreen
from tui.screens.floor import FloorScreen
from tui.screens.help import HelpScreen
from tui.screens.jobs import JobsScreen
from tui.screens.overview import OverviewScreen
from tui.screens.prompt import PromptScreen
from tui.screens.services import ServicesScreen
from tui.screens.sql import SqlDone, SqlScreen
from tui.screens.timeline import TimelineScreen
from tui.screens.ultraserver import UltraServerScreen
from tui.screens.whatif import Injection, WhatIfScreen
from tui.whatif import WHAT_IFS, build, context_from, summary
from tui.widgets.status import SCREENS, Status

MIN_PERIOD_S = 0.05  # the worker posts at most ~20 ticks per wall second below "max"
COMMIT_S = 1.0  # live: steps held for the writer are committed at least this often
REPLAY_MAX = 4 * 86400  # "max" playback speed in replay [sim s per wall s]
PLAY_PERIOD_S = 0.1
MAX_RESULT_ROWS = 2_000_000  # user query results kept (virtual table)
GC_YOUNG_S = 0.25  # young-generation garbage collection period
GC_FULL_S = 300.0  # full collection period while running (sooner when paused)


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
    def __init__(self, requester: Any, seq: int, results: dict[str, Any]) -> None:
        super().__init__()
        self.requester = requester
        self.seq = seq
        self.results = results


def default_config_dir() -> Path:
    env = os.environ.get("TWIN_CONFIG_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "ai-factory-twin"


LIVE_ONLY = {"toggle_pause", "whatif"}
REPLAY_ONLY = {"scrub", "jump", "toggle_play", "goto", "step"}


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
    }
    DEFAULT_MODE = "overview"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (150, "-wide")]  # noqa: RUF012 (typed on App)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: the screen keys work in the SQL editor too (its own f6 / f7 would select).
        *[
            Binding(k, f"switch_mode('{m}')", label, show=False, priority=True, tooltip=f"{label} screen")
            for k, m, label in SCREENS
        ],
        Binding("space", "toggle_pause", "Pause", key_display="␣", tooltip="Pause / resume"),
        Binding("space", "toggle_play", "Play", key_display="␣", tooltip="Play / pause"),
        Binding("1", "set_speed(0)", "Speed", key_display="1-5", tooltip="Speed: pause"),
        Binding("2", "set_speed(1)", "1×", show=False, tooltip="Speed: 1× (one simulated second per second)"),
        Binding(
            "3", "set_speed(2)", "60×", show=False, tooltip="Speed: 60× (one simulated minute per second)"
        ),
        Binding(
            "4", "set_speed(3)", "3600×", show=False, tooltip="Speed: 3600× (one simulated hour per second)"
        ),
        Binding("5", "set_speed(4)", "max", show=False, tooltip="Speed: max (as fast as possible)"),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False, tooltip="Next faster speed"),
        Binding("minus", "speed(-1)", "Slower", show=False, tooltip="Next slower speed (down to pause)"),
        Binding("i", "whatif", "What-if", tooltip="What-if menu: fail, drain, cooling, power cap, surge"),
        Binding("w", "window", "Window", tooltip="Plot window: 1 h, 6 h, 24 h, 7 d"),
        Binding("left", "scrub(-3600)", "±1h", key_display="←→", tooltip="Back one simulated hour"),
        Binding("right", "scrub(3600)", "+1 h", show=False, tooltip="Forward one simulated hour"),
        Binding(
            "left_square_bracket", "scrub(-3600)", "-1 h", show=False, tooltip="Back one hour (any screen)"
        ),
        Binding(
            "right_square_bracket", "scrub(3600)", "+1 h", show=False, tooltip="Forward one hour (any screen)"
        ),
        Binding("shift+left,left_curly_bracket", "scrub(-86400)", "-1 d", show=False, tooltip="Back one day"),
        Binding(
            "shift+right,right_curly_bracket", "scrub(86400)", "+1 d", show=False, tooltip="Forward one day"
        ),
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
        self.session = session
        self.live: LiveFeed | None = None
        self.replay: ReplayFeed | None = None
        if session is not None:
            self.live = LiveFeed(session)
            self.meta: Meta = self.live.meta
            self.speed = SpeedControl(DEFAULT_LEVEL)
            self.pacer = Pacer(self.speed, self.meta.dt_s, session.chunk_steps)
            self.t: int | None = None
        else:
            assert replay_run_id is not None
            self.replay = ReplayFeed(replay_con, replay_run_id, replay_path or "")
            self.meta = self.replay.meta
            self.speed = SpeedControl(PAUSE)
            self.t = self.replay.t_first if self.replay.n else None
        # User SQL: the live database's sandboxed user cursor, or one on the replay's connection.
        self.user_sql: UserSql = (
            session.writer.user_sql
            if session is not None
            else UserSql(replay_con.cursor(), Limits(), strict=False)
        )
        self.config_dir = Path(config_dir) if config_dir else default_config_dir()
        self.seq = 0  # bumped whenever the time shown changes
        self.alarms = Alarms()  # the active alarms (status line count, Alarms screen)
        self._alarms_asked = (-1, 0.0)
        self.rate = RateMeter()
        self.sel_us = 0
        self.sel_chip = 0
        self.metric = METRIC_KEYS[0]
        self.window_s = DEFAULT_WINDOW_S
        self.events_notable = True
        self.events_search = ""  # text the event log is filtered by
        self.thread_ids: dict[str, int] = {}  # native ids of the worker threads (the bench's CPU figures)
        self._sim_done = threading.Event()
        self.sim_idle = threading.Event()  # live: the worker is between slices (paused or waiting)
        self.quitting = threading.Event()  # the simulation stops after the step in progress
        self.sim_t_at_control: int | None = None  # live: the simulation's time when a control key acted
        self.steps_shown = 0  # live: steps simulated up to the time shown
        self._loader_done = threading.Event()
        self._requests: dict[int, tuple[Any, int, list[PanelReq]]] = {}
        self._req_seq = 0
        self._asked: dict[int, int] = {}
        self._answered: dict[int, int] = {}
        self.t_file: int | None = None  # live: the last step committed to the file
        self._req_lock = threading.Lock()
        self._req_event = threading.Event()
        self._bg_workers: list[Worker[None]] = []
        self._cursors: list[Any] = []
        self._sql_rid = 0  # request id of the latest user query
        self._sql_lock = threading.Lock()
        self._sql_cancelled: set[int] = set()
        self._sql_live: set[int] = set()  # request ids whose worker has not ended
        self.sql_executing: int | None = None  # request id of the user query handed to DuckDB
        self.exports_done = 0  # result exports finished (or failed)
        self._pending_sql: tuple[str, bool, str] | None = None
        self.terminated = False  # a live session ended by SIGTERM
        self._play_t = float(self.t or 0)
        self._play_wall = time.monotonic()

    # ------------------------------------------------------------------ lifecycle
    def on_mount(self) -> None:
        # A full (generation 2) collection walks every object — Textual's line caches make that
        # 100-200 ms, and automatic ones came every few seconds at max speed, freezing keys. Young
        # generations are collected on a timer instead, the full one rarely and when paused.
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        gc.freeze()
        self._gc_full_at = self._paused_at = time.monotonic()
        self.set_interval(GC_YOUNG_S, self._collect)
        cur = self.new_cursor()
        self._cursors.append(cur)
        self._bg_workers.append(
            self.run_worker(
                lambda: self._loader(cur), name="panels", group="panels", thread=True, exit_on_error=False
            )
        )
        if self.live is not None:
            self._bg_workers.append(
                self.run_worker(
                    self._sim_loop, name="simulation", group="sim", thread=True, exit_on_error=True
                )
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
        if not self.speed.paused:
            self._paused_at = now
        # Full: once after three quiet seconds of pause, or every GC_FULL_S while running.
        quiet = now - self._paused_at > 3.0 and self._gc_full_at < self._paused_at
        full = quiet or now - self._gc_full_at > GC_FULL_S
        gc.collect(2 if full else 1)
        if full:
            self._gc_full_at = now

    async def on_unmount(self) -> None:
        """Stop the threads before the caller closes the session or the file."""
        self.cancel_user_sql()
        for w in self._bg_workers:
            w.cancel()
        for cur in self._cursors:
            try:
                cur.interrupt()
            except Exception:
                pass
        deadline = time.monotonic() + 30.0
        while not (self._sim_done.is_set() and self._loader_done.is_set()) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        gc.unfreeze()
        if self._gc_was_enabled:
            gc.enable()

    def new_cursor(self) -> Any:
        """A cursor for another thread: the replay's read-only connection, or the live file through
        the writer's database."""
        return self.session.writer.cursor() if self.session is not None else self.replay.con.cursor()  # type: ignore[union-attr]

    def _sim_loop(self) -> None:
        """Thread worker: advance the session in slices at the selected speed, post ticks.

        A slice is a few steps (about ``SLICE_S`` of work, ``Pacer``); between two steps the
        worker looks at the controls, so pause, a speed change, a what-if or quit take effect
        after the step in progress. The steps are held for the writer and committed in large
        batches (every chunk of steps and at least every ``COMMIT_S``, paused too)."""
        worker = get_current_worker()
        live = self.live
        assert live is not None
        self.thread_ids["simulation"] = threading.get_native_id()
        committed = time.monotonic()
        try:
            while not (worker.is_cancelled or self.quitting.is_set()):
                t0 = time.monotonic()
                k = min(self.pacer.due(t0), live.remaining)
                if k == 0:
                    # Paused too, but not at once: the key's screen update goes first.
                    if self.session.held_steps and (live.remaining == 0 or t0 - committed >= COMMIT_S):
                        live.commit()
                        committed = t0
                    done = live.remaining == 0
                    self.sim_idle.set()
                    time.sleep(MIN_PERIOD_S if done else min(MIN_PERIOD_S, self.pacer.wait_s()))
                    continue
                self.sim_idle.clear()
                level = self.speed.level

                def stop(level: int = level) -> bool:
                    return (
                        worker.is_cancelled
                        or self.quitting.is_set()
                        or self.speed.level != level
                        or live.inject_pending()
                    )

                t = live.advance(k, stop)
                wall = time.monotonic() - t0
                if live.last_steps == k:
                    self.pacer.record(k, wall)
                else:
                    self.pacer.refund(k - live.last_steps)
                if time.monotonic() - committed >= COMMIT_S:
                    live.commit()
                    committed = time.monotonic()
                if worker.is_cancelled:
                    break
                self.post_message(SimTick(t, live.steps_done))
                if self.speed.level != MAX:
                    time.sleep(max(0.0, MIN_PERIOD_S - (time.monotonic() - t0)))
        finally:
            self.sim_idle.set()
            self._sim_done.set()

    def on_sim_tick(self, message: SimTick) -> None:
        self.t = message.t
        self.steps_shown = message.steps
        self.seq += 1
        self.rate.add(time.monotonic(), message.t)

    # ------------------------------------------------------------------ panels
    def params(self, **extra: Any) -> dict[str, Any]:
        return params_for(self.meta, self.t, window_s=self.window_s, **extra)

    def request_panels(self, requester: Any, reqs: list[PanelReq]) -> None:
        """Run these panels' SQL in the loader thread; a newer request from the same requester
        replaces one not yet started."""
        with self._req_lock:
            self._req_seq += 1
            self._requests[id(requester)] = (requester, self._req_seq, list(reqs))
            self._asked[id(requester)] = self._req_seq
        self._req_event.set()

    def panels_pending(self) -> bool:
        """Whether a panel request has not been answered yet (tests and the bench wait on it)."""
        return any(self._answered.get(k, 0) < v for k, v in self._asked.items())

    def _loader(self, cur: Any) -> None:
        worker = get_current_worker()
        self.thread_ids["panels"] = threading.get_native_id()
        polled = 0.0
        try:
            while not worker.is_cancelled:
                woke = self._req_event.wait(0.05)
                if self.live is not None and (woke or time.monotonic() - polled > 0.5):
                    polled = time.monotonic()
                    self.t_file = self._committed_t(cur)  # also between requests: for ``s``
                if not woke:
                    continue
                with self._req_lock:
                    self._req_event.clear()
                    pending, self._requests = list(self._requests.values()), {}
                for requester, seq, items in pending:
                    results: dict[str, Any] = {}
                    for r in items:
                        if worker.is_cancelled:
                            return
                        try:
                            results[r.panel] = run_sql(cur, self.file_req(r).sql)
                        except Exception as e:  # shown on the panel's screen
                            results[r.panel] = e
                    self.post_message(PanelData(requester, seq, results))
        finally:
            try:
                cur.close()
            except Exception:
                pass
            self._loader_done.set()

    def _committed_t(self, cur: Any) -> int | None:
        """Live: time of the last step in the file (the writer commits behind the simulation)."""
        rows = cur.execute("SELECT sim_time_s FROM runs WHERE run_id = ?", [self.meta.run_id]).fetchall()
        return int(rows[0][0]) - self.meta.dt_s if rows and rows[0][0] else None

    def file_req(self, r: PanelReq) -> PanelReq:
        """The request as it can run on the file: live, not past the last committed step."""
        t = r.params.get("t")
        if self.live is None or self.t_file is None or t is None or t <= self.t_file:
            return r
        return dataclasses.replace(r, params={**r.params, "t": self.t_file})

    def on_panel_data(self, msg: PanelData) -> None:
        screen = msg.requester
        if msg.seq <= self._answered.get(id(screen), 0):
            return  # older than what the screen already shows
        self._answered[id(screen)] = msg.seq
        if not screen.is_attached:
            return
        for panel, cols in msg.results.items():
            if isinstance(cols, Exception):
                screen.show_error(panel, cols)
            else:
                screen.show_panel(panel, cols)
                screen.load_count += 1

    def poll_alarms(self) -> None:
        """Ask for the alarms at the time shown: when it changes in a replay, every second live."""
        if self.t is None:
            return
        seq, at = self._alarms_asked
        now = time.monotonic()
        if seq == self.seq or (self.live is not None and now - at < 1.0):
            return
        self._alarms_asked = (self.seq, now)
        self.request_panels(self.alarms, [PanelReq("alarms", "alarms", self.params())])

    def refresh_views(self, force: bool = True, panels: bool = True) -> None:
        if isinstance(self.screen, TwinScreen):
            self.screen.refresh_view(force=force, panels=panels)

    # ------------------------------------------------------------------ status
    def status(self) -> Status:
        position = ""
        if self.replay is not None and self.t is not None:
            span = self.replay.t_last - self.replay.t_first
            position = f"{100 * (self.t - self.replay.t_first) / span:.0f} %" if span > 0 else "100 %"
        return Status(
            "REPLAY" if self.replay else "LIVE",
            self.t,
            self._speed_text(),
            self.speed.paused,
            self.speed.resume_label,
            self.meta.scenario,
            self.meta.path,
            position,
            len(self.alarms.active),
            self.alarms.unacked,
        )

    def _speed_text(self) -> str:
        label, factor = SPEEDS[self.speed.level]
        if self.live is not None and self.live.remaining == 0:
            return "end of the session's duration"
        if self.replay is not None:
            return f"max {rate_text(REPLAY_MAX)}" if math.isinf(factor) else f"▶ {label}"
        if factor == 1.0:
            return f"1× · next step in {math.ceil(self.pacer.wait_s())} s"
        measured = self.rate.rate()
        if math.isinf(factor):
            return f"max ≈ {rate_text(measured)}" if measured else "max"
        if measured is not None and factor >= 3600 and measured < 0.8 * factor:
            return f"{label} (behind: {rate_text(measured)})"
        return label

    def tab_extra(self) -> dict[str, str]:
        return {"ultraserver": str(self.sel_us)}

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in LIVE_ONLY and self.live is None:
            return False
        if action in REPLAY_ONLY and self.replay is None:
            return False
        if action == "window":
            return bool(getattr(self.screen, "HAS_WINDOW", False))
        return True

    async def action_quit(self) -> None:
        self._mark_control()
        self.quitting.set()
        self.exit()

    def _mark_control(self) -> None:
        if self.session is not None:
            self.sim_t_at_control = int(self.session.sim.t_s)

    def _speed_changed(self) -> None:
        self.rate.reset()
        self._play_wall = time.monotonic()
        if (
            self.replay is not None
            and not self.speed.paused
            and self.t is not None
            and self.t >= self.replay.t_last
        ):
            self._show_time(self.replay.t_first)  # play again from the start
        # The status line at once (PAUSED, the speed); the plots follow on the next tick.
        self.refresh_views(force=False, panels=self.replay is not None)

    def action_toggle_pause(self) -> None:
        self._mark_control()
        self.speed.toggle()
        self._speed_changed()

    def action_toggle_play(self) -> None:
        self.action_toggle_pause()

    def action_set_speed(self, level: int) -> None:
        self._mark_control()
        self.speed.set(level)
        self._speed_changed()

    def action_speed(self, delta: int) -> None:
        self._mark_control()
        self.speed.step(delta)
        self._speed_changed()

    def action_window(self) -> None:
        i = WINDOWS_S.index(self.window_s) if self.window_s in WINDOWS_S else 0
        self.window_s = WINDOWS_S[(i + 1) % len(WINDOWS_S)]
        self.notify(f"plot window: last {fmt.window(self.window_s)}", timeout=2)
        self.refresh_views()

    def action_metric(self) -> None:
        self.metric = METRIC_KEYS[(METRIC_KEYS.index(self.metric) + 1) % len(METRIC_KEYS)]
        redraw = getattr(self.screen, "redraw_selection", None)
        if redraw is not None:
            redraw()

    def select_us(self, us: int) -> None:
        self.sel_us = max(0, min(self.meta.ultraservers - 1, int(us)))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # ------------------------------------------------------------------ SQL
    def open_sql(self, sql: str, run: bool = True, source: str = "") -> None:
        """Open ``sql`` in the SQL editor (and run it)."""
        self._pending_sql = (sql, run, source)
        if self.current_mode == "sql" and isinstance(self.screen, SqlScreen):
            self.screen._take_pending()
        else:
            self.switch_mode("sql")

    def take_pending_sql(self) -> tuple[str, bool, str] | None:
        pending, self._pending_sql = self._pending_sql, None
        return pending

    def open_job(self, job: int) -> None:
        self.push_screen(TimelineScreen(job))

    def run_user_sql(self, sql: str, requester: Any) -> int:
        """Run user SQL in a thread worker, in the sandbox (``storage.sandbox.UserSql``: statement
        check, own cursor, time and memory limits); ``requester`` gets ``SqlDone`` carrying the
        returned request id. A run still going is cancelled first (its answer is stale)."""
        self.cancel_user_sql()
        with self._sql_lock:
            self._sql_rid += 1
            rid = self._sql_rid
            self._sql_live.add(rid)
        self.run_worker(
            lambda: self._sql_job(rid, sql, requester),
            name="sql",
            group="sql",
            thread=True,
            exit_on_error=False,
        )
        return rid

    def _sql_job(self, rid: int, sql: str, requester: Any) -> None:
        worker = get_current_worker()
        msg: SqlDone
        try:
            with self._sql_lock:
                if rid in self._sql_cancelled:
                    raise QueryError("cancelled")
                self.sql_executing = rid

            def cancelled() -> bool:
                return worker.is_cancelled or rid in self._sql_cancelled

            res = self.user_sql.run(sql, max_rows=MAX_RESULT_ROWS, cancelled=cancelled)
            if cancelled():
                raise QueryError("cancelled")
            table = res.table
            info = f"{table.num_rows:,} rows in {res.wall_s:.2f} s"
            if res.truncated:
                info = f"first {MAX_RESULT_ROWS:,} rows kept (more not fetched) · {res.wall_s:.2f} s"
            if res.statements > 1:
                info += f" · the last of {res.statements} statements"
            msg = SqlDone(table, info, request=rid)
        except QueryError as e:
            msg = SqlDone(None, "", str(e), request=rid)
        except Exception as e:
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            msg = SqlDone(None, "", text, request=rid)
        finally:
            with self._sql_lock:
                if self.sql_executing == rid:
                    self.sql_executing = None
                self._sql_cancelled.discard(rid)
                self._sql_live.discard(rid)
        requester.post_message(msg)

    def cancel_user_sql(self) -> None:
        """Cancel the latest user query. The sandbox runs one query at a time and interrupts the
        one running; a query still waiting its turn is interrupted as soon as it runs (a short-lived
        thread repeats the interrupt until the query's worker ends)."""
        with self._sql_lock:
            rid = self._sql_rid
            if rid not in self._sql_live:
                return
            self._sql_cancelled.add(rid)
        self.user_sql.interrupt()

        def repeat() -> None:
            while True:
                with self._sql_lock:
                    if rid not in self._sql_live or self._sql_rid != rid:
                        return
                self.user_sql.interrupt()
                time.sleep(0.05)

        threading.Thread(target=repeat, name="sql-cancel", daemon=True).start()

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
    def whatif_context(self) -> Any:
        fac = row_it = math.nan
        if self.live is not None:
            with self.live.lock:
                fac = self.live.row.get("facility_power_w", math.nan)
                u = self.live.us_now
                if u:
                    row = self.meta.us_row[self.sel_us]
                    row_it = float(u["power_w"][u["row_id"] == row].sum())
        return context_from(self.meta, self.sel_us, self.sel_chip, fac, row_it)

    def action_whatif(self) -> None:
        """The what-if menu. The clock holds while it is open, so the what-if is applied at the
        step after the one shown when it was chosen; the speed comes back when the menu closes."""
        resume = None if self.speed.paused else self.speed.level
        if resume is not None:
            self.action_set_speed(PAUSE)

        def done(inj: Injection | None) -> None:
            if inj is not None:
                self.inject(*inj)
            if resume is not None and self.speed.paused:
                self.action_set_speed(resume)

        self.push_screen(WhatIfScreen(self.whatif_context()), done)

    def inject(self, kind: str, target: str, value: float, duration_s: int, text: str = "") -> None:
        """Queue a what-if for the next step (recorded as an operator event)."""
        assert self.live is not None
        self._mark_control()
        self.live.request_inject(kind, target, value, duration_s)
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
        if self.live is not None:
            ctx = self.whatif_context()
            for w in WHAT_IFS:
                yield SystemCommand(
                    f"What-if: {summary(w, ctx)}",
                    "Inject at the next step (recorded)",
                    lambda w=w: self.inject(*build(w, ctx), summary(w, ctx)),
                )

    # ------------------------------------------------------------------ replay
    def _show_time(self, t: float) -> None:
        assert self.replay is not None
        if not self.replay.n:
            return
        self.t = self.replay.time_at(max(self.replay.t_first, t))
        self._play_t = float(self.t)
        self.seq += 1
        self.refresh_views(force=False)

    def action_scrub(self, delta_s: int) -> None:
        self._show_time((self.t or 0) + delta_s)

    def action_step(self, n: int) -> None:
        assert self.replay is not None
        i = self.replay.index_at(self.t or 0) + n
        self._show_time(float(self.replay.times[max(0, min(self.replay.n - 1, i))]))

    def action_jump(self, end: int) -> None:
        assert self.replay is not None
        self._show_time(self.replay.t_last if end else self.replay.t_first)

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
                "Jump to", "Time: d3 14:00 · 14:00 (day 1) · 38.5 (hours) · 2d", fmt.short_clock(self.t or 0)
            ),
            done,
        )

    def _play(self) -> None:
        assert self.replay is not None
        now = time.monotonic()
        elapsed, self._play_wall = now - self._play_wall, now
        if self.speed.paused or self.t is None:
            return
        rate = REPLAY_MAX if math.isinf(self.speed.factor) else self.speed.factor
        self._play_t = min(self._play_t + rate * elapsed, float(self.replay.t_last))
        t = self.replay.time_at(self._play_t)
        if t != self.t:
            play_t = self._play_t
            self._show_time(t)
            self._play_t = play_t
        if self._play_t >= self.replay.t_last:
            self.speed.set(PAUSE)
            self.refresh_views(force=False)


__all__ = ["HOUR_S", "SimTick", "TwinApp"]
