"""Alarms: the conditions active at the time shown — UltraServers tripped by thermal protection, a
row's CDU pumps lost, chillers or cooling towers lost, the plant short of capacity, a power cap,
throttling, failed hardware, an SLO breach, a batch job waiting too long — with since when and for
how long (``storage.queries.ALARM_FLAGS``: the same definition live, in a replay and in the
report); Enter (or a) acknowledges one, A all. The status line counts the alarms not acknowledged
on every screen."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.widget import Widget

from tui.console import fmt
from tui.console.alarms import Alarm
from tui.console.feed import PanelReq
from tui.screens.base import TwinScreen
from tui.widgets.arrowtable import ArrowTable

LABELS = {"alarm": "alarm", "target": "where", "since": "since", "for": "for", "value": "now", "ack": "ack"}


def value_text(a: Alarm) -> str:
    v = a.value
    if a.alarm == "throttling":
        return f"{v:,.0f} chips"
    if a.alarm == "failed hardware":
        return f"{v:,.0f} chips"
    if a.alarm in ("power cap", "plant short of capacity"):
        return fmt.power(v)
    if a.alarm == "SLO breach":
        return f"{fmt.pct(v, 1)} in SLO"
    if a.alarm == "thermal trip":
        return f"{v:,.0f} UltraServers off"
    if a.alarm == "CDU pumps lost":
        return f"flow {fmt.pct(v, 0)}"
    if a.alarm == "chiller loss":
        return f"{v:,.0f} chillers failed"
    if a.alarm == "cooling tower loss":
        return f"{v:,.0f} units lost"
    if a.alarm == "queue wait":
        return f"waiting {fmt.span(v)}"
    return f"{v:g}"


class AlarmsScreen(TwinScreen):
    MODE = "alarms"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "ack", "Acknowledge", tooltip="Acknowledge the selected alarm (also Enter)"),
        Binding("A", "ack_all", "All", key_display="A", tooltip="Acknowledge every alarm shown"),
    ]

    def compose_body(self) -> Iterable[Widget]:
        t = ArrowTable(labels=LABELS, empty="no active alarms", id="alarms-table", classes="panel")
        t.border_title = "Alarms"
        yield t

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#alarms-table", ArrowTable).focus()

    def panel_requests(self) -> list[PanelReq]:
        return [PanelReq("alarms-table", "alarms", self.core.params())]

    def refresh_view(self, force: bool = False, panels: bool = True) -> None:
        super().refresh_view(force, panels)
        self._show()

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        self.core.alarms.show_panel(panel, cols)
        self._show()

    def _show(self) -> None:
        alarms = self.core.alarms
        t = self.query_one("#alarms-table", ArrowTable)
        now = self.core.t or 0
        rows = alarms.active
        t.set_table(
            {
                "alarm": [a.alarm for a in rows],
                "target": [a.target for a in rows],
                "since": [fmt.short_clock(a.since_s) for a in rows],
                "for": [fmt.span(max(0, now - a.since_s)) for a in rows],
                "value": [value_text(a) for a in rows],
                "ack": ["✓" if alarms.is_acked(a) else "" for a in rows],
            }
        )
        t.border_title = f"Alarms · {len(rows)} active, {alarms.unacked} not acknowledged"
        t.border_subtitle = "⏎/a acknowledge · A all"

    def _selected(self) -> Alarm | None:
        t = self.query_one("#alarms-table", ArrowTable)
        rows = self.core.alarms.active
        return rows[t.cursor_row] if 0 <= t.cursor_row < len(rows) else None

    def action_ack(self) -> None:
        a = self._selected()
        if a is not None:
            self.core.alarms.acknowledge(a)
            self._show()
            self.refresh_view()

    def action_ack_all(self) -> None:
        self.core.alarms.acknowledge_all()
        self._show()
        self.refresh_view()

    def on_arrow_table_selected(self, event: ArrowTable.Selected) -> None:
        self.action_ack()
