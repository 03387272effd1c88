"""What every screen shares: the status line, the scrubber (replay), the screen tabs and the
footer around its body, and the panel plumbing.

A screen lists its panels (``panel_requests``: widget id, query name, parameters). Live, the hot
panels are computed from memory every refresh tick; every other panel (all of them in a replay)
runs its SQL in the console's panel loader (``tui.console.panels``) and comes back through
``show_panel``. ``s`` opens the focused panel's SQL in the SQL editor (a message to the app).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from storage import queries as Q
from tui.console.core import Console
from tui.console.feed import LIVE_PANELS, PanelReq
from tui.console.pacing import MAX, RedrawBudget
from tui.screens.messages import OpenSql
from tui.widgets.status import ModeTabs, Scrubber, StatusBar

REFRESH_S = 0.25  # KPI, plot and status refresh period (4 Hz)
# Live at max speed the plots' redraws share the interpreter with the simulation: they are spaced so
# the UI thread uses at most this share of a core (measured), and come at least every PANEL_MAX_S.
# The status line (clock, speed, alarms), KPI tiles and maps still move every tick; keys act at once.
UI_BUDGET = 0.10
PANEL_MAX_S = 1.0
PLOT_PANELS = frozenset({*Q.SERIES, "us_history"})  # the panels held to the budget (plots redraw whole)
SQL_PANEL_REFRESH_S = 1.0  # live panels that run SQL on the file (tables) refresh at 1 Hz


class TwinScreen(Screen[None]):
    MODE: ClassVar[str] = ""
    HAS_WINDOW: ClassVar[bool] = False
    ALIASES: ClassVar[dict[str, str]] = {}  # widget id -> the panel whose query feeds it
    TABLES: ClassVar[frozenset[str]] = frozenset()  # live panels redrawn at 1 Hz (tables), not 4 Hz
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "open_sql", "SQL", tooltip="Open the SQL behind the focused panel in the SQL editor"),
        Binding(
            "tab", "app.focus_next", "Panel", key_display="⇥", show=False, tooltip="Focus the next panel"
        ),
        Binding(
            "shift+tab",
            "app.focus_previous",
            "Previous panel",
            show=False,
            tooltip="Focus the previous panel",
        ),
    ]

    def __init__(self, core: Console) -> None:
        super().__init__(id=self.MODE)
        self.core = core  # the console's state (the app hands it over)
        self._seen = -1
        self._plots_seen = -1
        self._sql_at = 0.0
        self._table_at = 0.0
        self._table_seq = -1  # the tick the tables were last drawn at
        self.load_count = 0  # panel results shown (refresh-rate figures)
        self.ticks = 0  # refresh ticks run while this screen was current (tests wait on them)
        self.budget = RedrawBudget(UI_BUDGET, PANEL_MAX_S)  # budget.redraws: ticks that may redraw the plots

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        if self.core.replay is not None:
            yield Scrubber(id="scrubber")
        yield from self.compose_body()
        yield ModeTabs(self.MODE, id="tabs")
        yield Footer(compact=True, show_command_palette=False)

    def compose_body(self) -> Iterable[Widget]:
        return ()

    # ------------------------------------------------------------------ refresh
    def on_mount(self) -> None:
        self.set_interval(REFRESH_S, self._tick)

    def on_screen_resume(self) -> None:
        # The screen shows at once with everything but the plots brought up to date; the plots
        # (the costly part of a frame) follow on the next tick.
        self.refresh_view(force=True, panels=self.core.live is None)

    def _tick(self) -> None:
        try:
            current = self.app.screen is self
        except Exception:  # no screen while the app shuts down
            return
        if current:
            self.refresh_view(panels=self._panels_due())
            self.ticks += 1

    def _panels_due(self) -> bool:
        """Whether this tick may redraw the plots: always, except live at max speed while the UI thread
        has used more than ``UI_BUDGET`` of a core since the last redraw (``RedrawBudget``)."""
        core = self.core
        return self.budget.due(
            time.monotonic(), time.thread_time(), core.live is not None and core.speed.level == MAX
        )

    def refresh_view(self, force: bool = False, panels: bool = True) -> None:
        """Status line always; panels when the time shown changed (or ``force``) — the plots only
        when ``panels`` (not on a speed key or a screen switch; at max speed, a tick within the UI's
        budget)."""
        core = self.core
        core.poll_alarms()
        self.query_one(StatusBar).show(core.status())
        if core.replay is not None:
            self.query_one(Scrubber).show(core.replay.t_first, core.replay.t_last, core.t or 0)
        self.query_one(ModeTabs).show(core.tab_extra())
        if core.t is None:
            return
        now = time.monotonic()
        changed = force or core.seq != self._seen
        self._seen = core.seq
        # The plots wait for a tick within the UI's budget (``panels``), then show the latest.
        plots = panels and (force or core.seq != self._plots_seen)
        if plots:
            self._plots_seen = core.seq
        reqs = self.panel_requests()
        if core.live is not None:
            # Tables at most once a second, and once more after the last tick (paused: they catch
            # up with the time shown instead of staying at the tick of their last redraw).
            tables = force or (core.seq != self._table_seq and now - self._table_at >= SQL_PANEL_REFRESH_S)
            if tables:
                self._table_at, self._table_seq = now, core.seq
            for r in reqs:
                if r.panel in self.TABLES:
                    due = tables
                else:
                    due = plots if r.query in PLOT_PANELS else changed
                if due and r.query in LIVE_PANELS:
                    cols = core.live.panel(r.query, r.params)
                    if cols is not None:
                        self.show_panel(r.panel, cols)
                        self.load_count += 1
            sql = [r for r in reqs if r.query not in LIVE_PANELS]
            if sql and (force or now - self._sql_at >= SQL_PANEL_REFRESH_S):
                self._sql_at = now
                core.request_panels(self, sql)
        elif changed and reqs:
            core.request_panels(self, reqs)

    def panel_requests(self) -> list[PanelReq]:
        return []

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        """Show a panel's query result (called on the UI thread)."""

    def show_error(self, panel: str, error: Exception) -> None:
        self.notify(f"{panel}: {str(error).splitlines()[0]}", severity="error", timeout=6)

    # ------------------------------------------------------------------ SQL drill-down
    def focused_panel(self) -> PanelReq | None:
        reqs = {r.panel: r for r in self.panel_requests()}
        w: Any = self.focused
        while w is not None and w is not self:
            pid = self.ALIASES.get(w.id or "", w.id)
            if pid in reqs:
                return reqs[pid]
            w = w.parent
        return next(iter(reqs.values()), None)

    def action_open_sql(self) -> None:
        req = self.focused_panel()
        if req is None:
            self.notify("no panel with a query here", timeout=3)
            return
        core = self.core
        file_req = core.file_req(req)
        if file_req is not req:
            self.notify(
                "the file is behind the live clock (the writer commits every second): the query "
                "runs at the last committed step; pause to line them up",
                timeout=6,
            )
        self.app.post_message(OpenSql(file_req.sql, run=True, source=f"{self.MODE}: {req.panel}"))
