"""UltraServer: its chips as a grid coloured by the chosen metric (live: the simulation's arrays;
replay: the chip_ts sample nearest the time shown), the selected chip, the jobs placed on it, its
power and temperature history and its events. Arrow keys move between chips, n/p between
UltraServers, Esc goes back to the Floor."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from tui.console import fmt
from tui.console.feed import PanelReq
from tui.console.meta import sample_time
from tui.console.scale import US_DOWN, US_STATE_TEXT, US_TRIPPED, metric, us_states
from tui.screens.base import TwinScreen
from tui.widgets.arrowtable import ArrowTable
from tui.widgets.chipgrid import ChipGrid, chip_detail
from tui.widgets.heatmap import Legend
from tui.widgets.plot import BraillePlot
from tui.widgets.tables import EventLog

JOB_LABELS = {
    "job_id": "job",
    "kind": "kind",
    "model": "model",
    "chips": "chips",
    "chips_here": "here",
    "ultraservers": "UltraServers",
}


class UltraServerScreen(TwinScreen):
    MODE = "ultraserver"
    HAS_WINDOW = True
    ALIASES: ClassVar[dict[str, str]] = {"chip-detail": "chips", "plot-us-temp": "plot-us-power"}
    TABLES: ClassVar[frozenset[str]] = frozenset({"us-jobs", "us-events"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(-1)", "←", show=False, tooltip="Previous chip"),
        Binding("right", "move(1)", "→", show=False, tooltip="Next chip"),
        Binding("up", "move_line(-1)", "↑", show=False, tooltip="Chip one line up"),
        Binding("down", "move_line(1)", "↓", show=False, tooltip="Chip one line down"),
        Binding("escape,backspace", "back", "Floor", key_display="esc", tooltip="Back to the Floor"),
        Binding("n", "next_us(1)", "Next", tooltip="Next UltraServer"),
        Binding("p", "next_us(-1)", "Prev US", show=False, tooltip="Previous UltraServer"),
        Binding("m", "app.metric", "Metric", tooltip="Colour by the next metric"),
    ]

    def compose_body(self) -> Iterable[Widget]:
        meta = self.core.meta
        with Vertical(id="us-chips", classes="panel"):
            yield Legend(id="legend")
            yield ChipGrid(meta, id="chips")
            yield Static(id="chip-detail", markup=False)
        with Horizontal(id="us-plots"):
            p = BraillePlot(fmt.power, 86400, id="plot-us-power", classes="panel")
            p.border_title = "Power"
            yield p
            p = BraillePlot(lambda v: f"{v:.0f}°C", 86400, id="plot-us-temp", classes="panel")
            p.border_title = "Temp  [$accent]━ max chip[/]  [$success]━ loop return[/]"
            yield p
        with Horizontal(id="us-lower"):
            t = ArrowTable(labels=JOB_LABELS, empty="no jobs on it", id="us-jobs", classes="panel")
            t.border_title = "Jobs on it"
            yield t
            e = EventLog(id="us-events", empty="no events for it yet")
            e.add_class("panel")
            e.border_title = "Its events"
            yield e

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(ChipGrid).focus()

    def panel_requests(self) -> list[PanelReq]:
        core = self.core
        p = core.params(us=core.sel_us)
        # Its state: on a campus from its hall's UltraServers (the latest sample up to the time shown).
        state = (
            PanelReq(
                "us-state", "hall_floor", core.params(us=core.sel_us, hall=core.meta.hall_of(core.sel_us))
            )
            if core.meta.halls > 1
            else PanelReq("us-state", "floor", p)
        )
        return [
            PanelReq("chips", "chips", p),
            PanelReq("us-jobs", "us_jobs", p),
            PanelReq("plot-us-power", "us_history", p),
            PanelReq("us-events", "us_events", p),
            state,
        ]

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        core = self.core
        if panel == "chips":
            self._chips = cols
            self._draw_chips()
        elif panel == "us-jobs":
            self.query_one("#us-jobs", ArrowTable).set_table(cols)
        elif panel == "plot-us-power":
            t = cols["time_s"].astype(float)
            sub = f"last {fmt.window(core.window_s)}"
            p = self.query_one("#plot-us-power", BraillePlot)
            p.set_data(t, [cols["power_w"].astype(float)], core.t or 0, core.window_s)
            p.border_subtitle = sub
            p = self.query_one("#plot-us-temp", BraillePlot)
            p.set_data(
                t,
                [cols["max_chip_temp_c"].astype(float), cols["coolant_return_c"].astype(float)],
                core.t or 0,
                core.window_s,
            )
            p.border_subtitle = sub
        elif panel == "us-events":
            self.query_one("#us-events", EventLog).show(cols)
        elif panel == "us-state":
            self._state = cols
            self._draw_chips()

    def us_state(self) -> int | None:
        """The selected UltraServer's state (``tui.console.scale.us_states``) at the time shown; None unknown."""
        cols = getattr(self, "_state", None)
        if not cols:
            return None
        us = self.core.sel_us
        ids = cols.get("ultraserver_id", ())
        i = us - int(ids[0]) if len(ids) else -1  # its row (the data starts at its hall's first on a campus)
        if not 0 <= i < len(ids) or int(ids[i]) != us:
            return None
        tripped = cols.get("tripped")
        return int(
            us_states(
                cols["chips_failed"][i : i + 1],
                None if tripped is None else tripped[i : i + 1],
                self.core.meta.chips_per_us,
            )[0]
        )

    def _draw_chips(self) -> None:
        core = self.core
        cols = getattr(self, "_chips", None)
        m = metric(core.metric)
        lo, hi = m.chip_range(core.meta)
        note = ""
        if cols is not None and m.chip_col not in cols:
            note = "(not recorded per chip: chip_ts has no clock)"
        self.query_one(Legend).show(m, lo, hi, note)
        box = self.query_one("#us-chips")
        us = core.sel_us
        when = ""
        if cols is not None and len(cols.get("time_s", ())):
            ts = int(cols["time_s"][0])
            when = "live" if core.live is not None else f"chip sample at {fmt.short_clock(ts)}"
        elif core.replay is not None:
            when = "no chip sample"
        state = self.us_state()
        flag = {US_TRIPPED: " · [b $error]↯ TRIPPED[/]", US_DOWN: " · [b $error]✗ DOWN[/]"}.get(
            state or 0, ""
        )
        # On a campus the state comes from the UltraServer tier, sampled every few steps: say how old.
        age = fmt.sample_age(sample_time(getattr(self, "_state", None)), core.t) if flag else ""
        if age:
            flag += f" ({age})"
        hall = f"hall {core.meta.hall_of(us)} · " if core.meta.halls > 1 else ""
        box.border_title = (
            f"UltraServer {us} · {hall}row {core.meta.us_row[us]} · {core.meta.chips_per_us} chips"
            f"{flag} · {m.label}"
        )
        box.border_subtitle = when
        if cols is None:
            return
        self.query_one(ChipGrid).show(cols, m, core.sel_chip)
        detail = chip_detail(cols, core.sel_chip, core.meta) or " "
        if state in (US_TRIPPED, US_DOWN):
            detail = f"UltraServer {US_STATE_TEXT[state]} · {detail}"
        self.query_one("#chip-detail", Static).update(detail)

    def redraw_selection(self) -> None:
        self._draw_chips()

    def action_move(self, delta: int) -> None:
        core = self.core
        core.sel_chip = max(0, min(core.meta.chips_per_us - 1, core.sel_chip + delta))
        self._draw_chips()

    def action_move_line(self, delta: int) -> None:
        self.action_move(delta * self.query_one(ChipGrid).per_line())

    def action_back(self) -> None:
        self.app.switch_mode("floor")

    def action_next_us(self, delta: int) -> None:
        core = self.core
        core.select_us((core.sel_us + delta) % core.meta.ultraservers)
        self.refresh_view(force=True)

    def on_chip_grid_picked(self, event: ChipGrid.Picked) -> None:
        self.core.sel_chip = event.chip
        self._draw_chips()
