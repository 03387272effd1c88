"""The Overview screen: status line, KPI tiles, hall strip, plots, job queue and event log.

The screen pulls the app's latest snapshot on its own timer (4 Hz; the queue table 1 Hz) and only
redraws what changed, so a fast simulation does not cost more UI time than a slow one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, cast

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer

from tui import fmt
from tui.feed import PLOT_WINDOW_S, Snapshot
from tui.widgets.hall import HallStrip
from tui.widgets.kpi import KpiGrid
from tui.widgets.plot import BraillePlot
from tui.widgets.status import Scrubber, StatusBar
from tui.widgets.tables import EventLog, QueueTable

if TYPE_CHECKING:
    from tui.app import TwinApp

REFRESH_S = 0.25  # KPI, plot and status refresh period
QUEUE_REFRESH_S = 1.0


def _legend(title: str, *names: str) -> str:
    colours = ("$accent", "$success")
    legend = "  ".join(f"[{c}]━ {n}[/]" for c, n in zip(colours, names, strict=False))
    return f"{title}  {legend}" if len(names) > 1 else title


class OverviewScreen(Screen[None]):
    """Everything at a glance; works the same on live and replayed runs."""

    def __init__(self) -> None:
        super().__init__(id="overview")
        self._seen = -1
        self._queue_at = 0.0

    @property
    def twin(self) -> TwinApp:
        return cast("TwinApp", self.app)

    def compose(self) -> ComposeResult:
        meta = self.twin.meta
        yield StatusBar(id="status")
        if meta.mode == "replay":
            yield Scrubber(id="scrubber")
        yield KpiGrid(id="kpis")
        yield HallStrip(meta, id="hall")
        window = f"last {PLOT_WINDOW_S // 3600} h"
        with Horizontal(id="plots"):
            p = BraillePlot(fmt.power, PLOT_WINDOW_S, id="plot-power")
            p.border_title = _legend("Power", "facility", "IT")
            p.border_subtitle = window
            yield p
            p = BraillePlot(lambda v: f"{v:.3f}", PLOT_WINDOW_S, id="plot-pue")
            p.border_title = "PUE"
            p.border_subtitle = window
            yield p
            p = BraillePlot(lambda v: fmt.si(v, "", 3), PLOT_WINDOW_S, id="plot-tokens")
            p.border_title = "Tokens/s"
            p.border_subtitle = window
            yield p
        with Horizontal(id="lower"):
            q = QueueTable(id="queue")
            q.border_title = "Queue"
            yield q
            e = EventLog(id="events")
            e.border_title = e.title()
            yield e
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.set_interval(REFRESH_S, self.update_view)
        self.update_view()

    def update_view(self, force_queue: bool = False) -> None:
        """Pull the app's state; redraw the parts whose data changed."""
        app = self.twin
        self.query_one(StatusBar).show(app.status())
        if app.meta.mode == "replay" and app.replay is not None:
            self.query_one(Scrubber).show(app.replay.t_first, app.replay.t_last, app.snapshot.t_s if app.snapshot else 0)
        snap = app.snapshot
        if app.seq != self._seen:
            self._seen = app.seq
            self._draw(snap)
        now = time.monotonic()
        if snap is not None and (force_queue or now - self._queue_at >= QUEUE_REFRESH_S):
            self._queue_at = now
            q = self.query_one(QueueTable)
            q.show(snap.queue)
            more = f", {len(snap.queue)} shown" if snap.queue_len > len(snap.queue) else ""
            q.border_title = f"Queue · {snap.queue_len} waiting{more}"

    def _draw(self, snap: Snapshot | None) -> None:
        self.query_one(KpiGrid).show(snap)
        self.query_one(HallStrip).show(snap)
        if snap is None:
            return
        h = snap.hist
        t = h["time_s"]
        self.query_one("#plot-power", BraillePlot).set_data(t, (h["facility_power_w"], h["it_power_w"]), snap.t_s)
        self.query_one("#plot-pue", BraillePlot).set_data(t, (h["pue"],), snap.t_s)
        self.query_one("#plot-tokens", BraillePlot).set_data(t, (h["tokens_per_s"],), snap.t_s)
        self.query_one(EventLog).show_snapshot(snap)

    def toggle_events(self) -> None:
        log = self.query_one(EventLog)
        log.set_notable_only(not log.notable_only, self.twin.snapshot)
