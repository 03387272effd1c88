"""One-line hall strip: one glyph per UltraServer (bucketed when they do not fit).

Glyph height is the mean chip activity; red ✗ where chips have failed (a bucket of several
UltraServers: its activity glyph in red), warning colour where the hottest chip is at or above the
throttle temperature. Aggregation is vectorised (``np.bincount``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from rich.text import Text
from textual.widget import Widget

from tui.console import fmt
from tui.console.meta import Cols, Meta, sample_time

_LEVELS = " ▁▂▃▄▅▆▇█"


def glyph_cells(n: int, width: int, info_len: int) -> int:
    """Cells for the glyphs of ``n`` UltraServers on a line ``width`` wide ("Hall " first, the
    info after). One glyph each while they fit the line; past that (a campus) they are bucketed
    anyway, so the buckets leave the info its room (the sample's age is in it), down to 20."""
    if n <= 0:
        return 0
    line, free = width - 5, width - 5 - info_len
    return max(1, min(n, line) if n <= line or free < 20 else free)


def glyphs(us: Cols, room: int, throttle_c: float) -> list[tuple[str, str]]:
    """(glyph, kind) per cell: the height is the mean activity of the cell's UltraServers, kind
    "failed" where one has failed chips, "hot" where one is at the throttle temperature, else
    "ok". One UltraServer a cell: a failed one is drawn ✗. Several (a campus, bucketed): the
    activity glyph in the failed colour, so a strip with a failure in most buckets still shows
    its load."""
    n = len(us["activity"])
    b = (np.arange(n) * room) // n  # bucket of each UltraServer
    cnt = np.bincount(b, minlength=room)
    act = np.bincount(b, weights=us["activity"], minlength=room) / cnt
    failed = np.bincount(b, weights=us["chips_failed"], minlength=room) > 0
    hot = np.bincount(b, weights=us["max_chip_temp_c"] >= throttle_c, minlength=room) > 0
    lvl = np.clip(np.rint(act * (len(_LEVELS) - 2)).astype(int) + 1, 1, len(_LEVELS) - 1)
    out = []
    for i in range(room):
        kind = "failed" if failed[i] else ("hot" if hot[i] else "ok")
        out.append(("✗" if failed[i] and room == n else _LEVELS[lvl[i]], kind))
    return out


class HallStrip(Widget, can_focus=True):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "hall--label",
        "hall--ok",
        "hall--hot",
        "hall--failed",
        "hall--info",
    }
    DEFAULT_CSS = """
    HallStrip { text-wrap: nowrap; text-overflow: ellipsis; }
    HallStrip { height: 1; }
    HallStrip > .hall--label { color: $text-muted; }
    HallStrip > .hall--ok { color: $success; }
    HallStrip > .hall--hot { color: $warning; }
    HallStrip > .hall--failed { color: $error; text-style: bold; }
    HallStrip > .hall--info { color: $text-muted; }
    """

    def __init__(self, meta: Meta, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.meta = meta
        self.us: Cols = {}
        self.age = ""

    def show(self, us: Cols | None, shown_t: int | None = None) -> None:
        """``us``: the floor query's columns; ``shown_t``: the time on screen. Where the UltraServer
        tier is sampled every few steps (a campus) the info names the sample's age."""
        age = fmt.sample_age(sample_time(us), shown_t)
        if us is not self.us or age != self.age:
            self.us, self.age = us or {}, age
            self.refresh()

    def info(self) -> str:
        us = self.us
        if not us or not len(us.get("power_w", ())):
            return f"{self.meta.ultraservers:,} UltraServers"
        failed_us = int(np.count_nonzero(us["chips_failed"] > 0))
        hot = int(np.argmax(us["max_chip_temp_c"]))
        return (
            f"{self.meta.ultraservers:,} UltraServers · {failed_us:,} with failed chips · hottest "
            f"#{hot} {fmt.temp(float(us['max_chip_temp_c'][hot]))}" + (f" · {self.age}" if self.age else "")
        )

    def render(self) -> Text:
        w = self.content_size.width
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("Hall ", style=self.get_component_rich_style("hall--label"))
        info = "  " + self.info()
        us = self.us
        n = len(us.get("power_w", ()))
        room = glyph_cells(n, w, len(info))
        if n:
            styles = {k: self.get_component_rich_style(f"hall--{k}") for k in ("ok", "hot", "failed")}
            for ch, kind in glyphs(us, room, self.meta.throttle_c):
                text.append(ch, style=styles[kind])
        text.append(info, style=self.get_component_rich_style("hall--info"))
        return text
