"""The event log: the latest events, newest at the bottom, as many as fit."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from tui.console.fmt import short_clock

EventRow = tuple[int, str, str, str, str]  # time_s, kind, target, detail, source


def event_rows(cols: dict[str, Any]) -> list[EventRow]:
    """Rows of an events query (newest first) as tuples, oldest first."""
    if not cols or not len(cols.get("time_s", ())):
        return []
    rows = zip(
        cols["time_s"].tolist(),
        cols["kind"].tolist(),
        cols["target"].tolist(),
        cols["detail"].tolist(),
        cols["source"].tolist(),
        strict=True,
    )
    return [(int(t), str(k), str(g), str(d), str(s)) for t, k, g, d, s in rows][::-1]


def _target_order(target: str) -> tuple[str, int, str]:
    """``job:460`` before ``job:1031``: by kind, then by number, then as written."""
    kind, _, rest = target.partition(":")
    return (kind, int(rest), "") if rest.isdigit() else (kind, -1, rest)


class EventLog(Widget, can_focus=True):
    """Fed with the rows of an events query and the total count up to the time shown. A plain
    render (no scrollback): new rows never change the widget's size, so a busy log never forces a
    screen relayout. Consecutive rows of one kind in one step share a line
    ("job_interrupted ×7  job:3, job:9, …") so a cause is not scrolled away by its effects."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "event--time",
        "event--fail",
        "event--repair",
        "event--operator",
        "event--job",
        "event--other",
    }
    DEFAULT_CSS = """
    EventLog { text-wrap: nowrap; text-overflow: ellipsis; }
    EventLog > .event--time { color: $text-muted; }
    EventLog > .event--fail { color: $error; text-style: bold; }
    EventLog > .event--repair { color: $success; }
    EventLog > .event--operator { color: $warning; text-style: bold; }
    EventLog > .event--job { color: $text-muted; }
    EventLog > .event--other { color: $accent; }
    """

    def __init__(self, *, empty: str = "no events yet", id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[EventRow] = []
        self.total = 0
        self.empty = empty

    def show(self, cols: dict[str, Any] | None) -> None:
        rows = event_rows(cols or {})
        total = int(cols["total"][0]) if cols and "total" in cols and len(cols["total"]) else len(rows)
        if rows != self.rows or total != self.total:
            self.rows, self.total = rows, total
            self.refresh()

    def _style(self, kind: str, source: str) -> Style:
        if source == "operator":
            name = "operator"
        elif "fail" in kind or kind in ("job_interrupted", "job_preempted") or kind.startswith("thermal"):
            name = "fail"
        elif "repair" in kind or "restore" in kind or kind == "maintenance_end":
            name = "repair"
        elif kind.startswith("job_"):
            name = "job"
        else:
            name = "other"
        return self.get_component_rich_style(f"event--{name}")

    def render(self) -> Text:
        h = self.content_size.height
        groups: list[tuple[EventRow, list[str]]] = []
        for ev in self.rows:
            if groups and groups[-1][0][:2] == ev[:2]:
                groups[-1][1].append(ev[2])
            else:
                groups.append((ev, [ev[2]]))
        for _, targets in groups:  # one step's rows have no order of their own: show them by number
            targets.sort(key=_target_order)
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        time_style = self.get_component_rich_style("event--time")
        if not groups:
            text.append(self.empty, style=time_style)
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
