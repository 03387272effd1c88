"""The status line (mode, sim clock, speed, scenario, file), the screen tabs and the replay scrubber."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from tui.console import fmt
from tui.console.fmt import short_clock
from tui.console.status import Status

# The screens (Textual modes): key, mode name, tab label.
SCREENS: tuple[tuple[str, str, str], ...] = (
    ("f1", "overview", "Overview"),
    ("f2", "floor", "Floor"),
    ("f3", "ultraserver", "UltraServer"),
    ("f4", "jobs", "Jobs"),
    ("f5", "energy", "Energy & cost"),
    ("f6", "sql", "SQL"),
    ("f7", "services", "Services"),
    ("f8", "alarms", "Alarms"),
    ("f9", "grid", "Grid"),
)


class StatusBar(Static):
    """One line; the file path is last so it is the part cut at narrow widths."""

    DEFAULT_CSS = """
    StatusBar { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.status: Status | None = None
        self.plain = ""

    def show(self, st: Status) -> None:
        if st == self.status:
            return
        self.status = st
        clock = fmt.sim_clock(st.t_s) if st.t_s is not None else "starting…"
        parts: list[str | tuple[str, str]] = [
            (f" {st.mode} ", "bold reverse $accent"),
            " ",
            (clock, "bold"),
        ]
        if st.position:
            parts += [(f" · {st.position}", "$text-muted")]
        if st.alarms:
            style = "bold reverse $error" if st.unacked else "$text-muted"
            parts += [" ", (f" ⚠ {st.unacked or st.alarms} ", style)]
        parts += [" │ "]
        if st.paused:
            parts += [(" PAUSED ", "bold reverse $warning"), (f" ␣ {st.resume}", "$text-muted")]
        else:
            parts += [(st.speed, "bold")]
        parts += [" │ ", st.scenario, " │ ", (st.path, "$text-muted")]
        content = Content.assemble(*parts)
        self.plain = content.plain
        self.update(content, layout=False)  # one fixed line: no relayout


class Scrubber(Widget):
    """Replay position over the run: ━━━━●──── with the start and end times at the sides."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "scrubber--done",
        "scrubber--todo",
        "scrubber--knob",
        "scrubber--label",
    }
    DEFAULT_CSS = """
    Scrubber { height: 1; text-wrap: nowrap; text-overflow: clip; }
    Scrubber > .scrubber--done { color: $accent; }
    Scrubber > .scrubber--todo { color: $panel-lighten-2; }
    Scrubber > .scrubber--knob { color: $accent; text-style: bold; }
    Scrubber > .scrubber--label { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.t0 = self.t1 = self.t = 0

    def show(self, t0: int, t1: int, t: int) -> None:
        if (t0, t1, t) != (self.t0, self.t1, self.t):
            self.t0, self.t1, self.t = t0, t1, t
            self.refresh()

    def render(self) -> Text:
        w = self.content_size.width
        left, right = short_clock(self.t0), short_clock(self.t1)
        bar_w = w - len(left) - len(right) - 2
        label = self.get_component_rich_style("scrubber--label")
        if bar_w < 3:
            left = right = ""
            bar_w = max(1, w)
        frac = (self.t - self.t0) / (self.t1 - self.t0) if self.t1 > self.t0 else 1.0
        knob = min(bar_w - 1, max(0, round(frac * (bar_w - 1))))
        text = Text(no_wrap=True, overflow="crop")
        if left:
            text.append(left + " ", style=label)
        text.append("━" * knob, style=self.get_component_rich_style("scrubber--done"))
        text.append("●", style=self.get_component_rich_style("scrubber--knob"))
        text.append("─" * (bar_w - knob - 1), style=self.get_component_rich_style("scrubber--todo"))
        if right:
            text.append(" " + right, style=label)
        return text


class ModeTabs(Widget):
    """The screens and their keys, the current one highlighted: ' F1 Overview │ F2 Floor │ …'."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"tabs--key", "tabs--current", "tabs--other"}
    DEFAULT_CSS = """
    ModeTabs { height: 1; text-wrap: nowrap; text-overflow: ellipsis; background: $panel; }
    ModeTabs > .tabs--key { color: $accent; text-style: bold; }
    ModeTabs > .tabs--current { color: $foreground; background: $primary-muted; text-style: bold; }
    ModeTabs > .tabs--other { color: $text-muted; }
    """

    def __init__(self, current: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.current = current
        self.extra: dict[str, str] = {}
        self._spans: list[tuple[int, int, str]] = []

    def show(self, extra: dict[str, str]) -> None:
        if extra != self.extra:
            self.extra = dict(extra)
            self.refresh()

    def render(self) -> Text:
        full = sum(len(f" {k.upper()} {lb} ") + 1 for k, _, lb in SCREENS) + sum(
            len(v) + 1 for v in self.extra.values()
        )
        short = full > self.content_size.width  # narrow: other screens by their first letters
        text = Text(no_wrap=True, overflow="ellipsis")
        self._spans = []
        key_style = self.get_component_rich_style("tabs--key")
        for i, (key, mode, label) in enumerate(SCREENS):
            if short and mode != self.current:
                label = label[:3]
            if i:
                text.append("│", style=self.get_component_rich_style("tabs--other"))
            x0 = text.cell_len
            style = self.get_component_rich_style("tabs--current" if mode == self.current else "tabs--other")
            text.append(f" {key.upper()}", style=key_style + style if mode == self.current else key_style)
            name = label + (f" {self.extra[mode]}" if self.extra.get(mode) else "")
            text.append(f" {name} ", style=style)
            self._spans.append((x0, text.cell_len, mode))
        return text

    def on_click(self, event: events.Click) -> None:
        for x0, x1, mode in self._spans:
            if x0 <= event.x < x1:
                self.app.switch_mode(mode)
                return
