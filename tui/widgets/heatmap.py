"""Colour maps of the site: the campus (one line per hall), the Floor (one cell per UltraServer, by
row/CDU), and the legend of the colour scale with its styles and value labels (the chips of one
UltraServer, drawn with the same scale, are ``tui.widgets.chipgrid``).

Colour levels are computed for all cells at once (``tui.console.scale.levels``); drawing loops over the
cells on screen (at most a few hundred), never over the chips of the hall.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import Click
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from tui.console import fmt
from tui.console.scale import (
    DOWN,
    MISSING,
    TRIPPED,
    US_DOWN,
    US_SOME_FAILED,
    US_TRIPPED,
    Metric,
    levels,
    text_colour,
    us_states,
)

Cols = dict[str, Any]


def short_value(m: Metric, v: float) -> str:
    """At most 4 characters: '87%', '520' (W), '1.2k', '187k', '64°', '3✗'."""
    if not np.isfinite(v):
        return "–"
    if m.key in ("activity", "clock"):
        return f"{100 * v:.0f}%"
    if m.key == "power":
        # Two significant digits at least: a chip draws hundreds of watts, an UltraServer ~100 kW
        # (thresholds on the rounded value, so 9,990 W is '10k', not the five characters '10.0k').
        for scale, unit in ((1.0, ""), (1e3, "k"), (1e6, "M")):
            x = v / scale
            if x < 9.95 and unit:
                return f"{x:.1f}{unit}"
            if x < 999.5:
                return f"{x:.0f}{unit}"
        return f"{v / 1e9:.1f}G"
    if m.key == "temp":
        return f"{v:.0f}°"
    return f"{v:.0f}" if v else "0"


def level_styles(m: Metric) -> list[Style]:
    """The style of each colour level of ``m``'s scale, then the style of a missing value."""
    cols = m.colours()
    return [Style(bgcolor=c, color=text_colour(c)) for c in cols] + [Style(bgcolor=MISSING, color="#ffffff")]


TRIPPED_STYLE = Style(bgcolor=TRIPPED, color="#ffffff", bold=True)
DOWN_STYLE = Style(bgcolor=DOWN, color="#ff5f5f", bold=True)
# Mark and text in place of the value of an UltraServer in each state (none: the metric's value).
_STATE_MARK = {US_SOME_FAILED: ("✗", None), US_DOWN: ("✗", "down"), US_TRIPPED: ("↯", "trip")}


class Legend(Widget):
    """'Activity  0 % ████████ 100 %   ✗ failed chips   ▒ no data': the colour scale and the marks
    the map beside it draws (``marks``: none on the campus level, one line per hall)."""

    DEFAULT_CSS = """
    Legend { height: 1; text-wrap: nowrap; text-overflow: ellipsis; color: $text-muted; }
    """

    def __init__(self, *, floor: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.floor = floor  # the Floor's legend also names the UltraServer states
        self.metric: Metric | None = None
        self.lo = self.hi = 0.0
        self.note = ""
        self.marks = True

    def show(self, m: Metric, lo: float, hi: float, note: str = "", marks: bool = True) -> None:
        if (m, lo, hi, note, marks) != (self.metric, self.lo, self.hi, self.note, self.marks):
            self.metric, self.lo, self.hi, self.note, self.marks = m, lo, hi, note, marks
            self.refresh()

    def render(self) -> Text:
        m = self.metric
        text = Text(no_wrap=True, overflow="ellipsis")
        if m is None:
            return text
        text.append(f"{m.label} ", style="bold")
        text.append(f"{m.fmt(self.lo)} ")
        for c in m.colours():
            text.append("██", style=Style(color=c))
        text.append(f" {m.fmt(self.hi)}")
        if self.marks:
            text.append("   ✗ failed chips   ")
            if self.floor:
                text.append("↯", style=TRIPPED_STYLE)
                text.append(" tripped   ")
                text.append("✗", style=DOWN_STYLE)
                text.append(" down   ")
            text.append("  ", style=Style(bgcolor=MISSING))
            text.append(" no data")
        if self.note:
            text.append(f"   {self.note}")
        return text


Spans = list[list[tuple[str, Style | None]]]


class _LineMap(Widget):
    """A map drawn as lines of styled spans (Line API), built once per data, metric, selection and
    size; ``top`` is the first line on screen. Subclasses give the lines (``_spans``) and may
    scroll after a build (``_scrolled``)."""

    SCROLLS_LINES = True  # render_line offsets by ``top`` (False: ``_spans`` draws from ``top``)

    def __init__(self, meta: Any, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.meta = meta
        self.data: Cols = {}
        self.metric: Metric | None = None
        self.selected = 0
        self.top = 0
        self.draw_count = 0
        self._key: tuple[Any, ...] | None = None
        self._strips: list[Strip] = []

    def _spans(self, width: int, height: int) -> Spans:
        raise NotImplementedError

    def _scrolled(self, height: int) -> None:
        """After a build: move ``top`` if the selection left the screen."""

    def _build(self) -> None:
        width, height = self.size
        key = (id(self.data), self.metric, self.selected, width, height)
        if key == self._key:
            return
        self._key = key
        self.draw_count += 1
        base = self.rich_style
        self._strips = [
            Strip([Segment(t, base + st if st is not None else base) for t, st in line])
            .crop(0, width)
            .extend_cell_length(width, base)
            for line in self._spans(width, height)
        ]
        self._scrolled(height)

    def render_line(self, y: int) -> Strip:
        self._build()
        if self.SCROLLS_LINES:
            y += self.top
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)

    def plain_text(self) -> str:
        self._build()
        return "\n".join(strip.text for strip in self._strips)


def _cell_text(us: int, iw: int, mark: str, value: str, nf: float, su: int, ch: int, cw: int) -> list[str]:
    """An UltraServer cell's text lines (``ch`` high, ``cw`` wide): its number and state mark,
    the failed chips when some failed and there is room, and its value."""
    if ch >= 2:
        return [
            f"{us:>{iw}}{mark}" + (f"{nf:.0f}" if su == US_SOME_FAILED and cw >= iw + 5 else ""),
            " " * iw + value,
        ]
    if cw >= iw + 6:
        return [f"{us:>{iw}}{mark}{value:>4}"]
    return [f"{us:>{iw}}{mark}"]


class FloorMap(_LineMap, can_focus=True):
    """Every UltraServer as a coloured cell, one line per row (CDU). The selected one is framed."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"floor--label", "floor--summary", "floor--selected"}
    DEFAULT_CSS = """
    FloorMap { height: auto; text-wrap: nowrap; text-overflow: clip; }
    FloorMap > .floor--label { color: $text-muted; }
    FloorMap > .floor--summary { color: $text-muted; }
    FloorMap > .floor--selected { text-style: bold reverse; }
    """

    class Picked(Message):
        def __init__(self, us: int, open_: bool) -> None:
            super().__init__()
            self.us = us
            self.open = open_

    def __init__(self, meta: Any, *, id: str | None = None) -> None:
        super().__init__(meta, id=id)  # top: a hall larger than the screen scrolls to the selection
        self._cells: list[tuple[int, int, int, int]] = []  # (y, x0, x1, us)
        # Width of an UltraServer's number, a space before it (the selection's bracket goes there).
        self.id_w = max(3, len(str(max(0, meta.ultraservers - 1))) + 1)
        self.set_span(0, meta.ultraservers - 1)

    def set_span(self, lo: int, hi: int) -> None:
        """Map UltraServers ``lo``..``hi`` only (one hall of a campus); the data then holds those."""
        self.base = lo  # UltraServer of the data's first row
        rows = np.asarray(self.meta.us_row[lo : hi + 1], dtype=np.int64)
        self.row_ids: list[int] = np.unique(rows).tolist()
        self.by_row: list[list[int]] = [(np.flatnonzero(rows == r) + lo).tolist() for r in self.row_ids]
        self._row_pos = {r: k for k, r in enumerate(self.row_ids)}
        self._key = None
        self.refresh()

    @property
    def span_len(self) -> int:
        """UltraServers on the map."""
        return sum(len(r) for r in self.by_row)

    def show(self, data: Cols, m: Metric, selected: int) -> None:
        moved_only = data is self.data and m is self.metric and selected != self.selected
        old = self.selected
        self.data, self.metric, self.selected = data, m, selected
        top = self.top
        if moved_only and self._cells:
            self._build()
        if moved_only and self._cells and self.top == top:
            # Repaint only the lines of the two cells (Line API: the rest of the map is untouched).
            width = self.size.width
            for y in sorted({y for y, _, _, us in self._cells if us in (old, selected)}):
                self.refresh(Region(0, y - top, width, 1))
        else:
            self.refresh()

    def _layout(self, width: int, height: int) -> tuple[int, int, int, int, int]:
        """(label width, cell width, cells per line, cell height, gap lines between rows)."""
        label = len(f"R{self.meta.rows - 1}") + 1
        widest = max((len(r) for r in self.by_row), default=1)
        cw = max(self.id_w + 1, min(20, (width - label) // max(1, widest)))
        per_line = max(1, (width - label) // cw)
        lines = sum(max(1, -(-len(r) // per_line)) for r in self.by_row)
        rows = len(self.by_row)
        ch = max(1, min(5, (height - (rows - 1)) // max(1, lines)))
        gap = 1 if height >= lines * ch + rows - 1 else 0
        return label, cw, per_line, ch, gap

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        """Compact height (one line per row of cells, a gap between rows); CSS may give more."""
        _, _, per_line, _, _ = self._layout(width, 0)
        lines = sum(max(1, -(-len(r) // per_line)) for r in self.by_row)
        return lines + len(self.by_row) - 1

    def row_neighbours(self, us: int, dx: int, dy: int) -> int:
        """The UltraServer dx cells right and dy rows down of ``us`` (clamped)."""
        r = self._row_pos.get(self.meta.us_row[us])
        if r is None:  # not on this map: its first UltraServer
            return self.base
        members = self.by_row[r]
        i = members.index(us)
        if dy:
            r2 = min(max(0, r + dy), len(self.by_row) - 1)
            target = self.by_row[r2]
            return int(target[min(i, len(target) - 1)]) if target else us
        return int(members[min(max(0, i + dx), len(members) - 1)])

    def _spans(self, width: int, height: int) -> Spans:
        """The map as lines of (text, style) runs; records each cell's place for clicks."""
        m = self.metric
        d = self.data
        self._cells = []
        if m is None or not d or m.floor_col not in d:
            return [[("waiting for data…", self.get_component_rich_style("floor--label"))]]
        vals = np.asarray(d[m.floor_col], dtype=np.float64)
        lo, hi = m.floor_range(self.meta)
        lv = levels(vals, lo, hi)
        styles = level_styles(m)
        failed = np.asarray(d.get("chips_failed", np.zeros(len(vals))), dtype=np.float64)
        state = us_states(failed, d.get("tripped"), self.meta.chips_per_us)
        state_style = {US_DOWN: DOWN_STYLE, US_TRIPPED: TRIPPED_STYLE}
        label_w, cw, per_line, ch, gap = self._layout(width, height)
        lab = self.get_component_rich_style("floor--label")
        sel_style = self.get_component_rich_style("floor--selected")
        lines: list[list[tuple[str, Style | None]]] = []
        base, iw = self.base, self.id_w
        for r, members in enumerate(self.by_row):
            if r and gap:
                lines.append([])
            for start in range(0, max(1, len(members)), per_line):
                block: list[list[tuple[str, Style | None]]] = [[] for _ in range(ch)]
                y0 = len(lines)
                for k, line in enumerate(block):
                    line.append(
                        ((f"R{self.row_ids[r]}" if start == 0 and k == 0 else "").ljust(label_w), lab)
                    )
                x = label_w
                for us in members[start : start + per_line]:
                    j = us - base  # its row in the data
                    v = vals[j] if j < len(vals) else np.nan
                    nf = failed[j] if j < len(failed) else 0
                    su = int(state[j]) if j < len(state) else 0
                    mark, word = _STATE_MARK.get(su, (" ", None))
                    body = _cell_text(us, iw, mark, word or short_value(m, v), nf, su, ch, cw)
                    st = state_style.get(su) or styles[int(lv[j]) if j < len(lv) else -1]
                    for k, line in enumerate(block):
                        cell = (body[k] if k < len(body) else "")[: cw - 1].ljust(cw - 1)
                        if us == self.selected:
                            line.append(("[" if k == 0 else " ", sel_style if k == 0 else st))
                            line.append((cell[1:], st + Style(bold=True, underline=k == 0)))
                            line.append(("]" if k == 0 else " ", sel_style if k == 0 else None))
                        else:
                            line.append((cell, st))
                            line.append((" ", None))
                    for k in range(ch):
                        self._cells.append((y0 + k, x, x + cw, us))
                    x += cw
                lines.extend(block)
        return lines

    def _scrolled(self, height: int) -> None:
        # Scroll so that the selected cell is on screen (a map taller than the widget).
        ys = [y for y, _, _, us in self._cells if us == self.selected]
        if ys and height > 0:
            if min(ys) < self.top:
                self.top = min(ys) - (1 if min(ys) > 0 and height > 2 else 0)  # with the gap line above
            elif max(ys) >= self.top + height:
                self.top = max(ys) - height + 1
        self.top = max(0, min(self.top, len(self._strips) - height))

    def on_click(self, event: Click) -> None:
        for y, x0, x1, us in self._cells:
            if event.y + self.top == y and x0 <= event.x < x1:
                self.post_message(self.Picked(us, event.chain >= 2))
                return


def hall_values(d: Cols, m: Metric) -> npt.NDArray[np.float64]:
    """Each hall's value of metric ``m`` on the UltraServer scale: totals (power, failed chips) per
    UltraServer of the hall, the others (means, the hottest chip) as they are."""
    vals = np.asarray(d[m.floor_col], dtype=np.float64)
    if m.key in ("power", "failed"):
        n = np.asarray(d["ultraservers"], dtype=np.float64)
        vals = np.divide(vals, n, out=np.full(len(vals), np.nan), where=n > 0)
    return vals


def _hall_value(m: Metric, v: float) -> str:
    """A hall's total or mean, at most 5 characters."""
    if m.key == "power" and np.isfinite(v):
        return f"{v / 1e6:.1f}M" if v < 1e9 else f"{v / 1e9:.2f}G"
    return short_value(m, v)


# The campus level's columns after the coloured hall cell: (header, width, value of a hall's row).
_HALL_FIGURES: tuple[tuple[str, int, Any], ...] = (
    ("US", 5, lambda d, i: fmt.count(float(d["ultraservers"][i]))),
    ("IT power", 11, lambda d, i: fmt.power(float(d["power_w"][i]))),
    ("busy chips", 12, lambda d, i: fmt.count(float(d["chips_busy"][i]))),
    ("activity", 10, lambda d, i: fmt.pct(float(d["activity"][i]), 0)),
    ("hottest", 9, lambda d, i: fmt.temp(float(d["max_chip_temp_c"][i]))),
    ("tripped", 9, lambda d, i: fmt.count(float(d["tripped"][i]))),
    ("failed", 8, lambda d, i: fmt.count(float(d["chips_failed"][i]))),
)


class HallMap(_LineMap, can_focus=True):
    """The campus: one line per hall — a cell coloured by the chosen metric, then the hall's
    UltraServers, IT power, busy chips, activity, hottest chip, tripped UltraServers and failed
    chips. The selected hall is framed; the lines scroll to keep it in view."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"halls--label", "halls--selected", "halls--warn"}
    DEFAULT_CSS = """
    HallMap { height: 1fr; text-wrap: nowrap; text-overflow: clip; }
    HallMap > .halls--label { color: $text-muted; }
    HallMap > .halls--selected { text-style: bold reverse; }
    HallMap > .halls--warn { color: $error; text-style: bold; }
    """
    CELL_W = 12

    class Picked(Message):
        def __init__(self, hall: int, open_: bool) -> None:
            super().__init__()
            self.hall = hall
            self.open = open_

    SCROLLS_LINES = False  # top is the first hall on screen; _spans draws from it

    def __init__(self, meta: Any, *, id: str | None = None) -> None:
        super().__init__(meta, id=id)
        self._lines: dict[int, int] = {}  # screen line -> hall

    def show(self, data: Cols, m: Metric, selected: int) -> None:
        self.data, self.metric, self.selected = data, m, selected
        self.refresh()

    def _spans(self, width: int, height: int) -> Spans:
        m, d = self.metric, self.data
        lab = self.get_component_rich_style("halls--label")
        self._lines = {}
        if m is None or not d or m.floor_col not in d:
            return [[("waiting for data…", lab)]]
        n = len(d["hall_id"])
        lv = levels(hall_values(d, m), *m.floor_range(self.meta))
        styles = level_styles(m)
        warn = self.get_component_rich_style("halls--warn")
        sel_style = self.get_component_rich_style("halls--selected")
        cw = self.CELL_W
        header = "hall".ljust(cw) + "".join(h.rjust(w) for h, w, _ in _HALL_FIGURES)
        lines: list[list[tuple[str, Style | None]]] = [[(header, lab)]]
        shown = max(1, height - 1)
        self.top = min(max(0, self.top, self.selected - shown + 1), self.selected, max(0, n - shown))
        raw = np.asarray(d[m.floor_col], dtype=np.float64)
        for i in range(self.top, min(n, self.top + shown)):
            hall = int(d["hall_id"][i])
            st = styles[int(lv[i])]
            cell = f"H{hall:<3}{_hall_value(m, float(raw[i])):>5}"[: cw - 3].ljust(cw - 3)
            line: list[tuple[str, Style | None]] = []
            if i == self.selected:
                line += [
                    ("[", sel_style),
                    (cell, st + Style(bold=True, underline=True)),
                    ("]", sel_style),
                    (" ", None),
                ]
            else:
                line += [(" ", None), (cell, st), ("  ", None)]
            for h, w, f in _HALL_FIGURES:
                bad = (
                    h in ("tripped", "failed")
                    and float(d["tripped" if h == "tripped" else "chips_failed"][i]) > 0
                )
                line.append((f(d, i).rjust(w), warn if bad else None))
            self._lines[len(lines)] = i
            lines.append(line)
        if n > shown:
            lines[0].append((f"   {self.top + 1}-{min(n, self.top + shown)} of {n}", lab))
        return lines

    def on_click(self, event: Click) -> None:
        i = self._lines.get(event.y)
        if i is not None:
            self.post_message(self.Picked(int(self.data["hall_id"][i]), event.chain >= 2))
