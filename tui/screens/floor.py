"""Floor: the hall as a map — every UltraServer a cell coloured by the chosen metric, one line per
row (CDU) — with a legend, the selected UltraServer's read-out and the rows' totals.
Arrow keys move, Enter opens the UltraServer, m changes the metric.

On a campus (several halls) the Floor starts one level up: one line per hall with its figures
(from ``hall_ts``), coloured like the map; Enter opens the selected hall's map (its rows and
UltraServers only), Esc goes back to the campus. The Rows table then has a ``hall`` column and
shows the rows of the selected hall."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widget import Widget

from tui.console import fmt
from tui.console.core import Console
from tui.console.feed import PanelReq
from tui.console.meta import sample_time
from tui.console.scale import US_DOWN, US_STATE_SHORT, US_TRIPPED, metric, us_states
from tui.screens.base import TwinScreen
from tui.widgets.arrowtable import ArrowTable
from tui.widgets.heatmap import FloorMap, HallMap, Legend
from tui.widgets.info import InfoList, Item
from tui.widgets.status import ModeTabs

ROW_FORMATS = {
    "power_w": fmt.power,
    "activity": lambda v: fmt.pct(v, 0),
    "max_chip_temp_c": fmt.temp,
    "coolant_return_c": fmt.temp,
    "chips_busy": fmt.count,
    "chips_failed": fmt.count,
    "tripped": fmt.count,
}
ROW_LABELS = {
    "hall": "hall",
    "row_id": "row",
    "ultraservers": "US",
    "power_w": "power",
    "chips_busy": "busy",
    "chips_failed": "failed",
    "tripped": "tripped",
    "activity": "activity",
    "max_chip_temp_c": "max chip",
    "coolant_return_c": "loop return",
}


def us_items(d: dict[str, Any], us: int, meta: Any, base: int = 0) -> list[Item]:
    """The read-out of one UltraServer from the floor query's columns (``base``: the UltraServer of
    their first row, a hall's first on a campus)."""
    i = us - base
    if not d or not 0 <= i < len(d.get("ultraserver_id", ())) or int(d["ultraserver_id"][i]) != us:
        return []
    g = {
        k: float(v[i])
        for k, v in d.items()
        if k
        in (
            "power_w",
            "chips_busy",
            "chips_failed",
            "activity",
            "max_chip_temp_c",
            "coolant_return_c",
            "clock",
        )
    }
    cpu = meta.chips_per_us
    hot = g["max_chip_temp_c"] >= meta.throttle_c
    tripped = d.get("tripped")
    state = int(
        us_states(d["chips_failed"][i : i + 1], None if tripped is None else tripped[i : i + 1], cpu)[0]
    )
    # On a campus its hall instead of its chip count (the busy chips line gives that): the line fits.
    where = f"hall {meta.hall_of(us)}" if meta.halls > 1 else f"{cpu} chips"
    return [
        (f"UltraServer {us} · row {meta.us_row[us]} · {where}", "", None, "head"),
        ("state", US_STATE_SHORT[state], None, "warn" if state in (US_DOWN, US_TRIPPED) else ""),
        ("power", fmt.power(g["power_w"]), g["power_w"] / meta.us_power_w if meta.us_power_w else None, ""),
        ("busy chips", f"{g['chips_busy']:,.0f} / {cpu}", g["chips_busy"] / cpu, ""),
        ("activity", fmt.pct(g["activity"], 0), g["activity"], ""),
        ("hottest chip", fmt.temp(g["max_chip_temp_c"]), None, "warn" if hot else ""),
        ("loop return", fmt.temp(g["coolant_return_c"]), None, ""),
        ("clock", fmt.pct(g["clock"], 0), g["clock"], "warn" if g["clock"] < 0.999 else ""),
        ("failed chips", fmt.count(g["chips_failed"]), None, "warn" if g["chips_failed"] else ""),
    ]


def hall_items(d: dict[str, Any], hall: int, meta: Any) -> list[Item]:
    """The read-out of one hall from the halls query's columns."""
    ids = d.get("hall_id", ()) if d else ()
    if not 0 <= hall < len(ids) or int(ids[hall]) != hall:
        return []
    g = {k: float(np.asarray(v)[hall]) for k, v in d.items() if k != "hall_id"}
    lo, hi = meta.hall_span(hall)
    rows = len(set(meta.us_row[lo : hi + 1]))
    chips = g["ultraservers"] * meta.chips_per_us
    full = g["ultraservers"] * meta.us_power_w
    return [
        (f"Hall {hall} · US {lo}-{hi} · {rows} rows", "", None, "head"),
        ("IT power", fmt.power(g["power_w"]), g["power_w"] / full if full else None, ""),
        (
            "busy chips",
            f"{g['chips_busy']:,.0f} / {chips:,.0f}",
            g["chips_busy"] / chips if chips else None,
            "",
        ),
        ("activity", fmt.pct(g["activity"], 0), g["activity"], ""),
        (
            "hottest chip",
            fmt.temp(g["max_chip_temp_c"]),
            None,
            "warn" if g["max_chip_temp_c"] >= meta.throttle_c else "",
        ),
        ("tripped US", fmt.count(g["tripped"]), None, "warn" if g["tripped"] else ""),
        ("failed chips", fmt.count(g["chips_failed"]), None, "warn" if g["chips_failed"] else ""),
        ("loop return", fmt.temp(g["coolant_return_c"]), None, ""),
        ("clock", fmt.pct(g["clock"], 0), g["clock"], "warn" if g["clock"] < 0.999 else ""),
    ]


class FloorScreen(TwinScreen):
    MODE = "floor"
    ALIASES: ClassVar[dict[str, str]] = {"us-detail": "map"}
    TABLES: ClassVar[frozenset[str]] = frozenset({"rows"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(-1, 0)", "←", show=False, tooltip="Select the UltraServer to the left"),
        Binding("right", "move(1, 0)", "→", show=False, tooltip="Select the UltraServer to the right"),
        Binding("up", "move(0, -1)", "↑", show=False, tooltip="Select the UltraServer in the row above"),
        Binding("down", "move(0, 1)", "↓", show=False, tooltip="Select the UltraServer in the row below"),
        Binding(
            "enter",
            "drill",
            "Open",
            key_display="⏎",
            tooltip="Open the selected UltraServer (on a campus: the selected hall's map)",
        ),
        Binding(
            "escape",
            "campus",
            "Campus",
            key_display="Esc",
            tooltip="Back to the campus (one line per hall) from a hall's map",
        ),
        Binding("m", "app.metric", "Metric", tooltip="Colour by the next metric"),
    ]

    def __init__(self, core: Console) -> None:
        super().__init__(core)
        self.at_campus = False  # showing the campus level (not a hall's map); set on compose
        self.sel_hall = 0
        self._halls: dict[str, Any] | None = None
        self._floor: dict[str, Any] | None = None  # the hall map's last columns, for redraws

    @property
    def campus(self) -> bool:
        """Whether the run has several halls."""
        return self.core.meta.halls > 1

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "campus":
            return self.campus and not self.at_campus
        return True

    def compose_body(self) -> Iterable[Widget]:
        meta = self.core.meta
        self.at_campus = self.campus
        with Horizontal(id="floor-body"):
            with Vertical(id="floor-map", classes="panel -campus" if self.campus else "panel"):
                yield Legend(floor=True, id="legend")
                if self.campus:
                    yield HallMap(meta, id="halls")
                fm = FloorMap(meta, id="map")
                fm.display = not self.campus
                yield fm
            with Horizontal(id="floor-lower"):
                d = InfoList(id="us-detail", classes="panel")
                d.border_title = "Selected"
                yield d
                rows = ArrowTable(formatters=ROW_FORMATS, labels=ROW_LABELS, id="rows", classes="panel")
                rows.border_title = "Rows (one CDU each)"
                yield rows

    def on_mount(self) -> None:
        super().on_mount()
        if self.campus:
            self.sel_hall = self.core.meta.hall_of(self.core.sel_us)
            self.query_one(HallMap).focus()
        else:
            self.query_one(FloorMap).focus()

    def on_screen_resume(self) -> None:
        # A hall's map follows the selection made elsewhere (n/p on the UltraServer screen cross halls).
        if self.campus and not self.at_campus and self.core.meta.hall_of(self.core.sel_us) != self.sel_hall:
            self.open_hall(self.core.meta.hall_of(self.core.sel_us))
        super().on_screen_resume()

    def panel_requests(self) -> list[PanelReq]:
        if not self.campus:
            p = self.core.params()
            return [PanelReq("map", "floor", p), PanelReq("rows", "rows", p)]
        p = self.core.params(hall=self.sel_hall)
        if self.at_campus:
            return [PanelReq("halls", "halls", p), PanelReq("rows", "hall_rows", p)]
        return [PanelReq("map", "hall_floor", p), PanelReq("rows", "hall_rows", p)]

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        core = self.core
        meta = core.meta
        if panel == "map":
            if self.at_campus:
                return  # an answer for a hall's map that came after Esc
            m = metric(core.metric)
            lo, hi = m.floor_range(meta)
            self.query_one(Legend).show(m, lo, hi)
            fm = self.query_one(FloorMap)
            if self.campus and (
                not len(cols.get("ultraserver_id", ())) or int(cols["ultraserver_id"][0]) != fm.base
            ):
                return  # another hall's (an answer from before the hall changed)
            fm.show(cols, m, core.sel_us)
            # A tier recorded every few steps (a campus): the sample shown may be older than the time shown.
            age = fmt.sample_age(sample_time(cols), core.t)
            if self.campus:
                n = fm.span_len
                title = f"Hall {self.sel_hall} of {meta.halls} · {n} UltraServers · {m.label}"
                title += f" · {age} · Esc: campus" if age else " · Esc: campus"
            else:
                title = f"Floor · {meta.ultraservers} UltraServers · {m.label}" + (f" · {age}" if age else "")
            self.query_one("#floor-map").border_title = title
            detail = self.query_one("#us-detail", InfoList)
            detail.show(us_items(cols, core.sel_us, meta, fm.base))
            detail.border_subtitle = age
            self._floor = cols
        elif panel == "halls":
            if not self.at_campus:
                return
            m = metric(core.metric)
            lo, hi = m.floor_range(meta)
            # The campus level draws no UltraServer state marks: its legend names none.
            self.query_one(Legend).show(m, lo, hi, "power, failed: per UltraServer", marks=False)
            self.query_one(HallMap).show(cols, m, self.sel_hall)
            self.query_one(
                "#floor-map"
            ).border_title = f"Campus · {meta.halls} halls · {meta.ultraservers:,} UltraServers · {m.label} · ⏎ opens a hall"
            detail = self.query_one("#us-detail", InfoList)
            detail.show(hall_items(cols, self.sel_hall, meta))
            detail.border_subtitle = ""  # hall_ts: the step shown
            self._halls = cols
        elif panel == "rows":
            if self.campus and (not len(cols.get("hall", ())) or int(cols["hall"][0]) != self.sel_hall):
                return  # another hall's rows
            rows = self.query_one("#rows", ArrowTable)
            rows.set_table({k: np.asarray(v) for k, v in cols.items() if k != "time_s"})
            rows.border_subtitle = fmt.sample_age(sample_time(cols), core.t)  # the UltraServers' sample

    def redraw_selection(self) -> None:
        if self.at_campus:
            if self._halls is not None:
                self.show_panel("halls", self._halls)
            return
        if self._floor is not None:
            self.show_panel("map", self._floor)

    def action_move(self, dx: int, dy: int) -> None:
        core = self.core
        if self.at_campus:
            self.sel_hall = min(max(0, self.sel_hall + (dy or dx)), core.meta.halls - 1)
            self.redraw_selection()
            self.refresh_view(force=True)  # the selected hall's rows
            return
        core.select_us(self.query_one(FloorMap).row_neighbours(core.sel_us, dx, dy))
        self.redraw_selection()
        self.query_one(ModeTabs).show(core.tab_extra())  # the UltraServer tab names the selection at once

    def action_drill(self) -> None:
        if self.at_campus:
            self.open_hall(self.sel_hall)
            return
        self.app.switch_mode("ultraserver")

    def open_hall(self, hall: int) -> None:
        """The campus's level down: hall ``hall``'s map (only its rows and UltraServers)."""
        core = self.core
        self.sel_hall = hall
        lo, hi = core.meta.hall_span(hall)
        if not lo <= core.sel_us <= hi:
            core.select_us(lo)
        self.at_campus = False
        fm = self.query_one(FloorMap)
        fm.set_span(lo, hi)
        fm.data = {}
        self._floor = None
        self.query_one(HallMap).display = False
        fm.display = True
        fm.focus()
        detail = self.query_one("#us-detail", InfoList)
        detail.show([])
        detail.border_subtitle = ""
        self.refresh_bindings()
        self.refresh_view(force=True)

    def action_campus(self) -> None:
        """Back to the campus level (from a hall's map)."""
        if not self.campus or self.at_campus:
            return
        self.at_campus = True
        self.sel_hall = self.core.meta.hall_of(self.core.sel_us)
        hm = self.query_one(HallMap)
        self.query_one(FloorMap).display = False
        hm.display = True
        hm.focus()
        self.redraw_selection()
        self.refresh_bindings()
        self.refresh_view(force=True)

    def on_hall_map_picked(self, event: HallMap.Picked) -> None:
        self.sel_hall = event.hall
        self.redraw_selection()
        if event.open:
            self.open_hall(event.hall)
        else:
            self.refresh_view(force=True)

    def on_floor_map_picked(self, event: FloorMap.Picked) -> None:
        self.core.select_us(event.us)
        self.redraw_selection()
        self.query_one(ModeTabs).show(self.core.tab_extra())
        if event.open:
            self.action_drill()
