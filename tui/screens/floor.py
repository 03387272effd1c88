"""Floor: the hall as a map — every UltraServer a cell coloured by the chosen metric, one line per
row (CDU) — with a legend, the selected UltraServer's read-out and the rows' totals.
Arrow keys move, Enter opens the UltraServer, m changes the metric."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widget import Widget

from tui import fmt
from tui.feed import PanelReq
from tui.scale import US_DOWN, US_STATE_SHORT, US_TRIPPED, metric, us_states
from tui.screens.base import TwinScreen
from tui.widgets.arrowtable import ArrowTable
from tui.widgets.heatmap import FloorMap, Legend
from tui.widgets.info import InfoList, Item

ROW_FORMATS = {
    "power_w": fmt.power,
    "activity": lambda v: fmt.pct(v, 0),
    "max_chip_temp_c": fmt.temp,
    "coolant_return_c": fmt.temp,
    "chips_busy": fmt.count,
    "chips_failed": fmt.count,
    "tripped": fmt.count,
}
ROW_LABELS = {"row_id": "row", "ultraservers": "US", "power_w": "power", "chips_busy": "busy",
              "chips_failed": "failed", "tripped": "tripped", "activity": "activity", "max_chip_temp_c": "max chip",
              "coolant_return_c": "loop return"}


def us_items(d: dict[str, Any], us: int, meta: Any) -> list[Item]:
    """The read-out of one UltraServer from the floor query's columns."""
    if not d or us >= len(d.get("ultraserver_id", ())):
        return []
    g = {k: float(v[us]) for k, v in d.items() if k in ("power_w", "chips_busy", "chips_failed", "activity",
                                                         "max_chip_temp_c", "coolant_return_c", "clock")}
    cpu = meta.chips_per_us
    hot = g["max_chip_temp_c"] >= meta.throttle_c
    tripped = d.get("tripped")
    state = int(us_states(d["chips_failed"][us : us + 1], None if tripped is None else tripped[us : us + 1], cpu)[0])
    return [
        (f"UltraServer {us} · row {meta.us_row[us]} · {cpu} chips", "", None, "head"),
        ("state", US_STATE_SHORT[state], None, "warn" if state in (US_DOWN, US_TRIPPED) else ""),
        ("power", fmt.power(g["power_w"]), g["power_w"] / meta.us_power_w if meta.us_power_w else None, ""),
        ("busy chips", f"{g['chips_busy']:,.0f} / {cpu}", g["chips_busy"] / cpu, ""),
        ("activity", fmt.pct(g["activity"], 0), g["activity"], ""),
        ("hottest chip", fmt.temp(g["max_chip_temp_c"]), None, "warn" if hot else ""),
        ("loop return", fmt.temp(g["coolant_return_c"]), None, ""),
        ("clock", fmt.pct(g["clock"], 0), g["clock"], "warn" if g["clock"] < 0.999 else ""),
        ("failed chips", fmt.count(g["chips_failed"]), None, "warn" if g["chips_failed"] else ""),
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
        Binding("enter", "drill", "Open", key_display="⏎", tooltip="Open the selected UltraServer"),
        Binding("m", "app.metric", "Metric", tooltip="Colour by the next metric"),
    ]

    def compose_body(self) -> Iterable[Widget]:
        meta = self.twin.meta
        with Horizontal(id="floor-body"):
            with Vertical(id="floor-map", classes="panel"):
                yield Legend(floor=True, id="legend")
                yield FloorMap(meta, id="map")
            with Horizontal(id="floor-lower"):
                d = InfoList(id="us-detail", classes="panel")
                d.border_title = "Selected"
                yield d
                rows = ArrowTable(formatters=ROW_FORMATS, labels=ROW_LABELS, id="rows", classes="panel")
                rows.border_title = "Rows (one CDU each)"
                yield rows

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(FloorMap).focus()

    def panel_requests(self) -> list[PanelReq]:
        p = self.twin.params()
        return [PanelReq("map", "floor", p), PanelReq("rows", "rows", p)]

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        app = self.twin
        if panel == "map":
            m = metric(app.metric)
            lo, hi = m.floor_range(app.meta)
            self.query_one(Legend).show(m, lo, hi)
            fm = self.query_one(FloorMap)
            fm.show(cols, m, app.sel_us)
            self.query_one("#floor-map").border_title = f"Floor · {app.meta.ultraservers} UltraServers · {m.label}"
            self.query_one("#us-detail", InfoList).show(us_items(cols, app.sel_us, app.meta))
            self._floor = cols
        elif panel == "rows":
            self.query_one("#rows", ArrowTable).set_table({k: np.asarray(v) for k, v in cols.items()})

    def redraw_selection(self) -> None:
        d = getattr(self, "_floor", None)
        if d is not None:
            self.show_panel("map", d)

    def action_move(self, dx: int, dy: int) -> None:
        app = self.twin
        app.select_us(self.query_one(FloorMap).row_neighbours(app.sel_us, dx, dy))
        self.redraw_selection()

    def action_drill(self) -> None:
        self.twin.switch_mode("ultraserver")

    def on_floor_map_picked(self, event: FloorMap.Picked) -> None:
        self.twin.select_us(event.us)
        self.redraw_selection()
        if event.open:
            self.action_drill()
