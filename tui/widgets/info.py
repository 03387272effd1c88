"""Small read-outs: labelled values, optionally with a bar (the power chain, the cooling plant,
one UltraServer)."""

from __future__ import annotations

import math
from typing import ClassVar

from rich.text import Text
from textual.widget import Widget


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells, ending with "…" when cut."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


# (label, value text, bar fraction 0..1 or None, style: "" | "loss" | "warn" | "head")
Item = tuple[str, str, float | None, str]


class InfoList(Widget, can_focus=True):
    """Lines of 'label ....... value ▇▇▇▇' with optional bars; redrawn only when items change."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "info--label",
        "info--value",
        "info--bar",
        "info--loss",
        "info--warn",
        "info--head",
    }
    DEFAULT_CSS = """
    InfoList { text-wrap: nowrap; text-overflow: clip; height: auto; }
    InfoList > .info--label { color: $text-muted; }
    InfoList > .info--value { color: $foreground; text-style: bold; }
    InfoList > .info--bar { color: $accent; }
    InfoList > .info--loss { color: $warning; }
    InfoList > .info--warn { color: $error; text-style: bold; }
    InfoList > .info--head { color: $foreground; text-style: bold underline; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.items: list[Item] = []

    def show(self, items: list[Item]) -> None:
        if items != self.items:
            relayout = len(items) != len(self.items)  # same height: repaint only
            self.items = list(items)
            self.refresh(layout=relayout)

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return max(1, len(self.items))

    def render(self) -> Text:
        w = self.content_size.width
        text = Text(no_wrap=True, overflow="crop", end="")
        if not self.items:
            text.append("waiting for data…", style=self.get_component_rich_style("info--label"))
            return text
        vw = max(len(i[1]) for i in self.items)
        lw = min(max(len(i[0]) for i in self.items if i[3] != "head"), max(8, w - vw - 1))
        bar_w = max(0, w - lw - vw - 3)
        for k, (label, value, frac, kind) in enumerate(self.items):
            if k:
                text.append("\n")
            if kind == "head":
                text.append(label[:w], style=self.get_component_rich_style("info--head"))
                continue
            text.append(fit(label, lw).ljust(lw) + " ", style=self.get_component_rich_style("info--label"))
            vstyle = self.get_component_rich_style(f"info--{kind}" if kind else "info--value")
            text.append(fit(value.rjust(vw), max(1, w - lw - 1)), style=vstyle)
            if frac is not None and bar_w >= 3 and math.isfinite(frac):
                cells = max(0.0, min(1.0, frac)) * bar_w
                full = int(cells)
                part = " ▏▎▍▌▋▊▉"[int((cells - full) * 8)] if full < bar_w else ""
                bar_style = self.get_component_rich_style("info--loss" if kind == "loss" else "info--bar")
                text.append(" " + "█" * full + part.strip(), style=bar_style)
        return text
