"""The chips of one UltraServer as a colour map (grouped by server, one cell per chip), and the
text about one chip. The colour scale and the value labels are the site maps' (``tui.widgets.heatmap``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from rich.text import Text
from textual.events import Click
from textual.message import Message
from textual.widget import Widget

from tui.console import fmt
from tui.console.scale import Metric, levels
from tui.widgets.heatmap import Cols, level_styles, short_value


class ChipGrid(Widget, can_focus=True):
    """The chips of one UltraServer, grouped by server (a gap between servers)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"chips--label", "chips--selected"}
    DEFAULT_CSS = """
    ChipGrid { height: auto; text-wrap: nowrap; text-overflow: clip; }
    ChipGrid > .chips--label { color: $text-muted; }
    ChipGrid > .chips--selected { text-style: bold reverse; }
    """

    class Picked(Message):
        def __init__(self, chip: int) -> None:
            super().__init__()
            self.chip = chip

    def __init__(self, meta: Any, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.meta = meta
        self.data: Cols = {}
        self.metric: Metric | None = None
        self.selected = 0
        self._cells: list[tuple[int, int, int, int]] = []
        self.draw_count = 0

    def show(self, data: Cols, m: Metric, selected: int) -> None:
        self.data, self.metric, self.selected = data, m, selected
        self.refresh(layout=False)

    def _layout(self, width: int) -> tuple[int, int, int]:
        """(label width, cell width, servers per line)."""
        cps = self.meta.chips_per_server
        servers = max(1, self.meta.servers_per_us)
        label = len(f"s{servers - 1}") + 1
        for cw in (5, 3, 2):
            spl = (width - label) // (cps * cw + 1)
            if spl >= min(servers, 6) or cw == 2:
                return label, cw, max(1, min(servers, spl))
        return label, 2, 1

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        _, _, spl = self._layout(width)
        return int(-(-max(1, self.meta.servers_per_us) // spl))

    def per_line(self) -> int:
        return int(self._layout(self.content_size.width)[2] * self.meta.chips_per_server)

    def render(self) -> Text:
        self.draw_count += 1
        width = self.content_size.width
        text = Text(no_wrap=True, overflow="crop", end="")
        m, d = self.metric, self.data
        self._cells = []
        lab = self.get_component_rich_style("chips--label")
        if m is None or not d:
            text.append("waiting for data…", style=lab)
            return text
        cpu, cps = self.meta.chips_per_us, self.meta.chips_per_server
        if not m.chip_col or m.chip_col not in d:
            vals = np.full(cpu, np.nan)
        else:
            vals = np.asarray(d[m.chip_col], dtype=np.float64)
        lo, hi = m.chip_range(self.meta)
        lv = levels(vals, lo, hi)
        failed = np.asarray(d.get("failed", np.zeros(cpu)), dtype=bool)
        styles = level_styles(m)
        sel_style = self.get_component_rich_style("chips--selected")
        label_w, cw, spl = self._layout(width)
        servers = max(1, self.meta.servers_per_us)
        for line, s0 in enumerate(range(0, servers, spl)):
            if line:
                text.append("\n")
            text.append(f"s{s0}".ljust(label_w), style=lab)
            x = label_w
            for s in range(s0, min(servers, s0 + spl)):
                for c in range(s * cps, (s + 1) * cps):
                    v = vals[c] if c < len(vals) else np.nan
                    mark = "✗" if c < len(failed) and failed[c] else ""
                    body = (mark or short_value(m, v)) if cw >= 3 else (mark or " ")
                    cell = body[:cw].center(cw)
                    st = styles[int(lv[c]) if c < len(lv) else -1]
                    if c == self.selected:
                        st = st + sel_style
                        if cw == 2 and not mark:
                            cell = "◆ "
                    text.append(cell, style=st)
                    self._cells.append((line, x, x + cw, c))
                    x += cw
                text.append(" ")
                x += 1
        return text

    def on_click(self, event: Click) -> None:
        for y, x0, x1, c in self._cells:
            if event.y == y and x0 <= event.x < x1:
                self.post_message(self.Picked(c))
                return


def chip_detail(d: Cols, i: int, meta: Any) -> str:
    """One line about chip ``i`` (local index) of the chips data."""
    if not d or i >= len(d.get("chip_id", ())):
        return ""
    chip = int(d["chip_id"][i])
    job = int(d["job_id"][i])
    parts = [
        f"chip {chip} (server {chip // meta.chips_per_server}, #{i})",
        "FAILED" if bool(d["failed"][i]) else ("idle" if job < 0 else f"job {job}"),
        f"util {fmt.pct(float(d['neuroncore_utilization'][i]), 0)}",
        fmt.power(float(d["chip_power_w"][i])),
        fmt.temp(float(d["t_junction_c"][i])),
    ]
    if "clock" in d:
        parts.append(f"clock {fmt.pct(float(d['clock'][i]), 0)}")
    return " · ".join(parts)
