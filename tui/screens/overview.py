"""Overview: KPI tiles with trend arrows, the hall strip, six plots over the selected window and
the event log. Every panel is one query (``s`` opens it in the SQL editor)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.widget import Widget

from storage import queries as Q
from tui.console import fmt
from tui.console.feed import PanelReq
from tui.screens.base import TwinScreen
from tui.widgets.hall import HallStrip
from tui.widgets.kpi import KpiGrid
from tui.widgets.plot import BraillePlot
from tui.widgets.tables import EventLog

PlotSpec = tuple[str, str, str, Callable[[float], str], tuple[str, ...]]  # id, query, title, fmt, legend


def legend(title: str, names: tuple[str, ...]) -> str:
    colours = ("$accent", "$success")
    if len(names) < 2:
        return title
    return f"{title} " + " ".join(f"[{c}]━{n}[/]" for c, n in zip(colours, names, strict=False))


def plot_widget(spec: PlotSpec) -> BraillePlot:
    pid, _, title, f, names = spec
    p = BraillePlot(f, 86400, id=pid, classes="panel")
    p.border_title = legend(title, names)
    if pid in FRACTION_PLOTS:
        p.bounds = (0.0, 1.0)
    return p


def show_plot(screen: TwinScreen, spec: PlotSpec, cols: dict[str, Any]) -> None:
    pid, query = spec[0], spec[1]
    core = screen.core
    p = screen.query_one(f"#{pid}", BraillePlot)
    series = [cols[c].astype(float) for c in Q.SERIES[query]] if query in Q.SERIES else []
    p.set_data(cols["time_s"].astype(float), series, core.t or 0, core.window_s)
    p.border_subtitle = f"last {fmt.window(core.window_s)}"


FRACTION_PLOTS = frozenset({"plot-activity", "plot-free"})

PLOTS: tuple[PlotSpec, ...] = (
    ("plot-power", "plot_power", "Power", fmt.power, ("fac", "IT")),
    ("plot-pue", "plot_pue", "PUE", lambda v: f"{v:.3f}", ()),
    ("plot-activity", "plot_activity", "Chips", lambda v: fmt.pct(v, 0), ("active", "busy")),
    ("plot-tokens", "plot_tokens", "Tokens/s", lambda v: fmt.si(v, "", 3), ()),
    ("plot-queue", "plot_queue", "Jobs", lambda v: f"{v:,.0f}", ("queue", "run")),
    ("plot-temp", "plot_temp", "Temp", lambda v: f"{v:.0f}°C", ("chip", "loop")),
)


class OverviewScreen(TwinScreen):
    """Everything at a glance; the same on live and replayed runs."""

    MODE = "overview"
    HAS_WINDOW = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "toggle_events", "Events", tooltip="Event log: notable events only / all events"),
        Binding(
            "slash",
            "search_events",
            "Search",
            key_display="/",
            tooltip="Search the event log (kind, target, detail); empty clears",
        ),
    ]

    def compose_body(self) -> Iterable[Widget]:
        yield KpiGrid(id="kpis")
        yield HallStrip(self.core.meta, id="hall")
        with Grid(id="plots"):
            for spec in PLOTS:
                yield plot_widget(spec)
        e = EventLog(id="events", empty="no failures, repairs or operator events yet")
        e.add_class("panel")
        yield e

    def on_mount(self) -> None:
        super().on_mount()
        self._title_events()
        self.query_one(KpiGrid).focus()

    def panel_requests(self) -> list[PanelReq]:
        core = self.core
        p = core.params()
        reqs = [PanelReq("kpis", "kpis", p), PanelReq("hall", "floor", p)]
        reqs += [PanelReq(spec[0], spec[1], p) for spec in PLOTS]
        query = "events_notable" if core.events_notable else "events"
        if core.events_search:  # SQL on the file, live too (the memory holds the latest events only)
            reqs.append(PanelReq("events", query + "_search", p, (("text", core.events_search),)))
        else:
            reqs.append(PanelReq("events", query, p))
        return reqs

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        if panel == "kpis":
            self.query_one(KpiGrid).show(cols)
        elif panel == "hall":
            self.query_one(HallStrip).show(cols, self.core.t)
        elif panel == "events":
            self.query_one(EventLog).show(cols)
        else:
            spec = next(s for s in PLOTS if s[0] == panel)
            show_plot(self, spec, cols)

    def _title_events(self) -> None:
        log = self.query_one(EventLog)
        log.empty = (
            "no failures, repairs or operator events yet" if self.core.events_notable else "no events yet"
        )
        log.border_title = (
            "Events · notable (e: all)" if self.core.events_notable else "Events · all (e: notable)"
        )
        if self.core.events_search:
            log.border_title += f" · matching “{self.core.events_search}” (/ to change)"
            log.empty = f"no events matching “{self.core.events_search}”"

    def action_search_events(self) -> None:
        from tui.screens.prompt import PromptScreen

        def done(text: str | None) -> None:
            if text is not None:
                self.core.events_search = text.strip()
                self._title_events()
                self.refresh_view(force=True)

        self.app.push_screen(
            PromptScreen(
                "Search events",
                "Text in the kind, target, detail or source (empty: all)",
                self.core.events_search,
            ),
            done,
        )

    def action_toggle_events(self) -> None:
        self.core.events_notable = not self.core.events_notable
        self._title_events()
        self.refresh_view(force=True)
