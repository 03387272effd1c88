"""The AI Factory Twin Textual app: live mode (simulation in a thread worker) and replay mode.

Live: a thread worker started here advances the session at the selected speed and posts
``SimTick`` messages carrying a plain ``Snapshot``; stale ticks merge (``can_replace``). Screens pull
the latest snapshot on their own timers. Replay: a ``ReplayFeed`` over a recorded run, moved by the
scrubber keys or played back by a timer. Widgets and screens live in ``tui.widgets`` / ``tui.screens``.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.worker import Worker, get_current_worker

from tui.feed import DAY_S, HOUR_S, LiveFeed, Meta, ReplayFeed, Snapshot
from tui.pacing import DEFAULT_LEVEL, MAX, PAUSE, SPEEDS, Pacer, RateMeter, SpeedControl, rate_text
from tui.screens.help import HelpScreen
from tui.screens.overview import OverviewScreen
from tui.widgets.status import Status

MIN_PERIOD_S = 0.05  # the worker posts at most ~20 ticks per wall second below "max"
REPLAY_MAX = 4 * DAY_S  # "max" playback speed in replay [sim s per wall s]
PLAY_PERIOD_S = 0.1
FAIL_REPAIR_S = 4 * HOUR_S  # an operator-failed UltraServer comes back after this


class SimTick(Message):
    """A new snapshot from the simulation worker; a newer tick supersedes an unprocessed one."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SimTick)


LIVE_ONLY = {"fail", "surge", "toggle_pause"}
REPLAY_ONLY = {"scrub", "jump", "toggle_play"}


class TwinApp(App[None]):
    TITLE = "AI Factory Twin"
    CSS_PATH = "twin.tcss"
    ENABLE_COMMAND_PALETTE = False
    MODES: ClassVar[dict[str, Any]] = {"overview": OverviewScreen}
    DEFAULT_MODE = "overview"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (150, "-wide")]  # noqa: RUF012 (typed on App)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_pause", "Pause", key_display="␣", tooltip="Pause / resume"),
        Binding("space", "toggle_play", "Play", key_display="␣", tooltip="Play / pause"),
        Binding("1", "set_speed(0)", "Speed", key_display="1-5", tooltip="Speed: pause"),
        Binding("2", "set_speed(1)", "1×", show=False, tooltip="Speed: 1× (one simulated second per second)"),
        Binding("3", "set_speed(2)", "60×", show=False, tooltip="Speed: 60× (one simulated minute per second)"),
        Binding("4", "set_speed(3)", "3600×", show=False, tooltip="Speed: 3600× (one simulated hour per second)"),
        Binding("5", "set_speed(4)", "max", show=False, tooltip="Speed: max (as fast as possible)"),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False, tooltip="Next faster speed"),
        Binding("minus", "speed(-1)", "Slower", show=False, tooltip="Next slower speed (down to pause)"),
        Binding("f", "fail", "Fail US", tooltip="Fail the next UltraServer (0, 1, 2, …) until repaired"),
        Binding("s", "surge", "Surge", tooltip="Inference surge: ×2 request rate for one simulated hour"),
        Binding("left", "scrub(-3600)", "±1h", key_display="←→", tooltip="Back one simulated hour"),
        Binding("right", "scrub(3600)", "+1 h", show=False, tooltip="Forward one simulated hour"),
        Binding("shift+left", "scrub(-86400)", "±1d", key_display="⇧←→", tooltip="Back one simulated day"),
        Binding("shift+right", "scrub(86400)", "+1 d", show=False, tooltip="Forward one simulated day"),
        Binding("home", "jump(0)", "Jump", key_display="Home/End", tooltip="Jump to the start of the run"),
        Binding("end", "jump(1)", "End", show=False, tooltip="Jump to the end of the run"),
        Binding("e", "toggle_events", "Events", tooltip="Event log: notable events only / all events"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="This help"),
        Binding("q", "quit", "Quit", tooltip="Quit (a live session stays in its file)"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="Quit (a live session stays in its file)"),
    ]

    def __init__(
        self,
        session: Any = None,
        replay_con: Any = None,
        replay_run_id: str | None = None,
        replay_path: str | None = None,
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
        else:
            assert replay_run_id is not None
            self.replay = ReplayFeed(replay_con, replay_run_id, replay_path or "")
            self.meta = self.replay.meta
            self.speed = SpeedControl(PAUSE)
        self.snapshot: Snapshot | None = None
        self.seq = 0  # bumped on every new snapshot
        self.rate = RateMeter()
        self._sim_worker: Worker[None] | None = None
        self._sim_done = threading.Event()
        self._fail_next = 0
        self._play_t = 0.0
        self._play_wall = time.monotonic()

    # ------------------------------------------------------------------ lifecycle
    def on_mount(self) -> None:
        if self.live is not None:
            self._sim_worker = self.run_worker(self._sim_loop, name="simulation", group="sim", thread=True,
                                               exit_on_error=True)
        else:
            assert self.replay is not None
            self._show_index(0)
            self.set_interval(PLAY_PERIOD_S, self._play)

    async def on_unmount(self) -> None:
        """Stop the simulation thread before the session can be closed by the caller."""
        if self._sim_worker is not None:
            self._sim_worker.cancel()
            deadline = time.monotonic() + 30.0
            while not self._sim_done.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)

    def _sim_loop(self) -> None:
        """Thread worker: advance the session at the selected speed, post snapshots."""
        worker = get_current_worker()
        assert self.live is not None
        try:
            while not worker.is_cancelled:
                t0 = time.monotonic()
                k = min(self.pacer.due(t0), self.live.remaining)
                if k == 0:
                    done = self.live.remaining == 0
                    time.sleep(MIN_PERIOD_S if done else min(MIN_PERIOD_S, self.pacer.wait_s()))
                    continue
                snap = self.live.advance(k)
                if worker.is_cancelled:
                    break
                self.post_message(SimTick(snap))
                if self.speed.level != MAX:
                    time.sleep(max(0.0, MIN_PERIOD_S - (time.monotonic() - t0)))
        finally:
            self._sim_done.set()

    def on_sim_tick(self, message: SimTick) -> None:
        self.snapshot = message.snapshot
        self.seq += 1
        self.rate.add(time.monotonic(), message.snapshot.t_s)

    def refresh_views(self, force_queue: bool = False) -> None:
        """Redraw now (after a key) instead of at the next timer tick."""
        for screen in self.screen_stack:
            if isinstance(screen, OverviewScreen) and screen.is_mounted:
                screen.update_view(force_queue=force_queue)

    # ------------------------------------------------------------------ status
    def status(self) -> Status:
        snap = self.snapshot
        t = snap.t_s if snap else None
        position = ""
        if self.replay is not None and t is not None:
            span = self.replay.t_last - self.replay.t_first
            position = f"{100 * (t - self.replay.t_first) / span:.0f} %" if span > 0 else "100 %"
        return Status("REPLAY" if self.replay else "LIVE", t, self._speed_text(), self.speed.paused,
                      self.speed.resume_label, self.meta.scenario, self.meta.path, position)

    def _speed_text(self) -> str:
        label, factor = SPEEDS[self.speed.level]
        if self.live is not None and self.live.remaining == 0:
            return "end of the session's duration"
        if self.replay is not None:
            if math.isinf(factor):
                return f"max {rate_text(REPLAY_MAX)}"
            return f"▶ {label}"
        if factor == 1.0:
            wait = self.pacer.wait_s()
            return f"1× · next step in {math.ceil(wait)} s"
        measured = self.rate.rate()
        if math.isinf(factor):
            return f"max ≈ {rate_text(measured)}" if measured else "max"
        if measured is not None and factor >= 3600 and measured < 0.8 * factor:
            return f"{label} (behind: {rate_text(measured)})"
        return label

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in LIVE_ONLY and self.live is None:
            return False
        if action in REPLAY_ONLY and self.replay is None:
            return False
        return True

    def _speed_changed(self) -> None:
        self.rate.reset()
        self._play_wall = time.monotonic()
        if self.replay is not None and not self.speed.paused and self.snapshot is not None:
            if self.snapshot.t_s >= self.replay.t_last:  # play again from the start
                self._show_index(0)
        self.refresh_views()

    def action_toggle_pause(self) -> None:
        self.speed.toggle()
        self._speed_changed()

    def action_toggle_play(self) -> None:
        self.action_toggle_pause()

    def action_set_speed(self, level: int) -> None:
        self.speed.set(level)
        self._speed_changed()

    def action_speed(self, delta: int) -> None:
        self.speed.step(delta)
        self._speed_changed()

    def action_fail(self) -> None:
        assert self.live is not None
        target = self._fail_next % self.meta.ultraservers
        self._fail_next += 1
        repair_s = FAIL_REPAIR_S
        self.live.request_inject("fail_ultraserver", str(target), 0.0, repair_s)
        self.notify(f"fail_ultraserver: UltraServer {target} at the next step, back after "
                    f"{repair_s / 3600:g} h", timeout=4)

    def action_surge(self) -> None:
        assert self.live is not None
        self.live.request_inject("inference_surge", "", 2.0, HOUR_S)
        self.notify("inference_surge: ×2 requests for one simulated hour from the next step", timeout=4)

    def action_scrub(self, delta_s: int) -> None:
        assert self.replay is not None
        t = (self.snapshot.t_s if self.snapshot else self.replay.t_first) + delta_s
        self._show_index(self.replay.index_at(max(self.replay.t_first, t)))

    def action_jump(self, end: int) -> None:
        assert self.replay is not None
        self._show_index(self.replay.n - 1 if end else 0)

    def action_toggle_events(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, OverviewScreen) and screen.is_mounted:
                screen.toggle_events()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # ------------------------------------------------------------------ replay
    def _show_index(self, i: int) -> None:
        assert self.replay is not None
        snap = self.replay.snapshot(i)
        if snap is None:
            return
        self.snapshot = snap
        self._play_t = float(snap.t_s)
        self.seq += 1
        self.refresh_views(force_queue=True)

    def _play(self) -> None:
        assert self.replay is not None
        now = time.monotonic()
        elapsed, self._play_wall = now - self._play_wall, now
        if self.speed.paused or self.snapshot is None:
            return
        factor = self.speed.factor
        rate = REPLAY_MAX if math.isinf(factor) else factor
        self._play_t = min(self._play_t + rate * elapsed, float(self.replay.t_last))
        i = self.replay.index_at(self._play_t)
        if self.replay.times[i] != self.snapshot.t_s:
            play_t = self._play_t
            self._show_index(i)
            self._play_t = play_t
        if self._play_t >= self.replay.t_last:
            self.speed.set(PAUSE)
            self.refresh_views()
