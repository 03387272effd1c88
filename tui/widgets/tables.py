"""The job queue table and the event log."""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable

from tui.feed import EventRow, QueueRow, Snapshot
from tui.widgets.status import short_clock


def wait_text(s: float) -> str:
    """Compact waiting time: '42 m', '9.5 h', '3.2 d' (at most 6 characters)."""
    if s < 3600:
        return f"{s / 60:.0f} m"
    if s < 86400 * 2:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d" if s < 86400 * 100 else f"{s / 86400:.0f} d"


class QueueTable(DataTable[object]):
    """Queued jobs: id, model, chips, wait. Not focusable, so arrow keys stay with the app."""

    can_focus = False

    def on_mount(self) -> None:
        self.cursor_type = "none"
        self.show_cursor = False
        self.zebra_stripes = True
        self.add_column("Job", key="job", width=5)
        self.add_column("Model", key="model", width=14)
        self.add_column("Chips", key="chips", width=5)
        self.add_column("Wait", key="wait", width=6)
        self.shown: list[QueueRow] = []

    def show(self, rows: list[QueueRow]) -> None:
        if rows == self.shown:
            return
        cells = [
            (str(j), name, Text(f"{chips:,}", justify="right"), Text(wait_text(wait), justify="right"))
            for j, name, chips, wait in rows
        ]
        if len(rows) == len(self.shown):
            # Same shape (the common case: waits grow): update cells in place, no relayout.
            for i, (new, old) in enumerate(zip(cells, self.shown, strict=True)):
                if new[0] != str(old[0]) or new[1] != old[1]:
                    self.update_cell(str(i), "job", new[0])
                    self.update_cell(str(i), "model", new[1])
                    self.update_cell(str(i), "chips", new[2])
                self.update_cell(str(i), "wait", new[3])
        else:
            self.clear()
            for i, row in enumerate(cells):
                self.add_row(*row, key=str(i))
        self.shown = list(rows)


class EventLog(Widget):
    """The latest events, newest at the bottom, as many as fit (at most ``cap`` are kept).

    Fed with the tail of the event list and the total count, so merged (dropped) ticks lose
    nothing and scrubbing back in a replay rebuilds the log. A plain render (no scrollback):
    appending never changes the widget's size, so a busy log never forces a screen relayout."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "event--time", "event--fail", "event--repair", "event--operator", "event--job", "event--other",
    }
    DEFAULT_CSS = """
    EventLog { text-wrap: nowrap; text-overflow: clip; }
    EventLog > .event--time { color: $text-muted; }
    EventLog > .event--fail { color: $error; text-style: bold; }
    EventLog > .event--repair { color: $success; }
    EventLog > .event--operator { color: $warning; text-style: bold; }
    EventLog > .event--job { color: $text-muted; }
    EventLog > .event--other { color: $accent; }
    """

    def __init__(self, cap: int = 200, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cap = cap
        self.rows: list[EventRow] = []
        self.total = 0
        self.notable_only = True  # hide routine job_start / job_end rows

    def title(self) -> str:
        return "Events · notable (e: all)" if self.notable_only else "Events · all (e: notable)"

    def set_notable_only(self, on: bool, snap: Snapshot | None) -> None:
        self.notable_only = on
        self.rows, self.total = [], 0
        self.border_title = self.title()
        if snap is not None:
            self.show_snapshot(snap)
        else:
            self.refresh()

    def show_snapshot(self, snap: Snapshot) -> None:
        if self.notable_only:
            self.show(snap.notable, snap.notable_total)
        else:
            self.show(snap.events, snap.events_total)

    def _style(self, kind: str, source: str) -> Style:
        if source == "operator":
            name = "operator"
        elif "fail" in kind or kind == "job_interrupted":
            name = "fail"
        elif "repair" in kind:
            name = "repair"
        elif kind.startswith("job_"):
            name = "job"
        else:
            name = "other"
        return self.get_component_rich_style(f"event--{name}")

    def show(self, tail: list[EventRow], total: int) -> None:
        new = total - self.total
        if new == 0:
            return
        if 0 < new <= len(tail) and self.rows:
            self.rows = (self.rows + tail[len(tail) - new :])[-self.cap :]
        else:
            self.rows = list(tail[-self.cap :])
        self.total = total
        self.refresh()

    def render(self) -> Text:
        """The last rows that fit; consecutive rows of one kind in one step share a line
        ("job_interrupted ×7  job:3, job:9, …") so a cause is not scrolled away by its effects."""
        h = self.content_size.height
        groups: list[tuple[EventRow, list[str]]] = []
        for ev in self.rows:
            if groups and groups[-1][0][:2] == ev[:2]:
                groups[-1][1].append(ev[2])
            else:
                groups.append((ev, [ev[2]]))
        text = Text(no_wrap=True, overflow="crop", end="")
        time_style = self.get_component_rich_style("event--time")
        if not groups:
            hint = "no failures, repairs or operator events yet" if self.notable_only else "no events yet"
            text.append(hint, style=time_style)
        for i, ((t, kind, target, detail, source), targets) in enumerate(groups[-h:] if h > 0 else []):
            if i:
                text.append("\n")
            text.append(short_clock(t) + " ", style=time_style)
            text.append(kind, style=self._style(kind, source))
            if len(targets) == 1:
                text.append(f" {target}  {detail}")
            else:
                text.append(f" ×{len(targets)}  {', '.join(targets)}")
        return text

    def plain_lines(self) -> list[str]:
        return [f"{short_clock(e[0])} {e[1]} {e[2]}  {e[3]}" for e in self.rows]
