"""The console's state, without a UI: a live session or a recording, the time shown, the speed,
the selection, the alarms, and the engines that feed them (``SimLoop``, ``PanelLoader``,
``SqlRunner``).

Screens read it (``Console`` is handed to each of them) and ask it for panels; whatever has to
change the UI itself (open the SQL editor, a job's timeline) goes up to the app as a message.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage.reader import cursor as reader_cursor
from storage.sandbox import Limits, UserSql, UserSqlRunner
from tui.console.alarms import Alarms
from tui.console.feed import LiveFeed, PanelReq
from tui.console.meta import DEFAULT_WINDOW_S, Meta, params_for
from tui.console.pacing import (
    DEFAULT_LEVEL,
    PAUSE,
    SPEEDS,
    Pacer,
    RateMeter,
    SpeedControl,
    live_speed_text,
    rate_text,
)
from tui.console.panels import PanelLoader, Results
from tui.console.replay import ReplayFeed
from tui.console.scale import METRIC_KEYS
from tui.console.simloop import SimLoop
from tui.console.sqlrunner import SqlRunner
from tui.console.status import Status
from tui.console.whatif import Context, context_from

REPLAY_MAX = 4 * 86400  # "max" playback speed in replay [sim s per wall s]
ALARMS_LIVE_S = 1.0  # live: the alarms are asked for at most this often while the clock moves
ALARMS_CATCH_UP_S = 0.2  # live: how often they are asked again until the file has the step shown


def default_config_dir() -> Path:
    env = os.environ.get("TWIN_CONFIG_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "ai-factory-twin"


class Console:
    """Either ``session`` (live) or ``replay_con`` + ``replay_run_id`` (a recording).

    ``on_tick(t, steps)`` is called from the simulation thread, ``on_panels(requester, seq,
    results)`` from the loader thread; ``start_sql(job)`` runs a user query's job in a thread."""

    def __init__(
        self,
        *,
        on_tick: Callable[[int, int], object],
        on_panels: Callable[[Any, int, Results], object],
        start_sql: Callable[[Callable[[], None]], Any] | None = None,
        session: Any = None,
        replay_con: Any = None,
        replay_run_id: str | None = None,
        replay_path: str | None = None,
        config_dir: str | Path | None = None,
    ) -> None:
        if (session is None) == (replay_con is None):
            raise ValueError("the console needs either a live session or a replay connection")
        self.session = session
        self.live: LiveFeed | None = None
        self.replay: ReplayFeed | None = None
        self.sim: SimLoop | None = None
        self.t: int | None = None
        if session is not None:
            self.live = LiveFeed(session)
            self.meta: Meta = self.live.meta
            self.speed = SpeedControl(DEFAULT_LEVEL)
            self.pacer = Pacer(self.speed, self.meta.dt_s, session.chunk_steps)
            self.sim = SimLoop(self.live, self.pacer, self.speed, on_tick)
        else:
            assert replay_run_id is not None
            self.replay = ReplayFeed(replay_con, replay_run_id, replay_path or "")
            self.meta = self.replay.meta
            self.speed = SpeedControl(PAUSE)
            self.t = self.replay.t_first if self.replay.n else None
        # User SQL: the live database's sandboxed user cursor, or one on the replay's connection.
        self.user_sql: UserSqlRunner = (
            session.writer.user_sql
            if session is not None
            else UserSql(reader_cursor(replay_con), Limits(), strict=False)
        )
        self.sql = SqlRunner(self.user_sql) if start_sql is None else SqlRunner(self.user_sql, start_sql)
        live_run = (self.meta.run_id, self.meta.dt_s) if self.live is not None else None
        self.panels = PanelLoader(on_panels, live_run)
        self.config_dir = Path(config_dir) if config_dir else default_config_dir()
        self.seq = 0  # bumped whenever the time shown changes
        self.alarms = Alarms()  # the active alarms (status line count, Alarms screen)
        self._alarms_asked = (-1, 0.0, False)  # time-shown seq, wall time, at the time shown
        # The simulation's measured speed: the loop's own meter live (it knows when it advanced).
        self.rate = self.sim.rate if self.sim is not None else RateMeter()
        self.sel_us = 0
        self.sel_chip = 0
        self.metric = METRIC_KEYS[0]
        self.window_s = DEFAULT_WINDOW_S
        self.events_notable = True
        self.events_search = ""  # text the event log is filtered by
        self.sim_t_at_control: int | None = None  # live: the simulation's time when a control key acted
        self.steps_shown = 0  # live: steps simulated up to the time shown
        self.pending_sql: tuple[str, bool, str] | None = None  # for the SQL editor: sql, run, source
        self._play_t = float(self.t or 0)
        self._play_wall = time.monotonic()

    def new_cursor(self) -> Any:
        """A cursor for another thread: the replay's read-only connection, or the live file through
        the writer's database."""
        if self.session is not None:
            return self.session.writer.cursor()
        assert self.replay is not None
        return reader_cursor(self.replay.con)

    # ------------------------------------------------------------------ time shown
    def tick(self, t: int, steps: int) -> None:
        """Live: the simulation reached ``t`` after ``steps`` steps (UI thread)."""
        self.t = t
        self.steps_shown = steps
        self.seq += 1

    def mark_control(self) -> None:
        """Live: note the simulation's time when a control key acted."""
        if self.session is not None:
            self.sim_t_at_control = int(self.session.sim.t_s)

    def speed_changed(self) -> bool:
        """The speed changed; a replay at its end plays again from the start (True: it did)."""
        self.rate.reset()
        self._play_wall = time.monotonic()
        rp = self.replay
        if rp is not None and not self.speed.paused and self.t is not None and self.t >= rp.t_last:
            return self.show_time(rp.t_first)
        return False

    def show_time(self, t: float) -> bool:
        """Replay: show the recorded step at ``t`` (False: the recording has no step)."""
        assert self.replay is not None
        if not self.replay.n:
            return False
        self.t = self.replay.time_at(max(self.replay.t_first, t))
        self._play_t = float(self.t)
        self.seq += 1
        return True

    def step_time(self, n: int) -> float:
        """Replay: the time ``n`` recorded steps from the one shown."""
        assert self.replay is not None
        i = self.replay.index_at(self.t or 0) + n
        return float(self.replay.times[max(0, min(self.replay.n - 1, i))])

    def play(self) -> tuple[bool, bool]:
        """Replay playing: move the time shown on by the wall time since the last call at the
        speed selected. Returns (the time shown changed, the end was reached and play paused)."""
        rp = self.replay
        assert rp is not None
        now = time.monotonic()
        elapsed, self._play_wall = now - self._play_wall, now
        if self.speed.paused or self.t is None:
            return False, False
        rate = REPLAY_MAX if math.isinf(self.speed.factor) else self.speed.factor
        self._play_t = min(self._play_t + rate * elapsed, float(rp.t_last))
        t = rp.time_at(self._play_t)
        changed = False
        if t != self.t:
            play_t = self._play_t
            changed = self.show_time(t)
            self._play_t = play_t
        if self._play_t >= rp.t_last:
            self.speed.set(PAUSE)
            return changed, True
        return changed, False

    # ------------------------------------------------------------------ panels
    def params(self, **extra: Any) -> dict[str, Any]:
        return params_for(self.meta, self.t, window_s=self.window_s, **extra)

    def request_panels(self, requester: Any, reqs: list[PanelReq]) -> None:
        """Run these panels' SQL in the loader thread; a newer request from the same requester
        replaces one not yet started."""
        self.panels.request(requester, reqs)

    def file_req(self, r: PanelReq) -> PanelReq:
        return self.panels.file_req(r)

    @property
    def t_file(self) -> int | None:
        """Live: the last step committed to the file."""
        return self.panels.t_file

    def poll_alarms(self) -> None:
        """Ask for the alarms at the time shown: when it changes in a replay; live, at most every
        ``ALARMS_LIVE_S`` while it moves, and again (paused too) until the file the alarms are read
        from has committed the step shown, so the answer is the one at the time shown."""
        if self.t is None:
            return
        seq, at, current = self._alarms_asked
        now = time.monotonic()
        if seq == self.seq and current:
            return
        if self.live is not None and now - at < (ALARMS_LIVE_S if seq != self.seq else ALARMS_CATCH_UP_S):
            return
        t_file = self.t_file
        at_shown = self.live is None or (t_file is not None and t_file >= self.t)
        self._alarms_asked = (self.seq, now, at_shown)
        self.request_panels(self.alarms, [PanelReq("alarms", "alarms", self.params())])

    @property
    def alarms_at_shown(self) -> bool:
        """Whether the latest alarms asked for are those at the time shown (live: asked once the
        file had committed that step)."""
        seq, _, current = self._alarms_asked
        return seq == self.seq and current

    # ------------------------------------------------------------------ selection, status
    def select_us(self, us: int) -> None:
        self.sel_us = max(0, min(self.meta.ultraservers - 1, int(us)))

    def take_pending_sql(self) -> tuple[str, bool, str] | None:
        pending, self.pending_sql = self.pending_sql, None
        return pending

    def tab_extra(self) -> dict[str, str]:
        return {"ultraserver": str(self.sel_us)}

    def status(self) -> Status:
        position = ""
        if self.replay is not None and self.t is not None:
            span = self.replay.t_last - self.replay.t_first
            position = f"{100 * (self.t - self.replay.t_first) / span:.0f} %" if span > 0 else "100 %"
        return Status(
            "REPLAY" if self.replay else "LIVE",
            self.t,
            self.speed_text(),
            self.speed.paused,
            self.speed.resume_label,
            self.meta.scenario,
            self.meta.path,
            position,
            len(self.alarms.active),
            self.alarms.unacked,
        )

    def speed_text(self) -> str:
        label, factor = SPEEDS[self.speed.level]
        if self.live is not None and self.live.remaining == 0:
            return "end of the session's duration"
        if self.replay is not None:
            return f"max {rate_text(REPLAY_MAX)}" if math.isinf(factor) else f"▶ {label}"
        return live_speed_text(self.speed, self.rate.rate(), self.pacer.wait_s())

    def whatif_context(self) -> Context:
        fac = row_it = math.nan
        if self.live is not None:
            with self.live.lock:
                fac = self.live.row.get("facility_power_w", math.nan)
                u = self.live.us_now
                if u:
                    row = self.meta.us_row[self.sel_us]
                    row_it = float(u["power_w"][u["row_id"] == row].sum())
        return context_from(self.meta, self.sel_us, self.sel_chip, fac, row_it)
